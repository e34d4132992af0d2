package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

// TestBuildIndex: --indexed's index is built over the preloaded profiles
// before buildIndex returns, and answers for them.
func TestBuildIndex(t *testing.T) {
	ctx := context.Background()
	store, err := pebble.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var profiles []partmap.Profile
	for i := range 300 {
		profiles = append(profiles, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("user%d@example.com", i),
			"fullName": fmt.Sprintf("User %d", i), "customerTier": tiers[i%len(tiers)], "visits": "0"})
	}
	if _, err := store.UpsertProfiles(ctx, profiles); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(pmhttp.NewServer(store, nil))
	defer srv.Close()
	if err := buildIndex(ctx, strings.TrimPrefix(srv.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	infos, err := store.ListIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(infos, func(x partmap.IndexInfo) bool { return x.Name == searchIndex.Name })
	if i < 0 || infos[i].Building || infos[i].Docs != 300 {
		t.Fatalf("indexes after buildIndex: %+v", infos)
	}
	res, err := store.Search(ctx, searchIndex.Name, partmap.SearchOptions{Query: "@customerTier:{" + tiers[0] + "} @visits:[0 0]", NoContent: true})
	if err != nil || res.Total != 100 {
		t.Fatalf("search: %d hits, %v", res.Total, err)
	}
}
