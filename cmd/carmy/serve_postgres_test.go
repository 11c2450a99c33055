package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestStoreFlags(t *testing.T) {
	const url = "postgres://carmy:hunter2secret@db:5432/carmy?sslmode=verify-full"
	for _, tt := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"--store", "raft"}, ""},
		{[]string{"--store", url}, ""},
		{[]string{"--store", "postgresql://db/carmy", "--store-lease", "2s"}, ""},
		{[]string{"--dev", "--store", url}, ""},
		{[]string{"--store", "host=/run/postgresql user=carmy password=hunter2secret dbname=carmy"}, ""},
		{[]string{"--store", "dbname = carmy"}, ""},
		{[]string{"--store", "mysql://db/carmy"}, "must be raft, a postgres:// URL or a key=value connection string"},
		{[]string{"--store", "host='/run/postgresql password=hunter2secret"}, "must be raft, a postgres:// URL or a key=value connection string"},
		{[]string{"--store", url, "--join", "127.0.0.1:1"}, "--join and --bootstrap-node make no sense"},
		{[]string{"--store", url, "--bootstrap-node", "a"}, "--join and --bootstrap-node make no sense"},
		{[]string{"--store", url, "--bootstrap"}, "--bootstrap makes no sense"},
		{[]string{"--store", url, "--store-lease", "500ms"}, "at least 1s"},
	} {
		var out bytes.Buffer
		cfg, err := parseServe(tt.args, fakeEnv(nil), &out)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: %v, want an error saying %q", tt.args, err, tt.want)
		case err == nil && cfg.usesPostgres() != (tt.args[1] != "raft") && tt.args[0] == "--store" && len(tt.args) == 2:
			t.Errorf("%q: usesPostgres %v", tt.args, cfg.usesPostgres())
		}
		if err != nil && strings.Contains(err.Error(), "hunter2secret") {
			t.Errorf("%q: the error shows the password: %v", tt.args, err)
		}
	}
	for _, s := range []string{url, "postgres://db/carmy?password=hunter2secret&sslmode=disable", "mysql://u:hunter2secret@db/x",
		"host=db user=carmy password=hunter2secret", "host=db sslpassword='hunter2secret'", "postgres://db/carmy?sslpassword=hunter2secret"} {
		if got := redactedStore(s); strings.Contains(got, "hunter2secret") {
			t.Errorf("redactedStore(%q) = %q", s, got)
		}
	}
}
