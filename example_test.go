package carmy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
)

// A tool registered with the runtime runs once per request_id; a retry is
// answered from the record.
func Example() {
	app := carmy.App(carmy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	orders := 0
	app.Tool("create_order", func(ctx context.Context, call carmy.Call) (any, error) {
		orders++
		return map[string]any{"order_id": orders}, nil
	}, carmy.Description("Create an order"))

	caller := carmy.Caller{Principal: "planner"}
	req := carmy.Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"KB-01"}`), RequestID: "order-7f3"}
	first, _ := app.Call(context.Background(), caller, req)
	retry, _ := app.Call(context.Background(), caller, req)

	fmt.Println(first.Record.Status, string(first.Record.Data), first.Replayed)
	fmt.Println(retry.Record.Status, string(retry.Record.Data), retry.Replayed)
	fmt.Println("same execution:", retry.Record.ExecutionID == first.Record.ExecutionID, "runs:", orders)
	// Output:
	// completed {"order_id":1} false
	// completed {"order_id":1} true
	// same execution: true runs: 1
}

// Serve puts the runtime behind the HTTP API (Run does the same on
// 127.0.0.1:8080).
func ExampleRuntime_Serve() {
	app := carmy.App(carmy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	app.Tool("echo", func(ctx context.Context, call carmy.Call) (any, error) { return call.Arguments, nil })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- app.Serve(ctx, ln, api.Config{}) }()

	// The node answers 503 until it has started: wait for /readyz, as a
	// load balancer would.
	base := "http://" + ln.Addr().String()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			fmt.Println("not ready:", err)
			return
		}
	}

	body := `{"tool":"echo","arguments":{"hello":"world"},"request_id":"r1"}`
	for range 2 {
		resp, err := http.Post(base+"/v1/tools/call", "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		var out struct {
			Status   string          `json:"status"`
			Data     json.RawMessage `json:"data"`
			Replayed bool            `json:"replayed"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		fmt.Printf("%d %s %s replayed=%v Idempotent-Replayed=%q\n",
			resp.StatusCode, out.Status, out.Data, out.Replayed, resp.Header.Get("Idempotent-Replayed"))
	}
	stop()
	fmt.Println("serve returned:", <-served)
	// Output:
	// 200 completed {"hello":"world"} replayed=false Idempotent-Replayed=""
	// 200 completed {"hello":"world"} replayed=true Idempotent-Replayed="true"
	// serve returned: <nil>
}
