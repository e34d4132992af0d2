package http

import "net/http"

// Mux exposes the router to the tests, which read the patterns registered on
// it to check that the OpenAPI document describes every route.
func (s *Server) Mux() *http.ServeMux { return s.mux }
