package faulttest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/sweep"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/faultkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const reqTimeout = 60 * time.Second

type stagedBody struct {
	Files []struct {
		FileID string `json:"file_id"`
		Name   string `json:"name"`
	} `json:"files"`
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func wantError(t *testing.T, res faultkit.Response, status int, msg, code string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if res.Status != status || json.Unmarshal(res.Body, &e) != nil || e.Error != msg || e.Code != code {
		t.Fatalf("got %d %s, want %d {error:%q code:%q}", res.Status, res.Body, status, msg, code)
	}
}

// TestS3Unreachable: with the bucket's endpoint a closed loopback port, an
// upload of a file bound for the bucket answers 503 unavailable and stores
// nothing; a small (inline) file still stages.
func TestS3Unreachable(t *testing.T) { // not parallel: apptest's S3 sets the environment
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"S3_ENDPOINT": "http://127.0.0.1:1", "INLINE_MAX_BYTES": "1024"}})
	ws := uuid.New()
	url := srv.URL + "/workspaces/" + ws.String() + "/chat/uploads"
	big := bytes.Repeat([]byte("b"), 4096)

	t.Run("Unavailable", func(t *testing.T) {
		body, ctype := faultkit.Multipart(
			faultkit.File{Name: "small.txt", Content: []byte("small")},
			faultkit.File{Name: "big.bin", Content: big})
		res, err := faultkit.Do(http.DefaultClient, reqTimeout, "POST", url, srv.AdminToken, ctype, body)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, res, 503, "storage unavailable, retry shortly", "unavailable")
		if res.Elapsed > 30*time.Second {
			t.Errorf("answered after %s, want a bounded wait", res.Elapsed)
		}
		if n := count(t, srv.Pool, `SELECT count(*) FROM pending_uploads`); n != 0 {
			t.Errorf("pending_uploads: got %d rows, want 0", n)
		}
		if n := count(t, srv.Pool, `SELECT count(*) FROM activity_logs`); n != 0 {
			t.Errorf("activity_logs: got %d rows, want 0", n)
		}
	})
	t.Run("InlineStillStages", func(t *testing.T) {
		body, ctype := faultkit.Multipart(faultkit.File{Name: "small.txt", Content: []byte("small")})
		res, err := faultkit.Do(http.DefaultClient, reqTimeout, "POST", url, srv.AdminToken, ctype, body)
		if err != nil || res.Status != 200 {
			t.Fatalf("got %d %s %v, want 200", res.Status, res.Body, err)
		}
	})
}

// TestFailureAtItemK: a multipart upload of N files whose file K the
// database refuses (a CHECK added for the test) answers 500 storage error
// and stores nothing of the request, in either table; with a bucket, the
// objects written for the other files are discarded.
func TestFailureAtItemK(t *testing.T) { // not parallel: the bucket case sets the environment
	const n, k = 8, 5
	files := func(size int) []faultkit.File {
		var fs []faultkit.File
		for i := range n {
			name := fmt.Sprintf("f%d.bin", i)
			if i == k {
				name = "poison.bin"
			}
			fs = append(fs, faultkit.File{Name: name, Type: "application/octet-stream", Content: bytes.Repeat([]byte{byte('a' + i)}, size)})
		}
		return fs
	}
	for _, tc := range []struct {
		name  string
		check string
		s3    bool
	}{
		{"RowRefused", `ALTER TABLE pending_uploads ADD CONSTRAINT faulttest_poison CHECK (filename <> 'poison.bin')`, false},
		{"ActivityRefused", `ALTER TABLE activity_logs ADD CONSTRAINT faulttest_poison CHECK (summary <> 'chat_upload_receive: poison.bin')`, false},
		{"RowRefusedWithBucket", `ALTER TABLE pending_uploads ADD CONSTRAINT faulttest_poison CHECK (filename <> 'poison.bin')`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := apptest.Options{}
			if tc.s3 {
				opts = apptest.Options{S3: true, Env: map[string]string{"INLINE_MAX_BYTES": "1024"}}
			}
			srv := apptest.NewServer(t, opts)
			exec(t, srv.Pool, tc.check)
			ws := uuid.New()
			url := srv.URL + "/workspaces/" + ws.String() + "/chat/uploads"
			body, ctype := faultkit.Multipart(files(4096)...)
			res, err := faultkit.Do(http.DefaultClient, reqTimeout, "POST", url, srv.AdminToken, ctype, body)
			if err != nil {
				t.Fatal(err)
			}
			wantError(t, res, 500, "storage error", "internal")
			if strings.Contains(string(res.Body), "faulttest_poison") {
				t.Errorf("500 body carries the internal error: %s", res.Body)
			}
			if got := count(t, srv.Pool, `SELECT count(*) FROM pending_uploads`); got != 0 {
				t.Errorf("pending_uploads: got %d rows, want 0", got)
			}
			if got := count(t, srv.Pool, `SELECT count(*) FROM activity_logs`); got != 0 {
				t.Errorf("activity_logs: got %d rows, want 0", got)
			}
			if tc.s3 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				out, err := s3test.NewClient(srv.S3).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(srv.Bucket)})
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Contents) != 0 {
					t.Errorf("bucket: got %d objects after the failed batch, want 0", len(out.Contents))
				}
			}
			// Without the poison, the same batch stages whole.
			good := files(4096)
			good[k].Name = "fine.bin"
			body, ctype = faultkit.Multipart(good...)
			res, err = faultkit.Do(http.DefaultClient, reqTimeout, "POST", url, srv.AdminToken, ctype, body)
			if err != nil || res.Status != 200 {
				t.Fatalf("clean batch: %d %s %v", res.Status, res.Body, err)
			}
			if got := count(t, srv.Pool, `SELECT count(*) FROM pending_uploads`); got != n {
				t.Errorf("pending_uploads after the clean batch: got %d rows, want %d", got, n)
			}
		})
	}
}

// TestSweepRacesAcksAndUploads runs uploads, list-and-ack loops and sweeps
// (retention 0) at once for a bounded count. Nothing answers an error, no
// row is lost, and the counts add up: every staged file is either acked
// (and then swept) or still pending, and the sweeps deleted exactly the
// acked ones.
func TestSweepRacesAcksAndUploads(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	const (
		workspaces = 3
		uploads    = 25 // per workspace
		perUpload  = 2  // files per upload
	)
	var (
		mu       sync.Mutex
		errs     []string
		staged   = map[string]uuid.UUID{} // file -> workspace
		acked    = map[string]bool{}
		swept    int
		sweeps   int
		uploadWG sync.WaitGroup
		otherWG  sync.WaitGroup
		done     = make(chan struct{})
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Sprintf(format, args...))
	}
	client := &http.Client{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for w := range workspaces {
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		base := srv.URL + "/workspaces/" + ws.String()
		uploadWG.Go(func() {
			for i := range uploads {
				if ctx.Err() != nil {
					return
				}
				body, ctype := faultkit.Multipart(
					faultkit.File{Name: fmt.Sprintf("w%d-u%d-a.txt", w, i), Content: []byte("a")},
					faultkit.File{Name: fmt.Sprintf("w%d-u%d-b.txt", w, i), Content: []byte("b")})
				res, err := faultkit.Do(client, reqTimeout, "POST", base+"/chat/uploads", srv.AdminToken, ctype, body)
				if err != nil || res.Status != 200 {
					fail("upload: %d %s %v", res.Status, res.Body, err)
					continue
				}
				var sb stagedBody
				if err := json.Unmarshal(res.Body, &sb); err != nil || len(sb.Files) != perUpload {
					fail("upload body %s: %v", res.Body, err)
					continue
				}
				mu.Lock()
				for _, f := range sb.Files {
					staged[f.FileID] = ws
				}
				mu.Unlock()
			}
		})
		// The workspace's poller: list, ack every other file it sees.
		otherWG.Go(func() {
			seen := map[string]bool{}
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := faultkit.Do(client, reqTimeout, "GET", base+"/pending-uploads?limit=100", tok, "", nil)
				if err != nil || res.Status != 200 {
					fail("list: %d %s %v", res.Status, res.Body, err)
					continue
				}
				var lb struct {
					Uploads []struct {
						FileID string `json:"file_id"`
					} `json:"uploads"`
				}
				if err := json.Unmarshal(res.Body, &lb); err != nil {
					fail("list body %s: %v", res.Body, err)
					continue
				}
				for _, u := range lb.Uploads {
					if seen[u.FileID] {
						continue
					}
					seen[u.FileID] = true
					if len(seen)%2 == 1 {
						continue // leave it pending
					}
					res, err := faultkit.Do(client, reqTimeout, "POST", base+"/pending-uploads/"+u.FileID+"/ack", tok, "", nil)
					if err != nil || res.Status != 200 {
						fail("ack %s: %d %s %v", u.FileID, res.Status, res.Body, err)
						continue
					}
					mu.Lock()
					acked[u.FileID] = true
					mu.Unlock()
				}
			}
		})
	}
	for range 2 { // two sweepers: they race each other too
		otherWG.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := sweep.Run(ctx, srv.Store, 0, srv.App.Logger, nil)
				if err != nil {
					fail("sweep: %v", err)
				}
				mu.Lock()
				swept += res.Acked
				sweeps++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	uploadWG.Wait()
	time.Sleep(300 * time.Millisecond) // the pollers catch up
	close(done)
	otherWG.Wait()
	// A last sweep takes what was acked after the racing ones.
	res, err := sweep.Run(ctx, srv.Store, 0, srv.App.Logger, nil)
	if err != nil {
		t.Fatalf("final sweep: %v", err)
	}
	swept += res.Acked
	if res.Expired != 0 {
		t.Errorf("sweep: %d expired, want 0", res.Expired)
	}

	for _, e := range errs {
		t.Error(e)
	}
	if len(staged) != workspaces*uploads*perUpload {
		t.Fatalf("staged %d files, want %d", len(staged), workspaces*uploads*perUpload)
	}
	if len(acked) == 0 {
		t.Fatal("no file was acked: the race did not happen")
	}
	if swept != len(acked) {
		t.Errorf("sweeps deleted %d acked rows, want %d (the acked count)", swept, len(acked))
	}
	rows, err := srv.Pool.Query(ctx, `SELECT file_id::text, workspace_id, acked_at IS NOT NULL FROM pending_uploads`)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for rows.Next() {
		var id string
		var ws uuid.UUID
		var isAcked bool
		if err := rows.Scan(&id, &ws, &isAcked); err != nil {
			t.Fatal(err)
		}
		left[id] = true
		switch {
		case isAcked:
			t.Errorf("row %s: acked but not swept", id)
		case acked[id]:
			t.Errorf("row %s: ack answered 200 but the row is unacked", id)
		case staged[id] != ws:
			t.Errorf("row %s: not staged by this test for workspace %s", id, ws)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range staged {
		if !acked[id] && !left[id] {
			t.Errorf("row %s: lost (never acked, no longer pending)", id)
		}
	}
	if got, want := len(left)+len(acked), len(staged); got != want {
		t.Errorf("pending %d + acked %d = %d, want %d staged", len(left), len(acked), got, want)
	}
	if got := count(t, srv.Pool, `SELECT count(*) FROM activity_logs`); got != len(staged) {
		t.Errorf("activity_logs: got %d rows, want %d (they stay after the sweep)", got, len(staged))
	}
	t.Logf("staged %d, acked+swept %d, pending %d, %d sweeps", len(staged), len(acked), len(left), sweeps)
}
