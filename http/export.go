package http

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// Export trailers: an export is a stream whose status is sent before the
// snapshot has been read, so its outcome comes after the body. A client
// that gets no ExportCountTrailer did not get the whole export.
const (
	ExportCountTrailer = "Partmap-Export-Profiles"
	ExportErrorTrailer = "Partmap-Export-Error"
)

// exportStall bounds how long the server waits for a reader to take the
// next chunk of an export; the server's write timeout cannot bound a whole
// export, which may take minutes.
const exportStall = time.Minute

// handleExport streams every profile as JSON Lines from one snapshot. An
// error before the first profile is an ordinary problem reply; one after it
// can only be reported in a trailer.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	if r.Method == http.MethodHead {
		// What a GET would answer, without reading (or, on Redis, freezing)
		// the whole directory for nothing.
		if _, err := s.store.ListPartitions(r.Context()); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/jsonl")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Trailer", ExportCountTrailer+", "+ExportErrorTrailer)
		w.WriteHeader(http.StatusOK)
		return nil
	}
	rc := http.NewResponseController(w)
	out := bufio.NewWriterSize(w, 64<<10)
	started := func() {
		w.Header().Set("Content-Type", "application/jsonl")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Trailer", ExportCountTrailer+", "+ExportErrorTrailer)
		w.WriteHeader(http.StatusOK)
	}
	var n int64
	err := s.store.ExportProfiles(r.Context(), func(rec partmap.Record) error {
		if n == 0 {
			started()
		}
		n++
		line, err := rec.Profile.MarshalJSON()
		if err != nil {
			return err
		}
		if out.Available() < len(line)+1 {
			rc.SetWriteDeadline(time.Now().Add(exportStall))
		}
		out.Write(line)
		return out.WriteByte('\n')
	})
	if n == 0 {
		if err != nil {
			return err
		}
		started()
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		s.log.Error("export failed", "profiles", n, "err", err)
		msg := strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f {
				return ' '
			}
			return r
		}, partmap.ErrorMessage(err))
		w.Header().Set(ExportErrorTrailer, string(partmap.ErrorCode(err))+": "+msg)
		return nil
	}
	w.Header().Set(ExportCountTrailer, strconv.FormatInt(n, 10))
	return nil
}

// ExportProfiles streams the server's export. It fails if the stream ends
// without the server's closing count, so a cut connection is never taken
// for a smaller directory.
func (c *Client) ExportProfiles(ctx context.Context, fn func(partmap.Record) error) error {
	_, err := c.do(ctx, request{method: "GET", path: "/customer-profiles/export", stream: func(resp *http.Response) error {
		in := bufio.NewReaderSize(resp.Body, 64<<10)
		var n int64
		for {
			line, err := in.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				// A profile longer than the buffer: gather it whole.
				rest, rerr := in.ReadBytes('\n')
				line, err = append(slices.Clone(line), rest...), rerr
			}
			if len(line) > 0 {
				if line[len(line)-1] != '\n' {
					return fmt.Errorf("export: the stream was cut in the middle of profile %d", n+1)
				}
				p, perr := partmap.ParseProfileJSON(line[:len(line)-1])
				if perr != nil {
					return fmt.Errorf("export: profile %d: %w", n+1, perr)
				}
				n++
				if ferr := fn(partmap.Record{Profile: p}); ferr != nil {
					return ferr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("export: reading the stream after %d profiles: %w", n, err)
			}
		}
		if msg := resp.Trailer.Get(ExportErrorTrailer); msg != "" {
			code, detail, _ := strings.Cut(msg, ": ")
			if _, ok := partmap.Codes[partmap.Code(code)]; !ok {
				code = string(partmap.EINTERNAL)
			}
			return &partmap.Error{Code: partmap.Code(code), Message: "export failed after " + strconv.FormatInt(n, 10) + " profiles: " + detail}
		}
		want, err := strconv.ParseInt(resp.Trailer.Get(ExportCountTrailer), 10, 64)
		if err != nil {
			return partmap.Errorf(partmap.EUNAVAILABLE, "export: the stream ended after %d profiles without the server's count; it is incomplete", n)
		}
		if want != n {
			return fmt.Errorf("export: the server sent %d profiles but counted %d", n, want)
		}
		return nil
	}}, nil)
	return err
}
