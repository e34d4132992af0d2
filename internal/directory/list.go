package directory

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// cursorMACBytes is the length of a cursor's authenticator: enough that a
// forged cursor is refused, short enough to keep cursors compact.
const cursorMACBytes = 16

func (d *Directory) ListProfiles(ctx context.Context, opts partmap.ListOptions) (partmap.Page, error) {
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = partmap.DefaultPageLimit
	case limit < 0 || limit > partmap.MaxPageLimit:
		return partmap.Page{}, partmap.Errorf(partmap.EINVALID, "limit must be between 1 and %d, not %d", partmap.MaxPageLimit, limit)
	}
	if err := d.checkStarted(ctx); err != nil {
		return partmap.Page{}, err
	}
	where, err := d.indexMatches(opts.Where)
	if err != nil {
		return partmap.Page{}, err
	}
	key := d.cursors
	var items []engine.Item
	var scope []byte
	err = d.read(func(sv *serving) error {
		// A cursor is bound to its layout generation too: positions mean
		// nothing in another partition count.
		scope = searchScope(where)
		if sv.cur.Generation > 0 {
			scope = fmt.Appendf(scope, "version=%d;", sv.cur.Generation)
		}
		q := engine.Query{Generation: sv.cur.Generation, End: partmap.Partition(sv.cur.Partitions), Where: where}
		if opts.Cursor != "" {
			pos, err := decodeCursor(key, opts.Cursor, sv.cur.Partitions, scope)
			if err != nil {
				return err
			}
			q.After = &pos
		}
		// One more than asked tells whether another page follows.
		q.Limit = limit + 1
		var err error
		items, err = d.find(ctx, q)
		return err
	})
	if err != nil {
		return partmap.Page{}, err
	}
	var page partmap.Page
	if len(items) > limit {
		items = items[:limit]
		page.NextCursor = encodeCursor(key, items[limit-1].Position, scope)
	}
	page.Profiles = make([]partmap.Record, len(items))
	for i, it := range items {
		page.Profiles[i] = it.Record
	}
	return page, nil
}

// find runs q on the backend. A search's answers are checked against its
// conditions again, since a profile may change between its index entries
// and its record being read, and the page is refilled after those left out.
func (d *Directory) find(ctx context.Context, q engine.Query) ([]engine.Item, error) {
	var out []engine.Item
	want := q.Limit
	now := d.now()
	for {
		items, err := d.engine.Scan(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			rec := live(&it.Record, now) // expired fields and profiles are gone
			if rec != nil && matches(d.indexes, rec.Profile, q.Where) {
				out = append(out, engine.Item{Position: it.Position, Record: *rec})
			}
		}
		if len(items) < q.Limit || len(out) == want {
			return out, nil
		}
		q.After, q.Limit = &items[len(items)-1].Position, want-len(out)
	}
}

func (d *Directory) ListPartitions(ctx context.Context) (partmap.PartitionStats, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.PartitionStats{}, err
	}
	var counts []partmap.PartitionCount
	var n int
	err := d.read(func(sv *serving) error {
		var err error
		n = sv.cur.Partitions
		now := d.now()
		counts, err = d.liveCounts(ctx, sv.cur.Generation, n, now)
		return err
	})
	if err != nil {
		return partmap.PartitionStats{}, err
	}
	stats := partmap.PartitionStats{Partitions: counts, TotalPartitions: n, Indexes: d.Indexes()}
	for _, c := range counts {
		stats.TotalProfiles += c.Profiles
	}
	return stats, nil
}

// liveCounts returns the profile count of each partition of generation
// gen that holds a live profile, each less the profiles due at now and not
// yet swept. The counts and the expiry entries are two reads, so the
// entries are read before and after the counts: with now fixed, what is
// due only shrinks (a sweep deletes a profile, a write revives one; no
// write makes a profile due at a past instant), so a partition whose due
// profiles read alike on both sides did not change between, and its count
// less them is what it held live when the count was read, whatever else
// was written. When every partition holds still the counts are of one
// read (one instant on Pebble); otherwise each partition takes its count
// from the latest read it held still around, up to four reads. A sweep
// commits once in a partition, which upsets it for one read only; a
// partition that moves around all four takes the last, and may then count
// the profiles reclaimed in it after its count was read (DESIGN.md,
// Expiry).
func (d *Directory) liveCounts(ctx context.Context, gen, n int, now int64) ([]partmap.PartitionCount, error) {
	due, err := d.dueProfiles(ctx, gen, n, now)
	if err != nil {
		return nil, err
	}
	live := map[partmap.Partition]int64{} // of the partitions that held still around a read
	for try := 0; ; try++ {
		counts, err := d.engine.Counts(ctx, gen, 0, partmap.Partition(n))
		if err != nil {
			return nil, err
		}
		again, err := d.dueProfiles(ctx, gen, n, now)
		if err != nil {
			return nil, err
		}
		if maps.Equal(again, due) {
			return lessDue(counts, again), nil
		}
		// This read's count of every partition it or the entries name, or
		// that held still before: 0 where it names none.
		read := map[partmap.Partition]int64{}
		for _, c := range counts {
			read[c.Partition] = c.Profiles
		}
		for _, named := range []map[partmap.Partition]int64{live, due, again} {
			for p := range named {
				if _, ok := read[p]; !ok {
					read[p] = 0
				}
			}
		}
		for p, c := range read {
			_, held := live[p]
			switch {
			case due[p] == again[p]:
				live[p] = c - again[p]
			case try == 3 && !held:
				live[p] = c - again[p] // never still: the caveat
			}
		}
		if due = again; try == 3 {
			break
		}
	}
	out := make([]partmap.PartitionCount, 0, len(live))
	for p, c := range live {
		if c > 0 {
			out = append(out, partmap.PartitionCount{Partition: p, Profiles: c})
		}
	}
	slices.SortFunc(out, func(a, b partmap.PartitionCount) int { return cmp.Compare(a.Partition, b.Partition) })
	return out, nil
}

// lessDue returns counts, in place, each less its partition's due
// profiles, without the partitions left with none.
func lessDue(counts []partmap.PartitionCount, due map[partmap.Partition]int64) []partmap.PartitionCount {
	kept := counts[:0]
	for _, c := range counts {
		if c.Profiles -= due[c.Partition]; c.Profiles > 0 {
			kept = append(kept, c)
		}
	}
	return kept
}

// A cursor is the last position of a page, authenticated with the
// directory's secret, so that a cursor cannot be forged or corrupted into a
// page the directory never served.
//
// A search's cursor is also bound to its conditions (scope), so that it
// cannot continue another search or a plain listing.
func encodeCursor(key []byte, pos engine.Position, scope []byte) string {
	b := binary.BigEndian.AppendUint32(nil, uint32(pos.Partition))
	b = append(b, pos.Email...)
	b = append(b, cursorMAC(key, b, scope)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(key []byte, cursor string, partitions int, scope []byte) (engine.Position, error) {
	bad := partmap.Errorf(partmap.EINVALID, "cursor is not one this directory issued; start again without a cursor")
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	// One spelling per cursor: the decoder would also take line breaks and
	// stray low bits in the last character.
	if err != nil || len(b) < 4+cursorMACBytes || base64.RawURLEncoding.EncodeToString(b) != cursor {
		return engine.Position{}, bad
	}
	body, mac := b[:len(b)-cursorMACBytes], b[len(b)-cursorMACBytes:]
	if !hmac.Equal(mac, cursorMAC(key, body, scope)) {
		return engine.Position{}, bad
	}
	pos := engine.Position{Partition: partmap.Partition(binary.BigEndian.Uint32(body)), Email: string(body[4:])}
	if int(pos.Partition) >= partitions {
		return engine.Position{}, bad // issued before a resize
	}
	return pos, nil
}

func cursorMAC(key, body, scope []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("partmap cursor v1\x00"))
	m.Write(body)
	if len(scope) > 0 {
		// After the body, whose length the cursor fixes: no ambiguity.
		m.Write([]byte("\x00search\x00"))
		m.Write(scope)
	}
	return m.Sum(nil)[:cursorMACBytes]
}

// exportPage is how many profiles an export reads from its snapshot at a time.
const exportPage = 1000

func (d *Directory) ExportProfiles(ctx context.Context, fn func(partmap.Record) error) (err error) {
	if err := d.checkStarted(ctx); err != nil {
		return err
	}
	// The serving stays in use until the export ends, so that a resize
	// finishing meanwhile keeps the generation it reads.
	sv := d.acquire()
	defer sv.release()
	snap, err := d.engine.Snapshot(ctx, sv.cur)
	if err != nil {
		return err
	}
	now := d.now()
	defer func() {
		// A snapshot that did not stay frozen fails the export.
		if cerr := snap.Close(); err == nil {
			err = cerr
		}
		if err == engine.ErrStale {
			err = partmap.Errorf(partmap.EUNAVAILABLE, "a resize finished on another server during the export; export again")
		}
	}()
	q := engine.Query{Generation: sv.cur.Generation, End: partmap.Partition(sv.cur.Partitions), Limit: exportPage}
	for {
		items, err := snap.Scan(ctx, q)
		if err != nil {
			return err
		}
		for _, it := range items {
			rec := live(&it.Record, now)
			if rec == nil {
				continue // expired before the snapshot's instant
			}
			rec.Version = 0
			if err := fn(*rec); err != nil {
				return err
			}
		}
		if len(items) < exportPage {
			return nil
		}
		q.After = &items[len(items)-1].Position
	}
}
