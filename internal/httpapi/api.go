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
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Caps and limits of API.md. The per-file cap is the store's (FileCap).
const (
	MaxFiles               = pendinguploads.MaxBatch
	DefaultMaxRequestBytes = 4 << 20
	// PresignPutTTL and PresignGetTTL are how long presigned requests live.
	PresignPutTTL = 15 * time.Minute
	PresignGetTTL = 5 * time.Minute
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

// Handler returns the handler of one function of Routes, wrapped in a mux
// that knows only that function's routes (and their CORS preflight
// OPTIONS): anything else is a JSON 404.
// It panics on an unknown name (a wiring bug, caught at start).
func (a *API) Handler(function string) http.Handler {
	mux := http.NewServeMux()
	found := false
	for _, rt := range Routes {
		if rt.Function == function {
			mux.Handle(rt.Method+" "+rt.Path, a.handlerFunc(rt))
			mux.HandleFunc("OPTIONS "+rt.Path, a.preflight)
			found = true
		}
	}
	if !found {
		panic("httpapi: no route for function " + function)
	}
	mux.HandleFunc("/", a.notFound)
	return a.withCORS(mux)
}

// Mux returns every route on one mux, for the dev server and tests.
func (a *API) Mux() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range Routes {
		mux.Handle(rt.Method+" "+rt.Path, a.handlerFunc(rt))
		mux.HandleFunc("OPTIONS "+rt.Path, a.preflight)
	}
	mux.HandleFunc("/", a.notFound)
	return a.withCORS(mux)
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

func (a *API) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "not found")
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
	p, err := a.authn.Authenticate(r.Context(), r)
	switch {
	case errors.Is(err, auth.ErrMissing):
		a.refuse(r, "missing bearer", uuid.Nil)
		writeError(w, http.StatusUnauthorized, "missing workspace auth token")
		return uuid.Nil, p, false
	case errors.Is(err, auth.ErrInvalid):
		a.refuse(r, "invalid token", uuid.Nil)
		writeError(w, http.StatusUnauthorized, "invalid workspace auth token")
		return uuid.Nil, p, false
	case errors.Is(err, auth.ErrUnavailable):
		a.logger().Error("token store unavailable", "err", err, "path", r.URL.Path)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "datastore unavailable, retry shortly", "code": "unavailable"})
		return uuid.Nil, p, false
	case err != nil:
		a.logger().Error("authenticate", "err", err, "path", r.URL.Path)
		writeError(w, http.StatusInternalServerError, "storage error")
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
