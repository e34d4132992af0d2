package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pmhttp "github.com/partmap/partmap/http"
)

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
	if code != 0 || !strings.Contains(errOut, "imported 1 profile (1 new, 0 replaced); 3 lines rejected") {
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
	if code != 0 || !strings.Contains(errOut, "imported 1 profile ") {
		t.Fatalf("stdin: %d %q", code, errOut)
	}
}

// The import bar counts profiles, and its rate runs from the start of the
// import. It used to count bytes from its first update, so that its first
// frame divided a whole batch by almost no time: "(202 GB/s)".
func TestImportBarCountsProfiles(t *testing.T) {
	const wait = 50 * time.Millisecond
	rate := regexp.MustCompile(`(\d+) profiles/s`)
	t.Run("OK", func(t *testing.T) {
		var out bytes.Buffer
		began := time.Now()
		bar := newImportBar(&out, true, 3000, 1<<20)
		time.Sleep(wait)
		bar.update(pmhttp.ImportProgress{Profiles: 1000, Bytes: 300 << 10})
		elapsed := time.Since(began)
		m := rate.FindStringSubmatch(out.String())
		if m == nil || !strings.Contains(out.String(), " 33%") || strings.Contains(out.String(), "B/s") {
			t.Fatalf("frame %q, want 33%% and a rate in profiles/s", out.String())
		}
		// 1000 profiles took between wait and elapsed.
		got, _ := strconv.Atoi(m[1])
		if lo, hi := int(1000/elapsed.Seconds()), int(1000/wait.Seconds())+1; got < lo || got > hi {
			t.Fatalf("rate %d profiles/s, want %d to %d", got, lo, hi)
		}
	})
	// Without a validating pass the total is estimated from the share of
	// the input read.
	t.Run("OKUnknownTotal", func(t *testing.T) {
		var out bytes.Buffer
		bar := newImportBar(&out, true, 0, 1000)
		bar.update(pmhttp.ImportProgress{Profiles: 100, Bytes: 250})
		if frames := out.String(); !strings.Contains(frames[strings.LastIndex(frames, "\r"):], " 25%") {
			t.Fatalf("frames %q, want 25%% last (100 of about 400 profiles)", frames)
		}
	})
}
