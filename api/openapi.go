package api

import (
	"bytes"
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openapiDoc is the OpenAPI 3.1 document of the HTTP API (docs/api.md),
// written by hand. openapi_test.go drives a real node through every route
// and checks each request and answer against it, and checks that it lists
// exactly the routes the server registers.
//
//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns a copy of the OpenAPI 3.1 document of the HTTP API, the
// one GET /openapi.json serves.
func OpenAPI() []byte { return bytes.Clone(openapiDoc) }

// openapi serves GET /openapi.json (open, like /healthz).
func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapiDoc)
}
