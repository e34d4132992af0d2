package search_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/search"
)

func TestOrder(t *testing.T) {
	profiles := []map[string]string{
		{"emailAddress": "e@x", "orders": "10", "fullName": "bob"},
		{"emailAddress": "a@x", "orders": "9", "fullName": "Carol"},
		{"emailAddress": "d@x", "orders": "ten", "fullName": "alice"},
		{"emailAddress": "b@x", "orders": "1e1", "customerTier": "Gold"},
		{"emailAddress": "c@x", "orders": "-inf", "fullName": "Álvaro", "customerTier": "silver"},
		{"emailAddress": "f@x", "fullName": "ALICE", "customerTier": "gold"},
	}
	for _, tt := range []struct {
		name, by string
		desc     bool
		want     string // emails in order
	}{
		{"OKByEmail", "", false, "a b c d e f"},
		{"OKByEmailDescIgnored", "", true, "a b c d e f"},
		{"OKNumeric", "orders", false, "c a b e d f"},
		{"OKNumericDesc", "orders", true, "b e a c d f"},
		{"OKText", "fullName", false, "d f e a c b"},
		{"OKTextDesc", "fullName", true, "c a e d f b"},
		{"OKTag", "customerTier", false, "b f c a d e"},
		{"OKTagDesc", "customerTier", true, "c b f a d e"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			order, err := desk.Order(tt.by, tt.desc)
			if err != nil {
				t.Fatal(err)
			}
			sorted := slices.Clone(profiles)
			slices.Reverse(sorted) // the order must not depend on the input's
			slices.SortFunc(sorted, order)
			var got []string
			for _, p := range sorted {
				got = append(got, strings.TrimSuffix(p["emailAddress"], "@x"))
			}
			if got, want := strings.Join(got, " "), tt.want; got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	t.Run("ErrUnknownField", func(t *testing.T) {
		_, err := desk.Order("nope", false)
		var e *partmap.Error
		if !errors.As(err, &e) || e.Code != partmap.EINVALID || e.Message != "Property `nope` not loaded nor in schema" {
			t.Fatalf("got %v", err)
		}
	})
}

func TestSortKey(t *testing.T) {
	for _, tt := range []struct {
		name, field, value string
		want               []byte
		ok                 bool
	}{
		{"OKNumeric", "orders", "1", search.EncodeNumber(1), true},
		{"OKNumericNegativeZero", "orders", "-0", search.EncodeNumber(0), true},
		{"OKText", "fullName", "Ann LEE", []byte("ann lee"), true},
		{"OKEmptyText", "fullName", "", []byte{}, true},
		{"OKTag", "customerTier", "Gold", []byte("gold"), true},
		{"ErrNotANumber", "orders", "x", nil, false},
		{"ErrNotInSchema", "nope", "x", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := desk.SortKey(tt.field, map[string]string{tt.field: tt.value})
			if !bytes.Equal(got, tt.want) || ok != tt.ok {
				t.Fatalf("got %x, %v; want %x, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := desk.SortKey("orders", map[string]string{}); ok {
		t.Fatal("a missing field has a sort key")
	}
}
