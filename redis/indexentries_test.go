package redis

import (
	"slices"
	"testing"

	"github.com/partmap/partmap/internal/engine"
)

// indexentries.lua names each set by its position among the keys, from 1:
// the first and the last keys map to their fields, and a malformed reply
// is an error, never entries of the wrong field.
func TestParseIndexSets(t *testing.T) {
	fields := []int{0, 1, engine.MaxSearchField}
	member := string([]byte{0, 0, 0, 1}) + "v" + "a@example.com"
	got, err := parseIndexSets([]any{int64(1), []any{member}, int64(3), []any{"w\x00b@example.com"}}, fields)
	want := []engine.IndexEntry{{Field: 0, Value: "v", Email: "a@example.com"}, {Field: engine.MaxSearchField, Value: "w", Email: "b@example.com"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	if got, err := parseIndexSets([]any{}, fields); err != nil || len(got) != 0 {
		t.Fatalf("no sets: %+v, %v", got, err)
	}
	for name, bad := range map[string]any{
		"NotAList":     "x",
		"OddLength":    []any{int64(1)},
		"PositionZero": []any{int64(0), []any{member}},
		"PositionPast": []any{int64(4), []any{member}},
		"NotMembers":   []any{int64(1), "x"},
		"MemberNumber": []any{int64(1), []any{int64(5)}},
	} {
		if got, err := parseIndexSets(bad, fields); err == nil {
			t.Errorf("%s: got %+v, want an error", name, got)
		}
	}
}
