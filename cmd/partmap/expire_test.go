package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// The expiry commands, against a real server: Redis's codes, the deadlines
// they set, and bad input refused before anything is sent.
func TestExpiryCommands(t *testing.T) {
	url, _ := serveInProcess(t, "--sweep-interval", "20ms")
	srv := "--server=" + url
	must := mustRun(t, srv)
	must("", "start")
	must("", "put", "ada@example.com", "--name", "Ada", "--field", "visits=0", "--field", "score=10.5")

	out, _ := must("", "expire", "ada@example.com", "visits", "nickname", "--in", "1h")
	if out != "visits\t1\tdeadline set\nnickname\t-2\tno such field\n" {
		t.Fatalf("expire: %q", out)
	}
	if out, _ := must("", "expire", "ada@example.com", "visits", "--in", "2h", "--condition", "nx"); out != "visits\t0\tcondition not met\n" {
		t.Fatalf("expire NX on a field with a deadline: %q", out)
	}
	out, _ = must("", "ttl", "ada@example.com", "visits", "fullName", "nope")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "(profile)\t-1\tno deadline" || !strings.HasPrefix(lines[1], "visits\t3600\t") ||
		lines[2] != "fullName\t-1\tno deadline" || lines[3] != "nope\t-2\tno such field" {
		t.Fatalf("ttl: %q", out)
	}
	if at := strings.Split(lines[1], "\t")[2]; !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(at) {
		t.Errorf("ttl's deadline %q: want RFC 3339 to the millisecond, always three digits", at)
	}
	if out, _ := must("", "persist", "ada@example.com", "visits", "fullName"); out != "visits\t1\tdeadline removed\nfullName\t-1\tno deadline\n" {
		t.Fatalf("persist: %q", out)
	}
	if out, _ := must("", "incr", "ada@example.com", "score", "--by", "0.1", "--float"); out != "10.6\n" {
		t.Fatalf("incr --float: %q", out)
	}
	if out, _ := must("", "setnx", "bob@example.com", "fullName", "Bob"); out != "1\n" {
		t.Fatalf("setnx on a missing profile: %q", out)
	}
	if out, errOut := must("", "setnx", "bob@example.com", "fullName", "Robert"); out != "0\n" || !strings.Contains(errOut, "already has fullName") {
		t.Fatalf("setnx on a present field: %q %q", out, errOut)
	}
	if out, _ := must("", "setex", "bob@example.com", "code=1234", "--in", "150ms", "--condition", "fnx"); out != "1\n" {
		t.Fatalf("setex: %q", out)
	}
	if out, _ := must("", "getex", "bob@example.com", "code", "fullName", "--in", "1h"); out != "{\n  \"code\": \"1234\",\n  \"fullName\": \"Bob\"\n}\n" {
		t.Fatalf("getex: %q", out)
	}
	if out, _ := must("", "getdel", "bob@example.com", "code", "none"); out != "{\n  \"code\": \"1234\",\n  \"none\": null\n}\n" {
		t.Fatalf("getdel: %q", out)
	}
	if out, _ := must("", "expire", "bob@example.com", "--in", "100ms"); out != "(profile)\t1\tdeadline set\n" {
		t.Fatalf("expire the profile: %q", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, errOut := run(t, "", "get", "bob@example.com", srv)
		if code == 1 && strings.Contains(errOut, "not-found") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob@example.com did not expire: %d %q", code, errOut)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, _ := must("", "partitions"); strings.Contains(out, "partition-") && strings.Count(out, "\n") != 2 {
		t.Fatalf("partitions after the expiry: %q", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"expire", "ada@example.com", "visits"}, "--in or --at"},
		{[]string{"expire", "ada@example.com", "--in", "-5s"}, "--in takes a duration"},
		{[]string{"expire", "ada@example.com", "--in", "1s", "--at", "0"}, "not both"},
		{[]string{"expire", "ada@example.com", "--at", "tomorrow"}, "--at takes RFC 3339"},
		{[]string{"expire", "ada@example.com", "--at", "9223372036854776"}, "--at 9223372036854776 is outside"},
		{[]string{"expire", "ada@example.com", "--in", "1s", "--condition", "ZZ"}, "--condition"},
		{[]string{"incr", "ada@example.com", "visits", "--by", "1.5"}, "add --float"},
		{[]string{"incr", "ada@example.com", "visits", "--by", "nan", "--float"}, "--by: by is \"nan\", which is not a float"},
		{[]string{"setex", "ada@example.com", "novalue"}, "is not FIELD=VALUE"},
		{[]string{"setex", "ada@example.com", "a=1", "--condition", "NX"}, "FNX or FXX"},
		{[]string{"getex", "ada@example.com", "a", "--in", "1s", "--persist"}, "give --in or --at, or --persist, not both"},
		{[]string{"setex", "ada@example.com", "a=1", "--in", "1s", "--keep-ttl"}, "give --in or --at, or --keep-ttl, not both"},
	} {
		code, _, errOut := run(t, "", append(c.args, srv)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("partmap %q: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if code, _, errOut := run(t, "", "expire", "ada@example.com", "emailAddress", "--in", "1s", srv); code != 1 || !strings.Contains(errOut, "key-field") {
		t.Fatalf("expire emailAddress: %d %q", code, errOut)
	}
}
