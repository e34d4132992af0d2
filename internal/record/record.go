// Package record is the binary form of a stored profile, shared by the
// stores that keep profiles as bytes.
package record

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/partmap/partmap"
)

// ErrCorrupt reports bytes that are not an encoded record.
var ErrCorrupt = errors.New("corrupt record")

// Encode writes the version, then the fields in byte order of their
// names, each as a length-prefixed name and value.
func Encode(rec partmap.Record) []byte {
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

func Decode(b []byte) (partmap.Record, error) {
	if len(b) < 8 {
		return partmap.Record{}, ErrCorrupt
	}
	rec := partmap.Record{Version: partmap.Version(binary.BigEndian.Uint64(b))}
	b = b[8:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return partmap.Record{}, ErrCorrupt
	}
	b = b[w:]
	rec.Profile = make(partmap.Profile, n)
	for range n {
		var name, value string
		var ok bool
		if name, b, ok = readString(b); !ok {
			return partmap.Record{}, ErrCorrupt
		}
		if value, b, ok = readString(b); !ok {
			return partmap.Record{}, ErrCorrupt
		}
		rec.Profile[name] = value
	}
	if len(b) != 0 {
		return partmap.Record{}, ErrCorrupt
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
