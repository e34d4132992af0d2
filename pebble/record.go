package pebble

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/partmap/partmap"
)

// Key layout. Every record has a key of its own, so a write touches one
// record and one counter, never a whole partition.
//
//	"m"                             directory metadata (JSON)
//	"c" | partition (uint32 BE)      number of profiles in the partition
//	"r" | partition (uint32 BE) | canonical email   one profile
//
// Big-endian partition numbers make byte order partition order, so an
// enumeration walks partition, then email.
const (
	prefixCount  = 'c'
	prefixRecord = 'r'
)

var metaKey = []byte("m")

func countKey(p partmap.Partition) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixCount}, uint32(p))
}

func recordKey(p partmap.Partition, email string) []byte {
	k := make([]byte, 0, 5+len(email))
	k = append(k, prefixRecord)
	k = binary.BigEndian.AppendUint32(k, uint32(p))
	return append(k, email...)
}

var errCorrupt = errors.New("pebble: corrupt record")

// encodeRecord writes the version, then the fields in byte order of their
// names, each as a length-prefixed name and value.
func encodeRecord(rec partmap.Record) []byte {
	names := make([]string, 0, len(rec.Profile))
	size := 8 + binary.MaxVarintLen64
	for name, value := range rec.Profile {
		names = append(names, name)
		size += len(name) + len(value) + 2*binary.MaxVarintLen32
	}
	slices.Sort(names)
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint64(b, uint64(rec.Version))
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		b = appendString(b, rec.Profile[name])
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func decodeRecord(b []byte) (partmap.Record, error) {
	if len(b) < 8 {
		return partmap.Record{}, errCorrupt
	}
	rec := partmap.Record{Version: partmap.Version(binary.BigEndian.Uint64(b))}
	b = b[8:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return partmap.Record{}, errCorrupt
	}
	b = b[w:]
	rec.Profile = make(partmap.Profile, n)
	for range n {
		var name, value string
		var ok bool
		if name, b, ok = readString(b); !ok {
			return partmap.Record{}, errCorrupt
		}
		if value, b, ok = readString(b); !ok {
			return partmap.Record{}, errCorrupt
		}
		rec.Profile[name] = value
	}
	if len(b) != 0 {
		return partmap.Record{}, errCorrupt
	}
	return rec, nil
}

func readString(b []byte) (string, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, false
	}
	b = b[w:]
	return string(b[:n]), b[n:], true
}
