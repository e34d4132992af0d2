package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/partmap/partmap"
)

// A reader that hands out one byte at a time splits every multibyte
// character across reads; the decoder must still see whole characters.
func TestJSONLReaderSplitsNothing(t *testing.T) {
	in := "\xef\xbb\xbf{\"emailAddress\":\"a@b\",\"n\":\"A中🙂\"}\n\n{\"emailAddress\":\"c@d\",\"n\":\"é\"}\r\n"
	r := &jsonlReader{r: bufio.NewReader(iotest.OneByteReader(strings.NewReader(in)))}
	// The line goes to the server as read, without its BOM and line end.
	p, raw, line, err := r.next()
	if err != nil || line != 1 || p["n"] != "A中🙂" || string(raw) != `{"emailAddress":"a@b","n":"A中🙂"}` {
		t.Fatalf("first: %v %q line %d %v", p, raw, line, err)
	}
	p, raw, line, err = r.next()
	if err != nil || line != 3 || p["n"] != "é" || string(raw) != `{"emailAddress":"c@d","n":"é"}` {
		t.Fatalf("second: %v %q line %d %v", p, raw, line, err)
	}
}

func TestImportCommand(t *testing.T) {
	srv := startedServer(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	bad := write("bad.jsonl", "{\"emailAddress\":\"ok@example.com\"}\n{\"emailAddress\":\"x@y\",\"n\":\"\xff\"}\n{not json}\n{\"fullName\":\"no email\"}\n")
	code, _, errOut := run(t, "", "import", bad, srv)
	if code != 1 || !strings.Contains(errOut, "line 2:") || !strings.Contains(errOut, "line 3:") || !strings.Contains(errOut, "line 4:") ||
		!strings.Contains(errOut, "nothing was written") {
		t.Fatalf("validate first: %d %q", code, errOut)
	}
	if _, out, _ := run(t, "", "partitions", srv); strings.Contains(out, "partition-") {
		t.Fatalf("a refused import wrote: %q", out)
	}
	rejects := filepath.Join(dir, "rejects.txt")
	code, _, errOut = run(t, "", "import", bad, "--skip-invalid", "--rejects", rejects, srv)
	if code != 0 || !strings.Contains(errOut, "imported 1 profiles (1 new, 0 replaced); 3 lines rejected") {
		t.Fatalf("--skip-invalid: %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(rejects); !strings.Contains(string(b), "line 2:") || !strings.Contains(string(b), "invalid-utf8") {
		t.Fatalf("rejects file: %q", b)
	}

	csvFile := write("people.csv", "\xef\xbb\xbfemailAddress,fullName,name.first\nAda@Example.com,Ada Lovelace,Ada\n\"b@example.com\",\"Smith, Bob\",\n")
	if code, _, errOut := run(t, "", "import", csvFile, srv); code != 0 || !strings.Contains(errOut, "imported 2 profiles (2 new") {
		t.Fatalf("csv: %d %q", code, errOut)
	}
	if _, out, _ := run(t, "", "get", "b@example.com", srv); !strings.Contains(out, `"fullName": "Smith, Bob"`) || !strings.Contains(out, `"name.first": ""`) {
		t.Fatalf("csv profile: %q", out)
	}
	short := write("short.csv", "emailAddress,fullName\nz@example.com\n")
	if code, _, errOut := run(t, "", "import", short, srv); code != 1 || !strings.Contains(errOut, "line 2:") {
		t.Fatalf("a missing column: %d %q", code, errOut)
	}
	code, _, errOut = run(t, "{\"emailAddress\":\"stdin@example.com\"}\n", "import", "-", srv)
	if code != 0 || !strings.Contains(errOut, "imported 1 profiles") {
		t.Fatalf("stdin: %d %q", code, errOut)
	}
}

// Batches go two at a time, but a profile repeated across batches still
// ends as its last line says.
func TestImportKeepsFileOrderAcrossBatches(t *testing.T) {
	srv := startedServer(t)
	var in strings.Builder
	for i := range 3*importBatch + 5 {
		email := fmt.Sprintf("u%d@example.com", i)
		if i%(importBatch/2) == 0 {
			email = "same@example.com" // in every batch, several times
		}
		fmt.Fprintf(&in, "{\"emailAddress\":%q,\"n\":\"%d\"}\n", email, i)
	}
	if code, _, errOut := run(t, in.String(), "import", "-", srv); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	last := (3*importBatch + 4) / (importBatch / 2) * (importBatch / 2)
	if code, out, _ := run(t, "", "get", "same@example.com", "--fields", "n", srv); code != 0 || !strings.Contains(out, fmt.Sprintf("%q", fmt.Sprint(last))) {
		t.Fatalf("the repeated profile: %q, want n=%d", out, last)
	}
}

// Large profiles fill a bulk request's body limit long before its count:
// batches are cut by bytes too.
func TestImportCutsBatchesByBytes(t *testing.T) {
	srv := startedServer(t)
	var in strings.Builder
	value := strings.Repeat("x", partmap.DefaultLimits.MaxFieldValueBytes)
	const n = 600 // about 20 MB, over the 16 MiB a request may carry
	for i := range n {
		fmt.Fprintf(&in, "{\"emailAddress\":\"big%d@example.com\",\"a\":%q,\"b\":%q}\n", i, value, value[:len(value)/2])
	}
	if in.Len() <= importBatchBytes {
		t.Fatalf("the input, %d bytes, fits one request", in.Len())
	}
	if code, _, errOut := run(t, in.String(), "import", "-", srv); code != 0 || !strings.Contains(errOut, fmt.Sprintf("imported %d profiles (%d new", n, n)) {
		t.Fatalf("import: %d %s", code, errOut)
	}
	if code, out, _ := run(t, "", "get", fmt.Sprintf("big%d@example.com", n-1), "--fields", "emailAddress", srv); code != 0 || !strings.Contains(out, "big") {
		t.Fatalf("the last profile: %d %q", code, out)
	}
}
