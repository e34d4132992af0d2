package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServeRefusesOpenAddressWithoutAuth(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		code, _, errOut := run(t, "", "serve", "--addr", addr, "--data", data)
		if code != 2 || !strings.Contains(errOut, "without --auth-file") {
			t.Fatalf("serve --addr %s: exit %d %q", addr, code, errOut)
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatal("a refused serve created its data directory")
	}
	// --insecure overrides, and loopback names need nothing.
	serveInProcess(t, "--addr", "0.0.0.0:0", "--insecure")
	serveInProcess(t, "--addr", "localhost:0")
}

func TestTokensThroughTheCLI(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "auth")
	code, adminTok, errOut := run(t, "", "token", "--name", "ops", "--scope", "admin", "--auth-file", auth)
	if code != 0 || !strings.HasPrefix(adminTok, "pm_") || !strings.Contains(errOut, "added") {
		t.Fatalf("token: %d %q %q", code, adminTok, errOut)
	}
	_, readTok, _ := run(t, "", "token", "--name", "viewer", "--scope", "read", "--auth-file", auth)
	adminTok, readTok = strings.TrimSpace(adminTok), strings.TrimSpace(readTok)
	if b, _ := os.ReadFile(auth); strings.Contains(string(b), adminTok) {
		t.Fatal("the auth file holds a token in clear")
	}
	if code, _, errOut := run(t, "", "token", "--name", "x", "--scope", "root"); code != 2 || !strings.Contains(errOut, "scope") {
		t.Fatalf("bad scope: %d %q", code, errOut)
	}

	url, _ := serveInProcess(t, "--auth-file", auth)
	srv := "--server=" + url
	if code, _, errOut := run(t, "", "start", srv); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("start without a token: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "start", srv, "--token", readTok); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("start with a read token: %d %q", code, errOut)
	}
	if code, out, errOut := run(t, "", "start", srv, "--token", adminTok); code != 0 || out != "started\n" {
		t.Fatalf("start with an admin token: %d %q %q", code, out, errOut)
	}
	t.Setenv("PARTMAP_TOKEN", adminTok)
	if code, _, errOut := run(t, "", "put", "a@example.com", "--name", "A", srv); code != 0 {
		t.Fatalf("put with PARTMAP_TOKEN: %d %q", code, errOut)
	}
	if code, _, errOut := run(t, "", "delete", "a@example.com", srv, "--token", readTok); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Fatalf("--token overrides PARTMAP_TOKEN: %d %q", code, errOut)
	}
}

// writeCert makes a self-signed certificate for 127.0.0.1.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "partmap test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile
}

func TestTLS(t *testing.T) {
	cert, key := writeCert(t)
	url, _ := serveInProcess(t, "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("serving %s, want https", url)
	}
	if code, _, errOut := run(t, "", "start", "--server", url); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("an untrusted certificate was accepted: %d %q", code, errOut)
	}
	if code, out, errOut := run(t, "", "start", "--server", url, "--ca-cert", cert); code != 0 || out != "started\n" {
		t.Fatalf("start over TLS: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := run(t, "", "serve", "--tls-cert", cert); code != 2 || !strings.Contains(errOut, "go together") {
		t.Fatalf("--tls-cert alone: %d %q", code, errOut)
	}
}
