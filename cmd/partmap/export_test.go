package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Export, import into an empty directory, export again: the two files are
// the same bytes.
func TestExportImportRoundTrip(t *testing.T) {
	urlA, _ := serveInProcess(t)
	urlB, _ := serveInProcess(t)
	a, b := "--server="+urlA, "--server="+urlB
	run(t, "", "start", a)
	run(t, "", "start", b)

	var in strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&in, "{\"emailAddress\":\"user%d@example.com\",\"fullName\":\"User %d\",\"customerTier\":\"gold\"}\n", i, i)
	}
	// Escapes, non-ASCII, HTML-ish characters, line separators, empties.
	in.WriteString(`{"emailAddress":"odd@example.com","note":"tab\t quote\" back\\ nl\n <&> \u2028 \u0001 é 中 🦀","Ünicode key":"v","blank":""}` + "\n")
	if code, _, errOut := run(t, in.String(), "import", "-", a); code != 0 {
		t.Fatalf("import into A: %d %s", code, errOut)
	}

	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	code, _, errOut := run(t, "", "export", fileA, a)
	if code != 0 || !strings.Contains(errOut, "exported 3001 profiles to "+fileA) {
		t.Fatalf("export A: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "import", fileA, b); code != 0 || !strings.Contains(errOut, "imported 3001 profiles (3001 new") {
		t.Fatalf("import into B: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "export", fileB, b); code != 0 {
		t.Fatalf("export B: %d %q", code, errOut)
	}
	ea, _ := os.ReadFile(fileA)
	eb, _ := os.ReadFile(fileB)
	if len(ea) == 0 || !bytes.Equal(ea, eb) {
		t.Fatalf("round trip changed the bytes: %d bytes, then %d", len(ea), len(eb))
	}
	if n := bytes.Count(ea, []byte("\n")); n != 3001 {
		t.Fatalf("export has %d lines, want 3001", n)
	}

	// To standard output, the same bytes.
	if code, out, _ := run(t, "", "export", b); code != 0 || out != string(ea) {
		t.Fatalf("export to stdout: %d, %d bytes", code, len(out))
	}

	// An existing file is kept unless --force.
	os.WriteFile(fileB, []byte("keep me\n"), 0o644)
	if code, _, errOut := run(t, "", "export", fileB, b); code != 2 || !strings.Contains(errOut, "--force") {
		t.Fatalf("export over a file: %d %q", code, errOut)
	}
	if got, _ := os.ReadFile(fileB); string(got) != "keep me\n" {
		t.Fatalf("a refused export changed the file: %q", got)
	}
	if code, _, _ := run(t, "", "export", "--force", fileB, b); code != 0 {
		t.Fatalf("export --force: %d", code)
	}
	if got, _ := os.ReadFile(fileB); !bytes.Equal(got, ea) {
		t.Fatal("export --force did not replace the file")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("the export left temporary files: %v", entries)
	}
}

// partmap export writes each profile's deadlines, and partmap import
// restores them. One that passes between the export and the import is
// imported already expired, and never seen: the import's export is then
// the same bytes as the first directory's export at that time.
func TestExportImportKeepDeadlines(t *testing.T) {
	urlA, _ := serveInProcess(t)
	urlB, _ := serveInProcess(t)
	a, b := mustRun(t, "--server="+urlA), mustRun(t, "--server="+urlB)
	a("", "start")
	b("", "start")
	a("", "put", "ada@example.com", "--name", "Ada", "--field", "visits=1", "--field", "code=1234")
	a("", "put", "bob@example.com", "--name", "Bob")
	a("", "put", "cy@example.com", "--name", "Cy")
	a("", "expire", "ada@example.com", "visits", "--at", "2100-01-01T00:00:00Z")
	a("", "expire", "cy@example.com", "--at", "2100-01-01T00:00:00Z")
	a("", "expire", "ada@example.com", "code", "--in", "300ms")
	a("", "expire", "bob@example.com", "--in", "300ms")

	dir := t.TempDir()
	file := filepath.Join(dir, "a.jsonl")
	a("", "export", file)
	exported, _ := os.ReadFile(file)
	for _, want := range []string{
		`{"profile":{"emailAddress":"ada@example.com","fullName":"Ada","code":"1234","visits":"1"},"expires":{"fields":{"code":`,
		`,"visits":4102444800000}}}`,
		`{"profile":{"emailAddress":"cy@example.com","fullName":"Cy"},"expires":{"profile":4102444800000}}`,
		`{"profile":{"emailAddress":"bob@example.com","fullName":"Bob"},"expires":{"profile":`,
	} {
		if !strings.Contains(string(exported), want) {
			t.Fatalf("the export has no %s:\n%s", want, exported)
		}
	}
	// Until bob has expired, and with him ada's code, set before him.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _, errOut := run(t, "", "get", "bob@example.com", "--server="+urlA); code == 1 && strings.Contains(errOut, "not-found") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("bob@example.com did not expire")
		}
	}
	if _, errOut := b("", "import", file); !strings.Contains(errOut, "imported 3 profiles") {
		t.Fatalf("import: %q", errOut)
	}
	if code, _, errOut := run(t, "", "get", "bob@example.com", "--server="+urlB); code != 1 || !strings.Contains(errOut, "not-found") {
		t.Fatalf("an expired profile came back: %d %q", code, errOut)
	}
	if out, _ := b("", "ttl", "ada@example.com", "code", "visits", "fullName"); !strings.HasPrefix(out, "(profile)\t-1\tno deadline\ncode\t-2\tno such field\nvisits\t") ||
		!strings.HasSuffix(out, "fullName\t-1\tno deadline\n") {
		t.Fatalf("ttl of ada after the import: %q", out)
	}
	nowA, _ := a("", "export")
	nowB, _ := b("", "export")
	if nowA != nowB || !strings.Contains(nowB, `{"profile":{"emailAddress":"ada@example.com","fullName":"Ada","visits":"1"},"expires":{"fields":{"visits":4102444800000}}}`) {
		t.Fatalf("the import's export differs from the first directory's:\n%s\n%s", nowB, nowA)
	}
}

func TestExportErrors(t *testing.T) {
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	dir := t.TempDir()
	target := filepath.Join(dir, "out.jsonl")
	if code, _, errOut := run(t, "", "export", target, srv); code != 1 || !strings.Contains(errOut, "not started") {
		t.Fatalf("export before start: %d %q", code, errOut)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatal("a failed export created its file")
	}
	if code, _, _ := run(t, "", "export", "a", "b", srv); code != 2 {
		t.Fatalf("two files: exit %d, want 2", code)
	}
	if code, _, errOut := run(t, "", "export", filepath.Join(dir, "no", "such", "dir.jsonl"), srv); code == 0 || errOut == "" {
		t.Fatalf("export into a missing directory: %d %q", code, errOut)
	}
}
