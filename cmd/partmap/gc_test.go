package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// An import must not drive the server's collector back to back. Under a
// soft memory limit below an import's working set (two bulk requests of
// 10,000 profiles and the record cache), `serve` collected about once per
// 800 profiles, at half of its CPU; with headroom, about once per 8,000.
// The count of collections, from the child's own GODEBUG=gctrace=1 lines,
// depends on the bytes allocated and the heap's headroom, not on the
// machine's speed.
func TestServeGCKeepsHeadroomForImport(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 50,000 profiles into a child server")
	}
	const n = 50_000
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"emailAddress":"user%d@example%d.com","fullName":"User Number %d","companyName":"Company %d","customerTier":"%s"}`+"\n",
			i, i%10, i, i%1000, []string{"gold", "silver", "bronze"}[i%3])
	}
	file := filepath.Join(t.TempDir(), "profiles.jsonl")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// GOGC and GOMEMLIMIT would override serve's own settings.
	env := []string{"GODEBUG=gctrace=1", "GOGC=", "GOMEMLIMIT="}
	p := startProcessEnv(t, env, filepath.Join(t.TempDir(), "data"))
	srv := "--server=" + p.url
	if code, _, errOut := run(t, "", "start", srv); code != 0 {
		t.Fatalf("start: %s", errOut)
	}
	cycles := regexp.MustCompile(`(?m)^gc \d+ @`)
	before := len(cycles.FindAllString(p.logs.String(), -1))
	if code, _, errOut := run(t, "", "import", file, srv); code != 0 || !strings.Contains(errOut, "imported 50000 profiles") {
		t.Fatalf("import: %d %q", code, errOut)
	}
	got := len(cycles.FindAllString(p.logs.String(), -1)) - before
	t.Logf("%d collections during an import of %d profiles", got, n)
	if limit := n / 2000; got > limit {
		t.Errorf("%d collections during an import of %d profiles, want at most %d: the heap has no headroom", got, n, limit)
	}
}
