package directory

import (
	"context"
	"sync"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// bulkParallelism is how many partition groups commit at once: enough for
// their fsyncs to be shared, few enough not to crowd out other requests.
const bulkParallelism = 16

func (d *Directory) UpsertProfiles(ctx context.Context, profiles []partmap.Profile) ([]partmap.BulkResult, error) {
	if len(profiles) > partmap.MaxBulkProfiles {
		return nil, partmap.Errorf(partmap.ETOOLARGE, "%d profiles in one call; the limit is %d", len(profiles), partmap.MaxBulkProfiles)
	}
	if err := d.checkStarted(ctx); err != nil {
		return nil, err
	}
	results := make([]partmap.BulkResult, len(profiles))
	canonical := make([]partmap.Profile, len(profiles))
	var todo []int
	for i, p := range profiles {
		c, err := d.prepare(p)
		if err != nil {
			results[i].Err = err
			continue
		}
		canonical[i] = c
		todo = append(todo, i)
	}
	// Groups planned on a layout that a resize then swapped run again on
	// the new one.
	for len(todo) > 0 {
		var L *layout
		todo, L = d.upsertGroups(ctx, canonical, todo, results)
		if len(todo) > 0 {
			if err := d.reload(L); err != nil {
				for _, i := range todo {
					results[i] = partmap.BulkResult{Err: err}
				}
				break
			}
		}
	}
	return results, nil
}

// upsertGroups commits todo's profiles one partition group at a time and
// returns those to run again.
func (d *Directory) upsertGroups(ctx context.Context, canonical []partmap.Profile, todo []int, results []partmap.BulkResult) ([]int, *layout) {
	L := d.acquire()
	defer L.release()
	groups := map[partmap.Partition][]int{} // partition → indexes, in order
	for _, i := range todo {
		p := L.partition(canonical[i].Email())
		groups[p] = append(groups[p], i)
	}
	sem := make(chan struct{}, bulkParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var again []int
	// Groups do not wait for their fsyncs, which would hold their slots
	// idle; they wait together below, before anything is acknowledged.
	type pending struct {
		durable func() error
		idx     []int
	}
	var unsynced []pending
	for part, idx := range groups {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			inv := lockOne(part)
			for _, i := range idx {
				if q, ok := L.mirror(canonical[i].Email()); ok {
					inv.Load, inv.Lock = append(inv.Load, q), append(inv.Lock, q)
				}
			}
			durable, err := L.engine.InvokeVisible(ctx, inv, func(tx *engine.Tx) error {
				if d.layout.Load() != L {
					return ErrStale
				}
				emails := make([]string, len(idx))
				for k, i := range idx {
					emails[k] = canonical[i].Email()
				}
				if err := tx.Prefetch(part, emails); err != nil {
					return err
				}
				for _, i := range idx {
					email := canonical[i].Email()
					cur, exists, err := tx.Get(part, email)
					if err != nil {
						return err
					}
					rec := partmap.Record{Profile: canonical[i], Version: nextVersion(cur.Version)}
					st := staged{tx: tx, p: part, email: email}
					st.q, st.mirror = L.mirror(email)
					if err := st.Put(rec); err != nil {
						return err
					}
					results[i] = partmap.BulkResult{Record: rec, Created: !exists}
				}
				return nil
			})
			switch {
			case err == nil:
				mu.Lock()
				unsynced = append(unsynced, pending{durable, idx})
				mu.Unlock()
			case err == ErrStale:
				mu.Lock()
				again = append(again, idx...)
				mu.Unlock()
			case err != nil:
				for _, i := range idx {
					results[i] = partmap.BulkResult{Err: err}
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
	return again, L
}
