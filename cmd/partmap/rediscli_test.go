package main

import (
	"context"
	"maps"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/redistest"
)

// An interactive redis-cli, on a terminal, shows the same hints, replies
// and prompts against partmap's Redis port as against Debian's
// redis-server: typing a command shows its arguments' hint (which
// redis-cli builds from COMMAND), MULTI turns the prompt into "(TX)".
func TestRedisCliInteractive(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not installed (Debian's redis-tools; make deps installs it)")
	}
	respAddr, _, redis := besideRedis(t)

	// Each step is typed, then Enter pressed. Only commands whose replies
	// partmap claims to match (README: "Use it from Redis clients").
	steps := []string{
		"HSET alice@example.com fullName Alice visits 1",
		"HGET alice@example.com fullName",
		"HMGET alice@example.com fullName nope",
		"HGET nobody@example.com fullName",
		"MULTI",
		"HINCRBY alice@example.com visits 5",
		"HEXISTS alice@example.com visits",
		"EXEC",
		"TTL alice@example.com",
		"GET alice@example.com",
		"DISCARD",
		"HINCRBY alice@example.com fullName 1",
	}
	// And the hint of every command both have, typed alone.
	both := strings.Fields("PING ECHO HELLO AUTH SELECT INFO DBSIZE HSET HMSET HSETNX HGET HMGET HGETALL HKEYS HVALS HLEN " +
		"HEXISTS HSTRLEN HDEL HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN DEL UNLINK EXISTS TYPE EXPIRE PEXPIRE EXPIREAT PEXPIREAT " +
		"TTL PTTL EXPIRETIME PEXPIRETIME PERSIST SCAN GET STRLEN LLEN SCARD SMEMBERS ZCARD WATCH RENAME RENAMENX COPY FLUSHDB FLUSHALL TIME")
	both = append(both, "CLIENT SETNAME", "COMMAND INFO", "CONFIG GET", "CONFIG SET")
	got := cliSession(t, respAddr, steps, both...)
	want := cliSession(t, redis.Addr, steps, both...)
	for i, step := range append(steps, both...) {
		if got[i] != want[i] {
			t.Errorf("%q:\npartmap:\n%s\nredis-server:\n%s", step, got[i], want[i])
		}
	}
	// Those Redis 7.0 lacks hint from partmap's COMMAND DOCS alone.
	mine := map[string]string{ // each after its key
		"HEXPIRE": "seconds [NX|XX|GT|LT] FIELDS numfields field [field ...]",
		"HTTL":    "FIELDS numfields field [field ...]",
		"HGETEX":  "[EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|PERSIST] FIELDS numfields field [field ...]",
		"HSETEX":  "[FNX|FXX] [EX seconds|PX milliseconds|EXAT unix-time-seconds|PXAT unix-time-milliseconds|KEEPTTL] FIELDS numfields field value [field value ...]",
		"HGETDEL": "FIELDS numfields field [field ...]",
	}
	names := slices.Sorted(maps.Keys(mine))
	hints := cliSession(t, respAddr, nil, append(names, "PARTMAP.SEARCH")...)
	for i, name := range names {
		if want := "HOST> " + name + " key " + mine[name]; hints[i] != want {
			t.Errorf("hint of %s: %q, want %q", name, hints[i], want)
		}
	}
	if want := "HOST> PARTMAP.SEARCH cursor field value [field value ...] [COUNT count]"; hints[len(names)] != want {
		t.Errorf("hint of PARTMAP.SEARCH: %q, want %q", hints[len(names)], want)
	}
	// The comparison alone would pass if both showed nothing.
	for _, s := range []string{
		"HOST> HSET alice@example.com fullName Alice visits 1 [field value ...]", // the hint
		"(integer) 2",
		`1) "Alice"` + "\n" + `2) (nil)`,
		"HOST(TX)> HINCRBY alice@example.com visits 5\nQUEUED",
		"1) (integer) 6\n2) (integer) 1",
		"(error) WRONGTYPE Operation against a key holding the wrong kind of value",
		"(error) ERR DISCARD without MULTI",
	} {
		if !strings.Contains(strings.Join(got, "\n"), s) {
			t.Errorf("partmap's session lacks %q:\n%s", s, strings.Join(got, "\n"))
		}
	}
}

// besideRedis starts a partmap server, started, with a Redis port, and a
// redis-server beside it; it returns partmap's Redis address and HTTP
// client.
func besideRedis(t *testing.T) (respAddr string, cl *pmhttp.Client, redis *redistest.Server) {
	t.Helper()
	respAddr = freeAddr(t)
	url, _ := serveInProcess(t, "--resp-addr", respAddr)
	cl, err := pmhttp.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return respAddr, cl, redistest.StartTestServer(t)
}

// cliSession runs redis-cli on a pseudo-terminal against addr and types
// each step. For each it returns the screen's lines from the typed line,
// with the hint redis-cli showed just before Enter, to the next prompt,
// with the address in the prompt written HOST.
func cliSession(t *testing.T, addr string, steps []string, hints ...string) []string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-cli", "-h", host, "-p", port)
	cmd.Env = append(os.Environ(), "TERM=xterm", "HOME="+t.TempDir()) // no history file of ours
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 250})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		f.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	scr := &screen{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			scr.write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	prompt := host + ":" + port
	waitFor := func(what string, ok func(lines []string) bool) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			// Quiet for a while too: a line and its hint may come in two
			// reads.
			lines, last := scr.snapshot()
			if ok(lines) && time.Since(last) > 30*time.Millisecond {
				return lines
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis-cli on %s: no %s; the screen:\n%s", addr, what, strings.Join(lines, "\n"))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	isPrompt := func(l string) bool { return strings.HasPrefix(l, prompt) && strings.HasSuffix(l, "> ") }
	waitFor("first prompt", func(lines []string) bool { return isPrompt(lines[len(lines)-1]) })
	out := make([]string, len(steps))
	for i, step := range steps {
		lines, _ := scr.snapshot()
		start := len(lines) - 1
		if _, err := f.Write([]byte(step)); err != nil {
			t.Fatal(err)
		}
		// The hint is drawn with the last character typed.
		typed := waitFor("echo of "+step, func(lines []string) bool {
			return strings.Contains(lines[len(lines)-1], "> "+step) && scr.redrawn()
		})
		hinted := strings.TrimRight(typed[len(typed)-1], " ")
		if _, err := f.Write([]byte("\r")); err != nil {
			t.Fatal(err)
		}
		lines = waitFor("prompt after "+step, func(lines []string) bool {
			return len(lines)-1 > start && isPrompt(lines[len(lines)-1])
		})
		shown := []string{hinted}
		for _, l := range lines[start+1 : len(lines)-1] {
			l = strings.TrimRight(l, " ")
			if cliLatency.MatchString(l) {
				continue // redis-cli's own timing of a slow reply, not the reply
			}
			shown = append(shown, l)
		}
		out[i] = strings.ReplaceAll(strings.Join(shown, "\n"), prompt, "HOST")
	}
	// A hint alone: the command's name typed, the line shown, and the
	// line wiped with ^U.
	for _, name := range hints {
		if _, err := f.Write([]byte(name + " ")); err != nil {
			t.Fatal(err)
		}
		typed := waitFor("echo of "+name, func(lines []string) bool {
			return strings.Contains(lines[len(lines)-1], "> "+name+" ") && scr.redrawn()
		})
		out = append(out, strings.ReplaceAll(strings.TrimRight(typed[len(typed)-1], " "), prompt, "HOST"))
		if _, err := f.Write([]byte("\x15")); err != nil {
			t.Fatal(err)
		}
		waitFor("an empty line after ^U", func(lines []string) bool { return isPrompt(lines[len(lines)-1]) })
	}
	return out
}

// screen is as much of a terminal as redis-cli's line editor needs:
// carriage return, newline, erase to the end of the line, cursor right,
// and colours, which it drops.
type screen struct {
	mu    sync.Mutex
	lines [][]rune
	col   int
	esc   []byte // an escape sequence begun
	last  time.Time
	moved bool // the last thing written moved the cursor: a redraw ended
}

func (s *screen) write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = time.Now()
	if s.lines == nil {
		s.lines = [][]rune{nil}
	}
	for _, r := range string(p) {
		row := len(s.lines) - 1
		s.moved = false
		if s.esc != nil {
			s.esc = append(s.esc, byte(r))
			if len(s.esc) > 1 && r >= '@' && r <= '~' {
				s.control(row)
			}
			continue
		}
		switch r {
		case '\x1b':
			s.esc = []byte{}
		case '\r':
			s.col = 0
		case '\n':
			s.lines = append(s.lines, nil)
			s.col = 0
		default:
			line := s.lines[row]
			for len(line) < s.col {
				line = append(line, ' ')
			}
			if s.col < len(line) {
				line[s.col] = r
			} else {
				line = append(line, r)
			}
			s.lines[row] = line
			s.col++
		}
	}
}

// control carries out the escape sequence in s.esc ("[0K", "[12C", …).
func (s *screen) control(row int) {
	seq := string(s.esc)
	s.esc = nil
	if !strings.HasPrefix(seq, "[") {
		return
	}
	arg, final := seq[1:len(seq)-1], seq[len(seq)-1]
	switch final {
	case 'K':
		if s.col < len(s.lines[row]) {
			s.lines[row] = s.lines[row][:s.col]
		}
	case 'C':
		n, err := strconv.Atoi(arg)
		if err != nil {
			n = 1
		}
		s.col += n
		s.moved = true
	}
}

// redrawn tells whether the line editor finished redrawing the line (it
// ends a redraw, hint and all, by moving the cursor back).
func (s *screen) redrawn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moved
}

// snapshot returns the screen's lines and when it last changed.
func (s *screen) snapshot() ([]string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.lines))
	for _, l := range s.lines {
		out = append(out, string(l))
	}
	if len(out) == 0 {
		out = append(out, "")
	}
	return out, s.last
}

// redis-benchmark, with keys that are emails, runs against partmap as
// against redis-server, without an error, and leaves what it wrote: its
// random keys (redis-benchmark 7.0 has no seed, so not the same ones),
// seen over HTTP too, and a counter that every pipelined increment
// reached.
func TestRedisBenchmark(t *testing.T) {
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		t.Fatal("redis-benchmark is not installed (Debian's redis-tools; make deps installs it)")
	}
	respAddr, cl, redis := besideRedis(t)
	// A server that stops answering fails the test, not go test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cli := func(addr string, args ...string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	runs := [][]string{
		{"-t", "ping", "-n", "2000"},
		{"-n", "3000", "-r", "1000", "HSET", "u__rand_int__@x.io", "fullName", "v"},
		{"-n", "3000", "-r", "1000", "HGET", "u__rand_int__@x.io", "fullName"},
		{"-n", "2000", "-P", "16", "HINCRBY", "counter@x.io", "visits", "1"},
	}
	for _, addr := range []string{respAddr, redis.Addr} {
		host, port, _ := net.SplitHostPort(addr)
		for _, run := range runs {
			args := append([]string{"-h", host, "-p", port, "-c", "16", "-q"}, run...)
			out, err := exec.CommandContext(ctx, bench, args...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "rror") || !strings.Contains(string(out), "requests per second") {
				t.Fatalf("redis-benchmark %q against %s: %v\n%s", run, addr, err, out)
			}
		}
	}
	for _, addr := range []string{respAddr, redis.Addr} {
		// 3,000 HSETs of 1,000 random keys, and the counter.
		if n, _ := strconv.Atoi(cli(addr, "DBSIZE")); n < 900 || n > 1001 {
			t.Errorf("%s: DBSIZE %d after the HSETs", addr, n)
		}
		if got := cli(addr, "HGET", "counter@x.io", "visits"); got != "2000" {
			t.Errorf("%s: 2,000 pipelined HINCRBYs left %s", addr, got)
		}
	}
	st, err := cl.ListPartitions(ctx)
	if n := cli(respAddr, "DBSIZE"); err != nil || strconv.Itoa(int(st.TotalProfiles)) != n {
		t.Errorf("over HTTP %d profiles (%v), DBSIZE %s", st.TotalProfiles, err, n)
	}
}

// cliLatency is the line redis-cli prints after a reply that took longer
// than half a second, such as "(0.51s)" on a loaded machine.
var cliLatency = regexp.MustCompile(`^\(\d+\.\d+s\)$`)
