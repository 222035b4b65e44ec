// Package httpapi holds the HTTP API of API.md as plain net/http handlers.
// Each Lambda function serves one of them through the API Gateway adapter,
// the dev server mounts them all, and tests call them directly: one code
// path, three doors.
package httpapi

import (
	"context"
	"fmt"
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
	// RequestDeadline bounds every request's calls to its dependencies
	// (Postgres, S3): API.md wants a 503 within 15 s of the request when
	// one is down or frozen, on Lambda and on the dev server alike. The
	// best-effort cleanup after a failure (discarding objects:
	// pendinguploads.CleanupBudget, 2 s) may run past it, or the check of
	// a token before a refusal (as long again), not both: 10 s + 2 s
	// leaves time to answer. The pool's 5 s connect timeout and the 10 s
	// statement_timeout end most waits first, with the same 503.
	RequestDeadline = 10 * time.Second
)

// API is the HTTP API. Set optional fields before serving; it is then
// safe for concurrent use.
type API struct {
	store *pendinguploads.Store
	authn *auth.Authenticator

	// MaxRequestBytes caps an upload's body (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Logger receives one JSON line per state change (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives EMF counters (nil: none).
	Metrics *metrics.Emitter
	// CORSAllowedOrigins are the browser origins answered with CORS
	// headers (cors.go); empty: none.
	CORSAllowedOrigins []string
	// PresignOffered says the service offers presigned uploads (a bucket
	// is configured), for GET /uploads/limits: the list function that
	// serves it has no bucket of its own.
	PresignOffered bool
}

// New returns the API over store and authn.
func New(store *pendinguploads.Store, authn *auth.Authenticator) *API {
	return &API{store: store, authn: authn}
}

// Handler returns the handler of routes (a function's), each with its
// CORS preflight OPTIONS, behind front: anything else is a JSON 404 or
// 405.
func (a *API) Handler(routes ...Route) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.Handle(rt.Method+" "+rt.Path, a.serve(rt))
		mux.HandleFunc("OPTIONS "+rt.Path, a.preflight)
	}
	mux.HandleFunc("/", a.notFound)
	return a.withCORS(a.front(mux, routes))
}

// Mux returns every route behind front, for the dev server and tests.
func (a *API) Mux() http.Handler { return a.Handler(Routes...) }

// serve runs rt's handler and answers the error it returns.
func (a *API) serve(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := rt.handle(a, w, r)
		if err != nil {
			a.fail(w, r, err)
		}
		a.stampIfDue(r)
	}
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
		ctx = context.WithValue(ctx, undeadlinedKey{}, r.Context())
		r = r.WithContext(context.WithValue(ctx, stateKey{}, &requestState{}))
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
			a.fail(w, r, errMethod)
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

// notFound answers a request no route takes: 404, after authentication,
// which comes before anything else on every request.
func (a *API) notFound(w http.ResponseWriter, r *http.Request) {
	_, err := a.authenticate(r)
	if err == nil {
		err = errNotFound
	}
	a.fail(w, r, err)
}

func (a *API) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func (a *API) maxRequest() int64 {
	if a.MaxRequestBytes > 0 {
		return a.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

// guard identifies the bearer, then parses the workspace ID, and returns
// who the store call that serves the request acts for. A workspace token
// is checked by that call, in its own round trip (pendinguploads.Caller);
// an answer given before it (a bad path, a bad body) checks the token
// first (fail), so an unauthenticated caller learns nothing, not even
// whether its path parses.
func (a *API) guard(r *http.Request) (uuid.UUID, *pendinguploads.Caller, error) {
	p, err := a.authenticate(r)
	if err != nil {
		return uuid.Nil, nil, err
	}
	ws, err := uuid.Parse(r.PathValue("workspaceId"))
	if err != nil {
		return uuid.Nil, nil, errBadWorkspaceID
	}
	if p.Admin {
		return ws, nil, nil // the admin's token is checked already, and may act on any workspace
	}
	c := &pendinguploads.Caller{TokenHash: p.TokenHash}
	if st := stateOf(r); st != nil {
		st.caller = c
	}
	return ws, c, nil
}

// authenticate identifies the bearer (without the database), and notes it
// on the request.
func (a *API) authenticate(r *http.Request) (auth.Principal, error) {
	p, err := a.authn.Identify(r)
	if err != nil {
		return p, err
	}
	if st := stateOf(r); st != nil {
		st.principal, st.identified = p, true
	}
	return p, nil
}

// requestState is what front keeps for one request: who it acts as.
type requestState struct {
	principal  auth.Principal
	identified bool
	// caller is the store's view of a workspace bearer: its token, once a
	// store call found it.
	caller *pendinguploads.Caller
}

type stateKey struct{}

func stateOf(r *http.Request) *requestState {
	st, _ := r.Context().Value(stateKey{}).(*requestState)
	return st
}

// principalOf is who the request acts as, as far as it is known: verified
// once a store call found the token (or Verify did).
func principalOf(r *http.Request) (auth.Principal, bool) {
	st := stateOf(r)
	if st == nil || !st.identified {
		return auth.Principal{}, false
	}
	p := st.principal
	if !p.Verified && st.caller != nil && st.caller.Token != nil {
		t := st.caller.Token
		p.WorkspaceID, p.TokenPrefix, p.Verified = t.WorkspaceID, t.Prefix, true
	}
	return p, true
}

// verifyBeforeRefusal checks a bearer no store call has checked yet, for
// an answer given before any: a token that is not live is a 401 instead,
// and so is another workspace's token on a path that names a workspace.
// Otherwise the refusal stands.
func (a *API) verifyBeforeRefusal(r *http.Request, refusal error) error {
	p, ok := principalOf(r)
	if !ok || p.Verified {
		return refusal
	}
	// Its own budget: a refusal may come after the request's deadline (a
	// body that arrived slowly), and still deserves its true answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), pendinguploads.CleanupBudget)
	defer cancel()
	p, err := a.authn.Verify(ctx, p)
	if err != nil {
		return err
	}
	st := stateOf(r)
	st.principal = p
	if ws, err := uuid.Parse(r.PathValue("workspaceId")); err == nil && !p.Allows(ws) {
		return fmt.Errorf("token of another workspace: %w", errInvalidToken)
	}
	return refusal
}

// stampIfDue stamps the token's last_used_at when the store call that
// found it says it is due (at most once a minute): the one extra round
// trip, and a rare one.
func (a *API) stampIfDue(r *http.Request) {
	st := stateOf(r)
	if st == nil || st.caller == nil || st.caller.Token == nil || !st.caller.Token.Stale {
		return
	}
	p, _ := principalOf(r)
	a.authn.Stamp(r.Context(), p)
}

// guardFile is guard for a route that names a file, and parses its
// {fileId}.
func (a *API) guardFile(r *http.Request) (ws uuid.UUID, c *pendinguploads.Caller, id uuid.UUID, err error) {
	if ws, c, err = a.guard(r); err != nil {
		return uuid.Nil, nil, uuid.Nil, err
	}
	if id, err = uuid.Parse(r.PathValue("fileId")); err != nil {
		return uuid.Nil, nil, uuid.Nil, errBadFileID
	}
	return ws, c, id, nil
}
