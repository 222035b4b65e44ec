package auth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const admin = "an-admin-token-of-some-length"

func bearer(tok string) *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

func TestIdentify(t *testing.T) {
	a, err := auth.NewAuthenticator(admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Admin", func(t *testing.T) {
		id, err := a.Identify(bearer(admin))
		if err != nil || id.Kind != auth.Admin || !id.Trusted() {
			t.Fatalf("got %+v, %v", id, err)
		}
	})
	t.Run("Bearer", func(t *testing.T) {
		id, err := a.Identify(bearer("pu_some-token"))
		if err != nil || id.Kind != auth.Bearer || id.Trusted() || len(id.TokenHash()) != 32 {
			t.Fatalf("got %+v, %v; want a Bearer identity with the token's SHA-256", id, err)
		}
	})
	t.Run("ErrMissing", func(t *testing.T) {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Basic pu_some-token")
		r.Header.Set("Cookie", "session=abc") // no session check configured: ignored
		if _, err := a.Identify(r); !errors.Is(err, auth.ErrMissing) {
			t.Fatalf("got %v, want ErrMissing", err)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		if _, err := a.Identify(bearer(strings.Repeat("a", 600))); !errors.Is(err, auth.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid for a bearer too long to be any", err)
		}
	})
}

// TestFoundIsANewIdentity: a look-up's verdict is a new identity beside
// the presented one, which never changes; the request's context says
// who it acts as, and hands a due stamp out once.
func TestFoundIsANewIdentity(t *testing.T) {
	presented := auth.TokenIdentity("pu_some-token")
	ctx := auth.NewContext(context.Background(), presented)
	if got := auth.FromContext(ctx); got != presented {
		t.Fatalf("before a look-up: got %+v, want the presented identity", got)
	}
	ws := uuid.New()
	found := presented.Found(auth.Workspace, ws, "pu_some")
	stamped := 0
	auth.RecordFound(ctx, found, func(context.Context) { stamped++ })
	if presented.Kind != auth.Bearer || presented.TokenPrefix != "" {
		t.Fatalf("presented identity changed: %+v", presented)
	}
	if got := auth.FromContext(ctx); got != found || got.Kind != auth.Workspace || got.WorkspaceID != ws ||
		string(got.TokenHash()) != string(presented.TokenHash()) {
		t.Fatalf("after a look-up: got %+v, want the found identity with the token's hash", got)
	}
	for range 2 {
		if stamp := auth.TakeStamp(ctx); stamp != nil {
			stamp(ctx)
		}
	}
	if stamped != 1 {
		t.Fatalf("stamps run: got %d, want 1", stamped)
	}
}

// TestTrustedOnlyWhenSettled: only the identities auth makes for the
// admin and a session are trusted; the same kinds assembled by hand, the
// zero Identity and nil are not.
func TestTrustedOnlyWhenSettled(t *testing.T) {
	a, err := auth.NewAuthenticator(admin)
	if err != nil {
		t.Fatal(err)
	}
	fromAdmin, err := a.Identify(bearer(admin))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		id   *auth.Identity
		want bool
	}{
		"AdminIdentity":     {auth.AdminIdentity(), true},
		"IdentifiedAdmin":   {fromAdmin, true},
		"AdminByHand":       {&auth.Identity{Kind: auth.Admin, TokenPrefix: "admin"}, false},
		"SessionByHand":     {&auth.Identity{Kind: auth.Session, UserID: "u"}, false},
		"Zero":              {&auth.Identity{}, false},
		"Nil":               {nil, false},
		"Bearer":            {auth.TokenIdentity("t"), false},
		"FoundFromSettled":  {auth.AdminIdentity().Found(auth.Org, uuid.Nil, "p"), false},
		"WorkspaceFromHash": {auth.TokenIdentity("t").Found(auth.Workspace, uuid.New(), "p"), false},
	} {
		if got := c.id.Trusted(); got != c.want {
			t.Errorf("%s: Trusted() got %v, want %v", name, got, c.want)
		}
	}
}
