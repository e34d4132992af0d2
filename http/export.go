package http

import (
	"context"
	"fmt"
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

// handleExport streams every profile as JSON Lines from one snapshot.
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
		line, err := rec.Profile.MarshalJSON()
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
			p, err := partmap.ParseProfileJSON(line)
			if err != nil {
				return fmt.Errorf("export: profile %d: %w", n, err)
			}
			return fn(partmap.Record{Profile: p})
		})
	}}, nil)
	return err
}
