package main

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/pgtest"
)

// A real `partmap project` process, killed with SIGKILL again and again
// while a workload runs through the server, never moves its cursor back,
// and leaves the table equal to the directory; its lag is in /metrics;
// SIGINT stops it cleanly.
func TestProjectKill9(t *testing.T) {
	bin := binary(t)
	url := strings.TrimPrefix(startedServer(t), "--server=")
	pg := pgtest.Start(t)
	ctx := context.Background()
	cl, err := pmhttp.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	pgtest.Workload(t, cl, rng, 300, 1000)

	stopWork := pgtest.KeepWriting(t, cl, 3, 300, 20)
	stopWatch := pgtest.WatchCursor(t, pool, "customer_profiles")

	// drained is closed once the command's stderr has all been read: Wait
	// closes the pipe, so it must come after, or the last lines are lost.
	start := func() (cmd *exec.Cmd, logs *logWriter, metrics chan string, drained chan struct{}) {
		cmd = exec.Command(bin, "project", "--server", url, "--to", pg.URL(), "--log-every", "50ms", "--metrics-addr", "127.0.0.1:0")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logs, metrics, drained = newLogWriter(), make(chan string, 1), make(chan struct{})
		re := regexp.MustCompile(`serving metrics on (http://\S+)`)
		go func() {
			defer close(drained)
			s := bufio.NewScanner(stderr)
			for s.Scan() {
				if m := re.FindSubmatch(s.Bytes()); m != nil {
					metrics <- string(m[1])
				}
				logs.Write(append(s.Bytes(), '\n'))
			}
		}()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return cmd, logs, metrics, drained
	}
	for range 5 {
		cmd, _, _, drained := start()
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		cmd.Process.Kill() // SIGKILL
		<-drained
		cmd.Wait()
	}
	stopWork()
	stopWatch()
	if pgtest.SavedCursor(pool, "customer_profiles") == "" {
		t.Fatal("the killed projectors committed nothing: the kills tested nothing")
	}

	cmd, logs, metrics, drained := start()
	waitCaughtUp(t, pool, cl, logs)

	pgtest.CheckEqual(t, pool, cl, "customer_profiles")

	// The searches the directory answers, SQL on the table answers alike.
	pgtest.CompareSearches(t, pool, cl, "customer_profiles", 41)

	// Its lag and count are in /metrics.
	addr := <-metrics
	resp, err := http.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`partmap_projection_lag_seconds{table="customer_profiles"} 0`, `partmap_projection_changes_total{table="customer_profiles"}`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s:\n%s", m, body)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	<-drained
	if err := cmd.Wait(); err != nil || !strings.Contains(logs.String(), "projection stopped") {
		t.Errorf("after SIGINT: %v\n%s", err, logs)
	}
}

// waitCaughtUp waits until the projection's cursor has no change after it.
func waitCaughtUp(t *testing.T, pool *pgxpool.Pool, cl *pmhttp.Client, logs *logWriter) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !pgtest.CaughtUp(t, pool, cl, "customer_profiles"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the projection did not catch up: %s", logs)
		}
	}
}

// The partmap server killed with SIGKILL and started again on the same
// address: the projector retries, says so once, and catches up.
func TestProjectSurvivesServerKill(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	data := filepath.Join(t.TempDir(), "data")
	srv := startProcess(t, data, "--addr", addr)
	url := srv.url
	if code, _, errOut := run(t, "", "start", "--server", url); code != 0 {
		t.Fatalf("start: %s", errOut)
	}
	pg := pgtest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := newLogWriter()
	exit := make(chan int, 1)
	go func() {
		exit <- Main(ctx, []string{"project", "--server", url, "--to", pg.URL(), "--log-every", "0"}, strings.NewReader(""), io.Discard, logs)
	}()
	defer func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("project exited with %d: %s", code, logs)
		}
	}()
	cl, err := pmhttp.NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pgtest.Workload(t, cl, rng, 300, 300)
	srv.kill9(t)
	time.Sleep(500 * time.Millisecond) // the projector fails and backs off meanwhile
	srv = startProcess(t, data, "--addr", addr)
	pgtest.Workload(t, cl, rng, 300, 300)

	pool, err := pgxpool.New(context.Background(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	waitCaughtUp(t, pool, cl, logs)
	var rows int
	pool.QueryRow(context.Background(), `SELECT count(*) FROM customer_profiles`).Scan(&rows)
	st, err := cl.ListPartitions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if int64(rows) != st.TotalProfiles || rows == 0 {
		t.Errorf("table has %d rows, directory %d profiles", rows, st.TotalProfiles)
	}
	out := logs.String()
	if strings.Count(out, "retrying") != 1 || strings.Count(out, "recovered") != 1 {
		t.Errorf("want one line for the outage and one for its end:\n%s", out)
	}
}
