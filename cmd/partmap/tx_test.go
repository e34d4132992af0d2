package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenameAndTxCommands(t *testing.T) {
	srv := startedServer(t)
	must := mustRun(t, srv)
	must("", "put", "ada@example.com", "--name", "Ada")
	out, errOut := must("", "rename", "Ada@Example.com", "ADA.L@example.com")
	if !strings.Contains(out, `"emailAddress": "ada.l@example.com"`) || !strings.Contains(errOut, "renamed Ada@Example.com to ada.l@example.com (ETag \"") {
		t.Fatalf("rename: %q %q", out, errOut)
	}

	file := filepath.Join(t.TempDir(), "tx.jsonl")
	ops := `{"op":"put","profile":{"emailAddress":"bob@example.com","balance":"10"}}

{"op":"increment","emailAddress":"bob@example.com","field":"balance","by":-3}
{"op":"increment","emailAddress":"ada.l@example.com","field":"balance","by":3}
`
	if err := os.WriteFile(file, []byte(ops), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut = must("", "tx", file)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"status":201`) || !strings.Contains(lines[1], `"value":"7"`) ||
		!strings.Contains(lines[2], `"value":"3"`) || errOut != "applied 3 operations atomically\n" {
		t.Fatalf("tx: %q %q", out, errOut)
	}
	out, _ = must(`{"op":"delete","emailAddress":"bob@example.com"}`, "tx", "-")
	if !strings.Contains(out, `"status":204`) {
		t.Fatalf("tx from stdin: %q", out)
	}

	runRefusals(t, srv, []refusal{
		{"ErrRenameMissing", "", []string{"rename", "nobody@example.com", "x@example.com"}, 1, "not-found"},
		{"ErrRenameSame", "", []string{"rename", "ada.l@example.com", "ADA.L@example.com"}, 1, "invalid"},
		{"ErrRenameArgs", "", []string{"rename", "ada.l@example.com"}, 2, "usage"},
		{"ErrTxEmpty", "\n\n", []string{"tx", "-"}, 1, "stdin holds no operation"},
		{"ErrTxBadLine", "{\"op\":\"delete\",\"emailAddress\":\"a@example.com\"}\n{\"op\":\"upsert\"}\n", []string{"tx", "-"}, 1, "stdin line 2: unknown op \"upsert\""},
		{"ErrTxNotJSON", "nope\n", []string{"tx", "-"}, 1, "stdin line 1: not an operation"},
		// The failed operation is named by its line in the file.
		{"ErrTxFailedLine", "{\"op\":\"put\",\"profile\":{\"emailAddress\":\"c@example.com\"}}\n\n{\"op\":\"delete\",\"emailAddress\":\"nobody@example.com\"}\n", []string{"tx", "-"}, 1, "stdin line 3: operation 2 (delete nobody@example.com): no profile"},
		{"ErrTxMissingFile", "", []string{"tx", filepath.Join(t.TempDir(), "none.jsonl")}, 1, "no such file"},
	})
	// Nothing of the failed transactions was written.
	if code, _, _ := run(t, "", "get", "c@example.com", srv); code == 0 {
		t.Fatal("a failed transaction wrote its first operation")
	}
}
