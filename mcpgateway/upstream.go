package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/store"
)

// Config declares one upstream MCP server. Exactly one of URL and Command
// is set.
type Config struct {
	// Name prefixes the upstream's tools: <Name>.<tool>. 1-64 characters
	// of A-Z a-z 0-9 _ - (no ".").
	Name string
	// URL is the server's Streamable HTTP endpoint (http or https).
	URL string
	// Headers are sent with every HTTP request to URL (credentials, say).
	// They never appear in a record, an answer or a log line.
	Headers map[string]string
	// AllowNetworks narrows the addresses URL may resolve to, as
	// engine.HTTPTool's does; the egress deny list applies either way.
	AllowNetworks []netip.Prefix
	// Command runs the server as a child process speaking MCP over its
	// stdin and stdout (one child per node); its stderr goes to the log.
	// The child gets no environment but PATH (the node's) and Env, runs in
	// Dir, in a process group of its own, and inherits no file descriptor
	// but stdin, stdout and stderr. A relative command path (with a
	// slash) is taken from the node's working directory, not from Dir.
	Command []string
	// Env is the child's environment besides PATH (which Env may set
	// too). Its values, like Headers', are secrets: they are replaced by
	// "[redacted]" wherever they appear in an answer.
	Env map[string]string
	// Dir is the child's working directory, which must exist (empty: the
	// node's).
	Dir string
	// Tools, when not nil, lists the only upstream tools (by their
	// upstream names) to register.
	Tools []string
	// Timeout bounds one call (engine.DefaultToolTimeout when zero).
	Timeout time.Duration
	// RequireRequestID refuses calls without a request_id.
	RequireRequestID bool
	// DedupeWindow makes calls without a request_id idempotent for that
	// long (engine.ToolSpec.DedupeWindow); RequireRequestID wins.
	DedupeWindow time.Duration
	// Effects sets, by upstream tool name, what the operator says
	// repeating a tool does (engine.ToolSpec.Effects), and RetryUncertain
	// which idempotent tools' uncertain executions a retry may settle by
	// running them again. A tool Effects does not name is EffectsOnce,
	// unless TrustAnnotations.
	Effects        map[string]engine.Effects
	RetryUncertain map[string]bool
	// Approval gates the named tools behind a person's decision
	// (engine.ToolSpec.Approval).
	Approval map[string]*engine.Approval
	// TrustAnnotations lets the upstream's own annotations decide the
	// effects of a tool Effects does not name (readOnlyHint: read_only;
	// else idempotentHint: idempotent; else once). Untrusted (the
	// default), annotations are listed to clients and change nothing.
	TrustAnnotations bool
	// ReconcileTool, when set, names the upstream tool that settles the
	// interrupted executions of every tool of this server (docs/config.md#reconcile-probes;
	// reconcile.go), for ReconcileGiveUp after each started
	// (engine.DefaultProbeGiveUp when zero).
	ReconcileTool   string
	ReconcileGiveUp time.Duration
	// RefreshInterval is how often the tools are listed again besides on
	// notifications/tools/list_changed (DefaultRefreshInterval when zero).
	RefreshInterval time.Duration
	// MaxBackoff bounds the pause between attempts to reconnect
	// (DefaultMaxBackoff when zero); the first pause is MinBackoff.
	MaxBackoff time.Duration
	// MaxAnswerBytes bounds every message read from the upstream, as it
	// is read: an HTTP body, one SSE event, one stdio line (0:
	// engine.DefaultMaxResultBytes; never less than MinAnswerBytes). Give
	// it the runtime's result limit. A call whose answer is larger fails
	// with RESULT_TOO_LARGE; a stdio child that sent it is replaced.
	MaxAnswerBytes int
	// CancelGrace is how long a stdio child has, once a call of it timed
	// out or was cancelled, to answer a ping; one that does not is killed
	// and replaced (DefaultCancelGrace when zero).
	CancelGrace time.Duration
	// Logger receives connections, listings and the detail of failures,
	// redacted (nil: slog.Default()).
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultRefreshInterval = 5 * time.Minute
	DefaultMaxBackoff      = 30 * time.Second
	DefaultCancelGrace     = 5 * time.Second
	MinBackoff             = 250 * time.Millisecond
)

// ProtocolVersion is the MCP version the gateway asks upstreams for (the
// newest with an initialize handshake, internal/mcpversion); a server
// that does not speak it negotiates an older one.
const ProtocolVersion = mcpversion.V20251125

// listTimeout bounds one connection's handshake and one listing.
const listTimeout = 30 * time.Second

// Registry is where an Upstream registers its tools: an *engine.Runtime.
type Registry interface {
	SetToolGroup(prefix string, specs []engine.ToolSpec) error
	SetToolGroupUnavailable(prefix string, err error) error
}

var _ Registry = (*engine.Runtime)(nil)

var upstreamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports whether name may name an upstream: 1-64 characters
// of A-Z a-z 0-9 _ - and not ReservedName.
func ValidName(name string) bool {
	return upstreamName.MatchString(name) && !strings.EqualFold(name, ReservedName)
}

// ReservedName may not name an upstream (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway): the prefix carmy.
// is Carmy's own.
const ReservedName = "carmy"

// Upstream is one upstream MCP server whose tools it keeps registered.
// Build it with New, then Start it; Close stops it. Safe for concurrent
// use.
type Upstream struct {
	cfg      Config
	reg      Registry
	log      *slog.Logger
	redactor *egress.Redactor
	target   string // the URL (redacted) or the command's name, for the log
	// maxAnswer bounds one message read from the upstream.
	maxAnswer int
	// childEnv is a stdio child's environment.
	childEnv []string
	// newTransport returns a transport for one connection.
	newTransport func() mcp.Transport
	client       *mcp.Client
	changed      chan struct{} // a list_changed arrived
	// progress routes the upstream's progress notifications to the
	// callers that listen.
	progress progressRoutes
	// listed, when set (NewDirectory), is told of every listing.
	listed atomic.Pointer[listedHook]

	// lists is what the upstream offers besides tools (passthrough.go).
	listsMu sync.Mutex
	lists   lists

	mu   sync.Mutex
	conn *conn // nil while not connected
	// attempt is closed, and replaced, as each attempt to connect ends,
	// connected or not (attemptEnded; session.go waits on it).
	attempt chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// conn is one connection to the upstream.
type conn struct {
	cs    *mcp.ClientSession
	child *child // the stdio child; nil over HTTP
}

// New checks cfg and returns its Upstream, not yet connected. An error
// names what is wrong without repeating the URL or a header's value.
func New(reg Registry, cfg Config) (*Upstream, error) {
	where := fmt.Sprintf("mcp server %q", cfg.Name)
	switch {
	case !upstreamName.MatchString(cfg.Name):
		return nil, fmt.Errorf("%s: the name must be 1-64 characters of A-Z a-z 0-9 _ -", where)
	case strings.EqualFold(cfg.Name, ReservedName):
		return nil, fmt.Errorf("%s: the name %s is reserved", where, ReservedName)
	case (cfg.URL == "") == (len(cfg.Command) == 0):
		return nil, fmt.Errorf("%s: give exactly one of url and command", where)
	case cfg.Timeout < 0 || cfg.RefreshInterval < 0 || cfg.MaxBackoff < 0 || cfg.DedupeWindow < 0 || cfg.CancelGrace < 0 || cfg.ReconcileGiveUp < 0:
		return nil, fmt.Errorf("%s: negative duration", where)
	case cfg.MaxAnswerBytes < 0:
		return nil, fmt.Errorf("%s: negative answer bound", where)
	case len(cfg.Command) > 0 && (len(cfg.Headers) > 0 || cfg.AllowNetworks != nil):
		return nil, fmt.Errorf("%s: headers and allow_networks apply to a url, not to a command", where)
	case cfg.URL != "" && (cfg.Env != nil || cfg.Dir != ""):
		return nil, fmt.Errorf("%s: env and dir apply to a command, not to a url", where)
	case len(cfg.Command) > 0 && cfg.Command[0] == "":
		return nil, fmt.Errorf("%s: an empty command", where)
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.CancelGrace == 0 {
		cfg.CancelGrace = DefaultCancelGrace
	}
	if cfg.MaxAnswerBytes == 0 {
		cfg.MaxAnswerBytes = engine.DefaultMaxResultBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Tools = slices.Clone(cfg.Tools)
	cfg.Effects, cfg.RetryUncertain = maps.Clone(cfg.Effects), maps.Clone(cfg.RetryUncertain)
	cfg.Approval = maps.Clone(cfg.Approval)
	cfg.Command = slices.Clone(cfg.Command)
	cfg.Env = maps.Clone(cfg.Env)
	u := &Upstream{
		cfg:       cfg,
		reg:       reg,
		log:       cfg.Logger.With(slog.String("mcp_server", cfg.Name)),
		changed:   make(chan struct{}, 1),
		attempt:   make(chan struct{}),
		maxAnswer: max(cfg.MaxAnswerBytes, MinAnswerBytes),
	}
	if cfg.URL != "" {
		parsed, err := url.Parse(cfg.URL)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			// Neither the URL nor url.Parse's error, which quotes it.
			return nil, fmt.Errorf("%s: the url is not an absolute http or https URL", where)
		}
		client, err := httpClient(cfg.Headers, cfg.AllowNetworks, u.maxAnswer)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		u.redactor = egress.NewRedactor(parsed, cfg.Headers)
		u.target = egress.RedactURL(parsed)
		u.newTransport = func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, MaxRetries: 2,
				// The client's body bounds each event first (and tells
				// which call it was for); this is a second bound, not
				// 0, which v1.8.0 takes for none.
				MaxEventSize: u.maxAnswer + MinAnswerBytes}
		}
	} else {
		if err := u.checkCommand(where); err != nil {
			return nil, err
		}
		u.target = u.cfg.Command[0]
		u.newTransport = func() mcp.Transport { return &stdioTransport{u: u} }
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "carmy", Version: "v1"}, &mcp.ClientOptions{
		Logger: u.log,
		// No roots, sampling or elicitation: the gateway lists and calls
		// tools, and passes resources and prompts through.
		Capabilities: &mcp.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			u.progress.deliver(req.Params)
		},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { u.listDue() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { u.listDue() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { u.listDue() },
	})
	return u, nil
}

// listDue asks for a listing (the upstream sent a list_changed).
func (u *Upstream) listDue() {
	select {
	case u.changed <- struct{}{}:
	default: // a listing is due already
	}
}

// Name returns the upstream's name, its tools' prefix.
func (u *Upstream) Name() string { return u.cfg.Name }

// Start declares the upstream's tool group unavailable and connects in
// the background, listing and registering its tools once connected, until
// Close (or ctx ends). It returns at once; calling it again does nothing.
func (u *Upstream) Start(ctx context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done != nil {
		return nil
	}
	if err := u.reg.SetToolGroupUnavailable(u.cfg.Name, u.unavailable("it has not been listed yet")); err != nil {
		return err
	}
	ctx, u.stop = context.WithCancel(ctx)
	u.done = make(chan struct{})
	go u.run(ctx)
	return nil
}

// Close stops reconnecting and closes the connection (a stdio child is
// asked to stop: its stdin is closed, then it is sent SIGTERM and, if it
// lingers, killed). Calls still running fail with UPSTREAM_UNREACHABLE:
// close an Upstream after the runtime has drained.
func (u *Upstream) Close() error {
	u.mu.Lock()
	stop, done := u.stop, u.done
	u.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-done
	return nil
}

// unavailable is the error calls of the group answer while it cannot be
// listed.
func (u *Upstream) unavailable(why string) error {
	return store.ErrUnavailable.WithMessage(fmt.Sprintf(
		"the tools of MCP server %q are unavailable: %s; the call did not run and nothing was reserved: retry later", u.cfg.Name, why))
}

// current returns the connection, or nil.
func (u *Upstream) current() *conn {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn
}

func (u *Upstream) setConn(cn *conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.conn = cn
}

// attemptEnded ends an attempt to connect: cn, when not nil, is the new
// connection (nil: the attempt failed). Whoever waits for the attempt is
// woken.
func (u *Upstream) attemptEnded(cn *conn) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if cn != nil {
		u.conn = cn
	}
	close(u.attempt)
	u.attempt = make(chan struct{})
}

// run connects, lists and serves until ctx ends, reconnecting with a
// growing pause whenever the connection is lost or a listing fails.
func (u *Upstream) run(ctx context.Context) {
	defer close(u.done)
	for attempt := 0; ; attempt++ {
		listed, err := u.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if listed {
			attempt = 0
		}
		why := "its connection was lost"
		if !listed {
			why = "it cannot be reached or listed"
		}
		if err := u.reg.SetToolGroupUnavailable(u.cfg.Name, u.unavailable(why)); err != nil {
			u.log.Error("mcp server: marking its tools unavailable", slog.Any("err", err))
		}
		pause := backoff(attempt, u.cfg.MaxBackoff)
		u.log.Warn("mcp server: unavailable; reconnecting", slog.String("target", u.target),
			slog.String("err", egress.Detail(err, u.redactor)), slog.Duration("retry_in", pause))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// backoff returns the pause before attempt+1: MinBackoff doubling to max.
func backoff(attempt int, max time.Duration) time.Duration {
	return min(MinBackoff<<min(attempt, 10), max)
}

// connectAndServe makes one connection, lists the tools, and keeps them
// listed until the connection ends, a listing fails or ctx ends. listed
// tells whether a listing succeeded.
func (u *Upstream) connectAndServe(ctx context.Context) (listed bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, listTimeout)
	tr := u.newTransport()
	cs, err := u.client.Connect(cctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	cancel()
	cn := &conn{cs: cs}
	if st, ok := tr.(*stdioTransport); ok && st.child != nil {
		cn.child = st.child
		if err != nil {
			// A child that did not shake hands in time is not waited for.
			cn.child.kill()
			cn.child.Close()
		} else {
			u.log.Info("mcp server: child started", slog.Int("pid", cn.child.pid()))
		}
	}
	if err != nil {
		u.attemptEnded(nil)
		return false, fmt.Errorf("connecting: %w", err)
	}
	ended := make(chan struct{})
	go func() {
		cs.Wait()
		close(ended)
	}()
	defer func() {
		if ctx.Err() == nil {
			// Refuse calls before the session goes: a call that found
			// no session would be recorded as UPSTREAM_UNREACHABLE.
			u.reg.SetToolGroupUnavailable(u.cfg.Name, u.unavailable("its connection was lost"))
		}
		u.setConn(nil)
		cs.Close()
	}()
	u.attemptEnded(cn)
	if err := u.refresh(ctx, cs); err != nil {
		return false, err
	}
	u.log.Info("mcp server: connected", slog.String("target", u.target))
	tick := time.NewTicker(u.cfg.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-ended:
			return true, errors.New("the connection ended")
		case <-u.changed:
		case <-tick.C:
		}
		if err := u.refresh(ctx, cs); err != nil {
			return true, err
		}
	}
}

// refresh lists the upstream's tools and registers them, replacing those
// registered before, then its resources, templates and prompts
// (passthrough.go), and tells the directory.
func (u *Upstream) refresh(ctx context.Context, cs *mcp.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var specs []engine.ToolSpec
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if u.cfg.Tools != nil && !slices.Contains(u.cfg.Tools, t.Name) {
			continue
		}
		spec, err := u.spec(t)
		if err != nil {
			// u.log names the server (mcp_server=<name>).
			u.log.Warn("mcp server: a tool is left out", slog.String("tool", t.Name), slog.String("err", u.redactor.Redact(err.Error())))
			continue
		}
		specs = append(specs, spec)
	}
	if err := u.reg.SetToolGroup(u.cfg.Name, specs); err != nil {
		return fmt.Errorf("registering tools: %w", err)
	}
	u.log.Debug("mcp server: tools listed", slog.Int("tools", len(specs)))
	changed, err := u.refreshLists(lctx, cs)
	if hook := u.listed.Load(); hook != nil {
		// Told even when this failed: the tools changed maybe.
		hook.d.listed(changed)
	}
	return err
}
