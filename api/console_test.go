package api_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/ui"
)

// consoleCSP is the policy every console answer must carry.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleServer serves the API with auth on: the console's assets must
// need no token.
func consoleServer(t *testing.T) *httptest.Server {
	t.Helper()
	return newTestServer(t, &fakeRuntime{tb: t}, api.Config{Auth: api.Auth{AdminToken: "console-admin-token"}})
}

func consoleGet(t *testing.T, srv *httptest.Server, method, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func checkConsoleHeaders(t *testing.T, path string, resp *http.Response) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": consoleCSP,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", path, k, got, want)
		}
	}
	if c := resp.Header.Get("Set-Cookie"); c != "" {
		t.Errorf("%s sets a cookie: %s", path, c)
	}
}

// TestConsoleServesAssets checks that /ui/ serves the page and every asset
// with its content type and the security headers, without a token, and
// that every module the page imports is served.
func TestConsoleServesAssets(t *testing.T) {
	srv := consoleServer(t)
	want := map[string]string{
		"/ui/":          "text/html; charset=utf-8",
		"/ui/app.js":    "text/javascript; charset=utf-8",
		"/ui/style.css": "text/css; charset=utf-8",
	}
	for _, name := range consoleFiles(t) {
		if _, ok := want["/ui/"+name]; !ok && name != ui.Index {
			want["/ui/"+name] = ""
		}
	}
	for path, ct := range want {
		resp, body := consoleGet(t, srv, http.MethodGet, path, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
			continue
		}
		if ct != "" && resp.Header.Get("Content-Type") != ct {
			t.Errorf("GET %s: Content-Type %q, want %q", path, resp.Header.Get("Content-Type"), ct)
		}
		checkConsoleHeaders(t, path, resp)
		if body == "" {
			t.Errorf("GET %s: empty body", path)
		}
		// A browser revalidates: the same ETag is 304.
		if etag := resp.Header.Get("ETag"); etag == "" {
			t.Errorf("GET %s: no ETag", path)
		} else if again, _ := consoleGet(t, srv, http.MethodGet, path, map[string]string{"If-None-Match": etag}); again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: %d, want 304", path, again.StatusCode)
		}
	}
	if resp, body := consoleGet(t, srv, http.MethodHead, "/ui/app.js", nil); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD /ui/app.js: %d with %d bytes", resp.StatusCode, len(body))
	}

	// Every relative module or stylesheet the assets name is served.
	ref := regexp.MustCompile(`(?:from |import\(|href=|src=)['"]\.?/?([\w.-]+\.(?:js|css))['"]`)
	for _, name := range consoleFiles(t) {
		a, _ := ui.Lookup(name)
		for _, m := range ref.FindAllStringSubmatch(string(a.Body), -1) {
			if _, ok := ui.Lookup(m[1]); !ok {
				t.Errorf("%s refers to %s, which is not embedded", name, m[1])
			}
		}
	}
}

// TestConsoleRedirectAndUnknown checks /ui → /ui/, and that an unknown
// path under /ui/ is 404 NOT_FOUND in the API's envelope, with the
// console's headers.
func TestConsoleRedirectAndUnknown(t *testing.T) {
	srv := consoleServer(t)
	resp, _ := consoleGet(t, srv, http.MethodGet, "/ui", nil)
	if resp.StatusCode != http.StatusMovedPermanently {
		t.Fatalf("GET /ui: %d, want 301", resp.StatusCode)
	}
	loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Path != "/ui/" {
		t.Errorf("GET /ui: Location %q (%v), want one resolving to /ui/", resp.Header.Get("Location"), loc)
	}
	checkConsoleHeaders(t, "/ui", resp)

	for _, path := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/../v1/tools", "/ui/index.html/x"} {
		resp, body := consoleGet(t, srv, http.MethodGet, path, nil)
		var env struct {
			Error struct{ Code, Message string }
		}
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "NOT_FOUND" || env.Error.Message == "" {
			// "/ui/../v1/tools" is cleaned by the client to /v1/tools,
			// which needs a token: 401 is as good.
			if path == "/ui/../v1/tools" && resp.StatusCode == http.StatusUnauthorized {
				continue
			}
			t.Errorf("GET %s: %d %s, want 404 NOT_FOUND in the envelope", path, resp.StatusCode, body)
			continue
		}
		checkConsoleHeaders(t, path, resp)
	}
	if resp, body := consoleGet(t, srv, http.MethodPost, "/ui/app.js", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/app.js: %d %s, want 405", resp.StatusCode, body)
	}
}

// svgNamespace is the one absolute URL the assets may hold outside
// comments: the SVG namespace, a name passed to createElementNS that is
// never fetched.
const svgNamespace = "http://www.w3.org/2000/svg"

// TestConsoleSelfContained checks what the policy relies on, in the
// assets' text: no URL of another origin outside comments (the page loads
// nothing from elsewhere and works offline), no inline script or style
// (the policy would block them), and no HTML built from strings.
func TestConsoleSelfContained(t *testing.T) {
	comments := map[string][]*regexp.Regexp{
		".js":   {regexp.MustCompile(`(?s)/\*.*?\*/`), regexp.MustCompile(`(?m)(^|\s)//.*$`)},
		".css":  {regexp.MustCompile(`(?s)/\*.*?\*/`)},
		".html": {regexp.MustCompile(`(?s)<!--.*?-->`)},
	}
	url := regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^\s'"<>)]*`)
	names := consoleFiles(t)
	slices.Sort(names)
	for _, name := range names {
		a, _ := ui.Lookup(name)
		text := string(a.Body)
		ext := name[strings.LastIndexByte(name, '.'):]
		for _, re := range comments[ext] {
			text = re.ReplaceAllString(text, "")
		}
		for _, u := range url.FindAllString(text, -1) {
			if u != svgNamespace {
				t.Errorf("%s refers to %s: the console must load nothing from elsewhere", name, u)
			}
		}
		var refused []string
		switch ext {
		case ".html":
			refused = []string{"<style", " style=", "<script>", "javascript:", " onclick=", " onload=", " onerror=", " onsubmit="}
			if strings.Contains(text, "<script") && !strings.Contains(text, `<script type="module" src="app.js"></script>`) {
				t.Errorf("%s has a script other than app.js", name)
			}
		case ".js":
			refused = []string{".style.", "'style'", `"style"`, "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage", "document.cookie"}
		}
		for _, bad := range refused {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q: the console's policy allows no inline script or style, and it builds no HTML from strings", name, bad)
			}
		}
	}
}

// consoleFiles names every file of the console's source (api/ui/static,
// which the binary embeds), as the URL under /ui/ names it: the test asks
// the server for each by that name.
func consoleFiles(t *testing.T) []string {
	t.Helper()
	var names []string
	root := filepath.Join("ui", "static")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil || len(names) == 0 {
		t.Fatalf("listing %s: %v (%d files)", root, err, len(names))
	}
	return names
}
