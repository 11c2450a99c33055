package cluster

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// soloLeader starts a one-node cluster serving its peer endpoints on
// loopback without TLS, and waits until it leads and is ready.
// soloKey is soloLeader's cluster key.
const soloKey = "solo-test-cluster-key"

func soloLeader(t *testing.T) *Node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Open(Config{
		NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		HTTPAddr: ln.Addr().String(), Bootstrap: true, Fast: true, ClusterKey: soloKey,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: n.PeerHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	wait.Until(t, 30*time.Second, "the node to lead and become ready", func() bool {
		return n.IsLeader() && n.Ready(t.Context()) == nil
	})
	return n
}

// A completion's answer leaves its result out when the sender asks
// (forward.AppendBatch's omit): the record comes back without data and error, so
// a result crosses the network once. Asked without it, the answer carries
// the record whole; so does a refused completion's, whose record is
// another's.
func TestCompletionAnswerLeavesTheResultOut(t *testing.T) {
	t.Parallel()
	n := soloLeader(t)
	big := `{"s":"` + strings.Repeat("x", 256<<10) + `"}`
	key := func(id string) store.Key { return store.Key{Principal: "p", RequestID: id} }
	reserve := func(id string) store.Record {
		t.Helper()
		ex := store.Execution{ID: "exec_" + id, Tool: "t", NodeID: "n2", StartedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		res, err := n.Store().Reserve(t.Context(), key(id), "fp", ex)
		if err != nil || res.Outcome != store.Reserved {
			t.Fatalf("reserve %s: %+v, %v", id, res, err)
		}
		return res.Record
	}
	complete := func(id string) []byte {
		t.Helper()
		data, err := fsm.Encode(fsm.Complete(key(id), "fp", store.Result{ExecutionID: "exec_" + id, Status: store.StatusCompleted,
			Data: json.RawMessage(big), FinishedAt: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)}))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// send sends cmds as one batch on a forward stream of n's own client
	// (its key and protocol version), those named in omit asking for the
	// result to be left out, and returns the answer and its size.
	send := func(cmds [][]byte, omit ...int) ([]peer.Result, int) {
		t.Helper()
		conn, br, err := n.client.DialStream(t.Context(), n.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		omitted := make([]bool, len(cmds))
		for _, i := range omit {
			omitted[i] = true
		}
		if _, err := conn.Write(forward.AppendBatch(nil, 0, cmds, omitted)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		body, err := forward.ReadFrame(br, forward.MaxAnswerFrame, nil)
		if err != nil {
			t.Fatal(err)
		}
		seq, results, err := forward.DecodeAnswer(body)
		if err != nil || seq != 0 || len(results) != len(cmds) {
			t.Fatalf("answer: seq %d, %d results, %v", seq, len(results), err)
		}
		return results, len(body)
	}
	reserve("lean")
	reserve("whole")
	reserve("refused")
	if _, err := n.Store().Complete(t.Context(), key("refused"), "fp", store.Result{ExecutionID: "exec_refused",
		Status: store.StatusFailed, Error: json.RawMessage(`{"code":"X","message":"m"}`), FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	results, size := send([][]byte{complete("lean"), complete("whole"), complete("refused")}, 0, 2)
	lean, whole, refused := results[0], results[1], results[2]
	if lean.IsError() || lean.Response.Code != "" || lean.Response.Record.Status != store.StatusCompleted ||
		lean.Response.Record.Data != nil || lean.Response.Record.Error != nil || lean.Response.Record.ExecutionID != "exec_lean" {
		t.Fatalf("lean answer: %+v", lean)
	}
	if whole.IsError() || whole.Response.Record.Status != store.StatusCompleted || string(whole.Response.Record.Data) != big {
		t.Fatalf("whole answer: %v, %d bytes of data", whole.Response.Record.Status, len(whole.Response.Record.Data))
	}
	if refused.Response.Code != store.CodeInvalidState || refused.Response.Record.Status != store.StatusFailed || refused.Response.Record.Error == nil {
		t.Fatalf("refused answer: %+v", refused.Response)
	}
	// One result's data crossed back, not two.
	if size > len(big)+64<<10 {
		t.Fatalf("the answer is %d bytes for one result of %d returned whole", size, len(big))
	}
}

// The record a follower rebuilds from the result it sent is the one the
// log holds, byte for byte: encoding/json compacts and escapes a
// json.RawMessage on its way into a command.
func TestPutResultBackAsLogged(t *testing.T) {
	res := store.Result{ExecutionID: "e", Status: store.StatusCompleted, Data: json.RawMessage("{ \"a\": \"<b> & \u2028\" }"), FinishedAt: time.Now()}
	b, err := fsm.Encode(fsm.Complete(store.Key{Principal: "p", RequestID: "r"}, "fp", res))
	if err != nil {
		t.Fatal(err)
	}
	c, err := fsm.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	resp := fsm.Response{Record: store.Record{ExecutionID: "e", Status: store.StatusCompleted}}
	putResultBack(&resp, res)
	if !bytes.Equal(resp.Record.Data, c.Result.Data) || resp.Record.Error != nil {
		t.Fatalf("put back %s (error %s), the log holds %s", resp.Record.Data, resp.Record.Error, c.Result.Data)
	}
	// A record that came whole, or a refusal's, is left as it is.
	whole := fsm.Response{Record: store.Record{Data: json.RawMessage(`1`)}}
	putResultBack(&whole, res)
	refusal := fsm.Response{Code: store.CodeInvalidState}
	putResultBack(&refusal, res)
	if string(whole.Record.Data) != `1` || refusal.Record.Data != nil {
		t.Fatalf("changed: %s, %s", whole.Record.Data, refusal.Record.Data)
	}
}
