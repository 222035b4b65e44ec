// Package httpapi holds the HTTP API of API.md as plain net/http handlers.
// Each Lambda function serves its own routes (RoutesOf, from the one
// table in routes.go) through the API Gateway adapter, the dev server
// mounts them all, and tests call them directly: one code path, three
// doors.
//
// The handlers parse, call one method of Store (store.go: the methods of
// *pendinguploads.Store they use, which internal/app hands New) and
// translate its errors through the one table of errors.go. That seam lets
// the tests of what is HTTP's own (status mapping, query and path
// parsing, multipart limits, CORS, error shapes) run in milliseconds over
// an in-memory fake (fake_test.go), with no Postgres; the suites against
// the whole service on Postgres and moto (apptest) prove the contract.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// The request deadline of API.md. The caps are limits' and the
// configuration's (API.MaxRequestBytes, API.MaxFileBytes).
const (
	// RequestDeadline is the default of API.RequestTimeout
	// (REQUEST_TIMEOUT), which bounds every request's calls to its
	// dependencies (Postgres, S3): API.md wants a 503 within 15 s of the
	// request when one is down or frozen, on Lambda and on the dev server
	// alike. The best-effort cleanup after a failure (discarding objects:
	// pendinguploads.CleanupBudget, 2 s) may run past it, or the check of
	// a token before a refusal (as long again), not both: 10 s + 2 s
	// leaves time to answer. The pool's 5 s connect timeout and the 10 s
	// statement_timeout end most waits first, with the same 503. A commit
	// of presigned uploads sets its own, grown by the bytes it copies
	// (pendinguploads.CommitTimeout).
	RequestDeadline = 10 * time.Second
)

// API is the HTTP API. Set optional fields before serving; it is then
// safe for concurrent use.
type API struct {
	store Store
	authn *auth.Authenticator

	// MaxRequestBytes caps an upload's body (MAX_REQUEST_BYTES).
	MaxRequestBytes int64
	// MaxFileBytes is the per-file cap (MAX_FILE_BYTES), the store's
	// (pendinguploads.Store.FileCap): a larger file is refused while its
	// part is read, before the store is called.
	MaxFileBytes int64
	// RequestTimeout bounds each request's calls to its dependencies
	// (REQUEST_TIMEOUT; 0: RequestDeadline), but a commit's copies.
	RequestTimeout time.Duration
	// Logger receives one JSON line per state change (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives EMF counters (nil: none).
	Metrics *metrics.Emitter
	// CORSAllowedOrigins are the browser origins answered with CORS
	// headers (cors.go); empty: none.
	CORSAllowedOrigins []string
	// Limits is the answer of GET /uploads/limits (LimitsOf the
	// configuration).
	Limits wire.Limits
	// Links signs and checks the download links of the link and download
	// routes (DOWNLOAD_LINK_KEY, DOWNLOAD_LINK_TTL); nil: those routes
	// answer 500 (the content function, which serves them, never starts
	// without a key).
	Links *downloadlink.Signer
	// AfterAnswer, when set, runs work (the caller's token stamp,
	// last_used_at, bounded by pendinguploads.CleanupBudget) off the
	// answer's path: serve hands it over and returns. A Lambda answer
	// is sent only once the handler returns, buffered whole, so a stamp
	// run in serve would sit in front of it (lambdafn sets this). nil:
	// serve runs work before it returns.
	AfterAnswer func(work func())
}

// New returns the API over store (in production a
// *pendinguploads.Store) and authn.
func New(store Store, authn *auth.Authenticator) *API {
	return &API{store: store, authn: authn}
}

// Handler returns the handler of routes (a function's), each with its
// CORS preflight OPTIONS, behind front: anything else is a JSON 404 or
// 405.
func (a *API) Handler(routes ...Route) http.Handler {
	mux := http.NewServeMux()
	preflights := map[string]bool{}
	for _, rt := range routes {
		mux.Handle(rt.Method+" "+rt.Path, a.serve(rt))
		if !preflights[rt.Path] { // one per path, whatever its methods
			preflights[rt.Path] = true
			mux.HandleFunc("OPTIONS "+rt.Path, a.preflight)
		}
	}
	mux.HandleFunc("/", a.notFound)
	return a.withCORS(a.front(mux, routes))
}

// Mux returns every route behind front, for the dev server and tests.
func (a *API) Mux() http.Handler { return a.Handler(Routes...) }

// serve runs rt's handler with the request's call (callOf), answers the
// error it returns, and stamps the caller's token when its look-up said
// a stamp is due (at most once a minute: the one extra round trip, and a
// rare one), through AfterAnswer when set.
func (a *API) serve(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := rt.checkQuery(r.URL.RawQuery)
		if err == nil {
			var c call
			if c, err = callOf(rt, r); err == nil {
				err = rt.handle(a, w, r, c)
			}
		}
		if err != nil {
			a.fail(w, r, a.verifyBeforeRefusal(r, err))
		}
		if stamp := auth.TakeStamp(r.Context()); stamp != nil {
			work := func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), pendinguploads.CleanupBudget)
				defer cancel()
				stamp(ctx)
			}
			if a.AfterAnswer != nil {
				a.AfterAnswer(work)
			} else {
				work()
			}
		}
	}
}

// front sets the Header of the routes whose path a request has (whatever
// its method), then routes it to mux only when its method and path are those
// of one of routes, with RequestTimeout on its context and, unless the
// route is public or the request a CORS preflight, the caller's identity
// (auth.Authenticator.Identify; a refusal is answered here). ServeMux
// alone would redirect a path holding "//" or "/../" (an HTML 307, before
// any authentication), route HEAD to GET handlers, and answer a wrong
// method in plain text. Here a path that is not clean, or names no route,
// is a JSON 404 after authentication (401 without valid credentials), and
// a route's path with another method is a JSON 405 with Allow, as API
// Gateway routes only the methods of its table.
func (a *API) front(mux *http.ServeMux, routes []Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), a.requestTimeout())
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, withoutDeadlineKey{}, r.Context()))
		setRouteHeaders(w.Header(), routes, r.URL.EscapedPath())
		var allow []string
		if p := r.URL.Path; p != "" && path.Clean(p) == p {
			for _, rt := range routes {
				if !matchPath(rt.Path, r.URL.EscapedPath()) {
					continue
				}
				if r.Method == http.MethodOptions {
					// The route's CORS preflight: browsers send no
					// credentials on it.
					mux.ServeHTTP(w, r)
					return
				}
				if rt.Method == r.Method {
					if !rt.Public {
						var err error
						if r, err = a.identify(r); err != nil {
							a.fail(w, r, err)
							return
						}
					}
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

// setRouteHeaders sets on h the Header of each of routes whose path p
// has, whatever the method: before anything answers the request.
func setRouteHeaders(h http.Header, routes []Route, p string) {
	for _, rt := range routes {
		if len(rt.Header) == 0 || !matchPath(rt.Path, p) {
			continue
		}
		for k, v := range rt.Header {
			h[k] = slices.Clone(v)
		}
	}
}

// checkQuery refuses a query string that does not parse (errBadQuery) or
// names a parameter the route does not define (errUnknownParam; the
// content route's own words for it), before the route's handler runs:
// API.md's conventions, held for every route here.
func (rt Route) checkQuery(raw string) error {
	q, err := parseQuery(raw)
	if err != nil {
		return err
	}
	for k := range q {
		if !slices.Contains(rt.Query, k) {
			if rt.Path == ContentRoute.Path {
				return errBadContentParam
			}
			return errUnknownParam
		}
	}
	return nil
}

// parseQuery parses a query string strictly: url.ParseQuery skips empty
// pairs ("?&") and would let a handler take a query it did not understand
// as none. Every pair must be key[=value] with a non-empty key, valid
// escapes and no ';'.
func parseQuery(raw string) (url.Values, error) {
	q := url.Values{}
	if raw == "" {
		return q, nil
	}
	for _, pair := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		key, kerr := url.QueryUnescape(k)
		val, verr := url.QueryUnescape(v)
		if kerr != nil || verr != nil || key == "" || strings.Contains(pair, ";") {
			return nil, errBadQuery
		}
		q[key] = append(q[key], val)
	}
	return q, nil
}

// identify returns r carrying its caller's identity.
func (a *API) identify(r *http.Request) (*http.Request, error) {
	id, err := a.authn.Identify(r)
	if err != nil {
		return r, err
	}
	return r.WithContext(auth.NewContext(r.Context(), id)), nil
}

type withoutDeadlineKey struct{}

// withoutRequestDeadline returns the request's context without
// RequestTimeout (for the copy of a long response body, which is not a
// dependency call and may take longer, and for a commit, which sets its
// own): on Lambda, the invocation's deadline less lambdafn.Margin still
// bounds it. ctx itself when it did not come through front.
func withoutRequestDeadline(ctx context.Context) context.Context {
	if c, ok := ctx.Value(withoutDeadlineKey{}).(context.Context); ok {
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
	var err error
	if auth.FromContext(r.Context()) == nil {
		r, err = a.identify(r)
	}
	if err == nil {
		err = a.verifyBeforeRefusal(r, errNotFound)
	}
	a.fail(w, r, err)
}

func (a *API) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func (a *API) requestTimeout() time.Duration {
	if a.RequestTimeout > 0 {
		return a.RequestTimeout
	}
	return RequestDeadline
}

// call is what serve hands a route's handler (callOf): who the request
// acts as, as front identified it, and the workspace its path names; the
// zero call for a public route, which takes no credential. A bearer
// token is checked by the store call that serves the request, in its own
// round trip, which records what it found in found; a refusal given
// before any such call checks it first (verifyBeforeRefusal), so an
// unauthenticated caller learns nothing, not even whether its path
// parses.
type call struct {
	id    *auth.Identity // as presented
	ws    uuid.UUID      // the path's {workspaceId}
	found *auth.Found    // the request's record of its bearer's look-up (auth.FoundIn)
	attrs []any          // id's log fields (auth.Identity.LogAttrs)
}

// callOf reads, once, the call of r for rt's handler: its identity (front
// put it in the context) and the {workspaceId} of its path
// (errBadWorkspaceID when that is not a UUID). A public route's call is
// zero: its handler reads its own path.
func callOf(rt Route, r *http.Request) (call, error) {
	if rt.Public {
		return call{}, nil
	}
	id := auth.FromContext(r.Context())
	if id == nil {
		return call{}, errors.New("route served without an identity")
	}
	c := call{id: id, found: auth.FoundIn(r.Context()), attrs: id.LogAttrs()}
	ws, err := uuid.Parse(r.PathValue("workspaceId"))
	if err != nil {
		return call{}, errBadWorkspaceID
	}
	c.ws = ws
	return c, nil
}

// logAttrs are the log fields of who the call acts as: once a store call
// looked its bearer up, the token found (its kind and prefix, as
// auth.Identity.LogAttrs names a found identity's), else the presented
// identity's.
func (c call) logAttrs() []any {
	if c.found != nil && c.found.Kind != 0 {
		return []any{"credential", c.found.Kind, "token_prefix", c.found.TokenPrefix}
	}
	return c.attrs
}

// pathFileID is the {fileId} of a route that names a file.
func pathFileID(r *http.Request) (uuid.UUID, error) {
	file, err := uuid.Parse(r.PathValue("fileId"))
	if err != nil {
		return uuid.Nil, errBadFileID
	}
	return file, nil
}

// verifyBeforeRefusal returns the answer to give for refusal, an error of a request
// whose bearer no store call has looked up yet (a bad path, query or
// body): a token that is not live, or may not act on the path's
// workspace, is a 401 instead, and a look-up that fails a 503. Only then
// does the refusal stand. (Its own budget: a refusal may come after the
// request's deadline, a body that arrived slowly, and still deserves its
// true answer.)
func (a *API) verifyBeforeRefusal(r *http.Request, refusal error) error {
	id := auth.FromContext(r.Context())
	if id.Kind() != auth.Bearer {
		return refusal
	}
	e := a.answerFor(refusal)
	if e.Status >= 500 || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		return refusal
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), pendinguploads.CleanupBudget)
	defer cancel()
	var ws *uuid.UUID
	if v, err := uuid.Parse(r.PathValue("workspaceId")); err == nil {
		ws = &v
	}
	if err := a.store.Verify(ctx, id, ws); err != nil {
		return fmt.Errorf("before %q: %w", e.Message, err)
	}
	return refusal
}
