package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
)

const (
	tenantSlug   = "acme"
	publicOrigin = "https://app.acme.example.com"
)

// sessionServer is the service with session cookies checked by a control
// plane stand-in, the canvas's origin for CORS and the service's own
// public origin, logging into logs.
func sessionServer(t *testing.T, logs *syncBuffer) (*apptest.Server, *cptest.Server) {
	t.Helper()
	cp := cptest.Start(t, tenantSlug)
	env := cp.Env()
	env["CORS_ALLOWED_ORIGINS"] = canvasOrigin
	env["PUBLIC_ORIGIN"] = publicOrigin
	opts := apptest.Options{Env: env}
	if logs != nil {
		opts.Log = logs
	}
	return apptest.NewServer(t, opts), cp
}

// cookieReq is a request as the canvas sends it in production: no bearer,
// its session cookie, its tenant header, from origin (none when "").
func cookieReq(t *testing.T, method, u, session, origin, ctype string, body []byte) *http.Request {
	t.Helper()
	req := newRequest(t, method, u, "", ctype, bytes.NewReader(body))
	req.Header.Set("Cookie", "theme=dark; "+cptest.CookieName+"="+session)
	req.Header.Set("X-Molecule-Org-Slug", tenantSlug)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return req
}

// TestSessionCookie: the canvas's production credential, a session cookie
// with no bearer, stages, lists, downloads and acks on any workspace once
// the control plane says it is a member; the control plane is asked once
// per 30 s; a refused cookie is 401 and a control plane that fails 503,
// with nothing stored either way; log lines name the user, never the
// cookie.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	srv, cp := sessionServer(t, logs)
	cp.AddMember("s3cr3t-member-session", "user-42")
	const session = "s3cr3t-member-session"
	ws := uuid.New()

	body, ctype := form(t, file("a.txt", "text/plain", "from the canvas"))
	res := send(t, cookieReq(t, "POST", uploadsURL(srv, ws.String()), session, canvasOrigin, ctype, body))
	wantStatus(t, res, http.StatusOK)
	wantAllowed(t, "upload with a session", res)
	id := jsonObject(t, res.body)["files"].([]any)[0].(map[string]any)["file_id"].(string)

	res = send(t, cookieReq(t, "GET", listURL(srv, ws.String()), session, canvasOrigin, "", nil))
	wantStatus(t, res, http.StatusOK)
	// A download as the canvas makes it (cross-origin, credentialed), and
	// one from the service's own origin.
	for _, origin := range []string{canvasOrigin, publicOrigin} {
		res = send(t, cookieReq(t, "GET", contentURL(srv, ws.String(), id), session, origin, "", nil))
		wantStatus(t, res, http.StatusOK)
		if string(res.body) != "from the canvas" {
			t.Fatalf("content: got %q", res.body)
		}
	}
	wantStatus(t, send(t, cookieReq(t, "POST", ackURL(srv, ws.String(), id), session, canvasOrigin, "", nil)), http.StatusOK)
	// Acked, the attachment still opens from the chat history.
	wantStatus(t, send(t, cookieReq(t, "GET", contentURL(srv, ws.String(), id), session, canvasOrigin, "", nil)), http.StatusOK)
	if n := cp.Calls(); n != 1 {
		t.Errorf("control plane calls for 6 requests within 30 s: got %d, want 1", n)
	}
	l := logs.String()
	if strings.Contains(l, session) {
		t.Errorf("the session cookie is in the log")
	}
	for _, msg := range []string{`"msg":"staged"`, `"msg":"fetched"`, `"msg":"acked"`} {
		if !strings.Contains(l, msg) {
			t.Errorf("no %s line", msg)
		}
	}
	for _, line := range strings.Split(l, "\n") {
		for _, msg := range []string{`"msg":"staged"`, `"msg":"fetched"`, `"msg":"acked"`} {
			if strings.Contains(line, msg) && !strings.Contains(line, `"user_id":"user-42"`) {
				t.Errorf("%s without the user: %s", msg, line)
			}
		}
	}

	t.Run("Refused", func(t *testing.T) {
		other := uuid.New()
		for _, s := range []string{"forged", cptest.Stranger, cptest.NoUser} {
			body, ctype := form(t, file("b.txt", "text/plain", "b"))
			res := send(t, cookieReq(t, "POST", uploadsURL(srv, other.String()), s, canvasOrigin, ctype, body))
			wantError(t, res, http.StatusUnauthorized, "invalid workspace auth token", nil)
			wantAllowed(t, "401", res) // the canvas can read why
		}
		wantNothingStored(t, srv, other)
		res := send(t, newRequest(t, "GET", listURL(srv, other.String()), "", "", nil))
		wantError(t, res, http.StatusUnauthorized, "missing workspace auth token", nil)
	})
	t.Run("ControlPlaneDown", func(t *testing.T) {
		other := uuid.New()
		cp.SetDown(true)
		defer cp.SetDown(false)
		before := cp.Calls()
		for range 2 {
			body, ctype := form(t, file("c.txt", "text/plain", "c"))
			res := send(t, cookieReq(t, "POST", uploadsURL(srv, other.String()), "another-session", canvasOrigin, ctype, body))
			wantError(t, res, http.StatusServiceUnavailable, "session check unavailable, retry shortly", map[string]any{"code": "unavailable"})
		}
		if n := cp.Calls() - before; n != 2 {
			t.Errorf("control plane calls: got %d, want 2 (a failure is not cached)", n)
		}
		wantNothingStored(t, srv, other)
		start := time.Now()
		res := send(t, cookieReq(t, "GET", listURL(srv, other.String()), cptest.Slow, canvasOrigin, "", nil))
		wantError(t, res, http.StatusServiceUnavailable, "session check unavailable, retry shortly", map[string]any{"code": "unavailable"})
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a slow control plane held the request %v", d)
		}
	})
}

// TestSessionCookieFromAForeignOrigin: a cookie rides along on requests
// another site's page makes; they are 403 with nothing stored and nothing
// stamped, before the control plane is asked: a form POST from a sibling
// subdomain, a no-cors fetch, a credentialed read, an <img> (no Origin,
// Sec-Fetch-Site same-site). A same-origin download (no Origin,
// Sec-Fetch-Site same-origin) and a non-browser (neither header) are
// served. Bearer requests are never refused so.
func TestSessionCookieFromAForeignOrigin(t *testing.T) {
	t.Parallel()
	srv, cp := sessionServer(t, nil)
	const session = "member-session"
	cp.AddMember(session, "user-7")
	ws := uuid.New()
	f := stage(t, srv, ws, "a.txt", "text/plain", "secret")
	const sibling = "https://evil.acme.example.com"
	fetched, acked := timestamps(t, srv, f.FileID)
	before := cp.Calls()

	formBody := []byte("--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"evil.txt\"\r\nContent-Type: text/plain\r\n\r\nevil\r\n--x--\r\n")
	for name, req := range map[string]*http.Request{
		"FormPOST":        cookieReq(t, "POST", uploadsURL(srv, ws.String()), session, sibling, "multipart/form-data; boundary=x", formBody),
		"AckFromSibling":  cookieReq(t, "POST", ackURL(srv, ws.String(), f.FileID), session, sibling, "", nil),
		"CredentialedGET": cookieReq(t, "GET", contentURL(srv, ws.String(), f.FileID), session, sibling, "", nil),
		"OpaqueOrigin":    cookieReq(t, "POST", ackURL(srv, ws.String(), f.FileID), session, "null", "", nil),
		"SiblingTenantSameSite": func() *http.Request {
			r := cookieReq(t, "POST", ackURL(srv, ws.String(), f.FileID), session, sibling, "", nil)
			r.Header.Set("Sec-Fetch-Site", "same-site")
			return r
		}(),
		"ImgTag": func() *http.Request {
			r := cookieReq(t, "GET", contentURL(srv, ws.String(), f.FileID), session, "", "", nil)
			r.Header.Set("Sec-Fetch-Site", "same-site")
			return r
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			res := send(t, req)
			wantError(t, res, http.StatusForbidden, "cross-origin request refused", nil)
		})
	}
	if n := cp.Calls() - before; n != 0 {
		t.Errorf("control plane asked %d times about foreign requests, want 0", n)
	}
	if u, _ := rowCounts(t, srv, ws); u != 1 {
		t.Errorf("rows: got %d, want the one staged before", u)
	}
	if f2, a2 := timestamps(t, srv, f.FileID); !sameTime(f2, fetched) || !sameTime(a2, acked) {
		t.Errorf("a refused request stamped the row: fetched %v→%v, acked %v→%v", fetched, f2, acked, a2)
	}

	t.Run("SecondHostOfTheDeployment", func(t *testing.T) {
		// The tenant's edge answers on a second name, not in the
		// configuration; the browser marks its pages' requests
		// same-origin, which no page script can forge.
		r := cookieReq(t, "GET", listURL(srv, ws.String()), session, "https://uploads2.acme.example.com", "", nil)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		wantStatus(t, send(t, r), http.StatusOK)
	})
	for name, site := range map[string]string{"SameOriginDownload": "same-origin", "NotABrowser": ""} {
		t.Run(name, func(t *testing.T) {
			r := cookieReq(t, "GET", contentURL(srv, ws.String(), f.FileID), session, "", "", nil)
			if site != "" {
				r.Header.Set("Sec-Fetch-Site", site)
			}
			res := send(t, r)
			wantStatus(t, res, http.StatusOK)
			if string(res.body) != "secret" {
				t.Fatalf("got %q", res.body)
			}
		})
	}
	t.Run("BearerUnaffected", func(t *testing.T) {
		req := newRequest(t, "GET", listURL(srv, ws.String()), srv.AdminToken, "", nil)
		req.Header.Set("Origin", sibling)
		req.Header.Set("Cookie", cptest.CookieName+"="+session)
		wantStatus(t, send(t, req), http.StatusOK)
	})
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// orgSetup is the platform's database with two orgs (a root and a child
// each) and a file staged in org 1's child.
type orgSetup struct {
	srv                        *apptest.Server
	root1, child1, root2, kid2 uuid.UUID
	file                       stagedFile
}

func newOrgSetup(t *testing.T, opts apptest.Options) *orgSetup {
	t.Helper()
	opts.Platform = true
	o := &orgSetup{srv: apptest.NewServer(t, opts), root1: uuid.New(), child1: uuid.New(), root2: uuid.New(), kid2: uuid.New()}
	for _, w := range [][2]any{{o.root1, nil}, {o.child1, o.root1}, {o.root2, nil}, {o.kid2, o.root2}} {
		sqlExec(t, o.srv, `INSERT INTO workspaces (id, name, parent_id) VALUES ($1, 'w', $2)`, w[0], w[1])
	}
	o.file = stage(t, o.srv, o.child1, "org.txt", "text/plain", "org file")
	return o
}

// mintOrgToken stores an org API token as the platform mints it (only its
// SHA-256), anchored to anchor (nil: unanchored).
func (o *orgSetup) mintOrgToken(t *testing.T, anchor *uuid.UUID) string {
	t.Helper()
	tok := "org_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	sum := sha256.Sum256([]byte(tok))
	sqlExec(t, o.srv, `INSERT INTO org_api_tokens (token_hash, prefix, name, org_id) VALUES ($1, $2, 'cli', $3)`, sum[:], tok[:8], anchor)
	return tok
}

// TestOrgTokensOverHTTP: an org API token acts on every workspace of its
// org, every route; anchored to another org it is 401 with nothing stored
// and nothing read (the file's fetched_at and acked_at unchanged); so is
// an unanchored one (never anchored, or its anchor workspace deleted: issue
// 43's probe), with a code of its own.
func TestOrgTokensOverHTTP(t *testing.T) {
	t.Parallel()
	o := newOrgSetup(t, apptest.Options{})
	srv := o.srv
	mine, theirs := o.mintOrgToken(t, &o.root1), o.mintOrgToken(t, &o.root2)
	unanchored := o.mintOrgToken(t, nil)
	anchorGone := o.mintOrgToken(t, &o.kid2)
	wantError(t, get(t, listURL(srv, o.child1.String()), anchorGone), http.StatusUnauthorized, msgInvalid, nil)
	sqlExec(t, srv, `DELETE FROM workspaces WHERE id = $1`, o.kid2) // the platform sets the token's org_id NULL

	for _, tok := range []string{mine} {
		up := uploadParts(t, srv, o.root1.String(), tok, file("b.txt", "text/plain", "via org token"))[0]
		wantStatus(t, get(t, listURL(srv, o.child1.String()), tok), http.StatusOK)
		res := get(t, contentURL(srv, o.child1.String(), o.file.FileID), tok)
		wantStatus(t, res, http.StatusOK)
		wantStatus(t, post(t, ackURL(srv, o.root1.String(), up.FileID), tok, "", nil), http.StatusOK)
	}

	fetched, acked := timestamps(t, srv, o.file.FileID)
	uploads, activity := rowCounts(t, srv, o.child1)
	body, ctype := form(t, file("c.txt", "text/plain", "must not land"))
	for name, res := range map[string]result{
		"Upload":  post(t, uploadsURL(srv, o.child1.String()), theirs, ctype, body),
		"List":    get(t, listURL(srv, o.child1.String()), theirs),
		"Content": get(t, contentURL(srv, o.child1.String(), o.file.FileID), theirs),
		"Ack":     post(t, ackURL(srv, o.child1.String(), o.file.FileID), theirs, "", nil),
		"BadBody": post(t, uploadsURL(srv, o.child1.String()), theirs, "text/plain", []byte("x")),
	} {
		t.Run("OtherOrg"+name, func(t *testing.T) {
			wantError(t, res, http.StatusUnauthorized, "invalid workspace auth token", nil)
		})
	}
	for _, tok := range []string{unanchored, anchorGone} {
		for name, res := range map[string]result{
			"Upload":  post(t, uploadsURL(srv, o.child1.String()), tok, ctype, body),
			"List":    get(t, listURL(srv, o.child1.String()), tok),
			"Content": get(t, contentURL(srv, o.child1.String(), o.file.FileID), tok),
			"Ack":     post(t, ackURL(srv, o.child1.String(), o.file.FileID), tok, "", nil),
			"BadBody": post(t, uploadsURL(srv, o.child1.String()), tok, "text/plain", []byte("x")),
		} {
			t.Run("Unanchored"+name, func(t *testing.T) {
				wantError(t, res, http.StatusUnauthorized, msgUnanchored, nil)
			})
		}
	}
	if u, a := rowCounts(t, srv, o.child1); u != uploads || a != activity {
		t.Errorf("rows after refusals: got (%d, %d), want (%d, %d)", u, a, uploads, activity)
	}
	if f, a := timestamps(t, srv, o.file.FileID); !sameTime(f, fetched) || !sameTime(a, acked) {
		t.Errorf("a refused org token touched the file: fetched %v→%v, acked %v→%v", fetched, f, acked, a)
	}
}

// TestUnanchoredOrgTokensAccepted: with ACCEPT_UNANCHORED_ORG_TOKENS, an
// org token without an anchor acts on every workspace, the platform's
// legacy rule, on every route.
func TestUnanchoredOrgTokensAccepted(t *testing.T) {
	t.Parallel()
	o := newOrgSetup(t, apptest.Options{Env: map[string]string{"ACCEPT_UNANCHORED_ORG_TOKENS": "true"}})
	srv := o.srv
	tok := o.mintOrgToken(t, nil)
	up := uploadParts(t, srv, o.root2.String(), tok, file("b.txt", "text/plain", "via an unanchored token"))[0]
	wantStatus(t, get(t, listURL(srv, o.child1.String()), tok), http.StatusOK)
	wantStatus(t, get(t, contentURL(srv, o.child1.String(), o.file.FileID), tok), http.StatusOK)
	wantStatus(t, post(t, ackURL(srv, o.root2.String(), up.FileID), tok, "", nil), http.StatusOK)
}

// TestBearerLogLines: the log lines of a workspace token's requests name
// the credential the look-up found (kind and prefix), though the look-up
// ran inside the store call and left the presented identity as it was;
// a refused token's line names it too.
func TestBearerLogLines(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	srv := apptest.NewServer(t, apptest.Options{Log: logs})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	prefix := `"token_prefix":"` + tok[:9] + `"`

	body, ctype := form(t, file("a.txt", "text/plain", "logged"))
	res := send(t, newRequest(t, "POST", uploadsURL(srv, ws.String()), tok, ctype, bytes.NewReader(body)))
	wantStatus(t, res, http.StatusOK)
	id := jsonObject(t, res.body)["files"].([]any)[0].(map[string]any)["file_id"].(string)
	wantStatus(t, send(t, newRequest(t, "GET", contentURL(srv, ws.String(), id), tok, "", nil)), http.StatusOK)
	wantStatus(t, send(t, newRequest(t, "POST", ackURL(srv, ws.String(), id), tok, "", nil)), http.StatusOK)
	wantStatus(t, send(t, newRequest(t, "GET", listURL(srv, uuid.NewString()), tok, "", nil)), http.StatusUnauthorized)

	lines := strings.Split(logs.String(), "\n")
	for _, msg := range []string{`"msg":"staged"`, `"msg":"fetched"`, `"msg":"acked"`, `"msg":"refused"`} {
		found := false
		for _, line := range lines {
			if !strings.Contains(line, msg) {
				continue
			}
			found = true
			if !strings.Contains(line, `"credential":"workspace"`) || !strings.Contains(line, prefix) {
				t.Errorf("%s: got %s, want the workspace token's kind and prefix", msg, line)
			}
		}
		if !found {
			t.Errorf("no %s line", msg)
		}
	}
}
