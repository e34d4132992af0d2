package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/directory"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
)

const base = pmhttp.BasePath

// newServer serves a fresh Pebble store over a real listener.
func newServer(t *testing.T, opts *pebble.Options) (*httptest.Server, *pebble.Store) {
	t.Helper()
	store := newStore(t, opts)
	return serveStore(t, store, nil), store
}

// failFast is the options of a store whose writes do not wait for a
// held lock: they fail at once.
func failFast() *pebble.Options {
	return &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}}
}

// newStartedServer is newServer with the directory started.
func newStartedServer(t *testing.T, opts *pebble.Options) (*httptest.Server, *pebble.Store) {
	t.Helper()
	srv, store := newServer(t, opts)
	start(t, srv.URL)
	return srv, store
}

// newStore opens a fresh Pebble store, closed at the end of the test.
func newStore(t testing.TB, opts *pebble.Options) *pebble.Store {
	t.Helper()
	store, err := pebble.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// serveStore serves store over a real listener, closed at the end of the
// test (before a store opened earlier in it).
func serveStore(t testing.TB, store partmap.Store, opts *pmhttp.ServerOptions) *httptest.Server {
	var o pmhttp.ServerOptions
	if opts != nil {
		o = *opts
	}
	if _, embedded := store.(*pebble.Store); embedded {
		o.GroupWrites = true // as partmap serve has it
	}
	srv := httptest.NewServer(pmhttp.NewServer(store, &o))
	t.Cleanup(srv.Close)
	return srv
}

// newTokens makes a token for each scope, named after it, and the parsed
// token file that admits them.
func newTokens(t *testing.T, scopes ...auth.Scope) (map[auth.Scope]string, *auth.Tokens) {
	t.Helper()
	var file strings.Builder
	tokens := map[auth.Scope]string{}
	for _, scope := range scopes {
		tok, line, err := auth.NewToken("user-"+scope.String(), scope)
		if err != nil {
			t.Fatal(err)
		}
		tokens[scope] = tok
		file.WriteString(line + "\n")
	}
	parsed, err := auth.ParseTokens(strings.NewReader(file.String()))
	if err != nil {
		t.Fatal(err)
	}
	return tokens, parsed
}

// bearer is the header that presents tok.
func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func newClient(t *testing.T, url string, opts *pmhttp.ClientOptions) *pmhttp.Client {
	t.Helper()
	c, err := pmhttp.NewClient(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The Go client in front of a server is a partmap.Store like any other.
func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store {
		srv, _ := newServer(t, nil)
		return newClient(t, srv.URL, nil)
	})
}

// An export and an import through the client and the server keep the
// deadlines, as they do on the store itself.
func TestExportDeadlines(t *testing.T) {
	storetest.RunExportDeadlines(t, func(t *testing.T, clock func() time.Time) (partmap.Store, func(context.Context) error) {
		srv, store := newServer(t, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Clock: clock, SweepInterval: -1}})
		return newClient(t, srv.URL, nil), func(ctx context.Context) error { _, err := store.Sweep(ctx); return err }
	})
}

// The server reads a batch lookup from one view of its Pebble store.
func TestBatchAtOneInstant(t *testing.T) {
	storetest.RunBatchAtOneInstant(t, func(t *testing.T) partmap.Store {
		srv, _ := newServer(t, nil)
		return newClient(t, srv.URL, nil)
	})
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(t *testing.T) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, r.body)
	}
	var p map[string]any
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	return p
}

func send(t *testing.T, method, url string, body io.Reader, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func start(t *testing.T, url string) {
	t.Helper()
	if r := send(t, "POST", url+base+"/start", nil); r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
}

func TestStartRoute(t *testing.T) {
	srv, _ := newServer(t, nil)
	r := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=a@example.com", nil)
	if p := r.problem(t); r.status != 409 || p["type"] != "urn:partmap:problem:not-started" {
		t.Fatalf("before start: %d %v", r.status, p)
	}
	for i, want := range []string{`{"alreadyStarted":false,"started":true}`, `{"alreadyStarted":true,"started":true}`} {
		r := send(t, "POST", srv.URL+base+"/start", nil)
		if r.status != 200 || strings.TrimSpace(string(r.body)) != want {
			t.Fatalf("start #%d: %d %s, want 200 %s", i+1, r.status, r.body, want)
		}
	}
}

func TestPutAndGet(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	body := `{"emailAddress":" Alice@Example.COM ","fullName":"Alice","companyName":"A <&> B","customerTier":"gold","name.first":"A"}`
	r := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(body), "Content-Type", "application/json")
	want := `{"emailAddress":"alice@example.com","fullName":"Alice","companyName":"A <&> B","customerTier":"gold","name.first":"A"}`
	if r.status != 201 || strings.TrimSpace(string(r.body)) != want {
		t.Fatalf("first PUT: %d %s, want 201 %s", r.status, r.body, want)
	}
	etag := r.header.Get("ETag")
	if _, err := partmap.ParseETag(etag); err != nil {
		t.Fatalf("ETag %q: %v", etag, err)
	}
	if loc := r.header.Get("Location"); loc != base+"/customer-profile?emailAddress=alice%40example.com" {
		t.Fatalf("Location %q", loc)
	}
	r = send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=%20ALICE%40example.com", nil)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != want || r.header.Get("ETag") != etag {
		t.Fatalf("GET: %d %s %s", r.status, r.body, r.header.Get("ETag"))
	}
	r = send(t, "PUT", srv.URL+base+"/customer-profile?emailAddress=ALICE@example.com", strings.NewReader("\ufeff"+body))
	if r.status != 200 || r.header.Get("ETag") == etag {
		t.Fatalf("second PUT: %d, ETag %s (was %s)", r.status, r.header.Get("ETag"), etag)
	}
	r = send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(body), "If-Match", etag)
	if p := r.problem(t); r.status != 412 || p["type"] != "urn:partmap:problem:precondition-failed" {
		t.Fatalf("stale If-Match: %d %v", r.status, p)
	}
	r = send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(body), "If-None-Match", "*")
	if r.status != 412 {
		t.Fatalf("If-None-Match on an existing profile: %d %s", r.status, r.body)
	}
}

// Every bad request gets its documented status and problem type, and leaves
// the store as it was.
func TestBadInput(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	const email = "victim@example.com"
	profileURL := srv.URL + base + "/customer-profile"
	put := func(body string) func() response {
		return func() response { return send(t, "PUT", profileURL, strings.NewReader(body)) }
	}
	// putWith sends a valid profile with header, which is what is wrong.
	putWith := func(header ...string) func() response {
		return func() response {
			return send(t, "PUT", profileURL, strings.NewReader(`{"emailAddress":"`+email+`"}`), header...)
		}
	}
	get := func(query string) func() response {
		return func() response { return send(t, "GET", profileURL+query, nil) }
	}
	huge := `{"emailAddress":"` + email + `","fullName":"` + strings.Repeat("x", 8<<20) + `"}`
	for _, tc := range []struct {
		name   string
		do     func() response
		status int
		code   partmap.Code
		field  string
	}{
		{"ErrNonASCIIEmail", put(`{"emailAddress":"vïctim@example.com"}`), 400, partmap.EINVALIDEMAIL, ""},
		{"ErrBlankEmail", put(`{"emailAddress":"  \t "}`), 400, partmap.EINVALIDEMAIL, ""},
		{"ErrMissingEmail", put(`{"fullName":"x"}`), 400, partmap.EINVALIDEMAIL, "emailAddress"},
		{"ErrMalformedJSON", put(`{"emailAddress":"` + email + `",`), 400, partmap.EMALFORMEDJSON, ""},
		{"ErrEmptyBody", put(``), 400, partmap.EMALFORMEDJSON, ""},
		{"ErrNotAnObject", put(`["` + email + `"]`), 400, partmap.EMALFORMEDJSON, ""},
		{"ErrDuplicateField", put(`{"emailAddress":"` + email + `","a":"1","a":"2"}`), 400, partmap.EMALFORMEDJSON, "a"},
		{"ErrNonStringField", put(`{"emailAddress":"` + email + `","visits":3}`), 400, partmap.ENONSTRING, "visits"},
		{"ErrNestedField", put(`{"emailAddress":"` + email + `","name":{"first":"A"}}`), 400, partmap.ENONSTRING, "name"},
		{"ErrNullField", put(`{"emailAddress":"` + email + `","fullName":null}`), 400, partmap.ENONSTRING, "fullName"},
		{"ErrInvalidUTF8", put("{\"emailAddress\":\"" + email + "\",\"fullName\":\"A\xff\xfeB\"}"), 400, partmap.EINVALIDUTF8, "fullName"},
		{"ErrEncodedSurrogate", put("{\"emailAddress\":\"" + email + "\",\"fullName\":\"\xed\xa0\x80\"}"), 400, partmap.EINVALIDUTF8, "fullName"},
		{"ErrEscapedSurrogate", put(`{"emailAddress":"` + email + `","fullName":"\ud800"}`), 400, partmap.EINVALIDUTF8, "fullName"},
		{"ErrFieldOverLimit", put(`{"emailAddress":"` + email + `","fullName":"` + strings.Repeat("x", partmap.DefaultLimits.MaxFieldValueBytes+1) + `"}`), 413, partmap.ETOOLARGE, "fullName"},
		{"Err8MiBField", put(huge), 413, partmap.ETOOLARGE, ""},
		{"Err8MiBFieldChunked", func() response {
			return send(t, "PUT", profileURL, io.MultiReader(strings.NewReader(huge))) // no Content-Length
		}, 413, partmap.ETOOLARGE, ""},
		{"ErrBadIfMatch", putWith("If-Match", `0000000000000001`), 400, partmap.EINVALID, ""},
		{"ErrEmptyIfMatch", putWith("If-Match", ""), 400, partmap.EINVALID, ""},
		{"ErrUnterminatedIfMatch", putWith("If-Match", `W/"00`), 400, partmap.EINVALID, ""},
		{"ErrTextPlain", putWith("Content-Type", "text/plain"), 415, partmap.EMEDIATYPE, ""},
		{"ErrLatin1", putWith("Content-Type", "application/json; charset=iso-8859-1"), 415, partmap.EMEDIATYPE, ""},
		{"ErrMergePatchOnPut", putWith("Content-Type", "application/merge-patch+json"), 415, partmap.EMEDIATYPE, ""},
		{"ErrGzip", putWith("Content-Encoding", "gzip"), 415, partmap.EMEDIATYPE, ""},
		{"ErrPutURLDisagrees", func() response {
			return send(t, "PUT", profileURL+"?emailAddress=other@example.com", strings.NewReader(`{"emailAddress":"`+email+`"}`))
		}, 400, partmap.EKEYFIELD, "emailAddress"},
		{"ErrUnknownParam", get("?emailAddress=" + email + "&feilds=a"), 400, partmap.EINVALID, ""},
		{"ErrGetWithoutEmail", get(""), 400, partmap.EINVALIDEMAIL, "emailAddress"},
		{"ErrGetBlankEmail", get("?emailAddress=%20"), 400, partmap.EINVALIDEMAIL, ""},
		{"ErrGetNonASCIIEmail", get("?emailAddress=v%C3%AFctim%40example.com"), 400, partmap.EINVALIDEMAIL, ""},
		{"ErrGetTwoEmails", get("?emailAddress=a@b&emailAddress=c@d"), 400, partmap.EINVALIDEMAIL, ""},
		{"ErrGetMalformedQuery", get("?emailAddress=%zz"), 400, partmap.EINVALID, ""},
		{"ErrGetMissing", get("?emailAddress=" + email), 404, partmap.ENOTFOUND, ""},
		{"ErrUnknownRoute", func() response { return send(t, "GET", srv.URL+"/nope", nil) }, 404, partmap.ENOTFOUND, ""},
		{"ErrWrongMethod", func() response { return send(t, "POST", profileURL+"?emailAddress="+email, nil) }, 405, partmap.EMETHOD, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.do()
			p := r.problem(t)
			if r.status != tc.status || p["type"] != pmhttp.ProblemTypePrefix+string(tc.code) || p["status"] != float64(tc.status) {
				t.Fatalf("got %d %v, want %d %s", r.status, p, tc.status, tc.code)
			}
			if detail, _ := p["detail"].(string); detail == "" {
				t.Fatal("problem has no detail")
			}
			if tc.field != "" && p["field"] != tc.field {
				t.Fatalf("field %v, want %q", p["field"], tc.field)
			}
			if r := send(t, "GET", profileURL+"?emailAddress="+email, nil); r.status != 404 {
				t.Fatalf("the store changed: GET answers %d %s", r.status, r.body)
			}
		})
	}
	if r := send(t, "POST", profileURL, nil); r.header.Get("Allow") != "GET, HEAD, PUT, PATCH, DELETE" {
		t.Fatalf("405 without Allow: %v", r.header)
	}
	// The limit is named in bytes.
	r := send(t, "PUT", profileURL, strings.NewReader(huge))
	if p := r.problem(t); p["limit"] != "body" || p["limitBytes"] != float64(partmap.DefaultLimits.MaxBodyBytes) {
		t.Fatalf("body limit not named: %v", p)
	}
}

// holdPartition keeps the partition of email locked until release is called.
func holdPartition(t *testing.T, store *pebble.Store, email string) (release func()) {
	t.Helper()
	_, p, _ := partmap.Locate(email, partmap.DefaultPartitions)
	locked, unlock, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		dir := store.Store.(*directory.Directory)
		part := engine.Part{Generation: dir.Layout().Generation, Partition: p}
		dir.Engine().Invoke(context.Background(), engine.Invocation{Lock: []engine.Part{part}}, func(*engine.Tx) error {
			close(locked)
			<-unlock
			return nil
		})
	}()
	<-locked
	return func() { close(unlock); <-done }
}

func TestLockConflict(t *testing.T) {
	srv, store := newStartedServer(t, failFast())
	const email = "hot@example.com"
	release := holdPartition(t, store, email)

	r := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"`+email+`"}`))
	if p := r.problem(t); r.status != 409 || p["type"] != "urn:partmap:problem:lock-conflict" || r.header.Get("Retry-After") == "" {
		t.Fatalf("got %d %v Retry-After=%q", r.status, p, r.header.Get("Retry-After"))
	}
	// Reads take no lock.
	if r := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress="+email, nil); r.status != 404 {
		t.Fatalf("GET under a write lock: %d", r.status)
	}

	ctx := context.Background()
	profile := partmap.Profile{partmap.FieldEmail: email}
	noRetry := newClient(t, srv.URL, &pmhttp.ClientOptions{RetryFor: -1})
	if _, _, err := partmap.UpsertProfile(ctx, noRetry, profile, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("client without retries: got %v", err)
	}
	// The client gives up when its context ends, not later.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err := partmap.UpsertProfile(cctx, newClient(t, srv.URL, nil), profile, partmap.Condition{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("client with an expiring context: got %v", err)
	}
	// The client retries until the lock is free.
	done := make(chan error)
	go func() {
		_, _, err := partmap.UpsertProfile(ctx, newClient(t, srv.URL, nil), profile, partmap.Condition{})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it meet a few conflicts; correct either way
	release()
	if err := <-done; err != nil {
		t.Fatalf("retrying client: %v", err)
	}
}

// Behind the whole-map lock, a write's conflict names the lock and its
// end, and Retry-After counts the seconds left, not the usual 1.
func TestWholeMapLockConflictSaysUntilWhen(t *testing.T) {
	srv, store := newStartedServer(t, failFast())
	lock, err := store.LockWholeMap(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r := send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"w@example.com"}`))
	p := r.problem(t)
	secs, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if detail, _ := p["detail"].(string); r.status != 409 || !strings.Contains(detail, "whole map is locked") ||
		!strings.Contains(detail, lock.Expires.UTC().Format(time.RFC3339)) || secs < 50 || secs > 60 {
		t.Fatalf("got %d %v Retry-After=%q", r.status, p, r.header.Get("Retry-After"))
	}
	// Released, a write meets the usual conflicts only.
	store.UnlockWholeMap(context.Background(), lock.Lease)
	release := holdPartition(t, store, "w@example.com")
	defer release()
	r = send(t, "PUT", srv.URL+base+"/customer-profile", strings.NewReader(`{"emailAddress":"w@example.com"}`))
	if detail, _ := r.problem(t)["detail"].(string); r.status != 409 || strings.Contains(detail, "whole map") || r.header.Get("Retry-After") != "1" {
		t.Fatalf("after the release: %d %q Retry-After=%q", r.status, detail, r.header.Get("Retry-After"))
	}
}

// A check of many partitions is one streamed request; a partition that a
// writer holds midway ends the stream with a lock conflict in its trailer,
// and the client asks again from that partition: every partition is
// checked once, in order.
func TestCheckPartitionsResumesAfterAConflict(t *testing.T) {
	srv, store := newStartedServer(t, failFast())
	busy := "busy@example.com"
	p := partmap.PartitionOf(busy, partmap.DefaultPartitions)
	release := holdPartition(t, store, busy)
	cl := newClient(t, srv.URL, nil)
	var got []partmap.Partition
	first := p - min(p, 3)
	err := cl.CheckPartitions(context.Background(), first, p+3, func(c partmap.PartitionCheck) error {
		got = append(got, c.Partition)
		if c.Partition+1 == p {
			go func() { time.Sleep(20 * time.Millisecond); release() }()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range got {
		if q != first+partmap.Partition(i) {
			t.Fatalf("checked %v, want %d up to %d once each, in order", got, first, p+3)
		}
	}
	if len(got) != int(p+3-first) || cl.LockConflicts() == 0 {
		t.Fatalf("checked %v with %d conflicts; want %d up to %d, after a conflict", got, cl.LockConflicts(), first, p+3)
	}
}

// failingStore answers every call with an error partmap did not classify.
type failingStore struct{ partmap.Store }

func (failingStore) FindProfile(context.Context, string) (partmap.Record, error) {
	return partmap.Record{}, errors.New("open /var/secret/path: disk on fire")
}

func TestInternalErrorsHideDetails(t *testing.T) {
	var logs bytes.Buffer
	srv := serveStore(t, failingStore{}, &pmhttp.ServerOptions{Logger: newTextLogger(&logs)})
	r := send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=a@b", nil)
	p := r.problem(t)
	if r.status != 500 || p["type"] != "urn:partmap:problem:internal" || strings.Contains(string(r.body), "secret") {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	if !strings.Contains(logs.String(), "disk on fire") {
		t.Fatalf("the cause was not logged: %q", logs.String())
	}
	c := newClient(t, srv.URL, nil)
	if _, err := c.FindProfile(context.Background(), "a@b"); partmap.ErrorCode(err) != partmap.EINTERNAL {
		t.Fatalf("client: got %v, want internal", err)
	}
}

func TestClientRefusesInvalidUTF8(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	c := newClient(t, srv.URL, nil)
	_, _, err := partmap.UpsertProfile(context.Background(), c, partmap.Profile{partmap.FieldEmail: "a@b", "n": "\xff"}, partmap.Condition{})
	if partmap.ErrorCode(err) != partmap.EINVALIDUTF8 {
		t.Fatalf("got %v, want invalid-utf8 (never a silent U+FFFD)", err)
	}
}

func TestNewClientErrBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := pmhttp.NewClient(u, nil); err == nil {
			t.Errorf("NewClient(%q) succeeded", u)
		}
	}
}
func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestModel(t *testing.T) {
	storetest.RunModel(t, func(t *testing.T) partmap.Store {
		srv, _ := newServer(t, nil)
		return newClient(t, srv.URL, nil)
	})
}

// A body that does not arrive within the read timeout is a clear 408, not a
// 400 that leaks a socket address.
func TestSlowBodyTimesOut(t *testing.T) {
	store := newStore(t, nil)
	srv := httptest.NewUnstartedServer(pmhttp.NewServer(store, nil))
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()
	start(t, srv.URL)
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(`{"emailAddress":"slow@example.com","fullName":"`)) // and then nothing
	r := send(t, "PUT", srv.URL+base+"/customer-profile", pr)
	if p := r.problem(t); r.status != 408 || p["type"] != "urn:partmap:problem:request-timeout" || strings.Contains(string(r.body), "127.0.0.1") {
		t.Fatalf("got %d %s", r.status, r.body)
	}
}

func TestResize(t *testing.T) {
	storetest.RunResize(t, func(t *testing.T) partmap.Store {
		srv, _ := newServer(t, failFast())
		return newClient(t, srv.URL, nil)
	})
}

// UpsertJSONLines sends lines as they are; a line the server would skip or
// split would misnumber every result after it, so it is refused before
// anything is sent.
func TestUpsertJSONLines(t *testing.T) {
	ctx := context.Background()
	srv, store := newServer(t, nil)
	c := newClient(t, srv.URL, nil)
	if _, err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][][]byte{
		{[]byte(`{"emailAddress":"a@example.com"}`), []byte(" \t")},
		{[]byte("{\"emailAddress\":\"a@example.com\"}\n{\"emailAddress\":\"b@example.com\"}")},
		{[]byte("\ufeff"), []byte(`{"emailAddress":"a@example.com"}`)},
	} {
		if _, err := c.UpsertJSONLines(ctx, bad); err == nil {
			t.Fatalf("%q was sent", bad)
		}
	}
	if stats, err := store.ListPartitions(ctx); err != nil || stats.TotalProfiles != 0 {
		t.Fatalf("a refused call wrote: %+v %v", stats, err)
	}
	res, err := c.UpsertJSONLines(ctx, [][]byte{[]byte(`{"emailAddress":" A@Example.com ","n":"1"}`), []byte(`{"n":"no email"}`), []byte(`{"emailAddress":"a@example.com","n":"2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Created || res[0].Email != "a@example.com" || res[0].Version == 0 ||
		partmap.ErrorCode(res[1].Err) != partmap.EINVALIDEMAIL || res[2].Err != nil || res[2].Created {
		t.Fatalf("results %+v", res)
	}
	if rec, err := store.FindProfile(ctx, "a@example.com"); err != nil || rec.Profile["n"] != "2" || rec.Version != res[2].Version {
		t.Fatalf("stored %+v %v", rec, err)
	}
}
