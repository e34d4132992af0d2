package http

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// streamStall bounds how long the server waits for a reader to take the
// next chunk of a stream; the server's write timeout cannot bound a whole
// export or check, which may take minutes.
const streamStall = time.Minute

// lineStream writes a JSON Lines reply whose status goes out before the
// work is done, so that its outcome comes after the body, in trailers: the
// count of lines, or the error that cut the stream short. A client that
// gets no count did not get the whole stream.
type lineStream struct {
	w                          http.ResponseWriter
	rc                         *http.ResponseController
	out                        *bufio.Writer
	countTrailer, errorTrailer string
	n                          int64
}

func newLineStream(w http.ResponseWriter, countTrailer, errorTrailer string) *lineStream {
	return &lineStream{w: w, rc: http.NewResponseController(w), out: bufio.NewWriterSize(w, 64<<10),
		countTrailer: countTrailer, errorTrailer: errorTrailer}
}

// header sends the status and headers; a HEAD request sends only these.
func (s *lineStream) header() {
	s.w.Header().Set("Content-Type", "application/jsonl")
	s.w.Header().Set("X-Content-Type-Options", "nosniff")
	s.w.Header().Set("Trailer", s.countTrailer+", "+s.errorTrailer)
	s.w.WriteHeader(http.StatusOK)
}

// line writes one line, sending the header first.
func (s *lineStream) line(b []byte) error {
	if s.n == 0 {
		s.header()
	}
	s.n++
	if s.out.Available() < len(b)+1 {
		s.rc.SetWriteDeadline(time.Now().Add(streamStall))
	}
	s.out.Write(b)
	return s.out.WriteByte('\n')
}

// finish ends the stream with its outcome. An error before the first line
// is returned, for an ordinary problem reply; after it, it can only go in
// the error trailer.
func (s *lineStream) finish(err error) error {
	if s.n == 0 {
		if err != nil {
			return err
		}
		s.header()
	}
	if ferr := s.out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		msg := strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return ' '
			}
			return r
		}, partmap.ErrorMessage(err))
		s.w.Header().Set(s.errorTrailer, string(partmap.ErrorCode(err))+": "+msg)
		return errStreamFailed{err}
	}
	s.w.Header().Set(s.countTrailer, strconv.FormatInt(s.n, 10))
	return nil
}

// errStreamFailed is a stream that failed midway: already reported in its
// trailer, it is only logged.
type errStreamFailed struct{ err error }

func (e errStreamFailed) Error() string { return e.err.Error() }

// readLines reads a JSON Lines stream of what (an export of profiles, a
// check of partitions), calling fn with each line without its newline, and
// holds it to the server's trailers: a stream cut short, or whose count is
// missing, is an error, never a smaller answer.
func readLines(resp *http.Response, what, unit, countTrailer, errorTrailer string, fn func(line []byte) error) error {
	in := bufio.NewReaderSize(resp.Body, 64<<10)
	var n int64
	for {
		line, err := in.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it whole.
			rest, rerr := in.ReadBytes('\n')
			line, err = append(slices.Clone(line), rest...), rerr
		}
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				return fmt.Errorf("%s: the stream was cut in the middle of %s %d", what, unit, n+1)
			}
			n++
			if ferr := fn(line[:len(line)-1]); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: reading the stream after %d %ss: %w", what, n, unit, err)
		}
	}
	if msg := resp.Trailer.Get(errorTrailer); msg != "" {
		code, detail, _ := strings.Cut(msg, ": ")
		if _, ok := partmap.Codes[partmap.Code(code)]; !ok {
			code = string(partmap.EINTERNAL)
		}
		return &partmap.Error{Code: partmap.Code(code), Message: fmt.Sprintf("%s failed after %d %ss: %s", what, n, unit, detail)}
	}
	want, err := strconv.ParseInt(resp.Trailer.Get(countTrailer), 10, 64)
	if err != nil {
		return partmap.Errorf(partmap.EUNAVAILABLE, "%s: the stream ended after %d %ss without the server's count; it is incomplete", what, n, unit)
	}
	if want != n {
		return fmt.Errorf("%s: the server sent %d %ss but counted %d", what, n, unit, want)
	}
	return nil
}
