package main

import (
	"strings"
	"testing"
	"time"
)

func TestPartitionCommand(t *testing.T) {
	code, out, errOut := run(t, "", "partition", " Alice@Example.COM ", "bob@example.com")
	want := "alice@example.com\t2493822278\tpartition-278\nbob@example.com\t3055529145\tpartition-145\n"
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("got %d %q %q, want 0 %q", code, out, errOut, want)
	}
	for _, bad := range []string{"", "   ", "é@example.com"} {
		code, out, errOut := run(t, "", "partition", "ok@example.com", bad)
		if code != 1 || !strings.HasPrefix(out, "ok@example.com\t") || !strings.Contains(errOut, "email address") {
			t.Errorf("partition %q: got %d %q %q", bad, code, out, errOut)
		}
	}
	if code, _, _ := run(t, "", "partition"); code != 2 {
		t.Errorf("partition without arguments exited %d, want 2", code)
	}
}

func TestUsage(t *testing.T) {
	if code, out, _ := run(t, "", "help"); code != 0 || !strings.Contains(out, "serve") {
		t.Fatalf("help: %d %q", code, out)
	}
	if code, _, errOut := run(t, "", "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	if code, _, _ := run(t, "", "get", "--nope"); code != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
	if code, _, errOut := run(t, "", "serve", "--log-format", "xml"); code != 2 || !strings.Contains(errOut, "--log-format") {
		t.Fatalf("bad serve flag: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "get", "--server", "127.0.0.1:8080", "a@b"); code != 2 || !strings.Contains(errOut, "not an http") {
		t.Fatalf("bad --server: %d %q", code, errOut)
	}
}

func TestClientCommands(t *testing.T) {
	url, _ := serveInProcess(t)
	srv := "--server=" + url

	if code, _, errOut := run(t, "", "get", srv, "alice@example.com"); code != 1 || !strings.Contains(errOut, "not started") {
		t.Fatalf("get before start: %d %q", code, errOut)
	}
	if code, out, _ := run(t, "", "start", srv); code != 0 || out != "started\n" {
		t.Fatalf("start: %d %q", code, out)
	}
	if code, out, _ := run(t, "", "start", srv); code != 0 || out != "already started\n" {
		t.Fatalf("second start: %d %q", code, out)
	}

	code, out, errOut := run(t, "", "put", " Alice@Example.COM ", srv, "--name", "Alice Liddell", "--company", "Acme", "--tier", "gold", "--field", "name.first=Alice", "--field", "note=a=b")
	if code != 0 || !strings.Contains(errOut, "created alice@example.com") || !strings.Contains(out, `"name.first": "Alice"`) || !strings.Contains(out, `"note": "a=b"`) {
		t.Fatalf("put from flags: %d %q %q", code, out, errOut)
	}
	code, out, errOut = run(t, `{"emailAddress":"alice@example.com","fullName":"Alice L","customerTier":""}`, "put", srv)
	if code != 0 || !strings.Contains(errOut, "replaced alice@example.com") {
		t.Fatalf("put from stdin: %d %q %q", code, out, errOut)
	}
	code, out, _ = run(t, "", "get", srv, "ALICE@example.com")
	want := "{\n  \"emailAddress\": \"alice@example.com\",\n  \"fullName\": \"Alice L\",\n  \"customerTier\": \"\"\n}\n"
	if code != 0 || out != want {
		t.Fatalf("get: %d %q, want %q", code, out, want)
	}

	runRefusals(t, srv, []refusal{
		{"ErrBadJSON", `{"emailAddress":`, []string{"put"}, 1, "malformed JSON"},
		{"ErrNonString", `{"emailAddress":"a@b","n":1}`, []string{"put"}, 1, "must be a string"},
		{"ErrBadEmail", ``, []string{"put", "é@b", "--name", "x"}, 1, "ASCII"},
		{"ErrFieldsWithoutEmail", ``, []string{"put", "--name", "x"}, 2, "needs an EMAIL"},
		{"ErrBadField", ``, []string{"put", "a@b", "--field", "novalue"}, 2, "NAME=VALUE"},
		{"ErrCreateExisting", ``, []string{"put", "alice@example.com", "--create", "--name", "x"}, 1, "already exists"},
		{"ErrGetMissing", ``, []string{"get", "nobody@example.com"}, 1, "not-found"},
		{"ErrGetNone", ``, []string{"get"}, 2, "usage: partmap get"},
		{"ErrGetManyBadEmail", ``, []string{"get", "a@b", "é@b"}, 1, `emails[1] "\u00e9@b"`},
	})
	if _, out, _ := run(t, "", "get", srv, "alice@example.com"); out != want {
		t.Fatalf("a refused command changed the profile: %q", out)
	}
}

func TestServerEnvDefault(t *testing.T) {
	url, _ := serveInProcess(t)
	t.Setenv("PARTMAP_SERVER", url)
	if code, out, errOut := run(t, "", "start"); code != 0 || out != "started\n" {
		t.Fatalf("start with PARTMAP_SERVER: %d %q %q", code, out, errOut)
	}
}

// mustRun returns a runner of partmap commands against the server flag
// srv, which fails the test on a non-zero exit and returns stdout and
// stderr.
func mustRun(t *testing.T, srv string) func(stdin string, args ...string) (string, string) {
	return func(stdin string, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := run(t, stdin, append(args, srv)...)
		if code != 0 {
			t.Fatalf("partmap %q: exit %d: %s", args, code, errOut)
		}
		return out, errOut
	}
}

// refusal is a command that must exit with code and say msg.
type refusal struct {
	name  string
	stdin string
	args  []string
	code  int
	msg   string
}

// runRefusals runs each command against srv, as a subtest of its name.
func runRefusals(t *testing.T, srv string, cases []refusal) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, tc.stdin, append(tc.args, srv)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("got %d %q, want %d and %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
}

func TestFieldCommands(t *testing.T) {
	srv := startedServer(t)
	must := mustRun(t, srv)
	must("", "put", "ada@example.com", "--name", "Ada", "--field", "visits=0")
	must("", "put", "bob@example.com", "--name", "Bob\tthe\nbuilder")

	out, _ := must("", "get", "ada@example.com", "--fields", "visits,nickname,fullName")
	if want := "{\n  \"visits\": \"0\",\n  \"nickname\": null,\n  \"fullName\": \"Ada\"\n}\n"; out != want {
		t.Fatalf("get --fields: %q, want %q", out, want)
	}
	for _, fields := range []string{"", "visits,,fullName"} {
		if code, out, errOut := run(t, "", "get", "ada@example.com", "--fields", fields, srv); code != 2 || out != "" || !strings.Contains(errOut, "a field name in the list is empty") {
			t.Errorf("get --fields %q: %d %q %q", fields, code, out, errOut)
		}
	}
	_, errOut := must("", "patch", "ada@example.com", "--set", "nickname=A", "--set", "fullName=Ada L", "--delete", "absent")
	if !strings.Contains(errOut, "1 field added, 0 deleted") {
		t.Fatalf("patch from flags: %q", errOut)
	}
	_, errOut = must(`{"nickname":null,"city":"London"}`, "patch", "ada@example.com")
	if !strings.Contains(errOut, "1 field added, 1 deleted") {
		t.Fatalf("patch from stdin: %q", errOut)
	}
	if out, _ := must("", "incr", "ada@example.com", "visits", "--by", "41"); out != "41\n" {
		t.Fatalf("incr: %q", out)
	}
	if out, _ := must("", "incr", "ada@example.com", "visits"); out != "42\n" {
		t.Fatalf("incr by default: %q", out)
	}
	out, errOut = must("", "list", "--page-size", "1")
	if !strings.Contains(out, "ada@example.com\tAda L\t\t\tpartition-") || !strings.Contains(out, `Bob\tthe\nbuilder`) || errOut != "2 profiles\n" {
		t.Fatalf("list: %q %q", out, errOut)
	}
	out, _ = must("", "list", "--json")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], `{"emailAddress":`) {
		t.Fatalf("list --json: %q", out)
	}
	out, errOut = must("", "partitions")
	if !strings.HasPrefix(out, "PARTITION\tPROFILES\n") || errOut != "2 partitions in use, 2 profiles\n" {
		t.Fatalf("partitions: %q %q", out, errOut)
	}
	must("", "delete", "bob@example.com")

	runRefusals(t, srv, []refusal{
		{"ErrIncrNotInteger", "", []string{"incr", "ada@example.com", "city"}, 1, "not-an-integer"},
		{"ErrIncrBadBy", "", []string{"incr", "ada@example.com", "visits", "--by", "1.5"}, 2, "--by must be a signed 64-bit integer"},
		{"ErrPatchEmail", "", []string{"patch", "ada@example.com", "--delete", "emailAddress"}, 1, "key-field"},
		{"ErrPatchBoth", "", []string{"patch", "ada@example.com", "--set", "a=1", "--delete", "a"}, 2, "both set and deleted"},
		{"ErrPatchMissing", "", []string{"patch", "nobody@example.com", "--set", "a=1"}, 1, "not-found"},
		{"ErrDeleteMissing", "", []string{"delete", "bob@example.com"}, 1, "not-found"},
		{"ErrDeleteStale", "", []string{"delete", "ada@example.com", "--if-match", `"0000000000000001"`}, 1, "precondition-failed"},
		{"ErrBadETag", "", []string{"delete", "ada@example.com", "--if-match", "abc"}, 2, "not an ETag partmap issued"},
		{"ErrListPageSize", "", []string{"list", "--page-size", "0"}, 2, "--page-size"},
	})
	out, _ = must("", "get", "ada@example.com")
	if !strings.Contains(out, `"visits": "42"`) || !strings.Contains(out, `"city": "London"`) {
		t.Fatalf("after the refused commands: %s", out)
	}
}

func TestLockWaitFlag(t *testing.T) {
	for flag, want := range map[time.Duration]time.Duration{0: -1, 50 * time.Millisecond: 50 * time.Millisecond} {
		if got := (serveConfig{lockWait: flag}).storeOptions().LockWait; got != want {
			t.Errorf("--lock-wait %v: store LockWait %v, want %v", flag, got, want)
		}
	}
	if code, _, errOut := run(t, "", "serve", "--lock-wait", "-1s"); code != 2 || !strings.Contains(errOut, "--lock-wait must not be negative") {
		t.Errorf("negative --lock-wait: %d %q", code, errOut)
	}
}

func TestRecordCacheFlag(t *testing.T) {
	for mb, want := range map[int]int64{0: -1, 16: 16 << 20} {
		if got := (serveConfig{recordCacheMB: mb}).storeOptions().RecordCacheBytes; got != want {
			t.Errorf("--record-cache %d: store RecordCacheBytes %d, want %d", mb, got, want)
		}
	}
}

func TestCommitDelayFlags(t *testing.T) {
	opts := (serveConfig{commitDelay: 2 * time.Millisecond, siblings: 3}).storeOptions()
	if opts.CommitDelay != 2*time.Millisecond || opts.CommitSiblings != 3 {
		t.Errorf("--commit-delay 2ms --commit-siblings 3: store options %v, %d", opts.CommitDelay, opts.CommitSiblings)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--commit-delay", "-1ms", "--commit-delay must be between 0 and 1s"},
		{"--commit-delay", "2s", "--commit-delay must be between 0 and 1s"},
		{"--commit-siblings", "-1", "--commit-siblings must not be negative"},
		{"--record-cache", "-1", "--record-cache must be between 0 and 65536 MB"},
	} {
		if code, _, errOut := run(t, "", "serve", tc.flag, tc.value); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("serve %s %s: %d %q", tc.flag, tc.value, code, errOut)
		}
	}
}

func TestCLIGuards(t *testing.T) {
	srv := startedServer(t)
	run(t, "", "put", "ada@example.com", "--name", "Ada", srv)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ErrPutEmailWithoutFields", []string{"put", "ada@example.com"}, 2, "needs at least one field flag"},
		{"ErrCreateAndIfMatch", []string{"put", "ada@example.com", "--name", "x", "--create", "--if-match", "*"}, 2, "contradict"},
		{"ErrFieldTwice", []string{"put", "ada@example.com", "--name", "A", "--field", "fullName=B"}, 2, "given twice"},
		{"ErrPageSize", []string{"list", "--page-size", "1001"}, 2, "--page-size"},
		{"ErrIfMatchStarMissing", []string{"patch", "nobody@example.com", "--set", "a=1", "--if-match", "*"}, 1, "precondition-failed"},
		{"HelpIsNotAnError", []string{"get", "--help"}, 0, "usage: partmap get"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, "", append(tc.args, srv)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("got %d %q, want %d and %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
	if _, out, _ := run(t, "", "get", "ada@example.com", srv); !strings.Contains(out, `"fullName": "Ada"`) {
		t.Fatalf("a refused command changed the profile: %s", out)
	}
	// An ETag works with its quotes or, as a shell leaves it, without.
	etagOf := func(putOutput string) string {
		return putOutput[strings.Index(putOutput, `"`)+1 : strings.LastIndex(putOutput, `"`)]
	}
	_, _, errOut := run(t, "", "put", "ada@example.com", "--name", "Ada", srv)
	stale := etagOf(errOut)
	_, _, errOut = run(t, "", "put", "ada@example.com", "--name", "Ada", srv)
	current := etagOf(errOut)
	if code, _, errOut := run(t, "", "patch", "ada@example.com", "--set", "x=1", "--if-match", stale, srv); code != 1 || !strings.Contains(errOut, "precondition") {
		t.Fatalf("a stale unquoted ETag: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "patch", "ada@example.com", "--set", "x=1", "--if-match", current, srv); code != 0 {
		t.Fatalf("the current ETag without quotes: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "delete", "ada@example.com", "--if-match", "*", srv); code != 0 {
		t.Fatalf("delete --if-match '*': %d %q", code, errOut)
	}
	run(t, "", "put", "ada@example.com", "--name", "Ada", srv)
	if _, out, _ := run(t, "", "list", srv); !strings.Contains(out, "ada@example.com\tAda\t\t\tpartition-562\n") {
		t.Fatalf("list line: %q", out)
	}
}
