package engine

import (
	"fmt"
	"testing"

	"github.com/partmap/partmap"
)

// The set answers the same whether it searches its slice or its index.
func TestKnownSet(t *testing.T) {
	var s knownSet
	want := map[key]int{}
	for round := range 3 {
		for i := range 3 * knownIndexAt {
			k := key{Part{Generation: i % 2, Partition: partmap.Partition(i % 5)}, fmt.Sprintf("e%d@x", i)}
			if _, ok := s.get(k); ok != (round > 0) {
				t.Fatalf("round %d: %v known: %v", round, k, ok)
			}
			s.put(k, known{staged: round*100 + i})
			want[k] = round*100 + i
			if s.len() != len(want) {
				t.Fatalf("len %d, want %d", s.len(), len(want))
			}
			for k, staged := range want {
				if v, ok := s.get(k); !ok || v.staged != staged {
					t.Fatalf("round %d after %d puts: %v is %v %v, want %d", round, i, k, v, ok, staged)
				}
			}
		}
	}
}
