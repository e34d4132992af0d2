package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// changeJSON is one change on the wire, in a JSON page and in an SSE
// event's data.
type changeJSON struct {
	Cursor  string           `json:"cursor"`
	Time    string           `json:"time"` // RFC 3339, UTC, milliseconds
	Op      partmap.OpKind   `json:"op"`
	Email   string           `json:"emailAddress"`
	ETag    string           `json:"etag,omitempty"`    // absent for a deletion
	Profile *partmap.Profile `json:"profile"`           // null for a deletion
	Expires *deadlinesJSON   `json:"expires,omitempty"` // the deadlines it has, Unix ms
}

type deadlinesJSON struct {
	Profile int64            `json:"profile,omitempty"`
	Fields  map[string]int64 `json:"fields,omitempty"`
}

type changesReply struct {
	Changes  []changeJSON `json:"changes"`
	Next     string       `json:"next"`
	CaughtUp *bool        `json:"caughtUp"` // nil from a server older than the member
}

const changeTime = "2006-01-02T15:04:05.000Z07:00"

func toChangeJSON(c partmap.Change) changeJSON {
	out := changeJSON{Cursor: c.Cursor, Time: c.Time.UTC().Format(changeTime), Op: c.Op, Email: c.Email}
	if c.Record != nil {
		out.ETag, out.Profile = c.Record.Version.ETag(), &c.Record.Profile
		if d := c.Record.Deadlines; !d.IsZero() {
			out.Expires = &deadlinesJSON{Profile: d.Profile, Fields: d.Fields}
		}
	}
	return out
}

// MarshalChange encodes a change as GET …/changes sends it, in a page and
// in an event: one line of JSON, without its newline. `partmap watch
// --json` prints these.
func MarshalChange(c partmap.Change) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // stored text reads back as it was written, as in a page
	if err := enc.Encode(toChangeJSON(c)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func fromChangeJSON(j changeJSON) (partmap.Change, error) {
	t, err := time.Parse(changeTime, j.Time)
	if err != nil {
		return partmap.Change{}, fmt.Errorf("server sent a bad change time %q", j.Time)
	}
	c := partmap.Change{Cursor: j.Cursor, Time: t, Op: j.Op, Email: j.Email}
	if j.Profile != nil {
		v, err := partmap.ParseETag(j.ETag)
		if err != nil {
			return partmap.Change{}, fmt.Errorf("server sent a bad change ETag: %w", err)
		}
		c.Record = &partmap.Record{Profile: *j.Profile, Version: v, Committed: t.UnixMilli()}
		if j.Expires != nil {
			c.Record.Deadlines = partmap.Deadlines{Profile: j.Expires.Profile, Fields: j.Expires.Fields}
		}
	}
	return c, nil
}

// changeQuery reads the route's parameters.
func changeQuery(r *http.Request, q url.Values) (partmap.ChangeQuery, error) {
	var cq partmap.ChangeQuery
	var err error
	if cq.After, err = oneParam(q, "after", false); err != nil {
		return cq, err
	}
	if v, err := oneParam(q, "limit", false); err != nil {
		return cq, err
	} else if v != "" {
		if cq.Limit, err = strconv.Atoi(v); err != nil || cq.Limit < 1 || cq.Limit > partmap.MaxChangesPage {
			return cq, &partmap.Error{Code: partmap.EINVALID, Field: "limit", Message: fmt.Sprintf("limit must be an integer from 1 to %d, not %q", partmap.MaxChangesPage, v)}
		}
	}
	if v, err := oneParam(q, "wait", false); err != nil {
		return cq, err
	} else if v != "" {
		if cq.Wait, err = parseWait(v); err != nil {
			return cq, err
		}
	}
	for _, p := range []struct {
		name string
		into *partmap.Partition
	}{{"from", &cq.From}, {"to", &cq.To}} {
		v, err := oneParam(q, p.name, false)
		if err != nil {
			return cq, err
		}
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "partition-"), 10, 31)
		if err != nil {
			return cq, &partmap.Error{Code: partmap.EINVALID, Field: p.name, Message: fmt.Sprintf("%s must be a partition number or a name like partition-278, not %q", p.name, v)}
		}
		*p.into = partmap.Partition(n)
	}
	if cq.Email, err = oneParam(q, "emailAddress", false); err != nil {
		return cq, err
	}
	if _, given := q["emailAddress"]; given && cq.Email == "" {
		// Not "no filter": a consumer of one profile must not get them all.
		return cq, &partmap.Error{Code: partmap.EINVALIDEMAIL, Field: partmap.FieldEmail, Message: "email address is empty"}
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" && wantsEvents(r) {
		cq.After = id // an EventSource resuming: the header wins over the URL it reconnects to
	}
	return cq, nil
}

// parseWait takes a Go duration ("30s") or whole seconds ("30").
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		if s, serr := strconv.ParseUint(v, 10, 31); serr == nil {
			d, err = time.Duration(s)*time.Second, nil
		}
	}
	if err != nil || d < 0 || d > partmap.MaxChangesWait {
		return 0, &partmap.Error{Code: partmap.EINVALID, Field: "wait",
			Message: fmt.Sprintf("wait must be seconds or a duration such as 30s, at most %s, not %q", partmap.MaxChangesWait, v)}
	}
	return d, nil
}

func wantsEvents(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

func (s *Server) feeder() (partmap.Feeder, error) {
	f, ok := s.store.(partmap.Feeder)
	if !ok {
		return nil, partmap.Errorf(partmap.EUNSUPPORTED, "this server's store keeps no change feed")
	}
	return f, nil
}

// handleChanges answers a page of the change feed as JSON, long-polling
// with wait, or, to Accept: text/event-stream, streams it as Server-Sent
// Events for as long as the client stays.
func (s *Server) handleChanges(w http.ResponseWriter, r *http.Request, q url.Values) error {
	f, err := s.feeder()
	if err != nil {
		return err
	}
	cq, err := changeQuery(r, q)
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		cq.Wait = 0 // a HEAD tells what a GET would start with; it never waits
	}
	ctx, cancel := s.feedContext(r.Context())
	defer cancel()
	rc := http.NewResponseController(w)
	if wantsEvents(r) {
		return s.streamChanges(ctx, w, r, rc, f, cq)
	}
	// The server's write timeout would cut a long poll short.
	rc.SetWriteDeadline(time.Now().Add(cq.Wait + streamStall))
	page, err := f.Changes(ctx, cq)
	if err != nil {
		return s.feedError(r, err)
	}
	reply := changesReply{Changes: make([]changeJSON, len(page.Changes)), Next: page.Next, CaughtUp: &page.CaughtUp}
	for i, c := range page.Changes {
		reply.Changes[i] = toChangeJSON(c)
	}
	return writeJSON(w, http.StatusOK, reply)
}

// sseHeartbeat is how long an event stream stays silent at most: a comment
// line then tells proxies and the client that it is alive. A variable only
// so that tests can shorten it.
var sseHeartbeat = 15 * time.Second

// streamChanges sends each change as an SSE event whose id is its cursor,
// so that an EventSource that reconnects resumes after the last one it
// got. A bad cursor is an ordinary problem reply, before the stream starts;
// an error later ends the stream with an "error" event holding the problem.
func (s *Server) streamChanges(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *http.ResponseController, f partmap.Feeder, cq partmap.ChangeQuery) error {
	cq.Wait = sseHeartbeat
	limit := cq.Limit
	first, err := f.Changes(ctx, partmap.ChangeQuery{After: cq.After, Limit: limit, From: cq.From, To: cq.To, Email: cq.Email})
	if err != nil {
		return s.feedError(r, err)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil // the headers of the stream, and no stream
	}
	out := bufio.NewWriterSize(w, 32<<10)
	page := first
	for {
		rc.SetWriteDeadline(time.Now().Add(streamStall))
		for _, c := range page.Changes {
			data, err := MarshalChange(c)
			if err != nil {
				return errStreamFailed{err}
			}
			fmt.Fprintf(out, "id: %s\nevent: change\ndata: %s\n\n", c.Cursor, data)
		}
		if len(page.Changes) == 0 {
			fmt.Fprint(out, ": waiting for changes\n\n")
		}
		if err := out.Flush(); err != nil {
			return nil // the client went away
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		cq.After = page.Next
		page, err = f.Changes(ctx, cq)
		switch {
		case r.Context().Err() != nil:
			return nil
		case s.stopping():
			// An EventSource reconnects, with Last-Event-ID, to the
			// server that comes back.
			fmt.Fprint(out, ": the server is shutting down\n\n")
			out.Flush()
			return nil
		case err != nil:
			p := s.problem(r, err)
			p.Instance = r.URL.Path
			body, _ := json.Marshal(p)
			fmt.Fprintf(out, "event: error\ndata: %s\n\n", body)
			out.Flush()
			return errStreamFailed{err}
		}
	}
}

// stopFeeds ends every long poll and event stream, at shutdown.
func (s *Server) stopFeeds() { s.stopFeedsOnce.Do(func() { close(s.feedsDone) }) }

func (s *Server) stopping() bool {
	select {
	case <-s.feedsDone:
		return true
	default:
		return false
	}
}

// feedError is the reply to a read of the feed that failed: 503 when the
// shutdown cut it short. Not an empty page: its next could only be the
// cursor asked with, and "now" again would skip what is written before the
// server is back.
func (s *Server) feedError(r *http.Request, err error) error {
	if s.stopping() && r.Context().Err() == nil {
		return partmap.Errorf(partmap.EUNAVAILABLE, "the server is shutting down; ask again")
	}
	return err
}

// feedContext is the request's context, cancelled too when the server
// begins to shut down.
func (s *Server) feedContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-s.feedsDone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// Changes reads a page of the change feed (GET …/changes). The client is a
// partmap.Feeder.
func (c *Client) Changes(ctx context.Context, q partmap.ChangeQuery) (partmap.ChangePage, error) {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait != 0 {
		v.Set("wait", q.Wait.String())
	}
	if q.From != 0 {
		v.Set("from", strconv.Itoa(int(q.From)))
	}
	if q.To != 0 {
		v.Set("to", strconv.Itoa(int(q.To)))
	}
	if q.Email != "" {
		v.Set("emailAddress", q.Email)
	}
	var out changesReply
	if _, err := c.do(ctx, request{method: "GET", path: "/changes", query: v}, &out); err != nil {
		return partmap.ChangePage{}, err
	}
	page := partmap.ChangePage{Next: out.Next, Changes: make([]partmap.Change, len(out.Changes))}
	if out.CaughtUp != nil {
		page.CaughtUp = *out.CaughtUp
	} else {
		// A server from before caughtUp: its rule was an empty page that
		// stays where it was asked (true of its Pebble store only).
		page.CaughtUp = len(out.Changes) == 0 && out.Next == q.After
	}
	for i, j := range out.Changes {
		ch, err := fromChangeJSON(j)
		if err != nil {
			return partmap.ChangePage{}, err
		}
		page.Changes[i] = ch
	}
	return page, nil
}

var _ partmap.Feeder = (*Client)(nil)
