package cluster

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/wire"
	"github.com/carmyhq/carmy/store"
)

// ProtocolHeader names the node protocol version (nodeauth.ProtocolVersion)
// of an internal request or answer: every request and answer of a node
// carries it, and a node refuses a member that names another
// (authenticate), or whose answer does (checkAnswerProtocol).
const ProtocolHeader = "Carmy-Protocol"

// protocolString is nodeauth.ProtocolVersion as ProtocolHeader carries it.
var protocolString = strconv.Itoa(nodeauth.ProtocolVersion)

// checkAnswerProtocol checks the protocol version of resp, an answer of
// addr. A success must name this node's version; an error answer that
// names none did not come from a node's internal handler (which names its
// version on every answer) and is left to be read as an error. The error
// matches nodeauth.ErrProtocol, store.ErrUnavailable and wire.ErrRefused:
// nothing was applied, and retrying will not help.
func checkAnswerProtocol(addr string, resp *http.Response) error {
	v := resp.Header.Get(ProtocolHeader)
	if v == protocolString || v == "" && resp.StatusCode >= http.StatusBadRequest {
		return nil
	}
	return fmt.Errorf("%w: %w (%w)", store.ErrUnavailable, nodeauth.ProtocolMismatch(addr, v), wire.ErrRefused)
}
