package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap/internal/bench"
	"github.com/partmap/partmap/pebble"
)

func runBench(ctx context.Context, e *env, args []string) error {
	c := bench.Config{Log: e.stderr, Progress: isTerminal(e.stderr)}
	fs := newFlagSet(e, "bench", "")
	fs.StringVar(&c.Server, "server", "", "bench the partmap server at this `URL`")
	fs.StringVar(&c.Token, "token", e.getenv("PARTMAP_TOKEN"), "bearer `token` for --server (write scope)")
	fs.BoolVar(&c.Embedded, "embedded", false, "bench an embedded server of its own, on a temporary directory")
	fs.IntVar(&c.Clients, "clients", 64, "concurrent keep-alive HTTP clients")
	fs.IntVar(&c.Preload, "preload", 100000, "profiles stored before measuring")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long each workload runs")
	workloads := fs.String("workloads", strings.Join(bench.AllWorkloads, ","), "comma-separated `list` of workloads")
	fs.BoolVar(&c.Ceiling, "ceiling", false, "also run the same clients against a minimal in-process server (sync.Map) and print partmap/ceiling ratios")
	fs.StringVar(&c.Baseline, "baseline", "", "also bench the original design's storage (bucket): whole-partition rewrites")
	sizes := fs.String("baseline-sizes", "10000,1000000", "preloaded profiles at which --baseline compares upserts")
	fs.BoolVar(&c.JSON, "json", false, "print JSON instead of a table")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run (embedded) to `file`")
	fs.DurationVar(&c.CommitDelay, "commit-delay", pebble.DefaultCommitDelay, "the embedded server's --commit-delay")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("bench takes no arguments")
	}
	c.Workloads, c.CommitDelay = strings.Split(*workloads, ","), negativeIfZero(c.CommitDelay)
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return usagef("--baseline-sizes: %q is not a positive number", s)
		}
		c.BaselineSizes = append(c.BaselineSizes, n)
	}
	if err := c.Validate(); err != nil {
		return usageError(err.Error())
	}
	return bench.Run(ctx, c, e.stdout)
}
