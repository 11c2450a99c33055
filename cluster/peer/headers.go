package peer

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/store"
)

// The headers of the peer protocol.
const (
	// KeyHeader carries the cluster key on every call, when the cluster
	// has one.
	KeyHeader = "Carmy-Cluster-Key"
	// NodeIDHeader names the calling node, for the audit log: a claim, not
	// a credential.
	NodeIDHeader = "Carmy-Node-Id"
	// ActorHeader carries, on a join or a removal a node passes on to the
	// leader, who asked for it (store.WithActor), for the audit ledger.
	// Only members reach a handler, so it is taken as it is.
	ActorHeader = "Carmy-Actor"
	// ProtocolHeader names the node protocol version
	// (nodeauth.ProtocolVersion) of a request or an answer: every request
	// and answer of a node carries it, and a node refuses a member that
	// names another (Handler), or whose answer does (CheckAnswer).
	ProtocolHeader = "Carmy-Protocol"
)

// Protocol is nodeauth.ProtocolVersion as ProtocolHeader carries it.
var Protocol = strconv.Itoa(nodeauth.ProtocolVersion)

// CheckAnswer checks the protocol version of resp, an answer of addr. A
// success must name this node's version; an error answer that names none
// did not come from a node's Handler (which names its version on every
// answer) and is left to be read as an error. The error matches
// nodeauth.ErrProtocol, store.ErrUnavailable and ErrRefused: nothing
// was applied, and retrying will not help.
func CheckAnswer(addr string, resp *http.Response) error {
	v := resp.Header.Get(ProtocolHeader)
	if v == Protocol || v == "" && resp.StatusCode >= http.StatusBadRequest {
		return nil
	}
	return fmt.Errorf("%w: %w (%w)", store.ErrUnavailable, nodeauth.ProtocolMismatch(addr, v), ErrRefused)
}

// withActor is r's context with the actor its ActorHeader names.
func withActor(r *http.Request) context.Context {
	if a := r.Header.Get(ActorHeader); a != "" {
		return store.WithActor(r.Context(), a)
	}
	return r.Context()
}
