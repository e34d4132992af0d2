package directory

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// bulkParallelism is how many invocations of a bulk write run at once:
// enough to keep the cores busy while some wait for locks, few enough not
// to crowd out other requests.
const bulkParallelism = 16

var errNotWritten = partmap.Errorf(partmap.EINTERNAL, "bulk write: profile left unwritten")

func (d *Directory) UpsertProfiles(ctx context.Context, profiles []partmap.Profile) ([]partmap.BulkResult, error) {
	return d.upsertBulk(ctx, profiles, nil)
}

func (d *Directory) UpsertRecords(ctx context.Context, records []partmap.Record) ([]partmap.BulkResult, error) {
	profiles := make([]partmap.Profile, len(records))
	deadlines := make([]partmap.Deadlines, len(records))
	for i, r := range records {
		profiles[i], deadlines[i] = r.Profile, r.Deadlines
	}
	return d.upsertBulk(ctx, profiles, deadlines)
}

// upsertBulk writes profiles with deadlines, one per profile, or none
// when deadlines is nil.
func (d *Directory) upsertBulk(ctx context.Context, profiles []partmap.Profile, deadlines []partmap.Deadlines) ([]partmap.BulkResult, error) {
	if len(profiles) > partmap.MaxBulkProfiles {
		return nil, partmap.Errorf(partmap.ETOOLARGE, "%d profiles in one call; the limit is %d", len(profiles), partmap.MaxBulkProfiles)
	}
	if err := d.checkStarted(ctx); err != nil {
		return nil, err
	}
	results := make([]partmap.BulkResult, len(profiles))
	canonical := make([]partmap.Profile, len(profiles))
	// Each canonical email is read from its profile once, while the
	// profile is in the processor's cache: the groups below would look it
	// up four times, each a miss in memory in an import of many profiles.
	emails := make([]string, len(profiles))
	todo := make([]int, 0, len(profiles))
	for i, p := range profiles {
		c, err := d.prepare(p)
		if err == nil && deadlines != nil {
			err = deadlines[i].Check(c)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		canonical[i], emails[i] = c, c.Email()
		todo = append(todo, i)
	}
	// Every path below records each profile's outcome; should one ever
	// miss, the profile must not read as written.
	for _, i := range todo {
		results[i].Err = errNotWritten
	}
	// Groups planned on a layout that a resize then swapped run again on
	// the new one.
	for len(todo) > 0 {
		var sv *serving
		todo, sv = d.upsertGroups(ctx, canonical, emails, deadlines, todo, results)
		if len(todo) > 0 {
			if err := d.reload(sv); err != nil {
				for _, i := range todo {
					results[i] = partmap.BulkResult{Err: err}
				}
				break
			}
		}
	}
	return results, nil
}

// upsertGroups commits todo's profiles, d.bulkSize partitions per
// invocation, and returns those to run again.
func (d *Directory) upsertGroups(ctx context.Context, canonical []partmap.Profile, emails []string, deadlines []partmap.Deadlines, todo []int, results []partmap.BulkResult) ([]int, *serving) {
	sv := d.acquire()
	defer sv.release()
	groups := map[partmap.Partition][]int{} // partition → indexes, in order
	for _, i := range todo {
		p := sv.part(emails[i]).Partition
		groups[p] = append(groups[p], i)
	}
	parts := slices.Sorted(maps.Keys(groups))
	var mu sync.Mutex
	var again []int
	// Invocations do not wait for their fsyncs, which would hold their
	// slots idle; they wait together below, before anything is
	// acknowledged.
	type pending struct {
		durable func() error
		idx     []int
	}
	var unsynced []pending
	// commit upserts the profiles of some partitions in one invocation. It
	// returns a lock conflict over several partitions for its caller to
	// try them one by one, and records every other outcome.
	commit := func(chunk []partmap.Partition) error {
		var parts []engine.Part
		var idx []int
		var records []string
		for _, p := range chunk {
			parts = append(parts, engine.Part{Generation: sv.cur.Generation, Partition: p})
			for _, i := range groups[p] {
				idx = append(idx, i)
				records = append(records, emails[i])
				if q, ok := sv.mirror(emails[i]); ok {
					parts = append(parts, q)
				}
			}
		}
		inv := sv.invocation(parts...)
		inv.Records = records
		durable, err := d.engine.InvokeVisible(engine.Bulk(ctx), inv, func(tx *engine.Tx) error {
			if d.serving.Load() != sv {
				return engine.ErrStale
			}
			now := d.now()
			for _, p := range chunk {
				if err := upsertGroup(tx, sv, p, groups[p], canonical, emails, deadlines, results, now); err != nil {
					return err
				}
			}
			return nil
		})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			unsynced = append(unsynced, pending{durable, idx})
		case err == engine.ErrStale:
			again = append(again, idx...)
		case len(chunk) > 1 && errors.Is(err, partmap.ErrLockConflict):
			return err
		default:
			for _, i := range idx {
				results[i] = partmap.BulkResult{Err: d.explainConflict(err)}
			}
		}
		return nil
	}
	sem := make(chan struct{}, bulkParallelism)
	var wg sync.WaitGroup
	for chunk := range slices.Chunk(parts, d.bulkSize) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if commit(chunk) != nil {
				// One busy partition must not fail its neighbours.
				for _, p := range chunk {
					commit([]partmap.Partition{p})
				}
			}
		})
	}
	wg.Wait()
	for _, u := range unsynced {
		if err := u.durable(); err != nil {
			for _, i := range u.idx {
				results[i] = partmap.BulkResult{Err: err}
			}
		}
	}
	return again, sv
}

// upsertGroup upserts the profiles idx of partition p, in order, each with
// its deadlines if there are any.
func upsertGroup(tx *engine.Tx, sv *serving, p partmap.Partition, idx []int, canonical []partmap.Profile, emails []string, deadlines []partmap.Deadlines, results []partmap.BulkResult, now int64) error {
	part := engine.Part{Generation: sv.cur.Generation, Partition: p}
	group := make([]string, len(idx))
	for k, i := range idx {
		group[k] = emails[i]
	}
	if err := tx.Prefetch(part, group); err != nil {
		return err
	}
	for k, i := range idx {
		cur, exists, err := tx.Get(part, group[k])
		if err != nil {
			return err
		}
		// An expired profile is no profile: the upsert creates one.
		exists = exists && live(&cur, now) != nil
		rec := partmap.Record{Profile: canonical[i], Version: nextVersion(cur.Version)}
		if deadlines != nil {
			rec.Deadlines = deadlines[i]
		}
		st := sv.staged(group[k])
		st.tx = tx
		if err := st.Put(rec, partmap.OpPut); err != nil {
			return err
		}
		results[i] = partmap.BulkResult{Record: rec, Created: !exists}
	}
	return nil
}
