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

func runPut(ctx context.Context, e *env, args []string) error {
	cf := newWriteCommand(e, "put", "EMAIL [flags]   (or a JSON profile on stdin, with no EMAIL)")
	fields := fieldFlag{}
	documented := map[string]*string{
		partmap.FieldFullName:     cf.fs.String("name", "", "full name (the fullName field)"),
		partmap.FieldCompanyName:  cf.fs.String("company", "", "company name (the companyName field)"),
		partmap.FieldCustomerTier: cf.fs.String("tier", "", "customer tier (the customerTier field)"),
	}
	flagOf := map[string]string{"name": partmap.FieldFullName, "company": partmap.FieldCompanyName, "tier": partmap.FieldCustomerTier}
	cf.fs.Var(fields, "field", "another field as `NAME=VALUE`; repeat for more")
	create := cf.fs.Bool("create", false, "only create: fail if the profile exists (If-None-Match: *)")
	rest, cl, err := cf.parse(args, 0, 1)
	if err != nil {
		return err
	}
	fieldFlags := len(fields) > 0
	cf.fs.Visit(func(f *flag.Flag) { _, ok := flagOf[f.Name]; fieldFlags = fieldFlags || ok })
	if *create && *cf.ifMatch != "" {
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
	cf.cond.IfNoneMatch = *create
	rec, created, err := partmap.UpsertProfile(ctx, cl, profile, cf.cond)
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
