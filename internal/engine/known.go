package engine

// knownSet is what a Tx has read or staged, by key. Most invocations touch
// one record, for which a map's allocation and hashing cost more than the
// record's whole lookup in memory; the first entries sit in a slice, and
// a map indexes them once there are many, as in a bulk write.
type knownSet struct {
	first   [1]knownEntry
	entries []knownEntry
	index   map[key]int // from knownIndexAt entries on
}

type knownEntry struct {
	key   key
	value known
}

const knownIndexAt = 8

func (s *knownSet) len() int { return len(s.entries) }

func (s *knownSet) find(k key) int {
	if s.index != nil {
		if i, ok := s.index[k]; ok {
			return i
		}
		return -1
	}
	for i := range s.entries {
		if s.entries[i].key == k {
			return i
		}
	}
	return -1
}

func (s *knownSet) get(k key) (known, bool) {
	if i := s.find(k); i >= 0 {
		return s.entries[i].value, true
	}
	return known{}, false
}

func (s *knownSet) put(k key, v known) {
	if i := s.find(k); i >= 0 {
		s.entries[i].value = v
		return
	}
	if s.entries == nil {
		s.entries = s.first[:0]
	}
	s.entries = append(s.entries, knownEntry{k, v})
	switch {
	case s.index != nil:
		s.index[k] = len(s.entries) - 1
	case len(s.entries) == knownIndexAt:
		s.index = make(map[key]int, 2*knownIndexAt)
		for i, e := range s.entries {
			s.index[e.key] = i
		}
	}
}
