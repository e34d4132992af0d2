package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

func TestParseFieldSpec(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want partmap.IndexField
	}{
		{"fullName:TEXT", partmap.IndexField{Name: "fullName", Type: "TEXT"}},
		{"notes:text:nostem", partmap.IndexField{Name: "notes", Type: "TEXT", NoStem: true}},
		{"visits:Numeric:SORTABLE", partmap.IndexField{Name: "visits", Type: "NUMERIC", Sortable: true}},
		{"tags:TAG:separator=;:casesensitive", partmap.IndexField{Name: "tags", Type: "TAG", Separator: ";", CaseSensitive: true}},
		{"tier:TAG:whole:sortable", partmap.IndexField{Name: "tier", Type: "TAG", Whole: true, Sortable: true}},
		{"a:b:TAG", partmap.IndexField{Name: "a:b", Type: "TAG"}},           // colons in the name
		{"tag:TAG:TEXT", partmap.IndexField{Name: "tag:TAG", Type: "TEXT"}}, // the last type is the type
	} {
		t.Run("OK"+tc.spec, func(t *testing.T) {
			got, err := parseFieldSpec(tc.spec)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			if back, err := parseFieldSpec(fieldSpec(got)); err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("fieldSpec wrote %q, which reads back as %+v, %v", fieldSpec(got), back, err)
			}
		})
	}
	for _, spec := range []string{"", "fullName", "fullName:WORDS", ":TEXT", "TEXT", "visits:NUMERIC:sortable=yes", "visits:NUMERIC:fast", "tags:TAG:separator", "tags:TAG:separator="} {
		t.Run("Err"+spec, func(t *testing.T) {
			if f, err := parseFieldSpec(spec); err == nil {
				t.Fatalf("%q read as %+v", spec, f)
			}
		})
	}
}

// deskProfiles are a support desk's customers, as JSON Lines to import.
const deskProfiles = `{"emailAddress":"alice@example.com","fullName":"Alice Liddell","companyName":"Acme","customerTier":"gold","visits":"12"}
{"emailAddress":"bob@example.com","fullName":"Bob Alison","customerTier":"silver","visits":"3","notes":"running late"}
{"emailAddress":"carol@example.com","fullName":"Carol Alinsky","companyName":"Initech","customerTier":"gold, vip","visits":"40"}
{"emailAddress":"dan@example.com","fullName":"Dan Brown","companyName":"Acme","customerTier":"bronze"}
`

func TestIndexCommands(t *testing.T) {
	srv := startedServer(t)
	if code, _, errOut := run(t, deskProfiles, "import", "-", srv); code != 0 {
		t.Fatalf("import: %s", errOut)
	}

	code, out, errOut := run(t, "", "index", "create", "desk", "fullName:TEXT", "notes:TEXT:nostem", "customerTier:TAG", "visits:NUMERIC:sortable", "--stopwords", "", srv)
	if code != 0 || out != "index desk is built: 4 profiles\n" || !strings.Contains(errOut, "created index desk") {
		t.Fatalf("index create: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, "", "index", "list", srv)
	want := "NAME\tPROFILES\tSTATE\tSTOPWORDS\tFIELDS\n" +
		"profiles\t4\tready\tnone\tcompanyName:TAG:casesensitive:whole customerTier:TAG:casesensitive:whole\n" +
		"desk\t4\tready\tnone\tfullName:TEXT notes:TEXT:nostem customerTier:TAG visits:NUMERIC:sortable\n"
	if code != 0 || out != want {
		t.Fatalf("index list: %d %q, want %q", code, out, want)
	}
	code, out, _ = run(t, "", "index", "list", "--json", srv)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 ||
		lines[1] != `{"name":"desk","fields":[{"name":"fullName","type":"TEXT"},{"name":"notes","type":"TEXT","noStem":true},{"name":"customerTier","type":"TAG"},{"name":"visits","type":"NUMERIC","sortable":true}],"stopwords":[],"numDocs":4,"building":false,"progress":1}` {
		t.Fatalf("index list --json: %d %q", code, out)
	}
	if code, _, errOut := run(t, "", "index", "create", "--detach", "late", "fullName:TEXT", srv); code != 0 || !strings.Contains(errOut, "created index late") {
		t.Fatalf("index create --detach: %d %q", code, errOut)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ErrExists", []string{"create", "desk", "fullName:TEXT"}, 1, "Index already exists (exists)"},
		{"ErrServerRefuses", []string{"create", "x", "visits:NUMERIC:nostem"}, 1, "only a TEXT field takes NOSTEM"},
		{"ErrBadSpec", []string{"create", "x", "fullName"}, 2, `want FIELD:TYPE[:OPTION]...`},
		{"ErrNoFields", []string{"create", "x"}, 2, "usage: partmap index create"},
		{"ErrDropUnknown", []string{"drop", "nope"}, 1, "Unknown Index name (not-found)"},
		{"ErrDropLegacy", []string{"drop", "profiles"}, 1, "cannot be dropped"},
		{"ErrNoVerb", nil, 2, "partmap index create"},
		{"ErrUnknownVerb", []string{"rebuild"}, 2, "partmap index create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append(append([]string{"index"}, tc.args...), srv)...)
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.msg) {
				t.Errorf("%d %q %q; want %d saying %q", code, out, errOut, tc.code, tc.msg)
			}
		})
	}

	if code, _, errOut := run(t, "", "index", "drop", "late", srv); code != 0 || !strings.Contains(errOut, "dropped index late") {
		t.Fatalf("index drop: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "search", "late", "*", srv); code != 1 || !strings.Contains(errOut, "Unknown Index name") {
		t.Fatalf("search of a dropped index: %d %q", code, errOut)
	}
}

func TestSearchCommand(t *testing.T) {
	srv := startedServer(t)
	if code, _, errOut := run(t, deskProfiles, "import", "-", srv); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	if code, _, errOut := run(t, "", "index", "create", "desk", "fullName:TEXT", "notes:TEXT", "customerTier:TAG", "visits:NUMERIC:sortable", srv); code != 0 {
		t.Fatalf("index create: %s", errOut)
	}

	for _, tc := range []struct {
		name     string
		args     []string
		out, err string
	}{
		{"OKTable", []string{"desk", "@customerTier:{gold}", "--sort-by", "visits", "--desc"},
			"EMAIL\tFULL NAME\tCOMPANY\tTIER\tvisits\ncarol@example.com\tCarol Alinsky\tInitech\tgold, vip\t40\nalice@example.com\tAlice Liddell\tAcme\tgold\t12\n",
			"2 matching profiles\n"},
		{"OKQueryOfSeveralWords", []string{"desk", "ali*", "@customerTier:{gold}", "--sort-by", "fullName", "--no-content"},
			"EMAIL\nalice@example.com\ncarol@example.com\n", "2 matching profiles\n"},
		{"OKNegationAfterDashes", []string{"desk", "--no-content", "--", "-@customerTier:{gold}", "-bob"},
			"EMAIL\ndan@example.com\n", "1 matching profile\n"},
		{"OKReturn", []string{"desk", "ali*", "--sort-by", "visits", "--return", "visits,nickname,fullName"},
			"EMAIL\tvisits\tnickname\tFULL NAME\nbob@example.com\t3\t\tBob Alison\nalice@example.com\t12\t\tAlice Liddell\ncarol@example.com\t40\t\tCarol Alinsky\n",
			"3 matching profiles\n"},
		{"OKJSON", []string{"desk", "running", "--json"},
			`{"emailAddress":"bob@example.com","fullName":"Bob Alison","customerTier":"silver","notes":"running late","visits":"3"}` + "\n", "1 matching profile\n"},
		{"OKJSONReturn", []string{"desk", "@visits:[10 +inf]", "--json", "--sort-by", "visits", "--return", "visits,fullName,emailAddress"},
			`{"emailAddress":"alice@example.com","visits":"12","fullName":"Alice Liddell"}` + "\n" + `{"emailAddress":"carol@example.com","visits":"40","fullName":"Carol Alinsky"}` + "\n",
			"2 matching profiles\n"},
		{"OKJSONNoContent", []string{"desk", "@customerTier:{bronze}", "--json", "--no-content"},
			`{"emailAddress":"dan@example.com"}` + "\n", "1 matching profile\n"},
		{"OKPage", []string{"desk", "*", "--sort-by", "visits", "--limit", "1", "--offset", "1", "--no-content"},
			"EMAIL\nalice@example.com\n", "1 of 4 matching profiles; --all for every one, or --offset 2 for the next page\n"},
		{"OKCount", []string{"desk", "@customerTier:{gold}", "--limit", "0"}, "", "2 profiles match\n"},
		{"OKNothing", []string{"desk", "nobody"}, "EMAIL\tFULL NAME\tCOMPANY\tTIER\n", "0 matching profiles\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append([]string{"search", srv}, tc.args...)...)
			if code != 0 || out != tc.out || errOut != tc.err {
				t.Errorf("got %d\n%q %q\nwant\n%q %q", code, out, errOut, tc.out, tc.err)
			}
		})
	}

	// Refused: usage errors exit 2, the server's refusals 1 with its
	// words; neither prints anything to stdout.
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ErrSyntax", []string{"desk", "(ali"}, 1, "Syntax error at offset 4 near end of query: the ( at offset 0 is not closed (invalid)"},
		{"ErrUnknownField", []string{"desk", "@city:{Oslo}"}, 1, "Unknown field at offset 0 near city"},
		{"ErrUnknownIndex", []string{"nope", "*"}, 1, "Unknown Index name (not-found)"},
		{"ErrSortBy", []string{"desk", "*", "--sort-by", "city"}, 1, "Property `city` not loaded nor in schema"},
		{"ErrNoQuery", []string{"desk"}, 2, "usage: partmap search"},
		{"ErrDashWithoutDashes", []string{"desk", "-@customerTier:{gold}"}, 2, "flag provided but not defined"},
		{"ErrDescAlone", []string{"desk", "*", "--desc"}, 2, "--desc needs --sort-by"},
		{"ErrLimit", []string{"desk", "*", "--limit", "10001"}, 2, "--limit must be from 0 to 10000"},
		{"ErrNegativeLimit", []string{"desk", "*", "--limit", "-1"}, 2, "--limit must be from 0 to 10000"},
		{"ErrOffset", []string{"desk", "*", "--offset", "-1"}, 2, "--offset must be 0 or more"},
		{"ErrAllOfNone", []string{"desk", "*", "--all", "--limit", "0"}, 2, "--all shows every hit"},
		{"ErrReturnAndNoContent", []string{"desk", "*", "--return", "a", "--no-content"}, 2, "cannot go together"},
		{"ErrPageSize", []string{"desk", "*", "--page-size", "5"}, 2, "--page-size pages a FIELD=VALUE search"},
		{"ErrNewFlagOldForm", []string{"customerTier=gold", "--sort-by", "visits"}, 2, "--sort-by goes with `partmap search INDEX QUERY`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append([]string{"search", srv}, tc.args...)...)
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.msg) {
				t.Errorf("%d %q %q; want %d saying %q", code, out, errOut, tc.code, tc.msg)
			}
		})
	}

	// The equality search of FIELD=VALUE conditions keeps working as it
	// did.
	if code, out, errOut := run(t, "", "search", "customerTier=gold", "companyName=Acme", srv); code != 0 || !strings.HasPrefix(out, "EMAIL\tFULL NAME\tCOMPANY\tTIER\tPARTITION\nalice@example.com\t") || errOut != "1 profile\n" {
		t.Fatalf("search FIELD=VALUE: %d %q %q", code, out, errOut)
	}
}

// --all follows the cursor through every page: what it prints is what one
// page of every hit holds, in the same order.
func TestSearchCommandAll(t *testing.T) {
	srv := startedServer(t)
	var in strings.Builder
	for i := range 2345 {
		fmt.Fprintf(&in, `{"emailAddress":"c%04d@example.com","fullName":"Customer %d","visits":"%d"}`+"\n", i, i, i%97)
	}
	if code, _, errOut := run(t, in.String(), "import", "-", srv); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	if code, _, errOut := run(t, "", "index", "create", "crowd", "fullName:TEXT", "visits:NUMERIC:sortable", srv); code != 0 {
		t.Fatalf("index create: %s", errOut)
	}
	for _, order := range [][]string{nil, {"--sort-by", "visits", "--desc"}} {
		code, all, errOut := run(t, "", append([]string{"search", "crowd", "customer", "--all", "--json", srv}, order...)...)
		if code != 0 || strings.Count(all, "\n") != 2345 || errOut != "2345 matching profiles\n" {
			t.Fatalf("search --all %v: %d, %d lines, %q", order, code, strings.Count(all, "\n"), errOut)
		}
		code, one, _ := run(t, "", append([]string{"search", "crowd", "customer", "--limit", "10000", "--json", srv}, order...)...)
		if code != 0 || one != all {
			t.Errorf("search --all %v differs from one page of every hit", order)
		}
		code, some, errOut := run(t, "", append([]string{"search", "crowd", "customer", "--all", "--limit", "700", "--offset", "45", "--json", srv}, order...)...)
		if code != 0 || some != strings.Join(strings.SplitAfter(all, "\n")[45:], "") || errOut != "2300 of 2345 matching profiles\n" {
			t.Errorf("search --all --limit 700 --offset 45 %v: %d, %d lines, %q", order, code, strings.Count(some, "\n"), errOut)
		}
	}
}

// The built binary, against a `partmap serve` process: the shell's view
// of exit codes and of a query that starts with a dash.
func TestSearchCommandBinary(t *testing.T) {
	bin := binary(t)
	p := startProcess(t, filepath.Join(t.TempDir(), "data"))
	cli := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		at := len(args) // the server's flag goes before any --
		if i := slices.Index(args, "--"); i >= 0 {
			at = i
		}
		cmd := exec.Command(bin, slices.Insert(slices.Clone(args), at, "--server", p.url)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errOut.String()
	}
	for _, args := range [][]string{{"start"}, {"import", "-"}, {"index", "create", "desk", "fullName:TEXT", "customerTier:TAG"}} {
		if code, _, errOut := cli(deskProfiles, args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut)
		}
	}
	if code, out, _ := cli("", "search", "desk", "--no-content", "--", "-@customerTier:{gold}", "-bob"); code != 0 || out != "EMAIL\ndan@example.com\n" {
		t.Errorf("a negated query after --: %d %q", code, out)
	}
	if code, out, errOut := cli("", "search", "desk", "ali*"); code != 0 || !strings.Contains(out, "alice@example.com\tAlice Liddell\tAcme\tgold\n") || errOut != "3 matching profiles\n" {
		t.Errorf("search desk ali*: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := cli("", "search", "desk", "a*"); code != 1 || out != "" || !strings.Contains(errOut, "Prefix too short at offset 0") {
		t.Errorf("a prefix too short: %d %q %q", code, out, errOut)
	}
}
