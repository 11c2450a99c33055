package cluster

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/carmyhq/carmy/store"
)

// ProtocolVersion is the version of the node-to-node protocol this build
// speaks: the Raft connection's preamble (identity.go), the internal HTTP
// calls and the forward stream (wire.go, stream_wire.go). Every Raft
// connection names it in its preamble and every internal request and
// answer in ProtocolHeader, and a node refuses a peer that names another
// version, with an error naming both (logged by the refusing node through
// its refusal log; a node whose call is refused logs or returns it too).
//
// A change that a node of the previous build cannot read raises it. Nodes
// of different versions then refuse each other, so the cluster is
// upgraded by a full restart, unless the new build also speaks the
// previous version; what it still reads of an older form then lives in
// compat.go, and goes once no supported build speaks it. Version 1 is the
// first: there has been no release before it, so nothing older is read.
const ProtocolVersion = 1

// ProtocolHeader names the node protocol version (ProtocolVersion) of an
// internal request or answer.
const ProtocolHeader = "Carmy-Protocol"

// protocolString is ProtocolVersion as ProtocolHeader and the Raft
// preamble carry it.
var protocolString = strconv.Itoa(ProtocolVersion)

// errProtocol is a peer that speaks another node protocol version.
var errProtocol = errors.New("cluster: the peer speaks another node protocol version")

// protocolMismatch is the error of a peer at addr (or from it) that names
// version peer ("" for none).
func protocolMismatch(addr, peer string) error {
	if peer == "" {
		peer = "none"
	}
	return fmt.Errorf("%w: %s speaks node protocol %s, this node %d; nodes of different versions cannot form one cluster",
		errProtocol, addr, peer, ProtocolVersion)
}

// checkAnswerProtocol checks the protocol version of resp, an answer of
// addr. A success must name this node's version; an error answer that
// names none did not come from a node's internal handler (which names its
// version on every answer) and is left to be read as an error. The error
// also matches store.ErrUnavailable and errRefused: nothing was applied,
// and retrying will not help.
func checkAnswerProtocol(addr string, resp *http.Response) error {
	v := resp.Header.Get(ProtocolHeader)
	if v == protocolString || v == "" && resp.StatusCode >= http.StatusBadRequest {
		return nil
	}
	return fmt.Errorf("%w: %w (%w)", store.ErrUnavailable, protocolMismatch(addr, v), errRefused)
}
