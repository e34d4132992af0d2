package http

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI is the OpenAPI 3.1 description of every route, every status each
// can answer and every problem type. It is written by hand; openapi_test.go
// holds it to the routes on the mux, to partmap.Codes and to real replies.
//
//go:embed openapi.json
var openAPI []byte

// routeOpenAPI serves the document at GET /openapi.json. It is open, like the
// health checks: it describes the API, not the data.
//
// It is sent as application/json rather than the registered
// application/vnd.oai.openapi+json;version=3.1: every tool that reads OpenAPI
// (Swagger UI, Redoc, generators, the web console, curl | jq) takes plain
// JSON, browsers show it inline, and the version parameter would only repeat
// the document's own "openapi" member.
func (s *Server) routeOpenAPI() {
	s.mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(openAPI)))
		w.Write(openAPI)
	})
}
