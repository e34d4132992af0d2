package resp_test

import (
	"os/exec"
	"strings"
	"testing"
)

// resp reaches profiles through partmap's Store alone: it imports no
// backend, no engine and not the HTTP door, not even through another
// package.
func TestImportsNoBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, forbidden := range []string{
		"github.com/partmap/partmap/http", "github.com/partmap/partmap/pebble", "github.com/partmap/partmap/redis",
		"github.com/partmap/partmap/internal", "github.com/cockroachdb/pebble", "github.com/redis/go-redis",
	} {
		for _, d := range deps {
			if d == forbidden || strings.HasPrefix(d, forbidden+"/") {
				t.Errorf("resp depends on %s", d)
			}
		}
	}
	if len(deps) < 3 || deps[len(deps)-1] != "github.com/partmap/partmap/resp" {
		t.Fatalf("go list -deps listed %q", deps)
	}
}
