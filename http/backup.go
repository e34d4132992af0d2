package http

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/partmap/partmap"
)

// handleBackup streams a consistent copy of an embedded store as a tar
// archive (partmap.Backuper). Its status goes before the archive, so a
// failure midway shows as an archive without its closing manifest, which
// the client refuses.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	b, ok := s.store.(partmap.Backuper)
	if !ok {
		return partmap.Errorf(partmap.EUNSUPPORTED, "this server's store is kept by Redis: back it up with Redis's own persistence "+
			"(RDB snapshots or the AOF), or write every profile out with partmap export (GET customer-profiles/export)")
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	if _, err := b.Backup(r.Context(), w); err != nil {
		if r.Context().Err() != nil {
			s.log.Info("backup abandoned: the client went away", "err", err)
		} else {
			s.log.Error("backup failed midway; the client gets an archive without its manifest", "err", err)
		}
	}
	return nil
}

// Backup hands the server's backup archive to read, as it arrives;
// pebble.Unpack checks it and writes it out.
func (c *Client) Backup(ctx context.Context, read func(io.Reader) error) error {
	_, err := c.do(ctx, request{method: "GET", path: "/backup", stream: func(resp *http.Response) error {
		return read(resp.Body)
	}}, nil)
	return err
}
