package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"

	pmhttp "github.com/partmap/partmap/http"
	"github.com/partmap/partmap/internal/atomicfile"
)

func runExport(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "export", "[FILE|-]")
	force := cf.fs.Bool("force", false, "replace FILE if it exists")
	rest, cl, err := cf.parse(args, 0, 1)
	if err != nil {
		return err
	}
	path := "-"
	if len(rest) == 1 {
		path = rest[0]
	}

	// The count is only for the progress bar's estimate: the export itself
	// comes from a snapshot taken a moment later.
	stats, err := cl.ListPartitions(ctx)
	if err != nil {
		return err
	}

	if path != "-" {
		if _, err := os.Stat(path); err == nil && !*force {
			return usagef("%s exists; use --force to replace it", path)
		}
	}
	bar := progressbar.NewOptions64(stats.TotalProfiles, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription("exporting"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("profiles"), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	var n int
	export := func(w io.Writer) (err error) {
		n, err = cl.Export(ctx, w, pmhttp.ExportOptions{Progress: func(n int) { bar.Set(n) }})
		return err
	}
	if path == "-" {
		err = export(e.stdout)
	} else {
		// Profiles are personal data: the file is the owner's alone.
		err = atomicfile.Write(path, 0o600, export)
	}
	if err != nil {
		return err
	}
	bar.Finish()
	where := path
	if path == "-" {
		where = "standard output"
	}
	fmt.Fprintf(e.stderr, "exported %s to %s\n", count(n, "profile"), where)
	return nil
}
