package pebble_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/internal/engine"
	"github.com/partmap/partmap/pebble"
)

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	s, dir := pebble.MustOpen(t, nil)
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: "alice@example.com", "fullName": "Alice"}, partmap.Condition{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = pebble.MustReopen(t, dir, nil)
	if now, err := s.Start(ctx); err != nil || now {
		t.Fatalf("start after reopen: startedNow=%v err=%v; the started flag was not persisted", now, err)
	}
	got, err := s.FindProfile(ctx, "alice@example.com")
	if err != nil || got.Version != rec.Version || got.Profile["fullName"] != "Alice" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
}

func TestNotStartedSurvivesReopen(t *testing.T) {
	s, dir := pebble.MustOpen(t, nil)
	s.Close()
	s = pebble.MustReopen(t, dir, nil)
	if _, err := s.FindProfile(context.Background(), "a@example.com"); !errors.Is(err, partmap.ErrNotStarted) {
		t.Fatalf("got %v, want not-started", err)
	}
}

func TestErrPartitionCountMismatch(t *testing.T) {
	s, dir := pebble.MustOpen(t, nil)
	s.Close()
	_, err := pebble.Open(dir, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Partitions: 500}})
	if err == nil || !strings.Contains(err.Error(), "1000 partitions but 500") {
		t.Fatalf("got %v, want a refusal naming both counts", err)
	}
	// The refusal changed nothing: the original count still opens.
	pebble.MustReopen(t, dir, nil)
}

// snapshot records every file under dir with its contents' hash.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		sum := sha256.Sum256(b)
		files[path] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// rawPebble writes keys straight into a Pebble database at dir.
func rawPebble(t *testing.T, dir string, kv map[string]string) {
	t.Helper()
	db, err := cpebble.Open(dir, &cpebble.Options{Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range kv {
		db.Set([]byte(k), []byte(v), cpebble.Sync)
	}
	db.Close()
}

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(string, ...any)     {}
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// A directory that partmap must refuse is refused with a clear reason and
// left exactly as it was: no new files, no changed bytes.
func TestRefusedDirectoriesAreLeftUnmodified(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		opts  *pebble.Options
		want  string
	}{
		{"ErrNewerSchema", func(t *testing.T, dir string) {
			rawPebble(t, dir, map[string]string{"m": `{"schema":99,"partitions":1000,"started":true,"cursorKey":"AAAA"}`})
		}, nil, "newer partmap"},
		{"ErrCorruptMetadata", func(t *testing.T, dir string) {
			rawPebble(t, dir, map[string]string{"m": `not json`})
		}, nil, "corrupt"},
		{"ErrMetadataWithoutCursorKey", func(t *testing.T, dir string) {
			rawPebble(t, dir, map[string]string{"m": `{"schema":1,"partitions":1000,"started":true}`})
		}, nil, "not partmap's"},
		{"ErrMetadataSchemaZero", func(t *testing.T, dir string) {
			rawPebble(t, dir, map[string]string{"m": `{"schema":0,"partitions":1000,"cursorKey":"AAAA"}`})
		}, nil, "not partmap's"},
		{"ErrMetadataNoPartitions", func(t *testing.T, dir string) {
			rawPebble(t, dir, map[string]string{"m": `{"schema":1,"partitions":0,"cursorKey":"AAAA"}`})
		}, nil, "not partmap's"},
		{"ErrForeignPebble", func(t *testing.T, dir string) {
			rawPebble(t, dir, map[string]string{"user:1": "somebody else's"})
		}, nil, "without partmap metadata"},
		{"ErrForeignLevelDB", func(t *testing.T, dir string) {
			// A LevelDB directory: a CURRENT file, but no Pebble markers.
			// Nothing may be written to it, not even a lock file.
			for name, data := range map[string]string{"CURRENT": "MANIFEST-000002\n", "MANIFEST-000002": "\x00", "000003.log": "", "LOG": "leveldb"} {
				os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
			}
		}, nil, "is not a partmap directory"},
		{"ErrForeignFiles", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "thesis.tex"), []byte("precious"), 0o644)
		}, nil, "holds no partmap data"},
		{"ErrPartitionCount", func(t *testing.T, dir string) {
			s, err := pebble.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}, &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1, Partitions: 500}}, "1000 partitions but 500"},
		{"ErrCorruptManifest", func(t *testing.T, dir string) {
			s, err := pebble.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
			for _, m := range manifests {
				os.WriteFile(m, []byte("garbage"), 0o644)
			}
		}, nil, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			before := snapshot(t, dir)
			_, err := pebble.Open(dir, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			after := snapshot(t, dir)
			if len(after) != len(before) {
				t.Fatalf("files changed: before %d, after %d: %v", len(before), len(after), after)
			}
			for path, sum := range before {
				if after[path] != sum {
					t.Fatalf("%s changed", path)
				}
			}
		})
	}
}

// Start is durable on its own: after a power loss that keeps no unsynced
// byte, the directory is still started.
func TestStartSurvivesPowerLoss(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := pebble.Open("/data", &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	s2, err := pebble.Open("/data", &pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}, FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if now, err := s2.Start(ctx); err != nil || now {
		t.Fatalf("after the crash: startedNow=%v, %v; the start was not synced", now, err)
	}
}

// By default, with nil options or a zero LockWait, a write waits briefly
// for a held lock instead of failing; a negative LockWait fails at once.
func TestDefaultLockWait(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts     *pebble.Options
		conflict bool
	}{{nil, false}, {&pebble.Options{}, false}, {&pebble.Options{DirectoryOptions: partmap.DirectoryOptions{LockWait: -1}}, true}} {
		s, _ := pebble.MustOpen(t, tc.opts)
		s.Start(ctx)
		const email = "waiter@example.com"
		_, p, _ := partmap.Locate(email, partmap.DefaultPartitions)
		locked, unlock, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			s.Engine().Invoke(ctx, engine.Invocation{Lock: []engine.Part{{Partition: p}}}, func(*engine.Tx) error {
				close(locked)
				<-unlock
				return nil
			})
		}()
		<-locked
		go func() { time.Sleep(10 * time.Millisecond); close(unlock) }()
		_, _, err := partmap.UpsertProfile(ctx, s, partmap.Profile{partmap.FieldEmail: email}, partmap.Condition{})
		<-done
		if got := errors.Is(err, partmap.ErrLockConflict); got != tc.conflict {
			t.Fatalf("options %+v: got %v, want a conflict: %v", tc.opts, err, tc.conflict)
		}
	}
}

func TestErrDirectoryInUse(t *testing.T) {
	_, dir := pebble.MustOpen(t, nil)
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

// A first open killed before its metadata was written leaves a Pebble
// database with no key: the next open initialises it instead of refusing.
func TestInterruptedFirstOpenIsFresh(t *testing.T) {
	dir := t.TempDir()
	rawPebble(t, dir, nil)
	s, err := pebble.Open(dir, nil)
	if err != nil {
		t.Fatalf("an empty Pebble database: %v", err)
	}
	s.Close()
}
