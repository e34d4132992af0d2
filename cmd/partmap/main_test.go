package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// logWriter collects a server's log and reports the address it serves on.
type logWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
	sent bool
}

var addrRE = regexp.MustCompile(`msg=serving addr=(https?://\S+)`)

func newLogWriter() *logWriter { return &logWriter{addr: make(chan string, 1)} }

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := addrRE.FindSubmatch(w.buf.Bytes()); m != nil && !w.sent {
		w.sent = true
		w.addr <- string(m[1])
	}
	return len(p), nil
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// serveInProcess runs `partmap serve` through Main on a free port and stops
// it, checking for a clean exit, when the test ends.
// startedServer serves a started directory in-process and returns the
// --server flag that reaches it.
func startedServer(t *testing.T) string {
	t.Helper()
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	if code, _, errOut := run(t, "", "start", srv); code != 0 {
		t.Fatalf("start: %s", errOut)
	}
	return srv
}

func serveInProcess(t *testing.T, args ...string) (url, data string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithCancel(context.Background())
	logs := newLogWriter()
	exit := make(chan int, 1)
	go func() {
		base := []string{"serve", "--addr", "127.0.0.1:0", "--data", data}
		if slices.Contains(args, "--store") {
			base = base[:3] // the store is named; no data directory
		}
		args := append(base, args...)
		exit <- Main(ctx, args, strings.NewReader(""), io.Discard, logs)
	}()
	select {
	case url = <-logs.addr:
	case code := <-exit:
		t.Fatalf("serve exited with %d: %s", code, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start: %s", logs)
	}
	t.Cleanup(func() {
		cancel()
		if code := <-exit; code != 0 || !strings.Contains(logs.String(), "stopped cleanly") {
			t.Errorf("serve exited with %d: %s", code, logs)
		}
	})
	return url, data
}

// run runs the CLI in-process and returns its exit code and output.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// buildBinary builds partmap once per test run, for the tests that must
// kill a real process.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := shared.TempDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "partmap")
	out, err := exec.Command("go", "build", "-ldflags=-w", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// binary is buildBinary's partmap, or the test fails.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// process is a real `partmap serve` child process.
type process struct {
	cmd  *exec.Cmd
	url  string
	logs *logWriter
}

func startProcess(t *testing.T, data string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, nil, data, args...)
}

// startProcessEnv is startProcess with env added to the child's environment.
func startProcessEnv(t *testing.T, env []string, data string, args ...string) *process {
	t.Helper()
	bin := binary(t)
	logs := newLogWriter()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			logs.Write(append(s.Bytes(), '\n'))
		}
	}()
	p := &process{cmd: cmd, logs: logs}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	select {
	case p.url = <-logs.addr:
	case <-time.After(30 * time.Second):
		t.Fatalf("partmap serve did not start: %s", logs)
	}
	return p
}

func (p *process) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	p.cmd.Wait()
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{count(0, "profile"), "0 profiles"}, {count(1, "profile"), "1 profile"}, {count(int64(2), "partition"), "2 partitions"},
		{count(1, "index"), "1 index"}, {count(3, "index"), "3 indexes"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
