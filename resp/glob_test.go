package resp

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "a@x.io", true}, {"a*", "a@x.io", true}, {"*@x.io", "a@x.io", true}, {"*@y.io", "a@x.io", false},
		{"?@x.io", "a@x.io", true}, {"??@x.io", "a@x.io", false}, {"[ab]@x.io", "b@x.io", true}, {"[^ab]@x.io", "b@x.io", false},
		{"[a-c]*", "b@x", true}, {"[c-a]*", "b@x", true}, {"[x-z]*", "b@x", false}, {`\*@x`, "*@x", true}, {`\*@x`, "a@x", false},
		{"a*b*c", "aXXbYYc", true}, {"a*b*c", "aXXbYY", false}, {"*a*", "bab", true}, {"", "", true}, {"", "a", false},
		{"[\\]]", "]", true}, {"u*@example.com", "user1@example.com", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
	// Many stars cost polynomial time, not exponential.
	if globMatch(strings.Repeat("*a", 30)+"*b", strings.Repeat("a", 5000)) {
		t.Fatal("matched")
	}
}
