package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/pebble"
)

// bytesBar shows bytes written so far, on a terminal only.
func bytesBar(e *env, what string) (*progressbar.ProgressBar, func(int64)) {
	bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription(what), progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	return bar, func(n int64) { bar.Set64(n) }
}

func runBackup(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "backup", "DIR")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	// Refused before the server takes a checkpoint for nothing.
	if entries, err := os.ReadDir(rest[0]); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: name a new directory", rest[0])
	}
	bar, progress := bytesBar(e, "backing up")
	var info partmap.BackupInfo
	err = cl.Backup(ctx, func(r io.Reader) error {
		info, err = pebble.Unpack(r, rest[0], progress)
		return err
	})
	bar.Finish()
	if partmap.ErrorCode(err) == partmap.EUNSUPPORTED {
		return fmt.Errorf("%s", partmap.ErrorMessage(err))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "backed up %d files, %s, as of %s, into %s; bring it back with partmap restore %s --data NEW\n",
		info.Files, byteCount(info.Bytes), time.UnixMilli(info.Taken).UTC().Format(time.RFC3339), rest[0], rest[0])
	if info.Feed != "" {
		fmt.Fprintf(e.stderr, "the backup holds every change up to change feed cursor %s: catch up from there with the changes after it\n", info.Feed)
	}
	return nil
}

func runRestore(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "restore", "BACKUP --data NEW | --verify BACKUP   "+
		"(BACKUP: a directory that partmap backup wrote, an archive that GET …/backup returned, or - for one on stdin)")
	data := fs.String("data", "", "the new data `directory` to restore into: missing or empty; every file is checked against the backup's manifest first")
	verify := fs.Bool("verify", false, "check every file of BACKUP against its manifest (size and CRC-32C), restore nothing, and exit 1 if one is damaged")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("restore takes one BACKUP: a directory, an archive file, or - for an archive on standard input")
	}
	switch {
	case *verify && *data != "":
		return usagef("--verify restores nothing: give --data or --verify, not both")
	case !*verify && *data == "":
		return usagef("name the new data directory with --data, or check the backup without restoring it with --verify")
	}
	src, closeSrc, err := openBackup(e, rest[0])
	if err != nil {
		return err
	}
	defer closeSrc()
	if *verify {
		bar, progress := bytesBar(e, "verifying")
		info, err := pebble.Verify(src, progress)
		bar.Finish()
		if err != nil {
			return err
		}
		verdict := "is sound: %d files, %s (%d bytes), each of the size and CRC-32C its manifest lists"
		if warnUnchecksummed(e, rest[0], info) {
			verdict = "has the count and size its manifest gives: %d files, %s (%d bytes)"
		}
		fmt.Fprintf(e.stderr, "the backup of %s "+verdict+"\n", time.UnixMilli(info.Taken).UTC().Format(time.RFC3339), info.Files, byteCount(info.Bytes), info.Bytes)
		return nil
	}
	bar, progress := bytesBar(e, "restoring")
	info, profiles, err := pebble.Restore(ctx, src, *data, progress)
	bar.Finish()
	if err != nil {
		return err
	}
	warnUnchecksummed(e, rest[0], info)
	fmt.Fprintf(e.stderr, "restored the backup of %s (%s) into %s; serve it with partmap serve --data %s\n",
		time.UnixMilli(info.Taken).UTC().Format(time.RFC3339), count(profiles, "profile"), *data, *data)
	return nil
}

// openBackup opens a backup in the form it has: a directory, or an archive
// in a file or, for -, on standard input.
func openBackup(e *env, path string) (pebble.BackupSource, func(), error) {
	if path == "-" {
		return pebble.BackupArchive(e.stdin), func() {}, nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return pebble.BackupDir(path), func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return pebble.BackupSource{}, nil, err
	}
	return pebble.BackupArchive(f), func() { f.Close() }, nil
}

// warnUnchecksummed says so when an older partmap made the backup: its
// manifest has only a file count and a total size, which were checked, but
// no checksums, so a file altered in place would go unseen. Such a backup
// is still restored, since it may be the only one there is.
func warnUnchecksummed(e *env, path string, info partmap.BackupInfo) bool {
	if info.Checksummed() {
		return false
	}
	fmt.Fprintf(e.stderr, "partmap restore: warning: %s was made by an older partmap, whose manifest lists no checksums: "+
		"its %d files and %d bytes were counted, but their contents could not be checked\n", path, info.Files, info.Bytes)
	return true
}

// byteCount says n bytes for people.
func byteCount(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
