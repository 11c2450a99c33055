package cluster

import "fmt"

// Listeners of a node, as a ListenError names them.
const (
	ListenerRaft   = "raft transport"
	ListenerGossip = "gossip"
)

// ListenError is a node's failure to bind one of its own addresses, so
// that a program can say which of its settings names it (carmy serve
// names the flag).
type ListenError struct {
	// Listener is ListenerRaft or ListenerGossip.
	Listener string
	// Addr is the address as configured.
	Addr string
	Err  error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("cluster: %s on %s: %v", e.Listener, e.Addr, e.Err)
}

// Unwrap returns the cause (syscall.EADDRINUSE, say).
func (e *ListenError) Unwrap() error { return e.Err }
