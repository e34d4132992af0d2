package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/partmap/partmap/internal/redistest"
)

// partmap backup copies a serving store into a new directory, partmap
// restore brings it back as a data directory that serves the same
// profiles, and neither writes into a directory that is not empty.
func TestBackupAndRestore(t *testing.T) {
	url, _ := serveInProcess(t)
	srv := "--server=" + url
	must := mustRun(t, srv)
	must("", "start")
	must("", "put", "ada@example.com", "--name", "Ada", "--field", "visits=3")
	must("", "put", "bob@example.com", "--name", "Bob")
	backup := filepath.Join(t.TempDir(), "backup")
	if _, errOut := must("", "backup", backup); !strings.Contains(errOut, "partmap restore "+backup+" --data NEW") {
		t.Fatalf("backup: %q", errOut)
	}
	if code, _, errOut := run(t, "", "backup", backup, srv); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Fatalf("backup into a full directory: %d %q", code, errOut)
	}
	data := filepath.Join(t.TempDir(), "restored")
	code, _, errOut := run(t, "", "restore", backup, "--data", data)
	if code != 0 || !strings.Contains(errOut, "(2 profiles)") {
		t.Fatalf("restore: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "restore", backup, "--data", data); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Fatalf("restore into a full directory: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "restore", backup); code != 2 || !strings.Contains(errOut, "--data") {
		t.Fatalf("restore without --data: %d %q", code, errOut)
	}
	restored, _ := serveInProcess(t, "--data", data)
	if out, _ := mustRun(t, "--server="+restored)("", "get", "ada@example.com", "--fields", "fullName,visits"); out != "{\n  \"fullName\": \"Ada\",\n  \"visits\": \"3\"\n}\n" {
		t.Fatalf("the restored store: %q", out)
	}
}

// On Redis, backup says what to use instead.
func TestBackupOfRedisPointsToItsPersistence(t *testing.T) {
	rs, err := redistest.StartServer(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Stop)
	url, _ := serveInProcess(t, "--store", "redis://"+rs.Addr)
	dir := filepath.Join(t.TempDir(), "backup")
	code, _, errOut := run(t, "", "backup", dir, "--server="+url)
	if code != 1 || !strings.Contains(errOut, "RDB") || !strings.Contains(errOut, "partmap export") {
		t.Fatalf("backup of a Redis store: %d %q", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused backup left %d files", len(entries))
	}
}
