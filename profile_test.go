package partmap_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

func TestLimitsCheckField(t *testing.T) {
	l := partmap.DefaultLimits
	euro := "\u20ac" // three bytes, one rune
	if len(euro) != 3 {
		t.Fatalf("len(%q) = %d, want 3", euro, len(euro))
	}

	ok := []struct {
		name, field, value string
	}{
		{"OKEmptyValue", "fullName", ""},
		{"OKShort", "fullName", "Alice"},
		{"OKDottedName", "name.first", "Alice"},
		{"OKNameAtLimit", strings.Repeat("n", l.MaxFieldNameBytes), "v"},
		{"OKNameAtLimitMultibyte", strings.Repeat(euro, l.MaxFieldNameBytes/3) + strings.Repeat("n", l.MaxFieldNameBytes%3), "v"},
		{"OKValueAtLimit", "f", strings.Repeat("v", l.MaxFieldValueBytes)},
		{"OKValueAtLimitMultibyte", "f", strings.Repeat(euro, l.MaxFieldValueBytes/3) + strings.Repeat("v", l.MaxFieldValueBytes%3)},
		{"OKValueFourByteRunes", "f", strings.Repeat("\U0001F600", l.MaxFieldValueBytes/4)},
		{"OKControlChars", "f", "\x00\x01\x1f\x7f"},
		{"OKNoncharacters", "f", "\uFFFE\uFFFF\U0010FFFF"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.CheckField(tt.field, tt.value); err != nil {
				t.Fatalf("CheckField(%d-byte name, %d-byte value) error: %v", len(tt.field), len(tt.value), err)
			}
		})
	}

	errs := []struct {
		name, field, value string
		code               partmap.Code
		wantField          string
		limit              string
		limitBytes         int
	}{
		{"ErrEmptyName", "", "v", partmap.EINVALID, "", "", 0},
		{"ErrNameOneOver", strings.Repeat("n", l.MaxFieldNameBytes+1), "v", partmap.ETOOLARGE, strings.Repeat("n", l.MaxFieldNameBytes+1), "fieldName", l.MaxFieldNameBytes},
		// Fewer runes than the limit, but more bytes: bytes count.
		{"ErrNameBytesNotRunes", strings.Repeat(euro, l.MaxFieldNameBytes/3+1), "v", partmap.ETOOLARGE, strings.Repeat(euro, l.MaxFieldNameBytes/3+1), "fieldName", l.MaxFieldNameBytes},
		{"ErrValueOneOver", "f", strings.Repeat("v", l.MaxFieldValueBytes+1), partmap.ETOOLARGE, "f", "fieldValue", l.MaxFieldValueBytes},
		{"ErrValueBytesNotRunes", "f", strings.Repeat(euro, l.MaxFieldValueBytes/3+1), partmap.ETOOLARGE, "f", "fieldValue", l.MaxFieldValueBytes},
		{"ErrValueOneOverMultibyteTail", "f", strings.Repeat("v", l.MaxFieldValueBytes-2) + euro, partmap.ETOOLARGE, "f", "fieldValue", l.MaxFieldValueBytes},
		{"ErrValueInvalidUTF8", "fullName", "abc\xff", partmap.EINVALIDUTF8, "fullName", "", 0},
		{"ErrValueSurrogate", "fullName", "\xed\xa0\x80", partmap.EINVALIDUTF8, "fullName", "", 0},
		{"ErrValueOverlong", "fullName", "\xc0\xaf", partmap.EINVALIDUTF8, "fullName", "", 0},
		{"ErrValueAboveMax", "fullName", "\xf4\x90\x80\x80", partmap.EINVALIDUTF8, "fullName", "", 0},
		{"ErrValueTruncated", "fullName", "\xe4\xb8", partmap.EINVALIDUTF8, "fullName", "", 0},
		{"ErrNameInvalidUTF8", "na\xffme", "v", partmap.EINVALIDUTF8, "", "", 0},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			e := wantCode(t, l.CheckField(tt.field, tt.value), tt.code)
			if tt.wantField != "" && e.Field != tt.wantField {
				t.Fatalf("Field = %q, want %q", e.Field, tt.wantField)
			}
			if e.Limit != tt.limit || e.LimitBytes != tt.limitBytes {
				t.Fatalf("Limit, LimitBytes = %q, %d; want %q, %d", e.Limit, e.LimitBytes, tt.limit, tt.limitBytes)
			}
			if e.Message == "" {
				t.Fatalf("error %v has no message", e)
			}
		})
	}

	// With a small limit, the byte/rune distinction is exact.
	t.Run("OKSmallLimitThreeByteRunes", func(t *testing.T) {
		small := partmap.Limits{MaxFields: 4, MaxFieldNameBytes: 6, MaxFieldValueBytes: 30, MaxProfileBytes: 100, MaxBodyBytes: 100}
		if err := small.CheckField(strings.Repeat(euro, 2), strings.Repeat(euro, 10)); err != nil {
			t.Fatalf("6-byte name, 30-byte value: %v", err)
		}
		wantCode(t, small.CheckField(strings.Repeat(euro, 2), strings.Repeat(euro, 10)+"x"), partmap.ETOOLARGE)
		wantCode(t, small.CheckField(strings.Repeat(euro, 2)+"x", "v"), partmap.ETOOLARGE)
	})
}

func TestLimitsCheckProfile(t *testing.T) {
	l := partmap.DefaultLimits

	// fill returns a profile with exactly n fields of total size bytes.
	fill := func(n, bytes int) partmap.Profile {
		p := partmap.Profile{}
		for i := 0; i < n; i++ {
			p[fmt.Sprintf("f%04d", i)] = ""
		}
		size := n * 5
		rest := bytes - size
		for i := 0; rest > 0; i++ {
			chunk := min(rest, l.MaxFieldValueBytes)
			p[fmt.Sprintf("f%04d", i)] = strings.Repeat("v", chunk)
			rest -= chunk
		}
		return p
	}
	sizeOf := func(p partmap.Profile) int {
		n := 0
		for k, v := range p {
			n += len(k) + len(v)
		}
		return n
	}

	t.Run("OKEmpty", func(t *testing.T) {
		if err := l.CheckProfile(partmap.Profile{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OKTypical", func(t *testing.T) {
		p := partmap.Profile{
			partmap.FieldEmail: "alice@example.com", partmap.FieldFullName: "Alice Ł\u00e9vy",
			partmap.FieldCompanyName: "", partmap.FieldCustomerTier: "gold", "name.first": "Alice",
		}
		if err := l.CheckProfile(p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OKFieldsAtLimit", func(t *testing.T) {
		p := fill(l.MaxFields, 0)
		if len(p) != l.MaxFields {
			t.Fatalf("len = %d", len(p))
		}
		if err := l.CheckProfile(p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrFieldsOneOver", func(t *testing.T) {
		e := wantCode(t, l.CheckProfile(fill(l.MaxFields+1, 0)), partmap.ETOOMANYFIELDS)
		if e.Limit != "fields" {
			t.Fatalf("Limit = %q, want %q", e.Limit, "fields")
		}
	})
	t.Run("OKSizeAtLimit", func(t *testing.T) {
		p := fill(10, l.MaxProfileBytes)
		if got := sizeOf(p); got != l.MaxProfileBytes {
			t.Fatalf("test setup: size = %d, want %d", got, l.MaxProfileBytes)
		}
		if err := l.CheckProfile(p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ErrSizeOneOver", func(t *testing.T) {
		p := fill(10, l.MaxProfileBytes+1)
		if got := sizeOf(p); got != l.MaxProfileBytes+1 {
			t.Fatalf("test setup: size = %d, want %d", got, l.MaxProfileBytes+1)
		}
		e := wantCode(t, l.CheckProfile(p), partmap.ETOOLARGE)
		if e.Limit != "profile" || e.LimitBytes != l.MaxProfileBytes {
			t.Fatalf("Limit, LimitBytes = %q, %d; want %q, %d", e.Limit, e.LimitBytes, "profile", l.MaxProfileBytes)
		}
	})
	// Names count towards the profile size, not only values.
	t.Run("ErrSizeCountsNames", func(t *testing.T) {
		small := partmap.Limits{MaxFields: 10, MaxFieldNameBytes: 10, MaxFieldValueBytes: 10, MaxProfileBytes: 20, MaxBodyBytes: 100}
		if err := small.CheckProfile(partmap.Profile{"aaaaa": "bbbbb", "ccccc": "ddddd"}); err != nil {
			t.Fatalf("20 bytes: %v", err)
		}
		wantCode(t, small.CheckProfile(partmap.Profile{"aaaaa": "bbbbb", "cccccc": "ddddd"}), partmap.ETOOLARGE)
	})
	// Bytes, not runes: 7 runes of 3 bytes in a 20-byte profile is over.
	t.Run("ErrSizeBytesNotRunes", func(t *testing.T) {
		small := partmap.Limits{MaxFields: 10, MaxFieldNameBytes: 10, MaxFieldValueBytes: 30, MaxProfileBytes: 20, MaxBodyBytes: 100}
		p := partmap.Profile{"n": strings.Repeat("\u20ac", 7)} // 8 runes, 22 bytes
		if utf8.RuneCountInString("n"+p["n"]) > small.MaxProfileBytes {
			t.Fatal("test setup: rune count should be under the limit")
		}
		wantCode(t, small.CheckProfile(p), partmap.ETOOLARGE)
	})
	t.Run("ErrFieldChecked", func(t *testing.T) {
		e := wantCode(t, l.CheckProfile(partmap.Profile{partmap.FieldEmail: "a@b.c", "fullName": "\xff"}), partmap.EINVALIDUTF8)
		if e.Field != "fullName" {
			t.Fatalf("Field = %q, want fullName", e.Field)
		}
		wantCode(t, l.CheckProfile(partmap.Profile{"": "x"}), partmap.EINVALID)
		wantCode(t, l.CheckProfile(partmap.Profile{"f": strings.Repeat("v", l.MaxFieldValueBytes+1)}), partmap.ETOOLARGE)
	})
}

func TestETag(t *testing.T) {
	t.Run("OKFormat", func(t *testing.T) {
		tests := []struct {
			v    partmap.Version
			want string
		}{
			{1, `"0000000000000001"`},
			{0xab, `"00000000000000ab"`},
			{0xdeadbeefcafe0123, `"deadbeefcafe0123"`},
			{math.MaxUint64, `"ffffffffffffffff"`},
		}
		for _, tt := range tests {
			if got := tt.v.ETag(); got != tt.want {
				t.Errorf("Version(%#x).ETag() = %s, want %s", uint64(tt.v), got, tt.want)
			}
		}
	})

	t.Run("OKRoundTrip", func(t *testing.T) {
		rng := rand.New(rand.NewSource(4))
		vs := []partmap.Version{1, 2, 0xf, 0x10, math.MaxUint64, math.MaxUint64 - 1, 1 << 63}
		for i := 0; i < 1000; i++ {
			vs = append(vs, partmap.Version(rng.Uint64()|1))
		}
		for _, v := range vs {
			tag := v.ETag()
			got, err := partmap.ParseETag(tag)
			if err != nil || got != v {
				t.Fatalf("ParseETag(%s) = %#x, %v; want %#x", tag, uint64(got), err, uint64(v))
			}
		}
	})

	errs := []struct {
		name, in string
	}{
		{"ErrEmpty", ``},
		{"ErrWeak", `W/"00000000000000ab"`},
		{"ErrWeakLowercase", `w/"00000000000000ab"`},
		{"ErrNoQuotes", `00000000000000ab`},
		{"ErrNoQuotesPadded", `X00000000000000abX`},
		{"ErrOpeningQuoteOnly", `"00000000000000ab`},
		{"ErrClosingQuoteOnly", `00000000000000ab"`},
		{"ErrSingleQuotes", `'00000000000000ab'`},
		{"ErrZero", `"0000000000000000"`},
		{"ErrNonHex", `"00000000000000ag"`},
		{"ErrNonHexSpace", `"00000000000000 1"`},
		{"ErrSign", `"+000000000000001"`},
		{"ErrMinus", `"-000000000000001"`},
		{"ErrHexPrefix", `"0x0000000000001f"`},
		{"ErrUnderscore", `"0000_00000000001"`},
		{"ErrTooShort", `"ab"`},
		{"ErrFifteenDigits", `"000000000000001"`},
		{"ErrSeventeenDigits", `"00000000000000001"`},
		{"ErrStar", `*`},
		{"ErrList", `"0000000000000001", "0000000000000002"`},
		{"ErrSurroundingSpace", ` "0000000000000001"`},
		{"ErrTrailingSpace", `"0000000000000001" `},
		{"ErrNonASCIIDigits", "\"000000000000\u0661\""},
		{"ErrUpperCaseHex", `"00000000000000AB"`}, // strong comparison is exact
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			v, err := partmap.ParseETag(tt.in)
			wantCode(t, err, partmap.EINVALID)
			if v != 0 {
				t.Fatalf("ParseETag(%q) = %#x with an error, want 0", tt.in, uint64(v))
			}
		})
	}
}

func TestConditionCheck(t *testing.T) {
	current := &partmap.Record{Profile: partmap.Profile{partmap.FieldEmail: "a@b.c"}, Version: 7}
	tests := []struct {
		name    string
		cond    partmap.Condition
		current *partmap.Record
		ok      bool
	}{
		{"OKZeroMissing", partmap.Condition{}, nil, true},
		{"OKZeroExisting", partmap.Condition{}, current, true},
		{"OKIfMatchSame", partmap.IfMatch(7), current, true},
		{"ErrIfMatchOther", partmap.IfMatch(8), current, false},
		{"ErrIfMatchMissing", partmap.IfMatch(7), nil, false},
		{"OKIfNoneMatchMissing", partmap.Condition{IfNoneMatch: true}, nil, true},
		{"ErrIfNoneMatchExisting", partmap.Condition{IfNoneMatch: true}, current, false},
		{"ErrBothMissing", partmap.Condition{IfMatch: []partmap.Version{7}, IfNoneMatch: true}, nil, false},
		{"ErrBothExisting", partmap.Condition{IfMatch: []partmap.Version{7}, IfNoneMatch: true}, current, false},
		{"ErrIfMatchZeroVersionRecord", partmap.IfMatch(1), &partmap.Record{}, false},
		{"OKIfMatchList", partmap.IfMatch(3, 7), current, true},
		{"ErrIfMatchListWithoutCurrent", partmap.IfMatch(0, 3), current, false},
		{"ErrIfMatchZeroNeverMatches", partmap.IfMatch(0), &partmap.Record{}, false},
		{"OKIfExists", partmap.Condition{IfExists: true}, current, true},
		{"ErrIfExistsMissing", partmap.Condition{IfExists: true}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cond.Check(tt.current)
			if tt.ok {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			wantCode(t, err, partmap.EPRECONDITION)
			if partmap.ErrorMessage(err) == "" {
				t.Fatalf("error %v has no message", err)
			}
		})
	}
	t.Run("OKSentinel", func(t *testing.T) {
		err := partmap.IfMatch(8).Check(current)
		if !errors.Is(err, partmap.ErrPrecondition) {
			t.Fatalf("errors.Is(%v, ErrPrecondition) = false", err)
		}
	})
}

func TestProfileFieldNames(t *testing.T) {
	tests := []struct {
		name string
		in   partmap.Profile
		want []string
	}{
		{"OKEmpty", partmap.Profile{}, []string{}},
		{"OKNil", nil, []string{}},
		{"OKDocumentedOrder", partmap.Profile{"customerTier": "", "fullName": "", "emailAddress": "", "companyName": ""},
			[]string{"emailAddress", "fullName", "companyName", "customerTier"}},
		{"OKOthersSortedByByte", partmap.Profile{"zeta": "", "Zeta": "", "alpha": "", "\u00e9": "", "fullName": "", "name.first": "", "a": ""},
			[]string{"fullName", "Zeta", "a", "alpha", "name.first", "zeta", "\u00e9"}},
		{"OKMissingDocumented", partmap.Profile{"x": "", "emailAddress": "", "customerTier": ""},
			[]string{"emailAddress", "customerTier", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.FieldNames(); !slices.Equal(got, tt.want) {
				t.Fatalf("FieldNames() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProfileClone(t *testing.T) {
	p := partmap.Profile{partmap.FieldEmail: "a@b.c", "x": "1"}
	c := p.Clone()
	c["x"] = "2"
	c["y"] = "3"
	if p["x"] != "1" || len(p) != 2 {
		t.Fatalf("Clone shares state: original is now %v", p)
	}
	if c.Email() != "a@b.c" {
		t.Fatalf("Clone().Email() = %q", c.Email())
	}
}

// A field name that is not UTF-8 is echoed in problem documents, so the
// error must carry a printable, valid form of it.
func TestCheckFieldErrInvalidNameIsReportedValid(t *testing.T) {
	err := partmap.DefaultLimits.CheckField("n\xffme", "v")
	var e *partmap.Error
	if !errors.As(err, &e) || e.Code != partmap.EINVALIDUTF8 || e.Field != "n\uFFFDme" || !utf8.ValidString(e.Message) {
		t.Fatalf("got %#v", err)
	}
}

func TestErrorCodeOfUnknownCodeIsInternal(t *testing.T) {
	err := &partmap.Error{Code: "bogus", Message: "secret"}
	if got := partmap.ErrorCode(err); got != partmap.EINTERNAL {
		t.Fatalf("ErrorCode = %q, want internal", got)
	}
	if got := partmap.ErrorMessage(err); got != partmap.Codes[partmap.EINTERNAL].Title {
		t.Fatalf("ErrorMessage = %q, want the internal title", got)
	}
	if got := partmap.ErrorMessage(nil); got != "" {
		t.Fatalf("ErrorMessage(nil) = %q, want empty", got)
	}
}
