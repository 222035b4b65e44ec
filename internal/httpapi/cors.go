package httpapi

import (
	"net/http"
	"slices"
)

// CORS answers of API.md.
const (
	corsAllowMethods = "GET, POST, DELETE"
	// X-Molecule-Org-Slug: the platform's canvas sends it on a tenant
	// host; accepted, and ignored (the tenant is the deployment's).
	corsAllowHeaders  = "Authorization, Content-Type, Range, X-Molecule-Org-Slug"
	corsMaxAge        = "600"
	corsExposeHeaders = "Content-Disposition, Content-Digest, Repr-Digest, Content-Range, Retry-After"
)

// withCORS wraps h with the CORS contract of API.md for the origins in
// a.CORSAllowedOrigins: a request whose Origin is listed gets
// Access-Control-Allow-Origin (that origin, never *),
// Access-Control-Allow-Credentials (the canvas always fetches with
// credentials: "include", and its session cookie is a credential) and
// Access-Control-Expose-Headers on every answer, errors and 401s included,
// because the headers are set before h runs. Any other origin, or no
// Origin, gets no CORS headers at all. With origins configured, every
// answer carries Vary: Origin, so that a cache never hands one origin's
// answer to another.
func (a *API) withCORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(a.CORSAllowedOrigins) > 0 {
			w.Header().Add("Vary", "Origin")
			if o := r.Header.Get("Origin"); a.allowsOrigin(o) {
				w.Header().Set("Access-Control-Allow-Origin", o)
				w.Header().Set("Access-Control-Allow-Credentials", "true")
				w.Header().Set("Access-Control-Expose-Headers", corsExposeHeaders)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// preflight answers OPTIONS on a route: 204, with the Allow-* headers when
// the Origin is listed (withCORS has set Allow-Origin already), and
// without any CORS header otherwise, which the browser takes as a refusal.
// It needs no token: browsers send none on a preflight.
func (a *API) preflight(w http.ResponseWriter, r *http.Request) {
	if a.allowsOrigin(r.Header.Get("Origin")) {
		h := w.Header()
		h.Set("Access-Control-Allow-Methods", corsAllowMethods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
	}
	w.WriteHeader(http.StatusNoContent)
}

// allowsOrigin reports whether origin is listed. Origins compare as the
// exact strings browsers send (config checks their form).
func (a *API) allowsOrigin(origin string) bool {
	return origin != "" && slices.Contains(a.CORSAllowedOrigins, origin)
}
