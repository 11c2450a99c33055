package bench

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/iobuf"
)

// The workload of `carmy bench`: clients that each make one call at a time,
// in phases (seeding a replay pool, warming up, measuring), and what each
// call came back as.

// Outcomes of a call besides an error code (docs/errors.md).
const (
	outcomeRan       = "ran"       // 200, the tool ran
	outcomeReplayed  = "replayed"  // 200, a replay of a finished call
	outcomeTimeout   = "timeout"   // no answer within --timeout
	outcomeTransport = "transport" // no answer: connection refused, reset, …
)

// succeeded reports whether an outcome is a 200.
func succeeded(outcome string) bool { return outcome == outcomeRan || outcome == outcomeReplayed }

// outcomeProvoked is the answer mixed mode provokes on purpose: a call
// sent twice at once (--dup-share) finds the first still running.
const outcomeProvoked = "EXECUTION_UNCERTAIN/running"

// isError reports whether outcome counts as an error of a run in mode:
// anything but ran and replayed, except in mixed mode the uncertain
// answer its own duplicates provoke, which is Carmy doing its job.
func isError(mode, outcome string) bool {
	return !succeeded(outcome) && !(mode == modeMixed && outcome == outcomeProvoked)
}

// benchTarget is one node a run calls.
type benchTarget struct {
	idx  int                // in benchDriver.targets
	name string             // as given to --targets
	base string             // http://host:port
	req  benchRequestTarget // how its calls are sent
}

// benchDriver makes the calls of one run.
type benchDriver struct {
	opts    benchOptions
	runID   string       // makes request ids unique to the run
	client  *http.Client // GET /metrics; the calls go over benchConns
	targets []benchTarget
	// A call's body is head + request_id + tail: every call of a run has
	// the same tool, arguments and session, so a repeated request_id is a
	// replay, never an IDEMPOTENCY_CONFLICT.
	head, tail []byte
	pool       []string // replay mode: the request ids seeded

	// Counters of the current phase, for the progress line.
	liveCalls, liveErrors atomic.Int64
	// stall follows the measured phase's successful answers.
	stall stallTracker

	mu         sync.Mutex
	firstError map[string]string // outcome → what the first such call said
}

// newBenchDriver prepares a run of opts.
func newBenchDriver(opts benchOptions) (*benchDriver, error) {
	var rid [6]byte
	if _, err := crand.Read(rid[:]); err != nil {
		return nil, err
	}
	d := &benchDriver{opts: opts, runID: hex.EncodeToString(rid[:]), firstError: map[string]string{}}
	if d.opts.Session == "" {
		d.opts.Session = "bench-" + d.runID
	}
	tc, err := certs.ClientConfig(opts.CAFile)
	if err != nil {
		return nil, err
	}
	header := [][2]string{{"Content-Type", "application/json"}}
	if opts.Transport == transportMCP {
		header = mcpHeaders(opts.MCPVersion, opts.Tool)
	}
	header = append(header, [2]string{"User-Agent", "carmy-bench/" + opts.Version})
	if opts.Token != "" {
		header = append(header, [2]string{"Authorization", "Bearer " + opts.Token})
	}
	for i, t := range opts.Targets {
		base, err := targetURL(t)
		if err != nil {
			return nil, err
		}
		path := "/v1/tools/call"
		if opts.Transport == transportMCP {
			path = "/mcp"
		}
		rt, err := newBenchRequestTarget(base+path, header, tc)
		if err != nil {
			return nil, err
		}
		d.targets = append(d.targets, benchTarget{idx: i, name: t, base: base, req: rt})
	}
	tr := &http.Transport{
		// A benchmark goes straight to its targets, whatever $HTTP_PROXY says.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: opts.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSClientConfig:     tc,
	}
	d.client = &http.Client{Transport: tr, Timeout: opts.Timeout}
	if opts.Transport == transportMCP {
		d.head, d.tail = mcpBody(opts.MCPVersion, opts.Tool, opts.ArgsSize, d.opts.Session)
		return d, nil
	}

	// {"tool":"…","arguments":{"payload":"…"},"session_id":"…","request_id":"<id>"}
	head := make([]byte, 0, 96+len(opts.Tool)+opts.ArgsSize+len(d.opts.Session))
	head = append(head, `{"tool":"`...)
	head = append(head, opts.Tool...)
	head = append(head, `","arguments":{"payload":"`...)
	head = appendRandomText(head, opts.ArgsSize)
	head = append(head, `"},"session_id":"`...)
	head = append(head, d.opts.Session...)
	head = append(head, `","request_id":"`...)
	d.head, d.tail = head, []byte(`"}`)
	return d, nil
}

// close releases the driver's idle connections.
func (d *benchDriver) close() { d.client.CloseIdleConnections() }

// appendRandomText appends n random letters and digits: nothing a JSON
// string has to escape.
func appendRandomText(b []byte, n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for range n {
		b = append(b, alphabet[rand.N(len(alphabet))])
	}
	return b
}

// benchClient is the state of one client goroutine, kept across phases.
type benchClient struct {
	idx  int
	rng  *rand.Rand
	seq  int64 // request ids made
	turn int   // which target is next
	// lane makes the client's calls; dup the second of a duplicate call,
	// at the same time.
	lane, dup benchLane
	body      []byte   // the body of the call being made
	finished  []string // mixed mode: ids that got a 200, a ring
	next      int      // the ring's next slot once full
	seeded    []string // the ids the seed phase got a 200 for

	// The measured calls.
	latencies []time.Duration
	outcomes  map[string]int64
}

// finishedRing bounds the ids a mixed-mode client remembers for retries.
const finishedRing = 4096

func newBenchClients(n, targets int, latencyHint int64) []*benchClient {
	per := min(max(latencyHint/int64(n)+64, 1024), 1<<20)
	out := make([]*benchClient, n)
	for i := range out {
		out[i] = &benchClient{
			idx:       i,
			rng:       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
			turn:      i,
			lane:      benchLane{conns: make([]*benchConn, targets), buf: make([]byte, 0, 4096)},
			dup:       benchLane{conns: make([]*benchConn, targets)},
			latencies: make([]time.Duration, 0, per),
			outcomes:  map[string]int64{},
		}
	}
	return out
}

// closeConns closes the connections of clients.
func closeConns(clients []*benchClient) {
	for _, c := range clients {
		c.lane.closeAll()
		c.dup.closeAll()
	}
}

// target returns the client's next target: clients start at their index
// and rotate, so the calls spread evenly, and a retry or a duplicate goes
// to another node than the first attempt.
func (c *benchClient) target(d *benchDriver) *benchTarget {
	t := &d.targets[c.turn%len(d.targets)]
	c.turn++
	return t
}

func (c *benchClient) remember(id string) {
	if len(c.finished) < finishedRing {
		c.finished = append(c.finished, id)
		return
	}
	c.finished[c.next] = id
	c.next = (c.next + 1) % finishedRing
}

// benchPhase is one stretch of calls by every client.
type benchPhase struct {
	name     string      // for the progress line
	kind     string      // modeNew, modeReplay, modeMixed, or phaseSeed
	deadline time.Time   // zero: none
	budget   *callBudget // nil: until the deadline
	total    int64       // the budget's calls, for the progress line
	record   bool        // keep latencies and outcomes
}

// phaseSeed makes new calls and keeps the ids that finished, for replays.
const phaseSeed = "seed"

// callBudget hands out a number of calls to the clients.
type callBudget struct{ left atomic.Int64 }

func newCallBudget(n int64) *callBudget {
	b := &callBudget{}
	b.left.Store(n)
	return b
}

// take claims up to want calls and returns how many it got.
func (b *callBudget) take(want int64) int64 {
	for {
		left := b.left.Load()
		if left <= 0 {
			return 0
		}
		got := min(left, want)
		if b.left.CompareAndSwap(left, left-got) {
			return got
		}
	}
}

// runPhase runs every client through ph and returns how long it took.
func (d *benchDriver) runPhase(ctx context.Context, clients []*benchClient, ph *benchPhase) time.Duration {
	d.liveCalls.Store(0)
	d.liveErrors.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { d.loop(ctx, c, ph) })
	}
	wg.Wait()
	return time.Since(start)
}

// What a client's next call is.
const (
	callNew    = iota // a fresh request id
	callRepeat        // an id that finished before: a replay
	callDup           // a fresh id sent twice at once
)

// loop makes calls, one at a time, until the phase ends.
func (d *benchDriver) loop(ctx context.Context, c *benchClient, ph *benchPhase) {
	for ctx.Err() == nil {
		if !ph.deadline.IsZero() && !time.Now().Before(ph.deadline) {
			return
		}
		kind := callNew
		switch ph.kind {
		case modeReplay:
			kind = callRepeat
		case modeMixed:
			if c.rng.Float64() < d.opts.RetryShare && len(c.finished) > 0 {
				kind = callRepeat
			} else if c.rng.Float64() < d.opts.DupShare {
				kind = callDup
			}
		}
		if ph.budget != nil {
			want := int64(1)
			if kind == callDup {
				want = 2
			}
			switch ph.budget.take(want) {
			case 0:
				return
			case 1:
				if kind == callDup {
					kind = callNew
				}
			}
		}

		switch {
		case kind != callRepeat:
			c.body = d.newBody(c.body[:0], c)
		case ph.kind == modeReplay:
			c.body = d.bodyOf(c.body[:0], d.pool[c.rng.IntN(len(d.pool))])
		default:
			c.body = d.bodyOf(c.body[:0], c.finished[c.rng.IntN(len(c.finished))])
		}
		body := c.body

		if kind == callDup {
			// The same call through two nodes at once: the cluster runs
			// it once; the other answer is a replay or
			// EXECUTION_UNCERTAIN.
			var (
				wg            sync.WaitGroup
				o2            string
				lat2          time.Duration
				counted2      bool
				first, second = c.target(d), c.target(d)
			)
			wg.Go(func() { o2, lat2, counted2 = d.call(ctx, second, body, &c.dup) })
			o1, lat1, counted1 := d.call(ctx, first, body, &c.lane)
			wg.Wait()
			d.record(c, ph, o1, lat1, counted1)
			d.record(c, ph, o2, lat2, counted2)
			if succeeded(o1) || succeeded(o2) {
				c.remember(d.idOf(body))
			}
			continue
		}

		o, lat, counted := d.call(ctx, c.target(d), body, &c.lane)
		d.record(c, ph, o, lat, counted)
		if succeeded(o) {
			switch {
			case ph.kind == phaseSeed:
				c.seeded = append(c.seeded, d.idOf(body))
			case ph.kind == modeMixed && kind == callNew:
				c.remember(d.idOf(body))
			}
		}
	}
}

// record counts one call of the phase.
func (d *benchDriver) record(c *benchClient, ph *benchPhase, outcome string, lat time.Duration, counted bool) {
	if !counted {
		return
	}
	d.liveCalls.Add(1)
	if isError(d.opts.Mode, outcome) {
		d.liveErrors.Add(1)
	}
	if ph.record {
		c.latencies = append(c.latencies, lat)
		c.outcomes[outcome]++
		if succeeded(outcome) {
			d.stall.success(time.Now())
		}
	}
}

// newBody appends to body the body of a call with a fresh request id,
// <run id>-<client>-<n>.
func (d *benchDriver) newBody(body []byte, c *benchClient) []byte {
	body = append(body, d.head...)
	body = append(body, d.runID...)
	body = append(body, '-')
	body = strconv.AppendInt(body, int64(c.idx), 10)
	body = append(body, '-')
	body = strconv.AppendInt(body, c.seq, 10)
	c.seq++
	return append(body, d.tail...)
}

// bodyOf appends to body the body of the call with request id id.
func (d *benchDriver) bodyOf(body []byte, id string) []byte {
	body = append(body, d.head...)
	body = append(body, id...)
	return append(body, d.tail...)
}

// idOf returns the request id of a body newBody or bodyOf made.
func (d *benchDriver) idOf(body []byte) string {
	return string(body[len(d.head) : len(body)-len(d.tail)])
}

// call sends one call to t on lane and classifies the answer. A call cut
// short by the end of ctx (Ctrl-C) is not counted. The lane's answer
// buffer is reused from call to call; body is written before call returns.
func (d *benchDriver) call(ctx context.Context, t *benchTarget, body []byte, lane *benchLane) (outcome string, latency time.Duration, counted bool) {
	start := time.Now()
	a, err := d.roundTrip(ctx, lane, t.idx, &t.req, body, d.opts.Timeout)
	latency = time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, false
		}
		outcome = outcomeTransport
		if isTimeout(err) {
			outcome = outcomeTimeout
		}
		d.noteError(outcome, func() string { return fmt.Sprintf("%s: %v", t.name, err) })
		return outcome, latency, true
	}
	if d.opts.Transport == transportMCP {
		outcome, detail := classifyMCP(a.status, a.body)
		if !succeeded(outcome) {
			d.noteError(outcome, func() string { return t.name + ": " + detail })
		}
		return outcome, latency, true
	}
	if a.status == http.StatusOK {
		// docs/api.md#calling-a-tool-post-v1toolscall: a replay carries Idempotent-Replayed: true.
		if a.replayed {
			return outcomeReplayed, latency, true
		}
		return outcomeRan, latency, true
	}
	outcome, detail := classifyError(a.status, a.body)
	d.noteError(outcome, func() string { return t.name + ": " + detail })
	return outcome, latency, true
}

// maxAnswerRead bounds how much of an answer is read; the rest is dropped
// with the connection.
const maxAnswerRead = 1 << 20

// readAnswer appends what r gives to buf, up to maxAnswerRead bytes.
func readAnswer(buf []byte, r io.Reader) ([]byte, error) {
	return iobuf.ReadAppend(buf, r, maxAnswerRead)
}

// classifyError names the outcome of a non-200 answer: its error code
// (EXECUTION_UNCERTAIN/<status> with the record's status), or
// http_<status> without the API's error envelope; detail says what the
// answer said.
func classifyError(status int, body []byte) (outcome, detail string) {
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != "" && len(env.Error.Code) <= 64 && jsonSafe(env.Error.Code) {
		outcome = env.Error.Code
		if outcome == "EXECUTION_UNCERTAIN" && env.Error.Status != "" && len(env.Error.Status) <= 32 && jsonSafe(env.Error.Status) {
			outcome += "/" + env.Error.Status
		}
		return outcome, fmt.Sprintf("%d %s: %s", status, env.Error.Code, env.Error.Message)
	}
	text := bytes.TrimSpace(body)
	if len(text) > 200 {
		text = append(text[:200:200], "…"...)
	}
	return "http_" + strconv.Itoa(status), fmt.Sprintf("%d %s: %q", status, http.StatusText(status), text)
}

// noteError keeps what the first call of each failed outcome said.
func (d *benchDriver) noteError(outcome string, detail func() string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.firstError[outcome]; !ok {
		d.firstError[outcome] = detail()
	}
}

// errorDetail returns what the first call with outcome said.
func (d *benchDriver) errorDetail(outcome string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.firstError[outcome]
}
