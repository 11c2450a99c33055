package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// fetchDigest reads GET /internal/v1/state with key; status is the HTTP
// status.
func fetchDigest(t *testing.T, addr, key string) (d cluster.StateDigest, status int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/internal/v1/state", nil)
	if key != "" {
		req.Header.Set("Carmy-Cluster-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
	}
	return d, resp.StatusCode
}

// TestStateDigestsConverge checks GET /internal/v1/state: it needs the
// cluster key, and replicas that applied the same writes report the same
// applied index, state hash and record count, while a replica that missed
// a write reports another hash.
func TestStateDigestsConverge(t *testing.T) {
	t.Parallel()
	const k = "s3cret-s3cret-s3cret"
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.ClusterKey, cfg.TLS = k, nil })
	leader := c.leader()
	for i := range 10 {
		mustReserve(t, leader.Store(), key(fmt.Sprint("d-", i)), exec(leader.ID()), store.Reserved)
	}
	if _, status := fetchDigest(t, leader.HTTPAddr(), ""); status != http.StatusForbidden {
		t.Fatalf("without the key: status %d, want 403", status)
	}
	var want cluster.StateDigest
	testutil.WaitUntil(t, 30*time.Second, "equal digests on every node", func() bool {
		want, _ = fetchDigest(t, leader.HTTPAddr(), k)
		for _, n := range c.nodes {
			if d, _ := fetchDigest(t, n.HTTPAddr(), k); d != want {
				return false
			}
		}
		return true
	})
	if want.Records != 10 || want.Hash == "" || want.AppliedIndex == 0 {
		t.Fatalf("digest %+v: want 10 records, a hash and an index", want)
	}
	lag := c.followers()[0]
	lag.stop()
	mustReserve(t, leader.Store(), key("d-late"), exec(leader.ID()), store.Reserved)
	if d, _ := fetchDigest(t, leader.HTTPAddr(), k); d.Hash == want.Hash || d.Records != 11 {
		t.Fatalf("after another write the digest is %+v, was %+v: the hash must change", d, want)
	}
}
