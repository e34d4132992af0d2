package directory

import (
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestCursorRoundTrip(t *testing.T) {
	for _, pos := range []Position{{0, ""}, {278, "alice@example.com"}, {999, strings.Repeat("z", 320)}} {
		got, err := decodeCursor(testKey, encodeCursor(testKey, pos), partmap.DefaultPartitions)
		if err != nil || got != pos {
			t.Fatalf("%+v → %+v, %v", pos, got, err)
		}
	}
	// A cursor for a partition the directory does not have is refused, even
	// when its MAC is right (it would come from before a resize).
	if _, err := decodeCursor(testKey, encodeCursor(testKey, Position{1000, "a"}), 1000); err == nil {
		t.Fatal("accepted a cursor beyond the partition count")
	}
	if _, err := decodeCursor([]byte("another key"), encodeCursor(testKey, Position{1, "a"}), 1000); err == nil {
		t.Fatal("accepted a cursor made with another key")
	}
}

// A forged cursor never panics and never decodes: only a cursor the
// directory made, unchanged, yields a position, so no forged cursor can
// start a page anywhere.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(testKey, Position{278, "alice@example.com"}))
	f.Add(encodeCursor(testKey, Position{0, ""}))
	f.Add("")
	f.Add("AAAA")
	f.Add("!!!!")
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, err := decodeCursor(testKey, cursor, partmap.DefaultPartitions)
		if err != nil {
			if partmap.ErrorCode(err) != partmap.EINVALID {
				t.Fatalf("%q: %v, want invalid", cursor, err)
			}
			return
		}
		if again := encodeCursor(testKey, pos); again != cursor {
			t.Fatalf("%q decoded to %+v, which encodes as %q", cursor, pos, again)
		}
	})
}
