package http_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// The body limit is exact: MaxBodyBytes is accepted, one byte more is 413,
// with or without a Content-Length.
func TestBodyLimitIsExact(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	u := srv.URL + base + "/customer-profile"
	limit := partmap.DefaultLimits.MaxBodyBytes
	body := func(n int) string {
		p := `{"emailAddress":"edge@example.com"}`
		return p + strings.Repeat(" ", n-len(p))
	}
	if r := send(t, "PUT", u, strings.NewReader(body(limit))); r.status != 201 {
		t.Fatalf("a body of exactly the limit: %d %s", r.status, r.body)
	}
	for name, reader := range map[string]io.Reader{
		"WithLength": strings.NewReader(body(limit + 1)),
		"Chunked":    io.MultiReader(strings.NewReader(body(limit + 1))),
	} {
		if r := send(t, "PUT", u, reader); r.status != 413 {
			t.Fatalf("%s: one byte over the limit: %d", name, r.status)
		}
	}
}

func TestProjectionEdges(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	u := srv.URL + base + "/customer-profile"
	send(t, "PUT", u, strings.NewReader(`{"emailAddress":"p@example.com","a,b":"comma","fullName":"P"}`))
	if r := send(t, "GET", u+"?emailAddress=p@example.com&fields=%FF", nil); r.status != 400 || r.problem(t)["type"] != "urn:partmap:problem:invalid-utf8" {
		t.Fatalf("fields=%%FF: %d %s", r.status, r.body)
	}
	// The client names fields one by one, so a comma in a name survives.
	proj, err := newClient(t, srv.URL, nil).ProjectProfile(context.Background(), "p@example.com", []string{"a,b", "fullName"})
	if err != nil || len(proj.Values) != 2 || proj.Values[0] == nil || *proj.Values[0] != "comma" || *proj.Values[1] != "P" {
		t.Fatalf("projection through the client: %+v, %v", proj, err)
	}
}

// stubStore answers FindProfile with a fixed error.
type stubStore struct {
	partmap.Store
	err error
}

func (s stubStore) FindProfile(context.Context, string) (partmap.Record, error) {
	return partmap.Record{}, s.err
}

func TestErrorsAtTheEdges(t *testing.T) {
	get := func(t *testing.T, err error) response {
		srv := httptest.NewServer(pmhttp.NewServer(stubStore{err: err}, &pmhttp.ServerOptions{Logger: newTextLogger(io.Discard)}))
		defer srv.Close()
		return send(t, "GET", srv.URL+base+"/customer-profile?emailAddress=a@b", nil)
	}
	t.Run("UnknownCodeHidesDetails", func(t *testing.T) {
		r := get(t, &partmap.Error{Code: "made-up", Field: "secret", Limit: "x", LimitBytes: 7, Message: "secret"})
		if p := r.problem(t); r.status != 500 || p["field"] != nil || p["limit"] != nil || p["limitBytes"] != nil || strings.Contains(string(r.body), "secret") {
			t.Fatalf("got %d %s", r.status, r.body)
		}
	})
	t.Run("TimeoutIs503", func(t *testing.T) {
		r := get(t, errors.Join(errors.New("store"), context.DeadlineExceeded))
		if p := r.problem(t); r.status != 503 || p["type"] != "urn:partmap:problem:unavailable" || r.header.Get("Retry-After") == "" {
			t.Fatalf("got %d %v", r.status, r.header)
		}
	})
}

// A bulk body without a profile is an empty batch, whose results are an
// empty list like any other list in a reply.
func TestBulkOfNothing(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	for _, body := range []string{"", "\n", " \r\n\n"} {
		r := send(t, "POST", srv.URL+base+"/customer-profiles/bulk", strings.NewReader(body), "Content-Type", "application/x-ndjson")
		if want := `{"created":0,"replaced":0,"failed":0,"results":[]}`; r.status != 200 || strings.TrimSpace(string(r.body)) != want {
			t.Errorf("bulk of %q: %d %s, want 200 %s", body, r.status, r.body, want)
		}
	}
}

// A proxy between client and server may answer with a bare status; the
// client still classifies it.
func TestClientClassifiesBareStatuses(t *testing.T) {
	for status, want := range map[int]partmap.Code{
		400: partmap.EINVALID, 404: partmap.ENOTFOUND, 412: partmap.EPRECONDITION, 413: partmap.ETOOLARGE,
		401: partmap.EUNAUTHORIZED, 403: partmap.EFORBIDDEN, 405: partmap.EMETHOD, 408: partmap.ETIMEOUT, 415: partmap.EMEDIATYPE,
		502: partmap.EUNAVAILABLE, 503: partmap.EUNAVAILABLE, 504: partmap.EUNAVAILABLE, 418: partmap.EINTERNAL, 500: partmap.EINTERNAL,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "from a proxy", status)
		}))
		_, err := newClient(t, srv.URL, nil).FindProfile(context.Background(), "a@b")
		srv.Close()
		if got := partmap.ErrorCode(err); got != want {
			t.Errorf("status %d: got %s (%v), want %s", status, got, err, want)
		}
	}
}

// The client gives up when its context ends, whatever its retry settings,
// and stops retrying conflicts after RetryFor.
func TestClientDeadlines(t *testing.T) {
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := newClient(t, slow.URL, nil).FindProfile(ctx, "a@b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a slow server: got %v, want the context's deadline", err)
	}

	srv, store := newStartedServer(t, failFast())
	release := holdPartition(t, store, "held@example.com")
	defer release()
	profile := partmap.Profile{partmap.FieldEmail: "held@example.com"}
	patient := newClient(t, srv.URL, &pmhttp.ClientOptions{RetryBase: time.Hour, RetryMax: time.Hour, RetryFor: 2 * time.Hour})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, _, err := partmap.UpsertProfile(ctx2, patient, profile, partmap.Condition{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a long backoff: got %v, want the context's deadline", err)
	}
	brief := newClient(t, srv.URL, &pmhttp.ClientOptions{RetryFor: 100 * time.Millisecond})
	ctx3, cancel3 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel3()
	if _, _, err := partmap.UpsertProfile(ctx3, brief, profile, partmap.Condition{}); !errors.Is(err, partmap.ErrLockConflict) {
		t.Fatalf("RetryFor 100ms: got %v, want a lock conflict once RetryFor has passed", err)
	}
}
