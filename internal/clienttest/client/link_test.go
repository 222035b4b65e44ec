package client_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/clienttest/clientkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestLink: Link returns an absolute download link that opens with a
// bare GET (no token) and gives the file, until its ExpiresAt (DOWNLOAD_LINK_TTL
// after now); another workspace's token gets an *APIError and no link.
func TestLink(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	wsc := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, ws))
	ctx := clientkit.Ctx(t)
	data := clientkit.RandomBytes(3000, 7)
	staged, err := wsc.Upload(ctx, ws, []client.UploadFile{client.BytesFile("notes.bin", "application/octet-stream", data)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := wsc.Link(ctx, ws, staged[0].FileID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.URL, srv.URL+"/workspaces/"+ws.String()+"/pending-uploads/"+staged[0].FileID.String()+"/download?") {
		t.Errorf("URL %s: want the file's download route on %s", l.URL, srv.URL)
	}
	if d := time.Until(l.ExpiresAt); d <= 4*time.Minute || d > 5*time.Minute {
		t.Errorf("ExpiresAt %v: want 5 minutes from now", l.ExpiresAt)
	}
	resp, err := http.Get(l.URL) // no token, no cookie
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(got) != string(data) {
		t.Fatalf("GET the link: %d, %d bytes, %v; want 200 and the file", resp.StatusCode, len(got), err)
	}

	other := clientkit.MustClient(t, srv.URL, srv.WorkspaceToken(t, uuid.New()))
	_, err = other.Link(ctx, ws, staged[0].FileID)
	if apiErr, ok := errors.AsType[*client.APIError](err); !ok || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("another workspace's token: got %v, want a 401 *APIError", err)
	}
}
