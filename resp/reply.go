package resp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/partmap/partmap"
)

// writer writes replies in the client's protocol: RESP3 has maps, sets
// and a null of its own, which RESP2 writes as flat arrays and $-1.
type writer struct {
	redcon.Conn
	proto int
}

func (w *writer) mapLen(pairs int) {
	if w.proto == 3 {
		w.WriteRaw([]byte("%" + strconv.Itoa(pairs) + "\r\n"))
		return
	}
	w.WriteArray(2 * pairs)
}

// setLen begins a set of n members: RESP3's own type, an array in RESP2.
func (w *writer) setLen(n int) {
	if w.proto == 3 {
		w.WriteRaw([]byte("~" + strconv.Itoa(n) + "\r\n"))
		return
	}
	w.WriteArray(n)
}

// double writes f as RESP3's double, or as a bulk string in RESP2, the
// shortest that reads back as f, as Redis's addReplyDouble does.
func (w *writer) double(f float64) {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if w.proto == 3 {
		w.WriteRaw([]byte("," + s + "\r\n"))
		return
	}
	w.WriteBulkString(s)
}

func (w *writer) null() {
	if w.proto == 3 {
		w.WriteRaw([]byte("_\r\n"))
		return
	}
	w.WriteNull()
}

func (w *writer) ok() { w.WriteString("OK") }

// fail writes err, a refusal in Redis's words.
func (w *writer) fail(err error) { w.WriteError(err.Error()) }

// nullArray is EXEC's reply when a watched key changed.
func (w *writer) nullArray() {
	if w.proto == 3 {
		w.WriteRaw([]byte("_\r\n"))
		return
	}
	w.WriteRaw([]byte("*-1\r\n"))
}

// bulkOrNull writes v, or a null for a missing value.
func (w *writer) bulkOrNull(v *string) {
	if v == nil {
		w.null()
		return
	}
	w.WriteBulkString(*v)
}

func (w *writer) strings(vs []string) {
	w.WriteArray(len(vs))
	for _, v := range vs {
		w.WriteBulkString(v)
	}
}

// unknownCommand is Redis's reply to a command it does not have: the
// arguments it quotes stop once they reach 128 bytes, as Redis's do.
func unknownCommand(args [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with: ", clip(args[0]))
	quoted := 0
	for _, a := range args[1:] {
		if quoted >= 128 {
			break
		}
		a = a[:min(len(a), 128-quoted)]
		q := "'" + clip(a) + "' "
		b.WriteString(q)
		quoted += len(q)
	}
	return b.String()
}

// clip shortens an argument echoed in an error, as Redis does (128 bytes),
// and keeps the reply on one line.
func clip(a []byte) string {
	if len(a) > 128 {
		a = a[:128]
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, string(a))
}

func lower(b []byte) string {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			return strings.ToLower(string(b))
		}
	}
	return string(b)
}

// Redis's own error strings, for the replies partmap shares with it.
const (
	errWrongType     = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errNotInteger    = "ERR value is not an integer or out of range"
	errNotFloat      = "ERR value is not a valid float"
	errSyntax        = "ERR syntax error"
	errInvalidCursor = "ERR invalid cursor"
	errHashNotInt    = "ERR hash value is not an integer"
	errHashNotFlt    = "ERR hash value is not a float"
	errIncrOverflw   = "ERR increment or decrement would overflow"
	errIncrFltInf    = "ERR increment would produce NaN or Infinity"
)

// storeError is the reply to an error of the store: Redis's string where
// Redis has the same failure, partmap's message with a Redis prefix where
// it is partmap's own (a lock conflict is TRYAGAIN, which clients retry).
func storeError(err error) string {
	var pe *partmap.Error
	if !errors.As(err, &pe) {
		return "ERR " + oneLine(err.Error())
	}
	msg := pe.Message
	if msg == "" || pe.Code == partmap.EINTERNAL { // an internal error's details stay in the server's log
		msg = partmap.Codes[pe.Code].Title
	}
	msg = oneLine(msg)
	switch pe.Code {
	case partmap.ENOTINTEGER:
		return errHashNotInt
	case partmap.ENOTFLOAT:
		return errHashNotFlt
	case partmap.EOVERFLOW:
		return errIncrOverflw
	case partmap.ELOCKCONFLICT:
		return "TRYAGAIN " + msg
	case partmap.ENOTSTARTED:
		return "ERR the directory is not started: run `partmap start` (or POST …/start) once"
	case partmap.EUNAVAILABLE:
		return "LOADING " + msg
	}
	return "ERR " + msg
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
