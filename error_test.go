package partmap_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// declaredCodes returns every constant of type Code declared in the
// package's source, so that a new code cannot be added without an entry in
// Codes going unnoticed.
func declaredCodes(t *testing.T) []partmap.Code {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []partmap.Code
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: Code constant %s is not a string literal", fset.Position(v.Pos()), vs.Names[i])
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes = append(codes, partmap.Code(s))
				}
			}
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d Code constants in the package source: %q", len(codes), codes)
	}
	return codes
}

// publicCodes are the codes this file names; declaredCodes finds the rest.
var publicCodes = []partmap.Code{
	partmap.EINVALID,
	partmap.EINVALIDEMAIL,
	partmap.EMALFORMEDJSON,
	partmap.ENONSTRING,
	partmap.EINVALIDUTF8,
	partmap.ETOOMANYFIELDS,
	partmap.ETOOLARGE,
	partmap.ENOTFOUND,
	partmap.ENOTSTARTED,
	partmap.ELOCKCONFLICT,
	partmap.EPRECONDITION,
	partmap.ENOTINTEGER,
	partmap.ENOTFLOAT,
	partmap.EOVERFLOW,
	partmap.EKEYFIELD,
	partmap.EUNAVAILABLE,
	partmap.EINTERNAL,
}

func TestCodes(t *testing.T) {
	allCodes := declaredCodes(t)
	t.Run("OKEveryCodeHasAnEntry", func(t *testing.T) {
		for _, c := range allCodes {
			info, ok := partmap.Codes[c]
			if !ok {
				t.Errorf("Codes[%q] is missing", c)
				continue
			}
			if info.Status < 400 || info.Status > 599 {
				t.Errorf("Codes[%q].Status = %d, want 4xx or 5xx", c, info.Status)
			}
			if info.Title == "" {
				t.Errorf("Codes[%q].Title is empty", c)
			}
		}
	})

	t.Run("OKNoUnknownEntries", func(t *testing.T) {
		for c := range partmap.Codes {
			if !slices.Contains(allCodes, c) {
				t.Errorf("Codes has an entry for %q, which is not a declared Code constant", c)
			}
		}
		for _, c := range publicCodes {
			if !slices.Contains(allCodes, c) {
				t.Errorf("declaredCodes missed %q", c)
			}
		}
	})

	// Each code is also a problem type slug (urn:partmap:problem:CODE).
	t.Run("OKCodesAreDistinctSlugs", func(t *testing.T) {
		seen := map[partmap.Code]bool{}
		for _, c := range allCodes {
			if c == "" || seen[c] || strings.ContainsAny(string(c), " :/?#") || strings.ToLower(string(c)) != string(c) {
				t.Errorf("code %q is empty, repeated, or not a lowercase slug", c)
			}
			seen[c] = true
		}
	})

	for _, tt := range []struct {
		status int
		codes  []partmap.Code
	}{
		{400, []partmap.Code{partmap.EINVALID, partmap.EINVALIDEMAIL, partmap.EMALFORMEDJSON, partmap.ENONSTRING, partmap.EINVALIDUTF8}},
		{404, []partmap.Code{partmap.ENOTFOUND}},
		{409, []partmap.Code{partmap.ENOTSTARTED, partmap.ELOCKCONFLICT, partmap.ENOTFLOAT}},
		{412, []partmap.Code{partmap.EPRECONDITION}},
		{413, []partmap.Code{partmap.ETOOLARGE}},
		{500, []partmap.Code{partmap.EINTERNAL}},
	} {
		for _, code := range tt.codes {
			t.Run("OKStatus_"+string(code), func(t *testing.T) {
				if got := partmap.Codes[code].Status; got != tt.status {
					t.Fatalf("Codes[%q].Status = %d, want %d", code, got, tt.status)
				}
			})
		}
	}
}

func TestErrorIs(t *testing.T) {
	notFound := &partmap.Error{Code: partmap.ENOTFOUND, Message: "no profile for alice@example.com"}
	sentinels := []struct {
		sentinel *partmap.Error
		code     partmap.Code
	}{
		{partmap.ErrNotFound, partmap.ENOTFOUND},
		{partmap.ErrNotStarted, partmap.ENOTSTARTED},
		{partmap.ErrLockConflict, partmap.ELOCKCONFLICT},
		{partmap.ErrPrecondition, partmap.EPRECONDITION},
	}

	t.Run("OKSameCode", func(t *testing.T) {
		for _, s := range sentinels {
			for _, err := range []error{
				s.sentinel,
				&partmap.Error{Code: s.code},
				partmap.Errorf(s.code, "something about %s", "x"),
				&partmap.Error{Code: s.code, Field: "fullName", Err: errors.New("cause")},
			} {
				if !errors.Is(err, s.sentinel) {
					t.Errorf("errors.Is(%v, sentinel %s) = false, want true", err, s.code)
				}
			}
		}
	})

	t.Run("OKWrapped", func(t *testing.T) {
		wrapped := fmt.Errorf("find: %w", notFound)
		if !errors.Is(wrapped, partmap.ErrNotFound) {
			t.Fatalf("errors.Is(%v, ErrNotFound) = false", wrapped)
		}
		twice := fmt.Errorf("http: %w", fmt.Errorf("store: %w", notFound))
		if !errors.Is(twice, partmap.ErrNotFound) {
			t.Fatalf("errors.Is(%v, ErrNotFound) = false", twice)
		}
		joined := errors.Join(errors.New("other"), notFound)
		if !errors.Is(joined, partmap.ErrNotFound) {
			t.Fatalf("errors.Is(%v, ErrNotFound) = false", joined)
		}
	})

	t.Run("OKCauseStillReachable", func(t *testing.T) {
		err := &partmap.Error{Code: partmap.EUNAVAILABLE, Err: fs.ErrClosed}
		if !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("errors.Is(%v, fs.ErrClosed) = false; Unwrap must expose the cause", err)
		}
	})

	t.Run("ErrOtherCodes", func(t *testing.T) {
		for _, s := range sentinels {
			for _, c := range declaredCodes(t) {
				if c == s.code {
					continue
				}
				for _, err := range []error{
					&partmap.Error{Code: c},
					partmap.Errorf(c, "message"),
					fmt.Errorf("wrapped: %w", &partmap.Error{Code: c}),
				} {
					if errors.Is(err, s.sentinel) {
						t.Errorf("errors.Is(%v, sentinel %s) = true, want false", err, s.code)
					}
				}
			}
		}
	})

	t.Run("ErrPlainErrors", func(t *testing.T) {
		for _, err := range []error{errors.New("not-found"), fmt.Errorf("not-found: %w", errors.New("x")), fs.ErrNotExist} {
			if errors.Is(err, partmap.ErrNotFound) {
				t.Errorf("errors.Is(%v, ErrNotFound) = true, want false", err)
			}
		}
	})

	// A target with a message is a particular error, not a code class.
	t.Run("ErrTargetWithMessage", func(t *testing.T) {
		target := &partmap.Error{Code: partmap.ENOTFOUND, Message: "other message"}
		if errors.Is(notFound, target) {
			t.Fatalf("errors.Is(%v, %v) = true, want false", notFound, target)
		}
	})
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want partmap.Code
	}{
		{"OKNil", nil, ""},
		{"OKPlain", errors.New("disk on fire"), partmap.EINTERNAL},
		{"OKPlainWrapped", fmt.Errorf("x: %w", errors.New("y")), partmap.EINTERNAL},
		{"OKStdlibSentinel", fs.ErrNotExist, partmap.EINTERNAL},
		{"OKError", &partmap.Error{Code: partmap.ENOTFOUND}, partmap.ENOTFOUND},
		{"OKErrorf", partmap.Errorf(partmap.EINVALIDUTF8, "bad"), partmap.EINVALIDUTF8},
		{"OKWrapped", fmt.Errorf("ctx: %w", partmap.Errorf(partmap.ELOCKCONFLICT, "busy")), partmap.ELOCKCONFLICT},
		{"OKSentinel", partmap.ErrPrecondition, partmap.EPRECONDITION},
		{"OKOutermostWins", &partmap.Error{Code: partmap.EUNAVAILABLE, Err: partmap.ErrNotFound}, partmap.EUNAVAILABLE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partmap.ErrorCode(tt.err); got != tt.want {
				t.Fatalf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	const secret = "open /var/lib/partmap/secret.db: permission denied"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"OKMessage", partmap.Errorf(partmap.EINVALIDEMAIL, "email address is empty"), "email address is empty"},
		{"OKTitleWhenNoMessage", &partmap.Error{Code: partmap.ENOTFOUND}, partmap.Codes[partmap.ENOTFOUND].Title},
		{"OKWrappedMessage", fmt.Errorf("%s: %w", secret, partmap.Errorf(partmap.ENOTFOUND, "no such profile")), "no such profile"},
		{"OKCauseHidden", &partmap.Error{Code: partmap.EUNAVAILABLE, Message: "try again", Err: errors.New(secret)}, "try again"},
		{"OKCauseHiddenTitle", &partmap.Error{Code: partmap.EUNAVAILABLE, Err: errors.New(secret)}, partmap.Codes[partmap.EUNAVAILABLE].Title},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partmap.ErrorMessage(tt.err); got != tt.want {
				t.Fatalf("ErrorMessage(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}

	// Text that partmap did not classify as user-safe never comes out.
	hidden := []struct {
		name string
		err  error
	}{
		{"ErrPlain", errors.New(secret)},
		{"ErrPlainWrapped", fmt.Errorf("store: %w", errors.New(secret))},
		{"ErrInternalMessage", &partmap.Error{Code: partmap.EINTERNAL, Message: secret}},
		{"ErrInternalErrorf", partmap.Errorf(partmap.EINTERNAL, "%s", secret)},
		{"ErrInternalCause", &partmap.Error{Code: partmap.EINTERNAL, Err: errors.New(secret)}},
		{"ErrInternalWrapped", fmt.Errorf("x: %w", &partmap.Error{Code: partmap.EINTERNAL, Message: secret})},
	}
	for _, tt := range hidden {
		t.Run(tt.name, func(t *testing.T) {
			got := partmap.ErrorMessage(tt.err)
			if strings.Contains(got, "secret") || strings.Contains(got, "/var/lib") || got == "" {
				t.Fatalf("ErrorMessage(%v) = %q; want a generic, non-empty message", tt.err, got)
			}
		})
	}

	// Every code but EINTERNAL shows its message; a cause never shows.
	t.Run("OKEveryPublicCode", func(t *testing.T) {
		for _, c := range declaredCodes(t) {
			err := &partmap.Error{Code: c, Message: "public words", Err: errors.New(secret)}
			got := partmap.ErrorMessage(err)
			if strings.Contains(got, "secret") {
				t.Errorf("ErrorMessage for code %q leaks its cause: %q", c, got)
			}
			if c != partmap.EINTERNAL && got != "public words" {
				t.Errorf("ErrorMessage for code %q = %q, want %q", c, got, "public words")
			}
		}
	})
}

func TestErrorError(t *testing.T) {
	tests := []struct {
		name string
		err  *partmap.Error
		want string
	}{
		{"OKMessage", &partmap.Error{Code: partmap.EINVALID, Message: "bad"}, "invalid: bad"},
		{"OKTitle", &partmap.Error{Code: partmap.ENOTFOUND}, "not-found: " + partmap.Codes[partmap.ENOTFOUND].Title},
		{"OKCause", &partmap.Error{Code: partmap.EINTERNAL, Message: "m", Err: errors.New("cause")}, "internal: m: cause"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}
