package pebble

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
)

// BenchmarkEngine measures invocations straight on the engine: a read of
// one record, and a durable write of one record, alone and from 64
// goroutines (whose fsyncs are shared).
//
//	go test -run '^$' -bench 'BenchmarkEngine|BenchmarkStore' -benchtime 2s ./pebble
func BenchmarkEngine(b *testing.B) {
	ctx := context.Background()
	s, emails := openFilled(b, 1000)
	e := s.Engine()
	p := engine.Part{Partition: 278}
	rec := partmap.Record{Profile: Profile(emails[0]), Version: 7}
	b.Run("read", func(b *testing.B) {
		inv := engine.Invocation{Load: []engine.Part{p}}
		for i := range b.N {
			err := e.Invoke(ctx, inv, func(tx *engine.Tx) error {
				_, _, err := tx.Get(p, emails[i%len(emails)])
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	var n atomic.Int64
	write := func(b *testing.B) {
		// Spread over partitions, as independent writers would be.
		email := fmt.Sprintf("w%d@example.com", n.Add(1)%10000)
		q := engine.Part{Partition: partmap.PartitionOf(email, partmap.DefaultPartitions)}
		inv := engine.Invocation{Load: []engine.Part{q}, Lock: []engine.Part{q}}
		if err := e.Invoke(ctx, inv, func(tx *engine.Tx) error { return tx.Put(q, email, rec, partmap.OpPut) }); err != nil &&
			partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
			b.Fatal(err)
		}
	}
	b.Run("write/sequential", func(b *testing.B) {
		for range b.N {
			write(b)
		}
	})
	b.Run(fmt.Sprintf("write/goroutines=%d", 32*runtime.GOMAXPROCS(0)), func(b *testing.B) {
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				write(b)
			}
		})
	})
}

// Profile is a typical benchmark profile.
func Profile(email string) partmap.Profile {
	return partmap.Profile{partmap.FieldEmail: email, "fullName": "Bench User", "companyName": "Acme Corp", "customerTier": "gold", "visits": "0"}
}

// BenchmarkStore measures the directory's calls, without HTTP.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	s, emails := openFilled(b, 1000)
	b.Run("find", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := s.FindProfile(ctx, emails[i%len(emails)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run(fmt.Sprintf("upsert/goroutines=%d", 32*runtime.GOMAXPROCS(0)), func(b *testing.B) {
		var n atomic.Int64
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				email := fmt.Sprintf("u%d@example.com", n.Add(1)%10000)
				if _, _, err := partmap.UpsertProfile(ctx, s, Profile(email), partmap.Condition{}); err != nil && partmap.ErrorCode(err) != partmap.ELOCKCONFLICT {
					b.Fatal(err)
				}
			}
		})
	})
}
