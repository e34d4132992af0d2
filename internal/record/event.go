package record

import (
	"encoding/binary"

	"github.com/partmap/partmap"
)

// AppendEvent appends to b the stored form of a change feed event, which
// backends keep as they keep records: the commit time (uvarint Unix ms),
// the operation and the email (length-prefixed), then 'R' and the record
// as Encode wrote it (encoded), or '-' for a deletion (encoded nil). A
// backend that stores the record too encodes it once for both, and can
// reuse b for every event of a batch, which copies them.
func AppendEvent(b []byte, millis int64, op partmap.OpKind, email string, encoded []byte) []byte {
	b = binary.AppendUvarint(b, uint64(millis))
	return append(AppendEventHead(b, op, email, encoded == nil), encoded...)
}

// AppendEventHead is AppendEvent without the commit time and the record,
// for a backend that stores the time apart (Redis's stream IDs) and
// appends the encoded record itself.
func AppendEventHead(b []byte, op partmap.OpKind, email string, deleted bool) []byte {
	b = appendString(b, string(op))
	b = appendString(b, email)
	if deleted {
		return append(b, '-')
	}
	return append(b, 'R')
}

// DecodeEvent reads what AppendEvent wrote.
func DecodeEvent(b []byte) (millis int64, op partmap.OpKind, email string, rec *partmap.Record, err error) {
	ms, w := binary.Uvarint(b)
	if w <= 0 || ms > 1<<62 {
		return 0, "", "", nil, ErrCorrupt
	}
	op, email, rec, err = DecodeEventHead(b[w:])
	return int64(ms), op, email, rec, err
}

// DecodeEventHead reads what AppendEventHead wrote, and the record after it.
func DecodeEventHead(b []byte) (op partmap.OpKind, email string, rec *partmap.Record, err error) {
	s := string(b[:min(len(b), 2*binary.MaxVarintLen64+64+partmap.MaxEmailBytes+1)]) // the head only, not the record
	o, rest, ok := readString(s)
	if !ok {
		return "", "", nil, ErrCorrupt
	}
	e, rest, ok := readString(rest)
	if !ok || rest == "" {
		return "", "", nil, ErrCorrupt
	}
	at := len(s) - len(rest) + 1 // past the tag, in b
	switch rest[0] {
	case '-':
		if at != len(b) {
			return "", "", nil, ErrCorrupt
		}
		return partmap.OpKind(o), e, nil, nil
	case 'R':
		r, err := Decode(b[at:])
		if err != nil {
			return "", "", nil, err
		}
		return partmap.OpKind(o), e, &r, nil
	}
	return "", "", nil, ErrCorrupt
}
