package main

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/partmap/partmap/internal/crashtest"
)

// The crash harness: 16 clients put, patch, increment and delete while the
// real server is SIGKILLed at random moments and restarted on the same
// data. The short form runs in `make test`; the long form is
//
//	PARTMAP_CRASH_CYCLES=200 go test -run TestCrashHarness -timeout 60m -v ./cmd/partmap
func TestCrashHarness(t *testing.T) {
	cycles := 5
	if s := os.Getenv("PARTMAP_CRASH_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PARTMAP_CRASH_CYCLES=%q is not a positive number", s)
		}
		cycles = n
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := crashtest.Run(context.Background(), crashtest.Config{
		Binary: bin, Data: t.TempDir(), Clients: 16, Cycles: cycles, Seed: 1, Logf: t.Logf,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged == 0 {
		t.Fatal("no write was acknowledged, so nothing was tested")
	}
}
