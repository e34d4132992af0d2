package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

const searchHelp = `Two forms:

  partmap search INDEX QUERY...      a query in the Redis Query Engine's syntax on a
                                     search index (see partmap index); the words of
                                     QUERY are joined by spaces. Quote it, so that
                                     the shell leaves * and {} alone, and put -- before
                                     a query that starts with -:
                                       partmap search desk 'ali*'
                                       partmap search desk --sort-by visits --desc '@customerTier:{gold}'
                                       partmap search desk -- '-@customerTier:{gold}'
  partmap search FIELD=VALUE...      every profile whose indexed fields hold exactly
                                     these values (the directory's equality indexes;
                                     --page-size and --json only)`

func runSearch(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "search", "INDEX QUERY... | FIELD=VALUE...")
	usage := cf.fs.Usage
	cf.fs.Usage = func() { usage(); fmt.Fprintf(e.stderr, "\n%s\n", searchHelp) }
	pageSize := cf.fs.Int("page-size", partmap.DefaultPageLimit, fmt.Sprintf("FIELD=VALUE: profiles fetched per request (1 to %d)", partmap.MaxPageLimit))
	asJSON := cf.fs.Bool("json", false, "print one JSON object per line (JSON Lines) instead of a table")
	sortBy := cf.fs.String("sort-by", "", "order the hits by this `field` of the index (SORTBY)")
	desc := cf.fs.Bool("desc", false, "with --sort-by: descending")
	var limit optionalInt
	cf.fs.Var(&limit, "limit", fmt.Sprintf("`hits` to show, 0 to %d (LIMIT's count), 0 counting them only; without it %d, or with --all %d a request", partmap.MaxSearchLimit, partmap.DefaultSearchLimit, allPage))
	offset := cf.fs.Int("offset", 0, "hits to skip first (LIMIT's offset)")
	var ret listFlag
	cf.fs.Var(&ret, "return", "comma-separated `fields` to show (RETURN); '' for none")
	noContent := cf.fs.Bool("no-content", false, "show emails only (NOCONTENT)")
	all := cf.fs.Bool("all", false, "every hit: follow the cursor from page to page to the end")
	rest, cl, err := cf.parse(args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	cf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if strings.Contains(rest[0], "=") {
		for _, name := range []string{"sort-by", "desc", "limit", "offset", "return", "no-content", "all"} {
			if set[name] {
				return usagef("--%s goes with `partmap search INDEX QUERY`, not with FIELD=VALUE conditions", name)
			}
		}
		if len(rest) > partmap.MaxIndexes {
			return usagef("%d conditions; a directory indexes at most %d fields", len(rest), partmap.MaxIndexes)
		}
		return listProfiles(ctx, e, cl, rest, *pageSize, *asJSON)
	}
	if len(rest) < 2 {
		cf.fs.Usage()
		return errUsageReported
	}
	opts := partmap.SearchOptions{Query: strings.Join(rest[1:], " "), SortBy: *sortBy, Descending: *desc, Offset: *offset, NoContent: *noContent}
	if ret.set {
		opts.Return = ret.words
	}
	switch {
	case set["page-size"]:
		return usagef("--page-size pages a FIELD=VALUE search; with INDEX QUERY, --limit sets the page")
	case *desc && *sortBy == "":
		return usagef("--desc needs --sort-by: without it, hits come in the index's own order")
	case limit.set && (limit.n < 0 || limit.n > partmap.MaxSearchLimit):
		return usagef("--limit must be from 0 to %d", partmap.MaxSearchLimit)
	case limit.set && limit.n == 0 && *all:
		return usagef("--all shows every hit; --limit 0 shows none")
	case *offset < 0:
		return usagef("--offset must be 0 or more")
	case *noContent && ret.set:
		return usagef("--no-content and --return cannot go together")
	}
	switch {
	case limit.set && limit.n == 0:
		opts.Limit = -1 // only the total, as LIMIT 0 0
	case limit.set:
		opts.Limit = limit.n
	case *all:
		opts.Limit = allPage
	}
	return search(ctx, e, cl, rest[0], opts, *all, *asJSON)
}

// optionalInt is an integer flag whose absence is not 0.
type optionalInt struct {
	set bool
	n   int
}

func (f *optionalInt) String() string {
	if !f.set {
		return ""
	}
	return strconv.Itoa(f.n)
}

func (f *optionalInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return errors.New("not an integer")
	}
	f.set, f.n = true, n
	return nil
}

// allPage is how many hits --all asks for at a time.
const allPage = 1000

// search prints one page of a search, or with all every page, as they
// come: nothing reaches stdout before the first page is in, so a refused
// search prints no header, and a failure later leaves whole lines only.
func search(ctx context.Context, e *env, cl *pmhttp.Client, index string, opts partmap.SearchOptions, all, asJSON bool) error {
	columns := []string{partmap.FieldEmail, partmap.FieldFullName, partmap.FieldCompanyName, partmap.FieldCustomerTier}
	switch {
	case opts.NoContent:
		columns = columns[:1]
	case opts.Return != nil:
		columns = append(columns[:1], opts.Return...)
	case opts.SortBy != "" && !slices.Contains(columns, opts.SortBy):
		columns = append(columns, opts.SortBy)
	}
	out := bufio.NewWriter(e.stdout)
	var bar *progressbar.ProgressBar
	shown := 0
	for page := 0; ; page++ {
		res, err := cl.Search(ctx, index, opts)
		if err != nil {
			return err
		}
		if page == 0 {
			if !asJSON && opts.Limit >= 0 {
				fmt.Fprintln(out, tableHeader(columns))
			}
			if all {
				bar = progressbar.NewOptions64(res.Total-int64(opts.Offset), progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetVisibility(isTerminal(e.stderr)),
					progressbar.OptionSetDescription("searching"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
					progressbar.OptionSetItsString("hits"), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
		}
		for _, h := range res.Hits {
			if asJSON {
				err = writeHitJSON(out, h, opts)
			} else {
				err = writeHitRow(out, h, columns)
			}
			if err != nil {
				return err
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
		shown += len(res.Hits)
		if bar != nil {
			bar.Add(len(res.Hits))
		}
		if !all || res.NextCursor == "" {
			if bar != nil {
				bar.Finish()
			}
			summarise(e, shown, res, opts, all)
			return nil
		}
		opts.Cursor, opts.Offset = res.NextCursor, 0
	}
}

func summarise(e *env, shown int, res partmap.SearchResult, opts partmap.SearchOptions, all bool) {
	switch {
	case opts.Limit < 0:
		fmt.Fprintf(e.stderr, "%s match\n", count(res.Total, "profile"))
	case int64(shown) == res.Total:
		fmt.Fprintf(e.stderr, "%s\n", count(shown, "matching profile"))
	case all || res.NextCursor == "":
		fmt.Fprintf(e.stderr, "%d of %s\n", shown, count(res.Total, "matching profile"))
	default:
		fmt.Fprintf(e.stderr, "%d of %s; --all for every one, or --offset %d for the next page\n", shown, count(res.Total, "matching profile"), opts.Offset+shown)
	}
}

// tableHeader names the columns as list does: the documented fields in
// words, any other by its name.
func tableHeader(columns []string) string {
	names := map[string]string{partmap.FieldEmail: "EMAIL", partmap.FieldFullName: "FULL NAME", partmap.FieldCompanyName: "COMPANY", partmap.FieldCustomerTier: "TIER"}
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = cmp.Or(names[c], cell(c))
	}
	return strings.Join(out, "\t")
}

func writeHitRow(w io.Writer, h partmap.SearchHit, columns []string) error {
	row := []string{h.Email}
	for _, c := range columns[1:] {
		v := ""
		for _, f := range h.Fields {
			if f.Name == c {
				v = f.Value
			}
		}
		row = append(row, cell(v))
	}
	_, err := fmt.Fprintln(w, strings.Join(row, "\t"))
	return err
}

// writeHitJSON writes a hit as list --json writes a profile: emailAddress
// first, then its fields, RETURN's in RETURN's order.
func writeHitJSON(w io.Writer, h partmap.SearchHit, opts partmap.SearchOptions) error {
	if opts.Return == nil && !opts.NoContent {
		p := partmap.Profile{partmap.FieldEmail: h.Email}
		for _, f := range h.Fields {
			p[f.Name] = f.Value
		}
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteString(`{"` + partmap.FieldEmail + `":`)
	enc.Encode(h.Email)
	for _, f := range h.Fields {
		if f.Name == partmap.FieldEmail {
			continue
		}
		buf.Truncate(buf.Len() - 1) // the encoder's newline
		buf.WriteByte(',')
		enc.Encode(f.Name)
		buf.Truncate(buf.Len() - 1)
		buf.WriteByte(':')
		enc.Encode(f.Value)
	}
	buf.Truncate(buf.Len() - 1)
	buf.WriteString("}\n")
	_, err := w.Write(buf.Bytes())
	return err
}
