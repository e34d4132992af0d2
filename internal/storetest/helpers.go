package storetest

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/partmap/partmap"
)

// EnvCount is the positive number in the environment variable name, for
// a longer run than the normal one, or def when it is unset. Anything else
// fails the test.
func EnvCount(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", name, s)
	}
	return n
}

// CrashCycles is $PARTMAP_CRASH_CYCLES, how many times a crash test kills
// and restarts what it tests, or def for the normal run.
func CrashCycles(t testing.TB, def int) int { return EnvCount(t, "PARTMAP_CRASH_CYCLES", def) }

// MustUpsert upserts profiles in one bulk call and fails the test if the
// call or any profile fails.
func MustUpsert(t testing.TB, s partmap.Store, profiles []partmap.Profile) []partmap.BulkResult {
	t.Helper()
	res, err := s.UpsertProfiles(context.Background(), profiles)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return res
}

// WantDrift checks that CheckPartition of p reports what a drift test's
// damage, done behind the store's back, left: email's customerTier entry
// "gold" missing, a companyName entry "Globex" for ghost@example.com that
// no profile backs, and a count of 3 for p's one profile.
func WantDrift(t testing.TB, s partmap.Store, p partmap.Partition, email string) {
	t.Helper()
	c, err := s.CheckPartition(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []partmap.IndexDrift{
		{Email: email, Field: "customerTier", Value: "gold", Missing: true},
		{Email: "ghost@example.com", Field: "companyName", Value: "Globex"},
	}
	if c.OK() || c.Profiles != 1 || c.Counted != 3 || !slices.Equal(c.Drift, want) {
		t.Fatalf("after the damage: %+v", c)
	}
}

// UntilStopped runs work(w, i) in n goroutines, w from 0 to n-1, each
// with i = 0, 1, 2... until work returns false or stop is called; stop
// waits for every goroutine to return.
func UntilStopped(n int, work func(w, i int) bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if !work(w, i) {
					return
				}
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// SyncBuffer is a buffer that a test and what it runs (a logger, a
// command) write and read at once.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
