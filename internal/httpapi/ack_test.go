package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// wantAcked checks the exact body {"acked":true}.
func wantAcked(t *testing.T, res result) {
	t.Helper()
	wantStatus(t, res, http.StatusOK)
	if got := res.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
	body := jsonObject(t, res.body)
	if got := keys(body); !slices.Equal(got, []string{"acked"}) || body["acked"] != true {
		t.Errorf("body: got %s, want {\"acked\":true}", res.body)
	}
}

func TestAck(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})

	t.Run("FirstThenAgain", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		f := stage(t, srv, ws, "a", "", "a")
		wantAcked(t, post(t, ackURL(srv, ws.String(), f.FileID), tok, "", nil))
		_, first := timestamps(t, srv, f.FileID)
		if first == nil {
			t.Fatal("acked_at after ack: got nil, want set")
		}
		time.Sleep(5 * time.Millisecond)
		wantAcked(t, post(t, ackURL(srv, ws.String(), f.FileID), tok, "", nil))
		wantAcked(t, post(t, ackURL(srv, ws.String(), f.FileID), srv.AdminToken, "", nil))
		if _, again := timestamps(t, srv, f.FileID); again == nil || !again.Equal(*first) {
			t.Errorf("acked_at after acking again: got %v, want %v", again, first)
		}
	})

	t.Run("AckedLeavesListStaysReadable", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		keep := stage(t, srv, ws, "keep", "", "k")
		f := stage(t, srv, ws, "a", "", "a")
		wantAcked(t, post(t, ackURL(srv, ws.String(), f.FileID), tok, "", nil))
		// The canvas re-opens attachments from chat history after the ack.
		wantContent(t, get(t, contentURL(srv, ws.String(), f.FileID), tok), []byte("a"), "application/octet-stream",
			`attachment; filename="a"; filename*=UTF-8''a`)
		if got, want := listQuery(t, srv, ws, tok, "").ids(), []string{keep.FileID}; !slices.Equal(got, want) {
			t.Errorf("list after ack: got %v, want %v", got, want)
		}
	})

	t.Run("Gone", func(t *testing.T) {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		expired := stage(t, srv, ws, "expired", "", "e")
		expire(t, srv, expired.FileID)
		for _, tt := range []struct{ name, id string }{
			{"Absent", uuid.NewString()},
			{"Expired", expired.FileID},
		} {
			t.Run(tt.name, func(t *testing.T) {
				for _, token := range []string{tok, srv.AdminToken} {
					wantError(t, post(t, ackURL(srv, ws.String(), tt.id), token, "", nil), http.StatusNotFound, msgGone, nil)
				}
			})
		}
		if _, acked := timestamps(t, srv, expired.FileID); acked != nil {
			t.Errorf("acked_at of the expired row: got %v, want nil", acked)
		}
	})

	t.Run("OtherWorkspacesFile", func(t *testing.T) {
		owner, other := uuid.New(), uuid.New()
		f := stage(t, srv, owner, "theirs", "", "t")
		otherTok := srv.WorkspaceToken(t, other)
		for _, tt := range []struct{ name, token string }{
			{"AdminOnTheWrongWorkspace", srv.AdminToken},
			{"OtherWorkspacesToken", otherTok},
		} {
			t.Run(tt.name, func(t *testing.T) {
				wantError(t, post(t, ackURL(srv, other.String(), f.FileID), tt.token, "", nil), http.StatusNotFound, msgGone, nil)
				if _, acked := timestamps(t, srv, f.FileID); acked != nil {
					t.Errorf("acked_at: got %v, want nil", acked)
				}
			})
		}
		// Still the owner's to fetch, list and ack.
		ownerTok := srv.WorkspaceToken(t, owner)
		if got := listQuery(t, srv, owner, ownerTok, "").ids(); !slices.Equal(got, []string{f.FileID}) {
			t.Errorf("owner's list: got %v, want [%s]", got, f.FileID)
		}
		wantAcked(t, post(t, ackURL(srv, owner.String(), f.FileID), ownerTok, "", nil))
	})

	t.Run("OtherWorkspacesAckedFile", func(t *testing.T) {
		owner, other := uuid.New(), uuid.New()
		f := stage(t, srv, owner, "theirs", "", "t")
		wantAcked(t, post(t, ackURL(srv, owner.String(), f.FileID), srv.AdminToken, "", nil))
		res := post(t, ackURL(srv, other.String(), f.FileID), srv.WorkspaceToken(t, other), "", nil)
		wantError(t, res, http.StatusNotFound, msgGone, nil)
		if strings.Contains(string(res.body), `"acked":`) {
			t.Errorf("body: got %s, want no ack", res.body)
		}
	})
}
