package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store/postgres"
)

// Done is closed once the node has stopped serving: after Close began,
// or on its own (the API's listener failed, a fleet's store gave up, the
// Raft member gave up: its join refused because a live member holds its
// id).
// Close still has to be called.
func (n *Node) Done() <-chan struct{} { return n.served }

// Addr is the address the API is served on.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// Runtime returns the node's runtime.
func (n *Node) Runtime() *carmy.Runtime { return n.rt }

// Raft returns the node's cluster member, nil for a fleet node.
func (n *Node) Raft() *cluster.Node { return n.raft }

// Fleet returns the node's fleet member, nil for a Raft node.
func (n *Node) Fleet() *postgres.Fleet { return n.fleet }

// Close stops the node, in this order: a Raft leader hands leadership
// over, while its API still serves forwarded writes; the API stops and
// the runtime drains (running tools finish or are cancelled, their
// outcomes recorded); the backend stops (the Raft node, within ctx and
// its ShutdownTimeout; the fleet's heartbeats); the upstream MCP servers
// close; the store's connections and the listener close.
//
// It returns the first of: the Raft node's shutdown passing its time
// (an error matching cluster.ErrShutdownTimeout), the Raft node's or the
// fleet's failure, the API's serving error. Another error closing the Raft node is logged.
// Later calls return the same as the first.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	select {
	case <-n.served: // stopped on its own: no one to hand over to in good order
	default:
		if n.raft != nil {
			n.raft.HandOff()
		}
	}
	n.stopServing()
	<-n.served
	backendErr := n.stopBackend(ctx)
	n.closeUpstreams()
	n.closeStore()
	_ = n.ln.Close() // already closed by Serve, but for a failed start
	if backendErr != nil {
		return backendErr
	}
	return n.serveErr
}

// stopBackend closes the Raft node, or stops the fleet's Run and returns
// its failure.
func (n *Node) stopBackend(ctx context.Context) error {
	if n.raft != nil {
		err := n.raft.CloseContext(ctx)
		if errors.Is(err, cluster.ErrShutdownTimeout) {
			return fmt.Errorf("stopping: %w", err)
		}
		if err != nil {
			n.log.Warn("closing the node", slog.Any("err", err))
		}
		if err := n.raft.Failure(); err != nil {
			return fmt.Errorf("the cluster: %w", err)
		}
		return nil
	}
	n.stopFleet()
	if err := <-n.fleetDone; err != nil {
		return fmt.Errorf("the store: %w", err)
	}
	return nil
}

// closeStore closes a fleet's pool, once its Run has returned.
func (n *Node) closeStore() {
	if n.fleet != nil {
		n.fleet.Close()
	}
}
