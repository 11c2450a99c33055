package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The overload nemeses (SPEC §7): load alone causes no leader change and
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
	url := n.URL() + "/v1/tools/call"
	tag := fmt.Sprintf("large-%d", time.Since(nm.start).Milliseconds())
	done := make(chan struct{})
	go func() {
		defer close(done)
		client := &http.Client{Timeout: 2 * time.Minute}
		var wg sync.WaitGroup
		for i := range largeResultCalls {
			wg.Go(func() {
				body := fmt.Sprintf(`{"tool":"echo","request_id":"%s-%d","arguments":{"s":%q}}`, tag, i, strings.Repeat("r", largeResultBytes))
				if why := largeCall(client, url, body); why != "" {
					nm.anomaly(fmt.Sprintf("large results on %s: call %s-%d: %s", target, tag, i, why))
				}
			})
		}
		wg.Wait()
	}()
	return func() error { <-done; return nil }, []string{target}, nil
}

// largeCall makes one call and says what was wrong with its answer ("" when
// it was 200, or a refusal before reserving).
func largeCall(client *http.Client, url, body string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "" // the network or the node failed: not an answer of load
	}
	defer resp.Body.Close()
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			ToolRan *bool  `json:"tool_ran"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	if resp.StatusCode == http.StatusServiceUnavailable && env.Error.ToolRan != nil && *env.Error.ToolRan {
		return fmt.Sprintf("503 the tool ran but its outcome is not recorded: %.200s", env.Error.Message)
	}
	return ""
}

// loadFaults are the faults of load alone: the event's effect tells
// whether the leader held through them.
var loadFaults = map[string]bool{faultCPUContention: true, faultLargeResults: true}
