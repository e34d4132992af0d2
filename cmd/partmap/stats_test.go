package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/stats"
)

// statsFixture picks emails so that partition groups[i] holds want[i]
// profiles: the partitions are distinct and found with PartitionOf, the
// first of each group being the first unused email's partition.
func statsFixture(t *testing.T, want ...int) (emails []string, groups []partmap.Partition) {
	t.Helper()
	used := map[partmap.Partition]bool{}
	next := 0
	email := func(i int) string { return fmt.Sprintf("stats%d@example.com", i) }
	for _, n := range want {
		for used[partmap.PartitionOf(email(next), partmap.DefaultPartitions)] {
			next++
		}
		p := partmap.PartitionOf(email(next), partmap.DefaultPartitions)
		used[p] = true
		groups = append(groups, p)
		for i, found := next, 0; found < n; i++ {
			if partmap.PartitionOf(email(i), partmap.DefaultPartitions) == p {
				emails = append(emails, email(i))
				found++
			}
		}
	}
	return emails, groups
}

// serveStatsFixture starts a server holding one partition of 5 profiles,
// one of 3 and ten of 1: 18 profiles in 12 partitions.
func serveStatsFixture(t *testing.T) (srv string, groups []partmap.Partition) {
	t.Helper()
	emails, groups := statsFixture(t, 5, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	url, _ := serveInProcess(t)
	srv = "--server=" + url
	var jsonl strings.Builder
	for _, e := range emails {
		fmt.Fprintf(&jsonl, "{\"emailAddress\":%q}\n", e)
	}
	if code, _, errOut := run(t, "", "start", srv); code != 0 {
		t.Fatalf("start: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, jsonl.String(), "import", "-", srv); code != 0 || !strings.Contains(errOut, "imported 18 profiles") {
		t.Fatalf("import: %d %s", code, errOut)
	}
	return srv, groups
}

func TestStatsCommand(t *testing.T) {
	srv, groups := serveStatsFixture(t)
	ones := slices.Sorted(slices.Values(groups[2:]))

	code, out, errOut := run(t, "", "stats", srv, "--top", "4", "--width", "40")
	bar33 := strings.Repeat("█", 33)
	want := fmt.Sprintf(`18 profiles in 1000 partitions: 12 in use, 988 empty
profiles per partition: min 0, median 0, p99 1, max 5 (nearest rank)
mean 0.02, stddev 0.21, cv 11.610
uniform hash: 0.02 ± 0.13 per partition; chi-square 2426.4 on 999 df (too few profiles per partition for a p-value)

largest partitions:
  %s  5
  %s  3
  %s  1
  %s  1

histogram (profiles per partition, number of partitions):
0 988 │%s
1  10 │▍
2   0 │
3   1 │▏
4   0 │
5   1 │▏
`, groups[0], groups[1], ones[0], ones[1], bar33)
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("got %d\n%s%q\nwant 0\n%s", code, out, errOut, want)
	}

	t.Run("JSON", func(t *testing.T) {
		code, out, errOut := run(t, "", "stats", srv, "--json", "--top", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got stats.Report
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got.Profiles != 18 || got.Partitions != 1000 || got.PartitionsInUse != 12 ||
			got.Min != 0 || got.Median != 0 || got.P99 != 1 || got.Max != 5 {
			t.Errorf("counts and quantiles: %+v", got)
		}
		if want := []stats.PartitionSize{{Name: groups[0].String(), Profiles: 5}, {Name: groups[1].String(), Profiles: 3}}; !reflect.DeepEqual(got.Largest, want) {
			t.Errorf("largest %v, want %v", got.Largest, want)
		}
		if h := got.Histogram; len(h) != 6 || h[0].Partitions != 988 || h[5].Partitions != 1 {
			t.Errorf("histogram %v, want 6 bins from 988 empty partitions to 1 of 5 profiles", h)
		}
	})

	// The plot is the library's drawing of the report the command shows.
	// What the drawing holds is tested in package stats.
	code, out, _ = run(t, "", "stats", srv, "--json")
	var r stats.Report
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("--json: %d %v", code, err)
	}
	for _, tc := range []struct {
		name, file string
		render     func(*stats.Report, io.Writer) error
	}{{"SVG", "sizes.SVG", (*stats.Report).WriteSVG}, {"PNG", "sizes.png", (*stats.Report).WritePNG}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			code, out, errOut := run(t, "", "stats", srv, "--plot", path, "--json")
			if code != 0 || out == "" || errOut != "wrote "+path+"\n" {
				t.Fatalf("got %d %q %q", code, out, errOut)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := tc.render(&r, &want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%s holds %d bytes, not the report's %d-byte plot", path, len(got), want.Len())
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %v, want 0644", fi.Mode().Perm())
			}
		})
	}

	t.Run("ErrPlotFails", func(t *testing.T) {
		dir := t.TempDir()
		missing := filepath.Join(dir, "no", "such", "dir.svg")
		if code, _, errOut := run(t, "", "stats", srv, "--plot", missing); code != 1 || !strings.Contains(errOut, "no such file") {
			t.Errorf("plot into a missing directory: %d %q", code, errOut)
		}
		// The rename fails onto a directory: the temporary file goes too.
		taken := filepath.Join(dir, "taken.png")
		if err := os.Mkdir(taken, 0o755); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := run(t, "", "stats", srv, "--plot", taken); code != 1 {
			t.Errorf("plot over a directory: exit %d, want 1", code)
		}
		if names, _ := os.ReadDir(dir); len(names) != 1 || names[0].Name() != "taken.png" {
			t.Errorf("a failed plot left %v", names)
		}
	})
}

func TestStatsCommandErrors(t *testing.T) {
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ErrNotStarted", []string{"stats"}, 1, "not started"},
		{"ErrNegativeTop", []string{"stats", "--top", "-1"}, 2, "--top must not be negative"},
		{"ErrTopNotANumber", []string{"stats", "--top", "ten"}, 2, "invalid value"},
		{"ErrNarrowWidth", []string{"stats", "--width", "39"}, 2, "--width must be at least 40"},
		{"ErrNegativeWidth", []string{"stats", "--width", "-80"}, 2, "--width must be at least 40"},
		{"ErrPlotExtension", []string{"stats", "--plot", filepath.Join(dir, "sizes.jpg")}, 2, "must end in .svg or .png"},
		{"ErrPlotNoExtension", []string{"stats", "--plot", filepath.Join(dir, "sizes")}, 2, "must end in .svg or .png"},
		{"ErrArgument", []string{"stats", "extra"}, 2, "usage: partmap stats"},
		{"HelpNamesTheQuantiles", []string{"stats", "--help"}, 0, "nearest-rank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append(tc.args, srv)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) || out != "" {
				t.Fatalf("got %d %q %q, want %d and %q", code, out, errOut, tc.code, tc.msg)
			}
		})
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("a refused --plot wrote %v", names)
	}

	run(t, "", "start", srv)
	plot := filepath.Join(dir, "empty.svg")
	code, out, errOut := run(t, "", "stats", srv, "--plot", plot)
	if code != 0 || out != "the map holds no profiles: all 1000 partitions are empty\n" || !strings.Contains(errOut, "no plot written") {
		t.Fatalf("empty map: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(plot); !os.IsNotExist(err) {
		t.Errorf("an empty map wrote a plot: %v", err)
	}
	code, out, _ = run(t, "", "stats", srv, "--json")
	var r stats.Report
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.Profiles != 0 || r.PartitionsInUse != 0 || r.CV != nil ||
		r.Uniform != nil || len(r.Largest) != 0 || !reflect.DeepEqual(r.Histogram, []stats.Bin{{From: 0, To: 0, Partitions: 1000}}) {
		t.Fatalf("empty map --json: %d %v %s", code, err, out)
	}
}
