package http

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/partmap/partmap"
)

// The console is a static page that talks to the public API from the
// browser, like any other client; the server only hands out its files. They
// are embedded so that the binary is the whole deployment and the page
// works with no network but the server's.
//
//go:embed console
var consoleFiles embed.FS

// consoleCSP lets the page load its own script, style and icon and talk to
// its own origin, and nothing else: no inline script or style, no other
// origin, no framing, no form posting anywhere.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var consoleTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

type consoleAsset struct {
	body        []byte
	contentType string
	etag        string
}

// consoleAssets reads and tags the embedded files once per process.
var consoleAssets = sync.OnceValue(func() map[string]consoleAsset {
	assets := map[string]consoleAsset{}
	entries, err := fs.ReadDir(consoleFiles, "console")
	if err != nil {
		panic(err) // the directory is embedded: it cannot be missing
	}
	for _, e := range entries {
		body, err := consoleFiles.ReadFile("console/" + e.Name())
		if err != nil {
			panic(err)
		}
		ct, ok := consoleTypes[path.Ext(e.Name())]
		if !ok {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		assets[e.Name()] = consoleAsset{body, ct, `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return assets
})

// routeConsole serves the console's page at / and its files under
// /console/. They are open even when tokens are required: they hold no
// data, and every API call the page makes carries the user's token.
func (s *Server) routeConsole() {
	assets := consoleAssets()
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serveConsoleAsset(w, r, assets["index.html"])
	})
	s.mux.HandleFunc("GET /console/{name}", func(w http.ResponseWriter, r *http.Request) {
		// The page only works at /, where its relative URLs resolve.
		a, ok := assets[r.PathValue("name")]
		if !ok || r.PathValue("name") == "index.html" {
			s.writeError(w, r, partmap.Errorf(partmap.ENOTFOUND, "the console has no file %s", r.URL.Path))
			return
		}
		serveConsoleAsset(w, r, a)
	})
	s.mux.HandleFunc("/{$}", s.methodNotAllowed("GET, HEAD"))
	s.mux.HandleFunc("/console/{name}", s.methodNotAllowed("GET, HEAD"))
}

// serveConsoleAsset lets browsers cache a file but revalidate it every
// time (no-cache), so a new binary's console is never mixed with an old
// one's; the ETag makes the revalidation a 304.
func serveConsoleAsset(w http.ResponseWriter, r *http.Request, a consoleAsset) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
