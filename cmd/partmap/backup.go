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
	fs := newFlagSet(e, "restore", "DIR --data NEW")
	data := fs.String("data", "", "the new data `directory` to restore into: missing or empty")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("restore takes one backup DIR")
	}
	if *data == "" {
		return usagef("name the new data directory with --data")
	}
	bar, progress := bytesBar(e, "restoring")
	info, profiles, err := pebble.Restore(ctx, rest[0], *data, progress)
	bar.Finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "restored the backup of %s (%d profiles) into %s; serve it with partmap serve --data %s\n",
		time.UnixMilli(info.Taken).UTC().Format(time.RFC3339), profiles, *data, *data)
	return nil
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
