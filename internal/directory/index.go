package directory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// matches reports whether p holds every condition's value (fields are
// positions in the index list).
func matches(fields []string, p partmap.Profile, where []engine.IndexMatch) bool {
	for _, m := range where {
		if v, ok := p[fields[m.Field]]; !ok || v != m.Value {
			return false
		}
	}
	return true
}

// indexMatches turns search conditions into positions in the index list,
// refusing fields that are not indexed and fields named twice.
func (d *Directory) indexMatches(where []partmap.Match) ([]engine.IndexMatch, error) {
	out := make([]engine.IndexMatch, 0, len(where))
	for i, m := range where {
		// A value no profile could hold is a mistake, not an empty result.
		if err := d.limits.CheckField(m.Field, m.Value); err != nil {
			return nil, err
		}
		pos := slices.Index(d.indexes, m.Field)
		switch {
		case pos < 0 && len(d.indexes) == 0:
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: m.Field, Message: fmt.Sprintf("cannot search by %q: this directory indexes no field", m.Field)}
		case pos < 0:
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: m.Field, Message: fmt.Sprintf("cannot search by %q: it is not indexed; the indexed fields are %s",
				m.Field, strings.Join(d.indexes, ", "))}
		case slices.ContainsFunc(where[:i], func(o partmap.Match) bool { return o.Field == m.Field }):
			return nil, &partmap.Error{Code: partmap.EINVALID, Field: m.Field, Message: fmt.Sprintf("%q is named twice; a field holds one value", m.Field)}
		}
		out = append(out, engine.IndexMatch{Field: pos, Value: m.Value})
	}
	// One order per set of conditions, so that a cursor is bound to the
	// search, not to how its conditions were spelt.
	slices.SortFunc(out, func(a, b engine.IndexMatch) int { return a.Field - b.Field })
	return out, nil
}

// searchScope is what a search cursor is bound to.
func searchScope(where []engine.IndexMatch) []byte {
	var b []byte
	for _, m := range where {
		b = fmt.Appendf(b, "%d=%d:%s;", m.Field, len(m.Value), m.Value)
	}
	return b
}

func (d *Directory) CheckPartition(ctx context.Context, p partmap.Partition) (check partmap.PartitionCheck, err error) {
	err = d.CheckPartitions(ctx, p, p+1, func(c partmap.PartitionCheck) error {
		check = c
		return nil
	})
	return check, err
}

func (d *Directory) CheckPartitions(ctx context.Context, first, end partmap.Partition, fn func(partmap.PartitionCheck) error) error {
	sv := d.acquire()
	defer sv.release()
	n := partmap.Partition(sv.cur.Partitions)
	if end == 0 {
		end = n
	}
	switch {
	case first >= n:
		return partmap.Errorf(partmap.EINVALID, "there is no %s in a map of %d partitions", first, n)
	case end > n || end <= first:
		return partmap.Errorf(partmap.EINVALID, "partitions %d up to %d are not a range of a map of %d partitions", first, end, n)
	}
	if err := d.checkStarted(ctx); err != nil {
		return err
	}
	for p := first; p < end; p++ {
		check, err := d.checkPartition(ctx, sv, p)
		switch {
		case err == engine.ErrStale && p == first:
			return partmap.Errorf(partmap.ELOCKCONFLICT, "a resize switched layouts during the check; check again")
		case err == engine.ErrStale:
			// What was checked is of a layout that is gone: retrying from
			// here would leave the new layout's first partitions out.
			return partmap.Errorf(partmap.ECONFLICT, "a resize switched layouts during the check, after %s; check again from the start", p-1)
		}
		if err != nil {
			return d.explainConflict(err)
		}
		if err := fn(check); err != nil {
			return err
		}
	}
	return nil
}

// checkPartition compares partition p of the current generation with its
// count and index entries. Under the partition's lock nothing changes while
// the three are read, so any disagreement is real drift, not a write in
// flight. (During a resize this checks the current generation, which
// serves reads.)
func (d *Directory) checkPartition(ctx context.Context, sv *serving, p partmap.Partition) (partmap.PartitionCheck, error) {
	check := partmap.PartitionCheck{Partition: p}
	part := engine.Part{Generation: sv.cur.Generation, Partition: p}
	err := d.engine.Invoke(ctx, sv.invocation(part), func(tx *engine.Tx) error {
		if d.serving.Load() != sv {
			return engine.ErrStale
		}
		items, err := tx.Scan(part)
		if err != nil {
			return err
		}
		want := map[engine.IndexEntry]bool{}
		set := d.searchSet()
		for _, it := range items {
			check.Profiles++
			for _, e := range engine.Entries(d.indexes, it.Email, &it.Record) {
				want[e] = true
			}
			for _, ix := range set.checked(part) {
				for _, e := range ix.entries(it.Email, &it.Record) {
					want[e] = true
				}
			}
		}
		if check.Counted, err = tx.Count(part); err != nil {
			return err
		}
		have, err := tx.IndexEntries(part)
		if err != nil {
			return err
		}
		cleaning := set.cleaning()
		have = slices.DeleteFunc(have, func(e engine.IndexEntry) bool { return cleaning[e.Field] })
		check.IndexEntries = int64(len(have))
		for _, e := range have {
			if want[e] {
				delete(want, e)
				continue
			}
			check.Drift = append(check.Drift, d.drift(e, false))
		}
		for e := range want {
			check.Drift = append(check.Drift, d.drift(e, true))
		}
		return nil
	})
	slices.SortFunc(check.Drift, func(a, b partmap.IndexDrift) int {
		return strings.Compare(a.Email+"\x00"+a.Field+"\x00"+a.Value, b.Email+"\x00"+b.Field+"\x00"+b.Value)
	})
	return check, err
}

func (d *Directory) drift(e engine.IndexEntry, missing bool) partmap.IndexDrift {
	field := fmt.Sprintf("#%d", e.Field) // an entry for a field the directory does not index
	switch {
	case e.Field >= 0 && e.Field < len(d.indexes):
		field = d.indexes[e.Field]
	case e.Field == engine.ExpiryField:
		field = "(expiry)"
	case e.Field >= engine.SearchFieldBase:
		if name := d.searchSet().slotName(e.Field); name != "" {
			field = name
		}
	}
	return partmap.IndexDrift{Email: e.Email, Field: field, Value: e.Value, Missing: missing}
}
