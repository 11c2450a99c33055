// Package pgtest starts PostgreSQL servers that a test process owns: each
// in a temporary directory of its own (data, log and socket), listening
// only on a Unix socket there, stopped and removed when the test is done.
// It needs the server binaries (initdb and postgres) of a PostgreSQL
// installation, such as Debian's postgresql package; FindBin says where
// they are, or ErrNoPostgres.
//
// initdb and postgres refuse to run as root: when the test runs as root,
// the server runs as the "postgres" user (else "nobody") through the
// process credentials of os/exec, with the directory given to that user.
//
// The server is the test process's direct child, started without pg_ctl:
// Stop sends the signals pg_ctl stop sends (SIGINT for -m fast, SIGQUIT for
// -m immediate), Kill sends SIGKILL, and the kernel sends SIGQUIT to the
// server if the test process dies first (a panic, a -timeout), so that no
// server outlives its test.
//
// It is a test harness, not a supported API: only tests (_test.go files)
// import it, and it changes with them.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoPostgres says that the server binaries were not found.
var ErrNoPostgres = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found: " +
	"install Debian's postgresql package, or put its bin directory on PATH or in CARMY_POSTGRES_BIN")

// User is the role the servers create; it needs no password (trust
// authentication on the socket only).
const User = "carmy"

// port only names the socket file (.s.PGSQL.<port>): the server listens on
// no TCP port, and its directory is its own, so the number never collides.
const port = 5432

// StartTimeout bounds how long a server may take to accept connections.
const StartTimeout = 60 * time.Second

// FindBin returns the directory holding initdb and postgres: CARMY_POSTGRES_BIN
// when set, else initdb's directory on PATH, else the newest
// /usr/lib/postgresql/<version>/bin.
func FindBin() (string, error) {
	ok := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("CARMY_POSTGRES_BIN"); dir != "" {
		if ok(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w (CARMY_POSTGRES_BIN=%s has none)", ErrNoPostgres, dir)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && ok(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if ok(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if ok(dir) {
			return dir, nil
		}
	}
	return "", ErrNoPostgres
}

func versionOf(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

// Server is one PostgreSQL server in a directory of its own.
type Server struct {
	Dir  string // socket, data (Dir/data) and log (Dir/server.log)
	bin  string
	cred *syscall.Credential // nil unless running as root

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Start initialises a new cluster in a new temporary directory and starts
// a server on it. Close stops it and removes the directory.
func Start() (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		if s.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	if s.Dir, err = os.MkdirTemp(tempBase(), "carmy-pg-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(s.Dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			s.remove()
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	initdb := s.command("initdb", "-D", s.dataDir(), "-U", User, "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		s.remove()
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	if err := s.Restart(); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// tempBase is where server directories go: the system's temporary
// directory, unless its path is too long for a socket (108 bytes on Linux)
// or, as root, it is not searchable by the server's user.
func tempBase() string {
	base := os.TempDir()
	fi, err := os.Stat(base)
	if err != nil || len(base) > 60 || (os.Geteuid() == 0 && fi.Mode().Perm()&0o001 == 0) {
		return "/tmp"
	}
	return base
}

// unprivileged returns the credentials of the server's user when the test
// runs as root.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("pgtest: running as root, and neither a postgres nor a nobody user exists to run the server as")
}

func (s *Server) dataDir() string { return filepath.Join(s.Dir, "data") }
func (s *Server) logPath() string { return filepath.Join(s.Dir, "server.log") }

// command prepares one of the server binaries, run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

// DSN returns a connection string for database over the server's socket.
func (s *Server) DSN(database string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Dir, port, User, database)
}

// URL returns the postgres:// URL of database over the server's socket,
// as carmy serve --store takes it.
func (s *Server) URL(database string) string { return socketURL(s.Dir, port, database) }

// socketURL is the URL of database over the socket in dir.
func socketURL(dir string, port int, database string) string {
	q := url.Values{"host": {dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	return "postgres://" + User + "@/" + url.PathEscape(database) + "?" + q.Encode()
}

// Running reports whether the server was started and not stopped since.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Restart starts the server again on its data directory, after Stop or
// Kill, and returns once it accepts connections. After Kill, backends of
// the killed server may hold its shared memory for a moment: the new
// server is retried until StartTimeout.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: the server is running")
	}
	deadline := time.Now().Add(StartTimeout)
	for {
		err := s.startOnce(deadline)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startOnce starts the postmaster and waits until it accepts a connection
// or exits.
func (s *Server) startOnce(deadline time.Time) error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	cmd := s.command("postgres", "-D", s.dataDir(), "-k", s.Dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=", "-c", "max_connections=400", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgconn.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres exited while starting (%v); log:\n%s", cmd.ProcessState, s.LogTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("pgtest: postgres did not accept connections within %s: %w; log:\n%s", StartTimeout, err, s.LogTail())
		}
	}
}

// Stop shuts the server down with sig (SIGINT: fast, SIGQUIT: immediate,
// SIGKILL: kill -9) and waits for the postmaster to exit. A stopped server
// is started again with Restart.
func (s *Server) Stop(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgtest: signal %v: %w", sig, err)
	}
	select {
	case <-s.exited:
	case <-time.After(StartTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
	return nil
}

// Kill is kill -9 of the postmaster: it dies at once, and its backends
// exit when they notice.
func (s *Server) Kill() error { return s.Stop(syscall.SIGKILL) }

// Close stops the server (fast shutdown) and removes its directory.
func (s *Server) Close() error {
	err := s.Stop(syscall.SIGINT)
	s.remove()
	return err
}

func (s *Server) remove() { _ = os.RemoveAll(s.Dir) }

// LogTail returns the end of the server's log, for failure messages.
func (s *Server) LogTail() string {
	f, err := os.Open(s.logPath())
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	const tail = 4 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > tail {
		_, _ = f.Seek(-tail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(bytes.TrimSpace(b))
}
