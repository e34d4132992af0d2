// Package auth is partmap's bearer tokens and their scopes: the auth
// file that lists them (kept as SHA-256 hashes only), the making of new
// ones, and the lookup of a presented token. The HTTP API and the Redis
// protocol both admit clients with them.
package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// Scope is what a token may do. Each scope includes the ones below it:
// admin can write, and write can read.
type Scope int

const (
	ScopeRead  Scope = iota + 1 // look up, project, list
	ScopeWrite                  // create, change, delete profiles
	ScopeAdmin                  // start the directory and maintenance
)

var scopeNames = map[Scope]string{ScopeRead: "read", ScopeWrite: "write", ScopeAdmin: "admin"}

func (s Scope) String() string { return scopeNames[s] }

// ParseScope reads "read", "write" or "admin".
func ParseScope(name string) (Scope, error) {
	for s, n := range scopeNames {
		if n == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("scope %q is not read, write or admin", name)
}

// Tokens are the bearer tokens a server accepts. Only SHA-256 hashes of the
// tokens are kept, in memory as in the auth file, so neither leaks a token.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	name  string
	scope Scope
	hash  [sha256.Size]byte
}

// ParseTokens reads an auth file: one token per line, as
//
//	NAME SCOPE sha256:HEX
//
// where SCOPE is read, write or admin and HEX is the SHA-256 of the token.
// Blank lines and lines starting with # are ignored. `partmap token` makes
// tokens and their lines.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t, err := parseEntries(r)
	if err != nil {
		return nil, err
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("the auth file holds no token")
	}
	return t, nil
}

// parseEntries is ParseTokens without its demand for a token at least.
func parseEntries(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(r)
	names := map[string]bool{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want NAME SCOPE sha256:HEX, found %d fields", n, len(f))
		}
		scope, err := ParseScope(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		hexHash, ok := strings.CutPrefix(f[2], "sha256:")
		raw, err := hex.DecodeString(hexHash)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: the hash must be sha256: followed by 64 hex digits", n)
		}
		if names[f[0]] {
			return nil, fmt.Errorf("line %d: the name %q is used twice", n, f[0])
		}
		names[f[0]] = true
		e := tokenEntry{name: f[0], scope: scope}
		copy(e.hash[:], raw)
		t.entries = append(t.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return t, nil
}

// LoadTokens reads an auth file from disk.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	return t, nil
}

// AppendToken appends a line from NewToken to the auth file at path,
// creating the file readable by its owner only. A server reads the file
// when it starts, and refuses one whose lines are malformed or that names
// a token twice, so neither is appended to: the file is left as it was.
func AppendToken(path, line string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	held, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	t, err := parseEntries(bytes.NewReader(held))
	if err != nil {
		return fmt.Errorf("auth file %s: %w; fix it before adding a token", path, err)
	}
	name, _, _ := strings.Cut(line, " ")
	for _, e := range t.entries {
		if e.name == name {
			return fmt.Errorf("auth file %s already has a token named %q: choose another name, or delete its line first to replace it", path, name)
		}
	}
	if len(held) > 0 && held[len(held)-1] != '\n' {
		line = "\n" + line // the last line was not ended
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		return err
	}
	return f.Close()
}

// NewToken makes a random token and its auth-file line.
func NewToken(name string, scope Scope) (token, line string, err error) {
	if name == "" || strings.ContainsAny(name, " \t\r\n#") {
		return "", "", fmt.Errorf("token name %q must be one word", name)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token = "pm_" + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	return token, fmt.Sprintf("%s %s sha256:%s", name, scope, hex.EncodeToString(sum[:])), nil
}

// Lookup says which token this is, by its name and scope. Every entry is
// compared, in constant time, so timing reveals neither the token nor
// which one matched.
func (t *Tokens) Lookup(token string) (name string, scope Scope, ok bool) {
	sum := sha256.Sum256([]byte(token))
	var found tokenEntry
	match := 0
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.hash[:]) == 1 {
			found, match = e, 1
		}
	}
	return found.name, found.scope, match == 1
}
