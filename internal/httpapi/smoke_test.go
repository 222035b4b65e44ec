package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/apptest"
)

func TestMain(m *testing.M) { apptest.Main(m) }

// TestSmokeUploadListFetchAck walks the happy path once, end to end.
func TestSmokeUploadListFetchAck(t *testing.T) {
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	content := []byte{0x00, 0x9f, 0x92, 0x96, 'h', 'i'}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("files", "hello world.bin")
	fw.Write(content)
	mw.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/workspaces/"+ws.String()+"/chat/uploads", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
	resp := do(t, req)
	var up struct {
		Files []struct {
			FileID string `json:"file_id"`
			Name   string `json:"name"`
		} `json:"files"`
	}
	decode(t, resp, 200, &up)
	if len(up.Files) != 1 || up.Files[0].Name != "hello_world.bin" {
		t.Fatalf("upload: got %+v", up)
	}
	id := up.Files[0].FileID

	req, _ = http.NewRequest("GET", srv.URL+"/workspaces/"+ws.String()+"/pending-uploads", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	var list struct {
		Uploads []map[string]any `json:"uploads"`
	}
	decode(t, do(t, req), 200, &list)
	if len(list.Uploads) != 1 || list.Uploads[0]["file_id"] != id {
		t.Fatalf("list: got %+v", list)
	}

	req, _ = http.NewRequest("GET", srv.URL+"/workspaces/"+ws.String()+"/pending-uploads/"+id+"/content", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp = do(t, req)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, content) {
		t.Fatalf("content: %d %q", resp.StatusCode, got)
	}

	req, _ = http.NewRequest("POST", srv.URL+"/workspaces/"+ws.String()+"/pending-uploads/"+id+"/ack", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	var ack map[string]any
	decode(t, do(t, req), 200, &ack)
	if ack["acked"] != true {
		t.Fatalf("ack: got %v", ack)
	}
}

func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decode(t *testing.T, resp *http.Response, status int, v any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status: got %d, want %d: %s", resp.StatusCode, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
