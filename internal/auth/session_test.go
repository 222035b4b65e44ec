package auth_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/cptest"
)

func cookieRequest(cookie, origin, fetchSite string) *http.Request {
	r, _ := http.NewRequest("POST", "/workspaces/x/chat/uploads", nil)
	r.Header.Set("Cookie", cookie)
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if fetchSite != "" {
		r.Header.Set("Sec-Fetch-Site", fetchSite)
	}
	return r
}

// TestSessions: a cookie is a member when the control plane says so;
// every other answer is a refusal, but a control plane that fails or is
// slow gives no verdict (503); verdicts are cached (members and refusals),
// failures are not; and a cookie from a foreign origin is refused before
// the control plane is asked.
func TestSessions(t *testing.T) {
	const slug, canvas = "acme", "https://canvas.example.com"
	const member = cptest.CookieName + "=member"
	cp := cptest.Start(t, slug)
	cp.AddMember("member", "user-1")
	sessions, err := auth.NewSessions(cp.URL+"/", slug)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(admin)
	if err != nil {
		t.Fatal(err)
	}
	a.Sessions, a.Origins = sessions, []string{canvas}

	t.Run("Member", func(t *testing.T) {
		before := cp.Calls()
		for range 3 {
			id, err := a.Identify(cookieRequest("theme=dark; "+cptest.CookieName+"=member", canvas, "same-site"))
			if err != nil || id.Kind() != auth.Session || id.UserID() != "user-1" || !id.Trusted() {
				t.Fatalf("got %+v, %v", id, err)
			}
		}
		if n := cp.Calls() - before; n != 1 {
			t.Fatalf("control plane calls for 3 requests: got %d, want 1 (cached)", n)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		for _, c := range []string{cptest.CookieName + "=" + cptest.Stranger, cptest.CookieName + "=" + cptest.NoUser, cptest.CookieName + "=forged", "other=1"} {
			before := cp.Calls()
			for range 2 {
				if _, err := a.Identify(cookieRequest(c, canvas, "")); !errors.Is(err, auth.ErrInvalid) {
					t.Fatalf("%s: got %v, want ErrInvalid", c, err)
				}
			}
			if n := cp.Calls() - before; n != 1 {
				t.Fatalf("%s: control plane calls: got %d, want 1 (refusals cached)", c, n)
			}
		}
	})
	t.Run("Unavailable", func(t *testing.T) {
		before := cp.Calls()
		for range 2 {
			if _, err := a.Identify(cookieRequest(cptest.CookieName+"="+cptest.Broken, canvas, "")); !errors.Is(err, auth.ErrSessionUnavailable) {
				t.Fatalf("5xx: got %v, want ErrSessionUnavailable", err)
			}
		}
		if n := cp.Calls() - before; n != 2 {
			t.Fatalf("control plane calls: got %d, want 2 (failures not cached)", n)
		}
		start := time.Now()
		if _, err := a.Identify(cookieRequest(cptest.CookieName+"="+cptest.Slow, canvas, "")); !errors.Is(err, auth.ErrSessionUnavailable) {
			t.Fatalf("slow: got %v, want ErrSessionUnavailable", err)
		}
		if d := time.Since(start); d > auth.SessionTimeout+time.Second {
			t.Fatalf("slow control plane held the request %v, want at most %v", d, auth.SessionTimeout)
		}
		down, err := auth.NewSessions("http://127.0.0.1:1", slug)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := down.Verify(context.Background(), member); !errors.Is(err, auth.ErrSessionUnavailable) {
			t.Fatalf("control plane down: got %v, want ErrSessionUnavailable", err)
		}
	})
	t.Run("ForeignOrigin", func(t *testing.T) {
		before := cp.Calls()
		for _, r := range []*http.Request{
			cookieRequest(member, "https://evil.example.com", ""),
			cookieRequest(member, "null", ""),
			cookieRequest(member, "", "same-site"), // an <img> or no-cors GET from a sibling subdomain
			cookieRequest(member, "", "cross-site"),
			cookieRequest(member, "", "none"),
			// An unlisted origin is refused whatever else the browser says
			// but same-origin: a sibling tenant is same-site.
			cookieRequest(member, "https://evil.example.com", "same-site"),
			cookieRequest(member, "https://evil.example.com", "cross-site"),
			cookieRequest(member, "https://evil.example.com", "none"),
		} {
			if _, err := a.Identify(r); !errors.Is(err, auth.ErrForeignOrigin) {
				t.Fatalf("Origin %q, Sec-Fetch-Site %q: got %v, want ErrForeignOrigin",
					r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), err)
			}
		}
		if n := cp.Calls() - before; n != 0 {
			t.Fatalf("control plane asked %d times about foreign requests, want never", n)
		}
		for _, site := range []string{"same-origin", ""} {
			if _, err := a.Identify(cookieRequest(member, "", site)); err != nil {
				t.Fatalf("no Origin, Sec-Fetch-Site %q: got %v, want served", site, err)
			}
		}
		// A second host name of the same deployment (the tenant's edge
		// answering on two names): not listed, but the browser itself
		// says same-origin.
		if _, err := a.Identify(cookieRequest(member, "https://uploads2.example.com", "same-origin")); err != nil {
			t.Fatalf("unlisted Origin, Sec-Fetch-Site same-origin: got %v, want served", err)
		}
	})
	t.Run("BearerFirst", func(t *testing.T) {
		r := cookieRequest(member, canvas, "")
		r.Header.Set("Authorization", "Bearer "+admin)
		if id, err := a.Identify(r); err != nil || id.Kind() != auth.Admin {
			t.Fatalf("bearer and cookie: got %+v, %v, want the admin", id, err)
		}
	})
}
