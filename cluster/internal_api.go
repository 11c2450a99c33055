package cluster

import (
	"context"
	"net/http"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// The internal endpoints, served under the node's HTTP address. Only
// cluster members may call them: over mutual TLS with a node certificate
// with node TLS, with the cluster key when one is set (both when both
// are); never on the strength of their address.
const (
	pathReadIndex = "/internal/v1/readindex"
	pathJoin      = "/internal/v1/join"
	pathRemove    = "/internal/v1/remove"
	pathState     = "/internal/v1/state"
	// pathStream is where a follower asks to upgrade a connection to a
	// forward stream (package forward).
	pathStream = "/internal/v1/stream"
	// InternalPrefix is the path prefix the internal handler serves.
	InternalPrefix = "/internal/"
	keyHeader      = "Carmy-Cluster-Key"
	// nodeIDHeader names the calling node (for the audit log; a claim,
	// not a credential).
	nodeIDHeader = "Carmy-Node-Id"
)

// Size bounds of the node-to-node wire.
//
// maxInternalReq is the body limit of the internal HTTP requests (a join,
// a removal, a silence check: a few hundred bytes), and maxInternalAnswer
// bounds their answers (a join's lists the members).
const (
	maxInternalReq    = 1 << 20
	maxInternalAnswer = 64 << 20
)

type indexAnswer struct {
	Index uint64 `json:"index"`
}

type joinAnswer struct {
	Nodes []fsm.NodeInfo `json:"nodes"`
}

// actorHeader carries, on a join or a removal a node passes on to the
// leader, who asked for it (store.WithActor), for the audit ledger. Only
// members send internal requests, so it is taken as it is.
const actorHeader = "Carmy-Actor"

// withActor is r's context with the actor its actorHeader names.
func withActor(r *http.Request) context.Context {
	if a := r.Header.Get(actorHeader); a != "" {
		return store.WithActor(r.Context(), a)
	}
	return r.Context()
}

type removeRequest struct {
	ID string `json:"id"`
}

// statusOf is the HTTP status of an error answer.
func statusOf(err error) int {
	switch store.CodeOf(err) {
	case store.CodeInvalidRequest:
		return http.StatusBadRequest
	case store.CodeNotFound:
		return http.StatusNotFound
	case store.CodeInvalidState:
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}
