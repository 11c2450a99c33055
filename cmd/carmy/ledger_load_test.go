package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// benchLoad runs `carmy bench --mode new` back to back, each run a chunk of
// new calls against the targets of the moment, until Stop: load that
// carries on across a dead node and follows the membership as a test
// changes it.
type benchLoad struct {
	bin           string
	chunk, client int

	mu       sync.Mutex
	targets  []string
	runs     int // runs finished
	calls    int64
	errors   int64
	outcomes map[string]int64
	err      error

	stop chan struct{}
	done chan struct{}
}

// startBenchLoad starts the load against targets (host:port).
func startBenchLoad(bin string, chunk, clients int, targets ...string) *benchLoad {
	l := &benchLoad{bin: bin, chunk: chunk, client: clients, targets: targets, outcomes: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	return l
}

// SetTargets changes the nodes the next runs call.
func (l *benchLoad) SetTargets(targets ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.targets = targets
}

// Runs returns how many runs finished.
func (l *benchLoad) Runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}

// Err returns why the load stopped by itself (nil while it goes on).
func (l *benchLoad) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Stop lets the current run finish, stops, and returns the first error a
// run had.
func (l *benchLoad) Stop() error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	return l.Err()
}

// Summary says what the runs made of their calls.
func (l *benchLoad) Summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d bench runs, %d calls, %d errors, outcomes %v", l.runs, l.calls, l.errors, l.outcomes)
}

// Ran returns how many calls were answered 200 as a first run.
func (l *benchLoad) Ran() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcomes["ran"]
}

func (l *benchLoad) loop() {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		l.mu.Lock()
		targets := strings.Join(l.targets, ",")
		l.mu.Unlock()
		res, err := l.run(targets)
		l.mu.Lock()
		if err != nil {
			l.err = err
			l.mu.Unlock()
			return
		}
		l.runs++
		l.calls += res.Calls
		l.errors += res.Errors
		for o, n := range res.Outcomes {
			l.outcomes[o] += n
		}
		l.mu.Unlock()
	}
}

// benchRun is what the loads read of `carmy bench --json`.
type benchRun struct {
	Calls    int64            `json:"calls"`
	Errors   int64            `json:"errors"`
	Outcomes map[string]int64 `json:"outcomes"`
}

// run makes one bench run. A run must end (exit 0), or find every call
// failed (exit 1: every target it had was down, or between leaders).
func (l *benchLoad) run(targets string) (benchRun, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(l.bin, "bench", "--targets", targets, "--mode", "new", "--calls", strconv.Itoa(l.chunk),
		"--clients", strconv.Itoa(l.client), "--timeout", "10s", "--metrics=false", "--quiet", "--json")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var res benchRun
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		return res, fmt.Errorf("carmy bench --targets %s: %v, no result (%w)\n%s", targets, err, jerr, errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() == 1 && res.Errors == res.Calls && strings.Contains(errOut.String(), "every call failed"):
	default:
		return res, fmt.Errorf("carmy bench --targets %s: %w\n%s", targets, err, errOut.String())
	}
	return res, nil
}
