package pebble

import (
	"encoding/binary"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/directory"
)

// Key layout. Every record has a key of its own, so a write touches one
// record and one counter, never a whole partition.
//
//	"m"                             directory metadata (JSON; see internal/pebbledb)
//	S | "c" | partition (uint32 BE)      number of profiles in the partition
//	S | "r" | partition (uint32 BE) | canonical email   one profile
//	S | "x" | partition (uint32 BE) | field (1 byte) | uvarint len(value) | value | canonical email
//	                                one secondary-index entry, with an empty value
//
// S is the space of the layout version the key belongs to: nothing for
// version 0, "v" | version (uint32 BE) for the versions resizes make, so
// that a resize writes its next version beside the current one and drops
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
	prefixCount   = 'c'
	prefixRecord  = 'r'
	prefixIndex   = 'x'
	prefixVersion = 'v'
)

// spacePrefix is S for version.
func spacePrefix(version int) []byte {
	if version == 0 {
		return nil
	}
	return binary.BigEndian.AppendUint32([]byte{prefixVersion}, uint32(version))
}

// kind starts a key of one kind in the space pre.
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

func indexKey(pre []byte, p partmap.Partition, e directory.IndexEntry) []byte {
	return append(indexPrefix(pre, p, e.Field, e.Value), e.Email...)
}

// partitionIndexPrefix is the start of every index entry of p.
func partitionIndexPrefix(pre []byte, p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32(kind(pre, prefixIndex, 4), uint32(p))
}

// parseIndexKey reads an entry back (the key without its space), for checks.
func parseIndexKey(k []byte) (directory.IndexEntry, bool) {
	if len(k) < 7 || k[0] != prefixIndex {
		return directory.IndexEntry{}, false
	}
	field := int(k[5])
	n, w := binary.Uvarint(k[6:])
	if w <= 0 || n > uint64(len(k)-6-w) {
		return directory.IndexEntry{}, false
	}
	rest := k[6+w:]
	return directory.IndexEntry{Field: field, Value: string(rest[:n]), Email: string(rest[n:])}, true
}

// spaceRanges are the key ranges [start, end) holding a version's data.
func spaceRanges(version int) [][2][]byte {
	if version == 0 {
		return [][2][]byte{{{prefixCount}, {prefixCount + 1}}, {{prefixRecord}, {prefixRecord + 1}}, {{prefixIndex}, {prefixIndex + 1}}}
	}
	return [][2][]byte{{spacePrefix(version), spacePrefix(version + 1)}}
}
