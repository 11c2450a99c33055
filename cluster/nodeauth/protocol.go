package nodeauth

import (
	"errors"
	"fmt"
	"strconv"
)

// ProtocolVersion is the version of the node-to-node protocol this build
// speaks: the Raft connection's preamble (identity.go) and, named by the
// cluster package, its peer HTTP calls (package peer) and the forward
// stream. Every Raft connection names it in its preamble and every peer request and
// answer in a header, and a node refuses a peer that names another
// version, with an error naming both (ProtocolMismatch), logged by the
// refusing node through its refusal log.
//
// A change that a node of the previous build cannot read raises it. Nodes
// of different versions then refuse each other, so the cluster is
// upgraded by a full restart, unless the new build also speaks the
// previous version; what it still reads of an older form then lives in a
// compat.go of the package that reads it, and goes once no supported build
// speaks it. Version 1 was the first; version 2 carries commands of form
// 0xC3 (the proposer's time and actor, for the audit ledger) and
// snapshots of version 3 (with the ledger). There has been no release,
// so nothing older is read.
const ProtocolVersion = 2

// versionString is ProtocolVersion as the preamble and the header carry
// it.
var versionString = strconv.Itoa(ProtocolVersion)

// ErrProtocol is a peer that speaks another node protocol version.
var ErrProtocol = errors.New("cluster: the peer speaks another node protocol version")

// ProtocolMismatch is the error of a peer at (or from) addr that names
// protocol version peer ("" for none): it matches ErrProtocol and names
// both versions.
func ProtocolMismatch(addr, peer string) error {
	if peer == "" {
		peer = "none"
	}
	return fmt.Errorf("%w: %s speaks node protocol %s, this node %d; nodes of different versions cannot form one cluster",
		ErrProtocol, addr, peer, ProtocolVersion)
}
