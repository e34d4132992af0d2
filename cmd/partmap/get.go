package main

import (
	"context"
	"strings"
)

func runGet(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "get", "EMAIL")
	fields := cf.fs.String("fields", "", "show only these `NAMES`, comma-separated, in this order (a missing field shows as null)")
	rest, cl, err := cf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *fields != "" {
		proj, err := cl.ProjectProfile(ctx, rest[0], strings.Split(*fields, ","))
		if err != nil {
			return err
		}
		return printJSON(e.stdout, proj)
	}
	rec, err := cl.FindProfile(ctx, rest[0])
	if err != nil {
		return err
	}
	return printJSON(e.stdout, rec.Profile)
}
