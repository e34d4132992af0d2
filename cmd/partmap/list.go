package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

func runList(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "list", "[FIELD=VALUE]...")
	pageSize := cf.fs.Int("page-size", partmap.DefaultPageLimit, fmt.Sprintf("profiles fetched per request (1 to %d)", partmap.MaxPageLimit))
	asJSON := cf.fs.Bool("json", false, "print one JSON profile per line (JSON Lines) instead of a table")
	conditions, cl, err := cf.parse(args, 0, partmap.MaxIndexes)
	if err != nil {
		return err
	}
	return listProfiles(ctx, e, cl, conditions, *pageSize, *asJSON)
}

// listProfiles lists every profile, or those whose fields hold the values
// that the FIELD=VALUE conditions give (a search through the directory's
// equality indexes).
func listProfiles(ctx context.Context, e *env, cl *pmhttp.Client, conditions []string, pageSize int, asJSON bool) error {
	if pageSize < 1 || pageSize > partmap.MaxPageLimit {
		return usagef("--page-size must be from 1 to %d", partmap.MaxPageLimit)
	}
	var where []partmap.Match
	for _, c := range conditions {
		field, value, ok := strings.Cut(c, "=")
		if !ok || field == "" {
			return usagef("a search condition is FIELD=VALUE, not %q", c)
		}
		where = append(where, partmap.Match{Field: field, Value: value})
	}
	partitions := partmap.DefaultPartitions
	if !asJSON {
		// The partition column follows the server's layout, resized or not.
		stats, err := cl.ListPartitions(ctx)
		if err != nil {
			return err
		}
		partitions = stats.MapPartitions()
	}
	// Nothing reaches stdout before the first page is in: a refused search
	// prints no header. Then whole pages go out as they come, so a failure
	// on a later page leaves the pages before it and never half a line.
	out := bufio.NewWriter(e.stdout)
	header := !asJSON
	n, cursor := 0, ""
	for {
		page, err := cl.ListProfiles(ctx, partmap.ListOptions{Cursor: cursor, Limit: pageSize, Where: where})
		if err != nil {
			return err
		}
		if header {
			fmt.Fprintln(out, "EMAIL\tFULL NAME\tCOMPANY\tTIER\tPARTITION")
			header = false
		}
		for _, rec := range page.Profiles {
			p := rec.Profile
			if asJSON {
				b, err := json.Marshal(p)
				if err != nil {
					return err
				}
				out.Write(append(b, '\n'))
			} else {
				fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\n", p.Email(), cell(p[partmap.FieldFullName]), cell(p[partmap.FieldCompanyName]),
					cell(p[partmap.FieldCustomerTier]), partmap.PartitionOf(p.Email(), partitions))
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		n += len(page.Profiles)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	fmt.Fprintf(e.stderr, "%s\n", count(n, "profile"))
	return nil
}

// cell keeps one value on one table line.
func cell(s string) string {
	return strings.NewReplacer("\t", `\t`, "\n", `\n`, "\r", `\r`).Replace(s)
}
