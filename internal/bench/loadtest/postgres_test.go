package main

import (
	"context"
	"testing"
	"time"

	"github.com/partmap/partmap/internal/bench/procstat"
)

// The postgres phase preloads a PostgreSQL of its own, upserts into it
// from every client and counts the cluster's CPU.
func TestPostgresPhase(t *testing.T) {
	ctx := context.Background()
	pg, err := startPostgres(ctx, 1000, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.close()
	var n int
	if err := pg.pool.QueryRow(ctx, `SELECT count(*) FROM profiles`).Scan(&n); err != nil || n != 1000 {
		t.Fatalf("preloaded %d profiles, %v", n, err)
	}
	tck, err := procstat.ClockTick()
	if err != nil {
		t.Fatal(err)
	}
	s, err := pg.run(ctx, 300*time.Millisecond, tck)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.0f upserts/s, %.1f µs of PostgreSQL's CPU each", s.perSecond, s.cpuPerOp)
	if s.perSecond <= 0 || s.cpuPerOp <= 0 {
		t.Fatalf("sample %+v", s)
	}
}
