package partmap

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// DefaultIndexes are the fields a new directory indexes unless told
// otherwise: the two the customer directory is searched by.
var DefaultIndexes = []string{"companyName", "customerTier"}

// MaxIndexes bounds the indexed fields of one directory: each costs an
// index entry per profile on every write.
const MaxIndexes = 16

// CheckIndexes validates a set of field names to index.
func CheckIndexes(fields []string) error {
	if len(fields) > MaxIndexes {
		return Errorf(EINVALID, "%d indexed fields; at most %d", len(fields), MaxIndexes)
	}
	for i, f := range fields {
		switch {
		case f == "":
			return Errorf(EINVALID, "an indexed field name is empty")
		case f == FieldEmail:
			return Errorf(EINVALID, "%s is the key; it needs no index", FieldEmail)
		case !utf8.ValidString(f):
			return Errorf(EINVALID, "indexed field name %q is not valid UTF-8", f)
		case len(f) > DefaultLimits.MaxFieldNameBytes:
			return Errorf(EINVALID, "indexed field name %.20q… is longer than %d bytes", f, DefaultLimits.MaxFieldNameBytes)
		case slices.Contains(fields[:i], f):
			return Errorf(EINVALID, "field %q is indexed twice", f)
		}
	}
	return nil
}

// Match is one condition of a search: the field holds exactly Value.
type Match struct {
	Field string
	Value string
}

func (m Match) String() string { return fmt.Sprintf("%s=%q", m.Field, m.Value) }

// IndexDrift is one disagreement between a partition's profiles and its
// secondary index.
type IndexDrift struct {
	Email string
	Field string
	Value string
	// Missing: the profile has the value but the index lacks the entry.
	// Otherwise the index has an entry no profile backs (stale).
	Missing bool
}

// PartitionCheck is what CheckPartition found in one partition.
type PartitionCheck struct {
	Partition    Partition
	Profiles     int64 // records found
	Counted      int64 // the partition's stored profile count
	IndexEntries int64 // index entries found
	Drift        []IndexDrift
}

// OK reports whether the partition's count and index agree with its data.
func (c PartitionCheck) OK() bool { return c.Profiles == c.Counted && len(c.Drift) == 0 }
