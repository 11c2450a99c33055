package main_test

// Browser tests of the operator console (docs/console.md): built `carmy serve`
// processes on loopback, and the page at /ui/ in headless Chromium driven
// with chromedp, asserting what a person sees and that what they do
// through the page changes the records (checked through the API).
//
// Chromium is found as $CARMY_CHROMIUM, else chromium, chromium-browser
// or google-chrome on PATH. Without one the tests skip, saying so, unless
// CARMY_REQUIRE_CHROMIUM=1 (CI), when they fail. A screenshot of each
// step goes to $CARMY_ARTIFACTS, else $TMPDIR/carmy-console-screenshots.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/carmyhq/carmy/tests/testutil"
)

// uiWait bounds each wait for the page or a node; the page refreshes every
// 5 s, and a dead node's executions are marked within the cluster's grace.
const uiWait = 30 * time.Second

// chromiumPath returns the browser to drive, or skips (fails when
// CARMY_REQUIRE_CHROMIUM is set) when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CARMY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CARMY_REQUIRE_CHROMIUM") != "" {
		t.Fatal("CARMY_REQUIRE_CHROMIUM is set but no Chromium was found (chromium, chromium-browser or google-chrome on PATH, or CARMY_CHROMIUM)")
	}
	testutil.SkipLoudly(t, "no Chromium found (chromium, chromium-browser or google-chrome on PATH, or CARMY_CHROMIUM): the console's browser tests need one; Debian: apt-get install chromium")
	return ""
}

// screenshotDir is where the steps' screenshots go.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CARMY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "carmy-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts one headless Chromium for the test, with its own
// profile, and returns a context to open tabs from.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return alloc
}

// consolePage is one tab on the console of a node.
type consolePage struct {
	t     *testing.T
	ctx   context.Context
	name  string // prefix of its screenshots
	dir   string
	shots int

	mu       sync.Mutex
	problems []string // exceptions, console errors, policy violations
}

// openConsole opens a tab on base+"/ui" (the redirect to /ui/ included)
// and records every script error and Content-Security-Policy violation.
func openConsole(t *testing.T, alloc context.Context, name, base string) *consolePage {
	t.Helper()
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	p := &consolePage{t: t, ctx: ctx, name: name, dir: screenshotDir(t)}
	if err := chromedp.Listen(ctx, p.watch); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	p.do("open "+base+"/ui", chromedp.Navigate(base+"/ui"), chromedp.WaitVisible(chromedp.CSS("#executions-h")))
	if u := p.eval(`location.pathname`); u != "/ui/" {
		t.Fatalf("/ui led to %s, want /ui/", u)
	}
	t.Logf("screenshots of %s go to %s", name, p.dir)
	return p
}

func (p *consolePage) watch(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			problem += " " + ev.ExceptionDetails.Exception.Description
		}
	case *log.EventEntryAdded:
		// The network's own errors (a 401 or 409 the page reads and
		// shows) are answers, not faults of the page.
		if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
			problem = fmt.Sprintf("%s: %s", ev.Entry.Source, ev.Entry.Text)
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			problem = "console.error"
		}
	}
	if problem != "" {
		p.mu.Lock()
		p.problems = append(p.problems, problem)
		p.mu.Unlock()
	}
}

// checkClean fails the test if the page threw, logged an error, or broke
// its Content-Security-Policy so far.
func (p *consolePage) checkClean() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.problems {
		p.t.Errorf("the page had a problem: %s", pr)
	}
	p.problems = nil
}

// do runs actions, failing the test (with a screenshot) if they fail.
func (p *consolePage) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, uiWait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.fail("%s: %v", what, err)
	}
}

func (p *consolePage) eval(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, uiWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		p.fail("evaluating %s: %v", expr, err)
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// set gives the field sel (CSS) value, as typing or choosing it would
// (with its input and change events).
func set(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		el.value = %q;
		el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true}));
	})()`, sel, value))
}

// click clicks the element sel (CSS) with the mouse, as a person would. A
// refresh may redraw the element between finding it and clicking it; the
// click is then tried again on the redrawn one.
func (p *consolePage) click(what, sel string) {
	p.t.Helper()
	deadline := time.Now().Add(uiWait)
	for {
		ctx, cancel := context.WithTimeout(p.ctx, uiWait)
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node") && !strings.Contains(err.Error(), "No node with given id") || time.Now().After(deadline) {
			p.fail("%s: %v", what, err)
		}
	}
}

// open clicks the link sel that opens the execution whose request id is
// requestID, and waits until its detail shows. A click that landed while
// a refresh moved the rows (and so opened nothing) is made again; opening
// a record twice is harmless.
func (p *consolePage) open(requestID, sel string) {
	p.t.Helper()
	deadline := time.Now().Add(uiWait)
	shows := fmt.Sprintf(`(document.querySelector('#detail-h') || {innerText: ''}).innerText.includes(%q)`, requestID)
	for {
		p.click("open "+requestID, sel)
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](shows,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(3*time.Second)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.fail("opening %s: its detail did not show: %v", requestID, err)
		}
	}
}

// text returns the text a person sees in the element sel (CSS).
func (p *consolePage) text(sel string) string {
	p.t.Helper()
	return p.eval(fmt.Sprintf(`(document.querySelector(%q) || {innerText: ''}).innerText`, sel))
}

// waitFor polls the page until the JavaScript predicate holds.
func (p *consolePage) waitFor(what, predicate string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, uiWait+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(uiWait))); err != nil {
		p.fail("waiting for %s: %v", what, err)
	}
}

// waitText waits until the element sel shows want.
func (p *consolePage) waitText(sel, want string) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%s to show %q", sel, want),
		fmt.Sprintf(`(document.querySelector(%q) || {innerText: ''}).innerText.includes(%q)`, sel, want))
}

// shot saves a full-page screenshot named after the step.
func (p *consolePage) shot(step string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, uiWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Errorf("screenshot %s: %v", step, err)
		return
	}
	p.shots++
	path := filepath.Join(p.dir, fmt.Sprintf("%s-%02d-%s.png", p.name, p.shots, step))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Errorf("screenshot %s: %v", step, err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

func (p *consolePage) fail(format string, args ...any) {
	p.t.Helper()
	p.shot("failed")
	p.t.Fatalf(format+"\nthe page shows:\n%s", append(args, p.visibleText())...)
}

func (p *consolePage) visibleText() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// uiCall makes a call and returns its execution id.
func uiCall(t *testing.T, base, token, body string) string {
	t.Helper()
	status, out := apiJSON(t, http.MethodPost, base+"/v1/tools/call", token, body)
	if status != http.StatusOK {
		t.Fatalf("call %s: %d %v", body, status, out)
	}
	return out["execution_id"].(string)
}

// startSlowCall starts a call that runs for a minute, in the background,
// and returns once base lists it running; it returns its execution id.
func startSlowCall(t *testing.T, base, requestID string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	body := fmt.Sprintf(`{"tool":"sleep","arguments":{"ms":55000},"request_id":%q}`, requestID)
	go func() { // its answer (or the node's death) is not this test's concern
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tools/call", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var id string
	testutil.WaitFor(t, uiWait, requestID+" running", func() error {
		status, out := apiJSON(t, http.MethodGet, base+"/v1/executions?request_id="+requestID, "", "")
		if status != http.StatusOK || out["status"] != "running" {
			return fmt.Errorf("lookup: %d %v", status, out)
		}
		id = out["execution_id"].(string)
		return nil
	})
	return id
}

// TestConsoleBrowser drives the console of a three-node cluster: the
// cluster panel, the attention list with an execution whose node was
// killed, the executions list and its filters, an execution's detail, a
// resolve and a refused cancel done through the page, adding and removing
// nodes, keyboard use of the dialogs, and the activity chart.
func TestConsoleBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds carmy, runs a cluster of processes and a browser")
	}
	testutil.LongTier(t, "the console in a browser")
	alloc := browser(t)
	bin := testutil.BuildCarmy(t)
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover")
	leader := c.Leader(t, uiWait)
	victim := c.Followers(leader)[0]
	base := leader.URL

	// Executions of every kind, on the node whose console is read.
	done := uiCall(t, base, "", `{"tool":"echo","arguments":{"hello":"console"},"request_id":"ui-done","session_id":"s-ui"}`)
	uiCall(t, base, "", `{"tool":"fail","arguments":{"message":"the printer is on fire"},"request_id":"ui-failed","session_id":"s-ui"}`)
	for i := range 6 {
		body := fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"KB-%d"},"request_id":"ui-order-%d"}`, i, i)
		uiCall(t, base, "", body)
		uiCall(t, base, "", body) // a replay
	}
	if status, _ := apiJSON(t, http.MethodPost, base+"/v1/tools/call", "", `{"tool":"create_order","arguments":{"sku":"other"},"request_id":"ui-order-0"}`); status != http.StatusConflict {
		t.Fatalf("a conflicting call: %d, want 409", status)
	}
	running := startSlowCall(t, base, "ui-running")
	lost := startSlowCall(t, victim.URL, "ui-lost")
	victim.Kill() // SIGKILL of a process this test started: ui-lost's runner is gone

	p := openConsole(t, alloc, "cluster", base)

	t.Run("cluster", func(t *testing.T) {
		p.t = t
		p.waitText("#leader", leader.ID())
		for _, n := range c.Nodes() {
			p.waitText("#cluster-body", n.ID())
		}
		p.waitText("#cluster-body", "Commit index")
		p.waitText("#cluster-body", "Records")
		p.waitText("#cluster-body", leader.Addr)
		p.shot("cluster")
		p.click("pause the refresh", "#refresh-toggle")
		p.waitText("#refresh-toggle", "Resume refresh")
		p.waitText("#status", "Refresh paused.")
		p.click("resume the refresh", "#refresh-toggle")
		p.waitText("#refresh-toggle", "Pause refresh")
	})

	t.Run("executions and filters", func(t *testing.T) {
		p.t = t
		p.waitText("#executions-body", "ui-done")
		p.waitText("#executions-body", "ui-failed")
		p.waitText("#executions-body", "ui-order-5")
		p.do("filter failed executions",
			set("#f-status", "failed"),
			chromedp.Click(chromedp.CSS("#filters button[type=submit]")))
		p.waitFor("the list to show only ui-failed", `(() => {
			const t = document.querySelector('#executions-body').innerText;
			return t.includes('ui-failed') && !t.includes('ui-done') && !t.includes('ui-order');
		})()`)
		p.shot("filtered-failed")
		p.do("filter by session",
			set("#f-status", ""),
			set("#f-session", "s-ui"),
			chromedp.Click(chromedp.CSS("#filters button[type=submit]")))
		p.waitFor("the list to show session s-ui only", `(() => {
			const t = document.querySelector('#executions-body').innerText;
			return t.includes('ui-failed') && t.includes('ui-done') && !t.includes('ui-order');
		})()`)
		p.click("clear the filters", "#filters button[type=reset]")
		p.waitText("#executions-body", "ui-order-5")
	})

	t.Run("detail", func(t *testing.T) {
		p.t = t
		p.open("ui-done", `#executions-body [data-key="open-`+done+`"]`)
		for _, want := range []string{done, "s-ui", "echo", "completed", "console", leader.ID(), "fingerprint", "started_at", "finished_at"} {
			p.waitText("#detail-body", want)
		}
		p.waitText("#detail-body .timeline", "started")
		p.waitText("#detail-body .timeline", "finished")
		if got := p.eval(`document.activeElement.id`); got != "detail-h" {
			t.Errorf("the focus is on %q after opening the detail, want its heading", got)
		}
		p.shot("detail-completed")
	})

	t.Run("attention and resolve", func(t *testing.T) {
		p.t = t
		p.waitText("#attention-body", "ui-lost")
		p.waitFor("an attention count", `Number(document.querySelector('#attention-count').textContent) >= 1`)
		p.shot("attention")
		p.open("ui-lost", `#attention-body [data-key="open-`+lost+`"]`)
		p.click("resolve", "#do-resolve")
		p.waitFor("the resolve dialog", `document.querySelector('#resolve-dialog').open`)
		// JSON that does not parse is refused in the page.
		p.do("give bad JSON",
			set("#resolve-data", `{"order_id": 42`),
			chromedp.Click(chromedp.CSS("#resolve-form button[type=submit]")))
		p.waitText("#resolve-data-error", "not valid JSON")
		p.shot("resolve-bad-json")
		if status, out := apiJSON(t, http.MethodGet, base+"/v1/executions/"+lost, "", ""); status != http.StatusOK || out["resolved"] == true {
			t.Fatalf("after bad JSON in the page, the record is %d %v, want it untouched", status, out)
		}
		p.do("give good JSON",
			set("#resolve-data", `{"order_id": 42}`),
			chromedp.Click(chromedp.CSS("#resolve-form button[type=submit]")))
		p.waitFor("the confirmation", `document.querySelector('#confirm-dialog').open`)
		p.waitText("#confirm-text", "replayed to every retry")
		p.waitText("#confirm-ok", "Resolve as completed")
		p.shot("resolve-confirm")
		p.click("confirm", "#confirm-ok")
		p.waitFor("the confirmation to close", `!document.querySelector('#confirm-dialog').open`)
		p.waitText("#detail-body .timeline", "resolved as completed")
		status, out := apiJSON(t, http.MethodGet, base+"/v1/executions/"+lost, "", "")
		data, _ := json.Marshal(out["data"])
		if status != http.StatusOK || out["status"] != "completed" || out["resolved"] != true || string(data) != `{"order_id":42}` {
			t.Fatalf("after the resolve through the page, the record is %d %v, want completed, resolved, data {\"order_id\":42}", status, out)
		}
		p.waitFor("ui-lost to leave the attention list", `!document.querySelector('#attention-body').innerText.includes('ui-lost')`)
		p.shot("resolved")
	})

	t.Run("refused cancel", func(t *testing.T) {
		p.t = t
		p.do("filter running executions",
			set("#f-status", "running"),
			chromedp.Click(chromedp.CSS("#filters button[type=submit]")))
		p.waitText("#executions-body", "ui-running")
		// The filtered list replaces the whole one: wait for it, so the
		// click does not land on a row that is about to move.
		p.waitFor("only running executions listed", `!document.querySelector('#executions-body').innerText.includes('ui-done')`)
		p.open("ui-running", `#executions-body [data-key="open-`+running+`"]`)
		p.click("cancel", "#do-cancel")
		p.waitFor("the confirmation", `document.querySelector('#confirm-dialog').open`)
		p.waitText("#confirm-text", "cancelled is recorded at once")
		// Someone else cancels it first: the page's cancel is refused.
		if status, out := apiJSON(t, http.MethodPost, base+"/v1/executions/"+running+"/cancel", "", ""); status != http.StatusOK {
			t.Fatalf("cancel through the API: %d %v", status, out)
		}
		p.click("confirm", "#confirm-ok")
		p.waitText("#confirm-error", "INVALID_STATE (409)")
		p.waitText("#confirm-error", running) // the API's message names the execution
		p.shot("cancel-refused")
		p.do("escape", chromedp.KeyEvent(kb.Escape))
		p.waitFor("Escape to close the dialog", `!document.querySelector('#confirm-dialog').open`)
		p.waitText("#detail-body [data-field=status]", "cancelled")
	})

	t.Run("nodes", func(t *testing.T) {
		p.t = t
		// The keyboard: the dialog opens on Enter, closes on Escape, and
		// gives the focus back.
		p.do("focus Add a node", chromedp.Focus(chromedp.CSS("#add-node")), chromedp.KeyEvent(kb.Enter))
		p.waitFor("the add dialog", `document.querySelector('#node-dialog').open && document.activeElement.id === 'node-id'`)
		// Tab past its last button: the focus stays in the dialog.
		for i := range 7 {
			p.do("tab", chromedp.KeyEvent(kb.Tab))
			if in := p.eval(`String(document.querySelector('#node-dialog').contains(document.activeElement))`); in != "true" {
				t.Fatalf("after %d tabs the focus left the dialog for %s", i+1, p.eval(`document.activeElement.outerHTML.slice(0, 80)`))
			}
		}
		p.do("escape", chromedp.KeyEvent(kb.Escape))
		p.waitFor("the focus back on Add a node", `!document.querySelector('#node-dialog').open && document.activeElement.id === 'add-node'`)

		fourth := c.Add(t, "n4") // waits to be added
		p.do("add n4",
			chromedp.Click(chromedp.CSS("#add-node")),
			set("#node-id", "n4"),
			set("#node-raft", fourth.RaftAddr()),
			set("#node-http", fourth.Addr),
			chromedp.Click(chromedp.CSS("#node-form button[type=submit]")))
		p.waitText("#confirm-text", "becomes a voter")
		p.shot("add-node-confirm")
		p.click("confirm", "#confirm-ok")
		p.waitFor("the confirmation to close", `!document.querySelector('#confirm-dialog').open`)
		p.waitText("#cluster-body", fourth.RaftAddr())

		p.click("remove the dead node", `[data-key="remove-`+victim.ID()+`"]`)
		p.waitText("#confirm-text", "removed from the Raft configuration")
		p.shot("remove-node-confirm")
		p.click("confirm", "#confirm-ok")
		p.waitFor("the confirmation to close", `!document.querySelector('#confirm-dialog').open`)
		p.waitFor(victim.ID()+" to leave the members", fmt.Sprintf(`!document.querySelector('#cluster-body').innerText.includes(%q)`, victim.RaftAddr()))
		st, err := leader.ClusterStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.Member(victim.ID()); ok {
			t.Errorf("%s is still a member after its removal through the page", victim.ID())
		}
		if _, ok := st.Member("n4"); !ok {
			t.Errorf("n4 is not a member after its addition through the page")
		}
		p.shot("nodes")
	})

	t.Run("audit ledger", func(t *testing.T) {
		p.t = t
		p.waitText("#ledger-head", "Head: seq")
		p.click("verify the ledger", "#ledger-verify")
		p.waitText("#ledger-status", "Verified:")
		p.shot("ledger")
	})

	t.Run("activity", func(t *testing.T) {
		p.t = t
		p.waitFor("a fresh line with height in the chart", `(() => {
			const l = document.querySelector('#activity-body path[data-outcome=fresh]');
			return l && l.getBBox().height > 0 && l.getBBox().width > 0;
		})()`)
		p.waitFor("a replayed line with height in the chart", `(() => {
			const l = document.querySelector('#activity-body path[data-outcome=replayed]');
			return l && l.getBBox().height > 0;
		})()`)
		p.shot("activity")
	})

	t.Run("phone", func(t *testing.T) {
		p.t = t
		p.do("a phone's screen", chromedp.EmulateViewport(390, 844))
		testutil.WaitFor(t, 5*time.Second, "the page to fit a phone's width", func() error {
			if p.eval(`String(document.documentElement.scrollWidth <= innerWidth + 1)`) == "true" {
				return nil
			}
			return fmt.Errorf("the page is %s px wide on a screen of %s; wider than the screen: %s",
				p.eval(`String(document.documentElement.scrollWidth)`), p.eval(`String(innerWidth)`),
				p.eval(`[...document.querySelectorAll('body *')]
				.filter((e) => e.getBoundingClientRect().right > innerWidth + 1)
				.map((e) => e.tagName + '#' + e.id + '.' + e.className + ':' + Math.round(e.getBoundingClientRect().right)).slice(0, 10).join(', ')`))
		})
		p.shot("phone")
		p.do("a laptop's screen", chromedp.EmulateViewport(1280, 900))
	})
	p.t = t
	p.checkClean()
}

// TestConsoleBrowserAuth drives the console of a node with auth on: it
// asks for a token, refuses a wrong one with the API's message, shows a
// principal its own executions (and the cluster as needing the admin
// token), signs out, and shows the admin the cluster.
func TestConsoleBrowserAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds carmy, runs it and a browser")
	}
	testutil.LongTier(t, "the console in a browser")
	alloc := browser(t)
	const admin, planner = "ui-admin-token-0123456789", "ui-planner-token-0123456789"
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	config := "demo_tools: true\nauth:\n  admin_token_env: UI_ADMIN\n  tokens:\n    - {principal: planner, token_env: UI_PLANNER, tools: [\"*\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "carmy.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"UI_ADMIN=" + admin, "UI_PLANNER=" + planner}},
		"--config", filepath.Join(dir, "carmy.yaml"), "--bootstrap", "--node-id", "solo")
	n.WaitReady(t, uiWait)
	uiCall(t, n.URL, planner, `{"tool":"echo","arguments":{},"request_id":"planner-1"}`)
	uiCall(t, n.URL, admin, `{"tool":"echo","arguments":{},"request_id":"admins-own"}`)

	p := openConsole(t, alloc, "auth", n.URL)
	p.waitFor("the token dialog", `document.querySelector('#token-dialog').open && document.activeElement.id === 'token-input'`)
	p.shot("asks-token")

	// Wrong tokens, three times: each is refused with the API's message,
	// and each is sent once (the node stops listening to an address after
	// 10 failed authentications a minute, which a page that sent a bad
	// token once per panel would reach here).
	for i := range 3 {
		p.do("a wrong token", chromedp.SendKeys(chromedp.CSS("#token-input"), fmt.Sprintf("not-a-token-%d", i)),
			chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
		p.waitFor(fmt.Sprintf("the token asked for again (%d)", i+2), fmt.Sprintf(`document.querySelector('#token-dialog').dataset.asked === '%d'`, i+2))
		p.waitText("#token-error", "UNAUTHORIZED (401)")
	}
	p.shot("wrong-token")

	p.do("the planner's token", chromedp.SendKeys(chromedp.CSS("#token-input"), planner),
		chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	p.waitFor("the dialog to close", `!document.querySelector('#token-dialog').open`)
	p.waitText("#executions-body", "planner-1")
	p.waitText("#cluster-body", "Admin token needed")
	p.waitText("#activity-body", "Admin token needed")
	p.waitText("#who", "planner")
	if got := p.text("#executions-body"); strings.Contains(got, "admins-own") {
		t.Errorf("the planner sees the admin's execution:\n%s", got)
	}
	if got := p.eval(`sessionStorage.getItem('carmy.token')`); got != planner {
		t.Errorf("session storage holds %q, want the planner's token", got)
	}
	if got := p.eval(`document.cookie`); got != "" {
		t.Errorf("the page set cookies: %q", got)
	}
	p.shot("planner")

	p.click("sign out", "#sign-out")
	p.waitFor("the token dialog again", `document.querySelector('#token-dialog').open`)
	if got := p.eval(`String(sessionStorage.getItem('carmy.token'))`); got != "null" {
		t.Errorf("after sign-out, session storage holds %q", got)
	}
	p.do("the admin token", chromedp.SendKeys(chromedp.CSS("#token-input"), admin), chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	p.waitText("#leader", "solo")
	p.waitText("#executions-body", "admins-own")
	p.waitText("#executions-body", "planner-1")
	p.waitText("#who", "admin")
	p.shot("admin")
	p.checkClean()
}
