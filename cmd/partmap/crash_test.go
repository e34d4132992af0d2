package main

import (
	"context"
	"testing"

	"github.com/partmap/partmap/internal/crashtest"
	"github.com/partmap/partmap/internal/storetest"
)

// The crash harness: 16 clients put, patch, increment and delete while the
// real server is SIGKILLed at random moments and restarted on the same
// data. The short form runs in `make test`; the long form is
//
//	PARTMAP_CRASH_CYCLES=200 go test -run TestCrashHarness -timeout 60m -v ./cmd/partmap
func TestCrashHarness(t *testing.T) {
	cycles := storetest.CrashCycles(t, 5)
	bin := binary(t)
	res, err := crashtest.Run(context.Background(), crashtest.Config{
		Serve: crashtest.Serve{Binary: bin, Data: t.TempDir()}, Clients: 16, Cycles: cycles, Seed: 1, Logf: t.Logf,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged == 0 {
		t.Fatal("no write was acknowledged, so nothing was tested")
	}
}

// The same, with the server resizing all along: kills land in the middle
// of resizes, and every restart must resume the one in progress.
func TestCrashHarnessDuringResizes(t *testing.T) {
	cycles := storetest.CrashCycles(t, 6)
	bin := binary(t)
	res, err := crashtest.Run(context.Background(), crashtest.Config{
		Serve: crashtest.Serve{Binary: bin, Data: t.TempDir()}, Clients: 16, Cycles: cycles, Seed: 2, Logf: t.Logf, Resize: true, Preload: 30000,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged == 0 || res.Resizes == 0 || res.Resumed == 0 {
		t.Fatal("no write was acknowledged, or no resize was started and then resumed, so nothing was tested")
	}
}

// The same on a Redis Cluster: the partmap server is SIGKILLed in the middle
// of resizes (holding locks, between a mirrored write's two scripts, in a
// copy), and the restarted server resumes them from the cluster.
func TestCrashHarnessDuringResizesOnRedisCluster(t *testing.T) {
	bin := binary(t)
	cycles := storetest.CrashCycles(t, 4)
	store := onSharedCluster(t, "crash")
	res, err := crashtest.Run(context.Background(), crashtest.Config{
		Serve: crashtest.Serve{Binary: bin, Store: store}, Clients: 16, Cycles: cycles, Seed: 3, Logf: t.Logf, Resize: true, Preload: 5000,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged == 0 || res.Resizes == 0 || res.Resumed == 0 {
		t.Fatal("no write was acknowledged, or no resize was started and then resumed, so nothing was tested")
	}
}
