package main

import (
	"context"
	"testing"

	"github.com/partmap/partmap/internal/crashtest"
)

// The bank test: 40 accounts over many partitions, 6 workers moving
// amounts between them in transactions, one reading every balance in one
// transaction and one exporting snapshots, while the real server is
// SIGKILLed at random moments and restarted. The total never changes and
// no account goes missing. The long form is
//
//	PARTMAP_CRASH_CYCLES=100 go test -run TestBank -timeout 60m -v ./cmd/partmap
func TestBank(t *testing.T) {
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := crashtest.RunBank(context.Background(), crashtest.BankConfig{
		Binary: bin, Data: t.TempDir(), Cycles: crashCycles(t, 5), Seed: 1, Logf: t.Logf,
	})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transfers == 0 || res.Reads == 0 || res.Exports == 0 {
		t.Fatal("no transfer, atomic read or export completed, so nothing was tested")
	}
}
