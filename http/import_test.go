package http_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// lineCodes lists rejected lines as "LINE:CODE", to compare at a glance.
func lineCodes(rejected []pmhttp.LineError) string {
	var out []string
	for _, le := range rejected {
		out = append(out, fmt.Sprintf("%d:%s", le.Line, partmap.ErrorCode(le)))
	}
	return strings.Join(out, " ")
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		srv, store := newStartedServer(t, nil)
		c := newClient(t, srv.URL, nil)
		// A reader that hands out one byte at a time splits every multibyte
		// character across reads; the decoder must still see whole
		// characters. The byte order mark and line ends are framing.
		in := "\xef\xbb\xbf{\"emailAddress\":\"a@example.com\",\"n\":\"A中🙂\"}\n\n{\"emailAddress\":\"c@example.com\",\"n\":\"é\"}\r\n"
		valid, invalid, err := pmhttp.ValidateImport(iotest.OneByteReader(strings.NewReader(in)), pmhttp.ImportOptions{})
		if err != nil || valid != 2 || len(invalid) != 0 {
			t.Fatalf("validate: %d valid, %v, %v", valid, invalid, err)
		}
		res, err := c.Import(ctx, iotest.OneByteReader(strings.NewReader(in)), pmhttp.ImportOptions{})
		if err != nil || res.Written != 2 || res.Created != 2 || len(res.Rejected) != 0 {
			t.Fatalf("import: %+v %v", res, err)
		}
		for email, want := range map[string]string{"a@example.com": "A中🙂", "c@example.com": "é"} {
			if rec, err := store.FindProfile(ctx, email); err != nil || rec.Profile["n"] != want {
				t.Fatalf("%s: %v %v, want n=%q", email, rec.Profile, err, want)
			}
		}
		res, err = c.Import(ctx, strings.NewReader(`{"emailAddress":"A@Example.com","n":"again"}`), pmhttp.ImportOptions{})
		if err != nil || res.Written != 1 || res.Created != 0 {
			t.Fatalf("replace: %+v %v", res, err)
		}
	})
	t.Run("OKCSV", func(t *testing.T) {
		srv, store := newStartedServer(t, nil)
		c := newClient(t, srv.URL, nil)
		in := "\xef\xbb\xbfemailAddress,fullName,name.first\nAda@Example.com,Ada Lovelace,Ada\n\"b@example.com\",\"Smith, Bob\",\nz@example.com\n"
		res, err := c.Import(ctx, strings.NewReader(in), pmhttp.ImportOptions{Format: "csv"})
		if got, want := lineCodes(res.Rejected), "4:invalid"; err != nil || res.Written != 2 || res.Created != 2 || got != want {
			t.Fatalf("import: %+v %v; rejected %s, want %s", res, err, got, want)
		}
		rec, err := store.FindProfile(ctx, "b@example.com")
		if first, ok := rec.Profile["name.first"]; err != nil || rec.Profile["fullName"] != "Smith, Bob" || !ok || first != "" {
			t.Fatalf("an empty cell is an empty value: %v %v", rec.Profile, err)
		}
	})
	// Invalid lines are found before anything is written, and an import
	// writes the others; lines the server refuses join them, in order.
	t.Run("ErrInvalidLines", func(t *testing.T) {
		srv, store := newStartedServer(t, failFast())
		c := newClient(t, srv.URL, &pmhttp.ClientOptions{RetryFor: -1})
		in := "{\"emailAddress\":\"ok@example.com\"}\n{\"emailAddress\":\"x@example.com\",\"n\":\"\xff\"}\n{not json}\n" +
			"{\"emailAddress\":\"hot@example.com\"}\n{\"fullName\":\"no email\"}\n"
		valid, invalid, err := pmhttp.ValidateImport(strings.NewReader(in), pmhttp.ImportOptions{})
		if got, want := lineCodes(invalid), "2:invalid-utf8 3:malformed-json 5:invalid-email"; err != nil || valid != 2 || got != want {
			t.Fatalf("validate: %d valid, %s, %v; want %s", valid, got, err, want)
		}
		if stats, err := store.ListPartitions(ctx); err != nil || stats.TotalProfiles != 0 {
			t.Fatalf("validating wrote: %+v %v", stats, err)
		}
		release := holdPartition(t, store, "hot@example.com")
		defer release()
		res, err := c.Import(ctx, strings.NewReader(in), pmhttp.ImportOptions{})
		if got, want := lineCodes(res.Rejected), "2:invalid-utf8 3:malformed-json 4:lock-conflict 5:invalid-email"; err != nil || res.Written != 1 || got != want {
			t.Fatalf("import: %+v %v; rejected %s, want %s", res, err, got, want)
		}
		if !errors.Is(res.Rejected[2], partmap.ErrLockConflict) || !strings.HasPrefix(res.Rejected[2].Error(), "line 4: ") {
			t.Fatalf("a rejected line's error: %v", res.Rejected[2])
		}
	})
	// A CSV header that cannot be read stops the import at line 1.
	t.Run("ErrCSVHeader", func(t *testing.T) {
		for in, want := range map[string]string{
			"":                                      "header",
			"emailAddress,\xff\n":                   "UTF-8",
			"emailAddress,,b\n":                     "column 2 has no name",
			"emailAddress,a,a\nc@example.com,x,y\n": `column "a" appears more than once`,
		} {
			var le pmhttp.LineError
			if _, _, err := pmhttp.ValidateImport(strings.NewReader(in), pmhttp.ImportOptions{Format: "csv"}); !errors.As(err, &le) || le.Line != 1 || !strings.Contains(err.Error(), want) {
				t.Fatalf("%q: %v, want line 1 saying %q", in, err, want)
			}
		}
	})
	t.Run("ErrFormat", func(t *testing.T) {
		c := newClient(t, "http://127.0.0.1:1", nil)
		if _, err := c.Import(ctx, strings.NewReader(""), pmhttp.ImportOptions{Format: "xml"}); err == nil {
			t.Fatal("an unknown format was read")
		}
	})
}

// Progress counts profiles, not bytes, and ends with the whole input read.
func TestImportProgress(t *testing.T) {
	srv, _ := newStartedServer(t, nil)
	c := newClient(t, srv.URL, nil)
	const n = 2*partmap.MaxBulkProfiles + 5 // three batches
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "{\"emailAddress\":\"u%d@example.com\"}\n", i)
		if i == 7 {
			in.WriteString("{\"fullName\":\"no email\"}\n") // not a profile the server answers
		}
	}
	var got []pmhttp.ImportProgress
	res, err := c.Import(context.Background(), strings.NewReader(in.String()), pmhttp.ImportOptions{
		Progress: func(p pmhttp.ImportProgress) { got = append(got, p) },
	})
	if err != nil || res.Written != n {
		t.Fatalf("import: %+v %v", res, err)
	}
	if len(got) != 3 {
		t.Fatalf("progress %+v, want one report per batch", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Profiles <= got[i-1].Profiles || got[i].Bytes < got[i-1].Bytes {
			t.Fatalf("progress went back: %+v", got)
		}
	}
	if last := got[len(got)-1]; last.Profiles != n || last.Bytes != int64(in.Len()) {
		t.Fatalf("last progress %+v, want %d profiles and %d bytes", last, n, in.Len())
	}
}

// Batches go two at a time, but a profile repeated across batches still
// ends as its last line says.
func TestImportKeepsInputOrderAcrossBatches(t *testing.T) {
	ctx := context.Background()
	srv, store := newStartedServer(t, nil)
	c := newClient(t, srv.URL, nil)
	const batch = partmap.MaxBulkProfiles
	var in strings.Builder
	for i := range 3*batch + 5 {
		email := fmt.Sprintf("u%d@example.com", i)
		if i%(batch/2) == 0 {
			email = "same@example.com" // in every batch, several times
		}
		fmt.Fprintf(&in, "{\"emailAddress\":%q,\"n\":\"%d\"}\n", email, i)
	}
	if _, err := c.Import(ctx, strings.NewReader(in.String()), pmhttp.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	last := (3*batch + 4) / (batch / 2) * (batch / 2)
	if rec, err := store.FindProfile(ctx, "same@example.com"); err != nil || rec.Profile["n"] != fmt.Sprint(last) {
		t.Fatalf("the repeated profile: %v %v, want n=%d", rec.Profile, err, last)
	}
}

// Large profiles fill a bulk request's body limit long before its count:
// batches are cut by bytes too.
func TestImportCutsBatchesByBytes(t *testing.T) {
	ctx := context.Background()
	srv, store := newStartedServer(t, nil)
	c := newClient(t, srv.URL, nil)
	var in strings.Builder
	value := strings.Repeat("x", partmap.DefaultLimits.MaxFieldValueBytes)
	const n = 600 // about 20 MB, over the 16 MiB a request may carry
	for i := range n {
		fmt.Fprintf(&in, "{\"emailAddress\":\"big%d@example.com\",\"a\":%q,\"b\":%q}\n", i, value, value[:len(value)/2])
	}
	if in.Len() <= pmhttp.MaxBulkBodyBytes {
		t.Fatalf("the input, %d bytes, fits one request", in.Len())
	}
	if res, err := c.Import(ctx, strings.NewReader(in.String()), pmhttp.ImportOptions{}); err != nil || res.Written != n || res.Created != n {
		t.Fatalf("import: %+v %v", res, err)
	}
	if _, err := store.FindProfile(ctx, fmt.Sprintf("big%d@example.com", n-1)); err != nil {
		t.Fatalf("the last profile: %v", err)
	}
}
