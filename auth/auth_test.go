package auth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partmap/partmap/auth"
)

func TestParseTokens(t *testing.T) {
	_, line, err := auth.NewToken("ci", auth.ScopeWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.ParseTokens(strings.NewReader("# comment\n\n" + line + "\n")); err != nil {
		t.Fatalf("OK file: %v", err)
	}
	hash := strings.Fields(line)[2]
	for name, file := range map[string]string{
		"ErrEmpty":      "# nothing\n",
		"ErrFields":     "ci write\n",
		"ErrScope":      "ci superuser " + hash + "\n",
		"ErrHashPrefix": "ci read " + strings.TrimPrefix(hash, "sha256:") + "\n",
		"ErrHashLength": "ci read sha256:abcd\n",
		"ErrDuplicate":  "ci read " + hash + "\nci write " + hash + "\n",
	} {
		if _, err := auth.ParseTokens(strings.NewReader(file)); err == nil {
			t.Errorf("%s: parsed %q", name, file)
		}
	}
	if _, _, err := auth.NewToken("two words", auth.ScopeRead); err == nil {
		t.Error("NewToken accepted a name with a space")
	}
}

func TestAppendToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth")
	for i, scope := range []auth.Scope{auth.ScopeRead, auth.ScopeAdmin} {
		_, line, err := auth.NewToken(fmt.Sprintf("user%d", i), scope)
		if err != nil {
			t.Fatal(err)
		}
		if err := auth.AppendToken(path, line); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	fi, _ := os.Stat(path)
	if lines := strings.Split(string(b), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "user0 read ") || !strings.HasPrefix(lines[1], "user1 admin ") {
		t.Fatalf("file %q, want the two lines in order", b)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600: the file grants access", fi.Mode().Perm())
	}
	if _, err := auth.LoadTokens(path); err != nil {
		t.Fatal(err)
	}
	if err := auth.AppendToken(filepath.Join(path, "not-a-dir"), "x"); err == nil {
		t.Fatal("appended under a file")
	}
}

// AppendToken leaves a file that a server would refuse as it was: a second
// token of one name (a rotation) or a file already malformed. A last line
// without its newline gets one before the new line.
func TestAppendTokenRefuses(t *testing.T) {
	dir := t.TempDir()
	_, ops, _ := auth.NewToken("ops", auth.ScopeAdmin)
	_, again, _ := auth.NewToken("ops", auth.ScopeRead)
	_, other, _ := auth.NewToken("other", auth.ScopeRead)
	for name, c := range map[string]struct{ held, line, err string }{
		"Duplicate": {ops + "\n", again, `already has a token named "ops"`},
		"Malformed": {"ops admin\n", other, "line 1: want NAME SCOPE sha256:HEX"},
	} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(c.held), 0o600)
		err := auth.AppendToken(path, c.line)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.err)
		}
		if b, _ := os.ReadFile(path); string(b) != c.held {
			t.Errorf("%s: the file became %q", name, b)
		}
	}
	path := filepath.Join(dir, "unended")
	os.WriteFile(path, []byte("# tokens\n"+ops), 0o600)
	if err := auth.AppendToken(path, other); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadTokens(path); err != nil {
		t.Fatalf("after appending to a file whose last line had no newline: %v", err)
	}
}

// Lookup finds a token's name and scope from the token itself, and
// nothing from another string.
func TestLookup(t *testing.T) {
	tok, line, err := auth.NewToken("ci", auth.ScopeWrite)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokens(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if name, scope, ok := tokens.Lookup(tok); !ok || name != "ci" || scope != auth.ScopeWrite {
		t.Errorf("OK: %q %v %v", name, scope, ok)
	}
	if _, _, ok := tokens.Lookup(tok + "x"); ok {
		t.Error("ErrUnknownToken: found")
	}
	if s, err := auth.ParseScope("admin"); err != nil || s != auth.ScopeAdmin || s.String() != "admin" {
		t.Errorf("ParseScope admin: %v %v", s, err)
	}
}
