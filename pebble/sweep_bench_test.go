package pebble_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// BenchmarkSweep gives N profiles deadlines that all fall within one
// second, then lets the background sweeper, at its default interval,
// reclaim them, and reports how long after the last deadline 99% and all
// of them were gone, and the sweeper's CPU time per profile (its own
// thread's, as /metrics reports it) and the whole process's. It also
// reports the CPU of an idle pass: every partition's expiry entries read,
// nothing due. Run it alone, on an idle machine:
//
//	go test -run '^$' -bench BenchmarkSweep -benchtime 1x -timeout 30m ./pebble
//
// PARTMAP_SWEEP_SIZES=100000 picks the sizes (default 100000,1000000).
func BenchmarkSweep(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if env := os.Getenv("PARTMAP_SWEEP_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("deadlines=%d", n), func(b *testing.B) {
			for range b.N {
				sweepOnce(b, n)
			}
		})
	}
}

// pausedClock stands still at start until released, then runs at the
// wall clock's pace, so that deadlines set during the preload fall only
// once it is let go.
type pausedClock struct {
	start    time.Time
	released atomic.Int64 // Unix ns of the release; 0 while it stands
}

func (c *pausedClock) now() time.Time {
	r := c.released.Load()
	if r == 0 {
		return c.start
	}
	return c.start.Add(time.Since(time.Unix(0, r)))
}

func sweepOnce(b *testing.B, n int) {
	ctx := context.Background()
	clock := &pausedClock{start: time.Now()}
	o := pebble.Options{}
	o.Clock = clock.now
	s, err := pebble.Open(b.TempDir(), &o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// The deadlines: spread over one second, starting 1 s after the load.
	loadStart := time.Now()
	emails := make([]string, n)
	for lo := 0; lo < n; lo += partmap.MaxBulkProfiles {
		batch := make([]partmap.Profile, 0, partmap.MaxBulkProfiles)
		for i := lo; i < min(lo+partmap.MaxBulkProfiles, n); i++ {
			emails[i] = fmt.Sprintf("user%d@example.com", i)
			batch = append(batch, partmap.Profile{"emailAddress": emails[i], "fullName": "User " + strconv.Itoa(i), "customerTier": "gold"})
		}
		if _, err := s.UpsertProfiles(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	base := clock.now().Add(time.Second).UnixMilli()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(partmap.MaxTransactionOps)) - partmap.MaxTransactionOps
				if lo >= n {
					return
				}
				var ops []partmap.Operation
				for i := lo; i < min(lo+partmap.MaxTransactionOps, n); i++ {
					ops = append(ops, partmap.Operation{Op: partmap.OpExpire, Email: emails[i],
						When: partmap.When{Millis: base + rand.Int64N(1000)}})
				}
				for {
					_, err := s.Transact(ctx, ops)
					if partmap.ErrorCode(err) == partmap.ELOCKCONFLICT {
						continue
					}
					if err != nil {
						b.Error(err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	b.Logf("%d profiles and deadlines loaded in %v", n, time.Since(loadStart).Round(time.Millisecond))

	idle := idlePassCPU(b, s)
	// Let the clock go: now is 1 s before the first deadline.
	reclaimed := counter(b, s, "partmap_expiry_profiles_reclaimed_total")
	cpu := counter(b, s, "partmap_expiry_sweeper_cpu_seconds_total")
	cpu0, proc0 := cpu(), processCPU()
	clock.released.Store(time.Now().UnixNano())
	b.StartTimer()
	lastDeadline := time.UnixMilli(base + 1000)
	var at99 time.Duration
	for {
		done := reclaimed()
		if at99 == 0 && done >= 0.99*float64(n) {
			at99 = clock.now().Sub(lastDeadline)
		}
		if done >= float64(n) {
			break
		}
		if clock.now().Sub(lastDeadline) > time.Minute {
			b.Fatalf("only %v of %d reclaimed a minute after the last deadline", done, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	all := clock.now().Sub(lastDeadline)
	b.StopTimer()
	b.ReportMetric(at99.Seconds(), "s-to-99%")
	b.ReportMetric(all.Seconds(), "s-to-all")
	b.ReportMetric((cpu()-cpu0)*1e6/float64(n), "sweeper-cpu-µs/profile")
	b.ReportMetric((processCPU()-proc0).Seconds()*1e6/float64(n), "process-cpu-µs/profile")
	b.ReportMetric(idle.Seconds()*1e3, "idle-pass-cpu-ms")
	stats, err := s.ListPartitions(ctx)
	if err != nil || stats.TotalProfiles != 0 {
		b.Fatalf("%d profiles left (%v)", stats.TotalProfiles, err)
	}
}

// idlePassCPU is the mean CPU time of a sweeper pass that finds nothing
// due, measured as the sweeper measures its own: the calling thread's,
// which the kernel counts in ticks, hence the mean of many.
func idlePassCPU(b *testing.B, s *pebble.Store) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const passes = 50
	before := threadCPU()
	for range passes {
		if _, err := s.Sweep(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return (threadCPU() - before) / passes
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// counter reads one of the store's counters. It gathers them all, as a
// scrape does: a collector's Describe may send more descriptions than a
// reader that looks for one expects.
func counter(b *testing.B, s *pebble.Store, name string) func() float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	read := func() (float64, bool) {
		families, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetCounter().GetValue(), true
			}
		}
		return 0, false
	}
	if _, ok := read(); !ok {
		b.Fatalf("no counter %s", name)
	}
	return func() float64 { v, _ := read(); return v }
}
