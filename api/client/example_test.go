package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/client"
)

// The recommended agent loop: one request_id per step, kept with the step;
// an interrupted execution is settled by someone who can check the effect.
func Example() {
	// A node to talk to (carmy serve --dev does the same).
	app := carmy.App(carmy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	_ = app.AddDemoTools()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go app.Serve(ctx, ln, api.Config{})

	c, err := client.New("http://" + ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	for c.Ready(ctx) != nil { // wait for the node to start
		time.Sleep(10 * time.Millisecond)
	}

	step := "order-step-1" // e.g. client.NewRequestID(), stored with the step
	for range 2 {          // a retry of the step, e.g. after the agent restarted
		res, err := c.Call(ctx, "create_order", map[string]string{"sku": "KB-01"}, client.RequestID(step))
		var ae *client.APIError
		switch {
		case errors.Is(err, client.ErrInterrupted) && errors.As(err, &ae):
			// The runner died: check the order system, then settle it,
			// e.g. c.Resolve(ctx, ae.ExecutionID, client.Released()).
			fmt.Println("interrupted:", ae.ExecutionID)
		case err != nil:
			fmt.Println("error:", err)
		case res.Err() != nil:
			fmt.Println("recorded failure:", res.Err())
		default:
			fmt.Printf("%s %s replayed=%v\n", res.Status, res.Data, res.Replayed)
		}
	}
	// Output:
	// completed {"order_id":1,"sku":"KB-01"} replayed=false
	// completed {"order_id":1,"sku":"KB-01"} replayed=true
}
