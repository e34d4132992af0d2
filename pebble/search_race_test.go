package pebble

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/partmap/partmap"
)

// A search reads index entries a moment before the records they point to:
// a profile that changed in between must be left out, not answered.
func TestSearchAnswersOnlyMatches(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t, nil)
	s.Start(ctx)
	const n = 2000
	var ps []partmap.Profile
	for i := range n {
		ps = append(ps, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i), "companyName": "Acme"})
	}
	s.UpsertProfiles(ctx, ps)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; !stop.Load(); i = (i + 8) % n {
				partmap.PatchProfile(ctx, s, fmt.Sprintf("p%d@example.com", i), partmap.Patch{"companyName": ptr("Globex")}, partmap.Condition{})
				partmap.PatchProfile(ctx, s, fmt.Sprintf("p%d@example.com", i), partmap.Patch{"companyName": ptr("Acme")}, partmap.Condition{})
			}
		})
	}
	bad := 0
	for range 60 {
		page, err := s.ListProfiles(ctx, partmap.ListOptions{Limit: 1000, Where: []partmap.Match{{Field: "companyName", Value: "Acme"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Profiles {
			if r.Profile["companyName"] != "Acme" {
				bad++
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad > 0 {
		t.Errorf("search companyName=Acme answered %d profiles whose companyName is not Acme", bad)
	}
}
