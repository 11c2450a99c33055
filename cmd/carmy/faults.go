package main

import (
	"net"
	"net/http"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
)

// faultLayer is the TEST-ONLY network fault layer as serve uses it: the
// methods of internal/faultnet's Filter. Only a binary built with
// -tags carmyfaults makes one (faults_on.go); the default build's
// newFaults (faults_off.go) returns nil and the binary links no
// fault-injection code at all (TestDefaultBinaryLinksNoFaultLayer).
type faultLayer interface {
	// Listener wraps the node's API listener.
	Listener(net.Listener) net.Listener
	// Handler serves the layer's rules at faultsPath, for holders of key.
	Handler(key string) http.Handler
	// DialContext, StreamLayer and Memberlist wrap the node's network
	// (cluster.Hooks): node-to-node HTTP, Raft and gossip.
	DialContext(next cluster.DialFunc) cluster.DialFunc
	StreamLayer(raft.StreamLayer) raft.StreamLayer
	Memberlist(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
}
