// Package ui holds the operator console (docs/console.md): one page, its HTML,
// CSS and JavaScript modules embedded in the binary, so every node serves
// it and it loads nothing from elsewhere. The page uses the public HTTP
// API alone, with the token its user gives it; the assets themselves hold
// no data and need no token.
//
// Package api serves the assets at /ui/ (console.go there), with the
// headers of Headers.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Asset is one file of the console.
type Asset struct {
	Name        string // as in the URL under /ui/: "index.html", "app.js", …
	Body        []byte
	ContentType string
	// ETag is a strong validator of Body (a quoted hash prefix).
	ETag string
}

// Index is the page served at /ui/.
const Index = "index.html"

// Headers are the security headers of every console answer. The policy
// allows the page's own scripts, styles and API only: no inline script
// or style, no frames, no forms posted elsewhere, nothing fetched from
// another origin.
var Headers = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	// The assets change with the binary: a browser revalidates them
	// (the ETag makes that a 304) rather than keep an old console.
	"Cache-Control": "no-cache",
}

var assets = mustLoad()

// Lookup returns the asset at name (a path under /ui/, "" meaning the
// page), and whether there is one.
func Lookup(name string) (Asset, bool) {
	if name == "" {
		name = Index
	}
	a, ok := assets[name]
	return a, ok
}

// contentTypes are the types of the console's files; a file of another
// kind is a build mistake, caught when the package loads.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

func mustLoad() map[string]Asset {
	out := map[string]Asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = mime.TypeByExtension(path.Ext(p))
		}
		if ct == "" {
			panic("ui: no content type for " + p)
		}
		sum := sha256.Sum256(body)
		name := strings.TrimPrefix(p, "static/")
		out[name] = Asset{Name: name, Body: body, ContentType: ct, ETag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("ui: reading the embedded console: " + err.Error())
	}
	if _, ok := out[Index]; !ok {
		panic("ui: no " + Index)
	}
	return out
}
