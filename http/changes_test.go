package http_test

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// sseEvent is one Server-Sent Event as the WHATWG spec dispatches it.
type sseEvent struct {
	id, event, data string
	hasID           bool // the event set its id
}

// sseReader reads a Server-Sent Events stream as a browser's EventSource
// does, without a browser: lines end in LF, CRLF or CR; a line that begins
// with a colon is a comment; "field: value" loses one space after the
// colon; data lines join with LF; a blank line dispatches the event, unless
// it has no data. Comments are kept, for the tests of the heartbeat.
type sseReader struct {
	br       *bufio.Reader
	lastID   string   // the last event ID, which a reconnection sends
	comments []string // the comments read so far
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

// line reads one line without its end.
func (s *sseReader) line() (string, error) {
	var b strings.Builder
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			if err == io.EOF && b.Len() > 0 {
				err = io.ErrUnexpectedEOF // a line the stream cut off
			}
			return "", err
		}
		switch c {
		case '\n':
			return b.String(), nil
		case '\r':
			if next, err := s.br.Peek(1); err == nil && next[0] == '\n' {
				s.br.ReadByte()
			}
			return b.String(), nil
		}
		b.WriteByte(c)
	}
}

// next returns the next event, reading comments on the way.
func (s *sseReader) next() (sseEvent, error) {
	var e sseEvent
	var data []string
	for {
		line, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if line == "" {
			if data == nil {
				e = sseEvent{} // nothing to dispatch: the event type resets too
				continue
			}
			e.data = strings.Join(data, "\n")
			if e.event == "" {
				e.event = "message"
			}
			e.id = s.lastID
			return e, nil
		}
		if strings.HasPrefix(line, ":") {
			s.comments = append(s.comments, strings.TrimPrefix(strings.TrimPrefix(line, ":"), " "))
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			e.event = value
		case "data":
			data = append(data, value)
		case "id":
			if !strings.ContainsRune(value, 0) {
				s.lastID, e.hasID = value, true
			}
		case "retry":
		default:
			// Unknown fields are ignored.
		}
	}
}

// parseEvents reads a whole stream's events. A stream that ends midway
// through an event drops it, as an EventSource does.
func parseEvents(r io.Reader) ([]sseEvent, error) {
	s := newSSEReader(r)
	var out []sseEvent
	for {
		e, err := s.next()
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return out, nil
		case err != nil:
			return out, err
		}
		out = append(out, e)
	}
}
