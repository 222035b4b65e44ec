package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestUploadBadInput covers form A's table of API.md, row by row: each
// answer exact, nothing asked of the store (over the fake: parsing is
// HTTP's own).
func TestUploadBadInput(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{})
	good := file("good.txt", "text/plain", "good")
	sixtyFive := make([]part, 65)
	for i := range sixtyFive {
		sixtyFive[i] = file(fmt.Sprintf("f%02d.txt", i), "text/plain", "x")
	}
	body, ctype := form(t, good)
	boundary := strings.TrimPrefix(ctype, "multipart/form-data; boundary=")

	tests := []struct {
		name   string
		ctype  string
		body   []byte
		status int
		msg    string
		extra  map[string]any
	}{
		{"MalformedNoContentType", "", body, 400, msgMalformed, nil},
		{"MalformedTextPlain", "text/plain", body, 400, msgMalformed, nil},
		{"MalformedFormURLEncoded", "application/x-www-form-urlencoded", []byte("files=a"), 400, msgMalformed, nil},
		{"MalformedMultipartMixed", "multipart/mixed; boundary=" + boundary, body, 400, msgMalformed, nil},
		{"MalformedNoBoundary", "multipart/form-data", body, 400, msgMalformed, nil},
		{"MalformedEmptyBoundary", "multipart/form-data; boundary=", body, 400, msgMalformed, nil},
		{"MalformedUnparsableContentType", "multipart/form-data; boundary", body, 400, msgMalformed, nil},
		{"MalformedWrongBoundary", "multipart/form-data; boundary=not-the-one", body, 400, msgMalformed, nil},
		{"MalformedEmptyBody", ctype, nil, 400, msgMalformed, nil},
		{"MalformedTruncatedBody", ctype, body[:len(body)-len(boundary)-8], 400, msgMalformed, nil},
		{"MalformedCutInHeaders", ctype, body[:len(boundary)+20], 400, msgMalformed, nil},
		{"MalformedGarbage", ctype, []byte("this is not multipart at all\r\n"), 400, msgMalformed, nil},
		{"NoFilesOtherField", "", nil, 400, msgNoFiles, nil},
		{"NoFilesOnlyClosingBoundary", "", nil, 400, msgNoFiles, nil},
		{"NoFilesTextValueNamedFiles", "", nil, 400, msgNoFiles, nil},
		{"TooManyFiles", "", nil, 400, msgTooMany, nil},
		{"EmptyFile", "", nil, 400, msgEmpty, map[string]any{"filename": "my_empty.txt"}},
		{"EmptyFileAfterGoodOne", "", nil, 400, msgEmpty, map[string]any{"filename": "passwd"}},
		{"EmptyFileBeforeGoodOne", "", nil, 400, msgEmpty, map[string]any{"filename": "file"}},
	}
	forms := map[string][]part{
		"NoFilesOtherField":          {{field: "other", filename: "a.txt", content: []byte("a")}},
		"NoFilesOnlyClosingBoundary": {},
		"NoFilesTextValueNamedFiles": {{text: true, content: []byte("just text")}, {field: "note", text: true, content: []byte("x")}},
		"TooManyFiles":               sixtyFive,
		"EmptyFile":                  {file("my empty.txt", "text/plain", "")},
		"EmptyFileAfterGoodOne":      {good, file("../../etc/passwd", "", "")},
		"EmptyFileBeforeGoodOne":     {file("..", "", ""), good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := uuid.New()
			ctype, body := tt.ctype, tt.body
			if parts, ok := forms[tt.name]; ok {
				body, ctype = form(t, parts...)
			}
			wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body), tt.status, tt.msg, tt.extra)
			wantNothingStored(t, srv, ws)
		})
	}

	// The body ends before its declared Content-Length: the read fails.
	t.Run("MalformedUnreadableBody", func(t *testing.T) {
		ws := uuid.New()
		head := fmt.Sprintf("POST /workspaces/%s/chat/uploads HTTP/1.1\nHost: x\nAuthorization: Bearer %s\n"+
			"Content-Type: %s\nContent-Length: %d", ws, srv.AdminToken, ctype, len(body)+1000)
		wantError(t, rawRequest(t, srv, head, body[:len(body)/2], true), 400, msgMalformed, nil)
		wantNothingStored(t, srv, ws)
	})
}

// TestUploadRequestCap covers "whole body over the request cap", with an
// honest Content-Length and with a body of unknown length (over the fake;
// the configuration's cap reaching the API is TestUploadDefaultRequestCap's,
// against the whole service).
func TestUploadRequestCap(t *testing.T) {
	t.Parallel()
	const limit = 65536
	srv := newFakeServer(t, fakeOptions{MaxRequestBytes: limit})

	// sized returns a form whose body is exactly n bytes: one file, and a
	// filler field that counts towards the cap but is not a file.
	sized := func(t *testing.T, n int) ([]byte, string) {
		t.Helper()
		content := bytes.Repeat([]byte("f"), 1000)
		b, _ := form(t, part{filename: "f.bin", content: content}, part{field: "pad", text: true})
		pad := n - len(b)
		if pad < 0 {
			t.Fatalf("form of %d bytes cannot be built", n)
		}
		b, ct := form(t, part{filename: "f.bin", content: content}, part{field: "pad", text: true, content: bytes.Repeat([]byte("p"), pad)})
		if len(b) != n {
			t.Fatalf("form: got %d bytes, want %d", len(b), n)
		}
		return b, ct
	}

	t.Run("OKAtTheCap", func(t *testing.T) {
		ws := uuid.New()
		b, ct := sized(t, limit)
		wantStatus(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), http.StatusOK)
	})
	t.Run("TooLargeContentLength", func(t *testing.T) {
		ws := uuid.New()
		b, ct := sized(t, limit+1)
		wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), 413, msgFilesCap, map[string]any{"max": limit})
		wantNothingStored(t, srv, ws)
	})
	t.Run("TooLargeChunked", func(t *testing.T) {
		ws := uuid.New()
		b, ct := sized(t, limit+1)
		req := newRequest(t, "POST", uploadsURL(srv, ws.String()), srv.AdminToken, ct, io.MultiReader(bytes.NewReader(b)))
		req.ContentLength = -1
		wantError(t, send(t, req), 413, msgFilesCap, map[string]any{"max": limit})
		wantNothingStored(t, srv, ws)
	})
	t.Run("TooLargeChunkedInAFile", func(t *testing.T) {
		ws := uuid.New()
		b, ct := form(t, file("big.bin", "", strings.Repeat("b", limit)))
		req := newRequest(t, "POST", uploadsURL(srv, ws.String()), srv.AdminToken, ct, io.MultiReader(bytes.NewReader(b)))
		req.ContentLength = -1
		wantError(t, send(t, req), 413, msgFilesCap, map[string]any{"max": limit})
		wantNothingStored(t, srv, ws)
	})
	// With a bucket, the next step names the presign route, which takes
	// a file up to the per-file cap.
	t.Run("TooLargeNamesPresign", func(t *testing.T) {
		srv := newFakeServer(t, fakeOptions{MaxRequestBytes: limit, Bucket: true})
		ws := uuid.New()
		b, ct := sized(t, limit+1)
		wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), 413, msgFilesCapPresign, map[string]any{"max": limit})
		req := newRequest(t, "POST", uploadsURL(srv, ws.String()), srv.AdminToken, ct, io.MultiReader(bytes.NewReader(b)))
		req.ContentLength = -1
		wantError(t, send(t, req), 413, msgFilesCapPresign, map[string]any{"max": limit})
		wantNothingStored(t, srv, ws)
	})
	t.Run("OKChunkedAtTheCap", func(t *testing.T) {
		ws := uuid.New()
		b, ct := sized(t, limit)
		req := newRequest(t, "POST", uploadsURL(srv, ws.String()), srv.AdminToken, ct, io.MultiReader(bytes.NewReader(b)))
		req.ContentLength = -1
		wantStatus(t, send(t, req), http.StatusOK)
	})
}

// TestUploadDefaultRequestCap checks the 4 MiB default, refused on the
// declared Content-Length before the body is read. Against the whole
// service: the default is the configuration's.
func TestUploadDefaultRequestCap(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	_, ct := form(t, file("a", "", "a"))
	head := fmt.Sprintf("POST /workspaces/%s/chat/uploads HTTP/1.1\nHost: x\nAuthorization: Bearer %s\n"+
		"Content-Type: %s\nContent-Length: %d", ws, srv.AdminToken, ct, 4<<20+1)
	wantError(t, rawRequest(t, srv, head, nil, false), 413, msgFilesCap, map[string]any{"max": 4 << 20})
	wantNothingStored(t, srv, ws)
}

// TestUploadPerFileCap needs a request cap above 25 MiB to reach the
// per-file cap (over the fake, whose FileCap is the default's; the
// store's own cap is pendinguploads' TestStage).
func TestUploadPerFileCap(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{MaxRequestBytes: 30 << 20})

	t.Run("FileExceedsPerFileCap", func(t *testing.T) {
		ws := uuid.New()
		b, ct := form(t, file("a.txt", "", "a"), part{filename: "big file.bin", content: make([]byte, maxFileBytes+1)})
		wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), 413, msgFileCap,
			map[string]any{"filename": "big_file.bin", "size": maxFileBytes + 1, "max": maxFileBytes})
		wantNothingStored(t, srv, ws)
	})
	t.Run("FileExceedsPerFileCapByMuch", func(t *testing.T) {
		ws := uuid.New()
		b, ct := form(t, part{filename: "dir/huge.bin", content: make([]byte, maxFileBytes+1<<20)})
		wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), 413, msgFileCap,
			map[string]any{"filename": "huge.bin", "size": maxFileBytes + 1<<20, "max": maxFileBytes})
		wantNothingStored(t, srv, ws)
	})
	t.Run("OKAtThePerFileCap", func(t *testing.T) {
		ws := uuid.New()
		content := bytes.Repeat([]byte{0xab}, maxFileBytes)
		got := uploadParts(t, srv, ws.String(), srv.AdminToken, part{filename: "max.bin", content: content})
		if got[0].Size != maxFileBytes || got[0].SHA256 != sha256Hex(content) {
			t.Errorf("size, sha256: got %d, %s, want %d, %s", got[0].Size, got[0].SHA256, maxFileBytes, sha256Hex(content))
		}
	})
}

func TestUploadSuccess(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})

	t.Run("FilesInRequestOrder", func(t *testing.T) {
		ws := uuid.New()
		parts := []part{
			file("zeta.txt", "text/plain; charset=utf-8", "zeta\n"),
			{field: "note", text: true, content: []byte("ignored")},
			{text: true, content: []byte("a text value named files is ignored")},
			{filename: "alpha photo.png", ctype: "image/png", content: []byte{0x89, 'P', 'N', 'G', 0, 0xff}},
			{field: "other", filename: "not-a-file.txt", content: []byte("ignored too")},
			file("no-type.bin", "", "\x00\x01\x02"),
		}
		body, ctype := form(t, parts...)
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body)
		wantStatus(t, res, http.StatusOK)
		if got := res.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type: got %q, want application/json", got)
		}
		top := jsonObject(t, res.body)
		if got := keys(top); !slices.Equal(got, []string{"files"}) {
			t.Errorf("body fields: got %v, want [files]", got)
		}
		raw, _ := top["files"].([]any)
		want := []struct {
			name, mime string
			content    []byte
		}{
			{"zeta.txt", "text/plain", []byte("zeta\n")},
			{"alpha_photo.png", "image/png", []byte{0x89, 'P', 'N', 'G', 0, 0xff}},
			{"no-type.bin", "", []byte{0, 1, 2}},
		}
		if len(raw) != len(want) {
			t.Fatalf("files: got %d, want %d (%s)", len(raw), len(want), res.body)
		}
		seen := map[string]bool{}
		for i, w := range want {
			f, _ := raw[i].(map[string]any)
			if got := keys(f); !slices.Equal(got, []string{"file_id", "mimeType", "name", "sha256", "size", "uri"}) {
				t.Errorf("file %d fields: got %v, want [file_id mimeType name sha256 size uri]", i, got)
			}
			id, err := uuid.Parse(fmt.Sprint(f["file_id"]))
			if err != nil || id.String() != f["file_id"] {
				t.Errorf("file %d file_id: got %v, want a lower-case UUID", i, f["file_id"])
			}
			if seen[id.String()] {
				t.Errorf("file %d file_id: got %v twice", i, id)
			}
			seen[id.String()] = true
			wantFields := map[string]any{
				"uri":      "platform-pending:" + ws.String() + "/" + id.String(),
				"name":     w.name,
				"mimeType": w.mime,
				"size":     len(w.content),
				"sha256":   sha256Hex(w.content),
			}
			for k, v := range wantFields {
				if got := fmt.Sprint(f[k]); got != fmt.Sprint(v) {
					t.Errorf("file %d %s: got %v, want %v", i, k, got, v)
				}
			}
			var content []byte
			var name, mime string
			var size int64
			err = srv.Pool.QueryRow(context.Background(),
				`SELECT content, filename, mimetype, size_bytes FROM pending_uploads WHERE file_id = $1 AND workspace_id = $2`,
				id, ws).Scan(&content, &name, &mime, &size)
			if err != nil {
				t.Fatalf("file %d row: %v", i, err)
			}
			if !bytes.Equal(content, w.content) || name != w.name || mime != w.mime || size != int64(len(w.content)) {
				t.Errorf("file %d row: got %q %q %q %d, want %q %q %q %d", i, content, name, mime, size, w.content, w.name, w.mime, len(w.content))
			}
		}
	})

	t.Run("ActivityRowPerFile", func(t *testing.T) {
		ws := uuid.New()
		files := uploadParts(t, srv, ws.String(), srv.AdminToken,
			file("one file.txt", "text/plain", "one"), file("two.json", "application/json", `{"a":2}`), file("three", "", "333"))
		rows, err := srv.Pool.Query(context.Background(), `
			SELECT workspace_id, activity_type, method, target_id, summary, status, request_body
			FROM activity_logs WHERE workspace_id = $1`, ws)
		if err != nil {
			t.Fatal(err)
		}
		type activity struct {
			ws, typ, method, target, summary, status string
			body                                     map[string]any
		}
		byFile := map[string]activity{}
		for rows.Next() {
			var a activity
			var wsID, target uuid.UUID
			var body []byte
			if err := rows.Scan(&wsID, &a.typ, &a.method, &target, &a.summary, &a.status, &body); err != nil {
				t.Fatal(err)
			}
			a.ws, a.target = wsID.String(), target.String()
			a.body = jsonObject(t, body)
			byFile[fmt.Sprint(a.body["file_id"])] = a
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(byFile) != len(files) {
			t.Fatalf("activity rows: got %d, want %d", len(byFile), len(files))
		}
		if n := sqlCount(t, srv, `SELECT count(*) FROM activity_logs WHERE workspace_id = $1`, ws); n != len(files) {
			t.Fatalf("activity rows: got %d, want %d", n, len(files))
		}
		for _, f := range files {
			a, ok := byFile[f.FileID]
			if !ok {
				t.Errorf("activity row of %s: got none, want one", f.FileID)
				continue
			}
			want := activity{ws.String(), "a2a_receive", "chat_upload_receive", ws.String(), "chat_upload_receive: " + f.Name, "ok", nil}
			if a.ws != want.ws || a.typ != want.typ || a.method != want.method || a.target != want.target ||
				a.summary != want.summary || a.status != want.status {
				t.Errorf("activity row: got %+v, want %+v", a, want)
			}
			wantBody := map[string]any{"file_id": f.FileID, "name": f.Name, "mimeType": f.MimeType, "size": f.Size, "uri": f.URI}
			if got := keys(a.body); !slices.Equal(got, keys(wantBody)) {
				t.Errorf("request_body fields: got %v, want %v", got, keys(wantBody))
			}
			for k, v := range wantBody {
				if got := fmt.Sprint(a.body[k]); got != fmt.Sprint(v) {
					t.Errorf("request_body %s: got %v, want %v", k, got, v)
				}
			}
		}
	})

	t.Run("SixtyFourFiles", func(t *testing.T) {
		ws := uuid.New()
		parts := make([]part, 64)
		for i := range parts {
			parts[i] = file(fmt.Sprintf("f%02d.txt", i), "text/plain", fmt.Sprint(i))
		}
		files := uploadParts(t, srv, ws.String(), srv.AdminToken, parts...)
		for i, f := range files {
			if want := fmt.Sprintf("f%02d.txt", i); f.Name != want {
				t.Errorf("file %d: got %q, want %q", i, f.Name, want)
			}
		}
		if u, a := rowCounts(t, srv, ws); u != 64 || a != 64 {
			t.Errorf("rows: got (%d, %d), want (64, 64)", u, a)
		}
	})

	t.Run("FormBWithoutBucket", func(t *testing.T) {
		ws := uuid.New()
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json",
			[]byte(`{"files":[{"upload_id":"`+uuid.NewString()+`"}]}`))
		wantError(t, res, 400, msgPresignOff, nil)
		res = post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "application/json; charset=utf-8", []byte(`{"files":[]}`))
		wantError(t, res, 400, msgPresignOff, nil)
		wantNothingStored(t, srv, ws)
	})

	t.Run("PresignWithoutBucket", func(t *testing.T) {
		ws := uuid.New()
		res := post(t, presignURL(srv, ws.String()), srv.AdminToken, "application/json",
			[]byte(`{"files":[{"name":"a.bin","size":3,"mimeType":"text/plain"}]}`))
		wantStatus(t, res, http.StatusNotFound)
		if got := res.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type: got %q, want application/json", got)
		}
		if msg := jsonObject(t, res.body)["error"]; msg == nil || msg == "" {
			t.Errorf("error: got %v, want a message", msg)
		}
	})
}

// TestUploadSanitizeFilename sends every row of API.md's SanitizeFilename
// table as a multipart filename.
func TestUploadSanitizeFilename(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	tests := []struct {
		name, in, want string
	}{
		{"PathTraversal", "../../etc/passwd", "passwd"},
		{"AbsolutePath", "/etc/shadow", "shadow"},
		{"TrailingSlash", "dir/", "file"},
		{"BackslashIsNotASeparator", `C:\Users\me\a.txt`, "C__Users_me_a.txt"},
		{"Space", "hello world.pdf", "hello_world.pdf"},
		{"SpaceAndBang", "hello world!.pdf", "hello_world_.pdf"},
		{"Punctuation", "weird;chars!?.txt", "weird_chars__.txt"},
		{"NonASCII", "中文.docx", "__.docx"},
		{"Parentheses", "file (1).pdf", "file__1_.pdf"},
		{"Unchanged", "report-2026.05.04_v2.pdf", "report-2026.05.04_v2.pdf"},
		{"Quotes", `say "hi".txt`, "say__hi_.txt"},
		{"Empty", "", "file"},
		{"Dot", ".", "file"},
		{"DotDot", "..", "file"},
		{"DotDotAfterPath", "a/..", "file"},
		{"LongKeepsExtension", strings.Repeat("b", 200) + ".pdf", strings.Repeat("b", 96) + ".pdf"},
		{"LongDropsLongExtension", strings.Repeat("c", 90) + ".thisisaverylongextensionnotpreserved",
			(strings.Repeat("c", 90) + ".thisisaverylongextensionnotpreserved")[:100]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := uuid.New()
			f := uploadParts(t, srv, ws.String(), srv.AdminToken, file(tt.in, "", "x"))[0]
			if f.Name != tt.want {
				t.Errorf("name of %q: got %q, want %q", tt.in, f.Name, tt.want)
			}
			var stored string
			if err := srv.Pool.QueryRow(context.Background(), `SELECT filename FROM pending_uploads WHERE file_id = $1`, f.FileID).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != tt.want {
				t.Errorf("stored name of %q: got %q, want %q", tt.in, stored, tt.want)
			}
		})
	}
	t.Run("ExtendedFilenameParameter", func(t *testing.T) {
		ws := uuid.New()
		f := uploadParts(t, srv, ws.String(), srv.AdminToken, part{
			disposition: `form-data; name="files"; filename*=UTF-8''%E4%B8%AD%E6%96%87%20%281%29.docx`,
			content:     []byte("x"),
		})[0]
		if f.Name != "____1_.docx" {
			t.Errorf("name: got %q, want %q", f.Name, "____1_.docx")
		}
	})
	t.Run("EmptyFileNamesTheSanitizedName", func(t *testing.T) {
		ws := uuid.New()
		b, ct := form(t, file("../x/中文 (1).txt", "", ""))
		wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), 400, msgEmpty,
			map[string]any{"filename": "____1_.txt"})
	})
}

// TestUploadSafeMimetype sends SafeMimetype's cases as part Content-Types,
// and checks what upload answers, what is stored and what content serves.
func TestUploadSafeMimetype(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	tests := []struct {
		name, in, want, served string
	}{
		{"NoContentType", "", "", "application/octet-stream"},
		{"Plain", "application/pdf", "application/pdf", "application/pdf"},
		{"ParametersCut", "text/plain; charset=utf-8", "text/plain", "text/plain"},
		{"ParametersCutAndTrimmed", "text/csv ;charset=x", "text/csv", "text/csv"},
		{"OnlyParameters", "; charset=utf-8", "", "application/octet-stream"},
		{"CaseKept", "Image/PNG", "Image/PNG", "Image/PNG"},
		{"Vendor", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document",
			"application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
		{"NoSlash", "text", "application/octet-stream", "application/octet-stream"},
		{"EmptySubtype", "text/", "application/octet-stream", "application/octet-stream"},
		{"EmptyType", "/plain", "application/octet-stream", "application/octet-stream"},
		{"TwoSlashes", "a/b/c", "application/octet-stream", "application/octet-stream"},
		{"InnerSpace", "text/ html", "application/octet-stream", "application/octet-stream"},
		{"NonASCII", "text/plaïn", "application/octet-stream", "application/octet-stream"},
		{"InnerTab", "text/\tplain", "application/octet-stream", "application/octet-stream"},
		{"HTMLStaysHTMLButNosniff", "text/html", "text/html", "text/html"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := uuid.New()
			f := uploadParts(t, srv, ws.String(), srv.AdminToken, file("m.bin", tt.in, "m"))[0]
			if f.MimeType != tt.want {
				t.Errorf("mimeType of %q: got %q, want %q", tt.in, f.MimeType, tt.want)
			}
			var stored string
			if err := srv.Pool.QueryRow(context.Background(), `SELECT mimetype FROM pending_uploads WHERE file_id = $1`, f.FileID).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != tt.want {
				t.Errorf("stored mimetype of %q: got %q, want %q", tt.in, stored, tt.want)
			}
			res := get(t, contentURL(srv, ws.String(), f.FileID), srv.AdminToken)
			wantStatus(t, res, http.StatusOK)
			if got := res.header.Get("Content-Type"); got != tt.served {
				t.Errorf("served Content-Type of %q: got %q, want %q", tt.in, got, tt.served)
			}
		})
	}
}

// TestUploadAtomic: one bad file, or one failed insert, and nothing of the
// request is stored.
func TestUploadAtomic(t *testing.T) {
	t.Parallel()
	t.Run("GoodFilePlusEmptyFile", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{})
		ws := uuid.New()
		b, ct := form(t, file("good.txt", "text/plain", "good"), file("empty.txt", "text/plain", ""))
		wantError(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b), 400, msgEmpty,
			map[string]any{"filename": "empty.txt"})
		if u, a := sqlCount(t, srv, `SELECT count(*) FROM pending_uploads`), sqlCount(t, srv, `SELECT count(*) FROM activity_logs`); u != 0 || a != 0 {
			t.Errorf("rows (pending_uploads, activity_logs): got (%d, %d), want (0, 0)", u, a)
		}
	})

	t.Run("StorageErrorAtActivityInsert", func(t *testing.T) {
		var logs syncBuffer
		srv := apptest.NewServer(t, apptest.Options{Log: &logs})
		sqlExec(t, srv, `ALTER TABLE activity_logs ADD CONSTRAINT no_activity CHECK (false)`)
		ws := uuid.New()
		b, ct := form(t, file("one.txt", "text/plain", "one"), file("two.txt", "text/plain", "two"))
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b)
		wantError(t, res, http.StatusInternalServerError, msgStorage, nil)
		for _, leak := range []string{"no_activity", "constraint", "violates", "activity", "23514", "insert"} {
			if strings.Contains(strings.ToLower(string(res.body)), leak) {
				t.Errorf("500 body: got %s, want no %q", res.body, leak)
			}
		}
		if u, a := sqlCount(t, srv, `SELECT count(*) FROM pending_uploads`), sqlCount(t, srv, `SELECT count(*) FROM activity_logs`); u != 0 || a != 0 {
			t.Errorf("rows (pending_uploads, activity_logs): got (%d, %d), want (0, 0)", u, a)
		}
		if out := logs.String(); !strings.Contains(out, "no_activity") {
			t.Errorf("log: got %.500s, want the full error (naming no_activity)", out)
		}
	})

	t.Run("StorageErrorAtUploadInsert", func(t *testing.T) {
		srv := apptest.NewServer(t, apptest.Options{})
		sqlExec(t, srv, `ALTER TABLE pending_uploads ADD CONSTRAINT no_uploads CHECK (filename <> 'refused.txt')`)
		ws := uuid.New()
		b, ct := form(t, file("fine.txt", "text/plain", "one"), file("refused.txt", "text/plain", "two"))
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ct, b)
		wantError(t, res, http.StatusInternalServerError, msgStorage, nil)
		if strings.Contains(string(res.body), "no_uploads") {
			t.Errorf("500 body: got %s, want no internal text", res.body)
		}
		wantNothingStored(t, srv, ws)
	})
}

// decodeJSON is json.Unmarshal that fails the test.
func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// TestUploadUnreadableDispositionRefused: a part whose Content-Disposition
// cannot be read might be a file; storing the request without it would
// lose the file silently, so the whole request is refused (over the
// fake).
func TestUploadUnreadableDispositionRefused(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{})
	ws := uuid.New()
	good := "--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"good.txt\"\r\n\r\ngood\r\n"
	for name, disp := range map[string]string{
		"DuplicateFilename": `form-data; name="files"; filename="a.txt"; filename="b.txt"`,
		"UnquotedSpace":     `form-data; name="files"; filename=b c.txt`,
		"StrayQuote":        `form-data; name="files"; filename="a"b.txt"`,
	} {
		t.Run(name, func(t *testing.T) {
			body := good + "--B\r\nContent-Disposition: " + disp + "\r\n\r\nsecond\r\n--B--\r\n"
			res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "multipart/form-data; boundary=B", []byte(body))
			wantError(t, res, http.StatusBadRequest, "malformed multipart body", nil)
			wantNothingStored(t, srv, ws)
		})
	}
	t.Run("UndecodableCharsetStillAFile", func(t *testing.T) {
		body := good + "--B\r\nContent-Disposition: form-data; name=\"files\"; filename*=iso-8859-1''%E9t%E9.txt\r\n\r\nsecond\r\n--B--\r\n"
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, "multipart/form-data; boundary=B", []byte(body))
		wantStatus(t, res, http.StatusOK)
		if up, _ := rowCounts(t, srv, ws); up != 2 {
			t.Fatalf("rows: got %d, want 2 (both files)", up)
		}
	})
}

// TestUploadCutBody: a body that ends early, whether right after a
// boundary line (no closing delimiter) or short of its Content-Length, is
// 400 malformed and nothing of it is stored, however complete its first
// parts look. A whole body with an epilogue still passes (over the fake).
func TestUploadCutBody(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t, fakeOptions{})
	good := "--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"good.txt\"\r\n\r\ngood\r\n"
	const ctype = "multipart/form-data; boundary=B"
	for name, body := range map[string]string{
		"AfterBoundaryLine":   good + "--B\r\n",
		"AfterBoundaryNoCRLF": good + "--B",
		"InNextHeaders":       good + "--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"b.txt\"\r\n",
		"AfterNextHeaders":    good + "--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"b.txt\"\r\n\r\n",
		"InNextContent":       good + "--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"b.txt\"\r\n\r\nsec",
		"NoClosingDashes":     good + "--B\r\nContent-Disposition: form-data; name=\"files\"; filename=\"b.txt\"\r\n\r\nsecond\r\n--B\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			ws := uuid.New()
			res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, []byte(body))
			wantError(t, res, http.StatusBadRequest, msgMalformed, nil)
			wantNothingStored(t, srv, ws)
		})
	}
	complete := good + "--B--\r\n"
	t.Run("ShorterThanContentLength", func(t *testing.T) {
		ws := uuid.New()
		head := fmt.Sprintf("POST /workspaces/%s/chat/uploads HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nContent-Type: %s\nContent-Length: %d\nConnection: close",
			ws, srv.AdminToken, ctype, len(complete)+100)
		res := rawRequest(t, srv, head, []byte(complete), true)
		wantError(t, res, http.StatusBadRequest, msgMalformed, nil)
		wantNothingStored(t, srv, ws)
	})
	t.Run("CompleteWithEpilogue", func(t *testing.T) {
		ws := uuid.New()
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, []byte(complete+"an epilogue\r\n--B\r\n"))
		wantStatus(t, res, http.StatusOK)
		if up, _ := rowCounts(t, srv, ws); up != 1 {
			t.Fatalf("rows: got %d, want 1", up)
		}
	})
	t.Run("ClosingDelimiterFirst", func(t *testing.T) {
		ws := uuid.New()
		res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, []byte("--B--\r\n"))
		wantError(t, res, http.StatusBadRequest, msgNoFiles, nil)
	})
}
