package cluster

import (
	"net"

	"github.com/hashicorp/raft"
)

// NewTestStream returns a Raft stream layer on ln as a node builds it
// (with the connection preamble): mutual TLS with files, or plain TCP when
// files is nil. Tests play a stranger with it, so that only TLS stands in
// its way.
func NewTestStream(ln net.Listener, files *NodeTLS) (raft.StreamLayer, error) {
	var s raft.StreamLayer = &tcpStream{Listener: ln, advertise: ln.Addr()}
	if files != nil {
		t, err := loadNodeTLS(*files, nil)
		if err != nil {
			return nil, err
		}
		s = newTLSStream(s, t, nil)
	}
	return &identityStream{StreamLayer: s, self: "intruder"}, nil
}

// NewTestKeyStream returns a plain-TCP Raft stream layer on ln as a node
// without TLS builds it: authenticated by key, with the preamble. Tests
// play a node that holds another key with it.
func NewTestKeyStream(ln net.Listener, key string) raft.StreamLayer {
	s := newKeyStream(&tcpStream{Listener: ln, advertise: ln.Addr()}, key, nil)
	return &identityStream{StreamLayer: s, self: "intruder"}
}

// BatchFrameCommands returns the commands of a forward stream's batch
// frame (its body, after the length), for tests that play a leader.
func BatchFrameCommands(body []byte) ([][]byte, error) {
	_, cmds, _, err := decodeBatchFrame(body)
	return cmds, err
}

// CheckSilence makes Raft check the leader's silence now, as watchSilence
// does once the leader has been silent long enough.
func (n *Node) CheckSilence() { n.checkSilence() }
