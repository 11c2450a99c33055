package deploy_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/carmyhq/carmy/tests/testutil"
)

// metricName matches the Carmy series an expression names.
var metricName = regexp.MustCompile(`\bcarmy_[a-z_]+\b`)

// alertRules is deploy/prometheus/alerts.yml as the test reads it.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// dashboard is deploy/grafana/carmy-dashboard.json as the test reads it.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestObservabilityKit checks the alert rules and the dashboard in deploy/:
// that they are well formed, and that every Carmy metric they name is one a
// running node serves at /metrics (a cluster of one with a call made, so
// that the families with labels have a series), so a renamed metric
// cannot leave an alert that never fires or a panel that stays empty.
func TestObservabilityKit(t *testing.T) {
	root := testutil.ModuleRoot(t)
	named := map[string][]string{} // metric: where it is named

	raw, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alerts.yml: rule %q needs alert, expr, labels.severity and annotations.summary", r.Alert)
			}
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				named[m] = append(named[m], "alert "+r.Alert)
			}
		}
	}
	if alerts < 6 {
		t.Errorf("alerts.yml has %d rules, want at least the six of the kit (no leader, leader changes, quorum, interrupted, capacity, forwarding)", alerts)
	}

	raw, err = os.ReadFile(filepath.Join(root, "deploy", "grafana", "carmy-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("carmy-dashboard.json: %v", err)
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("dashboard: panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("dashboard: panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				named[m] = append(named[m], "panel "+p.Title)
			}
		}
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard: no uid or no panels")
	}

	if testing.Short() {
		t.Skip("the metrics' existence needs a running carmy")
	}
	node := testutil.StartCarmy(t, cli.Bin, testutil.StartOptions{}, "--dev", "--node-id", "n1")
	node.WaitReady(t, 30*time.Second)
	resp, err := http.Post(node.URL+"/v1/tools/call", "application/json", strings.NewReader(`{"tool":"echo","request_id":"kit"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(node.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	families := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for m, where := range named {
		base := m
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && families[b] {
				base = b
			}
		}
		if !families[base] {
			missing = append(missing, m+" (named by "+strings.Join(slices.Compact(where), ", ")+")")
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("metrics the kit names that a node does not serve:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(named) < 15 {
		t.Errorf("the kit names %d metrics; expected the alerts and panels to cover more", len(named))
	}
}
