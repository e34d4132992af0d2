package directory

import (
	"context"
	"slices"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// deleteAllPage is how many profiles one commit of DeleteAllProfiles
// deletes: it reads them, and writes their deletions, index changes and
// events, at once.
const deleteAllPage = 1000

// DeleteAllProfiles deletes every profile (partmap.Emptier) under the
// whole-map lock, which a resize takes too: a partition at a time, a page
// of its profiles per commit. During a resize each deletion goes to both
// generations, as any write does, so the next one empties with the
// current one.
func (d *Directory) DeleteAllProfiles(ctx context.Context) (int64, error) {
	if err := d.checkStarted(ctx); err != nil {
		return 0, err
	}
	var total int64
	for {
		sv := d.acquire()
		n, err := d.deleteAll(ctx, sv)
		sv.release()
		total += n
		if err != engine.ErrStale {
			return total, d.explainConflict(err)
		}
		if err := d.reload(sv); err != nil {
			return total, err
		}
	}
}

// deleteAll deletes every profile of sv's current generation, holding the
// whole map.
func (d *Directory) deleteAll(ctx context.Context, sv *serving) (deleted int64, err error) {
	// An operator's lock would only be waited for in vain.
	meta, err := d.readMeta(ctx)
	if err != nil {
		return 0, err
	}
	if meta.WholeMap.held() {
		return 0, wholeMapHeld(meta.WholeMap)
	}
	hold, err := d.holdAll(ctx, sv)
	if err != nil {
		return 0, err
	}
	defer func() {
		// A lock lost meanwhile (a Redis failover) let a writer in.
		if rerr := hold.Release(); err == nil {
			err = rerr
		}
	}()
	counts, err := d.engine.Counts(ctx, sv.cur.Generation, 0, partmap.Partition(sv.cur.Partitions))
	if err != nil {
		return 0, err
	}
	for _, c := range counts {
		part := engine.Part{Generation: sv.cur.Generation, Partition: c.Partition}
		after := ""
		for {
			items, err := d.engine.Scan(ctx, engine.Query{Generation: part.Generation,
				After: &engine.Position{Partition: part.Partition, Email: after}, End: part.Partition + 1, Limit: deleteAllPage})
			if err != nil {
				return deleted, err
			}
			if len(items) == 0 {
				break
			}
			n, err := d.deletePage(ctx, sv, hold, items)
			deleted += n
			if err != nil {
				return deleted, err
			}
			if len(items) < deleteAllPage {
				break
			}
			after = items[len(items)-1].Email
		}
	}
	return deleted, nil
}

// deletePage deletes the profiles of items, of one partition, in one
// commit under hold, and counts the live ones.
func (d *Directory) deletePage(ctx context.Context, sv *serving, hold engine.Lease, items []engine.Item) (int64, error) {
	sts := make([]staged, len(items))
	byPart := map[engine.Part][]string{} // the records each partition reads, mirrors included
	var parts []engine.Part
	for i, it := range items {
		sts[i] = sv.staged(it.Email)
		for _, p := range sts[i].parts() {
			if _, ok := byPart[p]; !ok {
				parts = append(parts, p)
			}
			byPart[p] = append(byPart[p], it.Email)
		}
	}
	slices.SortFunc(parts, engine.Part.Compare)
	var deleted int64
	err := d.engine.InvokeHeld(engine.Bulk(ctx), hold, sv.invocation(parts...), func(tx *engine.Tx) error {
		if d.serving.Load() != sv {
			return engine.ErrStale
		}
		for p, emails := range byPart {
			if err := tx.Prefetch(p, emails); err != nil {
				return err
			}
		}
		deleted = 0
		now := d.now()
		for _, st := range sts {
			st.tx = tx
			rec, ok, err := tx.Get(st.p, st.email)
			if err != nil || !ok {
				return err
			}
			change := partmap.OpExpired
			if _, alive := rec.Live(now); alive {
				change = partmap.OpDelete
				deleted++
			}
			if err := st.Delete(change); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}
