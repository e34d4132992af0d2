// Command searchbench measures what search indexes cost on the embedded
// store (issue 36): a write's CPU with indexed fields against the same
// write without, the build of an index over stored profiles, the latency
// of a selective query and of a sorted LIMIT 10 over a broad match, and the
// index's size on disk per profile.
//
//	go run ./internal/bench/searchbench --profiles 1000000
//
// The writes run on twin stores, one with a three-field index, by turns
// round after round; the queries on a store of --profiles profiles at
// rest (its compactions done). It calls the stores directly, with no
// network between: a write's CPU is the process's (getrusage), Pebble's
// flushes and compactions during the run included, and the loop that
// makes the writes costs both twins alike, so the ratio understates the
// index's share slightly.
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

var (
	profiles      = flag.Int("profiles", 1_000_000, "profiles to store before the queries")
	writeProfiles = flag.Int("write-profiles", 100_000, "profiles in each of the twin stores the writes run on")
	writes        = flag.Int("writes", 20_000, "writes in each write run")
	rounds        = flag.Int("rounds", 3, "rounds of write runs (0: none)")
	clients       = flag.Int("clients", 16, "concurrent writers")
	queries       = flag.Int("queries", 200, "runs of each query")
	dir           = flag.String("dir", "", "keep the stores here, and on a store kept from an earlier run run only the queries (default: a temporary directory, removed at the end)")
	profW         = flag.String("cpuprofile-writes", "", "write a CPU profile of the indexed store's last run replacing every field to this file")
	only          = flag.String("only", "", "run only the queries whose description starts with this")
	profQ         = flag.String("cpuprofile-queries", "", "write a CPU profile of the queries to this file")
)

// profiled runs fn under a CPU profile written to path, if any.
func profiled(path string, fn func()) {
	if path == "" {
		fn()
		return
	}
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	pprof.StartCPUProfile(f)
	fn()
	pprof.StopCPUProfile()
}

// The index measured: three fields, as the target names, and a
// fourth, a TAG of 20,000 values, for the selective query.
var index = partmap.IndexDefinition{Name: "desk", Fields: []partmap.IndexField{
	{Name: "fullName", Type: partmap.IndexText},
	{Name: "customerTier", Type: partmap.IndexTag},
	{Name: "visits", Type: partmap.IndexNumeric, Sortable: true},
}}

var selective = partmap.IndexDefinition{Name: "accounts", Fields: []partmap.IndexField{
	{Name: "account", Type: partmap.IndexTag},
}}

var tiers = []string{"gold", "silver", "bronze", "platinum"}

func profile(i int, r *rand.Rand) partmap.Profile {
	return partmap.Profile{
		partmap.FieldEmail: fmt.Sprintf("user%d@example%d.com", i, i%10),
		"fullName":         fmt.Sprintf("%s %s%d", first[r.IntN(len(first))], last[r.IntN(len(last))], r.IntN(20_000)),
		"customerTier":     tiers[r.IntN(len(tiers))],
		"visits":           strconv.Itoa(r.IntN(100_000)),
		"account":          fmt.Sprintf("acct-%d", r.IntN(20_000)),
	}
}

var first = []string{"Alice", "Bob", "Carol", "Dan", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Zoe"}
var last = []string{"Liddell", "Builder", "Alison", "Smith", "Jones", "Brown", "Taylor", "Wilson", "Davies", "Evans"}

func main() {
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	root := *dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "searchbench-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	if *rounds > 0 {
		writeCosts(ctx, root)
	}
	queryCosts(ctx, root)
}

func open(path string) *pebble.Store {
	s, err := pebble.Open(path, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{Indexes: []string{}}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	return s
}

// writeCosts loads twin stores of --write-profiles profiles, indexes one
// of them, and runs the same writes on each by turns, round after round:
// the medians of the rounds' CPU per write, and their ratio.
func writeCosts(ctx context.Context, root string) {
	plain, indexed := open(filepath.Join(root, "plain")), open(filepath.Join(root, "indexed"))
	defer plain.Close()
	defer indexed.Close()
	load(ctx, plain, *writeProfiles)
	load(ctx, indexed, *writeProfiles)
	if err := indexed.CreateIndex(ctx, index); err != nil {
		log.Fatal(err)
	}
	wait(ctx, indexed, index.Name)
	waitQuiet()
	fmt.Printf("write runs on twin stores of %d profiles, %d writes a run, %d rounds (medians)\n", *writeProfiles, *writes, *rounds)
	for _, incr := range []bool{false, true} {
		var a, b []float64
		for r := range *rounds {
			seed := uint64(10*r) + 1
			if incr {
				seed += 5
			}
			a = append(a, writeRun(ctx, plain, seed, incr).cpuPerOp)
			profile := ""
			if !incr && r == *rounds-1 {
				profile = *profW
			}
			profiled(profile, func() { b = append(b, writeRun(ctx, indexed, seed, incr).cpuPerOp) })
		}
		what := "replace every field"
		if incr {
			what = "increment visits"
		}
		fmt.Printf("%s\tno index %.1f µs CPU/write\t3 indexed fields %.1f µs\t%.2f×\n", what, median(a), median(b), median(b)/median(a))
	}
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// queryCosts loads --profiles profiles, builds the indexes, and runs the
// queries on the store at rest.
func queryCosts(ctx context.Context, root string) {
	path := filepath.Join(root, "big")
	_, statErr := os.Stat(path)
	s := open(path)
	defer s.Close()
	if statErr == nil && *dir != "" {
		// Kept from an earlier run (--dir): only the queries run again.
		waitQuiet()
		profiled(*profQ, func() { queryRuns(ctx, s) })
		return
	}
	load(ctx, s, *profiles)
	waitQuiet()
	base := diskBytes(path)
	fmt.Printf("profiles\t%d\n", *profiles)
	for _, def := range []partmap.IndexDefinition{index, selective} {
		t0 := time.Now()
		if err := s.CreateIndex(ctx, def); err != nil {
			log.Fatal(err)
		}
		wait(ctx, s, def.Name)
		fmt.Printf("build of %s (%d fields)\t%.1f s\n", def.Name, len(def.Fields), time.Since(t0).Seconds())
	}
	// Queries run on a store at rest: the load's and builds' compactions
	// done, as on a server that has been up a while.
	waitQuiet()
	fmt.Printf("index size on disk\t%.0f bytes/profile (both indexes)\n", float64(diskBytes(path)-base)/float64(*profiles))
	profiled(*profQ, func() { queryRuns(ctx, s) })
}

func queryRuns(ctx context.Context, s partmap.Store) {
	r := rand.New(rand.NewPCG(7, 7))
	runQueries(ctx, s, "absent TAG (no match: one seek per partition)", selective.Name, func() partmap.SearchOptions {
		return partmap.SearchOptions{Query: fmt.Sprintf(`@account:{none\-%d}`, r.IntN(20_000))}
	})
	runQueries(ctx, s, "selective TAG (about 50 matches)", selective.Name, func() partmap.SearchOptions {
		return partmap.SearchOptions{Query: fmt.Sprintf(`@account:{acct\-%d}`, r.IntN(20_000))}
	})
	runQueries(ctx, s, "selective word and prefix", index.Name, func() partmap.SearchOptions {
		return partmap.SearchOptions{Query: fmt.Sprintf("@fullName:%s%d %s*", last[r.IntN(len(last))], r.IntN(20_000), first[r.IntN(len(first))][:3])}
	})
	runQueries(ctx, s, "SORTBY visits DESC LIMIT 10 over a quarter", index.Name, func() partmap.SearchOptions {
		return partmap.SearchOptions{Query: "@customerTier:{" + tiers[r.IntN(len(tiers))] + "}", SortBy: "visits", Descending: true, Limit: 10}
	})
	runQueries(ctx, s, "range, LIMIT 10 (count all)", index.Name, func() partmap.SearchOptions {
		lo := r.IntN(99_000)
		return partmap.SearchOptions{Query: fmt.Sprintf("@visits:[%d %d]", lo, lo+1000), Limit: 10}
	})
}

func load(ctx context.Context, s partmap.Store, profiles int) {
	bar := progressbar.Default(int64(profiles), "loading")
	r := rand.New(rand.NewPCG(1, 2))
	const chunk = 1000
	for lo := 0; lo < profiles; lo += chunk {
		batch := make([]partmap.Profile, 0, chunk)
		for i := lo; i < min(lo+chunk, profiles); i++ {
			batch = append(batch, profile(i, r))
		}
		res, err := s.UpsertProfiles(ctx, batch)
		if err != nil {
			log.Fatal(err)
		}
		for _, x := range res {
			if x.Err != nil {
				log.Fatal(x.Err)
			}
		}
		bar.Add(len(batch))
	}
	bar.Finish()
}

func wait(ctx context.Context, s partmap.Store, name string) {
	bar := progressbar.Default(100, "building "+name)
	for {
		infos, err := s.ListIndexes(ctx)
		if err != nil {
			log.Fatal(err)
		}
		i := slices.IndexFunc(infos, func(x partmap.IndexInfo) bool { return x.Name == name })
		if i >= 0 && !infos[i].Building {
			bar.Finish()
			return
		}
		if i >= 0 {
			bar.Set(int(infos[i].Progress * 100))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type writeStats struct{ cpuPerOp, rate float64 }

// writeRun replaces random profiles with new values of every field, or
// increments their visits.
func writeRun(ctx context.Context, s partmap.Store, seed uint64, incr bool) writeStats {
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	t0 := time.Now()
	for c := range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(c)))
			for next.Add(1) <= int64(*writes) {
				i := r.IntN(*writeProfiles)
				var err error
				if incr {
					_, err = partmap.IncrementField(ctx, s, fmt.Sprintf("user%d@example%d.com", i, i%10), "visits", 1, partmap.Condition{})
				} else {
					_, _, err = partmap.UpsertProfile(ctx, s, profile(i, r), partmap.Condition{})
				}
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	return writeStats{cpuPerOp: (cpuTime() - cpu0).Seconds() * 1e6 / float64(*writes), rate: float64(*writes) / elapsed.Seconds()}
}

func runQueries(ctx context.Context, s partmap.Store, what, index string, next func() partmap.SearchOptions) {
	if !strings.HasPrefix(what, *only) {
		return
	}
	lat := make([]time.Duration, 0, *queries)
	var hits int64
	for range *queries {
		opts := next()
		t0 := time.Now()
		res, err := s.Search(ctx, index, opts)
		if err != nil {
			log.Fatalf("%s: %v", opts.Query, err)
		}
		lat = append(lat, time.Since(t0))
		hits += res.Total
	}
	slices.Sort(lat)
	fmt.Printf("%s\tp50 %.2f ms\tp99 %.2f ms\tmean total %d\n", what,
		ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), hits/int64(*queries))
}

// waitQuiet waits until the process has been nearly idle for a second
// (Pebble's background compactions done), two minutes at most.
func waitQuiet() {
	for range 120 {
		c0 := cpuTime()
		time.Sleep(time.Second)
		if cpuTime()-c0 < 30*time.Millisecond {
			return
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func diskBytes(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
