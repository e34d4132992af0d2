// Command loadtest measures partmap from outside, as issue 14 asks: wrk
// against `partmap serve` (embedded Pebble, fsync before every reply) and
// against a bare net/http server that keeps profiles in a sync.Map (./bare),
// each a child process on its own loopback port and fresh data directory.
// The servers take turns, phase by phase and round by round, and each
// phase reads the server's own CPU time (utime+stime) from /proc/PID/stat,
// from the start of its wrk run until the server is idle again, so that a
// write's cost includes the flushes and compactions it leaves behind.
// The machine is shared and noisy: only ratios taken in one run mean
// anything, and CPU per request moves less with the noise than ops/s.
//
//	go run ./internal/bench/loadtest --preload 100000 --rounds 3
//	go run ./internal/bench/loadtest --preload 10000,1000000 --sizes-only
//	go run ./internal/bench/loadtest --baseline /tmp/partmap-old
//	go run ./internal/bench/loadtest --baseline /tmp/partmap-old --phases put --duration 20s
//	go run ./internal/bench/loadtest --baseline /tmp/partmap-old --phases import --rounds 4
//	go run ./internal/bench/loadtest --phases put,postgres --rounds 3
//	go run ./internal/bench/loadtest --indexed --phases put,putnames --rounds 5
//
// --indexed adds a second partmap on the same binary, with a search index
// of three fields (issue 36) built after its preload, measured against the
// unindexed partmap's: put's PUTs change two of the three indexed values
// (customerTier two times in three, visits always), putnames's all three.
//
// The postgres phase (postgres.go) runs PostgreSQL's upserts of the same
// profiles from 64 clients after each put phase, as the reference for a
// durable write. The import phase is different (import.go): each round
// imports a file into a fresh server on an empty directory with `partmap
// import`, and reports the rate, the server's CPU and how often its
// collector ran.
//
// It needs Linux, wrk for the wrk phases, and PostgreSQL (Debian's
// postgresql, which make test installs) for the postgres phase. Progress
// goes to stderr, a Markdown report to stdout. docs/PERFORMANCE.md
// describes the figures.
package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/bench/procstat"
	"github.com/partmap/partmap/internal/bench/rounds"
)

const basePath = "/patterns/hash-partitioned-attribute-map"

type config struct {
	partmap, baseline string // binaries; "" builds ./cmd/partmap, or has no baseline
	partmapRev        string // the commit of the partmap it built, if it did
	preload           []int
	rounds            int
	duration          time.Duration
	sizesOnly         bool   // partmap (and baseline) only, to compare sizes
	pprof             string // the phase to profile, or ""
	pprofDir          string
	phases            []phase // the wrk phases to run, in phases' order as given
	imports           bool    // run the import phase
	indexed           bool    // add a partmap with a three-field search index
	postgres          bool    // run the postgres phase after each put phase (postgres.go)
	importProfiles    int
}

// A phase is one wrk run against one server.
type phase struct {
	name           string // get, put, lone or putnames
	script         string // get, put or putnames
	threads, conns int
	descr          string
}

var phases = []phase{
	{name: "get", script: "get", threads: 2, conns: 64, descr: "random GETs, 64 connections"},
	{name: "put", script: "put", threads: 2, conns: 64, descr: "random PUTs of whole profiles, 64 connections"},
	{name: "lone", script: "put", threads: 1, conns: 1, descr: "random PUTs, one connection (a lone sequential writer)"},
	{name: "putnames", script: "putnames", threads: 2, conns: 64, descr: "random PUTs of whole profiles with a new fullName too, 64 connections (every value --indexed indexes changes)"},
}

// A target is one server process, preloaded with its profiles.
type target struct {
	kind     string // partmap, baseline or bare
	bin      string
	profiles int
	addr     string
	args     []string // its command line, for the report
	env      []string // added to its environment
	cmd      *exec.Cmd
	exited   chan error
	logPath  string
	preload  time.Duration
	peakRSS  int64
	samples  map[string][]sample // by phase, one a round
}

func (t *target) String() string { return t.kind + "@" + short(t.profiles) }

// sample is one phase's measurement of one target.
type sample struct {
	wrk       wrkResult
	cpuPerReq float64 // µs of server CPU per request
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.partmap, "partmap", "", "partmap `binary` to measure (default: go build ./cmd/partmap)")
	fs.StringVar(&c.baseline, "baseline", "", "another partmap `binary` (an older commit, say) to measure in the same run")
	preload := fs.String("preload", "100000", "profiles to preload, or a comma list of sizes to compare")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; the report gives medians")
	fs.DurationVar(&c.duration, "duration", 8*time.Second, "length of each wrk run, whole seconds")
	fs.BoolVar(&c.sizesOnly, "sizes-only", false, "leave out the bare server: compare partmap's sizes only")
	fs.StringVar(&c.pprof, "pprof", "", "after the rounds, run `phase` (get, put, lone or putnames) once more against each partmap and save a CPU profile of the server; import keeps the import phase's profiles")
	fs.StringVar(&c.pprofDir, "pprof-dir", ".", "`directory` for --pprof's profiles")
	only := fs.String("phases", "get,put,lone", "the `phases` to run, a comma list of get, put, lone, putnames (PUTs with a new fullName too), import and postgres (upserts into a PostgreSQL of its own, after each put phase)")
	fs.IntVar(&c.importProfiles, "import-profiles", 200_000, "profiles the import phase imports")
	fs.BoolVar(&c.indexed, "indexed", false, "also measure partmap with a search index on fullName (TEXT), customerTier (TAG) and visits (NUMERIC SORTABLE), built after the preload")
	if err := fs.Parse(args); err != nil {
		return c, usageError{err}
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Errorf("no arguments expected, got %q", fs.Args())}
	}
	for s := range strings.SplitSeq(*preload, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return c, usageError{fmt.Errorf("--preload: %q is not a positive count", s)}
		}
		c.preload = append(c.preload, n)
	}
	for name := range strings.SplitSeq(*only, ",") {
		switch strings.TrimSpace(name) {
		case "import":
			c.imports = true
			continue
		case "postgres":
			c.postgres = true
			continue
		}
		i := slices.IndexFunc(phases, func(p phase) bool { return p.name == strings.TrimSpace(name) })
		if i < 0 {
			return c, usageError{fmt.Errorf("--phases: no phase %q (get, put, lone, putnames, import or postgres)", name)}
		}
		if !slices.ContainsFunc(c.phases, func(p phase) bool { return p.name == phases[i].name }) {
			c.phases = append(c.phases, phases[i])
		}
	}
	slices.Sort(c.preload)
	c.preload = slices.Compact(c.preload)
	switch {
	case c.rounds < 1:
		return c, usageError{errors.New("--rounds must be at least 1")}
	case c.duration < time.Second || c.duration%time.Second != 0:
		return c, usageError{errors.New("--duration must be whole seconds, at least 1s")}
	case c.sizesOnly && len(c.preload) < 2:
		return c, usageError{errors.New("--sizes-only needs two --preload sizes or more")}
	case c.pprof != "" && c.pprof != "import" && !slices.ContainsFunc(phases, func(p phase) bool { return p.name == c.pprof }):
		return c, usageError{fmt.Errorf("--pprof: no phase %q (get, put, lone, putnames or import)", c.pprof)}
	case c.pprof == "import" && !c.imports:
		return c, usageError{errors.New("--pprof import needs the import phase in --phases")}
	case c.postgres && !slices.ContainsFunc(c.phases, func(p phase) bool { return p.name == "put" }):
		return c, usageError{errors.New("--phases: postgres is measured beside put; name both")}
	case c.imports && c.importProfiles < 1:
		return c, usageError{errors.New("--import-profiles must be at least 1")}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	var wrk string
	if len(c.phases) > 0 {
		if wrk, err = exec.LookPath("wrk"); err != nil {
			return errors.New("wrk is not on PATH (Debian: apt-get install wrk)")
		}
	}
	ses, err := procstat.NewSession("loadtest", stderr)
	if err != nil {
		return err
	}
	defer ses.Close()
	tmp, clkTck, logf := ses.Dir, ses.ClockTick, ses.Logf

	// Binaries.
	bare := filepath.Join(tmp, "bare")
	if len(c.phases) > 0 && !c.sizesOnly {
		if err := goBuild(ctx, bare, "github.com/partmap/partmap/internal/bench/loadtest/bare"); err != nil {
			return err
		}
	}
	if c.partmap == "" {
		c.partmap = filepath.Join(tmp, "partmap")
		logf("building ./cmd/partmap")
		if err := goBuild(ctx, c.partmap, "github.com/partmap/partmap/cmd/partmap"); err != nil {
			return err
		}
		// Builds are not always stamped with their commit (GOFLAGS=-buildvcs=false).
		if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
			c.partmapRev = "commit " + strings.TrimSpace(string(out))
		}
	}
	// Imports first, while no other server of this run is up.
	var imports []*importTarget
	if c.imports {
		if imports, err = runImports(ctx, c, tmp, clkTck, logf); err != nil {
			return err
		}
	}
	if len(c.phases) == 0 {
		report(stdout, c, nil, nil, imports, wrk, args)
		return nil
	}

	var targets []*target
	for _, n := range c.preload {
		targets = append(targets, &target{kind: "partmap", bin: c.partmap, profiles: n})
		if c.indexed {
			targets = append(targets, &target{kind: "indexed", bin: c.partmap, profiles: n})
		}
		if c.baseline != "" {
			targets = append(targets, &target{kind: "baseline", bin: c.baseline, profiles: n})
		}
		if !c.sizesOnly {
			targets = append(targets, &target{kind: "bare", bin: bare, profiles: n})
		}
	}
	scripts := map[string]string{} // "get-N" → path
	for _, n := range c.preload {
		for name, text := range map[string]string{"get": getScript, "put": putScript, "putnames": putNamesScript} {
			path := filepath.Join(tmp, fmt.Sprintf("%s-%d.lua", name, n))
			text = strings.NewReplacer("{{N}}", strconv.Itoa(n), "{{BASE}}", basePath).Replace(text)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				return err
			}
			scripts[fmt.Sprintf("%s-%d", name, n)] = path
		}
	}

	// Servers: start and preload them all, one at a time, then let them
	// settle, so that the first phase does not meet a preload's compactions.
	defer func() {
		for _, t := range targets {
			t.stop(logf)
		}
	}()
	for i, t := range targets {
		dir := filepath.Join(tmp, fmt.Sprintf("data-%d-%s", i, t))
		if err := t.start(ctx, dir, filepath.Join(tmp, fmt.Sprintf("log-%d-%s", i, t))); err != nil {
			return err
		}
		logf("preloading %v (%s, pid %d)", t, t.addr, t.cmd.Process.Pid)
		begin := time.Now()
		if err := preload(ctx, t.addr, t.profiles); err != nil {
			return fmt.Errorf("%v: %w%s", t, err, t.logTail())
		}
		t.preload = time.Since(begin)
		logf("preloaded %v: %d profiles in %.1f s", t, t.profiles, t.preload.Seconds())
		if t.kind == "indexed" {
			begin := time.Now()
			if err := buildIndex(ctx, t.addr); err != nil {
				return fmt.Errorf("%v: %w%s", t, err, t.logTail())
			}
			logf("built the search index of %v in %.1f s", t, time.Since(begin).Seconds())
		}
	}
	var pgs []*pgTarget
	defer func() {
		for _, pg := range pgs {
			pg.close()
		}
	}()
	if c.postgres {
		for _, n := range c.preload {
			pg, err := startPostgres(ctx, n, logf)
			if err != nil {
				return err
			}
			pgs = append(pgs, pg)
		}
	}
	settle(ctx, targets, 3*time.Minute, logf)

	// Rounds: each phase runs against every target in turn, the order
	// rotating from round to round.
	for round := range c.rounds {
		for _, ph := range c.phases {
			order := append(slices.Clone(targets[round%len(targets):]), targets[:round%len(targets)]...)
			for _, t := range order {
				if err := ctx.Err(); err != nil {
					return err
				}
				settle(ctx, targets, time.Minute, logf)
				s, err := runPhase(ctx, wrk, t, ph, scripts, c.duration, clkTck, "")
				if err != nil {
					return err
				}
				t.samples[ph.name] = append(t.samples[ph.name], s)
				logf("round %d/%d %-4s %-16v %9.0f ops/s %7.1f µs CPU/req  p50 %v  p99 %v", round+1, c.rounds, ph.name, t,
					s.wrk.PerSecond, s.cpuPerReq, s.wrk.P50, s.wrk.P99)
			}
			if ph.name != "put" {
				continue
			}
			for _, pg := range pgs {
				settle(ctx, targets, time.Minute, logf)
				s, err := pg.run(ctx, c.duration, clkTck)
				if err != nil {
					return err
				}
				pg.samples = append(pg.samples, s)
				logf("round %d/%d %-4s PostgreSQL@%-5s %9.0f upserts/s %7.1f µs CPU/upsert", round+1, c.rounds, "put", short(pg.profiles), s.perSecond, s.cpuPerOp)
			}
		}
	}

	// A profiling run, left out of the figures.
	if c.pprof != "" {
		ph := phases[slices.IndexFunc(phases, func(p phase) bool { return p.name == c.pprof })]
		for _, t := range targets {
			if t.kind == "bare" {
				continue
			}
			settle(ctx, targets, time.Minute, logf)
			path := filepath.Join(c.pprofDir, fmt.Sprintf("%s-%d-%s.pprof", t.kind, t.profiles, ph.name))
			if _, err := runPhase(ctx, wrk, t, ph, scripts, c.duration, clkTck, path); err != nil {
				return err
			}
			logf("wrote %s", path)
		}
	}

	for _, t := range targets {
		if t.peakRSS, err = procstat.PeakRSS(t.cmd.Process.Pid); err != nil {
			return fmt.Errorf("%v: %w", t, err)
		}
	}
	report(stdout, c, targets, pgs, imports, wrk, args)
	return nil
}

// goBuild builds a package of this module into bin.
func goBuild(ctx context.Context, bin, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// start runs the target's server on a free loopback port and waits until
// its directory is started.
func (t *target) start(ctx context.Context, dir, logPath string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	t.addr = ln.Addr().String()
	ln.Close()
	t.args = []string{"--addr", t.addr}
	if t.kind != "bare" {
		t.args = []string{"serve", "--addr", t.addr, "--data", dir}
	}
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own descriptor
	t.logPath = logPath
	t.cmd = exec.Command(t.bin, t.args...)
	if t.env != nil {
		t.cmd.Env = append(os.Environ(), t.env...)
	}
	t.cmd.Stdout, t.cmd.Stderr = log, log
	if err := t.cmd.Start(); err != nil {
		return err
	}
	t.exited = make(chan error, 1)
	go func() { t.exited <- t.cmd.Wait() }()
	t.samples = map[string][]sample{}

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post("http://"+t.addr+basePath+"/start", "", nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("POST start: %s", resp.Status)
		}
		select {
		case err := <-t.exited:
			t.exited <- err
			return fmt.Errorf("%v exited: %v%s", t, err, t.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v did not start in 30 s: %v%s", t, err, t.logTail())
		}
	}
}

// stop asks the server to shut down, and kills it if it has not within 30 s.
func (t *target) stop(logf func(string, ...any)) {
	if t.cmd == nil || t.cmd.Process == nil {
		return
	}
	t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.exited:
		if err != nil {
			logf("%v exited: %v%s", t, err, t.logTail())
		}
	case <-time.After(30 * time.Second):
		logf("%v did not stop in 30 s; killing it", t)
		t.cmd.Process.Kill()
		<-t.exited
	}
}

// logTail is the end of the server's log, to explain a failure.
func (t *target) logTail() string {
	b, _ := os.ReadFile(t.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return ""
	}
	return "\n" + t.String() + " log:\n" + string(b)
}

// cpuTicks is the server's utime+stime in clock ticks.
func (t *target) cpuTicks() (int64, error) {
	return procstat.CPUTicks(t.cmd.Process.Pid)
}

// preload stores user0@example.com to user{n-1}@example.com through the
// bulk route, in requests of 10,000 lines, two at a time. It sends them in
// partition order, so that a request touches few partitions and two at once
// rarely share one; a request whose lines met a lock conflict all the same
// is sent again whole (upserts are idempotent).
func preload(ctx context.Context, addr string, n int) error {
	const batch = 10_000
	url := "http://" + addr + basePath + "/customer-profiles/bulk"
	byPartition := make([][]uint32, partmap.DefaultPartitions) // 4 bytes a profile
	for i := range n {
		p := partmap.PartitionOf("user"+strconv.Itoa(i)+"@example.com", partmap.DefaultPartitions)
		byPartition[p] = append(byPartition[p], uint32(i))
	}
	order := slices.Concat(byPartition...)
	bodies := make(chan []byte)
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for body := range bodies {
				if err := postBulk(ctx, url, body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
send:
	for chunk := range slices.Chunk(order, batch) {
		var body []byte
		for _, i := range chunk {
			body = fmt.Appendf(body, `{"emailAddress":"user%d@example.com","fullName":"User %d","companyName":"Company %d","customerTier":"%s","visits":"0"}`+"\n",
				i, i, i%1000, tiers[i%uint32(len(tiers))])
		}
		select {
		case bodies <- body:
		case err = <-errs:
			break send
		}
	}
	close(bodies)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

var tiers = []string{"gold", "silver", "bronze"}

func postBulk(ctx context.Context, url string, body []byte) error {
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		reply, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var counts struct{ Created, Replaced, Failed int }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(reply, &counts) != nil {
			return fmt.Errorf("bulk preload: %s: %.500s", resp.Status, reply)
		}
		if counts.Failed == 0 {
			return nil
		}
		if attempt == 10 {
			return fmt.Errorf("bulk preload: %d lines failed 10 times: %.500s", counts.Failed, reply)
		}
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
}

// searchIndex is the index of --indexed: three fields, as issue 36's
// write-cost target names.
var searchIndex = partmap.IndexDefinition{Name: "desk", Fields: []partmap.IndexField{
	{Name: "fullName", Type: partmap.IndexText},
	{Name: "customerTier", Type: partmap.IndexTag},
	{Name: "visits", Type: partmap.IndexNumeric, Sortable: true},
}}

// buildIndex creates searchIndex on the server at addr and waits for its
// build over the preloaded profiles to end.
func buildIndex(ctx context.Context, addr string) error {
	cl, err := pmhttp.NewClient("http://"+addr, nil)
	if err != nil {
		return err
	}
	if err := cl.CreateIndex(ctx, searchIndex); err != nil {
		return err
	}
	for {
		infos, err := cl.ListIndexes(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(infos, func(x partmap.IndexInfo) bool { return x.Name == searchIndex.Name })
		if i < 0 {
			return errors.New("the search index vanished while it was built")
		}
		if !infos[i].Building {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// settle waits until no server uses more than 4% of a core (2 ticks in
// half a second, at 100 Hz), so that one server's background work (Pebble
// flushing and compacting after a preload or a PUT phase) does not run
// during another's measurement. After limit it goes on anyway.
func settle(ctx context.Context, targets []*target, limit time.Duration, logf func(string, ...any)) {
	begin := time.Now()
	for {
		before := make([]int64, len(targets))
		for i, t := range targets {
			before[i], _ = t.cpuTicks()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		var busy []string
		for i, t := range targets {
			if after, _ := t.cpuTicks(); after-before[i] > 2 {
				busy = append(busy, t.String())
			}
		}
		waited := time.Since(begin).Round(100 * time.Millisecond)
		switch {
		case len(busy) == 0:
			if waited > 2*time.Second {
				logf("servers idle after %v", waited)
			}
			return
		case waited > limit:
			logf("still busy after %v, measuring anyway: %s", waited, strings.Join(busy, ", "))
			return
		}
	}
}

// runPhase runs wrk once against t and measures the server's CPU. With a
// profile path, it also saves a CPU profile of the server meanwhile.
func runPhase(ctx context.Context, wrk string, t *target, ph phase, scripts map[string]string, d time.Duration, clkTck float64, profile string) (sample, error) {
	var profErr chan error
	if profile != "" {
		profErr = make(chan error, 1)
		go func() { profErr <- fetchProfile(ctx, t.addr, d-time.Second, profile) }()
	}
	before, err := t.cpuTicks()
	if err != nil {
		return sample{}, err
	}
	out, err := exec.CommandContext(ctx, wrk, wrkArgs(t, ph, scripts[fmt.Sprintf("%s-%d", ph.script, t.profiles)], d)...).CombinedOutput()
	if err != nil {
		return sample{}, fmt.Errorf("wrk against %v: %w\n%s", t, err, out)
	}
	// What the requests left to do in the background (Pebble's flushes and
	// compactions of what they wrote) is their cost too: the CPU is read
	// once the server is idle again.
	settle(ctx, []*target{t}, time.Minute, func(string, ...any) {})
	after, err := t.cpuTicks()
	if err != nil {
		return sample{}, err
	}
	if profErr != nil {
		if err := <-profErr; err != nil {
			return sample{}, err
		}
	}
	r, err := parseWrk(string(out))
	switch {
	case err != nil:
		return sample{}, fmt.Errorf("wrk against %v: %w\n%s", t, err, out)
	// A few lock conflicts (409, retryable) happen when the machine starves
	// the server past its lock wait; they are reported in the non-2xx
	// column. More than one in a thousand means something else is wrong.
	case r.Non2xx*1000 > r.Requests || r.SocketErrors > 0:
		return sample{}, fmt.Errorf("%s against %v: %d non-2xx responses and %d socket errors; nothing measured counts\n%s%s",
			ph.name, t, r.Non2xx, r.SocketErrors, out, t.logTail())
	case r.Requests == 0:
		return sample{}, fmt.Errorf("%s against %v: no request completed\n%s", ph.name, t, out)
	}
	return sample{wrk: r, cpuPerReq: float64(after-before) / clkTck * 1e6 / float64(r.Requests)}, nil
}

func wrkArgs(t *target, ph phase, script string, d time.Duration) []string {
	return []string{"-t" + strconv.Itoa(ph.threads), "-c" + strconv.Itoa(ph.conns), "-d" + strconv.Itoa(int(d.Seconds())) + "s",
		"--timeout", "10s", "--latency", "-s", script, "http://" + t.addr + "/"}
}

// fetchProfile saves a CPU profile of the server over d, from its pprof
// route.
func fetchProfile(ctx context.Context, addr string, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(1, int(d.Seconds())))
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s (does this build serve pprof?)", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// The Lua scripts pick uniformly among the N preloaded emails. Each wrk
// thread seeds its own generator, so that two threads do not send the same
// sequence of keys.
const luaSeed = `local n = {{N}}
local path = "{{BASE}}/customer-profile"
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end
function init(args)
  math.randomseed(1 + 7919 * (id or 0))
end
`

const getScript = luaSeed + `function request()
  return wrk.format("GET", path .. "?emailAddress=user" .. math.random(0, n - 1) .. "%40example.com")
end
`

const putScript = luaSeed + `local headers = {["Content-Type"] = "application/json"}
local tiers = {"gold", "silver", "bronze"}
function request()
  local i = math.random(0, n - 1)
  local body = '{"emailAddress":"user' .. i .. '@example.com","fullName":"User ' .. i ..
    '","companyName":"Company ' .. (i % 1000) .. '","customerTier":"' .. tiers[math.random(3)] ..
    '","visits":"' .. math.random(0, 999999) .. '"}'
  return wrk.format("PUT", path, headers, body)
end
`

// putNamesScript is putScript with a new fullName each time, of two words
// as searchbench's: a write that changes all three values of --indexed's
// index.
const putNamesScript = luaSeed + `local headers = {["Content-Type"] = "application/json"}
local tiers = {"gold", "silver", "bronze"}
local first = {"Alice", "Bob", "Carol", "Dan", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Zoe"}
local last = {"Liddell", "Builder", "Alison", "Smith", "Jones", "Brown", "Taylor", "Wilson", "Davies", "Evans"}
function request()
  local i = math.random(0, n - 1)
  local body = '{"emailAddress":"user' .. i .. '@example.com","fullName":"' .. first[math.random(#first)] .. ' ' ..
    last[math.random(#last)] .. math.random(0, 19999) ..
    '","companyName":"Company ' .. (i % 1000) .. '","customerTier":"' .. tiers[math.random(3)] ..
    '","visits":"' .. math.random(0, 999999) .. '"}'
  return wrk.format("PUT", path, headers, body)
end
`

// report writes the Markdown report.
func report(w io.Writer, c config, targets []*target, pgs []*pgTarget, imports []*importTarget, wrk string, args []string) {
	find := func(kind string, n int) *target {
		i := slices.IndexFunc(targets, func(t *target) bool { return t.kind == kind && t.profiles == n })
		if i < 0 {
			return nil
		}
		return targets[i]
	}
	hasBaseline := c.baseline != ""

	fmt.Fprintf(w, "## External load, %s\n\n", time.Now().Format("2006-01-02"))
	if c.partmapRev != "" {
		fmt.Fprintf(w, "- partmap: ./cmd/partmap built from %s\n", c.partmapRev)
	} else {
		fmt.Fprintf(w, "- partmap: `%s` (%s)\n", c.partmap, revision(c.partmap))
	}
	if hasBaseline {
		fmt.Fprintf(w, "- baseline: `%s` (%s)\n", c.baseline, revision(c.baseline))
	}
	fmt.Fprintln(w)
	if len(imports) > 0 {
		reportImports(w, c, imports)
	}
	if len(c.phases) == 0 {
		fmt.Fprintf(w, "Command:\n\n```sh\ngo run ./internal/bench/loadtest %s\n```\n", strings.Join(args, " "))
		return
	}
	fmt.Fprintf(w, "Medians of %d rounds of %v per phase; a ratio is the median of the per-round ratios, each taken from two runs next to each other. ", c.rounds, c.duration)
	fmt.Fprintf(w, "CPU is the server process's utime+stime per request.\n\n")

	head := "| phase | server | profiles | ops/s | CPU µs/req | p50 | p99 | non-2xx |"
	rule := "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
	if !c.sizesOnly {
		head += " ops/s ÷ bare | CPU/req ÷ bare | p50 ÷ bare |"
		rule += " ---: | ---: | ---: |"
	}
	if hasBaseline {
		head += " ops/s ÷ baseline | CPU/req ÷ baseline | p50 ÷ baseline |"
		rule += " ---: | ---: | ---: |"
	}
	if c.indexed {
		head += " ops/s ÷ unindexed | CPU/req ÷ unindexed | p50 ÷ unindexed |"
		rule += " ---: | ---: | ---: |"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, ph := range c.phases {
		for _, t := range targets {
			ss := t.samples[ph.name]
			var non2xx int64
			for _, s := range ss {
				non2xx += s.wrk.Non2xx
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f | %s | %s | %d |", ph.name, t.kind, thousands(t.profiles),
				thousands(int(rounds.Of(ss, opsPerSec))), rounds.Of(ss, cpuPerReq), ms(rounds.Of(ss, p50)), ms(rounds.Of(ss, p99)), non2xx)
			refs := []*target{}
			if !c.sizesOnly {
				refs = append(refs, find("bare", t.profiles))
			}
			if hasBaseline {
				refs = append(refs, find("baseline", t.profiles))
			}
			if c.indexed {
				refs = append(refs, find("partmap", t.profiles))
			}
			for _, ref := range refs {
				if ref == nil || ref == t || t.kind == "bare" || (ref.kind == "baseline" && t.kind == "baseline") ||
					(ref.kind == "partmap" && t.kind != "indexed") {
					fmt.Fprint(w, " | | |")
					continue
				}
				other := ref.samples[ph.name]
				fmt.Fprintf(w, " %.2f | %.2f | %.2f |", rounds.Ratio(ss, other, opsPerSec), rounds.Ratio(ss, other, cpuPerReq), rounds.Ratio(ss, other, p50))
			}
			fmt.Fprintln(w)
		}
	}

	if len(pgs) > 0 {
		reportPostgres(w, targets, pgs)
	}

	if len(c.preload) > 1 {
		small := c.preload[0]
		fmt.Fprintf(w, "\n| phase | server | profiles | ops/s ÷ at %s | CPU/req ÷ at %s |\n| --- | --- | ---: | ---: | ---: |\n", short(small), short(small))
		for _, ph := range c.phases {
			for _, t := range targets {
				base := find(t.kind, small)
				if t == base || t.kind == "bare" {
					continue
				}
				ss, other := t.samples[ph.name], base.samples[ph.name]
				fmt.Fprintf(w, "| %s | %s | %s | %.2f | %.2f |\n", ph.name, t.kind, thousands(t.profiles), rounds.Ratio(ss, other, opsPerSec), rounds.Ratio(ss, other, cpuPerReq))
			}
		}
	}

	fmt.Fprintf(w, "\n| server | profiles | preload | peak RSS (VmHWM) |\n| --- | ---: | ---: | ---: |\n")
	for _, t := range targets {
		fmt.Fprintf(w, "| %s | %s | %.1f s | %.0f MB |\n", t.kind, thousands(t.profiles), t.preload.Seconds(), float64(t.peakRSS)/1e6)
	}

	// Issue 14's targets, from the figures above.
	fmt.Fprintf(w, "\n| target (issue 14, unless named) | measured | met |\n| --- | ---: | --- |\n")
	check := func(what string, v float64, ok bool) {
		fmt.Fprintf(w, "| %s | %.2f | %s |\n", what, v, map[bool]string{true: "yes", false: "**no**"}[ok])
	}
	ran := func(name string) bool {
		return slices.ContainsFunc(c.phases, func(p phase) bool { return p.name == name })
	}
	for _, n := range c.preload {
		pm, bare := find("partmap", n), find("bare", n)
		if bare == nil {
			continue
		}
		at := " at " + short(n)
		if ran("get") {
			v := rounds.Ratio(pm.samples["get"], bare.samples["get"], cpuPerReq)
			check("GET CPU/req ≤ 1.25× bare"+at, v, v <= 1.25)
			v = rounds.Ratio(pm.samples["get"], bare.samples["get"], opsPerSec)
			check("GET ops/s ≥ 0.85× bare"+at, v, v >= 0.85)
		}
		if ran("put") {
			v := rounds.Ratio(pm.samples["put"], bare.samples["put"], cpuPerReq)
			check("PUT CPU/req ≤ 1.6× bare"+at, v, v <= 1.6)
			v = rounds.Ratio(pm.samples["put"], bare.samples["put"], opsPerSec)
			check("PUT ops/s ≥ 0.7× bare"+at, v, v >= 0.7)
		}
	}
	for _, n := range c.preload {
		ix := find("indexed", n)
		if ix != nil && ran("put") {
			v := rounds.Ratio(ix.samples["put"], find("partmap", n).samples["put"], cpuPerReq)
			check("PUT CPU/req with 3 indexed fields (2 values change) ≤ 1.3× without (issue 36) at "+short(n), v, v <= 1.3)
		}
		if ix != nil && ran("putnames") {
			v := rounds.Ratio(ix.samples["putnames"], find("partmap", n).samples["putnames"], cpuPerReq)
			check("PUT CPU/req with 3 indexed fields (all 3 values change) ≤ 1.3× without (issue 36) at "+short(n), v, v <= 1.3)
		}
	}
	for _, n := range c.preload {
		if !ran("lone") {
			break
		}
		pm, old := find("partmap", n), find("baseline", n)
		if old == nil {
			fmt.Fprintf(w, "| lone writer's PUT p50 at %s (ms; ≤ 1.1× another build's, with --baseline) | %.3f | |\n", short(n), rounds.Of(pm.samples["lone"], p50)/1e6)
			continue
		}
		v := rounds.Ratio(pm.samples["lone"], old.samples["lone"], p50)
		check("lone writer's PUT p50 ≤ 1.1× baseline at "+short(n), v, v <= 1.1)
	}
	if len(c.preload) > 1 {
		small, large := find("partmap", c.preload[0]), find("partmap", c.preload[len(c.preload)-1])
		for _, ph := range []string{"put", "get"} {
			if !ran(ph) {
				continue
			}
			v := rounds.Ratio(large.samples[ph], small.samples[ph], opsPerSec)
			check(fmt.Sprintf("%s ops/s at %s ≥ 0.85× at %s", strings.ToUpper(ph), short(large.profiles), short(small.profiles)), v, v >= 0.85)
		}
	}
	if pm := find("partmap", c.preload[len(c.preload)-1]); pm.profiles >= 1_000_000 {
		mb := float64(pm.peakRSS) / 1e6
		check("server peak RSS < 150 MB at "+short(pm.profiles)+" (MB)", mb, mb < 150)
	}

	fmt.Fprintf(w, "\nCommands:\n\n```sh\ngo run ./internal/bench/loadtest %s\n", strings.Join(args, " "))
	seen := map[string]bool{}
	for _, t := range targets {
		if seen[t.kind] {
			continue
		}
		seen[t.kind] = true
		fmt.Fprintf(w, "%s %s   # %s, then POST %s/start\n", filepath.Base(t.bin), strings.Join(t.args, " "), t.kind, basePath)
	}
	fmt.Fprintf(w, "# preload: POST %s/customer-profiles/bulk, 10,000 JSON lines a request: user0@example.com … user{N-1}@example.com\n", basePath)
	for _, ph := range c.phases {
		fmt.Fprintf(w, "%s %s   # %s\n", wrk, strings.Join(wrkArgs(&target{addr: "ADDR"}, ph, ph.script+"-N.lua", c.duration), " "), ph.descr)
	}
	fmt.Fprintf(w, "```\n\nget-N.lua sends `GET %s/customer-profile?emailAddress=userK%%40example.com` and put-N.lua `PUT` of a whole profile, "+
		"K uniform in [0, N), a new customerTier and visits each time; putnames-N.lua the same with a new fullName too.\n", basePath)
	if c.indexed {
		fmt.Fprintf(w, "\nThe indexed server's search index (fullName TEXT, customerTier TAG, visits NUMERIC SORTABLE) is created with POST %s/indexes after its preload.\n", basePath)
	}
}

func opsPerSec(s sample) float64 { return s.wrk.PerSecond }
func cpuPerReq(s sample) float64 { return s.cpuPerReq }
func p50(s sample) float64       { return float64(s.wrk.P50) }
func p99(s sample) float64       { return float64(s.wrk.P99) }

// revision says which commit a Go binary was built from.
func revision(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "build info unreadable"
	}
	rev, modified := "unknown commit", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = "commit " + s.Value[:min(len(s.Value), 7)]
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = ", with uncommitted changes"
		}
	}
	return rev + modified + ", " + info.GoVersion
}

func ms(ns float64) string { return fmt.Sprintf("%.2f ms", ns/1e6) }

// short writes 10000 as 10k and 1000000 as 1M.
func short(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// thousands writes 1234567 as 1,234,567.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
