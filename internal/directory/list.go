package directory

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/partmap/partmap"
)

// Position is a place in enumeration order: partition, then canonical email.
type Position struct {
	Partition partmap.Partition
	Email     string
}

// Item is one profile found by a scan.
type Item struct {
	Position
	Record partmap.Record
}

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
	key, err := d.cursorKey(ctx)
	if err != nil {
		return partmap.Page{}, err
	}
	var items []Item
	var scope []byte
	err = d.read(func(L *layout) error {
		// A cursor is bound to its layout version too: positions mean
		// nothing in another partition count.
		scope = searchScope(where)
		if L.cur.Version > 0 {
			scope = fmt.Appendf(scope, "version=%d;", L.cur.Version)
		}
		var after *Position
		if opts.Cursor != "" {
			pos, err := decodeCursor(key, opts.Cursor, L.cur.Partitions, scope)
			if err != nil {
				return err
			}
			after = &pos
		}
		// One more than asked tells whether another page follows.
		var err error
		if len(where) == 0 {
			items, err = L.backend.Scan(ctx, after, partmap.Partition(L.cur.Partitions), limit+1)
		} else {
			items, err = L.backend.Search(ctx, where, after, limit+1)
		}
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

func (d *Directory) ListPartitions(ctx context.Context) (partmap.PartitionStats, error) {
	if err := d.checkStarted(ctx); err != nil {
		return partmap.PartitionStats{}, err
	}
	var counts []partmap.PartitionCount
	var n int
	err := d.read(func(L *layout) error {
		var err error
		counts, err = L.backend.Counts(ctx)
		n = L.cur.Partitions
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

func (d *Directory) cursorKey(ctx context.Context) ([]byte, error) {
	if k := d.cursorSecret.Load(); k != nil {
		return *k, nil
	}
	meta, err := d.backend().Meta(ctx)
	if err != nil {
		return nil, err
	}
	if len(meta.CursorKey) == 0 {
		return nil, fmt.Errorf("directory metadata has no cursor key")
	}
	d.cursorSecret.Store(&meta.CursorKey)
	return meta.CursorKey, nil
}

// A cursor is the last position of a page, authenticated with the
// directory's secret, so that a cursor cannot be forged or corrupted into a
// page the directory never served.
//
// A search's cursor is also bound to its conditions (scope), so that it
// cannot continue another search or a plain listing.
func encodeCursor(key []byte, pos Position, scope []byte) string {
	b := binary.BigEndian.AppendUint32(nil, uint32(pos.Partition))
	b = append(b, pos.Email...)
	b = append(b, cursorMAC(key, b, scope)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(key []byte, cursor string, partitions int, scope []byte) (Position, error) {
	bad := partmap.Errorf(partmap.EINVALID, "cursor is not one this directory issued; start again without a cursor")
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	// One spelling per cursor: the decoder would also take line breaks and
	// stray low bits in the last character.
	if err != nil || len(b) < 4+cursorMACBytes || base64.RawURLEncoding.EncodeToString(b) != cursor {
		return Position{}, bad
	}
	body, mac := b[:len(b)-cursorMACBytes], b[len(b)-cursorMACBytes:]
	if !hmac.Equal(mac, cursorMAC(key, body, scope)) {
		return Position{}, bad
	}
	pos := Position{Partition: partmap.Partition(binary.BigEndian.Uint32(body)), Email: string(body[4:])}
	if int(pos.Partition) >= partitions {
		return Position{}, bad // issued before a resize
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
	// The layout stays in use until the export ends, so that a resize
	// finishing meanwhile keeps the version it reads.
	L := d.acquire()
	defer L.release()
	snap, err := L.backend.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// A snapshot that did not stay frozen fails the export.
		if cerr := snap.Close(); err == nil {
			err = cerr
		}
		if err == ErrStale {
			err = partmap.Errorf(partmap.EUNAVAILABLE, "a resize finished on another server during the export; export again")
		}
	}()
	var after *Position
	for {
		items, err := snap.Scan(ctx, after, partmap.Partition(L.cur.Partitions), exportPage)
		if err != nil {
			return err
		}
		for _, it := range items {
			it.Record.Version = 0
			if err := fn(it.Record); err != nil {
				return err
			}
		}
		if len(items) < exportPage {
			return nil
		}
		after = &items[len(items)-1].Position
	}
}
