package mcpgateway

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/carmyhq/carmy/internal/egress"
)

// checkCommand checks a stdio upstream's command, env and dir, and sets
// what its children are started with: the command path made absolute
// when it is relative (so that Dir does not change which program runs),
// the environment (PATH, then Env), and the redactor of Env's values.
func (u *Upstream) checkCommand(where string) error {
	var values []string
	env := make([]string, 0, len(u.cfg.Env)+1) // never nil: see startChild
	if path, ok := os.LookupEnv("PATH"); ok {
		if _, set := u.cfg.Env["PATH"]; !set {
			env = append(env, "PATH="+path)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(u.cfg.Env)) {
		v := u.cfg.Env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return fmt.Errorf("%s: env: %q is not a variable name (or its value holds NUL)", where, k)
		}
		env = append(env, k+"="+v)
		if k != "PATH" {
			values = append(values, v)
		}
	}
	u.childEnv = env
	u.redactor = egress.NewRedactor(nil, nil, values...)
	if u.cfg.Dir != "" {
		fi, err := os.Stat(u.cfg.Dir)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("%s: dir %s is not a directory", where, u.cfg.Dir)
		}
	}
	if name := u.cfg.Command[0]; strings.ContainsRune(name, filepath.Separator) && !filepath.IsAbs(name) {
		abs, err := filepath.Abs(name)
		if err != nil {
			return fmt.Errorf("%s: command: %w", where, err)
		}
		u.cfg.Command[0] = abs
	}
	return nil
}
