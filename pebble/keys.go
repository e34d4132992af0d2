package pebble

import (
	"bytes"
	"encoding/binary"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// Key layout. Every record has a key of its own, so a write touches one
// record and one counter, never a whole partition.
//
//	"m"                                   directory metadata (JSON)
//	G | "c" | partition (uint32 BE)       number of profiles in the partition
//	G | "r" | partition (uint32 BE) | canonical email   one profile
//	G | "x" | partition (uint32 BE) | field (1 byte) | uvarint len(value) | value | canonical email
//	                                      one secondary-index entry, with an empty value
//	G | "e" | expiry value (17 bytes) | partition (uint32 BE) | canonical email
//	                                      an expiry entry again, by deadline first, so that
//	                                      what is due is one range however many partitions
//
// G is the key space of the layout generation the key belongs to: nothing
// for generation 0, "v" | generation (uint32 BE) for those resizes make, so
// that a resize writes its next generation beside the current one and drops
// the old one with a few range deletions.
//
// Big-endian partition numbers make byte order partition order, so an
// enumeration walks partition, then email.
//
// An index entry lives in its profile's partition, so that the batch that
// writes a profile writes its entries too; the field is its position in the
// metadata's index list, and the value's length makes the email's start
// unambiguous.
const (
	prefixCount      = 'c'
	prefixRecord     = 'r'
	prefixIndex      = 'x'
	prefixDue        = 'e'
	prefixGeneration = 'v'
)

// metaKey is where the metadata lives.
var metaKey = []byte("m")

// genPrefix is G for generation.
func genPrefix(generation int) []byte {
	if generation == 0 {
		return nil
	}
	return binary.BigEndian.AppendUint32([]byte{prefixGeneration}, uint32(generation))
}

// kind starts a key of one kind in the key space pre.
func kind(pre []byte, k byte, extra int) []byte {
	out := make([]byte, 0, len(pre)+1+extra)
	return append(append(out, pre...), k)
}

func countKey(pre []byte, p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32(kind(pre, prefixCount, 4), uint32(p))
}

func recordKey(pre []byte, p partmap.Partition, email string) []byte {
	k := binary.BigEndian.AppendUint32(kind(pre, prefixRecord, 4+len(email)), uint32(p))
	return append(k, email...)
}

// indexPrefix is the start of every entry of one field and value in p.
func indexPrefix(pre []byte, p partmap.Partition, field int, value string) []byte {
	k := binary.BigEndian.AppendUint32(kind(pre, prefixIndex, 6+len(value)+binary.MaxVarintLen64), uint32(p))
	k = append(k, byte(field))
	k = binary.AppendUvarint(k, uint64(len(value)))
	return append(k, value...)
}

// indexKey is entry e's key. A search entry (engine.SearchFieldBase and
// up) ends with its tail (engine.EntryTail), in the order ranges read it;
// the others with their value's length, the value and the email.
func indexKey(pre []byte, p partmap.Partition, e engine.IndexEntry) []byte {
	if e.Field >= engine.SearchFieldBase {
		k := append(searchPrefix(pre, p, e.Field), e.Value...)
		return append(append(k, 0), e.Email...)
	}
	return append(indexPrefix(pre, p, e.Field, e.Value), e.Email...)
}

// searchPrefix is the start of every entry of search field field in p.
func searchPrefix(pre []byte, p partmap.Partition, field int) []byte {
	k := binary.BigEndian.AppendUint32(kind(pre, prefixIndex, 5+64), uint32(p))
	return append(k, byte(field))
}

// partitionIndexPrefix is the start of every index entry of p.
func partitionIndexPrefix(pre []byte, p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32(kind(pre, prefixIndex, 4), uint32(p))
}

// parseIndexKey reads an entry back (the key without its G), for checks.
func parseIndexKey(k []byte) (engine.IndexEntry, bool) {
	if len(k) < 7 || k[0] != prefixIndex {
		return engine.IndexEntry{}, false
	}
	field := int(k[5])
	if field >= engine.SearchFieldBase {
		value, email, ok := bytes.Cut(k[6:], []byte{0})
		return engine.IndexEntry{Field: field, Value: string(value), Email: string(email)}, ok
	}
	n, w := binary.Uvarint(k[6:])
	if w <= 0 || n > uint64(len(k)-6-w) {
		return engine.IndexEntry{}, false
	}
	rest := k[6+w:]
	return engine.IndexEntry{Field: field, Value: string(rest[:n]), Email: string(rest[n:])}, true
}

// generationRanges are the key ranges [start, end) holding a generation.
func generationRanges(generation int) [][2][]byte {
	if generation == 0 {
		return [][2][]byte{{{prefixCount}, {prefixCount + 1}}, {{prefixRecord}, {prefixRecord + 1}}, {{prefixIndex}, {prefixIndex + 1}},
			{{prefixDue}, {prefixDue + 1}}}
	}
	return [][2][]byte{{genPrefix(generation), genPrefix(generation + 1)}}
}

// dueKey is expiry entry e of partition p by deadline first.
func dueKey(pre []byte, p partmap.Partition, e engine.IndexEntry) []byte {
	k := append(kind(pre, prefixDue, len(e.Value)+4+len(e.Email)), e.Value...)
	k = binary.BigEndian.AppendUint32(k, uint32(p))
	return append(k, e.Email...)
}
