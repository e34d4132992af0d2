package partmap_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// wantCode fails t unless err is a *partmap.Error with code want.
func wantCode(t *testing.T, err error, want partmap.Code) *partmap.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want code %q", want)
	}
	var e *partmap.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %#v (%v), want a *partmap.Error with code %q", err, err, want)
	}
	if got := e.Code; got != want {
		t.Fatalf("code = %q (%v), want %q", got, err, want)
	}
	return e
}

// invalidEmails are refused by CanonicalEmail, and so by Locate, with
// the code each names.
var invalidEmails = []struct {
	name, in string
	want     partmap.Code
}{
	{"ErrEmpty", "", partmap.EINVALIDEMAIL},
	{"ErrSpace", " ", partmap.EINVALIDEMAIL},
	{"ErrTab", "\t", partmap.EINVALIDEMAIL},
	{"ErrNewline", "\n", partmap.EINVALIDEMAIL},
	{"ErrVerticalTab", "\v", partmap.EINVALIDEMAIL},
	{"ErrFormFeed", "\f", partmap.EINVALIDEMAIL},
	{"ErrCarriageReturn", "\r", partmap.EINVALIDEMAIL},
	{"ErrBlank", " \t\n\v\f\r", partmap.EINVALIDEMAIL},
	{"ErrAllSixWhitespace", " \t\n\v\f\r \t\n\v\f\r", partmap.EINVALIDEMAIL},
	{"ErrByte80", "a\x80@example.com", partmap.EINVALIDEMAIL},
	{"ErrByteFF", "\xff", partmap.EINVALIDEMAIL},
	{"ErrNonASCII", "\u00e9@example.com", partmap.EINVALIDEMAIL},
	{"ErrValidUTF8NonASCII", "jos\u00e9@example.com", partmap.EINVALIDEMAIL},
	{"ErrNonASCIIInTrimmedSpace", " a@b.c \u00a0", partmap.EINVALIDEMAIL},
	{"ErrNBSPOnly", "\u00a0", partmap.EINVALIDEMAIL},
	{"ErrFullwidthAt", "a\uff20b", partmap.EINVALIDEMAIL},
	{"ErrTooLarge", strings.Repeat("a", partmap.MaxEmailBytes+1), partmap.ETOOLARGE},
}

func TestCanonicalEmail(t *testing.T) {
	ok := []struct {
		name, in, want string
	}{
		{"OKTrimAndLower", " Alice@Example.COM ", "alice@example.com"},
		{"OKAlreadyCanonical", "bob@example.com", "bob@example.com"},
		{"OKAllASCIIWhitespaceTrimmed", " \t\n\v\f\rCarol@X.org\r\f\v\n\t ", "carol@x.org"},
		{"OKInnerWhitespaceKept", "  A B\tC@D \n", "a b\tc@d"},
		{"OKOnlyAToZLowered", "AZ[\\]^_`@{|}~az09.+-!#$%&'*/=?", "az[\\]^_`@{|}~az09.+-!#$%&'*/=?"},
		{"OKBytesNextToLetters", "@[`{", "@[`{"},                  // 0x40 0x5B 0x60 0x7B are not letters
		{"OKControlAndDEL", "a\x00b\x01c\x7f", "a\x00b\x01c\x7f"}, // nothing else is checked
		{"OKNoAt", "NotAnAddress", "notanaddress"},
		{"OKSingleByte", "X", "x"},
		{"OKUnicodeWhitespaceIsNotASCII", "a\x1cb", "a\x1cb"}, // 0x1C is not one of the six
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.CanonicalEmail(tt.in)
			if err != nil {
				t.Fatalf("CanonicalEmail(%q) error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("CanonicalEmail(%q) = %q, want %q", tt.in, got, tt.want)
			}
			// Canonicalisation is idempotent: a canonical input is returned as is.
			again, err := partmap.CanonicalEmail(got)
			if err != nil || again != got {
				t.Fatalf("CanonicalEmail(%q) = %q, %v; want it unchanged", got, again, err)
			}
		})
	}

	for _, tt := range invalidEmails {
		t.Run(tt.name, func(t *testing.T) {
			got, err := partmap.CanonicalEmail(tt.in)
			wantCode(t, err, tt.want)
			if got != "" {
				t.Fatalf("CanonicalEmail(%q) = %q with an error, want \"\"", tt.in, got)
			}
		})
	}

	// Every byte above 0x7F is refused, wherever it is.
	t.Run("ErrEveryHighByte", func(t *testing.T) {
		for b := 0x80; b <= 0xFF; b++ {
			for _, in := range []string{string([]byte{byte(b)}), "a" + string([]byte{byte(b)}) + "@b.c", "a@b.c" + string([]byte{byte(b)})} {
				_, err := partmap.CanonicalEmail(in)
				if partmap.ErrorCode(err) != partmap.EINVALIDEMAIL {
					t.Fatalf("CanonicalEmail(%q) err = %v, want %s", in, err, partmap.EINVALIDEMAIL)
				}
			}
		}
	})

	// Every ASCII byte that is not A-Z passes through untouched.
	t.Run("OKOtherBytesUntouched", func(t *testing.T) {
		for b := 0; b < 0x80; b++ {
			c := byte(b)
			in := "x" + string([]byte{c}) + "y"
			got, err := partmap.CanonicalEmail(in)
			if err != nil {
				t.Fatalf("CanonicalEmail(%q) error: %v", in, err)
			}
			want := in
			if 'A' <= c && c <= 'Z' {
				want = "x" + string([]byte{c + 32}) + "y"
			}
			if got != want {
				t.Fatalf("CanonicalEmail(%q) = %q, want %q", in, got, want)
			}
		}
	})

	t.Run("OKExactlyMaxEmailBytes", func(t *testing.T) {
		in := strings.Repeat("A", partmap.MaxEmailBytes)
		got, err := partmap.CanonicalEmail(in)
		if err != nil {
			t.Fatalf("error at exactly %d bytes: %v", partmap.MaxEmailBytes, err)
		}
		if want := strings.Repeat("a", partmap.MaxEmailBytes); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})

	// The limit applies to the canonical email: surrounding whitespace is free.
	t.Run("OKLimitAfterTrim", func(t *testing.T) {
		in := "  \t" + strings.Repeat("a", partmap.MaxEmailBytes) + "\r\n"
		got, err := partmap.CanonicalEmail(in)
		if err != nil {
			t.Fatalf("error: %v", err)
		}
		if len(got) != partmap.MaxEmailBytes {
			t.Fatalf("len = %d, want %d", len(got), partmap.MaxEmailBytes)
		}
	})

	t.Run("ErrTooLargeDetails", func(t *testing.T) {
		_, err := partmap.CanonicalEmail(" " + strings.Repeat("a", partmap.MaxEmailBytes+1) + " ")
		e := wantCode(t, err, partmap.ETOOLARGE)
		if e.Field != partmap.FieldEmail || e.LimitBytes != partmap.MaxEmailBytes || e.Limit == "" {
			t.Fatalf("error = %+v, want Field %q, a Limit name and LimitBytes %d", e, partmap.FieldEmail, partmap.MaxEmailBytes)
		}
	})
}

func TestHash(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want uint32
	}{
		{"OKEmptyIsOffsetBasis", "", 2166136261},
		{"OKAlice", "alice@example.com", 2493822278},
		{"OKBob", "bob@example.com", 3055529145},
		{"OKA", "a", 0xe40c292c}, // published FNV-1a 32 test vector
		{"OKFoobar", "foobar", 0xbf9cf968},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partmap.Hash(tt.in); got != tt.want {
				t.Fatalf("Hash(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}

	// Hash is bytes, not runes, and must agree with hash/fnv everywhere.
	t.Run("OKMatchesHashFNV", func(t *testing.T) {
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 20000; i++ {
			b := make([]byte, rng.Intn(80))
			rng.Read(b)
			h := fnv.New32a()
			h.Write(b)
			if got, want := partmap.Hash(string(b)), h.Sum32(); got != want {
				t.Fatalf("Hash(%q) = %d, want %d (hash/fnv)", b, got, want)
			}
		}
	})
}

func TestPartitionOf(t *testing.T) {
	tests := []struct {
		name  string
		email string
		n     int
		want  partmap.Partition
	}{
		{"OKAlice", "alice@example.com", partmap.DefaultPartitions, 278},
		{"OKBob", "bob@example.com", partmap.DefaultPartitions, 145},
		{"OKEmptyString", "", partmap.DefaultPartitions, 261},
		{"OKOnePartition", "alice@example.com", 1, 0},
		{"OKOtherCount", "alice@example.com", 7, partmap.Partition(2493822278 % 7)},
		{"OKLargeCount", "alice@example.com", 1 << 20, partmap.Partition(2493822278 % (1 << 20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partmap.PartitionOf(tt.email, tt.n); got != tt.want {
				t.Fatalf("PartitionOf(%q, %d) = %d, want %d", tt.email, tt.n, got, tt.want)
			}
		})
	}

	t.Run("OKAlwaysInRange", func(t *testing.T) {
		rng := rand.New(rand.NewSource(2))
		for i := 0; i < 5000; i++ {
			b := make([]byte, 1+rng.Intn(40))
			rng.Read(b)
			n := 1 + rng.Intn(5000)
			h := fnv.New32a()
			h.Write(b)
			got := partmap.PartitionOf(string(b), n)
			if int(got) >= n || got != partmap.Partition(h.Sum32()%uint32(n)) {
				t.Fatalf("PartitionOf(%q, %d) = %d, want %d", b, n, got, h.Sum32()%uint32(n))
			}
		}
	})
}

func TestLocate(t *testing.T) {
	ok := []struct {
		name, in, canonical, partition string
	}{
		{"OKAlice", " Alice@Example.COM ", "alice@example.com", "partition-278"},
		{"OKAliceCanonical", "alice@example.com", "alice@example.com", "partition-278"},
		{"OKBob", "bob@example.com", "bob@example.com", "partition-145"},
		{"OKBobShouting", "\tBOB@EXAMPLE.COM\n", "bob@example.com", "partition-145"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			canonical, p, err := partmap.Locate(tt.in, partmap.DefaultPartitions)
			if err != nil {
				t.Fatalf("Locate(%q) error: %v", tt.in, err)
			}
			if canonical != tt.canonical || p.String() != tt.partition {
				t.Fatalf("Locate(%q) = %q, %s; want %q, %s", tt.in, canonical, p, tt.canonical, tt.partition)
			}
		})
	}

	for _, tt := range invalidEmails {
		t.Run(tt.name, func(t *testing.T) {
			canonical, p, err := partmap.Locate(tt.in, partmap.DefaultPartitions)
			wantCode(t, err, tt.want)
			if canonical != "" || p != 0 {
				t.Fatalf("Locate(%q) = %q, %d with an error; want zero values", tt.in, canonical, p)
			}
		})
	}

	// Emails that differ only in case and outer whitespace share a partition.
	t.Run("OKSamePartitionForVariants", func(t *testing.T) {
		rng := rand.New(rand.NewSource(3))
		const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-_@"
		for i := 0; i < 2000; i++ {
			b := make([]byte, 1+rng.Intn(30))
			for j := range b {
				b[j] = letters[rng.Intn(len(letters))]
			}
			lower := strings.ToLower(string(b))
			upper := " \t" + strings.ToUpper(string(b)) + "\r\n"
			c1, p1, err1 := partmap.Locate(lower, partmap.DefaultPartitions)
			c2, p2, err2 := partmap.Locate(upper, partmap.DefaultPartitions)
			if err1 != nil || err2 != nil || c1 != c2 || p1 != p2 || c1 != lower {
				t.Fatalf("Locate(%q) = %q, %d, %v; Locate(%q) = %q, %d, %v", lower, c1, p1, err1, upper, c2, p2, err2)
			}
		}
	})
}

func TestPartitionString(t *testing.T) {
	tests := []struct {
		name string
		in   partmap.Partition
		want string
	}{
		{"OKZero", 0, "partition-000"},
		{"OKOneDigit", 7, "partition-007"},
		{"OKTwoDigits", 42, "partition-042"},
		{"OKThreeDigits", 278, "partition-278"},
		{"OKLast", 999, "partition-999"},
		{"OKWider", 1000, "partition-1000"},
		{"OKMax", 4294967295, "partition-4294967295"},
	}
	for p := range partmap.Partition(1100) {
		if got, want := p.String(), fmt.Sprintf("partition-%03d", uint32(p)); got != want {
			t.Errorf("Partition(%d).String() = %q, want %q", uint32(p), got, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.String(); got != tt.want {
				t.Fatalf("Partition(%d).String() = %q, want %q", uint32(tt.in), got, tt.want)
			}
		})
	}
}
