package directory

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Work asked for again while work of its name runs runs once more after
// it, so that what the caller changed is seen: an index dropped and
// created again with the slots of its first build, which was ending,
// stayed unbuilt (TestSearchModel on Pebble, about one run in six under
// load). Work asked for once runs once.
func TestSearchWorkAskedAgainRunsAgain(t *testing.T) {
	for _, askAgain := range []bool{false, true} {
		d := &Directory{}
		a := &d.search
		a.base, a.stop = context.WithCancel(context.Background())
		release := make(chan struct{})
		var runs atomic.Int32
		fn := func(context.Context) error {
			if runs.Add(1) == 1 {
				<-release
			}
			return nil
		}
		a.mu.Lock()
		d.runSearchWork("build:m[33]", fn)
		a.mu.Unlock()
		for runs.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		if askAgain {
			a.mu.Lock()
			d.runSearchWork("build:m[33]", fn)
			a.mu.Unlock()
		}
		close(release)
		a.work.Wait()
		a.stop()
		want := int32(1)
		if askAgain {
			want = 2
		}
		if got := runs.Load(); got != want {
			t.Errorf("asked again %v: ran %d times, want %d", askAgain, got, want)
		}
		if len(a.running) != 0 || len(a.again) != 0 {
			t.Errorf("asked again %v: left running %v, again %v", askAgain, a.running, a.again)
		}
	}
}
