package bucket

import (
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
)

// The baseline is only a fair comparison if it is a correct store: it
// passes the same conformance suite as partmap's.
func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) partmap.Store {
		s, err := Open(t.TempDir(), 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
