package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/storetest"
	"github.com/partmap/partmap/redis"
)

// A resize asked for as soon as the status says the previous one is over
// starts: it waits for the previous mover to return, and that mover never
// needs what the new Resize holds (a deadlock before).
func TestResizeRightAfterAnother(t *testing.T) {
	ctx := context.Background()
	a := open(t, &redis.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}})
	a.Start(ctx)
	var ps []partmap.Profile
	for i := range 500 {
		ps = append(ps, partmap.Profile{partmap.FieldEmail: fmt.Sprintf("p%d@example.com", i)})
	}
	a.UpsertProfiles(ctx, ps)
	if _, err := a.Resize(ctx, 250); err != nil {
		t.Fatal(err)
	}
	for { // tight poll, as a script waiting for "not running" would
		st, err := a.ResizeStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Running {
			break
		}
	}
	done := make(chan error, 1)
	go func() { _, err := a.Resize(ctx, 40); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the second resize: %v", err)
		}
	case <-time.After(30 * time.Second):
		panic("the second Resize did not return in 30 s: a deadlock") // a.Close would hang too
	}
	if st := storetest.WaitResized(t, a); st.Partitions != 40 {
		t.Fatalf("after the second resize: %+v", st)
	}
}
