package atomicfile_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/partmap/partmap/internal/atomicfile"
)

// entries lists dir, to see that no temporary file is left.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	for _, perm := range []fs.FileMode{0o600, 0o644} {
		t.Run("OK"+perm.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.txt")
			os.WriteFile(path, []byte("old\n"), 0o666)
			if err := atomicfile.Write(path, perm, func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			fi, _ := os.Stat(path)
			if string(got) != "new\n" || fi.Mode().Perm() != perm {
				t.Fatalf("got %q %v, want %q %v", got, fi.Mode().Perm(), "new\n", perm)
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Fatalf("left %v", names)
			}
		})
	}
	// A write that fails midway leaves the old file, and no other.
	t.Run("ErrWrite", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "out.txt")
		os.WriteFile(path, []byte("old\n"), 0o644)
		boom := errors.New("boom")
		err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
			io.WriteString(w, "half")
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("got %v, want the write's error", err)
		}
		if got, _ := os.ReadFile(path); string(got) != "old\n" {
			t.Fatalf("the failed write changed the file: %q", got)
		}
		if names := entries(t, dir); len(names) != 1 {
			t.Fatalf("left %v", names)
		}
	})
	t.Run("ErrNoDirectory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing", "out.txt")
		called := false
		if err := atomicfile.Write(path, 0o644, func(io.Writer) error { called = true; return nil }); !errors.Is(err, fs.ErrNotExist) || called {
			t.Fatalf("got %v (write called: %v), want not-exist before writing", err, called)
		}
	})
}
