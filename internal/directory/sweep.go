package directory

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// sweepBatch bounds the expiry entries one step of a pass reads; a pass
// that fills it goes on at once.
const sweepBatch = 50000

// sweeper runs Sweep every interval until the directory closes.
type sweeper struct {
	background
	profiles prometheus.Counter
	fields   prometheus.Counter
	passes   prometheus.Counter
	cpu      prometheus.Counter
	lag      prometheus.Gauge
}

func newSweeperMetrics() *sweeper {
	return &sweeper{
		profiles: counter("partmap_expiry_profiles_reclaimed_total", "Expired profiles the sweeper deleted."),
		fields:   counter("partmap_expiry_records_reclaimed_total", "Records the sweeper rewrote without their expired fields."),
		passes:   counter("partmap_expiry_sweeps_total", "Passes of the sweeper over the expiry entries."),
		cpu:      counter("partmap_expiry_sweeper_cpu_seconds_total", "CPU time of the sweeper's own thread (user and system)."),
		lag:      gauge("partmap_expiry_oldest_due_seconds", "How long the oldest deadline the last pass met had been due: how far the sweeper is behind."),
	}
}

func (s *sweeper) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.profiles, s.fields, s.passes, s.cpu, s.lag}
}

// startSweeper runs passes every interval in a goroutine of its own, on
// one OS thread, so that its CPU can be read from the thread's usage.
func (d *Directory) startSweeper(interval time.Duration) {
	s := d.sweeper
	s.start(func(ctx context.Context, stop <-chan struct{}) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t := time.NewTicker(interval)
		defer t.Stop()
		var warned time.Time // when a failure was last logged
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if !d.started.Load() {
				if d.checkStarted(ctx) != nil {
					continue
				}
			}
			before, started := threadCPU(), time.Now()
			stats, err := d.Sweep(ctx)
			s.cpu.Add((threadCPU() - before).Seconds())
			// A pass that found nothing yet took long (a million partitions
			// on Redis, say) waits nine times its length, so that looking
			// costs at most a tenth of a core whatever the directory's
			// size. A pass that reclaimed something did needed work.
			if took := time.Since(started); stats == (partmap.SweepStats{}) && 9*took > interval {
				t.Reset(9 * took)
			} else {
				t.Reset(interval)
			}
			switch {
			case ctx.Err() != nil:
			case err != nil && time.Since(warned) >= time.Minute:
				// Once a minute while it fails (the store is down, say),
				// not at every pass.
				slog.Warn("expiry sweep failed; the sweeper keeps trying", "err", err)
				warned = time.Now()
			case err == nil && !warned.IsZero():
				slog.Info("expiry sweep works again")
				warned = time.Time{}
			}
		}
	})
}

// Sweep reclaims everything due by now: it deletes expired profiles, with
// all a delete does, and rewrites records without their expired fields,
// with the version a reader already sees (partmap.Record.Live). Each
// partition's reclaimed records commit in one invocation under its lock,
// re-read there, so a write that got in first wins; none waits for its
// fsync: what a crash undoes is still expired, and swept again.
//
// A backend with hints (engine.Hints: Redis) is asked only where its hints
// say something is due; any other is read whole, which on Pebble is one
// seek when nothing is due.
func (d *Directory) Sweep(ctx context.Context) (partmap.SweepStats, error) {
	var total partmap.SweepStats
	s := d.sweeper
	s.passes.Inc()
	now := d.now()
	layouts := d.serving.Load().layouts()
	oldest := now
	defer func() { s.lag.Set(float64(now-oldest) / 1000) }()
	if d.engine.Hinted() {
		return d.sweepHinted(ctx, layouts, now, &oldest)
	}
	for _, l := range layouts {
		var after *engine.Due
		for {
			due, err := d.engine.Due(ctx, l.Generation, 0, partmap.Partition(l.Partitions), now+1, sweepBatch, after)
			if err != nil {
				return total, err
			}
			if _, err := d.reclaimDue(ctx, due, now, &oldest, &total); err != nil {
				return total, err
			}
			if len(due) < sweepBatch {
				break
			}
			// A full page: the next goes on after its last entry, never
			// over what this one reclaimed (or could not: a stuck entry is
			// passed, not spun on).
			after = &due[len(due)-1]
		}
	}
	return total, nil
}

// sweepRounds bounds the claims of one hinted pass: each round reclaims
// a page of every partition claimed, and a partition with more goes on in
// the next round.
const sweepRounds = 100

// sweepHinted is Sweep on a backend with hints: it claims the partitions
// whose hints are due, reclaims what is due in those of layouts, and
// releases the claims, which brings each hint back at its partition's
// soonest deadline left. A partition of a generation this server does not
// serve (one it has not learned of yet, or one a resize retired) is left
// to a server that does.
func (d *Directory) sweepHinted(ctx context.Context, layouts []engine.Layout, now int64, oldest *int64) (partmap.SweepStats, error) {
	var total partmap.SweepStats
	for range sweepRounds {
		c, err := d.engine.ClaimDue(ctx, now+1)
		if err != nil || len(c.Parts) == 0 {
			return total, err
		}
		var due []engine.Due
		var skipped []engine.Part
		for i, p := range c.Parts {
			if !slices.ContainsFunc(layouts, func(l engine.Layout) bool {
				return l.Generation == p.Generation && int(p.Partition) < l.Partitions
			}) {
				skipped = append(skipped, p)
				continue
			}
			due = append(due, c.Due[i]...)
		}
		stats, err := d.reclaimDue(ctx, due, now, oldest, &total)
		// Released whatever happened: what is left due comes back due, for
		// the next pass. A release that fails leaves the claims to run out.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		rerr := d.engine.ReleaseDue(rctx, c, skipped)
		cancel()
		if err != nil {
			return total, err
		}
		if rerr != nil {
			return total, rerr
		}
		if !c.More || stats == (partmap.SweepStats{}) {
			break // a page that reclaimed nothing is not claimed again at once
		}
	}
	return total, nil
}

// reclaimDue reclaims at now the profiles that due entries name, adds what
// it did to total, and lowers oldest to the soonest deadline it met.
func (d *Directory) reclaimDue(ctx context.Context, due []engine.Due, now int64, oldest *int64, total *partmap.SweepStats) (partmap.SweepStats, error) {
	emails := make([]string, 0, len(due))
	for _, e := range due {
		emails = append(emails, e.Email)
		*oldest = min(*oldest, e.Deadline)
	}
	slices.Sort(emails)
	stats, err := d.reclaim(ctx, slices.Compact(emails), now)
	total.Profiles += stats.Profiles
	total.Records += stats.Records
	d.sweeper.profiles.Add(float64(stats.Profiles))
	d.sweeper.fields.Add(float64(stats.Records))
	return stats, err
}

// reclaim sweeps emails at now, one invocation per partition.
func (d *Directory) reclaim(ctx context.Context, emails []string, now int64) (partmap.SweepStats, error) {
	var total partmap.SweepStats
	var durables []func() error
	defer func() {
		for _, durable := range durables {
			durable() // only to release the commits: the sweep need not wait
		}
	}()
	for len(emails) > 0 {
		sv := d.acquire()
		groups := map[partmap.Partition][]string{}
		for _, e := range emails {
			p := sv.part(e).Partition
			groups[p] = append(groups[p], e)
		}
		var stale []string
		// Several partitions per invocation where a commit is one batch
		// (bulkSize, as a bulk write has): the soonest deadlines are spread
		// over every partition, and a commit per partition of a few
		// records each cost most of a burst's time.
		parts := slices.Sorted(maps.Keys(groups))
		for len(parts) > 0 {
			chunk := parts[:min(len(parts), d.bulkSize)]
			parts = parts[len(chunk):]
			var group []string
			for _, p := range chunk {
				group = append(group, groups[p]...)
			}
			var stats partmap.SweepStats
			durable, err := d.reclaimGroup(ctx, sv, group, now, &stats)
			if err == engine.ErrStale {
				stale = append(stale, group...)
				continue
			}
			if err != nil {
				sv.release()
				return total, d.explainConflict(err)
			}
			durables = append(durables, durable)
			total.Profiles += stats.Profiles
			total.Records += stats.Records
		}
		sv.release()
		if len(stale) > 0 {
			if err := d.reload(sv); err != nil {
				return total, err
			}
		}
		emails = stale
	}
	return total, nil
}

// reclaimGroup sweeps emails, of one or several partitions of sv, in one
// invocation.
func (d *Directory) reclaimGroup(ctx context.Context, sv *serving, emails []string, now int64, stats *partmap.SweepStats) (func() error, error) {
	sts := make([]staged, len(emails))
	var parts []engine.Part
	for i, e := range emails {
		sts[i] = sv.staged(e)
		parts = append(parts, sts[i].parts()...)
	}
	slices.SortFunc(parts, engine.Part.Compare)
	parts = slices.Compact(parts)
	inv := sv.invocation(parts...)
	if len(parts) == 1 {
		inv.Records = emails
	}
	return d.engine.InvokeVisible(engine.Bulk(ctx), inv, func(tx *engine.Tx) error {
		if d.serving.Load() != sv {
			return engine.ErrStale
		}
		*stats = partmap.SweepStats{} // this run's alone: the handler may run again
		for i := 0; i < len(sts); {
			// One read of each partition's records: emails come grouped.
			j := i
			for j < len(sts) && sts[j].p == sts[i].p {
				j++
			}
			group := make([]string, 0, j-i)
			for _, st := range sts[i:j] {
				group = append(group, st.email)
			}
			if err := tx.Prefetch(sts[i].p, group); err != nil {
				return err
			}
			i = j
		}
		for _, st := range sts {
			st.tx = tx
			rec, ok, err := tx.Get(st.p, st.email)
			if err != nil || !ok {
				return err
			}
			l, alive := rec.Live(now)
			switch {
			case !alive:
				stats.Profiles++
				if err := st.Delete(partmap.OpExpired); err != nil {
					return err
				}
			case l.Version != rec.Version:
				stats.Records++
				if err := st.Put(l, partmap.OpExpired); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// CountDeadlines counts the live profiles with deadlines
// (partmap.DeadlineCounter) from one read of every expiry entry: a
// profile's 'p' entry says when it ends, its 'f' entry that a field has a
// deadline. A profile whose end has passed is gone, whatever its entries.
func (d *Directory) CountDeadlines(ctx context.Context) (partmap.DeadlineCounts, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.DeadlineCounts{}, err
	}
	var c partmap.DeadlineCounts
	err := d.read(func(sv *serving) error {
		now := d.now()
		all, err := d.engine.Due(ctx, sv.cur.Generation, 0, partmap.Partition(sv.cur.Partitions), math.MaxInt64, math.MaxInt, nil)
		if err != nil {
			return err
		}
		ended := map[string]bool{}
		for _, e := range all {
			if e.Profile && e.Deadline <= now {
				ended[e.Email] = true
			}
		}
		c = partmap.DeadlineCounts{}
		for _, e := range all {
			switch {
			case ended[e.Email]:
			case e.Profile:
				c.Ending++
			default:
				c.FieldExpiry++
			}
		}
		return nil
	})
	return c, err
}

// dueProfiles counts, per partition of gen, the profiles that have ended
// (their deadline, or their last field's, has passed) but which the
// sweeper has not deleted yet: their partition's stored count still holds
// them.
func (d *Directory) dueProfiles(ctx context.Context, gen int, partitions int, now int64) (map[partmap.Partition]int64, error) {
	due, err := d.engine.Due(ctx, gen, 0, partmap.Partition(partitions), now+1, int(^uint(0)>>1), nil)
	if err != nil {
		return nil, err
	}
	var out map[partmap.Partition]int64
	for _, e := range due {
		if e.Profile {
			if out == nil {
				out = map[partmap.Partition]int64{}
			}
			out[e.Partition]++
		}
	}
	return out, nil
}
