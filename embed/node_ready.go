package embed

import (
	"context"
	"net"
	"sync"
	"time"
)

// Ready is closed once the node serves: its API's listener accepts
// connections and its runtime is ready (carmy.Runtime.Ready: a Raft
// member has a leader and has caught up, a fleet node reaches its
// database, this node's executions of a previous process are marked
// interrupted) — from then on a call can succeed. It closes once and
// stays closed: a node that later loses its leader answers UNAVAILABLE
// again, as Runtime.Ready says. A node that stops before it is ready
// never closes it: wait on Done too.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// readyPoll bounds the pause between two asks of the runtime whether it
// is ready: the runtime has no signal of it, and a cluster's election
// takes tens of milliseconds to seconds.
const (
	readyPollFirst = 5 * time.Millisecond
	readyPollMax   = 100 * time.Millisecond
)

// watchReady closes n.ready once the API's listener has been asked for a
// connection (the server accepts) and the runtime is ready; it returns
// without closing it when the node stops serving first.
func (n *Node) watchReady() {
	select {
	case <-n.accepting:
	case <-n.served:
		return
	}
	pause := readyPollFirst
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := n.rt.Ready(ctx)
		cancel()
		if err == nil {
			close(n.ready)
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-n.served:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, readyPollMax)
	}
}

// signalListener closes accepting when it is first asked for a
// connection: the HTTP server then accepts.
type signalListener struct {
	net.Listener
	accepting chan struct{}
	once      sync.Once
}

// Accept signals, once, then accepts on the inner listener.
func (l *signalListener) Accept() (net.Conn, error) {
	l.once.Do(func() { close(l.accepting) })
	return l.Listener.Accept()
}
