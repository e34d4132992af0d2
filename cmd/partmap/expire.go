package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/partmap/partmap"
)

// deadlineFlags are a deadline as the expiry commands take it: --in a
// duration from the server's clock, or --at a time.
type deadlineFlags struct {
	in, at string
}

func (f *deadlineFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.in, "in", "", "a `DURATION` from now on the server's clock (90s, 1500ms, 2h); 0 expires at once")
	fs.StringVar(&f.at, "at", "", "a `TIME`: RFC 3339 (2027-01-31T12:00:00Z) or Unix seconds; a past time expires at once")
}

// when reads the deadline; nil when neither flag was given.
func (f *deadlineFlags) when() (*partmap.When, error) {
	switch {
	case f.in != "" && f.at != "":
		return nil, usagef("give --in or --at, not both")
	case f.in != "":
		d, err := time.ParseDuration(f.in)
		if err != nil || d < 0 || d%time.Millisecond != 0 {
			return nil, usagef("--in takes a duration of whole milliseconds, not negative (90s, 1500ms), not %q", f.in)
		}
		w, err := partmap.WhenFromParam("--in", d.Milliseconds(), false, true)
		if err != nil {
			return nil, usagef("%s", partmap.ErrorMessage(err))
		}
		return &w, nil
	case f.at != "":
		var ms int64
		if secs, err := strconv.ParseInt(f.at, 10, 64); err == nil {
			if secs < 0 || secs > partmap.MaxDeadline/1000 {
				return nil, usagef("--at %d is outside 0 to %d Unix seconds", secs, int64(partmap.MaxDeadline/1000))
			}
			ms = secs * 1000
		} else if t, err := time.Parse(time.RFC3339Nano, f.at); err == nil {
			ms = t.UnixMilli()
		} else {
			return nil, usagef("--at takes RFC 3339 (2027-01-31T12:00:00Z) or Unix seconds, not %q", f.at)
		}
		w, err := partmap.WhenFromParam("--at", ms, false, false)
		if err != nil {
			return nil, usagef("%s", partmap.ErrorMessage(err))
		}
		return &w, nil
	}
	return nil, nil
}

// expiryCodes names Redis's per-field codes for people.
func expiryCode(op partmap.OpKind, code int) string {
	switch {
	case code == partmap.ExpiryNoField:
		return "no such field"
	case code == partmap.ExpiryNone:
		return "no deadline"
	case code == partmap.ExpiryNotMet:
		return "condition not met"
	case code == partmap.ExpirySet && op == partmap.OpPersist:
		return "deadline removed"
	case code == partmap.ExpirySet:
		return "deadline set"
	case code == partmap.ExpiryDeleted:
		return "deleted"
	}
	return "?"
}

// printCodes prints one line per field (or one for the profile): the
// field, Redis's code, and what it means.
func printCodes(e *env, op partmap.OpKind, fields []string, codes []int) {
	for i, code := range codes {
		name := "(profile)"
		if len(fields) > 0 {
			name = fields[i]
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", name, code, expiryCode(op, code))
	}
}

func runExpire(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "expire", "EMAIL [FIELD...]")
	var dl deadlineFlags
	dl.register(cf.fs)
	condition := cf.fs.String("condition", "", "set a deadline only where `NX` (there is none), XX (there is one), GT (it is later) or LT (it is sooner)")
	rest, cl, err := cf.parse(args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	when, err := dl.when()
	if err != nil {
		return err
	}
	if when == nil {
		return usagef("give the deadline with --in or --at")
	}
	cond, err := partmap.ParseExpireCondition(*condition)
	if err != nil {
		return usagef("--condition: %s", partmap.ErrorMessage(err))
	}
	res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpExpire, Email: rest[0], Fields: rest[1:], When: *when, ExpireCond: cond})
	if err != nil {
		return err
	}
	printCodes(e, partmap.OpExpire, rest[1:], res.Codes)
	return nil
}

func runPersist(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "persist", "EMAIL [FIELD...]")
	rest, cl, err := cf.parse(args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpPersist, Email: rest[0], Fields: rest[1:]})
	if err != nil {
		return err
	}
	printCodes(e, partmap.OpPersist, rest[1:], res.Codes)
	return nil
}

func runTTL(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "ttl", "EMAIL [FIELD...]")
	ms := cf.fs.Bool("ms", false, "times to live in milliseconds (as PTTL), not seconds (as TTL)")
	rest, cl, err := cf.parse(args, 1, math.MaxInt)
	if err != nil {
		return err
	}
	ttls, err := cl.Deadlines(ctx, rest[0], rest[1:])
	if err != nil {
		return err
	}
	line := func(name string, deadline int64) {
		ttl := ttls.TTL(deadline)
		if ttl >= 0 && !*ms {
			ttl = (ttl + 500) / 1000 // rounded, as Redis's TTL rounds
		}
		at := expiryCode(partmap.OpKind(""), int(deadline))
		if deadline >= 0 {
			at = time.UnixMilli(deadline).UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", name, ttl, at)
	}
	line("(profile)", ttls.Profile)
	for i, f := range rest[1:] {
		line(f, ttls.Deadlines[i])
	}
	return nil
}

func runSetNX(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "setnx", "EMAIL FIELD VALUE")
	rest, cl, err := cf.parse(args, 3, 3)
	if err != nil {
		return err
	}
	res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpSetIfAbsent, Email: rest[0], Field: rest[1], Value: rest[2]})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, boolInt(res.Set))
	if !res.Set {
		fmt.Fprintf(e.stderr, "%s already has %s: left as it was\n", res.Email, rest[1])
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// printValues prints the fields read as one JSON object, in the order
// asked, null for a missing one, as get --fields does.
func printValues(e *env, res partmap.OperationResult, fields []string) error {
	return printJSON(e.stdout, partmap.Projection{Fields: fields, Values: res.Values})
}

func runGetDel(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "getdel", "EMAIL FIELD...")
	rest, cl, err := cf.parse(args, 2, math.MaxInt)
	if err != nil {
		return err
	}
	res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpGetDelete, Email: rest[0], Fields: rest[1:]})
	if err != nil {
		return err
	}
	return printValues(e, res, rest[1:])
}

func runGetEx(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "getex", "EMAIL FIELD...")
	var dl deadlineFlags
	dl.register(cf.fs)
	persist := cf.fs.Bool("persist", false, "remove the fields' deadlines")
	rest, cl, err := cf.parse(args, 2, math.MaxInt)
	if err != nil {
		return err
	}
	when, err := dl.when()
	if err != nil {
		return err
	}
	if when != nil && *persist {
		return usagef("give a deadline or --persist, not both")
	}
	res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpGetExpire, Email: rest[0], Fields: rest[1:],
		Expiry: partmap.FieldExpiry{When: when, Persist: *persist}})
	if err != nil {
		return err
	}
	return printValues(e, res, rest[1:])
}

func runSetEx(ctx context.Context, e *env, args []string) error {
	cf := newClientCommand(e, "setex", "EMAIL FIELD=VALUE...")
	var dl deadlineFlags
	dl.register(cf.fs)
	keep := cf.fs.Bool("keep-ttl", false, "keep the deadlines the fields have (without it, writing a field drops its deadline)")
	condition := cf.fs.String("condition", "", "set the fields only if `FNX` (none of them exists) or FXX (all of them exist)")
	rest, cl, err := cf.parse(args, 2, math.MaxInt)
	if err != nil {
		return err
	}
	when, err := dl.when()
	if err != nil {
		return err
	}
	if when != nil && *keep {
		return usagef("give a deadline or --keep-ttl, not both")
	}
	fieldSet := partmap.FieldSetCondition(strings.ToUpper(*condition))
	if fieldSet != partmap.SetFieldsAlways && fieldSet != partmap.SetIfNoFieldExist && fieldSet != partmap.SetIfAllExist {
		return usagef("--condition is FNX or FXX, not %q", *condition)
	}
	set := partmap.Patch{}
	for _, arg := range rest[1:] {
		name, value, ok := strings.Cut(arg, "=")
		if !ok || name == "" {
			return usagef("%q is not FIELD=VALUE", arg)
		}
		set[name] = &value
	}
	res, err := cl.Apply(ctx, partmap.Operation{Op: partmap.OpSetFields, Email: rest[0], Set: set, FieldSet: fieldSet,
		Expiry: partmap.FieldExpiry{When: when, KeepTTL: *keep}})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, boolInt(res.Set))
	if !res.Set {
		fmt.Fprintf(e.stderr, "condition %s not met: nothing set\n", fieldSet)
	}
	return nil
}
