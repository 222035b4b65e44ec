package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// wantQuota checks a quota refusal: 409 naming the quota, its limit, what
// waits and what the request would add.
func wantQuota(t *testing.T, res result, quota string, limit, pending, adding int64) {
	t.Helper()
	wantError(t, res, http.StatusConflict, "workspace quota exceeded", map[string]any{
		"quota": quota, "limit": float64(limit), "pending": float64(pending), "adding": float64(adding)})
}

// TestWorkspaceQuota: what one workspace may have waiting is bounded,
// exactly at the boundary, by bytes and by files; acks and expiry free
// room; a refusal stores nothing; GET /uploads/limits reports the quota.
func TestWorkspaceQuota(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{
		"MAX_FILE_BYTES": "1000", "WORKSPACE_MAX_PENDING_BYTES": "3000", "WORKSPACE_MAX_PENDING_FILES": "64"}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	up := func(sizes ...int) result {
		t.Helper()
		var parts []part
		for i, n := range sizes {
			parts = append(parts, file(fmt.Sprintf("f%d.bin", i), "application/octet-stream", strings.Repeat("x", n)))
		}
		body, ctype := form(t, parts...)
		return post(t, uploadsURL(srv, ws.String()), tok, ctype, body)
	}
	wantStatus(t, up(1000, 1000), http.StatusOK)
	rows, activity := rowCounts(t, srv, ws)
	wantQuota(t, up(1000, 1), "pending_bytes", 3000, 2000, 1001)
	if u, a := rowCounts(t, srv, ws); u != rows || a != activity {
		t.Fatalf("a refused upload stored rows: %d, %d", u, a)
	}
	first := jsonObject(t, up(1000).body)["files"].([]any)[0].(map[string]any)["file_id"].(string) // exactly the quota
	wantQuota(t, up(1), "pending_bytes", 3000, 3000, 1)

	wantStatus(t, post(t, ackURL(srv, ws.String(), first), tok, "", nil), http.StatusOK)
	wantStatus(t, up(1000), http.StatusOK) // the ack made room
	wantQuota(t, up(1), "pending_bytes", 3000, 3000, 1)
	expire(t, srv, first) // acked and expired: still no room counted twice
	sqlExec(t, srv, `UPDATE pending_uploads SET expires_at = now() - interval '1 second' WHERE workspace_id = $1 AND acked_at IS NULL AND size_bytes = 1000 AND file_id IN (SELECT file_id FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL LIMIT 1)`, ws)
	wantStatus(t, up(1000), http.StatusOK) // an expired file waits no more

	t.Run("Files", func(t *testing.T) {
		other := uuid.New()
		body, ctype := manyFiles(t, 64)
		wantStatus(t, post(t, uploadsURL(srv, other.String()), srv.AdminToken, ctype, body), http.StatusOK)
		body, ctype = manyFiles(t, 1)
		wantQuota(t, post(t, uploadsURL(srv, other.String()), srv.AdminToken, ctype, body), "pending_files", 64, 64, 1)
	})
	t.Run("Limits", func(t *testing.T) {
		l := jsonObject(t, get(t, srv.URL+"/uploads/limits", "").body)
		if fmt.Sprint(l["workspace_max_pending_bytes"]) != "3000" || fmt.Sprint(l["workspace_max_pending_files"]) != "64" {
			t.Errorf("limits: %v", l)
		}
		off := apptest.NewServer(t, apptest.Options{Env: map[string]string{"WORKSPACE_MAX_PENDING_BYTES": "0", "WORKSPACE_MAX_PENDING_FILES": "0"}})
		l = jsonObject(t, get(t, off.URL+"/uploads/limits", "").body)
		if v, ok := l["workspace_max_pending_bytes"]; !ok || v != nil || l["workspace_max_pending_files"] != nil {
			t.Errorf("limits with the quota off: %v, want nulls", l)
		}
	})
}

func manyFiles(t *testing.T, n int) ([]byte, string) {
	t.Helper()
	parts := make([]part, n)
	for i := range parts {
		parts[i] = file(fmt.Sprintf("m%d.txt", i), "text/plain", "m")
	}
	return form(t, parts...)
}

// TestWorkspaceQuotaUnderConcurrency: 20 uploads race for the last 5 MiB
// of a workspace's quota, 1 MiB each: exactly 5 get in, the others are
// refused, and what waits never passes the quota.
func TestWorkspaceQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{
		"MAX_FILE_BYTES": fmt.Sprint(mib), "WORKSPACE_MAX_PENDING_BYTES": fmt.Sprint(25 * mib)}})
	raceForTheQuota(t, srv)
}

// raceForTheQuota fills a workspace of srv (files of 1 MiB, a quota of 25
// MiB) to 20 MiB, then races 20 uploads of 1 MiB for the last 5: exactly
// 5 must get in, 15 be refused, and exactly the quota wait.
func raceForTheQuota(t *testing.T, srv *apptest.Server) {
	t.Helper()
	const mib = 1 << 20
	ws := uuid.New()
	body, ctype := form(t, file("fill.bin", "", strings.Repeat("f", mib)))
	for range 20 { // 20 MiB waiting: 5 MiB of room
		wantStatus(t, post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body), http.StatusOK)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As a client does: a "workspace busy" 503 (its turn not had
			// within the bounded wait, on a loaded machine) is sent again
			// after its Retry-After; nothing was stored by it.
			for try := 0; ; try++ {
				r := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body)
				statuses[i] = r.status
				if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "workspace busy") || try == 9 {
					return
				}
				time.Sleep(time.Duration(retryAfterSeconds(r.header)) * time.Second)
			}
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
			refused++
		}
	}
	if ok != 5 || refused != 15 {
		t.Errorf("20 racing uploads: %d stored, %d refused (statuses %v); want 5 and 15", ok, refused, statuses)
	}
	if n := sqlCount(t, srv, `SELECT coalesce(sum(size_bytes), 0)::int FROM pending_uploads WHERE workspace_id = $1`, ws); n != 25*mib {
		t.Errorf("bytes waiting: %d, want exactly the quota, %d", n, 25*mib)
	}
}

// TestWorkspaceQuotaPresignAndCommit: presign refuses early what would
// not fit, storing no promise; a commit is checked again, exactly: one
// whose room was taken meanwhile is refused with nothing stored and its
// upload still committable once room is made.
func TestWorkspaceQuotaPresignAndCommit(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{S3: true, Env: map[string]string{
		"MAX_FILE_BYTES": "2000", "WORKSPACE_MAX_PENDING_BYTES": "3000", "INLINE_MAX_BYTES": "1024"}})
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	presign := func(size int) result {
		return post(t, presignURL(srv, ws.String()), tok, "application/json", []byte(fmt.Sprintf(`{"files":[{"name":"p.bin","size":%d}]}`, size)))
	}
	multipart := func(n int) result {
		body, ctype := form(t, file("m.bin", "", strings.Repeat("m", n)))
		return post(t, uploadsURL(srv, ws.String()), tok, ctype, body)
	}
	wantStatus(t, multipart(1500), http.StatusOK)
	presigned := sqlCount(t, srv, `SELECT count(*) FROM presigned_uploads`)
	wantQuota(t, presign(1501), "pending_bytes", 3000, 1500, 1501)
	if n := sqlCount(t, srv, `SELECT count(*) FROM presigned_uploads`); n != presigned {
		t.Fatalf("a refused presign stored a promise")
	}
	// Room for 1500 when presigned; taken by a multipart upload before the
	// commit.
	res := presign(1500)
	wantStatus(t, res, http.StatusOK)
	var pres presignAnswer
	decodeJSON(t, res.body, &pres)
	putObject(t, pres.Uploads[0].URL, pres.Uploads[0].Headers, []byte(strings.Repeat("p", 1500)))
	second := jsonObject(t, multipart(1000).body)["files"].([]any)[0].(map[string]any)["file_id"].(string)
	commit := []byte(fmt.Sprintf(`{"files":[{"upload_id":%q}]}`, pres.Uploads[0].UploadID))
	rows, activity := rowCounts(t, srv, ws)
	wantQuota(t, post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit), "pending_bytes", 3000, 2500, 1500)
	if u, a := rowCounts(t, srv, ws); u != rows || a != activity {
		t.Fatalf("a refused commit stored rows")
	}
	if n := sqlCount(t, srv, `SELECT count(*) FROM presigned_uploads WHERE file_id IS NOT NULL`); n != 0 {
		t.Fatalf("a refused commit claimed its upload")
	}
	wantStatus(t, post(t, ackURL(srv, ws.String(), second), tok, "", nil), http.StatusOK)
	wantStatus(t, post(t, uploadsURL(srv, ws.String()), tok, "application/json", commit), http.StatusOK)
}

// TestWorkspaceBusy: an upload whose workspace's turn another transaction
// holds past the bounded wait is 503 "workspace busy, retry shortly" with
// Retry-After, and stores nothing; another workspace's upload meanwhile is
// stored.
func TestWorkspaceBusy(t *testing.T) {
	t.Parallel()
	srv := apptest.NewServer(t, apptest.Options{})
	ws := uuid.New()
	ctx := context.Background()
	tx, err := srv.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7226))`, ws); err != nil {
		t.Fatal(err)
	}
	body, ctype := form(t, file("busy.txt", "text/plain", "waits"))
	other := uuid.New()
	wantStatus(t, post(t, uploadsURL(srv, other.String()), srv.AdminToken, ctype, body), http.StatusOK)
	res := post(t, uploadsURL(srv, ws.String()), srv.AdminToken, ctype, body)
	wantError(t, res, http.StatusServiceUnavailable, "workspace busy, retry shortly", map[string]any{"code": "unavailable"})
	if got := res.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After: got %q, want %q", got, "1")
	}
	if u, a := rowCounts(t, srv, ws); u != 0 || a != 0 {
		t.Fatalf("a busy upload stored rows: %d, %d", u, a)
	}
}

// retryAfterSeconds is an answer's Retry-After in whole seconds, 1 when
// absent or unreadable.
func retryAfterSeconds(h http.Header) int {
	if n, err := strconv.Atoi(h.Get("Retry-After")); err == nil && n > 0 && n <= 10 {
		return n
	}
	return 1
}
