package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/partmap/partmap"
	pmhttp "github.com/partmap/partmap/http"
)

// clientFlags are shared by every subcommand that talks to a server.
type clientFlags struct {
	server string
}

func (c *clientFlags) register(e *env, fs *flag.FlagSet) {
	def := e.getenv("PARTMAP_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	fs.StringVar(&c.server, "server", def, "partmap server `URL` (default from $PARTMAP_SERVER)")
}

func (c *clientFlags) client() (*pmhttp.Client, error) {
	cl, err := pmhttp.NewClient(c.server, nil)
	if err != nil {
		return nil, usageError(err.Error())
	}
	return cl, nil
}

func runStart(ctx context.Context, e *env, args []string) error {
	var cf clientFlags
	fs := newFlagSet(e, "start", "")
	cf.register(e, fs)
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("start takes no arguments")
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	now, err := cl.Start(ctx)
	if err != nil {
		return err
	}
	if now {
		fmt.Fprintln(e.stdout, "started")
	} else {
		fmt.Fprintln(e.stdout, "already started")
	}
	return nil
}

func runGet(ctx context.Context, e *env, args []string) error {
	var cf clientFlags
	fs := newFlagSet(e, "get", "EMAIL")
	cf.register(e, fs)
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("get takes exactly one EMAIL")
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	rec, err := cl.FindProfile(ctx, rest[0])
	if err != nil {
		return err
	}
	return printJSON(e.stdout, rec.Profile)
}

// fieldFlag collects repeated --field NAME=VALUE flags.
type fieldFlag map[string]string

func (f fieldFlag) String() string { return "" }
func (f fieldFlag) Set(s string) error {
	name, value, ok := cutEquals(s)
	if !ok {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	if _, dup := f[name]; dup {
		return fmt.Errorf("field %q is given twice", name)
	}
	f[name] = value
	return nil
}

func cutEquals(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			return s[:i], s[i+1:], i > 0
		}
	}
	return "", "", false
}

func runPut(ctx context.Context, e *env, args []string) error {
	var cf clientFlags
	fields := fieldFlag{}
	fs := newFlagSet(e, "put", "[EMAIL]   (or a JSON profile on stdin when no field is given)")
	cf.register(e, fs)
	documented := map[string]*string{}
	for _, f := range []struct{ flag, field, help string }{
		{"name", partmap.FieldFullName, "full name"},
		{"company", partmap.FieldCompanyName, "company name"},
		{"tier", partmap.FieldCustomerTier, "customer tier"},
	} {
		documented[f.field] = fs.String(f.flag, "", f.help+" (the "+f.field+" field)")
	}
	fs.Var(fields, "field", "another field as `NAME=VALUE`; repeat for more")
	ifMatch := fs.String("if-match", "", "only replace the profile if its ETag is this")
	create := fs.Bool("create", false, "only create: fail if the profile exists (If-None-Match: *)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var profile partmap.Profile
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fromFlags := len(rest) > 0 || len(fields) > 0 || set["name"] || set["company"] || set["tier"]
	switch {
	case len(rest) > 1:
		return usagef("put takes at most one EMAIL")
	case fromFlags && len(rest) == 0:
		return usagef("put needs an EMAIL when fields are given as flags")
	case fromFlags:
		profile = partmap.Profile{partmap.FieldEmail: rest[0]}
		for name, v := range documented {
			if set[flagOf(name)] {
				profile[name] = *v
			}
		}
		for name, v := range fields {
			if _, ok := profile[name]; ok {
				return usagef("field %q is given twice", name)
			}
			profile[name] = v
		}
	default:
		data, err := io.ReadAll(e.stdin)
		if err != nil {
			return err
		}
		if profile, err = partmap.ParseProfileJSON(data); err != nil {
			return err
		}
	}
	cond := partmap.Condition{IfNoneMatch: *create}
	if *ifMatch != "" {
		if cond.IfMatch, err = partmap.ParseETag(*ifMatch); err != nil {
			return err
		}
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	rec, created, err := cl.UpsertProfile(ctx, profile, cond)
	if err != nil {
		return err
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	fmt.Fprintf(e.stderr, "%s %s (ETag %s)\n", verb, rec.Profile.Email(), rec.Version.ETag())
	return printJSON(e.stdout, rec.Profile)
}

func flagOf(field string) string {
	switch field {
	case partmap.FieldFullName:
		return "name"
	case partmap.FieldCompanyName:
		return "company"
	}
	return "tier"
}

func runPartition(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "partition", "EMAIL...")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return usagef("partition needs at least one EMAIL")
	}
	var failed error
	for _, email := range rest {
		canonical, p, err := partmap.Locate(email, partmap.DefaultPartitions)
		if err != nil {
			fmt.Fprintf(e.stderr, "partmap partition: %q: %s\n", email, partmap.ErrorMessage(err))
			failed = errAlreadyReported
			continue
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", canonical, partmap.Hash(canonical), p)
	}
	return failed
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
