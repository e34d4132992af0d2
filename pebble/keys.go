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
//	"c" | partition (uint32 BE)      number of profiles in the partition
//	"r" | partition (uint32 BE) | canonical email   one profile
//	"x" | partition (uint32 BE) | field (1 byte) | uvarint len(value) | value | canonical email
//	                                one secondary-index entry, with an empty value
//
// Big-endian partition numbers make byte order partition order, so an
// enumeration walks partition, then email.
//
// An index entry lives in its profile's partition, so that the batch that
// writes a profile writes its entries too; the field is its position in the
// metadata's index list, and the value's length makes the email's start
// unambiguous.
const (
	prefixCount  = 'c'
	prefixRecord = 'r'
	prefixIndex  = 'x'
)

func countKey(p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixCount}, uint32(p))
}

func recordKey(p partmap.Partition, email string) []byte {
	k := make([]byte, 0, 5+len(email))
	k = append(k, prefixRecord)
	k = binary.BigEndian.AppendUint32(k, uint32(p))
	return append(k, email...)
}

// indexPrefix is the start of every entry of one field and value in p.
func indexPrefix(p partmap.Partition, field int, value string) []byte {
	k := make([]byte, 0, 7+len(value)+binary.MaxVarintLen64)
	k = append(k, prefixIndex)
	k = binary.BigEndian.AppendUint32(k, uint32(p))
	k = append(k, byte(field))
	k = binary.AppendUvarint(k, uint64(len(value)))
	return append(k, value...)
}

func indexKey(p partmap.Partition, e directory.IndexEntry) []byte {
	return append(indexPrefix(p, e.Field, e.Value), e.Email...)
}

// partitionIndexPrefix is the start of every index entry of p.
func partitionIndexPrefix(p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixIndex}, uint32(p))
}

// parseIndexKey reads an entry back, for checks.
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
