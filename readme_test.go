package partmap_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/partmap/partmap"
)

// The README's error and limit tables are the user's reference; they must
// name every code with its status, and every default limit.
func TestREADMEDocumentsCodesAndLimits(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for code, info := range partmap.Codes {
		row := "| `" + string(code) + "` | " + strconv.Itoa(info.Status) + " |"
		if !strings.Contains(readme, row) {
			t.Errorf("README has no error-table row %q", row)
		}
	}
	l := partmap.DefaultLimits
	for _, n := range []int{l.MaxBodyBytes, l.MaxFieldValueBytes, l.MaxProfileBytes} {
		if s := commas(n); !strings.Contains(readme, s+" bytes") {
			t.Errorf("README does not state the limit %s bytes", s)
		}
	}
	for _, s := range []string{
		"| fields per profile (emailAddress included) | " + commas(l.MaxFields) + " |",
		"| field name | " + commas(l.MaxFieldNameBytes) + " bytes |",
		"| canonical email | " + strconv.Itoa(partmap.MaxEmailBytes) + " bytes |",
	} {
		if !strings.Contains(readme, s) {
			t.Errorf("README has no limit row %q", s)
		}
	}
}

func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
