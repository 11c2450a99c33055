package embed_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/tests/testutil"
)

// Tokens of the quota tests (at least api.MinTokenBytes long).
const (
	quotaTenantA = "tenant-a-secret-0001"
	quotaTenantB = "tenant-b-secret-0001"
	quotaAdmin   = "quota-admin-secret-01"
)

// quotaNode runs a node with the demo tools, tenant-a and tenant-b (each
// with tenantA, tenantB appended to its token entry), an admin token and
// the limits section limits.
func quotaNode(t *testing.T, limits, tenantA, tenantB string, opts ...yamlNode) (string, *embed.Node) {
	t.Helper()
	env := withEnv(map[string]string{"CARMY_TEST_TENANT_A": quotaTenantA, "CARMY_TEST_TENANT_B": quotaTenantB,
		"CARMY_TEST_QUOTA_ADMIN": quotaAdmin})
	return startFromYAML(t, fmt.Sprintf(`demo_tools: true
auth:
  tokens:
    - {principal: tenant-a, token_env: CARMY_TEST_TENANT_A%s}
    - {principal: tenant-b, token_env: CARMY_TEST_TENANT_B%s}
  admin_token_env: CARMY_TEST_QUOTA_ADMIN
limits:
%s`, tenantA, tenantB, limits), append([]yamlNode{env}, opts...)...)
}

// callAs posts a call with a bearer token and returns the status and the
// body; it may run outside the test's goroutine (errors are t.Errorf).
func callAs(t *testing.T, base, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tools/call", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST /v1/tools/call: %v", err)
		return 0, ""
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("POST /v1/tools/call: reading the body: %v", err)
	}
	return resp.StatusCode, string(out)
}

// metric returns the value of one series of GET /metrics (-1 if absent).
func metric(t *testing.T, base, series string) float64 {
	t.Helper()
	_, body := httpDo(t, http.MethodGet, base+"/metrics", quotaAdmin, "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("metric %s: %v", series, err)
	}
	return v
}

// envelope is the part of an error answer the quota tests look at.
type envelope struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Principal string `json:"principal"`
		Resource  string `json:"resource"`
		Limit     int64  `json:"limit"`
	} `json:"error"`
}

func decodeEnvelope(t *testing.T, body string) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an error envelope: %v: %.200s", err, body)
	}
	return e
}

// callResult is the part of a call's answer the quota tests look at.
type callResult struct {
	Status   string          `json:"status"`
	Data     json.RawMessage `json:"data"`
	Replayed bool            `json:"replayed"`
}

func decodeCall(t *testing.T, body string) callResult {
	t.Helper()
	var r callResult
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("call answer %q: %v", body, err)
	}
	return r
}

// TestTenantBurstLeavesOthersServed is issue 14's burst against a node
// with the default limits for two tenants: tenant-a sends as many long
// calls at once as the node may run (max_running 8). Only its default
// share (8/4 = 2) runs; the rest answer 503 UNAVAILABLE naming tenant-a,
// and tenant-b's and the admin's calls are still served. The node then
// closes within 15 s, the running calls cancelled.
func TestTenantBurstLeavesOthersServed(t *testing.T) {
	t.Parallel()
	base, node := quotaNode(t, "  max_running: 8\n", "", "")

	type answer struct {
		code int
		body string
	}
	answers := make(chan answer, 8)
	var burst sync.WaitGroup
	for i := range 8 {
		burst.Go(func() {
			code, body := callAs(t, base, quotaTenantA, fmt.Sprintf(`{"tool":"sleep","arguments":{"ms":60000},"request_id":"burst-%d"}`, i))
			answers <- answer{code, body}
		})
	}
	// The burst has settled once every call either runs or was answered.
	var refused []answer
	testutil.WaitFor(t, 15*time.Second, "the burst to settle", func() error {
		for len(answers) > 0 {
			refused = append(refused, <-answers)
		}
		if running := metric(t, base, "carmy_executions_running"); int(running)+len(refused) != 8 {
			return fmt.Errorf("%v running, %d answered", running, len(refused))
		}
		return nil
	})
	if len(refused) != 6 {
		t.Fatalf("%d of tenant-a's 8 calls were answered at once, want 6 refused over its share of 2", len(refused))
	}
	for _, a := range refused {
		e := decodeEnvelope(t, a.body)
		if a.code != http.StatusServiceUnavailable || e.Error.Code != "UNAVAILABLE" || e.Error.Principal != "tenant-a" ||
			!strings.Contains(a.body, "max_running_per_principal") {
			t.Fatalf("a call over tenant-a's share: %d %s, want 503 UNAVAILABLE naming tenant-a and its share", a.code, a.body)
		}
	}
	for who, token := range map[string]string{"tenant-b": quotaTenantB, "the admin": quotaAdmin} {
		code, body := callAs(t, base, token, `{"tool":"echo","arguments":{"hello":"world"},"request_id":"during-burst"}`)
		if code != http.StatusOK || decodeCall(t, body).Status != "completed" {
			t.Fatalf("%s's call during tenant-a's burst: %d %s, want 200 completed", who, code, body)
		}
	}
	if got := metric(t, base, `carmy_calls_refused_total{reason="max_running_per_principal"}`); got != 6 {
		t.Errorf("carmy_calls_refused_total{reason=max_running_per_principal} = %v, want 6", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := node.Close(ctx); err != nil {
		t.Errorf("Close = %v", err)
	}
	burst.Wait()
}

// TestByteQuotas is issue 14's 40 calls with 1 MB arguments (echo returns
// them, so each result is 1 MB too). Under tenant-a's byte quota of 8 MB,
// the calls are recorded whole while a record and one result
// (limits.result_bytes, 1 MiB) fit; every later one answers 503
// IDEMPOTENCY_CAPACITY naming tenant-a and "bytes", and the tool does not
// run. The records stored before replay intact. tenant-b, bound by the
// store's MaxBytes (--max-bytes) alone, then fills the store: its refusal
// names no principal. The store's bytes stay within the bound. Under the
// race detector every size is divided by raceScale.
func TestByteQuotas(t *testing.T) {
	t.Parallel()
	const (
		size        = 1_000_000 / raceScale
		quota       = 8_000_000 / raceScale
		resultBytes = 1 << 20 / raceScale
		maxBytes    = 20_000_000 / raceScale
	)
	base, _ := quotaNode(t, fmt.Sprintf("  max_running: 8\n  result_bytes: %d\n", resultBytes),
		fmt.Sprintf(", max_bytes: %d", quota), ", max_bytes: 100000000", withMaxBytes(maxBytes))

	blob := func(i int) string { return fmt.Sprintf("%03d", i) + strings.Repeat("x", size-3) }
	call := func(token string, i int) (int, string) {
		return callAs(t, base, token, fmt.Sprintf(`{"tool":"echo","arguments":{"blob":%q},"request_id":"big-%d"}`, blob(i), i))
	}
	stored := 0
	for i := range 40 {
		code, body := call(quotaTenantA, i)
		switch {
		case code == http.StatusOK && stored == i:
			stored++
			if r := decodeCall(t, body); r.Status != "completed" || len(r.Data) < size {
				t.Fatalf("call %d within the quota: %s %d bytes, want completed with the data", i, r.Status, len(r.Data))
			}
		case code == http.StatusServiceUnavailable:
			e := decodeEnvelope(t, body)
			if e.Error.Code != "IDEMPOTENCY_CAPACITY" || e.Error.Principal != "tenant-a" || e.Error.Resource != "bytes" || e.Error.Limit != quota {
				t.Fatalf("call %d over the quota: %.300s, want IDEMPOTENCY_CAPACITY naming tenant-a's bytes at %d", i, body, quota)
			}
		default:
			t.Fatalf("call %d: %d %.300s", i, code, body)
		}
	}
	if stored != 7 {
		t.Fatalf("%d calls recorded within %d bytes (each of %d, and %d of headroom), want 7", stored, quota, size, resultBytes)
	}
	// The records stored before the quota filled replay intact.
	for i := range stored {
		code, body := call(quotaTenantA, i)
		r := decodeCall(t, body)
		var data struct{ Blob string }
		if err := json.Unmarshal(r.Data, &data); err != nil || code != http.StatusOK || !r.Replayed ||
			sha256.Sum256([]byte(data.Blob)) != sha256.Sum256([]byte(blob(i))) {
			t.Fatalf("the replay of call %d: %d replayed=%v, %d bytes of data, want its recorded data", i, code, r.Replayed, len(data.Blob))
		}
	}
	// tenant-b fills the store to its bound: the refusal is the store's.
	var last string
	for i := range 40 {
		code, body := call(quotaTenantB, i)
		if code == http.StatusOK {
			continue
		}
		last = body
		e := decodeEnvelope(t, body)
		if code != http.StatusServiceUnavailable || e.Error.Code != "IDEMPOTENCY_CAPACITY" || e.Error.Principal != "" ||
			e.Error.Resource != "bytes" || e.Error.Limit != maxBytes {
			t.Fatalf("tenant-b's call %d: %d %.300s, want IDEMPOTENCY_CAPACITY of the store's bytes at %d", i, code, body, maxBytes)
		}
		break
	}
	if last == "" {
		t.Fatalf("tenant-b stored 40 records of %d bytes in a store bound to %d bytes", size, maxBytes)
	}
	if used, bound := metric(t, base, "carmy_store_bytes"), metric(t, base, "carmy_store_max_bytes"); used <= 0 || used > maxBytes || bound != maxBytes {
		t.Fatalf("carmy_store_bytes %v, carmy_store_max_bytes %v; want within %d", used, bound, maxBytes)
	}
}
