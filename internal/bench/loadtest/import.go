package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/partmap/partmap/internal/bench/procstat"
	"github.com/partmap/partmap/internal/bench/rounds"
)

// The import phase (issue 32): `partmap import` of a file of profiles into
// a fresh server on an empty data directory, the partmap under test and
// the baseline taking turns round by round. The client is always the
// partmap under test, so that only the server differs. Each server runs
// with GODEBUG=gctrace=1, which makes the Go runtime print a line per
// collection on stderr: the count of collections comes from the server's
// own log, and its CPU from /proc, both from outside its process.

// importTarget is one server binary's import rounds.
type importTarget struct {
	kind, bin string
	rounds    []importSample
	gcShare   float64 // of the server's CPU samples in the profiled run; -1 if none
	samples   time.Duration
}

// importSample is one import into a fresh server.
type importSample struct {
	elapsed time.Duration // of the client's `partmap import`
	cpu     float64       // server CPU seconds from the import's start until the server is idle again
	gcs     int           // collections in that time
	peakRSS int64         // the server's VmHWM
}

func (s importSample) rate(n int) float64 { return float64(n) / s.elapsed.Seconds() }

// writeImportFile writes n profiles of four fields each, one JSON object a
// line, as docs/PERFORMANCE.md's import figures use.
func writeImportFile(path string, n int) error {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"emailAddress":"user%d@example%d.com","fullName":"User Number %d","companyName":"Company %d","customerTier":"%s"}`+"\n",
			i, i%10, i, i%1000, tiers[i%len(tiers)])
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// runImports runs c.rounds imports against each of partmap and the
// baseline, alternating, then one more each with a CPU profile of the
// server for the collector's share.
func runImports(ctx context.Context, c config, tmp string, clkTck float64, logf func(string, ...any)) ([]*importTarget, error) {
	file := filepath.Join(tmp, "import.jsonl")
	if err := writeImportFile(file, c.importProfiles); err != nil {
		return nil, err
	}
	targets := []*importTarget{{kind: "partmap", bin: c.partmap, gcShare: -1}}
	if c.baseline != "" {
		targets = append(targets, &importTarget{kind: "baseline", bin: c.baseline, gcShare: -1})
	}
	n := 0
	for round := range c.rounds {
		order := append(slices.Clone(targets[round%len(targets):]), targets[:round%len(targets)]...)
		for _, it := range order {
			n++
			s, _, err := importOnce(ctx, c, it, file, filepath.Join(tmp, fmt.Sprintf("import-%d", n)), clkTck, 0)
			if err != nil {
				return nil, err
			}
			it.rounds = append(it.rounds, s)
			logf("round %d/%d import %-8s %9.0f profiles/s %6.2f s server CPU %4d collections", round+1, c.rounds, it.kind,
				s.rate(c.importProfiles), s.cpu, s.gcs)
		}
	}
	for _, it := range targets {
		// A profile covers whole seconds: those of the shortest round, less
		// a margin, so that it ends before the import does.
		d := time.Duration(slices.Min(importDurations(it.rounds))) - 700*time.Millisecond
		d = max(time.Second, d.Truncate(time.Second))
		n++
		_, p, err := importOnce(ctx, c, it, file, filepath.Join(tmp, fmt.Sprintf("import-%d", n)), clkTck, d)
		if err != nil {
			return nil, err
		}
		it.gcShare, it.samples = gcShare(p)
		logf("profiled import %-8s: the collector has %.0f%% of %v of server CPU samples over %v", it.kind, 100*it.gcShare, it.samples, d)
		if c.pprof == "import" {
			path := filepath.Join(c.pprofDir, fmt.Sprintf("%s-import-%d.pprof", it.kind, c.importProfiles))
			f, err := os.Create(path)
			if err == nil {
				err = p.Write(f)
				err = errors.Join(err, f.Close())
			}
			if err != nil {
				return nil, err
			}
			logf("wrote %s", path)
		}
	}
	return targets, nil
}

func importDurations(ss []importSample) []time.Duration {
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		ds[i] = s.elapsed
	}
	return ds
}

// importOnce starts a server of it on the empty directory dir, imports file
// into it and measures the server. With a profile length, it also takes a
// CPU profile of the server from 200 ms into the import.
func importOnce(ctx context.Context, c config, it *importTarget, file, dir string, clkTck float64, profileFor time.Duration) (importSample, *profile.Profile, error) {
	t := &target{kind: it.kind, bin: it.bin, profiles: c.importProfiles, env: gctraceEnv()}
	if err := t.start(ctx, filepath.Join(dir, "data"), dir+".log"); err != nil {
		return importSample{}, nil, err
	}
	defer func() {
		t.stop(func(string, ...any) {})
		os.RemoveAll(dir)
	}()
	var profPath string
	profErr := make(chan error, 1)
	if profileFor > 0 {
		profPath = dir + ".pprof"
		go func() {
			select {
			case <-time.After(200 * time.Millisecond):
				profErr <- fetchProfile(ctx, t.addr, profileFor, profPath)
			case <-ctx.Done():
				profErr <- ctx.Err()
			}
		}()
	}
	gcs0, err := collections(t.logPath)
	if err != nil {
		return importSample{}, nil, err
	}
	before, err := t.cpuTicks()
	if err != nil {
		return importSample{}, nil, err
	}
	begin := time.Now()
	out, err := exec.CommandContext(ctx, c.partmap, importArgs(t.addr, file)...).CombinedOutput()
	elapsed := time.Since(begin)
	if err != nil || !bytes.Contains(out, fmt.Appendf(nil, "imported %d profiles", c.importProfiles)) {
		return importSample{}, nil, fmt.Errorf("import into %s: %v\n%s%s", it.kind, err, out, t.logTail())
	}
	// The flushes and compactions an import leaves behind are its cost too.
	settle(ctx, []*target{t}, time.Minute, func(string, ...any) {})
	after, err := t.cpuTicks()
	if err != nil {
		return importSample{}, nil, err
	}
	gcs1, err := collections(t.logPath)
	if err != nil {
		return importSample{}, nil, err
	}
	s := importSample{elapsed: elapsed, cpu: float64(after-before) / clkTck, gcs: gcs1 - gcs0}
	if s.peakRSS, err = procstat.PeakRSS(t.cmd.Process.Pid); err != nil {
		return importSample{}, nil, err
	}
	if profileFor == 0 {
		return s, nil, nil
	}
	if err := <-profErr; err != nil {
		return importSample{}, nil, err
	}
	f, err := os.Open(profPath)
	if err != nil {
		return importSample{}, nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return importSample{}, nil, fmt.Errorf("the CPU profile of %s: %w", it.kind, err)
	}
	return s, p, nil
}

func importArgs(addr, file string) []string {
	return []string{"import", "--server", "http://" + addr, file}
}

// gctraceEnv is GODEBUG with gctrace=1 added to what the environment sets.
func gctraceEnv() []string {
	v := "gctrace=1"
	if old := os.Getenv("GODEBUG"); old != "" {
		v = old + "," + v
	}
	return []string{"GODEBUG=" + v}
}

var gctraceLine = regexp.MustCompile(`(?m)^gc \d+ @`)

// collections counts the runtime's gctrace lines in a server's log.
func collections(logPath string) (int, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0, err
	}
	return countCollections(b), nil
}

func countCollections(log []byte) int { return len(gctraceLine.FindAllIndex(log, -1)) }

// gcFrame matches the functions of the Go runtime in which the collector
// spends CPU: its mark workers and the allocations' assists, sweeping,
// the write barriers, the start and end of a cycle, and the scavenger
// that returns the memory it freed.
var gcFrame = regexp.MustCompile(`^runtime\.(gcBgMarkWorker|gcAssistAlloc1?|gcDrain\w*|markroot\w*|scanobject|scanSpan\w*|greyobject|` +
	`bgsweep|sweepone|deductSweepCredit|\(\*sweepLocked\)\.sweep|` +
	`gcWriteBarrier\w*|wbBufFlush\w*|bulkBarrierPreWrite\w*|gcStart|gcMarkDone|gcMarkTermination|bgscavenge)$`)

// gcShare is the share of a CPU profile's samples with a frame of the
// collector in their stack, and the CPU time the profile sampled.
func gcShare(p *profile.Profile) (share float64, sampled time.Duration) {
	i := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if i < 0 {
		i = len(p.SampleType) - 1
	}
	var gc, total int64
	for _, s := range p.Sample {
		v := s.Value[i]
		total += v
		if slices.ContainsFunc(s.Location, func(l *profile.Location) bool {
			return slices.ContainsFunc(l.Line, func(ln profile.Line) bool { return ln.Function != nil && gcFrame.MatchString(ln.Function.Name) })
		}) {
			gc += v
		}
	}
	if total == 0 {
		return 0, 0
	}
	return float64(gc) / float64(total), time.Duration(total)
}

// reportImports writes the import table and issue 32's targets.
func reportImports(w io.Writer, c config, its []*importTarget) {
	n := c.importProfiles
	fmt.Fprintf(w, "### Import of %s profiles into an empty directory\n\n", thousands(n))
	fmt.Fprintf(w, "Medians of %d rounds, the servers alternating, each round on a fresh server; the range of the rounds in brackets. "+
		"Server CPU is the server's utime+stime from the import's start until it is idle again. Collections are counted from the server's "+
		"GODEBUG=gctrace=1 lines in the same span; the collector's share is of the server's CPU samples in one more import with a CPU profile.\n\n", c.rounds)
	head := "| server | profiles/s | server CPU s | collections | collector's share | peak RSS |"
	rule := "| --- | ---: | ---: | ---: | ---: | ---: |"
	base := its[len(its)-1]
	if base.kind != "baseline" {
		base = nil
	}
	if base != nil {
		head += " profiles/s ÷ baseline | CPU ÷ baseline | collections ÷ baseline |"
		rule += " ---: | ---: | ---: |"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	rate := func(s importSample) float64 { return s.rate(n) }
	cpu := func(s importSample) float64 { return s.cpu }
	gcs := func(s importSample) float64 { return float64(s.gcs) }
	rss := func(s importSample) float64 { return float64(s.peakRSS) / 1e6 }
	for _, it := range its {
		share := "–"
		if it.gcShare >= 0 {
			share = fmt.Sprintf("%.0f%% of %.1f s", 100*it.gcShare, it.samples.Seconds())
		}
		fmt.Fprintf(w, "| %s | %s (%s–%s) | %.2f (%.2f–%.2f) | %.0f (%.0f–%.0f) | %s | %.0f MB |", it.kind,
			thousands(int(rounds.Of(it.rounds, rate))), thousands(int(minImport(it.rounds, rate))), thousands(int(maxImport(it.rounds, rate))),
			rounds.Of(it.rounds, cpu), minImport(it.rounds, cpu), maxImport(it.rounds, cpu),
			rounds.Of(it.rounds, gcs), minImport(it.rounds, gcs), maxImport(it.rounds, gcs), share, rounds.Of(it.rounds, rss))
		if base != nil {
			if it == base {
				fmt.Fprint(w, " | | |")
			} else {
				fmt.Fprintf(w, " %.2f | %.2f | %.2f |", rounds.Ratio(it.rounds, base.rounds, rate), rounds.Ratio(it.rounds, base.rounds, cpu),
					rounds.Ratio(it.rounds, base.rounds, gcs))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n| issue 32 target | measured | met |\n| --- | ---: | --- |\n")
	check := func(what string, v float64, ok bool) {
		fmt.Fprintf(w, "| %s | %.2f | %s |\n", what, v, map[bool]string{true: "yes", false: "**no**"}[ok])
	}
	pm := its[0]
	if pm.gcShare >= 0 {
		check("the collector's share of the server's CPU during an import < 0.15", pm.gcShare, pm.gcShare < 0.15)
	}
	if base != nil {
		v := rounds.Ratio(pm.rounds, base.rounds, rate)
		check("import profiles/s ≥ 1.0× baseline", v, v >= 1)
	}
	fmt.Fprintf(w, "\n```sh\n")
	for _, it := range its {
		fmt.Fprintf(w, "GODEBUG=gctrace=1 %s serve --addr ADDR --data EMPTY_DIR   # %s, then POST %s/start\n", filepath.Base(it.bin), it.kind, basePath)
	}
	fmt.Fprintf(w, "%s %s   # the client, for every server\n", filepath.Base(c.partmap), strings.Join(importArgs("ADDR", "import.jsonl"), " "))
	fmt.Fprintf(w, "```\n\nimport.jsonl has %s lines such as `{\"emailAddress\":\"user1@example1.com\",\"fullName\":\"User Number 1\",\"companyName\":\"Company 1\",\"customerTier\":\"silver\"}`.\n\n", thousands(n))
}

func importValues(ss []importSample, f func(importSample) float64) []float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return xs
}

func minImport(ss []importSample, f func(importSample) float64) float64 {
	return slices.Min(importValues(ss, f))
}
func maxImport(ss []importSample, f func(importSample) float64) float64 {
	return slices.Max(importValues(ss, f))
}
