package directory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// IndexEntry is one secondary-index entry: Email's profile holds Value in
// the field at position Field of the directory's index list. Backends keep
// entries inside the partition of the profile, so that the commit that
// writes a profile also writes its entries, atomically, under the same lock.
type IndexEntry struct {
	Field int
	Value string
	Email string
}

// IndexMatch is one search condition, with its field as a position in the
// index list.
type IndexMatch struct {
	Field int
	Value string
}

// ChooseIndexes decides a directory's indexed fields. A new directory
// takes want, or partmap.DefaultIndexes when want is nil; an existing one
// keeps the fields it was created with, and refuses a want that differs,
// because its entries were built for those.
func ChooseIndexes(want []string, fresh bool, stored []string) ([]string, error) {
	if want != nil {
		if err := partmap.CheckIndexes(want); err != nil {
			return nil, err
		}
	}
	if fresh {
		if want == nil {
			return slices.Clone(partmap.DefaultIndexes), nil
		}
		return slices.Clone(want), nil
	}
	if want != nil && !slices.Equal(sortedCopy(want), sortedCopy(stored)) {
		return nil, fmt.Errorf("the directory indexes [%s], not [%s]; the indexed fields are chosen when a directory is created "+
			"(to change them, export and import into a new directory)", strings.Join(stored, ","), strings.Join(want, ","))
	}
	return stored, nil
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// IndexChanges returns the index entries a write removes and adds: only
// those of indexed fields whose value it changes.
func IndexChanges(fields []string, w engine.Write) (remove, add []IndexEntry) {
	for i, f := range fields {
		var before, after string
		var had, has bool
		if w.Previous != nil {
			before, had = w.Previous.Profile[f]
		}
		if w.Record != nil {
			after, has = w.Record.Profile[f]
		}
		if had == has && before == after {
			continue
		}
		if had {
			remove = append(remove, IndexEntry{Field: i, Value: before, Email: w.Email})
		}
		if has {
			add = append(add, IndexEntry{Field: i, Value: after, Email: w.Email})
		}
	}
	return remove, add
}

// Matches reports whether p holds every condition's value (fields are
// positions in the index list).
func Matches(fields []string, p partmap.Profile, where []IndexMatch) bool {
	for _, m := range where {
		if v, ok := p[fields[m.Field]]; !ok || v != m.Value {
			return false
		}
	}
	return true
}

// entriesOf are the index entries a stored profile should have.
func entriesOf(fields []string, email string, p partmap.Profile) []IndexEntry {
	var out []IndexEntry
	for i, f := range fields {
		if v, ok := p[f]; ok {
			out = append(out, IndexEntry{Field: i, Value: v, Email: email})
		}
	}
	return out
}

// indexMatches turns search conditions into positions in the index list,
// refusing fields that are not indexed and fields named twice.
func (d *Directory) indexMatches(where []partmap.Match) ([]IndexMatch, error) {
	out := make([]IndexMatch, 0, len(where))
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
		out = append(out, IndexMatch{Field: pos, Value: m.Value})
	}
	// One order per set of conditions, so that a cursor is bound to the
	// search, not to how its conditions were spelt.
	slices.SortFunc(out, func(a, b IndexMatch) int { return a.Field - b.Field })
	return out, nil
}

// searchScope is what a search cursor is bound to.
func searchScope(where []IndexMatch) []byte {
	var b []byte
	for _, m := range where {
		b = fmt.Appendf(b, "%d=%d:%s;", m.Field, len(m.Value), m.Value)
	}
	return b
}

// Indexes returns the directory's indexed fields.
func (d *Directory) Indexes() []string { return slices.Clone(d.indexes) }

func (d *Directory) CheckPartition(ctx context.Context, p partmap.Partition) (partmap.PartitionCheck, error) {
	L := d.acquire()
	defer L.release()
	if n := L.cur.Partitions; int(p) >= n {
		return partmap.PartitionCheck{}, partmap.Errorf(partmap.EINVALID, "there is no %s in a map of %d partitions", p, n)
	}
	if err := d.checkStarted(ctx); err != nil {
		return partmap.PartitionCheck{}, err
	}
	check := partmap.PartitionCheck{Partition: p}
	// Under the partition's lock nothing changes while the three are read,
	// so any disagreement is real drift, not a write in flight. (During a
	// resize this checks the current version, which serves reads.)
	err := L.engine.Invoke(ctx, lockOne(p), func(*engine.Tx) error {
		if d.layout.Load() != L {
			return ErrStale
		}
		want := map[IndexEntry]bool{}
		items, err := partitionItems(ctx, L.backend, p)
		if err != nil {
			return err
		}
		for _, it := range items {
			check.Profiles++
			for _, e := range entriesOf(d.indexes, it.Email, it.Record.Profile) {
				want[e] = true
			}
		}
		if check.Counted, err = L.backend.Count(ctx, p); err != nil {
			return err
		}
		have, err := L.backend.IndexEntries(ctx, p)
		if err != nil {
			return err
		}
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
	if err == ErrStale {
		err = partmap.Errorf(partmap.ELOCKCONFLICT, "a resize switched versions during the check; check again")
	}
	slices.SortFunc(check.Drift, func(a, b partmap.IndexDrift) int {
		return strings.Compare(a.Email+"\x00"+a.Field+"\x00"+a.Value, b.Email+"\x00"+b.Field+"\x00"+b.Value)
	})
	return check, err
}

func (d *Directory) drift(e IndexEntry, missing bool) partmap.IndexDrift {
	field := fmt.Sprintf("#%d", e.Field) // an entry for a field the directory does not index
	if e.Field >= 0 && e.Field < len(d.indexes) {
		field = d.indexes[e.Field]
	}
	return partmap.IndexDrift{Email: e.Email, Field: field, Value: e.Value, Missing: missing}
}
