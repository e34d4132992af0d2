package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/redistest"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

// startWatch runs `partmap watch` in the background until stop, which
// returns its exit code.
func startWatch(t *testing.T, args ...string) (out, errOut *storetest.SyncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut = &storetest.SyncBuffer{}, &storetest.SyncBuffer{}
	exit := make(chan int, 1)
	go func() { exit <- Main(ctx, append([]string{"watch"}, args...), strings.NewReader(""), out, errOut) }()
	var once sync.Once
	code := -1
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-exit:
			case <-time.After(30 * time.Second):
				t.Error("watch did not stop when interrupted")
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return out, errOut, stop
}

// waitFor polls until cond holds, failing after a bound only a broken
// command reaches.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

var watchLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\S+) (\S+) ("[0-9a-f]{16}"|-) (\{.*\}|-)$`)

func TestWatchOnce(t *testing.T) {
	srv := startedServer(t)
	must := mustRun(t, srv)
	must("", "put", "ada@example.com", "--name", "Ada")
	must("", "put", "bob@example.com", "--name", "Bob")
	must("", "patch", "ada@example.com", "--set", "tier=gold")
	must("", "delete", "bob@example.com")

	out, _ := must("", "watch", "--once")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := [][3]string{
		{"put", "ada@example.com", `{"emailAddress":"ada@example.com","fullName":"Ada"}`},
		{"put", "bob@example.com", `{"emailAddress":"bob@example.com","fullName":"Bob"}`},
		{"patch", "ada@example.com", `{"emailAddress":"ada@example.com","fullName":"Ada","tier":"gold"}`},
		{"delete", "bob@example.com", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("watch --once: %q", out)
	}
	for i, line := range lines {
		m := watchLine.FindStringSubmatch(line)
		if m == nil || m[1] != want[i][0] || m[2] != want[i][1] || m[4] != want[i][2] || (m[3] == "-") != (want[i][2] == "-") {
			t.Errorf("line %d: %q, want %v", i, line, want[i])
		}
	}

	// JSON Lines: the wire's changes, each with its cursor, from which a
	// later watch resumes.
	out, _ = must("", "watch", "--once", "--json", "--limit", "1")
	var changes []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		changes = append(changes, c)
	}
	if len(changes) != 4 || changes[0]["op"] != "put" || changes[0]["etag"] == nil || changes[3]["profile"] != nil || changes[3]["etag"] != nil {
		t.Fatalf("watch --once --json: %q", out)
	}
	rest, _ := must("", "watch", "--once", "--after", changes[1]["cursor"].(string))
	if got := strings.Count(rest, "\n"); got != 2 || !strings.HasPrefix(strings.SplitN(rest, " ", 3)[1], "patch") {
		t.Errorf("watch --once --after the second cursor: %q", rest)
	}
	if out, _ := must("", "watch", "--once", "--after", "now"); out != "" {
		t.Errorf("watch --once --after now: %q", out)
	}

	// One profile, in any spelling.
	out, _ = must("", "watch", "--once", "--email", " BOB@Example.com")
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || !strings.Contains(lines[0], " put bob@example.com ") || !strings.HasSuffix(lines[1], " delete bob@example.com - -") {
		t.Errorf("watch --email bob: %q", out)
	}
	// Partitions: bob's is 145, ada's 562.
	if out, _ := must("", "watch", "--once", "--from", "100", "--to", "200"); strings.Count(out, " bob@example.com ") != 2 || strings.Contains(out, "ada@") {
		t.Errorf("watch --from 100 --to 200: %q", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ErrBothFilters", []string{"--email", "a@example.com", "--from", "3"}, 2, "give one"},
		{"ErrLimit", []string{"--limit", "0"}, 2, "--limit"},
		{"ErrArgument", []string{"extra"}, 2, "usage: partmap watch"},
		{"ErrCursor", []string{"--after", "nope"}, 1, "invalid"},
		{"HelpIsNotAnError", []string{"--help"}, 0, "--after start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, "", append([]string{"watch", "--once", srv}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("got %d %q, want %d and %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
}

// countingProxy forwards to the server at target and counts the requests
// for the change feed; past give, it cancels stop, so that a watch that
// would not end does.
func countingProxy(t *testing.T, target string, give int64, stop context.CancelFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/changes") && n.Add(1) > give {
			stop()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	return proxy, &n
}

// watch --once ends once it has caught up, on every store and with every
// filter, having printed each change once, in about one request per page.
// On Redis an empty page's cursor moves with the clock, so a watch that
// waited for an empty page to stay where it was never ended there.
func TestWatchOnceEndsOnEveryStore(t *testing.T) {
	for _, store := range []string{"pebble", "redis", "redis-cluster"} {
		t.Run(store, func(t *testing.T) {
			var args []string
			switch store {
			case "redis":
				args = []string{"--store", "redis://" + redistest.StartTestServer(t).Addr + "/0"}
			case "redis-cluster":
				args = append(onSharedCluster(t, "once"), "--redis-min-replicas-ack", "1")
			}
			url, _ := serveInProcess(t, args...)
			must := mustRun(t, "--server="+url)
			must("", "start")
			// bob's partition is 145, ada's 562.
			must("", "put", "ada@example.com", "--name", "Ada")
			must("", "put", "bob@example.com", "--name", "Bob")
			must("", "patch", "ada@example.com", "--set", "tier=gold")
			must("", "delete", "bob@example.com") // acknowledged just before the first watch starts
			for _, tc := range []struct {
				args  []string
				lines int
				pages int // one request each, plus one to find the end
			}{
				{nil, 4, 1},
				{[]string{"--limit", "1"}, 4, 4},
				{[]string{"--limit", "3", "--json"}, 4, 2},
				{[]string{"--email", "BOB@example.com"}, 2, 1},
				{[]string{"--from", "100", "--to", "200"}, 2, 1},
				{[]string{"--from", "600"}, 0, 1},
				{[]string{"--email", "nobody@example.com", "--limit", "1"}, 0, 1},
				{[]string{"--after", "now"}, 0, 1},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				proxy, requests := countingProxy(t, url, 50, cancel)
				var out, errOut bytes.Buffer
				code := Main(ctx, append([]string{"watch", "--once", "--server=" + proxy.URL}, tc.args...), strings.NewReader(""), &out, &errOut)
				cancel()
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				if out.Len() == 0 {
					lines = nil
				}
				seen := map[string]bool{}
				for _, l := range lines {
					if seen[l] {
						t.Errorf("watch --once %q printed %q twice", tc.args, l)
					}
					seen[l] = true
				}
				if n := requests.Load(); code != 0 || len(lines) != tc.lines || n > int64(tc.pages+1) {
					t.Errorf("watch --once %q: exit %d after %d requests, %d lines; want exit 0, %d lines, at most %d requests: %q %q",
						tc.args, code, n, len(lines), tc.lines, tc.pages+1, out.String(), errOut.String())
				}
			}
		})
	}
}

// Following from now: what was there before is not shown, what is written
// after it started is.
func TestWatchFollows(t *testing.T) {
	srv := startedServer(t)
	must := mustRun(t, srv)
	must("", "put", "before@example.com", "--name", "Before")
	out, errOut, stop := startWatch(t, srv)
	// The watch takes "now" at its first request, which this test cannot
	// see: write until a write shows.
	for i := 0; !strings.Contains(out.String(), " put after"); i++ {
		if i == 500 {
			t.Fatalf("no write showed: %q %q", out, errOut)
		}
		must("", "put", fmt.Sprintf("after%d@example.com", i), "--name", "After")
		time.Sleep(20 * time.Millisecond)
	}
	must("", "delete", "before@example.com")
	waitFor(t, "the deletion", func() bool { return strings.Contains(out.String(), " delete before@example.com - -") })
	if code := stop(); code != 0 {
		t.Errorf("interrupted: exit %d, %q", code, errOut)
	}
	if strings.Contains(out.String(), " put before@") {
		t.Errorf("watch from now showed a change from before: %q", out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !watchLine.MatchString(line) {
			t.Errorf("line %q", line)
		}
	}
}

// freeAddr is a loopback address with a port that was free a moment ago,
// for a server that must come back on the same one.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A following watch rides out a server restart: it retries until the
// server is back, then goes on from where it was, missing nothing that was
// written meanwhile and printing nothing twice.
func TestWatchSurvivesRestart(t *testing.T) {
	serve, addr := restartableServer(t)
	srv := "--server=http://" + addr
	stopServer := serve()
	must := mustRun(t, srv)
	must("", "start")
	must("", "put", "one@example.com", "--name", "One")
	out, errOut, stop := startWatch(t, srv, "--after", "start")
	waitFor(t, "the first change", func() bool { return strings.Contains(out.String(), "one@example.com") })

	stopServer()
	waitFor(t, "the watch to notice", func() bool { return strings.Contains(errOut.String(), "retrying") })
	stopServer = serve()
	defer stopServer()
	must("", "put", "two@example.com", "--name", "Two")
	waitFor(t, "the change after the restart", func() bool { return strings.Contains(out.String(), "two@example.com") })
	if code := stop(); code != 0 {
		t.Errorf("interrupted: exit %d, %q", code, errOut)
	}
	if lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); len(lines) != 2 {
		t.Errorf("across the restart: %q", out)
	}
	if !strings.Contains(errOut.String(), "reconnected") {
		t.Errorf("stderr: %q", errOut)
	}
}

// A watch from now that has seen no change yet rides out a restart too:
// "now" is the moment of its first answer, not of each request, so what
// is written while it reconnects still shows. It asked for "now" again
// and skipped those changes.
func TestWatchFromNowSurvivesRestart(t *testing.T) {
	serve, addr := restartableServer(t)
	srv := "--server=http://" + addr
	stopServer := serve()
	must := mustRun(t, srv)
	must("", "start")
	defer func() { watchBackoff = struct{ first, max time.Duration }{100 * time.Millisecond, 5 * time.Second} }()
	// Long enough that the server is back, and written to, before the
	// watch asks again.
	watchBackoff.first, watchBackoff.max = 3*time.Second, 3*time.Second
	out, errOut, stop := startWatch(t, srv)
	waitFor(t, "the watch's long poll", func() bool { return inFlight(t, addr) >= 2 }) // it and this scrape

	stopServer()
	waitFor(t, "the watch to notice", func() bool { return strings.Contains(errOut.String(), "retrying") })
	stopServer = serve()
	defer stopServer()
	must("", "put", "meanwhile@example.com", "--name", "Meanwhile")
	waitFor(t, "the change written while the watch was away", func() bool { return strings.Contains(out.String(), "meanwhile@example.com") })
	if code := stop(); code != 0 {
		t.Errorf("interrupted: exit %d, %q", code, errOut)
	}
}

// inFlight is the server's count of requests being served, read from its
// metrics.
func inFlight(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "partmap_http_requests_in_flight "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// restartableServer is a serve command on a data directory and address of
// its own, which serve starts again after each stop.
func restartableServer(t *testing.T) (serve func() (stop func()), addr string) {
	data := filepath.Join(t.TempDir(), "data")
	addr = freeAddr(t)
	serve = func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		logs := newLogWriter()
		exit := make(chan int, 1)
		go func() {
			exit <- Main(ctx, []string{"serve", "--addr", addr, "--data", data}, strings.NewReader(""), io.Discard, logs)
		}()
		select {
		case <-logs.addr:
		case code := <-exit:
			t.Fatalf("serve exited with %d: %s", code, logs)
		case <-time.After(30 * time.Second):
			t.Fatalf("serve did not start: %s", logs)
		}
		return func() {
			cancel()
			<-exit
		}
	}
	return serve, addr
}

// A cursor the feed's retention has passed ends the watch, clearly, in
// both modes.
func TestWatchCursorExpired(t *testing.T) {
	store, err := pebble.Open(t.TempDir(), &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, FeedRetention: &partmap.Retention{Events: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(pmhttp.NewServer(store, nil))
	defer func() {
		hs.Close()
		store.Close()
	}()
	srv := "--server=" + hs.URL
	must := mustRun(t, srv)
	must("", "start")
	must("", "put", "a@example.com", "--name", "A")
	out, _ := must("", "watch", "--once", "--json")
	var first struct{ Cursor string }
	json.Unmarshal([]byte(out), &first)
	must("", "put", "b@example.com", "--name", "B")
	must("", "put", "c@example.com", "--name", "C")
	if _, err := store.TrimFeed(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, mode := range [][]string{{"--once"}, {}} {
		code, out, errOut := run(t, "", append([]string{"watch", srv, "--after", first.Cursor}, mode...)...)
		if code != 1 || out != "" || !strings.Contains(errOut, "(cursor-expired)") || !strings.Contains(errOut, "--after now") {
			t.Errorf("watch %q after an expired cursor: %d %q %q", mode, code, out, errOut)
		}
	}
}
