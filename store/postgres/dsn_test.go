package postgres_test

import (
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store/postgres"
)

// Issue 39: the database password showed in errors and logs for
// key=value connection strings and for sslpassword. RedactDSN covers
// every form pgx takes.
func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		// URLs: userinfo, password and sslpassword query parameters.
		"postgres://carmy:hunter2secret@db:5432/carmy?sslmode=verify-full": "postgres://carmy:xxxxx@db:5432/carmy?sslmode=verify-full",
		"postgresql://db/carmy?password=hunter2secret&sslmode=disable":     "postgresql://db/carmy?password=xxxxx&sslmode=disable",
		"postgres://db/carmy?sslpassword=hunter2secret&sslkey=%2Fk.pem":    "postgres://db/carmy?sslkey=%2Fk.pem&sslpassword=xxxxx",
		"postgres://carmy@db/carmy":                                        "postgres://carmy@db/carmy",
		// key=value: plain, quoted (with escapes), spaced around '='.
		"host=/tmp user=carmy password=hunter2secret dbname=carmy":        "host=/tmp user=carmy password=xxxxx dbname=carmy",
		"host=db password='hunter2 secret' sslpassword=hunter2secret":     "host=db password=xxxxx sslpassword=xxxxx",
		`host=db password='hunter2\'secret\\' dbname=carmy`:               "host=db password=xxxxx dbname=carmy",
		"host=db password = hunter2secret   dbname =  carmy":              "host=db password=xxxxx dbname=carmy",
		`host=db password=hunter2\ secret application_name='carmy web-1'`: "host=db password=xxxxx application_name='carmy web-1'",
		"host=db\tuser=carmy\npassword=hunter2secret":                     "host=db user=carmy password=xxxxx",
		"host=db password=": "host=db password=xxxxx",
		// Neither form: nothing of it shown.
		"host=db password='hunter2secret":            "(unparsable connection string)",
		"postgres://carmy:hunter2%zzsecret@db/carmy": "(unparsable connection string)",
		"hunter2secret":                "(unparsable connection string)",
		"mysql://u:hunter2secret@db/x": "(unparsable connection string)",
	} {
		got := postgres.RedactDSN(in)
		if got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("RedactDSN(%q) = %q: the password shows", in, got)
		}
	}
}

func TestIsKeyValueDSN(t *testing.T) {
	for in, want := range map[string]bool{
		"host=/tmp user=carmy dbname=carmy": true,
		"dbname = carmy":                    true,
		"host='/a b' port=5432":             true,
		"raft":                              false,
		"":                                  false,
		"postgres://db/carmy?sslmode=x":     false,
		"mysql://u@db/x?a=b":                false,
		"host='/tmp":                        false,
		"=carmy":                            false,
	} {
		if got := postgres.IsKeyValueDSN(in); got != want {
			t.Errorf("IsKeyValueDSN(%q) = %v, want %v", in, got, want)
		}
	}
}
