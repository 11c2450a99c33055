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
	"path/filepath"
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

// LoadConfig, NewConfig and StartNode run a node with the policy of the
// carmy binary: the config file's tools and tokens, its per-tenant fair
// shares and byte bounds, its access rules, the refusal of anonymous
// callers off loopback. Here a cluster of one in a temporary directory,
// with the demo tools and one token, read from the environment (Getenv).
func ExampleNewConfig() {
	dir, err := os.MkdirTemp("", "carmy-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "carmy.yaml")
	err = os.WriteFile(file, []byte("demo_tools: true\n"+
		"auth:\n  tokens:\n    - {principal: planner, token_env: PLANNER_TOKEN, tools: [echo]}\n"), 0o600)
	if err != nil {
		fmt.Println(err)
		return
	}
	fc, err := embed.LoadConfig(file)
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	env := map[string]string{"PLANNER_TOKEN": "planner-token-0123456789"}
	cfg, err := embed.NewConfig(embed.Settings{
		File: fc, NodeID: "n1", DataDir: filepath.Join(dir, "n1"), Listener: ln,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Getenv: func(name string) string { return env[name] },
		Raft: &cluster.Config{RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Bootstrap: true,
			ClusterKey: "a-key-every-node-shares-0123"},
	})
	if err != nil {
		ln.Close()
		fmt.Println(err)
		return
	}
	node, err := embed.StartNode(context.Background(), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	select {
	case <-node.Ready():
	case <-node.Done():
		fmt.Println("stopped:", node.Close(context.Background()))
		return
	case <-time.After(30 * time.Second):
		fmt.Println("not ready")
		return
	}
	call := func(token string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+node.Addr().String()+"/v1/tools/call",
			strings.NewReader(`{"tool":"echo","arguments":{"hello":"tenant"},"request_id":"r1"}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Println(resp.StatusCode)
			return
		}
		var out struct {
			Status string          `json:"status"`
			Data   json.RawMessage `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		fmt.Println(resp.StatusCode, out.Status, string(out.Data))
	}
	call("")                   // anonymous: the file names tokens
	call(env["PLANNER_TOKEN"]) // the planner's token
	fmt.Println("closed:", node.Close(context.Background()))
	// Output:
	// 401
	// 200 completed {"hello":"tenant"}
	// closed: <nil>
}
