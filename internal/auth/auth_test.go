package auth_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
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
		if err != nil || id.Kind() != auth.Admin || !id.Trusted() {
			t.Fatalf("got %+v, %v", id, err)
		}
	})
	t.Run("Bearer", func(t *testing.T) {
		id, err := a.Identify(bearer("pu_some-token"))
		if err != nil || id.Kind() != auth.Bearer || id.Trusted() || len(id.TokenHash()) != 32 {
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

// TestFoundIsANewIdentity: a look-up's verdict, recorded in the request's
// context (the Found a Check hands the store), makes a new identity beside
// the presented one, which never changes; the context says who the
// request acts as, and hands a due stamp out once.
func TestFoundIsANewIdentity(t *testing.T) {
	presented := auth.TokenIdentity("pu_some-token")
	ctx := auth.NewContext(context.Background(), presented)
	if got := auth.FromContext(ctx); got != presented {
		t.Fatalf("before a look-up: got %+v, want the presented identity", got)
	}
	ws := uuid.New()
	cred, err := presented.Check(ctx, &ws)
	if err != nil || !cred.Bearer || cred.Found != auth.FoundIn(ctx) {
		t.Fatalf("Check: got %+v, %v; want a Bearer credential recording into the request's context", cred, err)
	}
	stamped := 0
	*cred.Found = auth.Found{Kind: auth.Workspace, WorkspaceID: ws, TokenPrefix: "pu_some", Stamp: func(context.Context) { stamped++ }}
	if presented.Kind() != auth.Bearer || presented.TokenPrefix() != "" {
		t.Fatalf("presented identity changed: %+v", presented)
	}
	if got := auth.FromContext(ctx); got == presented || got.Kind() != auth.Workspace || got.WorkspaceID() != ws ||
		got.TokenPrefix() != "pu_some" || string(got.TokenHash()) != string(presented.TokenHash()) || got.Trusted() {
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

// TestCheckRefusesBeforeIO: what no function of auth made (nil, the zero
// Identity), a found identity without a token's hash, and a workspace
// token's identity for another workspace are refused by Check, which
// does no I/O; a Bearer without a request's record still gets one of its
// own.
func TestCheckRefusesBeforeIO(t *testing.T) {
	mine, other := uuid.New(), uuid.New()
	for name, c := range map[string]struct {
		id   *auth.Identity
		want error
	}{
		"Nil":               {nil, auth.ErrInvalid},
		"Zero":              {&auth.Identity{}, auth.ErrInvalid},
		"OrgWithoutHash":    {auth.AdminIdentity().Found(auth.Org, uuid.Nil, "p"), auth.ErrInvalid},
		"WorkspaceMismatch": {auth.TokenIdentity("t").Found(auth.Workspace, mine, "p"), auth.ErrNotAllowed},
	} {
		if _, err := c.id.Check(context.Background(), &other); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
	if c, err := auth.TokenIdentity("t").Check(context.Background(), nil); err != nil || !c.Bearer || c.Found == nil || len(c.TokenHash) != 32 {
		t.Errorf("Bearer: got %+v, %v", c, err)
	}
	if c, err := auth.AdminIdentity().Check(context.Background(), &other); err != nil || !c.Trusted || c.TokenHash != nil {
		t.Errorf("Admin: got %+v, %v", c, err)
	}
}

// TestIdentityFieldsUnexported: no package but auth can assemble an
// Identity (other than the zero value, which Check refuses): a
// hand-built org identity without a token's hash, or an admin one, does
// not compile outside auth.
func TestIdentityFieldsUnexported(t *testing.T) {
	typ := reflect.TypeFor[auth.Identity]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			t.Errorf("auth.Identity.%s is exported: another package can assemble an identity", f.Name)
		}
	}
}

// TestTrustedOnlyWhenSettled: only the identities auth makes for the
// admin and a session are trusted; the zero Identity (all another package
// can assemble), nil, and identities found from a bearer are not.
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
