package main

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/scanresult"
)

// TestMalwareScanEndToEnd runs make run's dev server with MALWARE_SCAN=clamav
// alone (it starts clamd with the repository's signatures, as it starts
// Postgres, and a local S3: the scanner reads objects) and uploads, as the printed workspace, the EICAR test
// file, a file matching the custom signature and a clean file, in one
// request: the sender reads each one's state on the scan route until none
// is pending; both infected files are blocked (threats_found), never
// listed nor fetched; the clean one is delivered, listed and fetched.
func TestMalwareScanEndToEnd(t *testing.T) {
	dev := startDevServer(t, localDevEnv(t, map[string]string{"MALWARE_SCAN": "clamav"}))
	banner := dev.stdout.String()
	wsToken := regexp.MustCompile(`workspace token\s+(\S+)`).FindStringSubmatch(banner)
	listURL := regexp.MustCompile(`(http://\S+/pending-uploads)\n`).FindStringSubmatch(banner)
	if wsToken == nil || listURL == nil || !strings.Contains(banner, "clamd") {
		t.Fatalf("banner lacks the token, the list URL or clamd:\n%s", banner)
	}
	base := strings.TrimSuffix(listURL[1], "/pending-uploads")
	call := func(method, u, ctype string, body []byte) (int, []byte) {
		t.Helper()
		code, _, b := callAPI(t, nil, method, u, wsToken[1], ctype, bytes.NewReader(body))
		return code, b
	}

	eicar := `X5O!P%@AP[4\PZX54(P^)7CC)7}$` + `EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range []struct{ name, data string }{
		{"eicar.com", eicar}, {"report.pdf", "%PDF " + scanresult.CustomMarker}, {"hello.txt", "hello, world\n"},
	} {
		w, _ := mw.CreateFormFile("files", f.name)
		w.Write([]byte(f.data))
	}
	mw.Close()
	code, b := call("POST", base+"/chat/uploads", mw.FormDataContentType(), body.Bytes())
	var staged struct {
		Files []struct {
			FileID string `json:"file_id"`
		} `json:"files"`
	}
	if code != 200 || json.Unmarshal(b, &staged) != nil || len(staged.Files) != 3 {
		t.Fatalf("upload: %d %s", code, b)
	}
	q := url.Values{}
	for _, f := range staged.Files {
		q.Add("file_id", f.FileID)
	}
	type state struct {
		FileID string `json:"file_id"`
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	var states struct{ Files []state }
	deadline := time.Now().Add(time.Minute)
	for {
		code, b := call("GET", base+"/chat/uploads/scan?"+q.Encode(), "", nil)
		if code != 200 || json.Unmarshal(b, &states) != nil {
			t.Fatalf("scan route: %d %s", code, b)
		}
		pending := false
		for _, s := range states.Files {
			pending = pending || s.State == "pending"
		}
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still pending after a minute: %+v\n%s", states.Files, dev.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := []state{{staged.Files[0].FileID, "blocked", "threats_found"}, {staged.Files[1].FileID, "blocked", "threats_found"},
		{staged.Files[2].FileID, "clean", ""}}
	for i, w := range want {
		if states.Files[i] != w {
			t.Errorf("file %d: got %+v, want %+v", i, states.Files[i], w)
		}
	}
	_, list := call("GET", listURL[1], "", nil)
	for i, f := range staged.Files {
		listed := strings.Contains(string(list), f.FileID)
		code, _ := call("GET", listURL[1]+"/"+f.FileID+"/content", "", nil)
		if delivered := want[i].State == "clean"; listed != delivered || (code == 200) != delivered {
			t.Errorf("file %d: listed %v, content %d; want delivered %v", i, listed, code, delivered)
		}
	}
	if !strings.Contains(dev.stderr.String(), `"msg":"malware blocked"`) {
		t.Errorf("no 'malware blocked' log line")
	}
}
