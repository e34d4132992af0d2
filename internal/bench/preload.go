package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/partmap/partmap"
)

// preload stores the profiles of keys through the store's bulk path. It
// sends them in partition order, so that each bulk call touches few
// partitions: a store that rewrites whole partitions (the bucket baseline)
// then writes each one once, not once per call. progress gets the number
// of profiles stored so far.
func preload(ctx context.Context, s partmap.Store, keys keySet, progress func(done int)) error {
	// Indexes by partition: 4 bytes per profile, not a million strings.
	byPartition := make([][]uint32, partmap.DefaultPartitions)
	for i := range keys.N {
		p := partmap.PartitionOf(email(i), partmap.DefaultPartitions)
		byPartition[p] = append(byPartition[p], uint32(i))
	}
	chunks := make(chan []partmap.Profile)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range 4 {
		wg.Go(func() {
			for chunk := range chunks {
				err := upsertAll(ctx, s, chunk)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				mu.Lock()
				done += len(chunk)
				if progress != nil {
					progress(done)
				}
				mu.Unlock()
			}
		})
	}
	var chunk []partmap.Profile
	send := func() bool {
		select {
		case chunks <- chunk:
			chunk = nil
			return true
		case err := <-errs:
			errs <- err
			return false
		}
	}
	for i, e := range keys.Hot {
		chunk = append(chunk, profile(e, i))
	}
	ok := true
	for _, idx := range byPartition {
		for _, i := range idx {
			chunk = append(chunk, profile(email(int(i)), int(i)))
			if len(chunk) == partmap.MaxBulkProfiles {
				if ok = send(); !ok {
					break
				}
			}
		}
		if !ok {
			break
		}
	}
	if ok && len(chunk) > 0 {
		send()
	}
	close(chunks)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// upsertAll stores a chunk, sending again the profiles whose partition was
// locked by another chunk's group (neighbouring chunks can share one).
func upsertAll(ctx context.Context, s partmap.Store, chunk []partmap.Profile) error {
	for len(chunk) > 0 {
		res, err := s.UpsertProfiles(ctx, chunk)
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		var again []partmap.Profile
		for i, r := range res {
			switch {
			case errors.Is(r.Err, partmap.ErrLockConflict):
				again = append(again, chunk[i])
			case r.Err != nil:
				return fmt.Errorf("preload: %w", r.Err)
			}
		}
		chunk = again
	}
	return nil
}
