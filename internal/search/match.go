package search

import (
	"slices"
	"strings"
)

// Match reports whether a query matches one profile, by indexing the
// profile's fields afresh with Terms, Tags and ParseNumber. It is the
// reference that real indexes must agree with: a Term matches iff one of
// Expand(field, word) is among Terms(field, value), a Prefix iff a word
// (not a stem) among the Terms starts with it, a Tag iff one of its values
// is among Tags, a Range iff ParseNumber reads the value and it lies in the
// range. A field the profile lacks matches nothing, and so a Not of it
// matches.
func Match(s *Schema, n Node, profile map[string]string) bool {
	switch n := n.(type) {
	case All:
		return true
	case Tag:
		v, ok := profile[n.Field]
		if !ok {
			return false
		}
		tags := s.Tags(n.Field, v)
		return slices.ContainsFunc(n.Values, func(want string) bool {
			_, found := slices.BinarySearch(tags, want)
			return found
		})
	case Range:
		v, ok := profile[n.Field]
		if !ok {
			return false
		}
		f, ok := ParseNumber(v)
		return ok && n.Contains(f)
	case Term:
		return slices.ContainsFunc(s.searched(n.Field), func(field string) bool {
			v, ok := profile[field]
			if !ok {
				return false
			}
			terms := s.Terms(field, v)
			return slices.ContainsFunc(s.Expand(field, n.Word), func(want string) bool {
				_, found := slices.BinarySearch(terms, want)
				return found
			})
		})
	case Prefix:
		return slices.ContainsFunc(s.searched(n.Field), func(field string) bool {
			v, ok := profile[field]
			if !ok {
				return false
			}
			// Terms are sorted, so the words with the prefix are the ones
			// from its place on; stems start with StemPrefix, which no
			// prefix does.
			terms := s.Terms(field, v)
			i, _ := slices.BinarySearch(terms, n.Prefix)
			return i < len(terms) && strings.HasPrefix(terms[i], n.Prefix)
		})
	case And:
		for _, c := range n.Nodes {
			if !Match(s, c, profile) {
				return false
			}
		}
		return true
	case Or:
		for _, c := range n.Nodes {
			if Match(s, c, profile) {
				return true
			}
		}
		return false
	case Not:
		return !Match(s, n.Node, profile)
	}
	return false
}

// searched is the fields a Term or Prefix of field looks in.
func (s *Schema) searched(field string) []string {
	if field == "" {
		return s.text
	}
	return []string{field}
}

// Contains reports whether the range holds f. Comparisons with NaN are
// false, so neither a NaN nor a range with a NaN bound holds anything.
func (n Range) Contains(f float64) bool {
	switch {
	case !(f >= n.Min), f == n.Min && n.MinExclusive:
		return false
	case !(f <= n.Max), f == n.Max && n.MaxExclusive:
		return false
	}
	return true
}
