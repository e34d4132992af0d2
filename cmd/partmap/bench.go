package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/bench"
	"github.com/partmap/partmap/internal/bucket"
	"github.com/partmap/partmap/pebble"
)

type benchConfig struct {
	server     string
	token      string
	embedded   bool
	clients    int
	preload    int
	duration   time.Duration
	workloads  []string
	ceiling    bool
	baseline   string
	sizes      []int
	asJSON     bool
	cpuProfile string
	minSync    time.Duration
}

func (c benchConfig) Validate() error {
	switch {
	case c.server == "" && !c.embedded:
		return usagef("give --server URL, or --embedded to bench a server of its own")
	case c.server != "" && c.embedded:
		return usagef("--server and --embedded exclude each other")
	case c.clients < 1:
		return usagef("--clients must be at least 1")
	case c.preload < 1:
		return usagef("--preload must be at least 1")
	case c.duration <= 0:
		return usagef("--duration must be positive")
	case c.baseline != "" && c.baseline != "bucket":
		return usagef("--baseline takes only bucket")
	case c.baseline != "" && !c.embedded:
		return usagef("--baseline runs embedded stores; add --embedded")
	}
	for _, w := range c.workloads {
		if !slices.Contains(bench.AllWorkloads, w) {
			return usagef("unknown workload %q; choose from %s", w, strings.Join(bench.AllWorkloads, ","))
		}
	}
	return nil
}

// benchReport is what --json prints.
type benchReport struct {
	Runs         []bench.Stats      `json:"runs"`
	Ratios       map[string]float64 `json:"ratios"`
	PeakRSSBytes int64              `json:"peakRSSBytes,omitempty"`
}

func runBench(ctx context.Context, e *env, args []string) error {
	var c benchConfig
	fs := newFlagSet(e, "bench", "")
	fs.StringVar(&c.server, "server", "", "bench the partmap server at this `URL`")
	fs.StringVar(&c.token, "token", e.getenv("PARTMAP_TOKEN"), "bearer `token` for --server (write scope)")
	fs.BoolVar(&c.embedded, "embedded", false, "bench an embedded server of its own, on a temporary directory")
	fs.IntVar(&c.clients, "clients", 64, "concurrent keep-alive HTTP clients")
	fs.IntVar(&c.preload, "preload", 100000, "profiles stored before measuring")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each workload runs")
	workloads := fs.String("workloads", strings.Join(bench.AllWorkloads, ","), "comma-separated `list` of workloads")
	fs.BoolVar(&c.ceiling, "ceiling", false, "also run the same clients against a minimal in-process server (sync.Map) and print partmap/ceiling ratios")
	fs.StringVar(&c.baseline, "baseline", "", "also bench the original design's storage (bucket): whole-partition rewrites")
	sizes := fs.String("baseline-sizes", "10000,1000000", "preloaded profiles at which --baseline compares upserts")
	fs.BoolVar(&c.asJSON, "json", false, "print JSON instead of a table")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (embedded) to `file`")
	fs.DurationVar(&c.minSync, "wal-min-sync-interval", 0, "the embedded server's --wal-min-sync-interval")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("bench takes no arguments")
	}
	c.workloads = strings.Split(*workloads, ",")
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return usagef("--baseline-sizes: %q is not a positive number", s)
		}
		c.sizes = append(c.sizes, n)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b := &benchRun{cfg: c, e: e, report: benchReport{Ratios: map[string]float64{}}}
	return b.run(ctx)
}

type benchRun struct {
	cfg    benchConfig
	e      *env
	report benchReport
	table  io.Writer // nil with --json
}

// rowFormat lays out one result; rows print as each run ends.
const rowFormat = "%-16s %-8s %7s %9s %9s %9s %9s %9s %7s %9s\n"

func (b *benchRun) run(ctx context.Context) error {
	if !b.cfg.asJSON {
		b.table = b.e.stdout
		fmt.Fprintf(b.table, rowFormat, "target", "workload", "clients", "ops/s", "p50", "p95", "p99", "p99.9", "errors", "conflicts")
	}
	keys := bench.NewKeys(b.cfg.preload, 200)

	// partmap itself.
	url, store, stop, err := b.target(ctx, "partmap")
	if err != nil {
		return err
	}
	if err := b.preload(ctx, "partmap", store, keys); err != nil {
		stop()
		return err
	}
	mine := map[string]bench.Stats{}
	for _, w := range b.cfg.workloads {
		st, err := b.measure(ctx, "partmap", url, w, keys)
		if err != nil {
			stop()
			return err
		}
		mine[w] = st
	}
	stop()

	if b.cfg.ceiling {
		ceil := &bench.Ceiling{}
		ceil.Preload(keys)
		url, stop, err := serveLocal(ceil)
		if err != nil {
			return err
		}
		for _, w := range b.cfg.workloads {
			if !slices.Contains(bench.CeilingWorkloads, w) {
				continue
			}
			st, err := b.measure(ctx, "ceiling", url, w, keys)
			if err != nil {
				stop()
				return err
			}
			b.report.Ratios[w+" ops/s partmap/ceiling"] = mine[w].OpsPerSec / st.OpsPerSec
			b.report.Ratios[w+" p99 partmap/ceiling"] = float64(mine[w].P99) / float64(st.P99)
		}
		stop()
	}
	if b.cfg.baseline == "bucket" {
		rates := map[string][]float64{}
		for _, size := range b.cfg.sizes {
			if err := b.compareBucket(ctx, size, rates); err != nil {
				return err
			}
		}
		// Flat with size: each rate at the largest size over the smallest.
		if n := len(b.cfg.sizes); n > 1 {
			for k, r := range rates {
				b.report.Ratios[fmt.Sprintf("%s ops/s at %d / at %d", k, b.cfg.sizes[n-1], b.cfg.sizes[0])] = r[n-1] / r[0]
			}
		}
	}
	b.report.PeakRSSBytes = peakRSS()
	return b.print()
}

// target starts (or reaches) a partmap server and returns its URL and the
// store to preload through: the embedded store itself, or a client.
func (b *benchRun) target(ctx context.Context, name string) (string, partmap.Store, func(), error) {
	if !b.cfg.embedded {
		cl, err := pmhttp.NewClient(b.cfg.server, &pmhttp.ClientOptions{Token: b.cfg.token})
		if err != nil {
			return "", nil, nil, usageError(err.Error())
		}
		_, err = cl.Start(ctx)
		return b.cfg.server, cl, func() {}, err
	}
	dir, err := os.MkdirTemp("", "partmap-bench-")
	if err != nil {
		return "", nil, nil, err
	}
	var store interface {
		partmap.Store
		Close() error
	}
	if name == "bucket" {
		store, err = bucket.Open(dir, 50*time.Millisecond)
	} else {
		store, err = pebble.Open(dir, &pebble.Options{MinSyncInterval: b.cfg.minSync})
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	if _, err := store.Start(ctx); err != nil {
		store.Close()
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	url, stopServer, err := serveLocal(pmhttp.NewServer(store, &pmhttp.ServerOptions{}))
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return "", nil, nil, err
	}
	return url, store, func() {
		stopServer()
		store.Close()
		os.RemoveAll(dir)
	}, nil
}

// serveLocal serves h on a free loopback port, as `partmap serve` would.
func serveLocal(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func (b *benchRun) preload(ctx context.Context, name string, s partmap.Store, keys bench.Keys) error {
	bar := progressbar.NewOptions(keys.N+len(keys.Hot),
		progressbar.OptionSetWriter(b.e.stderr),
		progressbar.OptionSetVisibility(isTerminal(b.e.stderr)),
		progressbar.OptionSetDescription("preloading "+name),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("profiles"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	start := time.Now()
	err := bench.Preload(ctx, s, keys, func(done int) { bar.Set(done) })
	bar.Finish()
	if err == nil {
		n := keys.N + len(keys.Hot)
		fmt.Fprintf(b.e.stderr, "preloaded %d profiles into %s in %.1fs (%.0f profiles/s)\n",
			n, name, time.Since(start).Seconds(), float64(n)/time.Since(start).Seconds())
	}
	return err
}

func (b *benchRun) measure(ctx context.Context, target, url, workload string, keys bench.Keys) (bench.Stats, error) {
	clients := make([]*pmhttp.Client, b.cfg.clients)
	for i := range clients {
		cl, err := bench.NewClient(url, b.cfg.token)
		if err != nil {
			return bench.Stats{}, err
		}
		clients[i] = cl
	}
	st, err := bench.Run(ctx, clients, workload, keys, b.cfg.duration)
	st.Target = target
	b.report.Runs = append(b.report.Runs, st)
	if b.table != nil {
		fmt.Fprintf(b.table, rowFormat, target, workload, strconv.Itoa(st.Clients), fmt.Sprintf("%.0f", st.OpsPerSec),
			ms(st.P50), ms(st.P95), ms(st.P99), ms(st.P999), strconv.Itoa(st.Errors), strconv.FormatUint(st.Conflicts, 10))
	}
	if st.FirstErr != "" {
		fmt.Fprintf(b.e.stderr, "%s %s: %d errors; the first: %s\n", target, workload, st.Errors, st.FirstErr)
	}
	return st, err
}

// compareBucket runs upserts and gets against partmap and the bucket
// baseline, both preloaded with size profiles, and adds each rate to rates
// under "target workload".
func (b *benchRun) compareBucket(ctx context.Context, size int, rates map[string][]float64) error {
	keys := bench.NewKeys(size, 0)
	for _, name := range []string{"partmap", "bucket"} {
		url, store, stop, err := b.target(ctx, name)
		if err != nil {
			return err
		}
		if err := b.preload(ctx, fmt.Sprintf("%s (%d)", name, size), store, keys); err != nil {
			stop()
			return err
		}
		for _, w := range []string{bench.Upsert, bench.Get} {
			st, err := b.measure(ctx, fmt.Sprintf("%s@%d", name, size), url, w, keys)
			if err != nil {
				stop()
				return err
			}
			rates[name+" "+w] = append(rates[name+" "+w], st.OpsPerSec)
		}
		stop()
	}
	for _, w := range []string{bench.Upsert, bench.Get} {
		r := rates["partmap "+w]
		q := rates["bucket "+w]
		b.report.Ratios[fmt.Sprintf("%s ops/s partmap/bucket at %d", w, size)] = r[len(r)-1] / q[len(q)-1]
	}
	return nil
}

func (b *benchRun) print() error {
	if b.cfg.asJSON {
		enc := json.NewEncoder(b.e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(b.report)
	}
	if len(b.report.Ratios) > 0 {
		fmt.Fprintln(b.e.stdout, "\nratios")
		w := tabwriter.NewWriter(b.e.stdout, 0, 0, 2, ' ', 0)
		for _, k := range sortedKeys(b.report.Ratios) {
			fmt.Fprintf(w, "  %s\t%.2f\n", k, b.report.Ratios[k])
		}
		w.Flush()
	}
	if b.report.PeakRSSBytes > 0 {
		fmt.Fprintf(b.e.stdout, "\npeak RSS of this process (server and load generator): %.0f MB\n", float64(b.report.PeakRSSBytes)/1e6)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// peakRSS reads this process's peak resident set size (Linux), or 0.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
