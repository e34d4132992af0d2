// Command respbench measures partmap's Redis protocol from outside its
// process against Redis with every write fsync'd, in one run: issue 18's
// speed comparison, and issue 35's.
//
//	go run ./internal/bench/respbench [--partmap BIN] [--baseline OLD] [--floor] [--rounds 2] [--keys 100000] [--only HSET,HGET]
//
// It starts `partmap serve --resp-addr` on a fresh data directory and
// `redis-server --appendonly yes --appendfsync always` on another, each a
// child process on its own loopback port. It fills both with HSETs of
// --keys keys (partmap creating profiles, Redis hashes), then runs, each
// round in turn against each server, the order rotating,
//
//	redis-benchmark -c 64 -r KEYS -n N HSET u__rand_int__@x.io fullName v__rand_int__
//	redis-benchmark -c 64 -r KEYS -n N -P 16 HSET u__rand_int__@x.io fullName v__rand_int__
//	redis-benchmark -c 64 -r KEYS -n N HGET u__rand_int__@x.io fullName
//
// with a key per profile (redis-benchmark's own -t hset writes every field
// into one key, past partmap's limit on fields). The value is random too:
// partmap writes nothing, and so syncs nothing, for an HSET that changes
// no value, while Redis appends and fsyncs every one; with a fixed value
// the rounds after the fill would have compared reads with writes. Server CPU per command is
// the server's utime+stime from /proc/PID/stat over the run. Progress goes
// to stderr, a Markdown report with medians, ratios and issue 35's targets
// to stdout. With --baseline BIN it measures an older partmap in the same
// rounds too, and sets this build against it.
//
// With --floor it also measures four servers of respfloor, the least a
// durable Redis-protocol server in Go does per command: on redcon, with
// Pebble and with Redis's own design of memory plus an fsync'd log, and
// the same two on an event loop in the manner of Redis. A target can then
// be read against what the library, the language, the server's shape and
// the engine cost before anything of partmap's own.
package main

import (
	"context"
	"encoding/csv"
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
	"syscall"
	"time"

	"github.com/partmap/partmap/internal/bench/procstat"
	"github.com/partmap/partmap/internal/bench/rounds"
)

// workload is one redis-benchmark run of clients connections; target is
// issue 35's floor for partmap's rate over Redis's, 0 for none.
type workload struct {
	name     string
	requests int
	clients  int
	args     []string
	target   float64
}

var workloads = []workload{
	{"HSET", 100_000, 64, []string{"HSET", "u__rand_int__@x.io", "fullName", "v__rand_int__"}, 1.0},
	{"HSET -P 16", 300_000, 64, []string{"-P", "16", "HSET", "u__rand_int__@x.io", "fullName", "v__rand_int__"}, 0.8},
	{"HGET", 200_000, 64, []string{"HGET", "u__rand_int__@x.io", "fullName"}, 0.9},
	// A lone client waits for every fsync: its p50, against --baseline's,
	// shows whether grouping made a lone writer wait longer.
	{"HSET lone", 5_000, 1, []string{"HSET", "u__rand_int__@x.io", "fullName", "v__rand_int__"}, 0},
}

// server is one child process under measurement.
type server struct {
	name string
	addr string // its RESP address
	cmd  *exec.Cmd
	log  *os.File
}

// result is one run of redis-benchmark against one server.
type result struct {
	rps, p50ms float64
	cpuPerOp   float64 // µs
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "respbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("respbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("partmap", "", "partmap `binary` to measure (default: go build ./cmd/partmap)")
	nRounds := fs.Int("rounds", 2, "rounds; the report gives medians")
	keys := fs.Int("keys", 100_000, "distinct keys the commands draw from (-r)")
	only := fs.String("only", "", "measure only these `workloads`, comma-separated names such as HGET or \"HSET -P 16\" (default: all)")
	floor := fs.Bool("floor", false, "also measure respfloor, the least a durable server in Go does per command, on redcon and on an event loop, with Pebble and with a log")
	baseline := fs.String("baseline", "", "also measure this older partmap `binary` in the same rounds, and report the new build against it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nRounds < 1 || *keys < 1 {
		return errors.New("--rounds and --keys must be at least 1")
	}
	chosen, err := choose(workloads, *only)
	if err != nil {
		return err
	}
	bench, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return errors.New("redis-benchmark is not on PATH (Debian: apt-get install redis-tools)")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("redis-server is not on PATH (Debian: apt-get install redis-server)")
	}
	ses, err := procstat.NewSession("respbench", stderr)
	if err != nil {
		return err
	}
	defer ses.Close()
	tmp, tck, logf := ses.Dir, ses.ClockTick, ses.Logf
	if *bin == "" {
		*bin = filepath.Join(tmp, "partmap")
		logf("building ./cmd/partmap")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", *bin, "github.com/partmap/partmap/cmd/partmap").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}

	pm, err := startPartmap(ctx, *bin, tmp, "partmap")
	if pm != nil {
		defer pm.stop()
	}
	if err != nil {
		return err
	}
	var base *server
	if *baseline != "" {
		base, err = startPartmap(ctx, *baseline, tmp, "baseline")
		if base != nil {
			defer base.stop()
		}
		if err != nil {
			return err
		}
	}
	rd, err := startRedis(ctx, tmp)
	if rd != nil {
		defer rd.stop()
	}
	if err != nil {
		return err
	}
	servers := []*server{pm, rd}
	if base != nil {
		servers = append(servers, base)
	}
	var floors []*server
	if *floor {
		floorBin := filepath.Join(tmp, "respfloor")
		logf("building ./internal/bench/respfloor")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", floorBin, "github.com/partmap/partmap/internal/bench/respfloor").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
		for _, kind := range []string{"pebble", "log", "loop", "loop-pebble"} {
			f, err := startFloor(ctx, floorBin, tmp, kind)
			if f != nil {
				defer f.stop()
			}
			if err != nil {
				return err
			}
			floors = append(floors, f)
		}
		servers = append(servers, floors...)
	}

	measure := func(s *server, w workload) (result, error) {
		c0, err := procstat.CPUTicks(s.cmd.Process.Pid)
		if err != nil {
			return result{}, err
		}
		host, port, _ := net.SplitHostPort(s.addr)
		args := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(w.clients), "-r", strconv.Itoa(*keys), "-n", strconv.Itoa(w.requests), "--csv"}, w.args...)
		out, err := exec.CommandContext(ctx, bench, args...).CombinedOutput()
		if err != nil {
			return result{}, fmt.Errorf("redis-benchmark %s against %s: %v\n%s", w.name, s.name, err, out)
		}
		c1, err := procstat.CPUTicks(s.cmd.Process.Pid)
		if err != nil {
			return result{}, err
		}
		r, err := parseCSV(string(out))
		if err != nil {
			return result{}, fmt.Errorf("redis-benchmark %s against %s: %w", w.name, s.name, err)
		}
		r.cpuPerOp = float64(c1-c0) / tck * 1e6 / float64(w.requests)
		logf("%-10s %-8s %9.0f ops/s  p50 %6.3f ms  %5.1f µs CPU/op", w.name, s.name, r.rps, r.p50ms, r.cpuPerOp)
		return r, nil
	}

	// Filling: every key once or more, so that the rounds replace.
	fill := workload{"HSET fill", 3 * *keys, 64, workloads[0].args, 0}
	fills := map[string]result{}
	for _, s := range servers {
		if fills[s.name], err = measure(s, fill); err != nil {
			return err
		}
	}
	results := map[string]map[string][]result{} // workload, server
	for round := range *nRounds {
		for _, w := range chosen {
			k := round % len(servers) // who goes first rotates
			for _, s := range append(servers[k:len(servers):len(servers)], servers[:k]...) {
				r, err := measure(s, w)
				if err != nil {
					return err
				}
				if results[w.name] == nil {
					results[w.name] = map[string][]result{}
				}
				results[w.name][s.name] = append(results[w.name][s.name], r)
			}
		}
	}
	report(stdout, *nRounds, *keys, chosen, fills, results, args)
	if base != nil {
		reportBaseline(stdout, chosen, results)
	}
	if *floor {
		reportFloors(stdout, floors, chosen, results)
	}
	fmt.Fprintln(stdout)
	for _, s := range append([]*server{pm, base}, floors...) {
		if s == nil {
			continue
		}
		if rss, err := procstat.PeakRSS(s.cmd.Process.Pid); err == nil {
			fmt.Fprintf(stdout, "%s's peak RSS through the run: %.0f MB.\n", s.name, float64(rss)/(1<<20))
		}
	}
	return nil
}

// choose returns the workloads named in only, all of them for "".
func choose(all []workload, only string) ([]workload, error) {
	if only == "" {
		return all, nil
	}
	var out []workload
	for _, name := range strings.Split(only, ",") {
		i := slices.IndexFunc(all, func(w workload) bool { return strings.EqualFold(w.name, strings.TrimSpace(name)) })
		if i < 0 {
			names := make([]string, len(all))
			for j, w := range all {
				names[j] = w.name
			}
			return nil, fmt.Errorf("--only: no workload %q (there are %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func startPartmap(ctx context.Context, bin, tmp, name string) (*server, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	respAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{name: name, addr: respAddr}
	if err := s.start(ctx, tmp, bin, "serve", "--addr", httpAddr, "--resp-addr", respAddr, "--data", filepath.Join(tmp, name+"-data")); err != nil {
		return s, err
	}
	// The directory is started over HTTP once it answers.
	start := "http://" + httpAddr + "/patterns/hash-partitioned-attribute-map/start"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(start, "application/json", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return s, waitRESP(s.addr)
			}
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("partmap did not start: %v; its log: %s", err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startFloor(ctx context.Context, bin, tmp, kind string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, "floor-"+kind)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	s := &server{name: "floor-" + kind, addr: addr}
	if err := s.start(ctx, tmp, bin, "--addr", addr, "--dir", dir, "--store", kind); err != nil {
		return s, err
	}
	return s, waitRESP(addr)
}

func startRedis(ctx context.Context, tmp string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	dir := filepath.Join(tmp, "redis-data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	s := &server{name: "redis", addr: addr}
	if err := s.start(ctx, tmp, "redis-server", "--bind", host, "--port", port, "--appendonly", "yes", "--appendfsync", "always",
		"--save", "", "--dir", dir); err != nil {
		return s, err
	}
	return s, waitRESP(addr)
}

func (s *server) start(ctx context.Context, tmp, bin string, args ...string) error {
	var err error
	if s.log, err = os.Create(filepath.Join(tmp, s.name+".log")); err != nil {
		return err
	}
	s.cmd = exec.CommandContext(ctx, bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	return s.cmd.Start()
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.log.Close()
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// waitRESP waits until addr answers PING.
func waitRESP(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			_, err = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			if err == nil {
				_, err = io.ReadFull(c, buf)
			}
			c.Close()
			if err == nil && string(buf) == "+PONG\r\n" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer PING: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// parseCSV reads redis-benchmark --csv's output: a header and one row,
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",…
func parseCSV(out string) (result, error) {
	// Warnings (it cannot read partmap's CONFIG) come before the table.
	i := strings.Index(out, `"test",`)
	if i < 0 {
		return result{}, fmt.Errorf("no CSV table in %q", out)
	}
	rows, err := csv.NewReader(strings.NewReader(out[i:])).ReadAll()
	if err != nil {
		return result{}, err
	}
	if len(rows) != 2 {
		return result{}, fmt.Errorf("%d CSV rows, want a header and one: %q", len(rows), out[i:])
	}
	col := map[string]int{}
	for j, h := range rows[0] {
		col[h] = j
	}
	get := func(name string) (float64, error) {
		j, ok := col[name]
		if !ok || j >= len(rows[1]) {
			return 0, fmt.Errorf("no %s column in %q", name, out[i:])
		}
		return strconv.ParseFloat(rows[1][j], 64)
	}
	rps, err1 := get("rps")
	p50, err2 := get("p50_latency_ms")
	if err := errors.Join(err1, err2); err != nil {
		return result{}, err
	}
	return result{rps: rps, p50ms: p50}, nil
}

func report(w io.Writer, nRounds, keys int, workloads []workload, fills map[string]result, results map[string]map[string][]result, args []string) {
	fmt.Fprintf(w, "## The Redis protocol against Redis, %s\n\n", time.Now().Format("2006-01-02"))
	fmt.Fprintf(w, "Medians of %d rounds; a ratio is the median of the per-round ratios. `redis-benchmark -c 64 -r %d`; "+
		"partmap fsyncs every write before its reply, Redis runs with `--appendonly yes --appendfsync always`. "+
		"CPU is the server process's utime+stime per command.\n\n", nRounds, keys)
	fmt.Fprintln(w, "| command | partmap ops/s | Redis ops/s | ÷ Redis | partmap CPU µs/op | Redis CPU µs/op | partmap p50 | Redis p50 | target | met |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	row := func(name string, pm, rd []result, target float64) {
		ratio := rounds.Ratio(pm, rd, rate)
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f ms | %.2f ms | %s |\n", name,
			rounds.Of(pm, rate), rounds.Of(rd, rate), ratio, rounds.Of(pm, cpu), rounds.Of(rd, cpu), rounds.Of(pm, p50), rounds.Of(rd, p50), verdict(ratio, target))
	}
	row(fmt.Sprintf("HSET, creating (%d commands, once)", 3*keys), []result{fills["partmap"]}, []result{fills["redis"]}, 0)
	for _, wl := range workloads {
		row(wl.name, results[wl.name]["partmap"], results[wl.name]["redis"], wl.target)
	}
	fmt.Fprintf(w, "\n```sh\ngo run ./internal/bench/respbench %s\n", strings.Join(args, " "))
	fmt.Fprintln(w, "partmap serve --addr HTTP --resp-addr ADDR --data DIR   # then POST /patterns/hash-partitioned-attribute-map/start")
	fmt.Fprintln(w, "redis-server --bind 127.0.0.1 --port PORT --appendonly yes --appendfsync always --save \"\" --dir DIR2")
	for _, wl := range append([]workload{{name: "fill", requests: 3 * keys, clients: 64, args: workloads[0].args}}, workloads...) {
		fmt.Fprintf(w, "redis-benchmark -h 127.0.0.1 -p PORT -c %d -r %d -n %d --csv %s\n", wl.clients, keys, wl.requests, strings.Join(wl.args, " "))
	}
	fmt.Fprintln(w, "```")
}

// reportBaseline sets the new build against --baseline's, round by round.
func reportBaseline(w io.Writer, workloads []workload, results map[string]map[string][]result) {
	fmt.Fprintln(w, "\nThis build against --baseline, in the same rounds (medians of the per-round ratios):")
	fmt.Fprintln(w, "\n| command | ops/s | baseline ops/s | rate ÷ baseline | CPU µs/op | baseline CPU µs/op | CPU ÷ baseline | p50 ÷ baseline |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, wl := range workloads {
		pm, base := results[wl.name]["partmap"], results[wl.name]["baseline"]
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.2f | %.1f | %.1f | %.2f | %.2f |\n", wl.name,
			rounds.Of(pm, rate), rounds.Of(base, rate), rounds.Ratio(pm, base, rate),
			rounds.Of(pm, cpu), rounds.Of(base, cpu), rounds.Ratio(pm, base, cpu), rounds.Ratio(pm, base, p50))
	}
}

func rate(r result) float64 { return r.rps }
func cpu(r result) float64  { return r.cpuPerOp }
func p50(r result) float64  { return r.p50ms }

// reportFloors tells, for each workload, how each floor server compares
// with Redis in the same rounds.
func reportFloors(w io.Writer, floors []*server, workloads []workload, results map[string]map[string][]result) {
	fmt.Fprintln(w, "\nThe floors, in the same rounds: respfloor, a durable Redis-protocol server in Go that does nothing of partmap's "+
		"(floor-pebble and floor-log on redcon, a goroutine per client as partmap; floor-loop and floor-loop-pebble on an event loop as Redis's; "+
		"-pebble on Pebble tuned as partmap's, -log on memory and an fdatasync'd log as Redis's):")
	fmt.Fprintln(w, "\n| command | server | ops/s | ÷ Redis | CPU µs/op | p50 |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: |")
	for _, wl := range workloads {
		rd := results[wl.name]["redis"]
		for _, f := range floors {
			rs := results[wl.name][f.name]
			fmt.Fprintf(w, "| %s | %s | %.0f | %.2f | %.1f | %.2f ms |\n", wl.name, f.name, rounds.Of(rs, rate), rounds.Ratio(rs, rd, rate), rounds.Of(rs, cpu), rounds.Of(rs, p50))
		}
	}
	fmt.Fprintln(w, "\npartmap against floor-loop-pebble, the same shape with none of partmap's work (issue 35: ≥ 0.9× for HSET, -P 16 and HGET):")
	fmt.Fprintln(w, "\n| command | rate ÷ floor-loop-pebble | CPU ÷ floor-loop-pebble | target | met |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | --- |")
	for _, wl := range workloads {
		pm, fl := results[wl.name]["partmap"], results[wl.name]["floor-loop-pebble"]
		target := 0.9
		if wl.clients == 1 {
			target = 0
		}
		ratio := rounds.Ratio(pm, fl, rate)
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s |\n", wl.name, ratio, rounds.Ratio(pm, fl, cpu), verdict(ratio, target))
	}
	fmt.Fprintln(w, "\n```sh\ngo build -o respfloor ./internal/bench/respfloor")
	fmt.Fprintln(w, "respfloor --addr ADDR --dir DIR --store pebble   # log, loop, loop-pebble\n```")
}

// verdict is a report's "target | met" cells: none for target 0.
func verdict(ratio, target float64) string {
	switch {
	case target == 0:
		return " | "
	case ratio >= target:
		return fmt.Sprintf("≥ %.1f× | yes", target)
	default:
		return fmt.Sprintf("≥ %.1f× | no", target)
	}
}
