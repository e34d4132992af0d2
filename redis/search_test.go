package redis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/redis"
)

// Two servers share a Redis: one creates an index while the other writes.
// The writer learns of the index before the build reaches its
// partitions, so every profile, written before, during or after the
// build, is found, and the check finds no drift; a drop on one server
// stops the other's writes of its entries too.
func TestSearchIndexAcrossServers(t *testing.T) {
	ctx := context.Background()
	shared := &redis.Options{IndexPoll: 20 * time.Millisecond}
	a := open(t, shared)
	if _, err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	b := openAgain(t, shared)
	def := partmap.IndexDefinition{Name: "desk", Fields: []partmap.IndexField{{Name: "customerTier", Type: partmap.IndexTag}, {Name: "fullName", Type: partmap.IndexText}}}
	write := func(i int) {
		t.Helper()
		p := partmap.Profile{partmap.FieldEmail: fmt.Sprintf("w%03d@example.com", i), "customerTier": "gold", "fullName": fmt.Sprintf("Writer %d", i)}
		if _, _, err := partmap.UpsertProfile(ctx, b, p, partmap.Condition{}); err != nil {
			t.Error(err)
		}
	}
	for i := range 50 {
		write(i)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	n := 50
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			write(n)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	if err := a.CreateIndex(ctx, def); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := b.Search(ctx, "desk", partmap.SearchOptions{Query: "*", Limit: -1})
		if err == nil {
			break
		}
		if partmap.ErrorCode(err) != partmap.EUNAVAILABLE || time.Now().After(deadline) {
			t.Fatalf("on the other server: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, s := range []partmap.Store{a, b} {
		res, err := s.Search(ctx, "desk", partmap.SearchOptions{Query: "@customerTier:{gold} writer", Limit: -1})
		if err != nil || res.Total != int64(n) {
			t.Fatalf("found %d of %d writes: %v", res.Total, n, err)
		}
	}
	if err := a.CheckPartitions(ctx, 0, 0, func(c partmap.PartitionCheck) error {
		if !c.OK() {
			return fmt.Errorf("drift: %+v", c)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.DropIndex(ctx, "desk"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // a has read the metadata again
	if _, err := a.Search(ctx, "desk", partmap.SearchOptions{Query: "*"}); partmap.ErrorCode(err) != partmap.ENOTFOUND {
		t.Fatalf("search of a dropped index on the other server: %v", err)
	}
}
