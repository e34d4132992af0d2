// Package atomicfile writes a file so that it is either wholly there or not
// changed at all: the files partmap writes for its user (an export, a plot)
// must never be a plausible-looking short file.
package atomicfile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write calls write with a temporary file beside path and, if it succeeds,
// gives the file perm, syncs it and renames it over path. On any failure
// the temporary file is removed and path is left as it was.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil { // CreateTemp makes 0600
		return err
	}
	if err = f.Sync(); err != nil { // else a crash could leave the new name on an empty file
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
