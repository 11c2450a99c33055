// Command pgentry is the entrypoint of the PostgreSQL test image
// (`scripts/image --postgres`, deploy/docker/postgres-test/Dockerfile):
// the machine's own PostgreSQL server on an empty base, so that
// compose.postgres.yaml can run where no registry is reachable.
//
// It reads the variables compose.postgres.yaml gives its database
// service, with the meaning the PostgreSQL project's image gives them:
//
//	POSTGRES_USER            the superuser (default postgres)
//	POSTGRES_DB              a database created on first start (default: the user's name)
//	POSTGRES_PASSWORD_FILE   a file holding the superuser's password
//	POSTGRES_PASSWORD        the password, when no file is named
//	PGDATA                   the data directory (default /var/lib/postgresql/data)
//
// On a first start (no PG_VERSION in PGDATA) it runs initdb with the
// password, lets hosts of any address in with it (scram-sha-256; local
// socket connections are trusted, as the healthcheck's pg_isready needs),
// and creates the database in single-user mode. Then it replaces itself
// with the server, listening on every address. A start without a password
// stops with a message, as the image it stands in for does.
//
// This image is for tests: production runs the PostgreSQL its operators
// trust. The command is a test harness, not a supported program: it
// changes with the tests that use it.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// bin is where the server's programs are in the image: the paths of the
// machine that built it.
var bin = os.Getenv("PGBIN")

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "pgentry: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if bin == "" {
		return errors.New("PGBIN is not set: the image names the directory of postgres and initdb")
	}
	data := envOr("PGDATA", "/var/lib/postgresql/data")
	user := envOr("POSTGRES_USER", "postgres")
	db := envOr("POSTGRES_DB", user)
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		password, err := passwordOf()
		if err != nil {
			return err
		}
		if err := initialise(data, user, db, password); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("reading %s: %w", data, err)
	}
	server := filepath.Join(bin, "postgres")
	return syscall.Exec(server, []string{server, "-D", data, "-c", "listen_addresses=*"}, os.Environ())
}

// passwordOf reads POSTGRES_PASSWORD_FILE, or POSTGRES_PASSWORD.
func passwordOf() (string, error) {
	if path := os.Getenv("POSTGRES_PASSWORD_FILE"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("POSTGRES_PASSWORD_FILE: %w", err)
		}
		if p := strings.TrimRight(string(raw), "\r\n"); p != "" {
			return p, nil
		}
		return "", fmt.Errorf("POSTGRES_PASSWORD_FILE: %s is empty", path)
	}
	if p := os.Getenv("POSTGRES_PASSWORD"); p != "" {
		return p, nil
	}
	return "", errors.New("no password: set POSTGRES_PASSWORD_FILE (or POSTGRES_PASSWORD)")
}

// initialise makes the cluster in data with user as its superuser, and
// db in it.
func initialise(data, user, db, password string) error {
	pwfile, err := os.CreateTemp("", "pgentry-password")
	if err != nil {
		return fmt.Errorf("writing the password for initdb: %w", err)
	}
	defer os.Remove(pwfile.Name())
	if _, err := pwfile.WriteString(password + "\n"); err != nil {
		return fmt.Errorf("writing the password for initdb: %w", err)
	}
	if err := pwfile.Close(); err != nil {
		return fmt.Errorf("writing the password for initdb: %w", err)
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", user, "--pwfile", pwfile.Name(),
		"--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C")
	initdb.Stdout, initdb.Stderr = os.Stdout, os.Stderr
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pg_hba.conf: %w", err)
	}
	_, err = hba.WriteString("host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n")
	if cerr := hba.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pg_hba.conf: %w", err)
	}
	if db == "postgres" {
		return nil
	}
	// Single-user mode: one statement, ended by a semicolon and an empty
	// line (-j).
	single := exec.Command(filepath.Join(bin, "postgres"), "--single", "-j", "-D", data, "postgres")
	single.Stdin = strings.NewReader("CREATE DATABASE " + quoteIdent(db) + ";\n\n")
	var out bytes.Buffer
	single.Stdout, single.Stderr = &out, &out
	if err := single.Run(); err != nil {
		return fmt.Errorf("creating database %s: %w\n%s", db, err, out.Bytes())
	}
	if bytes.Contains(out.Bytes(), []byte("ERROR")) {
		return fmt.Errorf("creating database %s:\n%s", db, out.Bytes())
	}
	return nil
}

// quoteIdent quotes name as an SQL identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
