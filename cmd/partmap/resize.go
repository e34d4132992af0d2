package main

import (
	"context"
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
)

func runResize(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "resize", "")
	partitions := cf.fs.Int("partitions", 0, fmt.Sprintf("rehash every profile into this many `partitions` (1 to %d); without it, show the resize in progress", partmap.MaxPartitions))
	detach := cf.fs.Bool("detach", false, "start the resize and return; it goes on in the server")
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	if !flagGiven(cf.fs, "partitions") {
		st, err := cl.ResizeStatus(ctx)
		if err != nil {
			return err
		}
		printResize(e, st)
		return nil
	}
	if *partitions < 1 || *partitions > partmap.MaxPartitions {
		return usagef("--partitions must be from 1 to %d", partmap.MaxPartitions)
	}
	st, err := cl.Resize(ctx, *partitions)
	if err != nil {
		return err
	}
	if !st.Running {
		printResize(e, st) // it finished already
		return nil
	}
	fmt.Fprintf(e.stderr, "resizing from %d to %d partitions; reads and writes go on meanwhile\n", st.Partitions, st.To)
	if *detach {
		return nil
	}
	bar := progressbar.NewOptions(st.Partitions, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription("copying partitions"), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	for st.Running {
		bar.Set(st.Copied)
		select {
		case <-ctx.Done():
			fmt.Fprintln(e.stderr, "\nstopped watching; the resize goes on in the server (`partmap resize` shows it)")
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if st, err = cl.ResizeStatus(ctx); err != nil {
			return err
		}
	}
	bar.Finish()
	printResize(e, st)
	return nil
}

func printResize(e *env, st partmap.ResizeStatus) {
	if st.Running {
		fmt.Fprintf(e.stdout, "resizing from %d to %d partitions: %d of %d copied\n", st.Partitions, st.To, st.Copied, st.Partitions)
	} else {
		fmt.Fprintf(e.stdout, "%s (layout generation %d)\n", count(st.Partitions, "partition"), st.Generation)
	}
	if st.LastError != "" {
		fmt.Fprintf(e.stderr, "the mover's last error, which it retries: %s\n", st.LastError)
	}
}
