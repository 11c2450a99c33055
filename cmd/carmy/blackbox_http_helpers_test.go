package main_test

// The HTTP helpers of the black-box tests: loopback upstreams that count
// their requests, and raw requests to a node.

import (
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// bbPost posts body to url and returns the status and the raw answer.
func bbPost(t *testing.T, url, body string) (int, string) {
	t.Helper()
	return testutil.Do(t, http.MethodPost, url, "", body)
}

// bbGet gets url and returns the status and the raw answer.
func bbGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return testutil.Do(t, http.MethodGet, url, "", "")
}

// toolAnswer is the part of a call's answer these tests read.
type toolAnswer = testutil.ToolAnswer
