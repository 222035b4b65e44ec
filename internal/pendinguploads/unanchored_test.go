package pendinguploads_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestDeletedAnchor is issue 43's probe: an org-2 token anchored to a
// workspace of org 2 is refused on org 1's workspace; once that anchor
// workspace is deleted (the platform's foreign key sets the token's
// org_id NULL), it is still refused there, now as ErrUnanchored, and reads
// nothing, not every workspace. With AcceptUnanchoredOrgTokens (the
// platform's legacy rule, kept only by choice) it lists org 1's files.
// Every use of the unanchored token is logged by its prefix, never the
// token, and counted, with its outcome.
func TestDeletedAnchor(t *testing.T) {
	ctx := context.Background()
	o := newOrgTrees(t)
	const token = "org2_anchored_by_child2"
	o.mint(token, &o.child2, "")
	newStore := func(accept bool) (*pendinguploads.Store, *bytes.Buffer, *bytes.Buffer) {
		settings := apptest.StoreSettings()
		settings.AcceptUnanchoredOrgTokens = accept
		s := pendinguploads.New(o.platformPool, nil, settings)
		var logs, emf bytes.Buffer
		s.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		s.Metrics = metrics.New(&emf, metrics.Namespace)
		return s, &logs, &emf
	}
	s, logs, emf := newStore(false)
	if _, err := s.Stage(ctx, auth.AdminIdentity(), o.grand1, []pendinguploads.File{{Content: []byte("org 1's"), Filename: "a.txt"}}); err != nil {
		t.Fatal(err)
	}
	list := func(s *pendinguploads.Store) (int, error) {
		id := auth.TokenIdentity(token)
		recs, _, err := s.List(auth.NewContext(ctx, id), id, o.grand1, 100, nil)
		return len(recs), err
	}
	if n, err := list(s); !errors.Is(err, auth.ErrNotAllowed) || n != 0 {
		t.Fatalf("anchored in org 2, on org 1's workspace: got %d files, %v; want ErrNotAllowed", n, err)
	}
	if _, err := o.platformPool.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, o.child2); err != nil {
		t.Fatal(err)
	}

	t.Run("Refused", func(t *testing.T) {
		if n, err := list(s); !errors.Is(err, auth.ErrUnanchored) || n != 0 {
			t.Fatalf("its anchor deleted: got %d files, %v; want ErrUnanchored and none", n, err)
		}
		checkUse(t, logs, emf, token, metrics.OutcomeRefused)
	})
	t.Run("AcceptUnanchoredOrgTokens", func(t *testing.T) {
		s, logs, emf := newStore(true)
		if n, err := list(s); err != nil || n != 1 {
			t.Fatalf("the legacy rule: got %d files, %v; want org 1's file", n, err)
		}
		checkUse(t, logs, emf, token, metrics.OutcomeAccepted)
	})
}

// checkUse checks that one use of an unanchored org token was logged (a
// warning naming its prefix, never the token) and counted with outcome.
func checkUse(t *testing.T, logs, emf *bytes.Buffer, token, outcome string) {
	t.Helper()
	if strings.Contains(logs.String(), token) || strings.Contains(emf.String(), token) {
		t.Fatalf("the token in the log or the metrics: %s %s", logs, emf)
	}
	line := logs.String()
	if strings.Count(line, "without an anchor workspace") != 1 || !strings.Contains(line, `"level":"WARN"`) ||
		!strings.Contains(line, `"token_prefix":"`+token[:6]+`"`) || !strings.Contains(line, `"outcome":"`+outcome+`"`) {
		t.Fatalf("log: %s; want one warning naming the token's prefix, outcome %s", line, outcome)
	}
	m := emf.String()
	if strings.Count(m, metrics.UnanchoredOrgToken) < 1 || strings.Count(m, "\n") != 1 || !strings.Contains(m, `"outcome":"`+outcome+`"`) {
		t.Fatalf("metrics: %s; want one count of %s, outcome %s", m, metrics.UnanchoredOrgToken, outcome)
	}
}
