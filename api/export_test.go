package api

import (
	"maps"
	"time"

	"github.com/labstack/echo/v4"
)

// RoutesOf returns the routes s registered with Echo, for tests that
// compare them with the OpenAPI document.
func RoutesOf(s *Server) []*echo.Route { return s.echo.Routes() }

// StatusOfCodes returns a copy of the table of every error code the server
// answers with and its HTTP status.
func StatusOfCodes() map[string]int { return maps.Clone(statusOf) }

// StatusBeyondCodes returns a copy of the table of the statuses an error
// may answer with other than its code's, each with its code.
func StatusBeyondCodes() map[int]string { return maps.Clone(statusBeyondCode) }

// ParseSFString exposes parseSFString to the fuzz test.
func ParseSFString(s string) (string, bool) { return parseSFString(s) }

// SetActivityClock replaces the clock of s's activity counters.
func SetActivityClock(s *Server, now func() time.Time) { s.activity.now = now }
