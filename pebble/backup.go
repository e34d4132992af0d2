package pebble

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/partmap/partmap"
)

var _ partmap.Backuper = (*Store)(nil)

// Backup takes a Pebble checkpoint beside the data directory, on the same
// filesystem so that its tables are hard links, not copies, and streams it
// to w as a tar archive, then removes it. A checkpoint is one consistent
// state, with the WAL synced first so that every acknowledged write is in
// it; writers go on meanwhile.
func (s *Store) Backup(ctx context.Context, w io.Writer) (partmap.BackupInfo, error) {
	if s.fs != vfs.Default {
		return partmap.BackupInfo{}, partmap.Errorf(partmap.EUNSUPPORTED, "a store on an in-memory filesystem has no backup")
	}
	tmp, err := os.MkdirTemp(filepath.Dir(s.path), backupPrefix(s.path))
	if err != nil {
		return partmap.BackupInfo{}, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "data")
	// The feed's position is read first: every event up to it is durable
	// now, so the checkpoint, which holds every durable write, holds it.
	info := partmap.BackupInfo{Feed: s.backend.feedPosition(), Taken: time.Now().UnixMilli()}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return info, fmt.Errorf("backup: checkpoint: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return info, fmt.Errorf("backup: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, e := range names {
		if err := ctx.Err(); err != nil {
			return info, err
		}
		n, err := archiveFile(tw, filepath.Join(dir, e.Name()))
		if err != nil {
			return info, fmt.Errorf("backup: %s: %w", e.Name(), err)
		}
		info.Files++
		info.Bytes += n
	}
	manifest, err := json.Marshal(info)
	if err != nil {
		return info, err
	}
	hdr := &tar.Header{Name: partmap.BackupManifest, Mode: 0o644, Size: int64(len(manifest)), ModTime: time.UnixMilli(info.Taken)}
	if err := tw.WriteHeader(hdr); err != nil {
		return info, err
	}
	if _, err := tw.Write(manifest); err != nil {
		return info, err
	}
	return info, tw.Close()
}

// backupPrefix names the checkpoints of the data directory path, beside
// it: a crash midway leaves one, which the next Open removes.
func backupPrefix(path string) string { return ".partmap-backup-" + filepath.Base(path) + "-" }

// removeStaleBackups removes the checkpoints a crash left beside path.
func removeStaleBackups(path string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(path), backupPrefix(path)+"*"))
	for _, dir := range stale {
		os.RemoveAll(dir)
	}
}

func archiveFile(tw *tar.Writer, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("not a regular file")
	}
	if err := tw.WriteHeader(&tar.Header{Name: filepath.Base(path), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
		return 0, err
	}
	return io.Copy(tw, f)
}

// Unpack writes the backup archive r into dir, which must be missing or
// empty, and checks it against its manifest: an archive cut short leaves
// nothing behind. progress, when not nil, gets the bytes written so far.
func Unpack(r io.Reader, dir string, progress func(int64)) (partmap.BackupInfo, error) {
	var info partmap.BackupInfo
	if err := emptyDir(dir); err != nil {
		return info, err
	}
	ok := false
	defer func() {
		if !ok {
			removeContents(dir)
		}
	}()
	tr := tar.NewReader(r)
	var files int
	var size int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return info, fmt.Errorf("the backup ends without its manifest: it is incomplete")
		}
		if err != nil {
			return info, fmt.Errorf("reading the backup: %w", err)
		}
		if hdr.Name == partmap.BackupManifest {
			raw, err := io.ReadAll(io.LimitReader(tr, 1<<16))
			if err == nil {
				err = json.Unmarshal(raw, &info)
			}
			if err != nil {
				return info, fmt.Errorf("the backup's manifest: %w", err)
			}
			if _, err := writeFile(filepath.Join(dir, partmap.BackupManifest), bytes.NewReader(raw)); err != nil {
				return info, err
			}
			if info.Files != files || info.Bytes != size {
				return info, fmt.Errorf("the backup holds %d files of %d bytes; its manifest says %d of %d", files, size, info.Files, info.Bytes)
			}
			if err := syncDir(dir); err != nil {
				return info, err
			}
			ok = true
			return info, nil
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Name != filepath.Base(hdr.Name) || hdr.Name == "." || hdr.Name == ".." || hdr.Name[0] == '.' {
			return info, fmt.Errorf("the backup holds %q, which is not a data file", hdr.Name)
		}
		n, err := writeFile(filepath.Join(dir, hdr.Name), tr)
		if err != nil {
			return info, err
		}
		files++
		size += n
		if progress != nil {
			progress(size)
		}
	}
}

// Restore copies the backup in dir, which Unpack wrote, to data, which
// must be missing or empty, and opens it once to check that partmap
// serves it. It returns the backup's manifest and its profile count.
func Restore(ctx context.Context, dir, data string, progress func(int64)) (partmap.BackupInfo, int64, error) {
	var info partmap.BackupInfo
	raw, err := os.ReadFile(filepath.Join(dir, partmap.BackupManifest))
	if err != nil {
		return info, 0, fmt.Errorf("%s is not a partmap backup (no %s): %w", dir, partmap.BackupManifest, err)
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return info, 0, fmt.Errorf("%s: %w", partmap.BackupManifest, err)
	}
	if err := emptyDir(data); err != nil {
		return info, 0, err
	}
	ok := false
	defer func() {
		if !ok {
			removeContents(data) // so that the next attempt can use it
		}
	}()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return info, 0, err
	}
	var size int64
	for _, e := range entries {
		if e.Name() == partmap.BackupManifest {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return info, 0, err
		}
		n, err := writeFile(filepath.Join(data, e.Name()), f)
		f.Close()
		if err != nil {
			return info, 0, err
		}
		if size += n; progress != nil {
			progress(size)
		}
	}
	if err := syncDir(data); err != nil {
		return info, 0, err
	}
	opts := DefaultOptions()
	opts.SweepInterval = -1
	s, err := Open(data, &opts)
	if err != nil {
		return info, 0, fmt.Errorf("the restored directory does not open: %w", err)
	}
	defer s.Close()
	stats, err := s.ListPartitions(ctx)
	if partmap.ErrorCode(err) == partmap.ENOTSTARTED {
		err = nil
	}
	ok = err == nil
	return info, stats.TotalProfiles, err
}

// emptyDir makes dir, or checks that it is empty.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: name a new directory", dir)
	}
	return nil
}

func removeContents(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// writeFile writes r to path durably.
func writeFile(path string, r io.Reader) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
