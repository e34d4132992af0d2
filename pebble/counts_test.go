package pebble

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
)

// stepped is the real backend, which calls step after each read of the
// counts or of what is due, so that a test can write between the reads
// of one ListPartitions. Reads that step makes itself (a sweep's) call
// nothing.
type stepped struct {
	*backend
	mu     sync.Mutex
	step   func(read int) // nil: nothing
	reads  int
	inStep bool
}

func (s *stepped) Counts(ctx context.Context, gen int, first, end partmap.Partition) ([]partmap.PartitionCount, error) {
	out, err := s.backend.Counts(ctx, gen, first, end)
	s.after()
	return out, err
}

func (s *stepped) Due(ctx context.Context, gen int, first, end partmap.Partition, before int64, limit int, after *engine.Due) ([]engine.Due, error) {
	out, err := s.backend.Due(ctx, gen, first, end, before, limit, after)
	s.after()
	return out, err
}

func (s *stepped) after() {
	s.mu.Lock()
	step, n := s.step, s.reads
	if step == nil || s.inStep {
		s.mu.Unlock()
		return
	}
	s.reads++
	s.inStep = true
	s.mu.Unlock()
	step(n)
	s.mu.Lock()
	s.inStep = false
	s.mu.Unlock()
}

// run sets step for one call of list, counting reads from 0.
func (s *stepped) run(step func(read int), list func()) {
	s.mu.Lock()
	s.step, s.reads = step, 0
	s.mu.Unlock()
	list()
	s.mu.Lock()
	s.step = nil
	s.mu.Unlock()
}

// ListPartitions subtracts from the stored counts the profiles due but not
// swept yet, which it reads separately. A partition's count must be what
// it held live at an instant of the call, whichever of its reads the
// writers and the sweeper come between: here, each write and sweep runs
// after one chosen read, for every choice.
func TestPartitionCountsBetweenReads(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, &Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1}})
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var clock atomic.Int64
	clock.Store(base)
	b := &stepped{backend: &backend{db: s.db, feed: s.backend.feed, present: s.backend.present}}
	// Only this directory serves the database from here on; s's stays idle.
	d, err := directory.Open(ctx, b, directory.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, SweepInterval: -1, Clock: func() time.Time { return time.UnixMilli(clock.Load()) }}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(emails ...string) {
		t.Helper()
		var ps []partmap.Profile
		for _, e := range emails {
			ps = append(ps, partmap.Profile{partmap.FieldEmail: e})
		}
		storetest.MustUpsert(t, d, ps) // one commit for one partition
	}
	expire := func(email string, at int64) {
		t.Helper()
		if _, err := d.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: email, When: partmap.When{Millis: at}}); err != nil {
			t.Fatal(err)
		}
	}
	sweep := func() {
		if _, err := d.Sweep(ctx); err != nil {
			t.Error(err)
		}
	}
	countOf := func(st partmap.PartitionStats, p partmap.Partition) int64 {
		for _, c := range st.Partitions {
			if c.Partition == p {
				return c.Profiles
			}
		}
		return 0
	}
	// fresh returns n emails of one partition that no earlier case used.
	used := map[partmap.Partition]bool{}
	fresh := func(n int, prefix string) ([]string, partmap.Partition) {
		for i := 0; ; i++ {
			emails, p := storetest.Colliding(n, partmap.DefaultPartitions, fmt.Sprintf("%s%d-", prefix, i))
			if !used[p] {
				used[p] = true
				return emails, p
			}
		}
	}
	const live = 3
	const reads = 12 // more than either way of reading makes

	// Writers that change some partition's count between every two reads
	// kept the counts from ever reading alike twice, and after four tries
	// the last were taken, with the profiles due read before a sweep that
	// came before the counts: the swept profiles were subtracted again.
	t.Run("SweepAmongWritesElsewhere", func(t *testing.T) {
		for j := range reads {
			emails, p := fresh(live+3, fmt.Sprintf("a%d-", j))
			now := clock.Load()
			put(emails...)
			for _, e := range emails[live:] {
				expire(e, now+1000)
			}
			clock.Store(now + 2000)
			n := 0
			var st partmap.PartitionStats
			b.run(func(read int) {
				for ; ; n++ { // a profile in another partition
					e := fmt.Sprintf("elsewhere%d-%d@example.com", j, n)
					if q := partmap.PartitionOf(e, partmap.DefaultPartitions); q != p {
						used[q] = true
						put(e)
						n++
						break
					}
				}
				if read == j {
					sweep()
				}
			}, func() {
				if st, err = d.ListPartitions(ctx); err != nil {
					t.Fatal(err)
				}
			})
			if got := countOf(st, p); got != live {
				t.Errorf("a sweep after read %d among writes elsewhere: %s counts %d profiles; %d are live throughout", j, p, got, live)
			}
			sweep()
		}
	})

	// A sweep after every read, each of one more due profile, changes what
	// is due between any two reads. The tries run out, and the bound holds:
	// the count can include only the profile swept between the last read
	// of the counts and the due profiles read after it.
	t.Run("SweepAfterEveryRead", func(t *testing.T) {
		emails, p := fresh(live+reads, "c")
		now := clock.Load()
		put(emails...)
		for i, e := range emails[live:] {
			expire(e, now+100*int64(i+1))
		}
		clock.Store(now + 100*reads + 1000)
		var st partmap.PartitionStats
		b.run(func(read int) {
			clock.Store(now + 100*int64(read+1) + 50) // due: one more
			sweep()
			clock.Store(now + 100*reads + 1000)
		}, func() {
			if st, err = d.ListPartitions(ctx); err != nil {
				t.Fatal(err)
			}
		})
		got := countOf(st, p)
		if got < live || got > live+1 {
			t.Errorf("a sweep after every read: %s counts %d profiles; %d are live, and only one was swept during the last try", p, got, live)
		}
		t.Logf("%s counts %d profiles; %d are live", p, got, live)
		sweep()
	})

	// A sweep of one due profile after one read, then after another a put
	// of two new profiles in the partition and a sweep of its other due
	// one: the count read before and after is the same, but what was
	// subtracted was read between them. The partition holds 3 live
	// profiles, then 5; never 4.
	t.Run("SweepsAroundAPutInThePartition", func(t *testing.T) {
		for j1 := range reads {
			for j2 := j1; j2 < reads; j2++ {
				emails, p := fresh(live+4, fmt.Sprintf("b%d-%d-", j1, j2))
				now := clock.Load()
				put(emails[:live+2]...)
				expire(emails[live], now+1000)
				expire(emails[live+1], now+1500)
				clock.Store(now + 2000)
				var st partmap.PartitionStats
				b.run(func(read int) {
					if read == j1 {
						clock.Store(now + 1200) // due: the first only
						sweep()
						clock.Store(now + 2000)
					}
					if read == j2 {
						put(emails[live+2:]...)
						sweep()
					}
				}, func() {
					if st, err = d.ListPartitions(ctx); err != nil {
						t.Fatal(err)
					}
				})
				if got := countOf(st, p); got != live && got != live+2 {
					t.Errorf("sweeps after reads %d and %d, a put of two after read %d: %s counts %d profiles; it held %d live, then %d", j1, j2, j2, p, got, live, live+2)
				}
				sweep()
			}
		}
	})
}
