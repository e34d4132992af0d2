package search

import (
	"bytes"
	"cmp"
	"strings"

	"github.com/partmap/partmap"
)

// SortKey returns a profile's key for SORTBY field: bytes whose order under
// bytes.Compare is the ascending order, so that an index can keep them.
// A NUMERIC value is EncodeNumber of ParseNumber's number; a TEXT or TAG
// value is folded to lower case and compared byte by byte (code point
// order), as Redis compares its normalised sortable strings. ok is false
// when the profile lacks the field, when a NUMERIC value is no number, and
// for a field the schema lacks.
func (s *Schema) SortKey(field string, profile map[string]string) (key []byte, ok bool) {
	f, declared := s.Field(field)
	v, present := profile[field]
	if !declared || !present {
		return nil, false
	}
	if f.Type == TypeNumeric {
		n, ok := ParseNumber(v)
		if !ok {
			return nil, false
		}
		return EncodeNumber(n), true
	}
	return []byte(strings.ToLower(v)), true
}

// Order returns the order of a query's results, as a comparison for
// slices.SortFunc. With sortBy "" it is by email (the profile's key)
// ascending: partmap computes no relevance score, so its order is not
// Redis's (which ranks by TF-IDF) but it is stable. With a field it is
// SORTBY field [ASC|DESC]: by SortKey, desc reversing it, profiles without
// a key last in either direction (as RediSearch puts a missing value
// last), and ties by email ascending. An unknown field is EINVALID, in
// Redis's words; any field of the schema may be named, Sortable or not.
func (s *Schema) Order(sortBy string, desc bool) (func(a, b map[string]string) int, error) {
	byEmail := func(a, b map[string]string) int {
		return strings.Compare(a[partmap.FieldEmail], b[partmap.FieldEmail])
	}
	if sortBy == "" {
		return byEmail, nil
	}
	if _, ok := s.Field(sortBy); !ok {
		return nil, &partmap.Error{Code: partmap.EINVALID, Field: sortBy,
			Message: "Property `" + sortBy + "` not loaded nor in schema"}
	}
	return func(a, b map[string]string) int {
		ka, oka := s.SortKey(sortBy, a)
		kb, okb := s.SortKey(sortBy, b)
		c := -cmp.Compare(boolInt(oka), boolInt(okb)) // present first
		if c == 0 && oka {
			c = bytes.Compare(ka, kb)
			if desc {
				c = -c
			}
		}
		if c == 0 {
			c = byEmail(a, b)
		}
		return c
	}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
