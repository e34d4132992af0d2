package main

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

func runGet(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "get", "EMAIL...")
	fields := cf.fs.String("fields", "", "show only these `NAMES`, comma-separated, in this order (a missing field shows as null)")
	rest, cl, err := cf.parse(args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	var names []string
	if flagGiven(cf.fs, "fields") {
		names = strings.Split(*fields, ",")
		if slices.Contains(names, "") {
			return usagef("--fields: a field name in the list is empty")
		}
	}
	if len(rest) > 1 {
		return getMany(ctx, e, cl, rest, names)
	}
	if names != nil {
		proj, err := cl.ProjectProfile(ctx, rest[0], names)
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

// getMany prints the profiles of several emails as one JSON array, in the
// order given, with null for a missing one. It asks the server in batches
// of partmap.MaxBatchEmails, so that any number can be looked up; the
// answer is not a snapshot across batches, as it is not across partitions.
func getMany(ctx context.Context, e *env, cl *pmhttp.Client, emails, fields []string) error {
	out := make([]any, 0, len(emails))
	for batch := range slices.Chunk(emails, partmap.MaxBatchEmails) {
		if fields != nil {
			projs, err := cl.ProjectProfiles(ctx, batch, fields)
			if err != nil {
				return err
			}
			for _, p := range projs {
				out = append(out, orNull(p))
			}
			continue
		}
		recs, err := cl.FindProfiles(ctx, batch)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if rec == nil {
				out = append(out, nil)
				continue
			}
			out = append(out, rec.Profile)
		}
	}
	return printJSON(e.stdout, out)
}

// orNull turns a missing projection into JSON's null rather than an empty
// object.
func orNull(p *partmap.Projection) json.Marshaler {
	if p == nil {
		return nil
	}
	return *p
}
