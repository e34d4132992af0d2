package main

import (
	"context"
	"fmt"

	"github.com/partmap/partmap"
)

func runRename(ctx context.Context, e *env, args []string) error {
	cf := newWriteCommand(e, "rename", "OLD-EMAIL NEW-EMAIL")
	rest, cl, err := cf.parse(args, 2, 2)
	if err != nil {
		return err
	}
	rec, err := partmap.RenameProfile(ctx, cl, rest[0], rest[1], cf.cond)
	if err != nil {
		return err
	}
	if err := printJSON(e.stdout, rec.Profile); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "renamed %s to %s (ETag %s)\n", rest[0], rec.Profile.Email(), rec.Version.ETag())
	return nil
}
