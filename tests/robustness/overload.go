package robustness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/carmyhq/carmy/api/client"
)

// The overload nemeses (docs/operations.md#overload): load alone causes no leader change and
// no answer of "the tool ran but its outcome is not recorded".
const (
	// faultCPUContention: processes spinning on the host's CPUs, which
	// the nodes' containers share, for the fault's hold.
	faultCPUContention = "cpu-contention"
	// faultLargeResults: a burst of concurrent calls with large results
	// on a follower.
	faultLargeResults = "large-results"
)

// Sizes of the overload nemeses.
const (
	contentionProcs  = 3
	largeResultCalls = 40
	largeResultBytes = 900 << 10
)

// contend starts contentionProcs busy-looping processes and returns how to
// stop them (each killed by its pid).
func contend() (stop func() error, err error) {
	var cmds []*exec.Cmd
	stop = func() error {
		var errs []error
		for _, c := range cmds {
			if err := c.Process.Kill(); err != nil {
				errs = append(errs, err)
			}
			_ = c.Wait()
		}
		return errors.Join(errs...)
	}
	for range contentionProcs {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			return stop, fmt.Errorf("starting a busy process: %w", err)
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}

// injectContention starts the CPU contention; its heal stops it.
func (nm *nemesis) injectContention() (heal func() error, targets []string, err error) {
	stop, err := contend()
	return stop, []string{fmt.Sprintf("%d busy processes on the host", contentionProcs)}, err
}

// injectLargeResults sends a burst of largeResultCalls concurrent echo
// calls of largeResultBytes to a follower, in the background while the
// fault is held; heal waits for the burst. Every call must be answered 200
// or refused before anything was reserved ("tool_ran": false): an answer
// that the tool ran but its outcome is not recorded is an anomaly.
func (nm *nemesis) injectLargeResults(target string) (heal func() error, targets []string, err error) {
	n := nm.c.node(target)
	if n == nil {
		return nil, []string{target}, fmt.Errorf("%s is not running", target)
	}
	// Each call is sent once, and may take largeCallTimeout.
	api, err := client.New(n.URL(), client.WithHTTPClient(&http.Client{Timeout: largeCallTimeout}), client.WithRetry(client.NoRetry),
		client.WithToken(nm.c.nc.tokens.Agent))
	if err != nil {
		// The node has no published port (it is being restarted): every
		// call would fail to connect, which is not an answer of load.
		return func() error { return nil }, []string{target}, nil
	}
	tag := fmt.Sprintf("large-%d", time.Since(nm.start).Milliseconds())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := range largeResultCalls {
			wg.Go(func() {
				id := fmt.Sprintf("%s-%d", tag, i)
				if why := largeCall(api, id, strings.Repeat("r", largeResultBytes)); why != "" {
					nm.anomaly(fmt.Sprintf("large results on %s: call %s: %s", target, id, why))
				}
			})
		}
		wg.Wait()
	}()
	return func() error { <-done; return nil }, []string{target}, nil
}

// largeCallTimeout bounds one call of the burst.
const largeCallTimeout = 2 * time.Minute

// largeCall makes one echo call of s through api and says what was wrong with
// its answer ("" when it was 200, or a refusal before reserving).
func largeCall(api *client.Client, requestID, s string) string {
	ctx, cancel := context.WithTimeout(context.Background(), largeCallTimeout)
	defer cancel()
	_, err := api.Call(ctx, "echo", map[string]string{"s": s}, client.RequestID(requestID))
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable && ae.ToolRan != nil && *ae.ToolRan {
		return fmt.Sprintf("503 the tool ran but its outcome is not recorded: %.200s", ae.Message)
	}
	return "" // a 200, a refusal, or the network or the node failed: not an answer of load
}

// loadFaults are the faults of load alone: the event's effect tells
// whether the leader held through them.
var loadFaults = map[string]bool{faultCPUContention: true, faultLargeResults: true}
