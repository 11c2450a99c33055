package api

import (
	"maps"

	"github.com/labstack/echo/v4"
)

// RoutesOf returns the routes s registered with Echo, for tests that
// compare them with the OpenAPI document.
func RoutesOf(s *Server) []*echo.Route { return s.echo.Routes() }

// StatusOfCodes returns a copy of the table of every error code the server
// answers with and its HTTP status.
func StatusOfCodes() map[string]int { return maps.Clone(statusOf) }
