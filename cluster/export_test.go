package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/peer"
)

// NewTestStream returns a Raft stream layer on ln as a node builds it
// (with the connection preamble): mutual TLS with files, or plain TCP when
// files is nil. Tests play a stranger with it, so that only TLS stands in
// its way.
func NewTestStream(ln net.Listener, files *NodeTLS) (raft.StreamLayer, error) {
	var s raft.StreamLayer = &tcpStream{Listener: ln, advertise: ln.Addr()}
	if files != nil {
		t, err := nodeauth.LoadTLS(*files, nil)
		if err != nil {
			return nil, err
		}
		s = nodeauth.NewTLSStream(s, t, nil)
	}
	return nodeauth.NewIdentityStream(s, "intruder", nil), nil
}

// NewTestKeyStream returns a plain-TCP Raft stream layer on ln as a node
// without TLS builds it: authenticated by key, with the preamble. Tests
// play a node that holds another key with it.
func NewTestKeyStream(ln net.Listener, key string) raft.StreamLayer {
	s := nodeauth.NewKeyStream(&tcpStream{Listener: ln, advertise: ln.Addr()}, key, nil)
	return nodeauth.NewIdentityStream(s, "intruder", nil)
}

// BatchFrameCommands returns the commands of a forward stream's batch
// frame (its body, after the length), for tests that play a leader.
func BatchFrameCommands(body []byte) ([][]byte, error) {
	_, cmds, _, err := forward.DecodeBatch(body)
	return cmds, err
}

// CheckSilence makes Raft check the leader's silence now, as watchSilence
// does once the leader has been silent long enough.
func (n *Node) CheckSilence() { n.checkSilence() }

// StreamApply forwards cmds as one batch as a follower does, over a
// forward stream that hc opens to base (a scheme and an address) with
// key (when not empty) and this build's protocol version. It returns the
// upgrade's status (101 when the stream opened) and, once the batch is
// answered, each command's error (nil: applied).
func StreamApply(hc *http.Client, base, key string, cmds [][]byte) (int, []error, error) {
	// A client's Timeout would leave the stream's body unwritable: the
	// request's context bounds it instead.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := *hc
	c.Timeout = 0
	hc = &c
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+peer.PathStream, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", peer.StreamProtocol)
	req.Header.Set(peer.ProtocolHeader, peer.Protocol)
	if key != "" {
		req.Header.Set(peer.KeyHeader, key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return resp.StatusCode, nil, nil
	}
	rw, ok := resp.Body.(io.ReadWriter)
	if !ok {
		return resp.StatusCode, nil, errors.New("the stream's body is not writable")
	}
	if _, err := rw.Write(forward.AppendBatch(nil, 0, cmds, nil)); err != nil {
		return resp.StatusCode, nil, err
	}
	body, err := forward.ReadFrame(bufio.NewReader(rw), forward.MaxAnswerFrame, nil)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	_, results, err := forward.DecodeAnswer(body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	errs := make([]error, len(results))
	for i, r := range results {
		errs[i] = r.Err()
		if errs[i] == nil && r.Response != nil && r.Response.Code != "" {
			errs[i] = fmt.Errorf("applied with code %s", r.Response.Code)
		}
	}
	return resp.StatusCode, errs, nil
}
