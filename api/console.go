package api

import (
	"bytes"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/api/ui"
	"github.com/carmyhq/carmy/store"
)

// consoleRoutes serves the operator console (docs/console.md, package ui) at
// /ui/. Its assets are static and hold no data, so they are served
// without a token; the page then calls the API with the token its user
// gives it. Every answer under /ui, a 404 included, carries ui.Headers
// (a strict Content-Security-Policy among them).
func (s *Server) consoleRoutes() {
	methods := []string{http.MethodGet, http.MethodHead}
	s.echo.Match(methods, "/ui", consoleRedirect)
	s.echo.Match(methods, "/ui/*", consoleAsset)
}

func setConsoleHeaders(c echo.Context) {
	h := c.Response().Header()
	for k, v := range ui.Headers {
		h.Set(k, v)
	}
}

// consoleRedirect sends /ui to /ui/, relative to the request's path, so a
// proxy that serves the node under a prefix keeps it.
func consoleRedirect(c echo.Context) error {
	setConsoleHeaders(c)
	return c.Redirect(http.StatusMovedPermanently, "ui/")
}

// consoleAsset serves one asset, the page at /ui/ itself; an unknown path
// is 404 NOT_FOUND in the envelope, like any other unknown route.
func consoleAsset(c echo.Context) error {
	setConsoleHeaders(c)
	a, ok := ui.Lookup(c.Param("*"))
	if !ok {
		return newError(store.CodeNotFound, "no such page of the console: "+c.Request().URL.Path)
	}
	h := c.Response().Header()
	h.Set("Content-Type", a.ContentType)
	h.Set("ETag", a.ETag)
	http.ServeContent(c.Response(), c.Request(), a.Name, time.Time{}, bytes.NewReader(a.Body))
	return nil
}
