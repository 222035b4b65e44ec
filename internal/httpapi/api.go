// Package httpapi holds the HTTP API of API.md as plain net/http handlers.
// Each Lambda function serves one of them through the API Gateway adapter,
// the dev server mounts them all, and tests call them directly: one code
// path, three doors.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"

	"github.com/pendinguploads/pendinguploads/internal/limits"
)

// Caps and limits of API.md. The per-file cap is the store's (FileCap).
const (
	MaxFiles               = pendinguploads.MaxBatch
	DefaultMaxRequestBytes = limits.DefaultRequestBytes
	// PresignPutTTL and PresignGetTTL are how long presigned requests live.
	PresignPutTTL = 15 * time.Minute
	PresignGetTTL = 5 * time.Minute
	// RequestDeadline bounds every request's calls to its dependencies
	// (Postgres, S3): API.md wants a 503 within 15 s of the request when
	// one is down or frozen, on Lambda and on the dev server alike. The
	// best-effort cleanup after a failure (a rollback, discarding objects:
	// pendinguploads.CleanupBudget, 2 s each) runs past it, so 10 s + 2 s
	// + 2 s leaves a second to answer. The pool's 5 s connect timeout and
	// the 10 s statement_timeout end most waits first, with the same 503.
	RequestDeadline = 10 * time.Second
)

// Presigner signs requests that let a client talk to the bucket directly.
type Presigner interface {
	// PresignPut signs a PUT of exactly size bytes of mimetype to key and
	// returns the URL and the headers the client must send.
	PresignPut(ctx context.Context, key string, size int64, mimetype string, ttl time.Duration) (string, map[string]string, error)
	// PresignGet signs a GET of key whose response carries the given
	// Content-Disposition and Content-Type.
	PresignGet(ctx context.Context, key, disposition, contentType string, ttl time.Duration) (string, error)
}

// API is the HTTP API. Set optional fields before serving; it is then
// safe for concurrent use.
type API struct {
	store *pendinguploads.Store
	authn *auth.Authenticator

	// MaxRequestBytes caps an upload's body (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Presigner, when set, enables presigned uploads and redirects. Set it
	// exactly when the Store has Blobs.
	Presigner Presigner
	// Logger receives one JSON line per state change (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives EMF counters (nil: none).
	Metrics *metrics.Emitter
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewID makes upload IDs for presign (default uuid.New).
	NewID func() uuid.UUID
	// CORSAllowedOrigins are the browser origins answered with CORS
	// headers (cors.go); empty: none.
	CORSAllowedOrigins []string
}

// New returns the API over store and authn.
func New(store *pendinguploads.Store, authn *auth.Authenticator) *API {
	return &API{store: store, authn: authn}
}

// Handler returns the handler of one function of Routes, behind front
// with only that function's routes (and their CORS preflight OPTIONS):
// anything else is a JSON 404 or 405.
// It panics on an unknown name (a wiring bug, caught at start).
func (a *API) Handler(function string) http.Handler {
	mux := http.NewServeMux()
	var routes []Route
	for _, rt := range Routes {
		if rt.Function == function {
			mux.Handle(rt.Method+" "+rt.Path, a.handlerFunc(rt))
			mux.HandleFunc("OPTIONS "+rt.Path, a.preflight)
			routes = append(routes, rt)
		}
	}
	if len(routes) == 0 {
		panic("httpapi: no route for function " + function)
	}
	mux.HandleFunc("/", a.notFound)
	return a.withCORS(a.front(mux, routes))
}

// Mux returns every route behind front, for the dev server and tests.
func (a *API) Mux() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range Routes {
		mux.Handle(rt.Method+" "+rt.Path, a.handlerFunc(rt))
		mux.HandleFunc("OPTIONS "+rt.Path, a.preflight)
	}
	mux.HandleFunc("/", a.notFound)
	return a.withCORS(a.front(mux, Routes))
}

// front routes a request to mux only when its method and path are those
// of one of routes, with RequestDeadline on its context. ServeMux alone
// would redirect a path holding "//" or "/../" (an HTML 307, before any
// authentication), route HEAD to GET handlers, and answer a wrong method
// in plain text. Here a path that is not clean, or names no route, is a
// JSON 404 after authentication (401 without a valid token), and a route's
// path with another method is a JSON 405 with Allow, as API Gateway
// routes only the methods of its table.
func (a *API) front(mux *http.ServeMux, routes []Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), RequestDeadline)
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, undeadlinedKey{}, r.Context()))
		var allow []string
		if p := r.URL.Path; p != "" && path.Clean(p) == p {
			for _, rt := range routes {
				if !matchPath(rt.Path, r.URL.EscapedPath()) {
					continue
				}
				if rt.Method == r.Method || r.Method == http.MethodOptions {
					// OPTIONS is the route's CORS preflight.
					mux.ServeHTTP(w, r)
					return
				}
				allow = append(allow, rt.Method)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		a.notFound(w, r)
	})
}

type undeadlinedKey struct{}

// Undeadlined returns the request's context without RequestDeadline (for
// the copy of a long response body, which is not a dependency call and may
// take longer); ctx itself when it did not come through front.
func Undeadlined(ctx context.Context) context.Context {
	if c, ok := ctx.Value(undeadlinedKey{}).(context.Context); ok {
		return c
	}
	return ctx
}

// matchPath reports whether an (escaped) request path has the segments of
// a route's pattern: literal segments equal, each {wildcard} non-empty.
func matchPath(pattern, p string) bool {
	ps, rs := strings.Split(pattern, "/"), strings.Split(p, "/")
	if len(ps) != len(rs) {
		return false
	}
	for i, seg := range ps {
		if strings.HasPrefix(seg, "{") {
			if rs[i] == "" {
				return false
			}
		} else if seg != rs[i] {
			return false
		}
	}
	return true
}

func (a *API) handlerFunc(rt Route) http.HandlerFunc {
	if rt.Path == LimitsPath {
		return a.limits
	}
	switch rt.Function {
	case "upload":
		return a.upload
	case "presign":
		return a.presign
	case "list":
		return a.list
	case "content":
		return a.content
	case "ack":
		return a.ack
	}
	panic("httpapi: no handler for function " + rt.Function)
}

// notFound answers a request no route takes: 404, after authentication,
// which comes before anything else on every request.
func (a *API) notFound(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.authenticate(w, r); ok {
		writeError(w, http.StatusNotFound, "not found")
	}
}

func (a *API) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *API) maxRequest() int64 {
	if a.MaxRequestBytes > 0 {
		return a.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

// guard authenticates the request, then parses the workspace ID, then
// checks the token may act on it, answering the request itself when not.
// Authentication comes first: an unauthenticated caller learns nothing,
// not even whether its path parses.
func (a *API) guard(w http.ResponseWriter, r *http.Request) (uuid.UUID, auth.Principal, bool) {
	p, ok := a.authenticate(w, r)
	if !ok {
		return uuid.Nil, p, false
	}
	ws, err := uuid.Parse(r.PathValue("workspaceId"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid workspace ID")
		return uuid.Nil, p, false
	}
	if !p.Allows(ws) {
		a.refuse(r, "token of another workspace", ws, "token_prefix", p.TokenPrefix)
		writeError(w, http.StatusUnauthorized, "invalid workspace auth token")
		return uuid.Nil, p, false
	}
	return ws, p, true
}

// authenticate identifies the bearer, answering the request itself when
// it cannot.
func (a *API) authenticate(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	p, err := a.authn.Authenticate(r.Context(), r)
	switch {
	case errors.Is(err, auth.ErrMissing):
		a.refuse(r, "missing bearer", uuid.Nil)
		writeError(w, http.StatusUnauthorized, "missing workspace auth token")
		return p, false
	case errors.Is(err, auth.ErrInvalid):
		a.refuse(r, "invalid token", uuid.Nil)
		writeError(w, http.StatusUnauthorized, "invalid workspace auth token")
		return p, false
	case errors.Is(err, auth.ErrUnavailable):
		a.logger().Error("token store unavailable", "err", err, "path", r.URL.Path)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "datastore unavailable, retry shortly", "code": "unavailable"})
		return p, false
	case err != nil:
		a.logger().Error("authenticate", "err", err, "path", r.URL.Path)
		writeError(w, http.StatusInternalServerError, "storage error")
		return p, false
	}
	return p, true
}

func (a *API) refuse(r *http.Request, why string, ws uuid.UUID, attrs ...any) {
	args := append([]any{"reason", why, "method", r.Method, "path", r.URL.Path}, attrs...)
	if ws != uuid.Nil {
		args = append(args, "workspace_id", ws)
	}
	a.logger().Warn("refused", args...)
}

// fileID parses the {fileId} path value, answering 400 itself when bad.
func fileID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("fileId"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid file_id")
		return uuid.Nil, false
	}
	return id, true
}
