package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/partmap/partmap/internal/pgtest"
)

// A row committed before a restart, and before a crash, is there after it.
func TestRestartKeepsCommittedRows(t *testing.T) {
	s := pgtest.Start(t)
	ctx := context.Background()
	exec := func(url, sql string, args ...any) {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (n int) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.TCPURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(s.URL(), "CREATE TABLE t (x int)")
	exec(s.URL(), "INSERT INTO t VALUES (1)")
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, want := count(), 1; got != want {
		t.Fatalf("after restart: %d rows, want %d", got, want)
	}
	exec(s.URL(), "INSERT INTO t VALUES (2)")
	s.Crash()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if got, want := count(), 2; got != want {
		t.Fatalf("after crash: %d rows, want %d", got, want)
	}
}
