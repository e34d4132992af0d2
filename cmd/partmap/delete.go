package main

import (
	"context"
	"fmt"

	"github.com/partmap/partmap"
)

func runDelete(ctx context.Context, e *env, args []string) error {
	cf := newWriteCommand(e, "delete", "EMAIL")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := partmap.DeleteProfile(ctx, cl, rest[0], cf.cond); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "deleted %s\n", rest[0])
	return nil
}
