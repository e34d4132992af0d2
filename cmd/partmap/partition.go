package main

import (
	"context"
	"fmt"

	"github.com/partmap/partmap"
)

func runPartition(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "partition", "EMAIL...")
	n := fs.Int("partitions", partmap.DefaultPartitions, "the map's partition `count` (after a resize, see `partmap resize`)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return usagef("partition needs at least one EMAIL")
	}
	if *n < 1 || *n > partmap.MaxPartitions {
		return usagef("--partitions must be from 1 to %d", partmap.MaxPartitions)
	}
	var failed error
	for _, email := range rest {
		canonical, p, err := partmap.Locate(email, *n)
		if err != nil {
			fmt.Fprintf(e.stderr, "partmap partition: %q: %s\n", email, partmap.ErrorMessage(err))
			failed = errAlreadyReported
			continue
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", canonical, partmap.Hash(canonical), p)
	}
	return failed
}
