package http_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/pebble"
)

// BenchmarkHTTP measures durable upserts and gets through the Go client, a
// real loopback listener and Pebble on disk, with 1 and 64 clients.
//
//	go test -run '^$' -bench BenchmarkHTTP -benchtime 5s ./http
func BenchmarkHTTP(b *testing.B) {
	ctx := context.Background()
	for _, clients := range []int{1, 64} {
		store, err := pebble.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(pmhttp.NewServer(store, nil))
		cl, err := pmhttp.NewClient(srv.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cl.Start(ctx); err != nil {
			b.Fatal(err)
		}
		const keys = 10000
		email := func(i int64) string { return fmt.Sprintf("user%d@example.com", i%keys) }
		parallel := func(b *testing.B, op func(i int64) error) {
			defer func() { b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s") }()
			if clients == 1 {
				for i := range int64(b.N) {
					if err := op(i); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op(next.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		b.Run(fmt.Sprintf("upsert/clients=%d", clients), func(b *testing.B) {
			parallel(b, func(i int64) error {
				_, _, err := partmap.UpsertProfile(ctx, cl, partmap.Profile{partmap.FieldEmail: email(i), "fullName": "User", "companyName": "Acme", "customerTier": "gold"}, partmap.Condition{})
				return err
			})
		})
		b.Run(fmt.Sprintf("get/clients=%d", clients), func(b *testing.B) {
			parallel(b, func(i int64) error {
				_, err := cl.FindProfile(ctx, email(i))
				if partmap.ErrorCode(err) == partmap.ENOTFOUND {
					err = nil // fewer upserts than keys ran
				}
				return err
			})
		})
		srv.Close()
		store.Close()
	}
}
