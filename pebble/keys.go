package pebble

import (
	"encoding/binary"

	"github.com/partmap/partmap"
)

// Key layout. Every record has a key of its own, so a write touches one
// record and one counter, never a whole partition.
//
//	"m"                             directory metadata (JSON; see internal/pebbledb)
//	"c" | partition (uint32 BE)      number of profiles in the partition
//	"r" | partition (uint32 BE) | canonical email   one profile
//
// Big-endian partition numbers make byte order partition order, so an
// enumeration walks partition, then email.
const (
	prefixCount  = 'c'
	prefixRecord = 'r'
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
