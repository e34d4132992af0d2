package pebble_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	s, dir := MustOpen(t, nil)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _, err := s.UpsertProfile(ctx, partmap.Profile{partmap.FieldEmail: "alice@example.com", "fullName": "Alice"}, partmap.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = MustReopen(t, dir, nil)
	if now, err := s.Start(ctx); err != nil || now {
		t.Fatalf("start after reopen: startedNow=%v err=%v; the started flag was not persisted", now, err)
	}
	got, err := s.FindProfile(ctx, "alice@example.com")
	if err != nil || got.Version != rec.Version || got.Profile["fullName"] != "Alice" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

func TestNotStartedSurvivesReopen(t *testing.T) {
	s, dir := MustOpen(t, nil)
	s.Close()
	s = MustReopen(t, dir, nil)
	if _, err := s.FindProfile(context.Background(), "a@example.com"); !errors.Is(err, partmap.ErrNotStarted) {
		t.Fatalf("got %v, want not-started", err)
	}
}

func TestErrPartitionCountMismatch(t *testing.T) {
	s, dir := MustOpen(t, nil)
	s.Close()
	_, err := pebble.Open(dir, &pebble.Options{Partitions: 500})
	if err == nil || !strings.Contains(err.Error(), "1000 partitions but 500") {
		t.Fatalf("got %v, want a refusal naming both counts", err)
	}
	// The refusal changed nothing: the original count still opens.
	MustReopen(t, dir, nil)
}

func TestErrNewerSchema(t *testing.T) {
	dir := t.TempDir()
	db, err := cpebble.Open(dir, &cpebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("m"), []byte(`{"schema":99,"partitions":1000,"started":true}`), cpebble.Sync)
	db.Close()
	if _, err := pebble.Open(dir, nil); err == nil || !strings.Contains(err.Error(), "newer partmap") {
		t.Fatalf("got %v, want a refusal of a newer schema", err)
	}
}

func TestErrForeignMetadata(t *testing.T) {
	dir := t.TempDir()
	db, err := cpebble.Open(dir, &cpebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("m"), []byte(`not json`), cpebble.Sync)
	db.Close()
	if _, err := pebble.Open(dir, nil); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("got %v, want a refusal of corrupt metadata", err)
	}
}

func TestErrDirectoryInUse(t *testing.T) {
	_, dir := MustOpen(t, nil)
	_, err := pebble.Open(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "in use by another partmap process") {
		t.Fatalf("got %v, want an in-use refusal", err)
	}
}

func TestErrDataPathIsAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	os.WriteFile(path, []byte("x"), 0o644)
	if _, err := pebble.Open(path, nil); err == nil {
		t.Fatal("opened a regular file as a data directory")
	}
}
