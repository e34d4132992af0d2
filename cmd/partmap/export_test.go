package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
