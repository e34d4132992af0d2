package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// With several emails, get prints one JSON array in the order given, null
// for a missing profile, through the batch route; with one, a profile as
// before (TestClientCommands).
func TestGetMany(t *testing.T) {
	srv := startedServer(t)
	must := func(args ...string) string {
		t.Helper()
		out, _ := mustRun(t, srv)("", args...)
		return out
	}
	must("put", "ada@example.com", "--name", "Ada", "--field", "visits=3")
	must("put", "bob@example.com", "--name", "Bob")

	// The output is want indented by two spaces, as written here compact.
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"get of three", []string{"get", "ada@example.com", "nobody@example.com", " BOB@example.com"},
			`[{"emailAddress":"ada@example.com","fullName":"Ada","visits":"3"},null,{"emailAddress":"bob@example.com","fullName":"Bob"}]`},
		{"get --fields of three", []string{"get", "bob@example.com", "nobody@example.com", "ada@example.com", "--fields", "visits,fullName"},
			`[{"visits":null,"fullName":"Bob"},null,{"visits":"3","fullName":"Ada"}]`},
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(tt.want), "", "  "); err != nil {
			t.Fatal(err)
		}
		want.WriteString("\n")
		if out := must(tt.args...); out != want.String() {
			t.Fatalf("%s: %q, want %q", tt.name, out, want.String())
		}
	}

	// More than one request's worth goes in several requests, in order.
	args := []string{"get"}
	for i := range 1500 {
		args = append(args, fmt.Sprintf("u%d@example.com", i))
	}
	args = append(args, "ada@example.com")
	var got []map[string]string
	if err := json.Unmarshal([]byte(must(args...)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1501 || got[0] != nil || got[1499] != nil || got[1500]["fullName"] != "Ada" {
		t.Fatalf("get of 1501: %d answers, last %v", len(got), got[len(got)-1])
	}

	code, _, errOut := run(t, "", "get", "ada@example.com", "bob@example.com", "--fields", "a,a", srv)
	if code != 1 || !strings.Contains(errOut, `fields[1] "a" is named twice`) {
		t.Fatalf("get --fields a,a of two: %d %q", code, errOut)
	}
}
