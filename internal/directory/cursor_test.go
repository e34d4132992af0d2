package directory

import (
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestCursorRoundTrip(t *testing.T) {
	for _, pos := range []engine.Position{{Partition: 0, Email: ""}, {Partition: 278, Email: "alice@example.com"}, {Partition: 999, Email: strings.Repeat("z", 320)}} {
		got, err := decodeCursor(testKey, encodeCursor(testKey, pos, nil), partmap.DefaultPartitions, nil)
		if err != nil || got != pos {
			t.Fatalf("%+v → %+v, %v", pos, got, err)
		}
	}
	// A cursor for a partition the directory does not have is refused, even
	// when its MAC is right (it would come from before a resize).
	if _, err := decodeCursor(testKey, encodeCursor(testKey, engine.Position{Partition: 1000, Email: "a"}, nil), 1000, nil); err == nil {
		t.Fatal("accepted a cursor beyond the partition count")
	}
	if _, err := decodeCursor([]byte("another key"), encodeCursor(testKey, engine.Position{Partition: 1, Email: "a"}, nil), 1000, nil); err == nil {
		t.Fatal("accepted a cursor made with another key")
	}
}

// A forged cursor never panics and never decodes: only a cursor the
// directory made, unchanged, yields a position, so no forged cursor can
// start a page anywhere.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(testKey, engine.Position{Partition: 278, Email: "alice@example.com"}, nil))
	f.Add(encodeCursor(testKey, engine.Position{Partition: 0, Email: ""}, nil))
	f.Add("")
	f.Add("AAAA")
	f.Add("!!!!")
	f.Fuzz(func(t *testing.T, cursor string) {
		pos, err := decodeCursor(testKey, cursor, partmap.DefaultPartitions, nil)
		if err != nil {
			if partmap.ErrorCode(err) != partmap.EINVALID {
				t.Fatalf("%q: %v, want invalid", cursor, err)
			}
			return
		}
		if again := encodeCursor(testKey, pos, nil); again != cursor {
			t.Fatalf("%q decoded to %+v, which encodes as %q", cursor, pos, again)
		}
	})
}

// A search's cursor continues that search only.
func TestCursorIsBoundToItsSearch(t *testing.T) {
	pos := engine.Position{Partition: 7, Email: "a@b"}
	gold := searchScope([]engine.IndexMatch{{Field: 1, Value: "gold"}})
	c := encodeCursor(testKey, pos, gold)
	if got, err := decodeCursor(testKey, c, 1000, gold); err != nil || got != pos {
		t.Fatalf("same search: %v %v", got, err)
	}
	for _, other := range [][]byte{nil, searchScope([]engine.IndexMatch{{Field: 1, Value: "silver"}}), searchScope([]engine.IndexMatch{{Field: 0, Value: "gold"}})} {
		if _, err := decodeCursor(testKey, c, 1000, other); err == nil {
			t.Errorf("a cursor of %q was accepted for %q", gold, other)
		}
	}
	if _, err := decodeCursor(testKey, encodeCursor(testKey, pos, nil), 1000, gold); err == nil {
		t.Error("a listing's cursor was accepted for a search")
	}
}
