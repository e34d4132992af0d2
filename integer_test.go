package partmap_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/partmap/partmap"
)

// An error message quotes a long stored value shortened, but never cuts a
// character in two.
func TestAddIntegerQuotesValidText(t *testing.T) {
	stored := "1234567890123456789012345678901234567" + strings.Repeat("€", 10)
	_, err := partmap.AddInteger("v", stored, true, 1)
	if partmap.ErrorCode(err) != partmap.ENOTINTEGER || !utf8.ValidString(partmap.ErrorMessage(err)) || strings.Contains(err.Error(), `\x`) {
		t.Fatalf("got %v", err)
	}
}
