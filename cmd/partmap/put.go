package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/partmap/partmap"
)

// fieldFlag collects repeated --field NAME=VALUE flags.
type fieldFlag map[string]string

func (f fieldFlag) String() string { return "" }
func (f fieldFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	if _, dup := f[name]; dup {
		return fmt.Errorf("field %q is given twice", name)
	}
	f[name] = value
	return nil
}

// conditionFlags are the --if-match flag of every write, and --create.
type conditionFlags struct {
	ifMatch string
}

func (c *conditionFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.ifMatch, "if-match", "", "write only if the profile's ETag is this (or * : only if it exists)")
}

func (c *conditionFlags) condition() (partmap.Condition, error) {
	switch c.ifMatch {
	case "":
		return partmap.Condition{}, nil
	case "*":
		return partmap.Condition{IfExists: true}, nil
	}
	tag := c.ifMatch
	if !strings.HasPrefix(tag, `"`) {
		tag = `"` + tag + `"` // a shell eats the quotes of "0123456789abcdef"
	}
	v, err := partmap.ParseETag(tag)
	if err != nil {
		return partmap.Condition{}, usagef("--if-match %q is not an ETag partmap issued (16 hex digits, quotes optional) or *", c.ifMatch)
	}
	return partmap.IfMatch(v), nil
}

func runPut(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "put", "EMAIL [flags]   (or a JSON profile on stdin, with no EMAIL)")
	fields := fieldFlag{}
	documented := map[string]*string{
		partmap.FieldFullName:     cf.fs.String("name", "", "full name (the fullName field)"),
		partmap.FieldCompanyName:  cf.fs.String("company", "", "company name (the companyName field)"),
		partmap.FieldCustomerTier: cf.fs.String("tier", "", "customer tier (the customerTier field)"),
	}
	flagOf := map[string]string{"name": partmap.FieldFullName, "company": partmap.FieldCompanyName, "tier": partmap.FieldCustomerTier}
	cf.fs.Var(fields, "field", "another field as `NAME=VALUE`; repeat for more")
	var cond conditionFlags
	cond.register(cf.fs)
	create := cf.fs.Bool("create", false, "only create: fail if the profile exists (If-None-Match: *)")
	rest, cl, err := cf.parse(args, 0, 1)
	if err != nil {
		return err
	}
	fieldFlags := len(fields) > 0
	cf.fs.Visit(func(f *flag.Flag) { _, ok := flagOf[f.Name]; fieldFlags = fieldFlags || ok })
	if *create && cond.ifMatch != "" {
		return usagef("--create and --if-match contradict each other")
	}
	var profile partmap.Profile
	switch {
	case len(rest) == 1 && !fieldFlags:
		return usagef("put EMAIL needs at least one field flag (--name, --company, --tier, --field); " +
			"to send a whole JSON profile, pipe it to `partmap put` with no EMAIL")
	case len(rest) == 0 && fieldFlags:
		return usagef("put needs an EMAIL when fields are given as flags")
	case len(rest) == 1:
		profile = partmap.Profile{partmap.FieldEmail: rest[0]}
		cf.fs.Visit(func(f *flag.Flag) {
			if field, ok := flagOf[f.Name]; ok {
				profile[field] = *documented[field]
			}
		})
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
	c, err := cond.condition()
	if err != nil {
		return err
	}
	c.IfNoneMatch = *create
	rec, created, err := cl.UpsertProfile(ctx, profile, c)
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
