package client_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/clienttest/clientkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// Edits of an error body: another message (what a reworded server
// answers), no code (a server older than codes), another code.
var (
	reworded  = func(b map[string]any) { b["error"] = fmt.Sprintf("reworded: %v", b["error"]) }
	codeless  = func(b map[string]any) { delete(b, "code") }
	recoded   = func(b map[string]any) { b["code"] = "something_else" }
	unchanged = func(map[string]any) {}
)

// TestBranchesOnCodes: the client acts on an answer's code, not its
// message. A reworded message changes nothing: the 413 still teaches the
// request cap, the quota is still told, a resume of a committed upload
// still answers its file. The same message under another code is not
// acted on; a body without a code (a server older than codes) is, for
// the answers the client acts on.
func TestBranchesOnCodes(t *testing.T) {
	t.Run("RequestCap", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"MAX_REQUEST_BYTES": "1048576"}})
		files := []client.UploadFile{
			client.BytesFile("a.bin", "", clientkit.RandomBytes(600<<10, 1)),
			client.BytesFile("b.bin", "", clientkit.RandomBytes(600<<10, 2)),
		}
		for name, tc := range map[string]struct {
			edit   func(map[string]any)
			learns bool
		}{
			"Unchanged": {unchanged, true}, "Reworded": {reworded, true}, "Codeless": {codeless, true}, "Recoded": {recoded, false},
		} {
			t.Run(name, func(t *testing.T) {
				ws := uuid.New()
				c := clientkit.MustClient(t, apptest.ErrorProxy(t, srv.URL, tc.edit), srv.AdminToken)
				staged, err := c.Upload(clientkit.Ctx(t), ws, files)
				switch {
				case tc.learns && (err != nil || len(staged) != 2):
					t.Fatalf("got %d files, %v; want both, in two requests", len(staged), err)
				case !tc.learns && !client.IsTooLarge(err):
					t.Fatalf("got %d files, %v; want the 413, not acted on", len(staged), err)
				}
			})
		}
	})
	t.Run("Quota", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{"WORKSPACE_MAX_PENDING_FILES": "64"}})
		ws := uuid.New()
		c := clientkit.MustClient(t, apptest.ErrorProxy(t, srv.URL, reworded), srv.AdminToken)
		files := make([]client.UploadFile, 65)
		for i := range files {
			files[i] = client.BytesFile(fmt.Sprintf("f%d.txt", i), "", []byte("x"))
		}
		if _, err := c.Upload(clientkit.Ctx(t), ws, files[:64]); err != nil {
			t.Fatal(err)
		}
		_, err := c.Upload(clientkit.Ctx(t), ws, files[64:])
		if !client.IsQuotaExceeded(err) || client.ErrorCode(err) != wire.CodeQuotaExceeded {
			t.Fatalf("got %v (code %q), want quota_exceeded", err, client.ErrorCode(err))
		}
		var ae *client.APIError
		if !errors.As(err, &ae) {
			t.Fatalf("got %T, want *client.APIError", err)
		}
		if q, ok := ae.Quota(); !ok || q.Quota != "pending_files" || q.Limit != 64 {
			t.Fatalf("quota: got %+v, %v", q, ok)
		}
	})
	t.Run("Committed", func(t *testing.T) {
		srv, _ := partsServer(t)
		ws := uuid.New()
		c := clientkit.MustClient(t, apptest.ErrorProxy(t, srv.URL, reworded), srv.AdminToken)
		data := clientkit.RandomBytes(11*mib, 31)
		f := client.BytesFile("big.bin", "", data)
		var id uuid.UUID
		f.OnPresigned = func(p client.PresignedUpload) error { id = p.UploadID; return nil }
		staged, err := c.Upload(clientkit.Ctx(t), ws, []client.UploadFile{f})
		if err != nil || id == uuid.Nil {
			t.Fatalf("upload: %v (upload id %s)", err, id)
		}
		again, err := c.ResumeUpload(clientkit.Ctx(t), ws, id, f)
		if err != nil || again.FileID != staged[0].FileID {
			t.Fatalf("resume of a committed upload: got %+v, %v; want file %s", again, err, staged[0].FileID)
		}
	})
}
