package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/s3blobs"
	"github.com/pendinguploads/pendinguploads/internal/scanresult"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestCanvasMeetsBlocked runs clients.md's drop-in for a server that
// scans for malware (testdata/canvas/scanned.js: uploadFiles, then
// whenScanned; the canvas's own send hook) in Chromium, against the
// service with MALWARE_SCAN and a bucket, scanned by clamd through the
// stand-in that plays GuardDuty: a message with the EICAR test file
// reaches the person as the chat's sentence, "Upload failed: “eicar.com”
// was refused as unsafe…", code blocked, and the workspace never lists
// it; a clean file's message becomes its attachment.
func TestCanvasMeetsBlocked(t *testing.T) {
	chromium, node := requireBrowser(t)
	clamd, err := scanresult.StartClamd(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("%v (make test installs clamav-daemon: scripts/ensure-tools.sh)", err)
	}
	t.Cleanup(clamd.Stop)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MALWARE_SCAN": "guardduty"}})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	standin := &scanresult.Standin{Store: srv.Store, Bucket: s3blobs.NewFromClient(srv.Objects.Client, srv.Bucket),
		Handler: scanresult.New(srv.Store, srv.App.Config, log, metrics.New(io.Discard, metrics.Namespace)),
		Addr:    clamd.Addr, Every: 50 * time.Millisecond, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { standin.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	page := canvasPages(t, srv.URL) // the service on the canvas's own origin, as the platform's edge routes it
	ws := uuid.New()
	eicar := `X5O!P%@AP[4\PZX54(P^)7CC)7}$` + `EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`
	type file struct {
		Name string `json:"name"`
		Text string `json:"text"`
	}
	args := func(files ...file) map[string]any {
		return map[string]any{"api": page.URL, "token": srv.AdminToken, "ws": ws.String(), "files": files}
	}
	out := driveSteps(t, node, chromium, []step{
		{Name: "infected", Page: page.URL + "/scanned.html", Fn: "send", Args: args(file{"eicar.com", eicar})},
		{Name: "clean", Page: page.URL + "/scanned.html", Fn: "send", Args: args(file{"notes.txt", "meeting at ten\n"})},
	})
	type sent struct {
		OK    bool `json:"ok"`
		Error *struct {
			Code, Message string
		} `json:"error"`
		Sentence    string `json:"sentence"`
		Attachments []struct {
			URI  string `json:"uri"`
			Name string `json:"name"`
		} `json:"attachments"`
	}
	var res struct {
		Infected sent `json:"infected"`
		Clean    sent `json:"clean"`
	}
	decodeSteps(t, out, &res)
	want := "Upload failed: “eicar.com” was refused as unsafe: a malware scan found a threat, and nothing of it reached the workspace"
	if res.Infected.OK || res.Infected.Error == nil || res.Infected.Error.Code != "blocked" || res.Infected.Sentence != want {
		t.Errorf("infected: got %+v, %+v; want the sentence %q", res.Infected, res.Infected.Error, want)
	}
	if !res.Clean.OK || len(res.Clean.Attachments) != 1 || res.Clean.Attachments[0].Name != "notes.txt" {
		t.Errorf("clean: got %+v", res.Clean)
	}
	recs, _, err := srv.Store.List(context.Background(), auth.AdminIdentity(), ws, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Filename != "notes.txt" || strings.Contains(recs[0].Filename, "eicar") {
		t.Errorf("the workspace lists %+v, want notes.txt alone", recs)
	}
}

// TestCanvasMeetsOperatorBlocked: a file held because its scan could not
// decide, then blocked by an operator (pendingctl scans block:
// Store.DecideHeld), reaches the person through the drop-in's
// whenScanned as the chat's sentence saying an administrator refused it,
// not that a threat was found (none was), code blocked.
func TestCanvasMeetsOperatorBlocked(t *testing.T) {
	chromium, node := requireBrowser(t)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"MALWARE_SCAN": "guardduty"}})
	page := canvasPages(t, srv.URL)
	ws := uuid.New()
	ctx := context.Background()

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("files", "report.odt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte("a document the scanner could not read\n"))
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/workspaces/"+ws.String()+"/chat/uploads", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
			Name   string `json:"name"`
		} `json:"files"`
	}
	err = json.NewDecoder(resp.Body).Decode(&staged)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(staged.Files) != 1 {
		t.Fatalf("upload: %d, %+v, %v", resp.StatusCode, staged, err)
	}
	file := uuid.MustParse(staged.Files[0].FileID)
	if _, err := srv.Store.Decide(ctx, "objects/"+ws.String()+"/"+file.String(), pendinguploads.Hold, "UNSUPPORTED", "the scanner does not read this type"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Store.DecideHeld(ctx, ws, file, pendinguploads.Block); err != nil {
		t.Fatal(err)
	}

	out := driveSteps(t, node, chromium, []step{{Name: "blocked", Page: page.URL + "/scanned.html", Fn: "wait",
		Args: map[string]any{"api": page.URL, "token": srv.AdminToken, "ws": ws.String(), "files": staged.Files}}})
	var res struct {
		Blocked struct {
			OK    bool `json:"ok"`
			Error *struct {
				Code string
			} `json:"error"`
			Sentence string `json:"sentence"`
		} `json:"blocked"`
	}
	decodeSteps(t, out, &res)
	want := "Upload failed: “report.odt” was refused as unsafe: an administrator refused it after the malware scan could not decide, and nothing of it reached the workspace"
	if res.Blocked.OK || res.Blocked.Error == nil || res.Blocked.Error.Code != "blocked" || res.Blocked.Sentence != want {
		t.Errorf("got %+v; want code blocked and the sentence %q", res.Blocked, want)
	}
}
