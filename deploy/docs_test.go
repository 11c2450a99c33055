package deploy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDockerfile checks the image's recipe: FROM scratch only, the user the
// manifests run as, the ports carmy listens on by default, the CA bundle
// scripts/image puts into the build context, and carmy as the entrypoint.
func TestDockerfile(t *testing.T) {
	for _, path := range []string{"deploy/docker/Dockerfile", "deploy/docker/test/Dockerfile"} {
		ins := dockerInstructions(t, path)
		for _, from := range ins["FROM"] {
			if from != "scratch" {
				t.Errorf("%s: FROM %s: nothing can be pulled; every stage is FROM scratch", path, from)
			}
		}
		if got := ins["USER"]; !slices.Equal(got, []string{fmt.Sprintf("%d:%d", imageUser, imageUser)}) {
			t.Errorf("%s: USER %q, want %d:%d (the manifests' runAsUser)", path, got, imageUser, imageUser)
		}
		if got := ins["ENTRYPOINT"]; !slices.Equal(got, []string{`["/carmy"]`}) {
			t.Errorf("%s: ENTRYPOINT %q, want [\"/carmy\"] (compose and the manifests pass serve …)", path, got)
		}
		var exposed []string
		for _, e := range ins["EXPOSE"] {
			exposed = append(exposed, strings.Fields(e)...)
		}
		for _, want := range []string{
			strconv.Itoa(defaultPort(t, "http-addr")) + "/tcp", strconv.Itoa(defaultPort(t, "raft-addr")) + "/tcp",
			strconv.Itoa(defaultPort(t, "gossip-addr")) + "/tcp", strconv.Itoa(defaultPort(t, "gossip-addr")) + "/udp",
		} {
			if !slices.Contains(exposed, want) {
				t.Errorf("%s: EXPOSE %v lacks %s", path, exposed, want)
			}
		}
	}
	ins := dockerInstructions(t, "deploy/docker/Dockerfile")
	if !slices.Contains(ins["COPY"], "ca-certificates.crt /etc/ssl/certs/ca-certificates.crt") {
		t.Errorf("Dockerfile: no COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt (COPY %q)", ins["COPY"])
	}
	script := string(read(t, "scripts/image"))
	for _, want := range []string{`cp "$CA_BUNDLE" "$CTX/ca-certificates.crt"`, "/etc/ssl/certs/ca-certificates.crt", "no CA certificate bundle"} {
		if !strings.Contains(script, want) {
			t.Errorf("scripts/image does not contain %q: the CA bundle must reach the build context, or the build stop saying why", want)
		}
	}
}

// dockerInstructions returns a Dockerfile's instructions by keyword, their
// arguments as written (continuations joined).
func dockerInstructions(t *testing.T, path string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(read(t, path)))
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimSpace(cont + " " + line)
		cont = ""
		if strings.HasSuffix(line, `\`) {
			cont = strings.TrimSuffix(line, `\`)
			continue
		}
		if line == "" {
			continue
		}
		kw, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		if kw == "COPY" {
			args = strings.TrimSpace(regexp.MustCompile(`--\S+\s+`).ReplaceAllString(args, ""))
		}
		out[strings.ToUpper(kw)] = append(out[strings.ToUpper(kw)], args)
	}
	return out
}

// invocation is `carmy <command> args…` as a README shows it.
var invocation = regexp.MustCompile(`(?:^|[\s;&|(])(?:\S*/)?carmy (serve|cluster|health|tls|keygen)\b([^|;&#)]*)`)

// TestReadmeCommands checks every carmy command line in the deploy READMEs'
// code blocks: its flags must be the command's.
func TestReadmeCommands(t *testing.T) {
	lookup := map[string]func(string) (flagInfo, bool){
		"serve":   serveFlag,
		"cluster": func(n string) (flagInfo, bool) { f, ok := cli.Cluster.Flags[n]; return f, ok },
		"health":  func(n string) (flagInfo, bool) { f, ok := cli.Health.Flags[n]; return f, ok },
		"tls":     func(n string) (flagInfo, bool) { f, ok := cli.TLS.Flags[n]; return f, ok },
		"keygen":  func(string) (flagInfo, bool) { return flagInfo{}, false },
	}
	for _, path := range []string{"deploy/systemd/README.md", "deploy/docker/README.md", "deploy/kubernetes/README.md"} {
		n := 0
		for _, line := range codeLines(read(t, path)) {
			for _, m := range invocation.FindAllStringSubmatch(line, -1) {
				n++
				for _, tok := range strings.Fields(m[2]) {
					if !strings.HasPrefix(tok, "--") || tok == "--" {
						continue
					}
					name, _, _ := strings.Cut(strings.TrimLeft(tok, "-"), "=")
					name = strings.Trim(name, `"'`)
					if _, ok := lookup[m[1]](name); !ok {
						t.Errorf("%s: `carmy %s` has no flag --%s:\n  %s", path, m[1], name, strings.TrimSpace(line))
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%s shows no carmy command", path)
		}
	}
}

// codeLines returns the lines of a Markdown file's fenced code blocks, a
// line continued by a trailing backslash joined with the next.
func codeLines(md []byte) []string {
	var out []string
	in := false
	var cont string
	for _, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			cont = ""
			continue
		}
		if !in {
			continue
		}
		line = cont + line
		if strings.HasSuffix(line, `\`) {
			cont = strings.TrimSuffix(line, `\`) + " "
			continue
		}
		cont = ""
		out = append(out, line)
	}
	return out
}
