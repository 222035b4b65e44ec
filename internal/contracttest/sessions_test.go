package contracttest

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
)

// TestSessionAnswersMatchDocument: the answers to the canvas's session
// cookie, served and refused, match openapi.yaml: 200, a refused cookie's
// 401, a foreign origin's 403 and a failing control plane's 503.
func TestSessionAnswersMatchDocument(t *testing.T) {
	const canvas = "https://canvas.example.com"
	cp := cptest.Start(t, "acme")
	cp.AddMember("member", "user-1")
	env := cp.Env()
	env["CORS_ALLOWED_ORIGINS"] = canvas
	srv := apptest.NewServer(t, apptest.Options{Env: env})
	c := newChecker(t, srv.URL)
	base := srv.URL + "/workspaces/" + uuid.NewString()
	withCookie := func(method, u, session, origin, ctype string, body []byte) *http.Request {
		req := request(t, method, u, "", ctype, body)
		req.Header.Set("Cookie", cptest.CookieName+"="+session)
		req.Header.Set("X-Molecule-Org-Slug", "acme")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		return req
	}
	body, ctype := multipartBody(t, part{"a.txt", "text/plain", "hello"})
	c.do("session upload 200", withCookie("POST", base+"/chat/uploads", "member", canvas, ctype, body), http.StatusOK)
	c.do("session list 200", withCookie("GET", base+"/pending-uploads", "member", canvas, "", nil), http.StatusOK)
	c.do("session refused 401", withCookie("GET", base+"/pending-uploads", "forged", canvas, "", nil), http.StatusUnauthorized)
	c.do("session from a foreign origin 403", withCookie("POST", base+"/chat/uploads", "member", "https://evil.example.com", ctype, body), http.StatusForbidden)
	c.do("session ack from a foreign origin 403", withCookie("POST", base+"/pending-uploads/"+uuid.NewString()+"/ack", "member", "https://evil.example.com", "", nil), http.StatusForbidden)
	c.do("session content from a foreign origin 403", withCookie("GET", base+"/pending-uploads/"+uuid.NewString()+"/content", "member", "https://evil.example.com", "", nil), http.StatusForbidden)
	c.do("session presign from a foreign origin 403", withCookie("POST", base+"/chat/uploads/presign", "member", "https://evil.example.com", "application/json", []byte(`{}`)), http.StatusForbidden)
	c.do("session control plane failing 503", withCookie("GET", base+"/pending-uploads", cptest.Broken, canvas, "", nil), http.StatusServiceUnavailable)
}
