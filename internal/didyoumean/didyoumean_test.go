package didyoumean

import (
	"flag"
	"io"
	"testing"
)

func TestFlagError(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("http-addr", "", "")
	fs.String("raft-addr", "", "")
	fs.Bool("dev", false, "")
	for _, tt := range []struct{ arg, want string }{
		{"--http-adr", "unknown flag --http-adr (did you mean --http-addr?)"},
		{"-HTTP-ADDR", "unknown flag --HTTP-ADDR (did you mean --http-addr?)"},
		{"--devv", "unknown flag --devv (did you mean --dev?)"},
		{"--zzzzzzzz", "unknown flag --zzzzzzzz"},
		{"--http-addr", `flag needs an argument: -http-addr`},
	} {
		err := fs.Parse([]string{tt.arg})
		if err == nil {
			t.Fatalf("%s: parsed", tt.arg)
		}
		if got := FlagError(err, fs); got != tt.want {
			t.Errorf("%s: FlagError = %q, want %q", tt.arg, got, tt.want)
		}
	}
}

func TestNearest(t *testing.T) {
	keys := []string{"max_running", "demo_tools", "tools"}
	for word, want := range map[string]string{"max_runing": "max_running", "demo_tool": "demo_tools", "zzzzzzzzzz": "", "Tools": "tools"} {
		if got := Nearest(word, keys, 2); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", word, got, want)
		}
	}
}
