package http_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pmhttp "github.com/partmap/partmap/http"
)

// TestREADMEWalk runs the ```sh examples of the README's "A walk through
// the HTTP API", in order, in one bash shell (so that variables carry from
// one command to the next, as in a user's terminal), with curl, against a
// real server on a fresh Pebble store, and checks what each command prints
// against the "# " lines the README shows after it. Every difference is
// reported, by README line.
//
// Parsing. A command is a line of a ```sh block that is not a "#" line,
// with the lines that continue it as bash would read them (a trailing
// backslash, an open quote or $(, a trailing | or && or ||); it goes to
// bash as written. The "# " lines that follow a command are its expected
// output, one line each; a "# " line indented further ("#   ...")
// continues the one before it (the README wraps long output). A "# " line
// before any command of its block is a comment. A command with no "# "
// lines is run and must succeed (exit status 0, nothing on stderr), its
// output unchecked. A command holding "…" or "..." is a placeholder, not
// runnable as written: an error unless readmeWalkSkips names it. The
// address in B=http://127.0.0.1:8080/... becomes the test server's.
//
// Matching. "…" and "..." in an expected line match any text. Values the
// README cannot know compare equal whatever they are: ETags (16 hex digits
// in quotes, in an Etag header or JSON-escaped in a body, or the README's
// abbreviation of one), timestamps ("now" and "deadline" members, RFC 3339
// times anywhere), the opaque random tokens "nextCursor" (when not null)
// and "lease", and a "progress" strictly between 0 and 1; a "ttl" may
// differ by up to 5 s. For curl -i only what the README shows is compared:
// the status line, each header it shows (name case-insensitively, in any
// order) and the body.
//
// PARTMAP_README=FILE walks another copy of the README, to see the test
// fail on a wrong expected output without editing README.md.
func TestREADMEWalk(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	path := os.Getenv("PARTMAP_README")
	if path == "" {
		path = filepath.Join("..", "README.md")
	}
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseWalk(string(readme), "## A walk through the HTTP API")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}

	store := newStore(t, nil)
	srv := serveStore(t, store, &pmhttp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	sh := startWalkShell(t)

	skipsUsed := map[string]bool{}
	for _, st := range steps {
		first := st.firstLine()
		if why, ok := readmeWalkSkips[first]; ok {
			skipsUsed[first] = true
			t.Logf("README line %d skipped (readmeWalkSkips: %s): %s", st.line, why, first)
			continue
		}
		if walkEllipsis.MatchString(st.cmd) {
			t.Errorf("README line %d holds an abbreviation (… or ...), so it cannot run as written: %s", st.line, st.cmd)
		}
		cmd := readmeLocalAddr.ReplaceAllString(st.cmd, srv.URL)
		st.check(t, cmd, sh.run(t, cmd))
	}
	for line := range readmeWalkSkips {
		if !skipsUsed[line] {
			t.Errorf("readmeWalkSkips names a line the walk no longer has; remove it: %s", line)
		}
	}
	checked := 0
	for _, st := range steps {
		if len(st.want) > 0 {
			checked++
		}
	}
	t.Logf("%s: ran %d commands, %d with output to check", path, len(steps), checked)
}

// readmeWalkSkips are the README's commands that cannot be run as written
// (say, one holding a value abbreviated with …), by their exact first line,
// with the reason. None today: an entry makes a skipped example visible
// here and in the test's log, and one the README no longer has fails.
var readmeWalkSkips = map[string]string{}

// readmeLocalAddr is the server address the README's examples use.
var readmeLocalAddr = regexp.MustCompile(`http://(?:127\.0\.0\.1|localhost):[0-9]+`)

// A walkStep is one command of the walk and the output the README shows.
type walkStep struct {
	line int    // the README line the command starts on
	cmd  string // its lines, as in the README
	want []wantLine
}

type wantLine struct {
	line int // README line
	text string
}

func (st walkStep) firstLine() string { return strings.SplitN(st.cmd, "\n", 2)[0] }

// parseWalk returns the commands of the ```sh blocks under heading, up to
// the next "## " heading.
func parseWalk(readme, heading string) ([]walkStep, error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimRight(l, " \r") == heading {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no section %q", heading)
	}
	var steps []walkStep
	inFence, inSh := false, false
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r")
		if !inFence && strings.HasPrefix(l, "## ") {
			break
		}
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if inFence {
				inFence, inSh = false, false
			} else {
				inFence = true
				inSh = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```")) == "sh"
			}
			continue
		}
		if !inSh || strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			text := strings.TrimPrefix(strings.TrimPrefix(l, "#"), " ")
			if len(steps) == 0 || steps[len(steps)-1].line < blockStart(lines, i) {
				continue // a comment before any command of the block
			}
			st := &steps[len(steps)-1]
			if text != strings.TrimLeft(text, " \t") && len(st.want) > 0 {
				st.want[len(st.want)-1].text += strings.TrimLeft(text, " \t")
				continue
			}
			st.want = append(st.want, wantLine{i + 1, text})
			continue
		}
		// A command: read on while bash would.
		st := walkStep{line: i + 1}
		var sc shellScan
		for {
			l = strings.TrimRight(lines[i], "\r")
			if st.cmd != "" {
				st.cmd += "\n"
			}
			st.cmd += l
			if !sc.line(l) {
				break
			}
			if i++; i >= len(lines) || strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
				return nil, fmt.Errorf("line %d: the command does not end before its block does", st.line)
			}
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no commands under %q", heading)
	}
	return steps, nil
}

// blockStart is the README line number (1-based) of the first line of the
// fenced block holding lines[i].
func blockStart(lines []string, i int) int {
	for i > 0 && !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "```") {
		i--
	}
	return i + 1 // as a README line number, the first line inside the fence
}

// shellScan follows bash's quoting across the lines of one command: its
// stack holds the open contexts inside the command's top level: ' and "
// quotes, and $( command substitutions (and parentheses inside them).
type shellScan struct{ stack []byte }

// line scans one line and says whether the command goes on to the next.
func (s *shellScan) line(l string) (more bool) {
	code := l
	top := func() byte {
		if len(s.stack) == 0 {
			return 0
		}
		return s.stack[len(s.stack)-1]
	}
	pop := func() { s.stack = s.stack[:len(s.stack)-1] }
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch top() {
		case '\'':
			if c == '\'' {
				pop()
			}
			continue
		case '"':
			switch {
			case c == '\\':
				i++
			case c == '"':
				pop()
			case c == '$' && i+1 < len(l) && l[i+1] == '(':
				s.stack = append(s.stack, '(')
				i++
			}
			continue
		}
		// Code: the top level, or inside $( ).
		switch {
		case c == '\\':
			if i == len(l)-1 {
				return true
			}
			i++
		case c == '\'' || c == '"':
			s.stack = append(s.stack, c)
		case c == '$' && i+1 < len(l) && l[i+1] == '(':
			s.stack = append(s.stack, '(')
			i++
		case c == '(' && top() == '(':
			s.stack = append(s.stack, '(')
		case c == ')' && top() == '(':
			pop()
		case c == '#' && top() == 0 && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			code = l[:i] // a trailing comment
			i = len(l)
		}
	}
	if len(s.stack) > 0 {
		return true
	}
	code = strings.TrimSpace(code)
	for _, op := range []string{"|", "&&", "||"} {
		if strings.HasSuffix(code, op) {
			return true
		}
	}
	return false
}

// walkShell is one bash process that runs the walk's commands in turn.
type walkShell struct {
	stdin io.Writer
	lines chan string
	dir   string
	n     int
}

type walkResult struct {
	stdout, stderr string
	exit           int
}

// startWalkShell starts bash in a fresh directory, with curl a function
// that reads no ~/.curlrc, goes through no proxy and gives up after 10 s.
func startWalkShell(t *testing.T) *walkShell {
	dir := t.TempDir()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BASH_ENV=") && !strings.HasPrefix(kv, "ENV=") && !strings.HasPrefix(kv, "B=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr // bash's own; each command's goes to a file
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &walkShell{stdin: stdin, lines: make(chan string, 16), dir: dir}
	go func() {
		defer close(sh.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() {
			for range sh.lines {
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
	})
	fmt.Fprintln(stdin, `curl() { command curl -q --noproxy '*' --max-time 10 "$@"; }`)
	return sh
}

// run runs cmd in the shell, its stdin empty and its output in files.
func (sh *walkShell) run(t *testing.T, cmd string) walkResult {
	t.Helper()
	sh.n++
	out := filepath.Join(sh.dir, fmt.Sprintf(".walk-%d.out", sh.n))
	errf := filepath.Join(sh.dir, fmt.Sprintf(".walk-%d.err", sh.n))
	fmt.Fprintf(sh.stdin, "{ %s\n} >%q 2>%q </dev/null; printf '@@done %d %%d@@\\n' $?\n", cmd, out, errf, sh.n)
	done := regexp.MustCompile(fmt.Sprintf(`^@@done %d ([0-9]+)@@$`, sh.n))
	timeout := time.After(20 * time.Second)
	var res walkResult
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				t.Fatalf("bash exited while running:\n%s", cmd)
			}
			m := done.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			res.exit, _ = strconv.Atoi(m[1])
			o, _ := os.ReadFile(out)
			e, _ := os.ReadFile(errf)
			res.stdout, res.stderr = string(o), strings.TrimSpace(string(e))
			return res
		case <-timeout:
			t.Fatalf("bash did not finish in 20 s:\n%s", cmd)
		}
	}
}

var curlInclude = regexp.MustCompile(`\bcurl\b[^|;&]*\s(?:-[a-zA-Z]*i[a-zA-Z]*|--include)(?:\s|$)`)

// check compares what cmd (st's command as run) printed with what the
// README shows, and reports every difference.
func (st walkStep) check(t *testing.T, cmd string, res walkResult) {
	t.Helper()
	var problems []string
	if res.exit != 0 {
		problems = append(problems, fmt.Sprintf("exit status %d", res.exit))
	}
	if res.stderr != "" {
		problems = append(problems, "printed on stderr:\n"+indent(res.stderr))
	}
	if want := st.want; len(want) > 0 {
		var wantText []string
		for _, w := range want {
			wantText = append(wantText, w.text)
		}
		var diff string
		if curlInclude.MatchString(cmd) {
			diff = compareInclude(wantText, res.stdout)
		} else {
			diff = compareLines(wantText, outputLines(res.stdout))
		}
		if diff != "" {
			problems = append(problems, diff)
		}
	}
	if len(problems) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "README line %d: %s\n", st.line, cmd)
	if len(st.want) > 0 {
		fmt.Fprintf(&b, "  README shows (lines %d-%d):\n", st.want[0].line, st.want[len(st.want)-1].line)
		for _, w := range st.want {
			fmt.Fprintf(&b, "    # %s\n", w.text)
		}
	}
	fmt.Fprintf(&b, "  it printed:\n%s\n", indent(res.stdout))
	for _, p := range problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	t.Error(b.String())
}

func outputLines(s string) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func indent(s string) string {
	s = strings.TrimRight(s, "\r\n")
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(strings.ReplaceAll(s, "\r", ""), "\n", "\n    ")
}

// compareLines says how got differs from want, line by line, or "".
func compareLines(want, got []string) string {
	if len(want) != len(got) {
		return fmt.Sprintf("the README shows %d lines of output, it printed %d", len(want), len(got))
	}
	for i := range want {
		if !walkLineMatches(want[i], got[i]) {
			return fmt.Sprintf("output line %d differs:\n    README: %s\n    got:    %s", i+1, want[i], got[i])
		}
	}
	return ""
}

// compareInclude compares curl -i output: the status line, the headers the
// README shows, and the body.
func compareInclude(want []string, got string) string {
	g := outputLines(got)
	var gotHead, gotBody []string
	for i, l := range g {
		if l == "" {
			gotHead, gotBody = g[:i], g[i+1:]
			break
		}
	}
	if gotHead == nil {
		gotHead = g
	}
	if len(want) == 0 || len(gotHead) == 0 {
		return compareLines(want, g)
	}
	var problems []string
	if !walkLineMatches(want[0], gotHead[0]) {
		problems = append(problems, fmt.Sprintf("status line: README %q, got %q", want[0], gotHead[0]))
	}
	header := regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*):\s*(.*)$`)
	rest := want[1:]
	for len(rest) > 0 {
		m := header.FindStringSubmatch(rest[0])
		if m == nil {
			break
		}
		rest = rest[1:]
		found := false
		for _, h := range gotHead[1:] {
			if gm := header.FindStringSubmatch(h); gm != nil && strings.EqualFold(gm[1], m[1]) {
				if walkLineMatches(m[1]+": "+m[2], m[1]+": "+gm[2]) {
					found = true
				} else {
					problems = append(problems, fmt.Sprintf("header: README %q, got %q", m[0], h))
					found = true
				}
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("header: README %q, got none", m[0]))
		}
	}
	if d := compareLines(rest, gotBody); d != "" {
		problems = append(problems, "body: "+d)
	}
	return strings.Join(problems, "\n  - ")
}

// walkNormal rewrites what the README cannot know, or abbreviates, in a
// line of expected or actual output, so that both read alike.
var walkNormal = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)^(etag):\s*"[^"]*"$`), `Etag: "<etag>"`},
	{regexp.MustCompile(`\\"(?:[0-9a-f]|…|\.\.\.)+\\"`), `\"<etag>\"`},
	{regexp.MustCompile(`"(now|deadline)":[0-9]+`), `"$1":<ms>`},
	{regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})`), `<time>`},
	{regexp.MustCompile(`"progress":0\.[0-9]+`), `"progress":<fraction>`},
	{regexp.MustCompile(`"(nextCursor|lease)":"[^"]*"`), `"$1":"<token>"`},
}

var (
	walkTTL      = regexp.MustCompile(`"ttl":([0-9]+)`)
	walkEllipsis = regexp.MustCompile(`…|\.\.\.`)
)

// walkLineMatches says whether got is the line the README shows as want.
func walkLineMatches(want, got string) bool {
	for _, n := range walkNormal {
		want = n.re.ReplaceAllString(want, n.with)
		got = n.re.ReplaceAllString(got, n.with)
	}
	// A ttl within 5 s of the README's reads as the README's.
	wt, gt := walkTTL.FindAllStringSubmatch(want, -1), walkTTL.FindAllStringSubmatchIndex(got, -1)
	if len(wt) == len(gt) {
		for i := len(gt) - 1; i >= 0; i-- {
			w, _ := strconv.Atoi(wt[i][1])
			g, _ := strconv.Atoi(got[gt[i][2]:gt[i][3]])
			if d := w - g; d >= -5000 && d <= 5000 {
				got = got[:gt[i][2]] + wt[i][1] + got[gt[i][3]:]
			}
		}
	}
	parts := walkEllipsis.Split(want, -1)
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `.*`) + `$`).MatchString(got)
}
