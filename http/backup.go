package http

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/partmap/partmap"
)

// handleBackup streams a consistent copy of an embedded store as a tar
// archive (partmap.Backuper). The status goes out with the archive's first
// byte: a backup that fails before it (no checkpoint could be taken) is an
// ordinary problem reply, and one that fails after it shows as an archive
// without its closing manifest, which the client refuses.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request, _ url.Values) error {
	b, ok := s.store.(partmap.Backuper)
	if !ok {
		return partmap.Errorf(partmap.EUNSUPPORTED, "this server's store is kept by Redis: back it up with Redis's own persistence "+
			"(RDB snapshots or the AOF), or write every profile out with partmap export (GET customer-profiles/export)")
	}
	if r.Method == http.MethodHead {
		// What a GET would start with, without taking a checkpoint for
		// nothing: net/http would run the whole backup and drop the body.
		backupHeader(w)
		w.WriteHeader(http.StatusOK)
		return nil
	}
	aw := &archiveWriter{w: w, rc: http.NewResponseController(w)}
	_, err := b.Backup(r.Context(), aw)
	switch {
	case err != nil && !aw.started:
		return err
	case err != nil && r.Context().Err() != nil:
		s.log.Info("backup abandoned: the client went away", "err", err)
	case err != nil:
		s.log.Error("backup failed midway; the client gets an archive without its manifest", "err", err)
	}
	return nil
}

func backupHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// archiveWriter sends the 200 and its headers with the first byte. As an
// export does, it bounds how long a reader may stall rather than the whole
// reply: the server's write timeout (a minute by default) would cut any
// backup of more than a few gigabytes short.
type archiveWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	started  bool
	deadline time.Time // as last set
}

func (a *archiveWriter) Write(p []byte) (int, error) {
	if !a.started {
		a.started = true
		backupHeader(a.w)
		a.w.WriteHeader(http.StatusOK)
	}
	if now := time.Now(); a.deadline.Sub(now) < streamStall-time.Second {
		a.deadline = now.Add(streamStall)
		a.rc.SetWriteDeadline(a.deadline)
	}
	return a.w.Write(p)
}

// Backup hands the server's backup archive to read, as it arrives;
// pebble.Unpack checks it and writes it out.
func (c *Client) Backup(ctx context.Context, read func(io.Reader) error) error {
	_, err := c.do(ctx, request{method: "GET", path: "/backup", stream: func(resp *http.Response) error {
		return read(resp.Body)
	}}, nil)
	return err
}
