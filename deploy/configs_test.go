package deploy_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/carmyhq/carmy/tests/testutil"
)

// fileConfig is what the tests read of a carmy config file: the tools and
// where the tokens come from. carmy itself checks the whole file (strictly)
// in TestConfigs.
type fileConfig struct {
	Where string `yaml:"-"`
	Raw   []byte `yaml:"-"`
	Tools []struct {
		Name string `yaml:"name"`
		HTTP *struct {
			URL     string            `yaml:"url"`
			Headers map[string]string `yaml:"headers"`
		} `yaml:"http"`
	} `yaml:"tools"`
	DemoTools bool `yaml:"demo_tools"`
	Auth      struct {
		Tokens []struct {
			Principal string `yaml:"principal"`
			TokenEnv  string `yaml:"token_env"`
		} `yaml:"tokens"`
		AdminTokenEnv string `yaml:"admin_token_env"`
	} `yaml:"auth"`
}

func decodeConfig(t *testing.T, where string, raw []byte) fileConfig {
	t.Helper()
	var c fileConfig
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	c.Where, c.Raw = where, raw
	return c
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// tokenEnvs returns the variables the config reads at start: the tokens'
// (token_env, admin_token_env) and those ${VAR} in HTTP tools name.
func (c fileConfig) tokenEnvs() []string {
	var out []string
	add := func(v string) {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, tok := range c.Auth.Tokens {
		add(tok.TokenEnv)
	}
	add(c.Auth.AdminTokenEnv)
	for _, tool := range c.Tools {
		if tool.HTTP == nil {
			continue
		}
		for _, s := range append([]string{tool.HTTP.URL}, slices.Collect(maps.Values(tool.HTTP.Headers))...) {
			for _, m := range envRef.FindAllStringSubmatch(s, -1) {
				add(m[1])
			}
		}
	}
	return out
}

// shippedConfigs returns every config file the deploy files ship.
func shippedConfigs(t *testing.T) []fileConfig {
	t.Helper()
	out := []fileConfig{
		decodeConfig(t, "deploy/docker/carmy.yaml", read(t, "deploy/docker/carmy.yaml")),
		decodeConfig(t, "deploy/systemd/carmy.yaml", read(t, "deploy/systemd/carmy.yaml")),
	}
	for _, m := range decodeManifests(t) {
		if cm, ok := m.Obj.(*corev1.ConfigMap); ok {
			for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
				out = append(out, decodeConfig(t, "deploy/kubernetes/"+m.File+" "+key, []byte(cm.Data[key])))
			}
		}
	}
	return out
}

// demoTools are the tools demo_tools adds.
var demoTools = []string{"create_order", "echo", "fail", "lookup", "sleep"}

// TestConfigs starts a node on loopback with each shipped config file (its
// tokens' variables set): carmy accepts the file (it refuses unknown keys),
// the node answers the probe paths the deploy files use, lists exactly the
// tools the file declares to each principal's token, refuses a call
// without a token, and serves the admin API to the admin token.
func TestConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts carmy processes")
	}
	for _, cfg := range shippedConfigs(t) {
		t.Run(cfg.Where, func(t *testing.T) {
			t.Parallel()
			if len(cfg.Auth.Tokens) == 0 || cfg.Auth.AdminTokenEnv == "" {
				t.Fatalf("no tokens: a node off loopback refuses to start without them (and the admin API needs one)")
			}
			path := filepath.Join(t.TempDir(), "carmy.yaml")
			if err := os.WriteFile(path, cfg.Raw, 0o600); err != nil {
				t.Fatal(err)
			}
			tokens := map[string]string{}
			var env []string
			for _, v := range cfg.tokenEnvs() {
				tokens[v] = randomHex(16)
				env = append(env, v+"="+tokens[v])
			}
			node := testutil.StartCarmy(t, cli.Bin, testutil.StartOptions{Env: env}, "--bootstrap", "--node-id", "n1", "--config", path)
			node.WaitReady(t, 30*time.Second)
			get := func(path, token string) (int, []byte) {
				t.Helper()
				req, err := http.NewRequest(http.MethodGet, node.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, body
			}
			for _, p := range []string{livePath, readyPath} {
				if code, body := get(p, ""); code != http.StatusOK {
					t.Errorf("GET %s: %d %s", p, code, body)
				}
			}
			if code, _ := get("/v1/no-such-path", ""); code == http.StatusOK {
				t.Errorf("GET of an unknown path answers 200: the probe check proves nothing")
			}
			want := []string{}
			for _, tool := range cfg.Tools {
				want = append(want, tool.Name)
			}
			if cfg.DemoTools {
				want = append(want, demoTools...)
			}
			slices.Sort(want)
			for _, tok := range cfg.Auth.Tokens {
				code, body := get("/v1/tools", tokens[tok.TokenEnv])
				var ans struct {
					Tools []struct {
						Name string `json:"name"`
					} `json:"tools"`
				}
				if code != http.StatusOK || json.Unmarshal(body, &ans) != nil {
					t.Errorf("GET /v1/tools as %s: %d %s", tok.Principal, code, body)
					continue
				}
				var got []string
				for _, tool := range ans.Tools {
					got = append(got, tool.Name)
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s sees tools %v, want %v", tok.Principal, got, want)
				}
			}
			if code, body := get("/v1/tools", ""); code != http.StatusUnauthorized {
				t.Errorf("GET /v1/tools without a token: %d %s, want 401", code, body)
			}
			if code, body := get("/v1/cluster", tokens[cfg.Auth.AdminTokenEnv]); code != http.StatusOK {
				t.Errorf("GET /v1/cluster with the admin token: %d %s", code, body)
			}
		})
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
