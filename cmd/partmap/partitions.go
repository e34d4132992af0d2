package main

import (
	"context"
	"fmt"
)

func runPartitions(ctx context.Context, e *env, args []string) error {
	_, cl, err := newClientCommand(e, "partitions", "").parse(args, 0, 0)
	if err != nil {
		return err
	}
	stats, err := cl.ListPartitions(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "PARTITION\tPROFILES")
	for _, p := range stats.Partitions {
		fmt.Fprintf(e.stdout, "%s\t%d\n", p.Partition, p.Profiles)
	}
	fmt.Fprintf(e.stderr, "%s in use, %s\n", count(len(stats.Partitions), "partition"), count(stats.TotalProfiles, "profile"))
	return nil
}
