// Package record is the binary form of a stored profile, shared by the
// stores that keep profiles as bytes.
package record

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/partmap/partmap"
)

// ErrCorrupt reports bytes that are not an encoded record.
var ErrCorrupt = errors.New("corrupt record")

// Encode writes the version, then the fields in byte order of their
// names, each as a length-prefixed name and value. A record with deadlines
// goes on with them: 'D', the profile's (uvarint, 0 for none), their count,
// and each field's name and deadline in byte order of names. A record that
// knows its commit time ends with it: 'T' and the Unix ms (uvarint), as
// AppendCommitted writes them. A record without either ends after its
// fields, as records did before them, so that old directories read as
// they are.
func Encode(rec partmap.Record) []byte {
	names := make([]string, 0, len(rec.Profile))
	size := 8 + binary.MaxVarintLen64 + 1 + binary.MaxVarintLen64
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
	if !rec.Deadlines.IsZero() {
		b = appendDeadlines(b, rec.Deadlines)
	}
	if rec.Committed != 0 {
		b = AppendCommitted(b, rec.Committed)
	}
	return b
}

const (
	deadlinesTag = 'D'
	committedTag = 'T'
)

// AppendCommitted appends a commit time (Unix ms) to a record that Encode
// wrote without one: what a backend does that learns the time only as it
// commits. Redis's commit script writes the same bytes.
func AppendCommitted(b []byte, ms int64) []byte {
	b = append(b, committedTag)
	return binary.AppendUvarint(b, uint64(ms))
}

func appendDeadlines(b []byte, d partmap.Deadlines) []byte {
	b = append(b, deadlinesTag)
	b = binary.AppendUvarint(b, uint64(d.Profile))
	b = binary.AppendUvarint(b, uint64(len(d.Fields)))
	names := make([]string, 0, len(d.Fields))
	for name := range d.Fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b = appendString(b, name)
		b = binary.AppendUvarint(b, uint64(d.Fields[name]))
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
	if len(text) != 0 && text[0] == deadlinesTag {
		var err error
		if rec.Deadlines, text, err = decodeDeadlines(text[1:]); err != nil {
			return partmap.Record{}, err
		}
	}
	if len(text) != 0 {
		ms, rest, ok := readUvarint(text[1:])
		if text[0] != committedTag || !ok || rest != "" || ms == 0 || ms > 1<<62 {
			return partmap.Record{}, ErrCorrupt
		}
		rec.Committed = int64(ms)
	}
	return rec, nil
}

// decodeDeadlines reads what appendDeadlines wrote after its tag, and
// returns the rest.
func decodeDeadlines(text string) (partmap.Deadlines, string, error) {
	var d partmap.Deadlines
	var n uint64
	var ok bool
	if d.Profile, text, ok = readDeadline(text); !ok {
		return d, "", ErrCorrupt
	}
	if n, text, ok = readUvarint(text); !ok || n > uint64(len(text)) {
		return d, "", ErrCorrupt
	}
	if n > 0 {
		d.Fields = make(map[string]int64, n)
	}
	for range n {
		var name string
		var at int64
		if name, text, ok = readString(text); !ok {
			return d, "", ErrCorrupt
		}
		if at, text, ok = readDeadline(text); !ok || at == 0 {
			return d, "", ErrCorrupt
		}
		d.Fields[name] = at
	}
	return d, text, nil
}

func readDeadline(s string) (int64, string, bool) {
	n, rest, ok := readUvarint(s)
	return int64(n), rest, ok && n <= math.MaxInt64
}

// readString reads a length-prefixed string from the front of s.
func readString(s string) (string, string, bool) {
	n, rest, ok := readUvarint(s)
	if !ok || n > uint64(len(rest)) {
		return "", "", false
	}
	return rest[:n], rest[n:], true
}

// readUvarint reads a uvarint from the front of s, without converting s
// to bytes.
func readUvarint(s string) (uint64, string, bool) {
	var n uint64
	for shift, w := 0, 0; ; shift += 7 {
		if w >= len(s) {
			return 0, "", false
		}
		c := s[w]
		w++
		if shift == 63 && c > 1 { // past 64 bits, as binary.Uvarint refuses
			return 0, "", false
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return n, s[w:], true
		}
	}
}
