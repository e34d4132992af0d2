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
	groups := map[partmap.Partition][]int{} // partition → indexes, in order
	canonical := make([]partmap.Profile, len(profiles))
	for i, p := range profiles {
		c, part, err := d.prepare(p)
		if err != nil {
			results[i].Err = err
			continue
		}
		canonical[i] = c
		groups[part] = append(groups[part], i)
	}
	sem := make(chan struct{}, bulkParallelism)
	var wg sync.WaitGroup
	for part, idx := range groups {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := d.engine.Invoke(ctx, lockOne(part), func(tx *engine.Tx) error {
				for _, i := range idx {
					email := canonical[i].Email()
					cur, exists, err := tx.Get(part, email)
					if err != nil {
						return err
					}
					rec := partmap.Record{Profile: canonical[i], Version: nextVersion(cur.Version)}
					if err := tx.Put(part, email, rec); err != nil {
						return err
					}
					results[i] = partmap.BulkResult{Record: rec, Created: !exists}
				}
				return nil
			})
			if err != nil {
				for _, i := range idx {
					results[i] = partmap.BulkResult{Err: err}
				}
			}
		})
	}
	wg.Wait()
	return results, nil
}
