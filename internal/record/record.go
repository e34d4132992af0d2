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

// Decode copies b into one string and slices every name and value from
// it: one allocation for the text instead of two per field.
func Decode(b []byte) (partmap.Record, error) {
	if len(b) < 8 {
		return partmap.Record{}, ErrCorrupt
	}
	rec := partmap.Record{Version: partmap.Version(binary.BigEndian.Uint64(b))}
	n, w := binary.Uvarint(b[8:])
	if w <= 0 || n > uint64(len(b)) {
		return partmap.Record{}, ErrCorrupt
	}
	text := string(b[8+w:])
	rec.Profile = make(partmap.Profile, n)
	for range n {
		var name, value string
		var ok bool
		if name, text, ok = readString(text); !ok {
			return partmap.Record{}, ErrCorrupt
		}
		if value, text, ok = readString(text); !ok {
			return partmap.Record{}, ErrCorrupt
		}
		rec.Profile[name] = value
	}
	if len(text) != 0 {
		return partmap.Record{}, ErrCorrupt
	}
	return rec, nil
}

// readString reads a length-prefixed string from the front of s.
func readString(s string) (string, string, bool) {
	var n uint64
	var w int
	for shift := 0; ; shift += 7 {
		if w >= len(s) {
			return "", "", false
		}
		c := s[w]
		w++
		if shift == 63 && c > 1 { // past 64 bits, as binary.Uvarint refuses
			return "", "", false
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	if n > uint64(len(s)-w) {
		return "", "", false
	}
	return s[w : w+int(n)], s[w+int(n):], true
}
