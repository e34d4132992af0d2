package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// presence is a Bloom filter of the record keys the database may hold, so
// that a lookup of an email nobody stored answers without Pebble: a
// create's read of its absent record searched both memtables' skiplists
// and was a quarter of a create's CPU (docs/PERFORMANCE.md).
//
// It has no false negatives. It exists before the first commit, which
// adds each record key it writes before its batch applies; a scan adds
// every record key the database held at open, and only once the scan is
// done (ready) is the filter asked. A deleted record's key stays in it: a
// lookup of it goes to Pebble, as every lookup did without the filter.
// Sized at open for the profiles then stored, it answers less often as
// the map grows past that, never wrongly.
type presence struct {
	words  []atomic.Uint64
	mask   uint64 // bits-1; the bits are a power of two
	seed   maphash.Seed
	ready  atomic.Bool
	absent atomic.Int64 // lookups answered, for the metrics
}

// presenceBitsPerKey and presenceHashes give about 0.2% false positives
// for as many keys as it was sized for.
const (
	presenceBitsPerKey = 16
	presenceHashes     = 4
	presenceMinBits    = 1 << 23 // 1 MiB
	// presenceMaxBits bounds its memory at 128 MiB: a map of over 67
	// million profiles gets more false positives, which only send their
	// lookups to Pebble.
	presenceMaxBits = 1 << 30
)

func newPresence(keys int64) *presence {
	n := presenceBits(keys)
	return &presence{words: make([]atomic.Uint64, n/64), mask: n - 1, seed: maphash.MakeSeed()}
}

// presenceBits is the filter's size for keys stored: a power of two.
func presenceBits(keys int64) uint64 {
	n := uint64(presenceMinBits)
	for n < uint64(keys)*presenceBitsPerKey && n < presenceMaxBits {
		n <<= 1
	}
	return n
}

// probes are the key's bit positions: double hashing of one 64-bit hash.
func (p *presence) probes(key []byte) (h1, h2 uint64) {
	h := maphash.Bytes(p.seed, key)
	return h, bits.RotateLeft64(h, 32) | 1
}

func (p *presence) add(key []byte) {
	h1, h2 := p.probes(key)
	for i := range uint64(presenceHashes) {
		bit := (h1 + i*h2) & p.mask
		if w, m := &p.words[bit>>6], uint64(1)<<(bit&63); w.Load()&m == 0 {
			w.Or(m)
		}
	}
}

// absentKey reports that the database certainly holds no key, once the
// filter is ready; false means it may.
func (p *presence) absentKey(key []byte) bool {
	if !p.ready.Load() {
		return false
	}
	h1, h2 := p.probes(key)
	for i := range uint64(presenceHashes) {
		bit := (h1 + i*h2) & p.mask
		if p.words[bit>>6].Load()&(uint64(1)<<(bit&63)) == 0 {
			p.absent.Add(1)
			return true
		}
	}
	return false
}

// generations lists the generations the database has keys of: 0, whose
// keys have no prefix, and each whose prefix some key starts with.
func generations(db *pebble.DB) ([]int, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixGeneration}, UpperBound: []byte{prefixGeneration + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	gens := []int{0}
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 5 {
			ok = it.Next()
			continue
		}
		g := binary.BigEndian.Uint32(k[1:5])
		gens = append(gens, int(g))
		if g == math.MaxUint32 {
			break
		}
		ok = it.SeekGE(genPrefix(int(g) + 1))
	}
	return gens, it.Error()
}

// storedProfiles sums the generations' profile counts: what the filter is
// sized for.
func storedProfiles(db *pebble.DB, gens []int) (int64, error) {
	var n int64
	for _, g := range gens {
		pre := genPrefix(g)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: kind(pre, prefixCount, 0), UpperBound: kind(pre, prefixCount+1, 0)})
		if err != nil {
			return 0, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			c, w := binary.Uvarint(it.Value())
			if w > 0 {
				n += int64(c)
			}
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// fill adds every record key of gens, then makes the filter ready; ctx's
// end stops it, the filter never ready.
func (p *presence) fill(ctx context.Context, db *pebble.DB, gens []int) error {
	for _, g := range gens {
		pre := genPrefix(g)
		it, err := db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: kind(pre, prefixRecord, 0), UpperBound: kind(pre, prefixRecord+1, 0)})
		if err != nil {
			return err
		}
		for ok, i := it.First(), 0; ok; ok, i = it.Next(), i+1 {
			p.add(it.Key())
			if i%4096 == 0 && ctx.Err() != nil {
				break
			}
		}
		if err := errors.Join(ctx.Err(), it.Error(), it.Close()); err != nil {
			return err
		}
	}
	p.ready.Store(true)
	return nil
}
