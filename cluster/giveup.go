package cluster

// Failed is closed once the node has given up on something waiting
// cannot cure: today, its join refused because a live member of the
// cluster holds its id (joinCluster). Failure then says why. The node
// itself keeps running until Close; whoever runs it should stop it (carmy
// serve exits non-zero).
func (n *Node) Failed() <-chan struct{} { return n.failed }

// Failure returns why the node gave up, nil until Failed is closed.
func (n *Node) Failure() error {
	select {
	case <-n.failed:
		return n.failErr
	default:
		return nil
	}
}

// giveUp records err as the node's failure and closes Failed (the first
// call only).
func (n *Node) giveUp(err error) {
	n.failOnce.Do(func() {
		n.failErr = err
		close(n.failed)
	})
}
