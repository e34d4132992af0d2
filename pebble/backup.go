package pebble

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
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
		f, err := archiveFile(tw, filepath.Join(dir, e.Name()))
		if err != nil {
			return info, fmt.Errorf("backup: %s: %w", e.Name(), err)
		}
		info.Contents = append(info.Contents, f)
		info.Files++
		info.Bytes += f.Size
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

// crc32c is the checksum of a backup's files (partmap.BackupFile).
var crc32c = crc32.MakeTable(crc32.Castagnoli)

func archiveFile(tw *tar.Writer, path string) (partmap.BackupFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return partmap.BackupFile{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return partmap.BackupFile{}, err
	}
	if !st.Mode().IsRegular() {
		return partmap.BackupFile{}, fmt.Errorf("not a regular file")
	}
	if err := tw.WriteHeader(&tar.Header{Name: filepath.Base(path), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
		return partmap.BackupFile{}, err
	}
	h := crc32.New(crc32c)
	n, err := io.Copy(tw, io.TeeReader(f, h))
	return partmap.BackupFile{Name: filepath.Base(path), Size: n, CRC32C: h.Sum32()}, err
}

// A BackupSource is a backup in either of its forms: the tar archive that
// Backup writes (BackupArchive), or the directory that Unpack writes from
// one (BackupDir). Verify and Restore take either, and check both the
// same way (partmap.BackupInfo.Check).
type BackupSource struct {
	dir     string    // the directory form, or
	archive io.Reader // the archive form
}

// BackupDir is the backup that Unpack wrote into dir.
func BackupDir(dir string) BackupSource { return BackupSource{dir: dir} }

// BackupArchive is the backup archive r, as Backup writes it.
func BackupArchive(r io.Reader) BackupSource { return BackupSource{archive: r} }

// maxManifest bounds a manifest: some 60 bytes a file, for a store of
// hundreds of thousands of files.
const maxManifest = 32 << 20

// files calls each with every data file of the backup, in turn, and
// returns its manifest's bytes.
func (b BackupSource) files(each func(name string, r io.Reader) error) ([]byte, error) {
	if b.archive == nil {
		return dirFiles(b.dir, each)
	}
	tr := tar.NewReader(b.archive)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, partmap.Errorf(partmap.EINVALID, "the backup ends without its manifest (%s): it is incomplete", partmap.BackupManifest)
		}
		if err != nil {
			return nil, fmt.Errorf("reading the backup: %w", err)
		}
		if hdr.Name == partmap.BackupManifest {
			raw, err := readManifest(tr)
			if err != nil {
				return nil, err
			}
			// Whatever follows the manifest is no part of the backup.
			if hdr, err := tr.Next(); err == nil {
				return nil, partmap.Errorf(partmap.EINVALID, "the backup is damaged: %s follows its manifest", hdr.Name)
			}
			return raw, nil
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Name != filepath.Base(hdr.Name) || hdr.Name == "." || hdr.Name == ".." || hdr.Name[0] == '.' {
			return nil, partmap.Errorf(partmap.EINVALID, "the backup holds %q, which is not a data file", hdr.Name)
		}
		if err := each(hdr.Name, tr); err != nil {
			return nil, err
		}
	}
}

func dirFiles(dir string, each func(name string, r io.Reader) error) ([]byte, error) {
	f, err := os.Open(filepath.Join(dir, partmap.BackupManifest))
	if os.IsNotExist(err) {
		return nil, partmap.Errorf(partmap.EINVALID, "%s is not a partmap backup: it has no %s", dir, partmap.BackupManifest)
	}
	if err != nil {
		return nil, err
	}
	raw, err := readManifest(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() == partmap.BackupManifest {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, partmap.Errorf(partmap.EINVALID, "the backup holds %s, which is not a data file", e.Name())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		err = each(e.Name(), f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return raw, nil
}

func readManifest(r io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("reading the backup's manifest (%s): %w", partmap.BackupManifest, err)
	}
	if len(raw) > maxManifest {
		return nil, partmap.Errorf(partmap.EINVALID, "the backup's manifest (%s) is over %d MiB: it is garbled", partmap.BackupManifest, maxManifest>>20)
	}
	return raw, nil
}

// read reads every file of the backup, copies each into dst when dst is
// not "", and checks what it read against the manifest: the check is of
// the bytes copied. progress, when not nil, gets the bytes read so far.
func (b BackupSource) read(dst string, progress func(int64)) (partmap.BackupInfo, []byte, error) {
	var info partmap.BackupInfo
	var found []partmap.BackupFile
	var size int64
	raw, err := b.files(func(name string, r io.Reader) error {
		h := crc32.New(crc32c)
		var n int64
		var err error
		if dst == "" {
			n, err = io.Copy(h, r)
		} else {
			n, err = writeFile(filepath.Join(dst, name), io.TeeReader(r, h))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return partmap.Errorf(partmap.EINVALID, "the backup is cut short: it ends in %s", name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		found = append(found, partmap.BackupFile{Name: name, Size: n, CRC32C: h.Sum32()})
		if size += n; progress != nil {
			progress(size)
		}
		return nil
	})
	if err != nil {
		return info, nil, err
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return info, nil, partmap.Errorf(partmap.EINVALID, "the backup's manifest (%s) is garbled: %v", partmap.BackupManifest, err)
	}
	return info, raw, info.Check(found)
}

// Verify reads every file of the backup b and checks it against the
// backup's manifest (partmap.BackupInfo.Check), writing nothing. progress,
// when not nil, gets the bytes read so far.
func Verify(b BackupSource, progress func(int64)) (partmap.BackupInfo, error) {
	info, _, err := b.read("", progress)
	return info, err
}

// Unpack writes the backup archive r into dir, which must be missing or
// empty, and checks every file against its manifest: a damaged archive,
// or one cut short, leaves nothing behind, not even dir. progress, when
// not nil, gets the bytes written so far.
func Unpack(r io.Reader, dir string, progress func(int64)) (partmap.BackupInfo, error) {
	undo, err := makeEmptyDir(dir)
	if err != nil {
		return partmap.BackupInfo{}, err
	}
	info, raw, err := BackupArchive(r).read(dir, progress)
	if err == nil {
		_, err = writeFile(filepath.Join(dir, partmap.BackupManifest), bytes.NewReader(raw))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		undo()
	}
	return info, err
}

// Restore copies the backup b to data, which must be missing or empty,
// checking every file against the manifest as it goes, and only then
// opens the copy, once, to check that partmap serves it. Pebble cannot
// be left to notice damage: it takes a short last WAL for a torn write
// and does not miss an absent one. A refused backup leaves nothing in
// data, nor data itself if Restore made it. Restore returns the backup's
// manifest and its profile count.
func Restore(ctx context.Context, b BackupSource, data string, progress func(int64)) (partmap.BackupInfo, int64, error) {
	undo, err := makeEmptyDir(data)
	if err != nil {
		return partmap.BackupInfo{}, 0, err
	}
	info, profiles, err := restore(ctx, b, data, progress)
	if err != nil {
		undo()
	}
	return info, profiles, err
}

func restore(ctx context.Context, b BackupSource, data string, progress func(int64)) (partmap.BackupInfo, int64, error) {
	info, _, err := b.read(data, progress)
	if err != nil {
		return info, 0, err
	}
	if err := syncDir(data); err != nil {
		return info, 0, err
	}
	s, err := Open(data, &Options{DirectoryOptions: partmap.DirectoryOptions{SweepInterval: -1}})
	if err != nil {
		return info, 0, fmt.Errorf("the restored directory does not open: %w", err)
	}
	defer s.Close()
	stats, err := s.ListPartitions(ctx)
	if partmap.ErrorCode(err) == partmap.ENOTSTARTED {
		err = nil
	}
	return info, stats.TotalProfiles, err
}

// makeEmptyDir makes dir, or checks that it is empty, and returns what
// undoes that after a failure: it removes every directory it made, or
// empties dir if dir was there, so that the next attempt can use it.
func makeEmptyDir(dir string) (undo func(), err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return nil, fmt.Errorf("%s is not empty: name a new directory", dir)
	case err == nil:
		return func() { removeContents(dir) }, nil
	case !os.IsNotExist(err):
		return nil, err
	}
	made := filepath.Clean(dir) // the outermost directory MkdirAll makes
	for parent := filepath.Dir(made); parent != made; parent = filepath.Dir(parent) {
		if _, err := os.Lstat(parent); !os.IsNotExist(err) {
			break
		}
		made = parent
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return func() { os.RemoveAll(made) }, nil
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
