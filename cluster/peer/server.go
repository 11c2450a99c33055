package peer

import (
	"bufio"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/authfail"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

// Server is what a node does when a peer calls it: the cluster package's
// Node implements it. Handler has decoded the request's body, and r's
// context carries the actor ActorHeader names (store.ActorFrom); r is
// there for the audit log (NodeIDHeader, the caller's address and
// certificate). An error is answered as a Error, which the calling
// Client rebuilds as the same error.
type Server interface {
	// Stream serves a forward stream on conn, a connection Handler took
	// over from r (an upgrade to StreamProtocol) and has not answered:
	// the server answers it with AcceptStream once it takes the stream,
	// or closes it, and reads rw's buffered bytes before conn's. It
	// returns when the stream ends.
	Stream(r *http.Request, conn net.Conn, rw *bufio.ReadWriter)
	// ReadIndex is the leader's read index (ErrNotLeader on a node
	// that does not lead); its errors are answered 503.
	ReadIndex(r *http.Request) (uint64, error)
	// Join adds info to the cluster (or updates its addresses) and
	// returns the members; its errors are answered with StatusOf.
	Join(r *http.Request, info fsm.NodeInfo) ([]fsm.NodeInfo, error)
	// Remove removes member id; its errors are answered with StatusOf.
	Remove(r *http.Request, id string) error
	// State is the node's StateDigest; its errors are answered 500.
	State(r *http.Request) (StateDigest, error)
	// Silence answers a voter that found the leader silent with this
	// node's log position, after running Raft's check when check is set.
	Silence(r *http.Request, check bool) LogPosition
}

// Guard is who may call a node's peer endpoints: only cluster members,
// recognised by what they hold, never by their address.
type Guard struct {
	// ClusterKey, when not empty, must be carried by every call in
	// KeyHeader (compared in constant time).
	ClusterKey string
	// NodeTLS requires every call to come over mutual TLS under
	// tlsmux.NodeServerName with a certificate of the cluster CA that
	// carries the node role (the chain and the role are checked at the
	// handshake, by the listener's node TLS configuration; the role again
	// here).
	NodeTLS bool
	// Refusals logs refused callers (at a bounded rate); nil logs none.
	Refusals *nodeauth.Refusals
}

// Handler serves s's peer endpoints (mount it at Prefix), behind g.
//
// With both a key and node TLS, both are checked; with neither, every
// call is refused (the cluster package's Config.Validate makes sure a node
// has one). A wrong key (not a missing one) is reported to the request
// context's authfail reporter: the API server counts it against the
// caller's address, and answers 429 once it is over its failures.
//
// A member must then speak this node's protocol version (ProtocolHeader,
// nodeauth.ProtocolVersion): one that names another is refused with 403,
// logged through g.Refusals with both versions. Every call a node makes
// names it; only GET PathState may go without, since tools holding the
// cluster key read it too. Every answer names this node's version. A
// request body over MaxRequestBytes is refused.
func Handler(s Server, g Guard) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathStream, func(w http.ResponseWriter, r *http.Request) { serveStream(s, w, r) })
	mux.HandleFunc("POST "+PathSilence, func(w http.ResponseWriter, r *http.Request) {
		var req SilenceRequest
		if !decode(w, r, &req) {
			return
		}
		WriteJSON(w, http.StatusOK, s.Silence(r, req.Check))
	})
	mux.HandleFunc("POST "+PathReadIndex, func(w http.ResponseWriter, r *http.Request) {
		idx, err := s.ReadIndex(r)
		if err != nil {
			WriteError(w, http.StatusServiceUnavailable, ErrorOf(err))
			return
		}
		WriteJSON(w, http.StatusOK, IndexAnswer{Index: idx})
	})
	mux.HandleFunc("POST "+PathJoin, func(w http.ResponseWriter, r *http.Request) {
		var info fsm.NodeInfo
		if !decode(w, r, &info) {
			return
		}
		nodes, err := s.Join(r, info)
		if err != nil {
			WriteError(w, StatusOf(err), ErrorOf(err))
			return
		}
		WriteJSON(w, http.StatusOK, JoinAnswer{Nodes: nodes})
	})
	mux.HandleFunc("POST "+PathRemove, func(w http.ResponseWriter, r *http.Request) {
		var req RemoveRequest
		if !decode(w, r, &req) {
			return
		}
		if err := s.Remove(r, req.ID); err != nil {
			WriteError(w, StatusOf(err), ErrorOf(err))
			return
		}
		WriteJSON(w, http.StatusOK, struct{}{})
	})
	mux.HandleFunc("GET "+PathState, func(w http.ResponseWriter, r *http.Request) {
		d, err := s.State(r)
		if err != nil {
			WriteError(w, http.StatusInternalServerError, ErrorOf(err))
			return
		}
		WriteJSON(w, http.StatusOK, d)
	})
	return g.wrap(mux)
}

// decode reads r's JSON body into v, or answers 400 INVALID_REQUEST.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		WriteError(w, http.StatusBadRequest, Coded(store.CodeInvalidRequest, err.Error()))
		return false
	}
	return true
}

// wrap refuses callers that are not cluster members (see Handler), and
// hands next the others' requests with the actor in their context.
func (g Guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(ProtocolHeader, Protocol)
		if g.NodeTLS && (r.TLS == nil || r.TLS.ServerName != tlsmux.NodeServerName || len(r.TLS.PeerCertificates) == 0 ||
			!certs.HasNodeRole(r.TLS.PeerCertificates[0])) {
			g.refused("internal call without a node certificate", r, errors.New(r.Method+" "+r.URL.Path))
			WriteError(w, http.StatusForbidden, Coded(store.CodeForbidden, "the internal API needs mutual TLS with a node certificate of this cluster"))
			return
		}
		if g.ClusterKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(KeyHeader)), []byte(g.ClusterKey)) != 1 {
			g.refused("internal call without the cluster key", r, errors.New(r.Method+" "+r.URL.Path))
			if len(r.Header.Values(KeyHeader)) > 0 {
				// A key that is wrong is a guess (none at all is not):
				// the server in front counts it against the caller, and
				// answers 429 once the caller is over its failures.
				if authfail.Refuse(r.Context(), w) {
					return
				}
				authfail.Report(r.Context(), "wrong cluster key")
			}
			WriteError(w, http.StatusForbidden, Coded(store.CodeForbidden, "missing or wrong cluster key"))
			return
		}
		if !g.NodeTLS && g.ClusterKey == "" {
			// Never open, whatever the configuration.
			WriteError(w, http.StatusForbidden, Coded(store.CodeForbidden, "this node has neither a cluster key nor node TLS"))
			return
		}
		if v := r.Header.Get(ProtocolHeader); v != Protocol && (v != "" || r.URL.Path != PathState) {
			err := nodeauth.ProtocolMismatch("the caller", v)
			g.refused("internal call of another node protocol version", r, err)
			WriteError(w, http.StatusForbidden, Coded(store.CodeForbidden, err.Error()))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
		next.ServeHTTP(w, r.WithContext(withActor(r)))
	})
}

// refused logs a refused call (the messages name it "internal call", as
// the logs always have: operators' alerts may match them).
func (g Guard) refused(what string, r *http.Request, err error) {
	if g.Refusals != nil {
		g.Refusals.Refused(what, r.RemoteAddr, err)
	}
}

// serveStream checks that r asks for a forward stream, takes its
// connection over and hands it to s.Stream. A request that does not ask
// for the upgrade is answered 400 INVALID_REQUEST, and its connection
// stays HTTP.
func serveStream(s Server, w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), StreamProtocol) ||
		!strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
		WriteError(w, http.StatusBadRequest, Coded(store.CodeInvalidRequest,
			"this path only upgrades the connection to "+StreamProtocol))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, Coded(store.CodeUnavailable,
			"this connection cannot carry a stream: "+err.Error()))
		return
	}
	s.Stream(r, conn, brw)
}

// AcceptStream answers a stream's upgrade (101, naming StreamProtocol
// and this node's protocol version) on rw, the connection Server.Stream
// was handed. After it, the connection carries forward frames only.
func AcceptStream(rw *bufio.ReadWriter) error {
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + StreamProtocol +
		"\r\n" + ProtocolHeader + ": " + Protocol + "\r\n\r\n"); err != nil {
		return err
	}
	return rw.Flush()
}
