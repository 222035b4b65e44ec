package httpapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

func scanURL[S server](srv S, ws string, ids ...string) string {
	q := url.Values{"file_id": ids}
	return baseURL(srv) + "/workspaces/" + ws + "/chat/uploads/scan?" + q.Encode()
}

func scanStates(t *testing.T, res result) []wire.FileScan {
	t.Helper()
	wantStatus(t, res, http.StatusOK)
	var out wire.ScanAnswer
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatalf("decode %s: %v", res.body, err)
	}
	return out.Files
}

// TestScanRoute: on a scanned server the sender, with the token it
// uploaded with, reads each file's state: pending while the workspace's
// list does not show it, blocked with threats_found once the scan found
// malware, clean once delivered; not_found for another workspace's file
// (asked with another workspace's token, or the admin's, on its path),
// answered exactly as an unknown one; no
// credential is 401, a bad file_id 400; a server that does not scan
// answers clean.
func TestScanRoute(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MALWARE_SCAN": "guardduty"}})
	ctx := context.Background()
	ws, other := uuid.New(), uuid.New()
	token, otherToken := srv.WorkspaceToken(t, ws), srv.WorkspaceToken(t, other)
	files := uploadParts(t, srv, ws.String(), token, file("bad.com", "", "pretend EICAR"), file("good.txt", "text/plain", "hello"))
	bad, good := files[0].FileID, files[1].FileID
	unknown := uuid.NewString()

	got := scanStates(t, get(t, scanURL(srv, ws.String(), bad, good, unknown), token))
	want := []wire.FileScan{{FileID: uuid.MustParse(bad), State: wire.ScanPending}, {FileID: uuid.MustParse(good), State: wire.ScanPending},
		{FileID: uuid.MustParse(unknown), State: wire.ScanNotFound}}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("pending: got %+v, want %+v", got, want)
	}
	list := get(t, listURL(srv, ws.String()), token)
	if wantStatus(t, list, http.StatusOK); len(jsonObject(t, list.body)["uploads"].([]any)) != 0 {
		t.Fatalf("list while pending: %s", list.body)
	}

	key := func(id string) string { return "objects/" + ws.String() + "/" + id }
	if _, err := srv.Store.Decide(ctx, key(bad), pendinguploads.Block, "THREATS_FOUND", "EICAR-Test-File (not a virus)"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Store.Decide(ctx, key(good), pendinguploads.Deliver, "NO_THREATS_FOUND", ""); err != nil {
		t.Fatal(err)
	}
	got = scanStates(t, get(t, scanURL(srv, ws.String(), bad, good), token))
	if got[0].State != wire.ScanBlocked || got[0].Reason != wire.ReasonThreatsFound || got[1].State != wire.ScanClean || got[1].Reason != "" {
		t.Fatalf("decided: got %+v", got)
	}
	if b := get(t, scanURL(srv, ws.String(), bad), token).body; strings.Contains(string(b), "EICAR") {
		t.Fatalf("the threat's name told to the sender: %s", b)
	}

	// Another workspace asks about ws's file, on its own path: not_found,
	// the very answer of a file that is nowhere (but for the id asked),
	// with its own token and with the admin's.
	if got := scanStates(t, get(t, scanURL(srv, other.String(), bad), otherToken)); got[0].State != wire.ScanNotFound {
		t.Fatalf("another workspace's file: got %+v", got)
	}
	for _, tok := range []string{otherToken, srv.AdminToken} {
		theirs, none := get(t, scanURL(srv, other.String(), bad), tok), get(t, scanURL(srv, other.String(), unknown), tok)
		theirs.header.Del("Date")
		none.header.Del("Date")
		if theirs.status != none.status || strings.ReplaceAll(string(theirs.body), bad, unknown) != string(none.body) ||
			!maps.EqualFunc(theirs.header, none.header, slices.Equal) {
			t.Fatalf("another workspace's file: %d %v %s; a file that is nowhere: %d %v %s",
				theirs.status, theirs.header, theirs.body, none.status, none.header, none.body)
		}
	}
	// Its token on ws's path: refused.
	wantError(t, get(t, scanURL(srv, ws.String(), bad), otherToken), http.StatusUnauthorized, "invalid workspace auth token", nil)
	wantStatus(t, get(t, scanURL(srv, ws.String(), bad), ""), http.StatusUnauthorized)
	wantError(t, get(t, scanURL(srv, ws.String(), "not-a-uuid"), token), http.StatusBadRequest, "invalid file_id", nil)
	wantError(t, get(t, baseURL(srv)+"/workspaces/"+ws.String()+"/chat/uploads/scan", token), http.StatusBadRequest,
		"invalid file_id", nil)

	plain := apptest.NewServer(t, apptest.Options{})
	f := stage(t, plain, ws, "a.txt", "text/plain", "hi")
	if got := scanStates(t, get(t, scanURL(plain, ws.String(), f.FileID), plain.AdminToken)); got[0].State != wire.ScanClean {
		t.Fatalf("a server that does not scan: got %+v, want clean", got)
	}
}
