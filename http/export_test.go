package http_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/pebble"
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
	srv, store := newStartedServer(t, nil)
	for i := range 3 {
		partmap.UpsertProfile(ctx, store, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("e%d@example.com", i)}, partmap.Condition{})
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
			srv, _ := newStartedServer(t, nil)
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

// An export over HTTP carries the deadlines that have not passed, and an
// import of it restores them: through Client.Export and Client.Import (as
// partmap export and import run them), and through the bulk route itself.
// A deadline that passes between the export and the import is imported
// already expired, and never seen.
func TestExportImportKeepDeadlines(t *testing.T) {
	ctx := context.Background()
	t0 := storetest.T0
	clock := storetest.NewClock(t0)
	opts := &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Clock: clock.Now, SweepInterval: -1}}
	srcURL, src := newServer(t, opts)
	dstURL, dst := newServer(t, opts)
	start(t, srcURL.URL)
	start(t, dstURL.URL)
	for _, e := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if _, _, err := partmap.UpsertProfile(ctx, src, partmap.Profile{partmap.FieldEmail: e, "soon": "1", "later": "2"}, partmap.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []partmap.Operation{
		{Op: partmap.OpExpire, Email: "a@example.com", Fields: []string{"soon"}, When: partmap.When{Millis: t0 + 1000}},
		{Op: partmap.OpExpire, Email: "a@example.com", Fields: []string{"later"}, When: partmap.When{Millis: t0 + 5000}},
		{Op: partmap.OpExpire, Email: "b@example.com", When: partmap.When{Millis: t0 + 1000}},
	} {
		if _, err := src.Apply(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	var export bytes.Buffer
	if n, err := newClient(t, srcURL.URL, nil).Export(ctx, &export, pmhttp.ExportOptions{}); err != nil || n != 3 {
		t.Fatalf("export: %d, %v", n, err)
	}
	want := `{"profile":{"emailAddress":"a@example.com","later":"2","soon":"1"},"expires":{"fields":{"later":` + fmt.Sprint(t0+5000) + `,"soon":` + fmt.Sprint(t0+1000) + `}}}` + "\n" +
		`{"profile":{"emailAddress":"b@example.com","later":"2","soon":"1"},"expires":{"profile":` + fmt.Sprint(t0+1000) + `}}` + "\n" +
		`{"emailAddress":"c@example.com","later":"2","soon":"1"}` + "\n"
	if got := sortedLines(export.String()); got != sortedLines(want) {
		t.Fatalf("export:\n%s\nwant (in some order):\n%s", export.String(), want)
	}
	// What the route streams, the client reads back with the deadlines.
	var recs []partmap.Record
	if err := newClient(t, srcURL.URL, nil).ExportProfiles(ctx, func(r partmap.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if (r.Profile.Email() == "c@example.com") != r.Deadlines.IsZero() {
			t.Fatalf("ExportProfiles read %+v", r)
		}
	}

	clock.Set(t0 + 1000) // "soon" and b pass between the export and the import
	res, err := newClient(t, dstURL.URL, nil).Import(ctx, bytes.NewReader(export.Bytes()), pmhttp.ImportOptions{})
	if err != nil || res.Written != 3 || len(res.Rejected) != 0 {
		t.Fatalf("import: %+v %v", res, err)
	}
	ttls := func(email string) string {
		d, err := dst.Deadlines(ctx, email, []string{"soon", "later"})
		if err != nil {
			return string(partmap.ErrorCode(err))
		}
		return fmt.Sprint(d.Profile, d.Deadlines)
	}
	for email, want := range map[string]string{
		"a@example.com": fmt.Sprintf("-1 [-2 %d]", t0+5000),
		"b@example.com": string(partmap.ENOTFOUND),
		"c@example.com": "-1 [-1 -1]",
	} {
		if got := ttls(email); got != want {
			t.Errorf("%s after the import: %s, want %s", email, got, want)
		}
	}
	var again bytes.Buffer
	if n, err := newClient(t, dstURL.URL, nil).Export(ctx, &again, pmhttp.ExportOptions{}); err != nil || n != 2 {
		t.Fatalf("export of the import: %d, %v:\n%s", n, err, again.String())
	}
	want = `{"profile":{"emailAddress":"a@example.com","later":"2"},"expires":{"fields":{"later":` + fmt.Sprint(t0+5000) + `}}}` + "\n" +
		`{"emailAddress":"c@example.com","later":"2","soon":"1"}` + "\n"
	if got := sortedLines(again.String()); got != sortedLines(want) {
		t.Fatalf("export of the import:\n%s\nwant (in some order):\n%s", again.String(), want)
	}

	// The bulk route takes the same lines, and refuses deadlines the store
	// cannot keep, line by line.
	body := `{"profile":{"emailAddress":"d@example.com","x":"1"},"expires":{"fields":{"x":` + fmt.Sprint(t0+9000) + `}}}` + "\n" +
		`{"profile":{"emailAddress":"e@example.com"},"expires":{"fields":{"emailAddress":` + fmt.Sprint(t0+9000) + `}}}` + "\n" +
		`{"profile":{"emailAddress":"e@example.com"},"expires":{"fields":{"y":1}}}` + "\n" +
		`{"profile":{"emailAddress":"e@example.com"},"expires":{"profile":1.5}}` + "\n" +
		`{"emailAddress":"f@example.com"}` + "\n"
	r := send(t, "POST", dstURL.URL+base+"/customer-profiles/bulk", strings.NewReader(body))
	var reply struct {
		Results []struct {
			Line    int
			Status  int
			Problem *struct{ Type string }
		}
	}
	if err := json.Unmarshal(r.body, &reply); err != nil || r.status != 200 || len(reply.Results) != 5 {
		t.Fatalf("bulk: %d %s %v", r.status, r.body, err)
	}
	for i, want := range []string{"201", "key-field", "invalid", "malformed-json", "201"} {
		got := fmt.Sprint(reply.Results[i].Status)
		if p := reply.Results[i].Problem; p != nil {
			got = strings.TrimPrefix(p.Type, "urn:partmap:problem:")
		}
		if got != want {
			t.Errorf("bulk line %d: %s, want %s", i+1, got, want)
		}
	}
	if d, err := dst.Deadlines(ctx, "d@example.com", []string{"x"}); err != nil || d.Deadlines[0] != t0+9000 {
		t.Errorf("d's deadline from the bulk route: %+v %v", d, err)
	}
	if _, err := dst.FindProfile(ctx, "e@example.com"); !errors.Is(err, partmap.ErrNotFound) {
		t.Errorf("a refused line wrote e: %v", err)
	}
}

func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
