package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

// wireChange is a change as the wire carries it.
type wireChange struct {
	Cursor       string            `json:"cursor"`
	Time         string            `json:"time"`
	Op           string            `json:"op"`
	EmailAddress string            `json:"emailAddress"`
	ETag         *string           `json:"etag"`
	Profile      map[string]string `json:"profile"`
}

type wirePage struct {
	Changes  []wireChange `json:"changes"`
	Next     string       `json:"next"`
	CaughtUp *bool        `json:"caughtUp"`
}

// getChanges reads a page of the feed as JSON, failing unless it is 200.
func getChanges(t *testing.T, srvURL, query string, header ...string) wirePage {
	t.Helper()
	r := send(t, "GET", srvURL+base+"/changes"+query, nil, header...)
	if r.status != 200 {
		t.Fatalf("GET changes%s: %d %s", query, r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET changes%s: Content-Type %q", query, ct)
	}
	var p wirePage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("GET changes%s: %v: %s", query, err, r.body)
	}
	if p.CaughtUp == nil {
		t.Fatalf("GET changes%s: no caughtUp: %s", query, r.body)
	}
	return p
}

// cursors lists the changes' cursors, in order.
func cursors(cs []wireChange) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Cursor
	}
	return out
}

// put writes a profile over HTTP.
func put(t *testing.T, srvURL, profile string) {
	t.Helper()
	if r := send(t, "PUT", srvURL+base+"/customer-profile", strings.NewReader(profile), "Content-Type", "application/json"); r.status/100 != 2 {
		t.Fatalf("PUT %s: %d %s", profile, r.status, r.body)
	}
}

func del(t *testing.T, srvURL, email string) {
	t.Helper()
	if r := send(t, "DELETE", srvURL+base+"/customer-profile?emailAddress="+url.QueryEscape(email), nil); r.status != 204 {
		t.Fatalf("DELETE %s: %d %s", email, r.status, r.body)
	}
}

// newFeedServer serves a started store with a feed.
func newFeedServer(t *testing.T, opts *pebble.Options) (*httptest.Server, *pebble.Store) {
	t.Helper()
	srv, store := newStartedServer(t, opts)
	return srv, store
}

// openStream opens an event stream; cancel hangs up.
func openStream(t *testing.T, target string, header ...string) (*http.Response, *sseReader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, newSSEReader(resp.Body), func() { cancel(); resp.Body.Close() }
}

// nextChange reads the stream's next event, which must be a change, within
// a bound that only a broken stream reaches.
func nextChange(t *testing.T, s *sseReader) wireChange {
	t.Helper()
	type result struct {
		e   sseEvent
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := s.next()
		done <- result{e, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s")
	}
	if r.err != nil {
		t.Fatalf("reading the stream: %v", r.err)
	}
	if r.e.event != "change" {
		t.Fatalf("event %q, want change: %s", r.e.event, r.e.data)
	}
	var c wireChange
	if err := json.Unmarshal([]byte(r.e.data), &c); err != nil {
		t.Fatalf("event data %q: %v", r.e.data, err)
	}
	if c.Cursor != r.e.id || !r.e.hasID {
		t.Fatalf("event id %q, its change's cursor %q", r.e.id, c.Cursor)
	}
	return c
}

// A feed read page by page holds every change once, in order, and a read
// resumed from any cursor holds exactly what followed it.
func TestChangesPages(t *testing.T) {
	srv, _ := newFeedServer(t, nil)
	begin := getChanges(t, srv.URL, "?after=now").Next
	for i := range 7 {
		put(t, srv.URL, fmt.Sprintf(`{"emailAddress":"p%d@example.com","n":"%d"}`, i, i))
	}
	del(t, srv.URL, "p3@example.com")
	put(t, srv.URL, `{"emailAddress":"p0@example.com","n":"again"}`)

	all := getChanges(t, srv.URL, "?after="+begin).Changes
	if len(all) != 9 {
		t.Fatalf("%d changes, want 9: %+v", len(all), all)
	}
	for i, c := range all {
		deleted := i == 7
		switch {
		case deleted && (c.Op != "delete" || c.Profile != nil || c.ETag != nil || c.EmailAddress != "p3@example.com"):
			t.Errorf("the deletion: %+v", c)
		case !deleted && (c.Op != "put" || c.Profile["emailAddress"] != c.EmailAddress || c.ETag == nil):
			t.Errorf("change %d: %+v", i, c)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", c.Time); err != nil {
			t.Errorf("change %d: time %q is not RFC 3339 UTC to the millisecond", i, c.Time)
		}
	}

	// Pages of 2 add up to the whole.
	var paged []wireChange
	after := begin
	for n := 0; ; n++ {
		p := getChanges(t, srv.URL, "?limit=2&after="+after)
		if len(p.Changes) > 2 || n > 10 {
			t.Fatalf("page %d: %+v", n, p)
		}
		// 9 changes: four full pages, then the last one, caught up.
		if *p.CaughtUp != (n == 4) || len(p.Changes) != min(2, 9-2*n) {
			t.Fatalf("page %d of 2: %d changes, caught up %v", n, len(p.Changes), *p.CaughtUp)
		}
		if p.Next != p.Changes[len(p.Changes)-1].Cursor {
			t.Errorf("page %d: next %s, its last change %s", n, p.Next, p.Changes[len(p.Changes)-1].Cursor)
		}
		paged = append(paged, p.Changes...)
		after = p.Next
		if *p.CaughtUp {
			break
		}
	}
	if p := getChanges(t, srv.URL, "?limit=2&after="+after); len(p.Changes) != 0 || p.Next != after || !*p.CaughtUp {
		t.Errorf("after the last page: %+v, want an empty page, caught up, where it was", p)
	}
	if got, want := cursors(paged), cursors(all); !slices.Equal(got, want) {
		t.Errorf("paged %q, want %q", got, want)
	}

	// From every cursor, exactly the rest.
	for i, c := range all {
		if got, want := cursors(getChanges(t, srv.URL, "?after="+c.Cursor).Changes), cursors(all[i+1:]); !slices.Equal(got, want) {
			t.Errorf("after change %d: %q, want %q", i, got, want)
		}
	}
	// From the start of the feed: everything it holds, these included.
	if got := cursors(getChanges(t, srv.URL, "").Changes); !slices.Equal(got, cursors(all)) {
		t.Errorf("from the start: %q, want %q", got, cursors(all))
	}
}

// A long poll answers as soon as a change is committed, well within its
// wait.
func TestChangesLongPoll(t *testing.T) {
	srv, _ := newFeedServer(t, nil)
	now := getChanges(t, srv.URL, "?after=now").Next
	const wait = 5 * time.Second
	wrote := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Post(srv.URL+base+"/customer-profile/set-fields?emailAddress=late@example.com", "application/json", strings.NewReader(`{"a":"1"}`))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 201 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		wrote <- err
	}()
	began := time.Now()
	p := getChanges(t, srv.URL, "?wait=5s&after="+now)
	if err := <-wrote; err != nil {
		t.Fatalf("the write: %v", err)
	}
	if took := time.Since(began); took >= wait {
		t.Errorf("the long poll took %s: it did not answer when the write came", took)
	}
	if len(p.Changes) != 1 || p.Changes[0].EmailAddress != "late@example.com" {
		t.Errorf("the long poll: %+v", p)
	}
	// Nothing comes: an empty page, its cursor where it was.
	if p2 := getChanges(t, srv.URL, "?wait=50ms&after="+p.Next); len(p2.Changes) != 0 || p2.Next != p.Next {
		t.Errorf("a long poll that nothing ended: %+v", p2)
	}
}

// An event stream, read as a browser would, hung up midway and resumed
// from Last-Event-ID, delivers every change once, then follows new ones.
func TestChangesEventStream(t *testing.T) {
	srv, _ := newFeedServer(t, nil)
	begin := getChanges(t, srv.URL, "?after=now").Next
	for i := range 6 {
		put(t, srv.URL, fmt.Sprintf(`{"emailAddress":"s%d@example.com"}`, i))
	}
	all := getChanges(t, srv.URL, "?after="+begin).Changes

	target := srv.URL + base + "/changes?limit=2&after=" + begin
	resp, s, hangUp := openStream(t, target)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the stream: %d, headers %v", resp.StatusCode, resp.Header)
	}
	var got []wireChange
	for range 3 {
		got = append(got, nextChange(t, s))
	}
	hangUp()

	// As an EventSource reconnects: the same URL, and the last id it got.
	_, s, hangUp = openStream(t, target, "Last-Event-ID", s.lastID)
	defer hangUp()
	for range len(all) - 3 {
		got = append(got, nextChange(t, s))
	}
	if g, w := cursors(got), cursors(all); !slices.Equal(g, w) {
		t.Fatalf("across the reconnection: %q, want %q", g, w)
	}
	// And then it follows.
	put(t, srv.URL, `{"emailAddress":"later@example.com"}`)
	if c := nextChange(t, s); c.EmailAddress != "later@example.com" || c.Profile["emailAddress"] != "later@example.com" {
		t.Errorf("the change after the reconnection: %+v", c)
	}
}

// An idle stream sends a comment every heartbeat.
func TestChangesHeartbeat(t *testing.T) {
	pmhttp.SetSSEHeartbeat(t, 50*time.Millisecond)
	srv, _ := newFeedServer(t, nil)
	_, s, hangUp := openStream(t, srv.URL+base+"/changes?after=now")
	defer hangUp()
	done := make(chan error, 1)
	go func() {
		_, err := s.next() // returns only for an event, or when the stream ends
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	hangUp()
	if err := <-done; err == nil {
		t.Error("an idle stream sent an event")
	}
	// The first comment says the stream is waiting; then one per
	// heartbeat: 500 ms of 50 ms heartbeats leave room for many.
	if len(s.comments) < 3 {
		t.Errorf("%d comments in 500 ms of 50 ms heartbeats: %q", len(s.comments), s.comments)
	}
}

// Filters select by one profile, in any spelling, or by partitions.
func TestChangesFilters(t *testing.T) {
	srv, _ := newFeedServer(t, nil)
	emails := []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com", "erin@example.com", "fay@example.com"}
	for _, e := range emails {
		put(t, srv.URL, `{"emailAddress":"`+e+`"}`)
	}
	put(t, srv.URL, `{"emailAddress":"ALICE@example.com","n":"2"}`)
	if r := send(t, "POST", srv.URL+base+"/customer-profile/rename?emailAddress=bob@example.com&to=alice2@example.com", nil); r.status != 201 {
		t.Fatalf("rename: %d %s", r.status, r.body)
	}

	for _, spelling := range []string{"alice@example.com", "  Alice@EXAMPLE.com", "ALICE@example.com	"} {
		p := getChanges(t, srv.URL, "?emailAddress="+url.QueryEscape(spelling))
		if len(p.Changes) != 2 || p.Changes[0].EmailAddress != "alice@example.com" || p.Changes[1].Profile["n"] != "2" {
			t.Errorf("the changes of %q: %+v", spelling, p.Changes)
		}
	}
	var ops []string
	for _, c := range getChanges(t, srv.URL, "?emailAddress=bob@example.com").Changes {
		ops = append(ops, c.Op)
	}
	if !slices.Equal(ops, []string{"put", "rename"}) {
		t.Errorf("bob's changes: %q; want the put and the rename that deleted it", ops)
	}

	// Partitions: the range [from, to) keeps exactly the profiles in it.
	all := getChanges(t, srv.URL, "").Changes
	for _, r := range [][2]int{{0, 500}, {500, 0}, {0, 0}, {250, 750}} {
		var want []string
		for _, c := range all {
			p := int(partmap.PartitionOf(c.EmailAddress, partmap.DefaultPartitions))
			if p >= r[0] && (r[1] == 0 || p < r[1]) {
				want = append(want, c.Cursor)
			}
		}
		q := fmt.Sprintf("?from=%d", r[0])
		if r[1] != 0 {
			q += fmt.Sprintf("&to=partition-%d", r[1])
		}
		if got := cursors(getChanges(t, srv.URL, q).Changes); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}

// Every way to be refused says what is wrong; an expired cursor is 410,
// to a page and, as a problem and not a stream, to an event stream.
func TestChangesErrors(t *testing.T) {
	srv, store := newFeedServer(t, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, FeedRetention: &partmap.Retention{Events: 2}}})
	changes := srv.URL + base + "/changes"
	for name, tc := range map[string]struct {
		query  string
		status int
		code   partmap.Code
		detail string
	}{
		"ErrUnknownParameter": {"?since=now", 400, partmap.EINVALID, "since"},
		"ErrWait":             {"?wait=soon", 400, partmap.EINVALID, "wait"},
		"ErrWaitTooLong":      {"?wait=301", 400, partmap.EINVALID, "wait"},
		"ErrLimit":            {"?limit=0", 400, partmap.EINVALID, "limit"},
		"ErrCursor":           {"?after=nope", 400, partmap.EINVALID, "cursor"},
		"ErrRange":            {"?from=900&to=100", 400, partmap.EINVALID, "partition range"},
		"ErrBothFilters":      {"?emailAddress=a@example.com&to=3", 400, partmap.EINVALID, "not both"},
		"ErrEmptyEmail":       {"?emailAddress=", 400, partmap.EINVALIDEMAIL, "empty"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, accept := range []string{"application/json", "text/event-stream"} {
				r := send(t, "GET", changes+tc.query, nil, "Accept", accept)
				p := r.problem(t)
				if r.status != tc.status || p["type"] != pmhttp.ProblemTypePrefix+string(tc.code) || !strings.Contains(fmt.Sprint(p["detail"]), tc.detail) {
					t.Errorf("Accept %s: %d %s; want %d %s about %q", accept, r.status, r.body, tc.status, tc.code, tc.detail)
				}
			}
		})
	}

	first := getChanges(t, srv.URL, "?after=now").Next
	for i := range 5 {
		put(t, srv.URL, fmt.Sprintf(`{"emailAddress":"x%d@example.com"}`, i))
	}
	if _, err := store.TrimFeed(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name   string
		header []string
	}{
		{"JSON", nil},
		{"EventStream", []string{"Accept", "text/event-stream"}},
		{"LastEventID", []string{"Accept", "text/event-stream", "Last-Event-ID", first}},
	} {
		target := changes + "?after=" + first
		if len(x.header) == 4 {
			target = changes + "?after=now" // the header wins
		}
		r := send(t, "GET", target, nil, x.header...)
		if p := r.problem(t); r.status != 410 || p["type"] != pmhttp.ProblemTypePrefix+string(partmap.ECURSOREXPIRED) {
			t.Errorf("%s: %d %s", x.name, r.status, r.body)
		}
	}
	if got := getChanges(t, srv.URL, "").Changes; len(got) != 2 || got[1].EmailAddress != "x4@example.com" {
		t.Errorf("the feed keeps its 2 newest: %+v", got)
	}

	// The Go client: the same error, by its code.
	c := newClient(t, srv.URL, nil)
	if _, err := c.Changes(t.Context(), partmap.ChangeQuery{After: first}); partmap.ErrorCode(err) != partmap.ECURSOREXPIRED {
		t.Errorf("the client: %v, want cursor-expired", err)
	}
}

// The Go client reads the feed as the store gives it.
func TestClientChanges(t *testing.T) {
	srv, store := newFeedServer(t, nil)
	c := newClient(t, srv.URL, nil)
	put(t, srv.URL, `{"emailAddress":"c@example.com","a":"1"}`)
	if r := send(t, "POST", srv.URL+base+"/customer-profile/expire?emailAddress=c@example.com&fields=a&seconds=600", nil); r.status != 200 {
		t.Fatalf("expire: %d %s", r.status, r.body)
	}
	del(t, srv.URL, "c@example.com")
	want, err := store.Changes(t.Context(), partmap.ChangeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Changes(t.Context(), partmap.ChangeQuery{Email: "C@example.com", Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Changes) != 3 || got.Next != want.Next {
		t.Fatalf("client %+v, store %+v", got, want)
	}
	for i := range got.Changes {
		g, w := got.Changes[i], want.Changes[i]
		if g.Cursor != w.Cursor || !g.Time.Equal(w.Time) || g.Op != w.Op || g.Email != w.Email || g.Deleted() != w.Deleted() {
			t.Errorf("change %d: client %+v, store %+v", i, g, w)
		}
		if !w.Deleted() && (g.Record.Version != w.Record.Version || g.Record.Deadlines.Fields["a"] != w.Record.Deadlines.Fields["a"]) {
			t.Errorf("change %d: client record %+v, store %+v", i, g.Record, w.Record)
		}
	}
	if got.Changes[1].Record.Deadlines.Fields["a"] == 0 {
		t.Errorf("the expiry's change has no deadline: %+v", got.Changes[1].Record)
	}
}

// The client takes caughtUp from the server, and from a server older than
// the member, which sent none, the rule it followed: an empty page that
// stayed where it was asked is caught up.
func TestClientChangesCaughtUp(t *testing.T) {
	replies := map[string]string{
		"":  `{"changes":[],"next":"7","caughtUp":true}`,
		"7": `{"changes":[],"next":"9","caughtUp":false}`,
		"8": `{"changes":[],"next":"8"}`,
		"9": `{"changes":[],"next":"10"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, replies[r.URL.Query().Get("after")])
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	for after, want := range map[string]bool{"": true, "7": false, "8": true, "9": false} {
		page, err := c.Changes(t.Context(), partmap.ChangeQuery{After: after})
		if err != nil || page.CaughtUp != want {
			t.Errorf("after %q: %+v, %v; want caught up %v", after, page, err, want)
		}
	}
}

// A token of the read scope reads the feed, as a page and as a stream.
func TestChangesScope(t *testing.T) {
	tokens, parsed := newTokens(t, auth.ScopeRead, auth.ScopeAdmin)
	store := newStore(t, nil)
	srv := serveStore(t, store, &pmhttp.ServerOptions{Tokens: parsed})
	if r := send(t, "POST", srv.URL+base+"/start", nil, bearer(tokens[auth.ScopeAdmin])...); r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	read := bearer(tokens[auth.ScopeRead])
	getChanges(t, srv.URL, "?after=now", read...)
	resp, _, hangUp := openStream(t, srv.URL+base+"/changes?after=now", read...)
	hangUp()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("a stream with a read token: %d %v", resp.StatusCode, resp.Header)
	}
	if r := send(t, "GET", srv.URL+base+"/changes", nil); r.status != 401 {
		t.Errorf("without a token: %d %s", r.status, r.body)
	}
	if r := send(t, "GET", srv.URL+base+"/changes", nil, "Accept", "text/event-stream"); r.status != 401 {
		t.Errorf("a stream without a token: %d %s", r.status, r.body)
	}
}

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

// A shutdown ends long polls and event streams instead of waiting for
// them: a long poll is 503, to be asked again of the server that comes
// back, and a stream ends, for its EventSource to reconnect.
func TestChangesEndAtShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, served := serve(t, ctx, &pmhttp.ServeOptions{ShutdownTimeout: 20 * time.Second})
	path := base + "/changes?after=now"

	// The long poll goes on a connection of its own, and is in its handler
	// before the shutdown: net/http drops a request it has not read yet.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s&wait=5m HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, addr)
	waitInFlight(t, addr, 1)
	_, s, hangUp := openStream(t, "http://"+addr+path)
	defer hangUp()
	if line, err := s.line(); err != nil || !strings.HasPrefix(line, ":") { // the stream is in its loop
		t.Fatalf("the stream's first line: %q, %v", line, err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.next() // only the end of the stream ends an idle one
		ended <- err
	}()

	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v; the feed's requests held the shutdown up", err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // a broken shutdown would leave it waiting its 5 minutes
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the long poll: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a long poll at shutdown: %d %v", resp.StatusCode, resp.Header)
	}
	if err := <-ended; err == nil {
		t.Error("an idle stream sent an event")
	}
	if !slices.Contains(s.comments, "the server is shutting down") {
		t.Errorf("the stream's comments: %q", s.comments)
	}
}
