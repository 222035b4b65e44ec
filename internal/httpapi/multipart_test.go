package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

type planAnswer struct {
	UploadID  string `json:"upload_id"`
	URL       string `json:"url"`
	Multipart *struct {
		PartBytes int64 `json:"part_bytes"`
		PartCount int   `json:"part_count"`
		Received  []struct {
			PartNumber int   `json:"part_number"`
			Size       int64 `json:"size"`
		} `json:"received"`
		Parts []struct {
			PartNumber int               `json:"part_number"`
			Size       int64             `json:"size"`
			URL        string            `json:"url"`
			Headers    map[string]string `json:"headers"`
		} `json:"parts"`
	} `json:"multipart"`
}

const mib = 1 << 20

// multipartServer is the service with a bucket, files above 5 MiB going
// in parts of 5 MiB.
func multipartServer(t *testing.T) *apptest.Server {
	return apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 * mib), "MULTIPART_PART_BYTES": fmt.Sprint(5 * mib)}})
}

func presignParts[S server](t *testing.T, srv S, ws, tok string, size int, parts [][]byte) planAnswer {
	t.Helper()
	f := map[string]any{"name": "big.bin", "size": size, "multipart": true}
	if parts != nil {
		var ps []map[string]string
		for _, p := range parts {
			sum := sha256.Sum256(p)
			ps = append(ps, map[string]string{"sha256": hex.EncodeToString(sum[:])})
		}
		f["parts"] = ps
	}
	body, _ := json.Marshal(map[string]any{"files": []any{f}})
	res := post(t, presignURL(srv, ws), tok, "application/json", body)
	wantStatus(t, res, http.StatusOK)
	var out struct{ Uploads []planAnswer }
	decodeJSON(t, res.body, &out)
	return out.Uploads[0]
}

func resumeURL[S server](srv S, ws, upload string) string {
	return presignURL(srv, ws) + "/" + upload
}

// incompleteUploads lists the bucket's multipart uploads not completed or
// aborted.
func incompleteUploads(t *testing.T, srv *apptest.Server) int {
	t.Helper()
	out, err := s3test.NewClient(srv.S3).ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(srv.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

// TestMultipartUpload: a file above the threshold goes in parts, each
// PUT bound to its size and declared SHA-256; a resume lists what the
// bucket holds and signs only the rest; the commit completes the upload
// and the workspace gets the bytes, byte-exact. The refusals store
// nothing: a part of the wrong size, a part missing, another workspace's
// upload id, an upload committed already.
func TestMultipartUpload(t *testing.T) {
	t.Parallel()
	srv := multipartServer(t)
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	data := randomBytes(12*mib + 123)
	parts := [][]byte{data[:5*mib], data[5*mib : 10*mib], data[10*mib:]}

	plan := presignParts(t, srv, ws.String(), tok, len(data), parts)
	if plan.Multipart == nil || plan.URL != "" || plan.Multipart.PartBytes != 5*mib || plan.Multipart.PartCount != 3 ||
		len(plan.Multipart.Parts) != 3 || len(plan.Multipart.Received) != 0 {
		t.Fatalf("plan: %+v", plan)
	}
	for i, p := range plan.Multipart.Parts {
		sum := sha256.Sum256(parts[i])
		if p.PartNumber != i+1 || p.Size != int64(len(parts[i])) || p.Headers["Content-Length"] != fmt.Sprint(len(parts[i])) ||
			p.Headers["x-amz-checksum-sha256"] != base64Std(sum[:]) {
			t.Errorf("part %d: %+v", i+1, p)
		}
	}
	// Parts 1 and 3 arrive; the connection drops before part 2.
	putObject(t, plan.Multipart.Parts[0].URL, plan.Multipart.Parts[0].Headers, parts[0])
	putObject(t, plan.Multipart.Parts[2].URL, plan.Multipart.Parts[2].Headers, parts[2])
	commit := []byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, plan.UploadID))
	wantError(t, post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit), http.StatusConflict, "upload not received",
		map[string]any{"upload_id": plan.UploadID})
	wantNothingStored(t, srv, ws)

	res := post(t, resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil)
	wantStatus(t, res, http.StatusOK)
	var resumed planAnswer
	decodeJSON(t, res.body, &resumed)
	if r := resumed.Multipart; r == nil || len(r.Received) != 2 || r.Received[0].PartNumber != 1 || r.Received[1].PartNumber != 3 ||
		len(r.Parts) != 1 || r.Parts[0].PartNumber != 2 || r.Parts[0].Size != 5*mib {
		t.Fatalf("resume: %s", res.body)
	}
	putObject(t, resumed.Multipart.Parts[0].URL, resumed.Multipart.Parts[0].Headers, parts[1])
	res = post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit)
	wantStatus(t, res, http.StatusOK)
	var staged stagedAnswer
	decodeJSON(t, res.body, &staged)
	sum := sha256.Sum256(data)
	if len(staged.Files) != 1 || staged.Files[0].Size != int64(len(data)) || staged.Files[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("commit: %s", res.body)
	}
	got := get(t, contentURL(srv, ws.String(), staged.Files[0].FileID), tok)
	wantStatus(t, got, http.StatusOK)
	if !bytes.Equal(got.body, data) {
		t.Fatalf("content: %d bytes, not the %d sent", len(got.body), len(data))
	}
	// A retried commit answers the same file.
	res = post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit)
	wantStatus(t, res, http.StatusOK)
	if !bytes.Contains(res.body, []byte(staged.Files[0].FileID)) {
		t.Errorf("retried commit: %s", res.body)
	}
	if n := incompleteUploads(t, srv); n != 0 {
		t.Errorf("incomplete multipart uploads left: %d", n)
	}

	t.Run("ResumeCommitted", func(t *testing.T) {
		wantError(t, post(t, resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil), http.StatusConflict,
			"upload already committed", map[string]any{"upload_id": plan.UploadID})
	})
	t.Run("ResumeAnotherWorkspaces", func(t *testing.T) {
		other := uuid.New()
		plan := presignParts(t, srv, other.String(), srv.AdminToken, len(data), nil)
		wantError(t, post(t, resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil), http.StatusNotFound, "upload not found", nil)
		wantError(t, send(t, newRequest(t, "DELETE", resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil)),
			http.StatusNotFound, "upload not found", nil)
		// Its own workspace's token may: the upload is still there.
		wantStatus(t, post(t, resumeURL(srv, other.String(), plan.UploadID), srv.AdminToken, "", nil), http.StatusOK)
	})
	t.Run("PartOfTheWrongSize", func(t *testing.T) {
		other := uuid.New()
		plan := presignParts(t, srv, other.String(), srv.AdminToken, len(data), nil)
		// The bucket takes what a presigned PUT signed; one that signs no
		// length (or a bucket that does not check it, as moto) gets a
		// short part: the commit refuses it.
		for i, p := range plan.Multipart.Parts {
			body := parts[i]
			headers := p.Headers
			if i == 1 {
				body = body[:len(body)-1]
				headers = map[string]string{}
			}
			putObject(t, p.URL, headers, body)
		}
		wantError(t, post(t, uploadsURL(srv, other.String()), srv.AdminToken, "application/json",
			[]byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, plan.UploadID))), http.StatusConflict, "upload not received",
			map[string]any{"upload_id": plan.UploadID})
		wantNothingStored(t, srv, other)
	})
	t.Run("Abort", func(t *testing.T) {
		other := uuid.New()
		before := incompleteUploads(t, srv)
		plan := presignParts(t, srv, other.String(), srv.AdminToken, len(data), nil)
		putObject(t, plan.Multipart.Parts[0].URL, plan.Multipart.Parts[0].Headers, parts[0])
		if n := incompleteUploads(t, srv); n != before+1 {
			t.Fatalf("incomplete uploads after presign: %d, want %d", n, before+1)
		}
		res := send(t, newRequest(t, "DELETE", resumeURL(srv, other.String(), plan.UploadID), srv.AdminToken, "", nil))
		wantStatus(t, res, http.StatusOK)
		if n := incompleteUploads(t, srv); n != before {
			t.Errorf("incomplete uploads after abort: %d, want %d", n, before)
		}
		wantError(t, post(t, uploadsURL(srv, other.String()), srv.AdminToken, "application/json",
			[]byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, plan.UploadID))), http.StatusConflict, "upload not received",
			map[string]any{"upload_id": plan.UploadID})
		wantError(t, post(t, resumeURL(srv, other.String(), plan.UploadID), srv.AdminToken, "", nil), http.StatusNotFound, "upload not found", nil)
		wantNothingStored(t, srv, other)
	})
	t.Run("BadPartChecksums", func(t *testing.T) {
		body := []byte(`{"files":[{"name":"b.bin","size":12582912,"multipart":true,"parts":[{"sha256":"` + hex.EncodeToString(make([]byte, 32)) + `"}]}]}`)
		wantError(t, post(t, presignURL(srv, ws.String()), tok, "application/json", body), http.StatusBadRequest,
			"invalid parts (want one sha256 per part of part_bytes, for a multipart file)", map[string]any{"filename": "b.bin"})
	})
	t.Run("SmallFileIsOnePUT", func(t *testing.T) {
		plan := presignParts(t, srv, ws.String(), tok, 5*mib, nil)
		if plan.Multipart != nil || plan.URL == "" {
			t.Errorf("a file at the threshold: %+v, want one PUT", plan)
		}
	})
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestCutCommitLeavesItsPartsAssembled: a commit of an upload in parts
// cut by its deadline after S3 assembled the parts (every CopyObject
// answers late; REQUEST_TIMEOUT=1s) is 503 and stores nothing; the
// resume then lists every part received and none to send (the upload is
// not gone: 404 would make a client send it all again); an abort drops
// the object the commit assembled, and the resume is 404 from then on.
func TestCutCommitLeavesItsPartsAssembled(t *testing.T) {
	// Not parallel: REQUEST_TIMEOUT is 1 s, and the service must answer
	// within it where the test wants an answer.
	proxy := s3test.StartPartProxy(t, s3test.MustStart(t).URL)
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{"S3_ENDPOINT": proxy.URL, "REQUEST_TIMEOUT": "1s",
		"MULTIPART_THRESHOLD_BYTES": fmt.Sprint(5 * mib), "MULTIPART_PART_BYTES": fmt.Sprint(5 * mib)}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	data := randomBytes(11*mib + 123)
	parts := [][]byte{data[:5*mib], data[5*mib : 10*mib], data[10*mib:]}
	plan := presignParts(t, srv, ws.String(), tok, len(data), parts)
	for i, p := range plan.Multipart.Parts {
		putObject(t, p.URL, p.Headers, parts[i])
	}
	proxy.SlowCopies(time.Minute, 0)
	commit := []byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, plan.UploadID))
	wantError(t, post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit), http.StatusServiceUnavailable,
		"storage unavailable, retry shortly", nil)
	wantNothingStored(t, srv, ws)
	if n := incompleteUploads(t, srv); n != 0 {
		t.Fatalf("incomplete multipart uploads after the cut commit: %d, want 0 (S3 assembled the parts)", n)
	}

	res := post(t, resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil)
	wantStatus(t, res, http.StatusOK)
	var resumed planAnswer
	decodeJSON(t, res.body, &resumed)
	if r := resumed.Multipart; r == nil || r.PartCount != 3 || len(r.Received) != 3 || len(r.Parts) != 0 ||
		r.Received[2].PartNumber != 3 || r.Received[2].Size != int64(len(parts[2])) {
		t.Fatalf("resume after the cut commit: %s, want every part received, none to send", res.body)
	}

	res = send(t, newRequest(t, "DELETE", resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil))
	wantStatus(t, res, http.StatusOK)
	out, err := s3test.NewClient(srv.S3).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(srv.Bucket), Prefix: aws.String("staging/" + ws.String() + "/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 0 {
		t.Errorf("staging objects after the abort: %d, want none", len(out.Contents))
	}
	wantError(t, post(t, resumeURL(srv, ws.String(), plan.UploadID), tok, "", nil), http.StatusNotFound, "upload not found", nil)
}
