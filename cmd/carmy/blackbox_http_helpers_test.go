package main_test

// The HTTP helpers of the black-box tests: loopback upstreams that count
// their requests, and raw requests to a node.

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// bbPost posts body to url and returns the status and the raw answer.
func bbPost(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// bbGet gets url and returns the status and the raw answer.
func bbGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// toolAnswer is the part of a call's answer these tests read.
type toolAnswer struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	Replayed    bool   `json:"replayed"`
	Error       struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	} `json:"error"`
}
