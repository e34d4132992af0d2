package http_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// exportFailsAfter is a store whose export breaks down after n profiles,
// as a Redis export that lost its lock does.
type exportFailsAfter struct {
	partmap.Store
	n   int
	err error
}

func (s exportFailsAfter) ExportProfiles(ctx context.Context, fn func(partmap.Record) error) error {
	for i := range s.n {
		if err := fn(partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i)}}); err != nil {
			return err
		}
	}
	return s.err
}

func TestExportStream(t *testing.T) {
	ctx := context.Background()
	srv, store := newServer(t, nil)
	start(t, srv.URL)
	for i := range 3 {
		store.UpsertProfile(ctx, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("e%d@example.com", i)}, partmap.Condition{})
	}
	r := send(t, "GET", srv.URL+base+"/customer-profiles/export", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/jsonl" || strings.Count(string(r.body), "\n") != 3 {
		t.Fatalf("export: %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r := send(t, "GET", srv.URL+base+"/customer-profiles/export?limit=1", nil); r.status != 400 {
		t.Fatalf("export with a parameter: %d", r.status)
	}
	if r := send(t, "POST", srv.URL+base+"/customer-profiles/export", nil); r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST export: %d %q", r.status, r.header.Get("Allow"))
	}
}

func TestExportFailureAfterTheFirstProfile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		n    int
		err  error
		code partmap.Code
	}{
		{0, partmap.Errorf(partmap.EUNAVAILABLE, "lost the lock"), partmap.EUNAVAILABLE},  // before any profile: a problem reply
		{2, partmap.Errorf(partmap.EUNAVAILABLE, "lost the\nlock"), partmap.EUNAVAILABLE}, // after: in the trailer
		{2, errors.New("disk on fire"), partmap.EINTERNAL},
	} {
		srv := httptest.NewServer(pmhttp.NewServer(exportFailsAfter{n: tc.n, err: tc.err}, &pmhttp.ServerOptions{Logger: newTextLogger(io.Discard)}))
		c := newClient(t, srv.URL, nil)
		got := 0
		err := c.ExportProfiles(ctx, func(partmap.Record) error { got++; return nil })
		srv.Close()
		if partmap.ErrorCode(err) != tc.code || got != tc.n || strings.Contains(fmt.Sprint(err), "fire") {
			t.Errorf("after %d profiles: got %v after %d", tc.n, err, got)
		}
	}
}

// A stream cut short (no closing count) or cut mid-line is an error, never
// a smaller export.
func TestExportClientDetectsTruncation(t *testing.T) {
	for name, body := range map[string]string{
		"no trailer": "{\"emailAddress\":\"a@b\"}\n",
		"mid-line":   "{\"emailAddress\":\"a@b\"}\n{\"emailAdd",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/jsonl")
			io.WriteString(w, body)
		}))
		c := newClient(t, srv.URL, nil)
		got := 0
		err := c.ExportProfiles(context.Background(), func(partmap.Record) error { got++; return nil })
		srv.Close()
		if err == nil || got != 1 {
			t.Errorf("%s: got %v after %d profiles, want an error after 1", name, err, got)
		}
	}
}

// Export writes JSON Lines that Import reads back: exported, imported into
// an empty directory and exported again, the bytes are the same.
func TestClientExport(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		var in strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&in, "{\"emailAddress\":\"user%d@example.com\",\"fullName\":\"User %d\"}\n", i, i)
		}
		in.WriteString(`{"emailAddress":"odd@example.com","note":"tab\t quote\" <&> \u2028 é 🦀","blank":""}` + "\n")
		var exports [2]bytes.Buffer
		for i := range exports {
			srv, _ := newServer(t, nil)
			start(t, srv.URL)
			c := newClient(t, srv.URL, nil)
			if _, err := c.Import(ctx, strings.NewReader(in.String()), pmhttp.ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			var progress []int
			n, err := c.Export(ctx, &exports[i], pmhttp.ExportOptions{Progress: func(n int) { progress = append(progress, n) }})
			if err != nil || n != 3001 || !slices.Equal(progress, []int{1024, 2048}) {
				t.Fatalf("export: %d profiles, progress %v, %v; want 3001, [1024 2048]", n, progress, err)
			}
			in.Reset()
			in.Write(exports[i].Bytes())
		}
		if a, b := exports[0].String(), exports[1].String(); a != b || strings.Count(a, "\n") != 3001 || !strings.Contains(a, `"blank":""`) {
			t.Fatalf("the round trip changed the export: %d bytes, then %d", len(a), len(b))
		}
	})
	t.Run("ErrMidway", func(t *testing.T) {
		srv := httptest.NewServer(pmhttp.NewServer(exportFailsAfter{n: 2, err: partmap.Errorf(partmap.EUNAVAILABLE, "lost the lock")},
			&pmhttp.ServerOptions{Logger: newTextLogger(io.Discard)}))
		defer srv.Close()
		var out bytes.Buffer
		n, err := newClient(t, srv.URL, nil).Export(ctx, &out, pmhttp.ExportOptions{})
		if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || n != 2 {
			t.Fatalf("got %d profiles, %v; want 2 and unavailable", n, err)
		}
	})
}
