package mcp

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmyhq/carmy/api/mcp/internal/fastpath"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/store"
)

// List changes reach the clients that listen, when the node has upstream
// MCP servers (Config.Upstreams), whose lists change while it runs:
//
//   - from 2026-07-28 on, on a subscriptions/listen stream: the first
//     event is notifications/subscriptions/acknowledged with what Carmy
//     agreed to send (tools always, resources and prompts when an
//     upstream offers them, no resource subscriptions), then each
//     notification carries the listen request's id in _meta
//     io.modelcontextprotocol/subscriptionId;
//   - before, on the stream a GET of /mcp opens (Accept
//     text/event-stream): every kind of list_changed.
//
// A notification is sent when what the stream's caller sees changed:
// its tools (the tools/list it would get), or the resources, templates
// or prompts of the upstreams it may see. A caller whose view did not
// change hears nothing, so a notification tells nothing of servers it
// may not see. The node looks again whenever an upstream was listed
// (its notifications/…/list_changed, a periodic listing) and every
// watchInterval. A stream is stateless as the endpoint is: no event ids,
// no resumption; a client that reconnects lists again. Streams end when
// the node stops (CloseStreams); a listen stream then gets its result.

// Bounds of the streams a node holds open.
const (
	maxStreams             = 1024
	maxStreamsPerPrincipal = 16
	// keepaliveInterval is how often an idle stream gets a comment line,
	// so that proxies keep it open.
	keepaliveInterval = 25 * time.Second
	// streamWriteTimeout bounds one write of a stream.
	streamWriteTimeout = 30 * time.Second
	// watchInterval is how often the node looks for changes besides when
	// an upstream was listed (tools a program registers, say).
	watchInterval = 5 * time.Second
)

// The kinds of lists, and their notifications.
const (
	kindTools = iota
	kindResources
	kindPrompts
	kinds
)

var listChanged = [kinds]string{
	"notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed",
}

// hub holds a node's open streams.
type hub struct {
	mu           sync.Mutex
	streams      map[*listener]struct{}
	perPrincipal map[string]int
	watching     bool
	closed       bool
	closing      chan struct{} // closed by CloseStreams
}

// listener is one open stream.
type listener struct {
	caller *engine.Caller
	want   [kinds]bool
	// seen digests what caller saw of each kind when it was last told
	// (written by the watcher only, once registered).
	seen [kinds]uint64
	// out holds the notifications to send, one of each kind at most.
	out chan int
}

// CloseStreams ends every open notification stream and refuses new ones:
// call it when the server shuts down (http.Server.RegisterOnShutdown),
// for a stream lasts until its client leaves.
func (h *Handler) CloseStreams() {
	hb := &h.streams
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if !hb.closed {
		hb.closed = true
		if hb.closing == nil {
			hb.closing = make(chan struct{})
		}
		close(hb.closing)
	}
}

// errTooManyStreams refuses a stream over the bounds.
var errTooManyStreams = store.NewError(store.CodeRateLimited, "too many notification streams are open: close one first")

// register opens a stream of caller's and starts the watcher if it is the
// first. nil, with an error, when over the bounds or closing.
func (h *Handler) register(caller *engine.Caller, want [kinds]bool) (*listener, error) {
	l := &listener{caller: caller, want: want, out: make(chan int, kinds)}
	l.seen = h.digests(caller)
	hb := &h.streams
	hb.mu.Lock()
	defer hb.mu.Unlock()
	switch {
	case hb.closed:
		return nil, store.NewError(store.CodeUnavailable, "the node is stopping")
	case len(hb.streams) >= maxStreams || hb.perPrincipal[caller.Principal] >= maxStreamsPerPrincipal:
		return nil, errTooManyStreams
	}
	if hb.streams == nil {
		hb.streams = make(map[*listener]struct{})
		hb.perPrincipal = make(map[string]int)
		hb.closing = make(chan struct{})
	}
	hb.streams[l] = struct{}{}
	hb.perPrincipal[caller.Principal]++
	if !hb.watching {
		hb.watching = true
		go h.watch(hb.closing)
	}
	return l, nil
}

func (h *Handler) unregister(l *listener) {
	hb := &h.streams
	hb.mu.Lock()
	defer hb.mu.Unlock()
	delete(hb.streams, l)
	if hb.perPrincipal[l.caller.Principal]--; hb.perPrincipal[l.caller.Principal] <= 0 {
		delete(hb.perPrincipal, l.caller.Principal)
	}
}

// watch looks for changes until closing, after each listing of an
// upstream and every watchInterval.
func (h *Handler) watch(closing <-chan struct{}) {
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	ups := h.cfg.Upstreams
	toolsGen, upsGen := h.cfg.Runtime.ToolsGeneration(), ups.Generation()
	for {
		select {
		case <-closing:
			return
		case <-ups.Changed():
		case <-tick.C:
		}
		t, u := h.cfg.Runtime.ToolsGeneration(), ups.Generation()
		if t == toolsGen && u == upsGen {
			continue
		}
		toolsGen, upsGen = t, u
		h.notifyChanges()
	}
}

// notifyChanges tells each stream whose caller's view changed.
func (h *Handler) notifyChanges() {
	hb := &h.streams
	hb.mu.Lock()
	ls := make([]*listener, 0, len(hb.streams))
	for l := range hb.streams {
		ls = append(ls, l)
	}
	hb.mu.Unlock()
	views := make(map[*engine.Caller][kinds]uint64)
	for _, l := range ls {
		d, ok := views[l.caller]
		if !ok {
			d = h.digests(l.caller)
			views[l.caller] = d
		}
		for k := range kinds {
			if d[k] != l.seen[k] && l.want[k] {
				select {
				case l.out <- k:
				default: // full: one of each kind is pending at least
				}
			}
		}
		l.seen = d
	}
}

// digests digests what caller sees of each kind of list.
func (h *Handler) digests(caller *engine.Caller) [kinds]uint64 {
	var d [kinds]uint64
	d[kindTools] = digest(h.cfg.Runtime.ToolsFor(*caller))
	see := seer(caller)
	ups := h.cfg.Upstreams
	d[kindResources] = digest([]any{ups.Resources(see), ups.ResourceTemplates(see)})
	d[kindPrompts] = digest(ups.Prompts(see))
	return d
}

func digest(v any) uint64 {
	raw, _ := json.Marshal(v)
	f := fnv.New64a()
	_, _ = f.Write(raw)
	return f.Sum64()
}

// streamCaller is the caller of r, authenticated already.
func (h *Handler) streamCaller(r *http.Request) *engine.Caller {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		c, _ := ti.Extra[callerKey].(*engine.Caller)
		return c
	}
	return h.cfg.Anonymous
}

// serveStandalone serves a GET of /mcp before 2026-07-28 that accepts an
// event stream, when the node has upstreams, and reports whether it did;
// any other GET is the SDK's to refuse.
func (h *Handler) serveStandalone(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.Upstreams == nil || r.Method != http.MethodGet {
		return false
	}
	if _, streamOK := fastpath.Accepts(r.Header.Values("Accept")); !streamOK {
		return false
	}
	if mcpversion.For(r.Header.Get("Mcp-Protocol-Version")).Stateless {
		return false // no such stream from 2026-07-28 on
	}
	caller := h.streamCaller(r)
	if caller == nil {
		return false
	}
	if err := h.admit(r); err != nil {
		h.refuseRate(w, nil, err)
		return true
	}
	l, err := h.register(caller, [kinds]bool{true, true, true})
	if err != nil {
		h.refuseStream(w, nil, err)
		return true
	}
	defer h.unregister(l)
	h.notifyStream(w, r, l, nil, nil)
	return true
}

// listenParams are the params of subscriptions/listen.
type listenParams struct {
	Notifications *struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// metaSubscriptionID is the _meta key of a notification on a listen
// stream: the listen request's id.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// serveListen answers a subscriptions/listen (2026-07-28) on an event
// stream that lasts until the client leaves or the node stops.
func (h *Handler) serveListen(w http.ResponseWriter, r *http.Request, msg ownMessage) {
	var p listenParams
	if len(msg.Params) == 0 || json.Unmarshal(msg.Params, &p) != nil || p.Notifications == nil {
		writeErrorResult(w, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing required 'notifications' field"})
		return
	}
	caller := h.streamCaller(r)
	if caller == nil {
		writeErrorResult(w, msg.ID, errNoCaller)
		return
	}
	resources, prompts := h.cfg.Upstreams.Offers()
	want := [kinds]bool{p.Notifications.ToolsListChanged, p.Notifications.ResourcesListChanged && resources,
		p.Notifications.PromptsListChanged && prompts}
	agreed := map[string]any{}
	for k, name := range []string{"toolsListChanged", "resourcesListChanged", "promptsListChanged"} {
		if want[k] {
			agreed[name] = true
		}
	}
	subID := json.RawMessage(msg.ID)
	ack, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
		"params": map[string]any{"_meta": map[string]any{metaSubscriptionID: subID}, "notifications": agreed}})
	result := responseBytes(msg.ID, mustJSON(map[string]any{"_meta": map[string]any{metaSubscriptionID: subID}}))
	if !want[kindTools] && !want[kindResources] && !want[kindPrompts] {
		// Nothing to listen to: acknowledged, and over.
		startStream(w)
		writeEvent(w, ack)
		writeEvent(w, result)
		flush(w)
		return
	}
	l, err := h.register(caller, want)
	if err != nil {
		h.refuseStream(w, msg.ID, err)
		return
	}
	defer h.unregister(l)
	h.notifyStream(w, r, l, subID, [][]byte{ack, result})
}

// notifyStream writes l's notifications to w until the client leaves or the
// node stops. For a listen stream, ends holds the acknowledgement, sent
// first, and the result, sent when the node stops; subID stamps each
// notification.
func (h *Handler) notifyStream(w http.ResponseWriter, r *http.Request, l *listener, subID json.RawMessage, ends [][]byte) {
	startStream(w)
	if ends != nil {
		writeEvent(w, ends[0])
	}
	// Each write is given its own time, where the server's bound on an
	// answer counts from its header: a stream lasts, a client that stops
	// reading is cut off.
	rc := http.NewResponseController(w)
	sent := func() {
		flush(w)
		_ = rc.SetWriteDeadline(time.Now().Add(keepaliveInterval + streamWriteTimeout))
	}
	sent()
	h.streams.mu.Lock()
	closing := h.streams.closing
	h.streams.mu.Unlock()
	keepalive := time.NewTicker(keepaliveInterval)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-closing:
			if ends != nil {
				writeEvent(w, ends[1])
				sent()
			}
			return
		case k := <-l.out:
			params := map[string]any{}
			if subID != nil {
				params["_meta"] = map[string]any{metaSubscriptionID: subID}
			}
			writeEvent(w, mustJSON(map[string]any{"jsonrpc": "2.0", "method": listChanged[k], "params": params}))
			sent()
		case <-keepalive.C:
			_, _ = w.Write([]byte(": keepalive\n\n"))
			sent()
		}
	}
}

// startStream answers 200 with an event stream.
func startStream(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
}

// refuseStream answers a stream refused by register: 429 RATE_LIMITED
// over the bounds, 503 UNAVAILABLE while the node stops.
func (h *Handler) refuseStream(w http.ResponseWriter, id json.RawMessage, err error) {
	code := store.CodeOf(err)
	status := http.StatusTooManyRequests
	rpcCode := CodeRateLimited
	if code == store.CodeUnavailable {
		status, rpcCode = http.StatusServiceUnavailable, CodeUpstreamError
		w.Header().Set("Retry-After", "1")
	}
	writeRPCError(w, status, id, rpcCode, err.Error(), envelope(code, nil, err.Error()))
}

// mustJSON encodes v, which always encodes.
func mustJSON(v any) []byte {
	raw, err := jsonscan.MarshalNoHTML(v)
	if err != nil {
		return []byte("{}")
	}
	return raw
}
