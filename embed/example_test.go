package embed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
)

// StartNode runs a node of a Raft cluster in this program: here the
// founder of a cluster of one, on loopback ports the kernel picks. Other
// nodes join it with Raft.Join set to its address; Close stops it in
// order.
func ExampleStartNode() {
	app := carmy.App(carmy.WithNodeID("n1"), carmy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	app.Tool("echo", func(ctx context.Context, call carmy.Call) (any, error) { return call.Arguments, nil })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "carmy-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	node, err := embed.StartNode(context.Background(), embed.Config{
		Runtime:  app,
		Listener: ln,
		Raft: &cluster.Config{NodeID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
			Bootstrap: true, ClusterKey: "a-key-every-node-shares-0123"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Calls answer UNAVAILABLE until the node has elected itself: Ready
	// closes when a call can succeed.
	select {
	case <-node.Ready():
	case <-node.Done():
		fmt.Println("stopped:", node.Close(context.Background()))
		return
	case <-time.After(30 * time.Second):
		fmt.Println("not ready")
		return
	}
	resp, err := http.Post("http://"+node.Addr().String()+"/v1/tools/call", "application/json",
		strings.NewReader(`{"tool":"echo","arguments":{"hello":"cluster"},"request_id":"r1"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &out)
	fmt.Println(resp.StatusCode, out.Status, string(out.Data))
	fmt.Println("closed:", node.Close(context.Background()))
	// Output:
	// 200 completed {"hello":"cluster"}
	// closed: <nil>
}
