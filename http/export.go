package http

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/partmap/partmap"
)

// Export trailers: an export is a stream whose status is sent before the
// snapshot has been read, so its outcome comes after the body. A client
// that gets no ExportCountTrailer did not get the whole export.
const (
	ExportCountTrailer = "Partmap-Export-Profiles"
	ExportErrorTrailer = "Partmap-Export-Error"
)

// handleExport streams every profile as JSON Lines from one snapshot: a
// line is a profile, or a profile with the deadlines it has
// (partmap.MarshalRecordJSON).
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	stream := newLineStream(w, ExportCountTrailer, ExportErrorTrailer)
	if r.Method == http.MethodHead {
		// What a GET would answer, without reading (or, on Redis, freezing)
		// the whole directory for nothing.
		if _, err := s.store.ListPartitions(r.Context()); err != nil {
			return err
		}
		stream.header()
		return nil
	}
	return stream.finish(s.store.ExportProfiles(r.Context(), func(rec partmap.Record) error {
		line, err := partmap.MarshalRecordJSON(rec)
		if err != nil {
			return err
		}
		return stream.line(line)
	}))
}

// ExportProfiles streams the server's export. It fails if the stream ends
// without the server's closing count, so a cut connection is never taken
// for a smaller directory.
func (c *Client) ExportProfiles(ctx context.Context, fn func(partmap.Record) error) error {
	_, err := c.do(ctx, request{method: "GET", path: "/customer-profiles/export", stream: func(resp *http.Response) error {
		n := 0
		return readLines(resp, "export", "profile", ExportCountTrailer, ExportErrorTrailer, func(line []byte) error {
			n++
			rec, err := partmap.ParseRecordJSON(line)
			if err != nil {
				return fmt.Errorf("export: profile %d: %w", n, err)
			}
			return fn(rec)
		})
	}}, nil)
	return err
}

// ExportOptions configure Export.
type ExportOptions struct {
	// Progress, if set, is called with the count of profiles written so
	// far, every 1024 profiles, on the goroutine that called Export.
	Progress func(profiles int)
}

// Export writes the server's export to w as JSON Lines, one compact profile
// per line, with its deadlines if it has any (partmap.MarshalRecordJSON):
// what Import reads back. It returns how many profiles it wrote.
// After an error w may hold a part of the export, cut anywhere.
func (c *Client) Export(ctx context.Context, w io.Writer, opts ExportOptions) (int, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	n := 0
	err := c.ExportProfiles(ctx, func(rec partmap.Record) error {
		line, err := partmap.MarshalRecordJSON(rec)
		if err != nil {
			return err
		}
		bw.Write(line)
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
		if n++; n%1024 == 0 && opts.Progress != nil {
			opts.Progress(n)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}
