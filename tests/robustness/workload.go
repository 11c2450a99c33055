package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// Shares of the workload's choices, in percent.
const (
	pctDuplicate = 20 // a new identity is sent twice at once, to two nodes
	pctRevisit   = 15 // a call revisits an earlier identity instead of a new one
	pctConflict  = 40 // of the revisits: with different arguments
	pctSlow      = 3  // the tool outlives its 2 s timeout (a timed_out record)
	pctLose      = 2  // the ledger cuts the first request of the identity unrecorded (interrupted, then released by the probe)
	pctMCP       = 33 // a call goes through /mcp instead of POST /v1/tools/call
	pctGated     = 10 // a new identity calls the gated tool (its revisits too): the approver decides it
	maxAttempts  = 8  // an agent gives up on an identity after this many calls
)

// endpoints tells the clients where the nodes are reachable now.
type endpoints interface {
	// urls returns the base URLs of the nodes that can be called now, by
	// node name.
	urls() map[string]string
}

// workload is the clients' shared state: the history and what the clients
// may revisit.
type workload struct {
	seed  uint64
	nc    *nodeClient
	nodes endpoints
	start time.Time

	mu      sync.Mutex
	ops     []Op
	issued  []issued // identities called so far (for revisits)
	anomaly []string // answers outside the contract
	done    []completedAnswer
	nextID  atomic.Int64
}

// completedAnswer is a 200 completed answer and the tool result it
// carries.
type completedAnswer struct {
	key, executionID, node string
	data                   ledgerapi.Result
	hasData                bool
}

// issued is an identity, its tool and the arguments it was first called
// with.
type issued struct {
	key, tool string
	args      ledgerapi.Args
}

func newWorkload(seed uint64, nc *nodeClient, nodes endpoints) *workload {
	return &workload{seed: seed, nc: nc, nodes: nodes, start: time.Now()}
}

// now is the history's clock: nanoseconds since the workload started
// (monotonic).
func (w *workload) now() int64 { return int64(time.Since(w.start)) }

// run drives clients concurrent agents until ctx ends, then waits for
// their calls in flight to finish.
func (w *workload) run(ctx context.Context, clients int) {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() { w.client(ctx, c) })
	}
	wg.Wait()
}

// client is one agent: it calls a tool with a new identity (sometimes
// twice at once), or revisits an earlier one, and retries each identity on
// random nodes, as an agent would, until it gets a settled answer.
func (w *workload) client(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(w.seed, uint64(id)+1))
	for n := 0; ctx.Err() == nil; n++ {
		key, tool, args := w.pick(rng, id, n)
		if rng.IntN(100) < pctDuplicate {
			var wg sync.WaitGroup
			for k := range 2 {
				sub := rand.New(rand.NewPCG(rng.Uint64(), uint64(k)))
				wg.Go(func() { w.agent(ctx, sub, id*10+k+1, key, tool, args) })
			}
			wg.Wait()
			continue
		}
		w.agent(ctx, rng, id*10, key, tool, args)
	}
}

// pick chooses the identity, tool and arguments of the next call.
func (w *workload) pick(rng *rand.Rand, id, n int) (key, tool string, args ledgerapi.Args) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.issued) > 0 && rng.IntN(100) < pctRevisit {
		// Revisit one of the recent identities.
		from := max(0, len(w.issued)-50)
		prev := w.issued[from+rng.IntN(len(w.issued)-from)]
		args := prev.args
		if rng.IntN(100) < pctConflict {
			args.Value += "-other"
		}
		return prev.key, prev.tool, args
	}
	args = ledgerapi.Args{Value: fmt.Sprintf("v%d", w.nextID.Add(1)), DelayMS: rng.IntN(150)}
	if rng.IntN(100) < pctSlow {
		args.DelayMS = 2500
	}
	args.Lose = rng.IntN(100) < pctLose
	key, tool = fmt.Sprintf("s%d-c%d-%d", w.seed, id, n), toolName
	if rng.IntN(100) < pctGated {
		key, tool = fmt.Sprintf("s%d-c%d-%d-gated", w.seed, id, n), gatedToolName
	}
	w.issued = append(w.issued, issued{key: key, tool: tool, args: args})
	return key, tool, args
}

// agent calls the identity until the answer settles it (a result or a
// conflict), attempts run out or ctx ends. Unknown and unavailable
// outcomes and running and interrupted executions are retried after a
// backoff: the tool's reconcile probe settles an interrupted one (a replay
// of the result it found, or released and run by the retry). A gated call
// awaiting a decision is asked again, as an agent polls, until the
// decision's outcome comes or ctx ends; those answers use up no attempt.
func (w *workload) agent(ctx context.Context, rng *rand.Rand, client int, key, tool string, args ledgerapi.Args) {
	fp := fmt.Sprintf("%s/%d/%v", args.Value, args.DelayMS, args.Lose)
	gated := tool == gatedToolName
	backoff := 100 * time.Millisecond
	for attempt := 0; attempt < maxAttempts && ctx.Err() == nil; attempt++ {
		node, url := w.pickNode(rng)
		if url == "" {
			if !sleep(ctx, 200*time.Millisecond) {
				return
			}
			continue
		}
		transport := pickTransport(rng)
		call := w.now()
		// The call is not bound to ctx: a call in flight when the run
		// ends gets its answer (or its client timeout).
		o := w.nc.callVia(context.Background(), transport, url, tool, key, args)
		ret := w.now()
		w.record(Op{
			Client: client, Key: key, Fingerprint: fp, Call: call, Return: ret, Kind: o.kind,
			ExecutionID: o.executionID, Status: o.status, Replayed: o.replayed, Result: o.result, Stamps: o.stamps,
			Node: node, Transport: transport, Gated: gated,
		}, o)
		if o.kind == KindOK || o.kind == KindConflict {
			return
		}
		if o.kind == KindAwaiting {
			attempt-- // polling for the decision, not a failed attempt
		}
		if !sleep(ctx, backoff+time.Duration(rng.Int64N(int64(backoff)))) {
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// pickTransport chooses how a call is made: over MCP (pctMCP of calls, at
// one of mcpVersions), else over HTTP. Every attempt chooses anew, so an
// identity's calls and retries mix the transports.
func pickTransport(rng *rand.Rand) string {
	if rng.IntN(100) < pctMCP {
		return transportMCP + "/" + mcpVersions[rng.IntN(len(mcpVersions))]
	}
	return transportHTTP
}

// record appends an op to the history, with what was unexpected about it.
func (w *workload) record(op Op, o outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op)
	if o.detail != "" {
		w.anomaly = append(w.anomaly, fmt.Sprintf("%s on %s (%s): %s", op.Key, op.Node, op.Transport, o.detail))
	}
	if !op.Gated && (o.kind == KindAwaiting || o.kind == KindOK && gateStatuses[o.status]) {
		w.anomaly = append(w.anomaly, fmt.Sprintf("%s on %s (%s): a call of the ungated tool answered %s %s (execution %s)",
			op.Key, op.Node, op.Transport, o.kind, o.status, o.executionID))
	}
	if o.kind == KindOK && o.status == "completed" {
		w.done = append(w.done, completedAnswer{key: op.Key, executionID: o.executionID, node: op.Node, data: o.data, hasData: o.hasData})
	}
	if o.kind == KindOK && o.hasData && (o.data.ExecutionID != o.executionID) {
		w.anomaly = append(w.anomaly, fmt.Sprintf("%s on %s: answer of execution %s carries the tool result of execution %s",
			op.Key, op.Node, o.executionID, o.data.ExecutionID))
	}
}

// pickNode returns a random node that can be called now.
func (w *workload) pickNode(rng *rand.Rand) (name, url string) { return pickNodeOf(w.nodes, rng) }

// pickNodeOf returns a random node of nodes that can be called now.
func pickNodeOf(nodes endpoints, rng *rand.Rand) (name, url string) {
	urls := nodes.urls()
	if len(urls) == 0 {
		return "", ""
	}
	k := rng.IntN(len(urls))
	for name, url := range sortedPairs(urls) {
		if k == 0 {
			return name, url
		}
		k--
	}
	return "", ""
}

// history returns a copy of the ops recorded so far and the anomalies.
func (w *workload) history() ([]Op, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Op(nil), w.ops...), append([]string(nil), w.anomaly...)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
