package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

func runCheck(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "check", "")
	only := cf.fs.Int("partition", 0, "check only this partition `number`; without it, every partition")
	_, cl, err := cf.parse(args, 0, 0)
	if err != nil {
		return err
	}
	stats, err := cl.ListPartitions(ctx)
	if err != nil {
		return err
	}
	n := stats.MapPartitions()
	first, last := 0, n-1
	if flagGiven(cf.fs, "partition") {
		if *only < 0 || *only >= n {
			return usagef("--partition must be from 0 to %d", n-1)
		}
		first, last = *only, *only
	}
	drifted, err := checkPartitions(ctx, cl, first, last, e)
	if err != nil {
		return err
	}
	if drifted > 0 {
		return fmt.Errorf("%d of %d partitions have drifted (see above); nothing was repaired", drifted, last-first+1)
	}
	what := indexList(stats.Indexes)
	if infos, err := cl.ListIndexes(ctx); err == nil {
		var built []string
		for _, ix := range infos {
			if !ix.Legacy && !ix.Building {
				built = append(built, ix.Name)
			}
		}
		if len(built) > 0 {
			what += "; search indexes " + strings.Join(built, ", ")
		}
	}
	fmt.Fprintf(e.stdout, "checked %s: counts and indexes (%s) agree with the profiles\n", count(last-first+1, "partition"), what)
	return nil
}

// checkPartitions checks first..last, in one streamed request, and prints
// every drift; it returns how many partitions drifted.
func checkPartitions(ctx context.Context, cl *pmhttp.Client, first, last int, e *env) (int, error) {
	bar := progressbar.NewOptions(last-first+1, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
		progressbar.OptionSetDescription("checking"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("partitions"), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	drifted := 0
	err := cl.CheckPartitions(ctx, partmap.Partition(first), partmap.Partition(last+1), func(c partmap.PartitionCheck) error {
		bar.Add(1)
		if c.OK() {
			return nil
		}
		drifted++
		if c.Profiles != c.Counted {
			fmt.Fprintf(e.stdout, "%s: %s but the stored count is %d\n", c.Partition, count(c.Profiles, "profile"), c.Counted)
		}
		for _, d := range c.Drift {
			what := "stale index entry (no profile holds it)"
			if d.Missing {
				what = "missing index entry"
			}
			fmt.Fprintf(e.stdout, "%s: %s: %s %s=%q\n", c.Partition, what, d.Email, d.Field, d.Value)
		}
		return nil
	})
	if err != nil {
		return drifted, fmt.Errorf("checking: %w", err)
	}
	bar.Finish()
	return drifted, nil
}

func indexList(fields []string) string {
	if len(fields) == 0 {
		return "none"
	}
	return strings.Join(fields, ", ")
}
