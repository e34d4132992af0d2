// Package pgtest starts a real PostgreSQL server for tests: a fresh
// cluster (initdb) in a temporary directory, listening on a private unix
// socket directory and a free loopback port, with trust authentication
// for the user postgres and PostgreSQL's default durability settings.
// Debian's postgresql package must be installed (make deps installs it).
//
// PostgreSQL refuses to run as root: a test running as root runs initdb
// and postgres as the postgres user, who owns the temporary directory.
package pgtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running (or stopped, between Stop and Start) PostgreSQL.
type Server struct {
	Dir    string // the temporary directory: data/, sock/, log
	Socket string // the unix socket directory
	Port   int
	// MaxConnections is PostgreSQL's max_connections from the next
	// Start; 0 means 50.
	MaxConnections int

	bin   string
	cred  *syscall.Credential
	mu    sync.Mutex
	cmd   *exec.Cmd
	exit  chan error
	clean func()
}

// Start initialises a new cluster and starts it; the test's cleanup stops
// it and removes its files. It fails the test when PostgreSQL is missing.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// New initialises a cluster without starting it.
func New() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Socket: filepath.Join(dir, "sock"), bin: bin, clean: func() { os.RemoveAll(dir) }}
	if err := os.Mkdir(s.Socket, 0o700); err != nil {
		s.clean()
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			s.clean()
			return nil, fmt.Errorf("pgtest: running as root, PostgreSQL needs the user postgres (make deps installs the postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, p := range []string{dir, s.Socket} {
			if err := os.Chown(p, uid, gid); err != nil {
				s.clean()
				return nil, err
			}
		}
	}
	if s.Port, err = freePort(); err != nil {
		s.clean()
		return nil, err
	}
	// -N: initdb's own fsyncs only; the server keeps fsync on.
	out, err := s.command("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "-N").CombinedOutput()
	if err != nil {
		s.clean()
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

// URL is the connection string: the user postgres, database postgres, over
// the unix socket.
func (s *Server) URL() string { return s.DatabaseURL("postgres") }

// DatabaseURL is the connection string of another database.
func (s *Server) DatabaseURL(db string) string {
	q := url.Values{"host": {s.Socket}, "port": {strconv.Itoa(s.Port)}, "sslmode": {"disable"}}
	return "postgres://postgres@/" + url.PathEscape(db) + "?" + q.Encode()
}

// TCPURL is the connection string over loopback TCP.
func (s *Server) TCPURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Start starts the server and returns once it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: already running")
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := s.command("postgres", "-D", s.data(), "-k", s.Socket, "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections="+strconv.Itoa(cmp.Or(s.MaxConnections, 50)))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	s.cmd, s.exit = cmd, exit
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case werr := <-exit:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
			return fmt.Errorf("pgtest: postgres exited (%v):\n%s", werr, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stopLocked(syscall.SIGQUIT)
			return fmt.Errorf("pgtest: postgres did not accept connections: %v", err)
		}
	}
}

// Stop shuts the server down fast (SIGINT: sessions are ended, the
// checkpoint written) and waits for it.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGINT)
}

// Crash stops the server as a crash would (SIGQUIT: no checkpoint; the
// next Start recovers from the WAL).
func (s *Server) Crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGQUIT)
}

func (s *Server) stopLocked(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exit:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	s.Crash()
	s.clean()
}

// binDir finds PostgreSQL's server binaries: Debian keeps them under
// /usr/lib/postgresql/VERSION/bin, out of PATH; the newest wins.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: PostgreSQL's server is not installed (make deps installs Debian's postgresql package)")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
