package directory

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// batchReadParallelism is how many partitions of one batch lookup are read
// at once, so that a thousand partitions are not a thousand round trips in
// a row: on Redis, reads in flight together share pipelines (redis/batch.go).
// It is bulkParallelism's figure, not one measured for reads.
const batchReadParallelism = bulkParallelism

func (d *Directory) FindProfiles(ctx context.Context, emails []string) ([]*partmap.Record, error) {
	canonical, err := partmap.CanonicalEmails(emails)
	if err != nil {
		return nil, err
	}
	if err := d.checkStarted(ctx); err != nil {
		return nil, err
	}
	var out []*partmap.Record
	err = d.read(func(sv *serving) error {
		var rerr error
		out, rerr = d.readBatch(ctx, sv, canonical)
		return rerr
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *Directory) ProjectProfiles(ctx context.Context, emails []string, fields []string) ([]*partmap.Projection, error) {
	if err := partmap.CheckBatchFields(fields); err != nil {
		return nil, err
	}
	recs, err := d.FindProfiles(ctx, emails)
	if err != nil {
		return nil, err
	}
	out := make([]*partmap.Projection, len(recs))
	for i, rec := range recs {
		if rec != nil {
			p := project(*rec, fields)
			out[i] = &p
		}
	}
	return out, nil
}

// readBatch reads the records of canonical emails in sv's current
// generation: all of them from one view where the backend has one
// (engine.ViewReader), else the emails of one partition with one engine
// read; each email once however often it was asked for. It locks nothing,
// as a single lookup locks nothing; d.read runs it again should a resize
// switch layouts meanwhile.
func (d *Directory) readBatch(ctx context.Context, sv *serving, emails []string) ([]*partmap.Record, error) {
	type group struct {
		emails []string         // distinct, in the order first asked
		at     map[string][]int // each email's positions in the answer
	}
	groups := map[partmap.Partition]*group{}
	for i, e := range emails {
		p := sv.part(e).Partition
		g := groups[p]
		if g == nil {
			g = &group{at: map[string][]int{}}
			groups[p] = g
		}
		if _, seen := g.at[e]; !seen {
			g.emails = append(g.emails, e)
		}
		g.at[e] = append(g.at[e], i)
	}
	out := make([]*partmap.Record, len(emails))
	read := func(ctx context.Context, p partmap.Partition) error {
		g := groups[p]
		recs, err := d.engine.ReadRecords(ctx, engine.Part{Generation: sv.cur.Generation, Partition: p}, g.emails)
		if err != nil {
			return err
		}
		now := d.now()
		for k, e := range g.emails {
			rec := live(recs[k], now)
			for _, i := range g.at[e] {
				out[i] = rec // each group writes only its own positions
			}
		}
		return nil
	}
	parts := slices.Sorted(maps.Keys(groups))
	if len(parts) == 1 {
		return out, read(ctx, parts[0]) // no goroutine for the common small case
	}
	// A backend that reads every partition from one view (Pebble) answers
	// the whole batch at one instant, in one call.
	reads := make([]engine.Read, len(parts))
	for i, p := range parts {
		reads[i] = engine.Read{Partition: p, Emails: groups[p].emails}
	}
	if recs, ok, err := d.engine.ReadView(ctx, sv.cur.Generation, reads); ok {
		if err != nil {
			return nil, err
		}
		now := d.now()
		for i, p := range parts {
			g := groups[p]
			for k, e := range g.emails {
				rec := live(recs[i][k], now)
				for _, at := range g.at[e] {
					out[at] = rec
				}
			}
		}
		return out, nil
	}
	// The first failure stops the reads that have not started: nothing is
	// partially answered anyway.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, batchReadParallelism)
	for _, p := range parts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := read(ctx, p); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err() // the caller's context ended
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}
