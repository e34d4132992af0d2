package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/pgtest"
)

// A real `partmap project` process, killed with SIGKILL again and again
// while a workload runs through the server, never moves its cursor back,
// and leaves the table equal to the directory; its lag is in /metrics;
// SIGINT stops it cleanly.
func TestProjectKill9(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
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
	projectWorkload(t, cl, rng, 1000)

	cursor := func() uint64 {
		var c *string
		if pool.QueryRow(ctx, `SELECT cursor FROM partmap_projection WHERE name = 'customer_profiles'`).Scan(&c) != nil || c == nil {
			return 0
		}
		n, err := strconv.ParseUint(*c, 10, 64)
		if err != nil {
			t.Errorf("cursor %q", *c)
		}
		return n
	}
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		wrng := rand.New(rand.NewPCG(3, 4))
		for wctx.Err() == nil {
			projectWorkload(t, cl, wrng, 20)
		}
	}()
	go func() { // the cursor never goes back
		defer wg.Done()
		var last uint64
		for wctx.Err() == nil {
			if c := cursor(); c < last {
				t.Errorf("the cursor went back from %d to %d", last, c)
				return
			} else {
				last = c
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stopWork(); wg.Wait() })

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
	wg.Wait()
	if cursor() == 0 {
		t.Fatal("the killed projectors committed nothing: the kills tested nothing")
	}

	cmd, logs, metrics, drained := start()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c := cursor(); c > 0 {
			page, err := cl.Changes(ctx, partmap.ChangeQuery{After: strconv.FormatUint(c, 10), Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Changes) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projection did not catch up: %s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The table is the directory.
	want := map[string]partmap.Record{}
	opts := partmap.ListOptions{Limit: partmap.MaxPageLimit}
	for {
		page, err := cl.ListProfiles(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var emails []string
		for _, r := range page.Profiles {
			emails = append(emails, r.Profile.Email())
		}
		if len(emails) > 0 {
			recs, err := cl.FindProfiles(ctx, emails)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				want[r.Profile.Email()] = *r
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	rows, err := pool.Query(ctx, `SELECT email, profile::text, etag FROM customer_profiles`)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rows.Next() {
		var email, js, etag string
		if err := rows.Scan(&email, &js, &etag); err != nil {
			t.Fatal(err)
		}
		var p partmap.Profile
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			t.Fatal(err)
		}
		got++
		if w, ok := want[email]; !ok || w.Version.ETag() != etag || !maps.Equal(w.Profile, p) {
			t.Errorf("%s: table %s %v, directory %s %v (%v)", email, etag, p, w.Version.ETag(), w.Profile, ok)
		}
	}
	if got != len(want) || got == 0 {
		t.Errorf("table has %d rows, directory %d profiles", got, len(want))
	}

	// The searches the directory answers, SQL on the table answers alike.
	compareSearches(t, pool, cl)

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

// compareSearches runs the searches of projectWorkload's values through
// the server (ListProfiles with Where, on indexed fields) and through SQL
// on the projected table, and wants the same profiles.
func compareSearches(t *testing.T, pool *pgxpool.Pool, cl *pmhttp.Client) {
	t.Helper()
	ctx := context.Background()
	var searches [][]partmap.Match
	for c := range 5 {
		company := partmap.Match{Field: partmap.FieldCompanyName, Value: "Co " + strconv.Itoa(c)}
		searches = append(searches, []partmap.Match{company})
		for _, tier := range []string{"gold", "silver", "bronze"} {
			searches = append(searches, []partmap.Match{company, {Field: partmap.FieldCustomerTier, Value: tier}})
		}
	}
	found := 0
	for _, where := range searches {
		query := `SELECT email FROM customer_profiles WHERE true`
		var args []any
		for _, m := range where {
			args = append(args, m.Field, m.Value)
			query += fmt.Sprintf(` AND profile->>$%d = $%d`, len(args)-1, len(args))
		}
		rows, err := pool.Query(ctx, query, args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		opts := partmap.ListOptions{Where: where, Limit: 41}
		for {
			page, err := cl.ListProfiles(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Profiles {
				want = append(want, r.Profile.Email())
			}
			if page.NextCursor == "" {
				break
			}
			opts.Cursor = page.NextCursor
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%v: SQL found %d %v, partmap %d %v", where, len(got), got, len(want), want)
		}
		found += len(want)
	}
	if found == 0 {
		t.Fatal("no search found anything: the searches test nothing")
	}
}

// projectWorkload writes n random changes through the server.
func projectWorkload(t *testing.T, s partmap.Store, rng *rand.Rand, n int) {
	ctx := context.Background()
	tiers := []string{"gold", "silver", "bronze"}
	for range n {
		a, b := fmt.Sprintf("u%d@example.com", rng.IntN(300)), fmt.Sprintf("u%d@example.com", rng.IntN(300))
		var err error
		switch k := rng.IntN(10); {
		case k < 5:
			_, _, err = partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: a, partmap.FieldCompanyName: "Co " + strconv.Itoa(rng.IntN(5)),
				partmap.FieldCustomerTier: tiers[rng.IntN(3)]}, partmap.Condition{})

		case k < 7:
			_, err = partmap.IncrementField(ctx, s, a, "visits", 1, partmap.Condition{})
		case k < 9:
			err = partmap.DeleteProfile(ctx, s, a, partmap.Condition{})
		default:
			_, err = partmap.RenameProfile(ctx, s, a, b, partmap.Condition{})
		}
		switch partmap.ErrorCode(err) {
		case "", partmap.ENOTFOUND, partmap.EEXISTS, partmap.EINVALID, partmap.ELOCKCONFLICT:
		default:
			t.Errorf("workload: %v", err)
			return
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
	projectWorkload(t, cl, rng, 300)
	srv.kill9(t)
	time.Sleep(500 * time.Millisecond) // the projector fails and backs off meanwhile
	srv = startProcess(t, data, "--addr", addr)
	projectWorkload(t, cl, rng, 300)

	pool, err := pgxpool.New(context.Background(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var c *string
		pool.QueryRow(context.Background(), `SELECT cursor FROM partmap_projection WHERE name = 'customer_profiles'`).Scan(&c)
		if c != nil {
			page, err := cl.Changes(context.Background(), partmap.ChangeQuery{After: *c, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Changes) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projection did not catch up: %s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
