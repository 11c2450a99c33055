package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/didyoumean"
	"github.com/carmyhq/carmy/internal/netaddr"
)

// The flags of `carmy bench`, their defaults and their checks.

const benchUsage = `Usage: carmy bench [flags]

Drives one or more running Carmy nodes with tool calls over HTTP and reports
the throughput, the latency and what the calls came back as.

Flags:
  --targets h:p,...   the nodes to call, round-robin; http:// URLs too (default 127.0.0.1:8080) [$CARMY_BENCH_TARGETS]
  --token secret      a caller's token, sent as Authorization: Bearer [$CARMY_TOKEN]
  --ca-file PEM       CA certificates to trust for https:// targets besides the system's [$CARMY_CA_FILE]
  --clients n         concurrent clients, each one call at a time (default 16)
  --duration d        how long to measure (default 10s)
  --calls n           measure this many calls instead (--duration is then ignored)
  --warmup d          call for this long first without counting (default 0)
  --mode m            what the calls are (default new):
                        new     a fresh request_id per call: the tool runs every time
                        replay  seed --replay-pool calls first, then repeat them: every call is a replay
                        mixed   --retry-share of the calls repeat a finished one, --dup-share of the
                                new ones are sent twice at once (both counted), the rest are new;
                                the EXECUTION_UNCERTAIN a duplicate meets is counted, not an error
  --replay-pool n     calls seeded before a replay run (default 1000)
  --retry-share f     share of mixed calls that repeat a finished call (default 0.2)
  --dup-share f       share of new mixed calls sent twice at once (default 0.05)
  --tool name         the tool to call (default echo, a demo tool of carmy serve --dev)
  --transport t       how calls are made (default http):
                        http    POST /v1/tools/call
                        mcp     tools/call at /mcp, one JSON-RPC request per call (stateless
                                Streamable HTTP, as an MCP client sends it once connected),
                                the request_id in _meta carmy/request_id
  --mcp-version v     the MCP protocol version of --transport mcp (default 2026-07-28, the newest):
                        2026-07-28  each call carries the version, clientInfo and clientCapabilities
                                    in _meta and the Mcp-Method and Mcp-Name headers
                        2025-11-25, 2025-06-18  the Mcp-Protocol-Version header alone
  --args-size n       bytes of random text in the arguments, {"payload":"…"} (default 64)
  --session id        session_id of every call (default bench-<run id>, new each run)
  --timeout d         bound on each request (default 10s)
  --metrics           scrape GET /metrics of every target before and after, for the
                      Raft log writes (fsync batches) per call and node (default true; --metrics=false to skip)
  --progress d        print a progress line on stderr this often (default 1s)
  --quiet             no progress lines
  --json              print the result as one JSON object
  --label text        a name for the run, kept in the --json result (e.g. 3-node)
  --table file        print a comparison table of a file of --json results, one per line, and exit

Outcomes: ran (200, the tool ran), replayed (200, a replay), the error code of an
error answer (EXECUTION_UNCERTAIN/<status> with its status), http_<status> for an
answer without the error envelope, timeout and transport for calls without an answer.
Every outcome but ran and replayed counts as an error.

The report also gives the longest stall: the longest stretch of the run without a
successful answer (from its start, or one answer, to the next, or to its end). Under
steady load it is milliseconds; across a leader's death it is how long writes stopped
(scripts/bench failover measures that).

Exit status: 0 when the run ends, even if some calls failed; 1 when every call
failed (a dead target?) or the run was interrupted; 2 for a usage error.
Ctrl-C (or SIGTERM) stops the run early; it still reports the calls made.

Examples:
  carmy serve --dev &
  carmy bench
  carmy bench --targets 127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083 --clients 64 --duration 30s
  carmy bench --mode replay --calls 100000 --json
`

// Environment variables of `carmy bench`.
const (
	envBenchTargets = "CARMY_BENCH_TARGETS"
	envBenchToken   = "CARMY_TOKEN"
)

// Modes of `carmy bench`.
const (
	modeNew    = "new"
	modeReplay = "replay"
	modeMixed  = "mixed"
)

// maxArgsSize bounds --args-size: far above what a node accepts (1 MiB by
// default), low enough that a typo does not exhaust memory.
const maxArgsSize = 64 << 20

// benchOptions is what `carmy bench` is told by flags and the environment.
type benchOptions struct {
	Targets    []string // as given, host:port or URL
	Token      string
	CAFile     string
	Clients    int
	Duration   time.Duration
	Calls      int64 // > 0: a number of calls instead of Duration
	Warmup     time.Duration
	Mode       string
	ReplayPool int
	RetryShare float64
	DupShare   float64
	Tool       string
	Transport  string // http or mcp
	MCPVersion string // the protocol version of --transport mcp
	ArgsSize   int
	Session    string // "" until the run picks bench-<run id>
	Timeout    time.Duration
	Metrics    bool
	Progress   time.Duration // 0: none
	JSON       bool
	Label      string
	Table      string // --table: format this file and exit
	Version    string // of the carmy build, for the User-Agent (not a flag)
}

// benchFlagSet declares the flags of `carmy bench` over opts, targets and
// quiet, whose values are the defaults; it prints nothing of its own.
func benchFlagSet(opts *benchOptions, targets *string, quiet *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("carmy bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the hint follows the problem, below; --help prints the usage
	fs.StringVar(targets, "targets", *targets, "")
	fs.StringVar(&opts.Token, "token", opts.Token, "")
	fs.StringVar(&opts.CAFile, "ca-file", opts.CAFile, "")
	fs.IntVar(&opts.Clients, "clients", opts.Clients, "")
	fs.DurationVar(&opts.Duration, "duration", opts.Duration, "")
	fs.Int64Var(&opts.Calls, "calls", 0, "")
	fs.DurationVar(&opts.Warmup, "warmup", 0, "")
	fs.StringVar(&opts.Mode, "mode", opts.Mode, "")
	fs.IntVar(&opts.ReplayPool, "replay-pool", opts.ReplayPool, "")
	fs.Float64Var(&opts.RetryShare, "retry-share", opts.RetryShare, "")
	fs.Float64Var(&opts.DupShare, "dup-share", opts.DupShare, "")
	fs.StringVar(&opts.Tool, "tool", opts.Tool, "")
	fs.StringVar(&opts.Transport, "transport", opts.Transport, "")
	fs.StringVar(&opts.MCPVersion, "mcp-version", opts.MCPVersion, "")
	fs.IntVar(&opts.ArgsSize, "args-size", opts.ArgsSize, "")
	fs.StringVar(&opts.Session, "session", "", "")
	fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "")
	fs.BoolVar(&opts.Metrics, "metrics", opts.Metrics, "")
	fs.DurationVar(&opts.Progress, "progress", opts.Progress, "")
	fs.BoolVar(quiet, "quiet", false, "")
	fs.BoolVar(&opts.JSON, "json", false, "")
	fs.StringVar(&opts.Label, "label", "", "")
	fs.StringVar(&opts.Table, "table", "", "")
	return fs
}

// FlagNames returns the names of the flags of `carmy bench`, for the
// tests that keep its help and docs/cli.md complete.
func FlagNames() []string {
	var names []string
	benchFlagSet(&benchOptions{}, new(string), new(bool)).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// parseBenchFlags reads `carmy bench` flags over the defaults and the
// environment, and checks them. A usage error was printed, with a hint to
// the usage, and is ErrUsage; --help printed the usage and is flag.ErrHelp.
func parseBenchFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (benchOptions, error) {
	opts := benchOptions{
		Clients: 16, Duration: 10 * time.Second, Mode: modeNew, ReplayPool: 1000,
		RetryShare: 0.2, DupShare: 0.05, Tool: "echo", Transport: transportHTTP, MCPVersion: mcpVersionNewest, ArgsSize: 64, Timeout: 10 * time.Second,
		Metrics: true, Progress: time.Second, Token: getenv(envBenchToken), CAFile: getenv(certs.EnvCAFile),
	}
	targets := "127.0.0.1:8080"
	if t := getenv(envBenchTargets); t != "" {
		targets = t
	}
	var quiet bool
	fs := benchFlagSet(&opts, &targets, &quiet)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, benchUsage)
			return opts, flag.ErrHelp
		}
		fmt.Fprintf(stderr, "carmy bench: %s\n\nRun 'carmy bench --help' for the usage.\n", didyoumean.FlagError(err, fs))
		return opts, ErrUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if quiet {
		opts.Progress = 0
	}

	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "carmy bench: %s\n\nRun 'carmy bench --help' for the usage.\n", fmt.Sprintf(format, a...))
		return ErrUsage
	}
	if fs.NArg() > 0 {
		return opts, usageErr("unexpected argument %q", fs.Arg(0))
	}
	if opts.Table != "" {
		return opts, nil // the other flags do not matter
	}
	for _, t := range strings.Split(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			opts.Targets = append(opts.Targets, t)
		}
	}
	if len(opts.Targets) == 0 {
		return opts, usageErr("--targets is empty: give host:port of at least one node")
	}
	for _, t := range opts.Targets {
		if _, err := targetURL(t); err != nil {
			return opts, usageErr("%v", err)
		}
	}
	switch opts.Transport {
	case transportHTTP, transportMCP:
	default:
		return opts, usageErr("--transport %q: want http or mcp", opts.Transport)
	}
	if !slices.Contains(mcpVersions, opts.MCPVersion) {
		return opts, usageErr("--mcp-version %q: want one of %s", opts.MCPVersion, strings.Join(mcpVersions, ", "))
	}
	if set["mcp-version"] && opts.Transport != transportMCP {
		return opts, usageErr("--mcp-version belongs to --transport mcp")
	}
	switch opts.Mode {
	case modeNew, modeReplay, modeMixed:
	default:
		return opts, usageErr("--mode %q: want new, replay or mixed", opts.Mode)
	}
	switch {
	case opts.Clients < 1:
		return opts, usageErr("--clients %d: want at least 1", opts.Clients)
	case opts.Calls < 0:
		return opts, usageErr("--calls %d: want a positive number (or none, to run for --duration)", opts.Calls)
	case opts.Calls == 0 && opts.Duration <= 0:
		return opts, usageErr("--duration %s: must be positive", opts.Duration)
	case opts.Warmup < 0:
		return opts, usageErr("--warmup %s: must not be negative", opts.Warmup)
	case opts.Timeout <= 0:
		return opts, usageErr("--timeout %s: must be positive", opts.Timeout)
	case opts.Progress < 0:
		return opts, usageErr("--progress %s: must not be negative", opts.Progress)
	case !(opts.RetryShare >= 0 && opts.RetryShare <= 1): // NaN too
		return opts, usageErr("--retry-share %v: want a share between 0 and 1", opts.RetryShare)
	case !(opts.DupShare >= 0 && opts.DupShare <= 1):
		return opts, usageErr("--dup-share %v: want a share between 0 and 1", opts.DupShare)
	case opts.ReplayPool < 1:
		return opts, usageErr("--replay-pool %d: want at least 1", opts.ReplayPool)
	case opts.ArgsSize < 0 || opts.ArgsSize > maxArgsSize:
		return opts, usageErr("--args-size %d: want 0 to %d bytes", opts.ArgsSize, maxArgsSize)
	case opts.Tool == "":
		return opts, usageErr("--tool is empty")
	}
	if !jsonSafe(opts.Tool) {
		return opts, usageErr("--tool %q: want printable ASCII without quotes or backslashes", opts.Tool)
	}
	if set["session"] && (opts.Session == "" || len(opts.Session) > 255 || !jsonSafe(opts.Session)) {
		return opts, usageErr("--session %q: want 1 to 255 visible ASCII characters, without quotes or backslashes", opts.Session)
	}
	if opts.Mode != modeMixed && (set["retry-share"] || set["dup-share"]) {
		return opts, usageErr("--retry-share and --dup-share belong to --mode mixed")
	}
	if opts.Mode != modeReplay && set["replay-pool"] {
		return opts, usageErr("--replay-pool belongs to --mode replay")
	}
	return opts, nil
}

// targetURL turns a target (host:port, or an http:// or https:// URL) into
// the base URL requests are made against.
func targetURL(target string) (string, error) {
	u, err := netaddr.BaseURL(target)
	if err != nil {
		return "", fmt.Errorf("--targets: %w", err)
	}
	return u, nil
}

// jsonSafe reports whether s is visible ASCII without " or \, so that it
// goes into a JSON string as it is.
func jsonSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
