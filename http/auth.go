package http

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/partmap/partmap"
	"github.com/partmap/partmap/auth"
)

// authorize checks the request's bearer token against the scope a route
// needs. The token itself is never logged or echoed.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, need auth.Scope) error {
	if s.tokens == nil {
		return nil
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" { // schemes are case-insensitive
		w.Header().Set("WWW-Authenticate", `Bearer realm="partmap"`)
		return partmap.Errorf(partmap.EUNAUTHORIZED, "send a bearer token: Authorization: Bearer <token>")
	}
	name, scope, ok := s.tokens.Lookup(strings.TrimSpace(token))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="partmap", error="invalid_token"`)
		return partmap.Errorf(partmap.EUNAUTHORIZED, "the bearer token is not valid")
	}
	if scope < need {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="partmap", error="insufficient_scope", scope="%s"`, need))
		return partmap.Errorf(partmap.EFORBIDDEN, "token %q has the %s scope; this request needs %s", name, scope, need)
	}
	return nil
}
