package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgbouncertest"
)

// The service behind a transaction pooler: a real PgBouncer (Debian's,
// 1.18 on Debian 12) in transaction mode with two server connections,
// between the service's pool (8 connections here) and Postgres, as a
// Lambda fleet meets RDS Proxy or PgBouncer.

// poolerServer is the service with DATABASE_QUERY_MODE=mode behind a
// PgBouncer of opts, with env on top.
func poolerServer(t *testing.T, mode string, opts pgbouncertest.Options, s3 bool, env map[string]string) *apptest.Server {
	t.Helper()
	e := map[string]string{"DATABASE_QUERY_MODE": mode}
	for k, v := range env {
		e[k] = v
	}
	srv := apptest.NewServer(t, apptest.Options{S3: s3, PgBouncer: &opts, Env: e})
	if cc := srv.App.Pool.Config().ConnConfig; fmt.Sprintf("127.0.0.1:%d", cc.Port) != srv.Bouncer.Addr {
		t.Fatalf("the service's pool goes to %s:%d, not through PgBouncer at %s", cc.Host, cc.Port, srv.Bouncer.Addr)
	}
	return srv
}

// TestPoolerExecMode: with DATABASE_QUERY_MODE=exec, the service works
// through PgBouncer in transaction mode: upload (inline and to the
// bucket), list, content (a large inline file in its transaction too),
// presign, PUT and commit (and its retry), an abort, ack, and the sweep,
// with a workspace token looked up in the same round trips.
func TestPoolerExecMode(t *testing.T) {
	t.Parallel()
	srv := poolerServer(t, "exec", pgbouncertest.Options{}, true, map[string]string{"INLINE_MAX_BYTES": "1024", "ACK_RETENTION": "0s"})
	if got := srv.App.Pool.Config().ConnConfig.DefaultQueryExecMode; got != pgx.QueryExecModeExec {
		t.Fatalf("query mode: got %v, want exec", got)
	}
	ws := uuid.New()
	tok := srv.WorkspaceToken(t, ws)
	small, large := "small text", strings.Repeat("L", 5000) // inline; in the bucket
	staged := uploadParts(t, srv, ws.String(), tok, file("small.txt", "text/plain", small), file("large.bin", "application/octet-stream", large))
	if objectCount(t, srv, ws) != 1 {
		t.Fatalf("objects in the bucket: got %d, want 1 (the large file)", objectCount(t, srv, ws))
	}

	res := post(t, presignURL(srv, ws.String()), tok, "application/json", []byte(`{"files":[{"name":"p.bin","size":3000}]}`))
	wantStatus(t, res, http.StatusOK)
	var pre presignAnswer
	decodeJSON(t, res.body, &pre)
	presigned := bytes.Repeat([]byte("p"), 3000)
	putObject(t, pre.Uploads[0].URL, pre.Uploads[0].Headers, presigned)
	commit := post(t, uploadsURL(srv, ws.String()), tok, "application/json", commitBody(pre.Uploads[0].UploadID))
	wantStatus(t, commit, http.StatusOK)
	again := post(t, uploadsURL(srv, ws.String()), tok, "application/json", commitBody(pre.Uploads[0].UploadID))
	wantStatus(t, again, http.StatusOK)
	if !bytes.Equal(again.body, commit.body) {
		t.Errorf("commit retry: got %s, want the first answer %s", again.body, commit.body)
	}
	committed := fileIDs(t, commit.body)[0]
	// An upload aborted is gone: its commit is refused.
	res = post(t, presignURL(srv, ws.String()), tok, "application/json", []byte(`{"files":[{"name":"q.bin","size":2000}]}`))
	wantStatus(t, res, http.StatusOK)
	var aborted presignAnswer
	decodeJSON(t, res.body, &aborted)
	wantStatus(t, send(t, newRequest(t, "DELETE", presignURL(srv, ws.String())+"/"+aborted.Uploads[0].UploadID, tok, "", nil)), http.StatusOK)
	wantError(t, post(t, uploadsURL(srv, ws.String()), tok, "application/json", commitBody(aborted.Uploads[0].UploadID)),
		http.StatusConflict, "upload not received", map[string]any{"upload_id": aborted.Uploads[0].UploadID})

	want := map[string]string{staged[0].FileID: small, staged[1].FileID: large, committed: string(presigned)}
	var list struct {
		Uploads []map[string]any `json:"uploads"`
	}
	res = get(t, listURL(srv, ws.String()), tok)
	wantStatus(t, res, http.StatusOK)
	decodeJSON(t, res.body, &list)
	if len(list.Uploads) != 3 {
		t.Fatalf("list: got %d files, want 3: %s", len(list.Uploads), res.body)
	}
	for id, body := range want {
		res := get(t, contentURL(srv, ws.String(), id), tok)
		wantStatus(t, res, http.StatusOK)
		if string(res.body) != body {
			t.Errorf("content of %s: got %d bytes, not the %d uploaded", id, len(res.body), len(body))
		}
	}
	for id := range want {
		wantStatus(t, post(t, ackURL(srv, ws.String(), id), tok, "", nil), http.StatusOK)
		wantStatus(t, post(t, ackURL(srv, ws.String(), id), tok, "", nil), http.StatusOK) // idempotent
	}
	res = get(t, listURL(srv, ws.String()), tok)
	wantStatus(t, res, http.StatusOK)
	decodeJSON(t, res.body, &list)
	if len(list.Uploads) != 0 {
		t.Fatalf("list after the acks: got %s, want none", res.body)
	}
	sw, err := srv.Store.Sweep(context.Background(), 0)
	if err != nil || sw.Acked != 3 {
		t.Fatalf("sweep: got %+v, %v; want 3 acked rows deleted", sw, err)
	}
	if n := objectCount(t, srv, ws); n != 0 {
		t.Errorf("objects after the sweep: got %d, want 0", n)
	}

	// Token administration (pendingctl's token commands, the admin
	// function) through the service's database, pooled too.
	t.Run("TokenAdministration", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tok, info, err := admin.CreateToken(ctx, srv.App.DB, ws)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, get(t, listURL(srv, ws.String()), tok), http.StatusOK)
		list, err := admin.ListTokens(ctx, srv.App.DB, &ws, 10)
		if err != nil || len(list) != 2 {
			t.Fatalf("list tokens: got %d, %v; want 2", len(list), err)
		}
		if n, err := admin.RevokeToken(ctx, srv.App.DB, ws, info.ID); err != nil || n != 1 {
			t.Fatalf("revoke: got %d, %v", n, err)
		}
		wantError(t, get(t, listURL(srv, ws.String()), tok), http.StatusUnauthorized, msgInvalid, nil)
	})

	// Without a bucket, a file above pendinguploads.ChunkBytes is read in
	// chunks inside one REPEATABLE READ transaction: begun, its timeouts
	// set, and read through the pooler's one server connection for it.
	t.Run("LargeInlineFileInATransaction", func(t *testing.T) {
		srv := poolerServer(t, "exec", pgbouncertest.Options{}, false, nil)
		ws := uuid.New()
		tok := srv.WorkspaceToken(t, ws)
		data := make([]byte, 2<<20+123)
		for i := range data {
			data[i] = byte(i * 7)
		}
		f := uploadParts(t, srv, ws.String(), tok, file("big.bin", "application/octet-stream", string(data)))[0]
		res := get(t, contentURL(srv, ws.String(), f.FileID), tok)
		wantStatus(t, res, http.StatusOK)
		if !bytes.Equal(res.body, data) {
			t.Fatalf("content: got %d bytes, not the %d uploaded", len(res.body), len(data))
		}
		req := newRequest(t, "GET", contentURL(srv, ws.String(), f.FileID), tok, "", nil)
		req.Header.Set("Range", "bytes=1048570-1048600")
		res = send(t, req)
		wantStatus(t, res, http.StatusPartialContent)
		if !bytes.Equal(res.body, data[1048570:1048601]) {
			t.Fatalf("range across a chunk boundary: got %x, want %x", res.body, data[1048570:1048601])
		}
	})
}

// TestPoolerQuotaUnderConcurrency: TestWorkspaceQuotaUnderConcurrency
// through PgBouncer in exec mode: 20 uploads race for the last 5 MiB of
// a workspace's quota, their batches multiplexed by the pooler onto two
// server connections; the workspace's lock is a transaction's
// (pg_advisory_xact_lock, held to the batch's end on whichever server
// connection runs it), so exactly 5 get in.
func TestPoolerQuotaUnderConcurrency(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	srv := poolerServer(t, "exec", pgbouncertest.Options{}, false, map[string]string{
		"MAX_FILE_BYTES": fmt.Sprint(mib), "WORKSPACE_MAX_PENDING_BYTES": fmt.Sprint(25 * mib)})
	raceForTheQuota(t, srv)
}

// TestPoolerCacheStatementModeFails: what breaks through PgBouncer 1.18 in
// the default mode (cache_statement), and so why exec mode exists.
func TestPoolerCacheStatementModeFails(t *testing.T) {
	t.Parallel()
	// The session's timeouts go as startup parameters: PgBouncer refuses
	// the connection.
	t.Run("StartupParameterRefused", func(t *testing.T) {
		srv := poolerServer(t, "cache_statement", pgbouncertest.Options{}, false, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.App.Pool.Ping(ctx)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "08P01" || !strings.HasPrefix(pgErr.Message, "unsupported startup parameter") {
			t.Fatalf("connect through PgBouncer: got %v; want SQLSTATE 08P01, unsupported startup parameter", err)
		}
		t.Logf("cache_statement through PgBouncer: %v", err)
		wantStatus(t, get(t, listURL(srv, uuid.NewString()), srv.AdminToken), http.StatusServiceUnavailable)
	})
	// Told to ignore those parameters (so dropping them: no timeouts),
	// PgBouncer lets the default mode in, and its named statements then
	// meet server connections that another client connection prepared
	// them on.
	t.Run("PreparedStatementCollides", func(t *testing.T) {
		log := &syncBuffer{}
		srv := apptest.NewServer(t, apptest.Options{Log: log, Env: map[string]string{"DATABASE_QUERY_MODE": "cache_statement"},
			PgBouncer: &pgbouncertest.Options{IgnoreStartupParameters: []string{"statement_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout"}}})
		ws := uuid.New()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A poll prepares its statements on the service's one client
		// connection, and so on PgBouncer's one server connection.
		wantStatus(t, get(t, listURL(srv, ws.String()), srv.AdminToken), http.StatusOK)
		// Hold that client connection: the next poll opens another, whose
		// statement cache is empty, and PgBouncer gives it the same idle
		// server connection.
		held, err := srv.App.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release()
		res := get(t, listURL(srv, ws.String()), srv.AdminToken)
		if res.status < 500 || !strings.Contains(log.String(), `prepared statement \"stmtcache_`) || !strings.Contains(log.String(), `already exists (SQLSTATE 42P05)`) {
			t.Fatalf("a poll on a second client connection: status %d, log:\n%s\nwant a 5xx and prepared statement \"stmtcache_…\" already exists (SQLSTATE 42P05)", res.status, log)
		}
		t.Logf("poll through PgBouncer in cache_statement mode: %d %s", res.status, bytes.TrimSpace(res.body))

		// The same at the pool, one statement on two client connections.
		c2, err := srv.App.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Release()
		const q = `SELECT count(*) FROM pending_uploads WHERE workspace_id = $1`
		var n int
		if err := held.QueryRow(ctx, q, ws).Scan(&n); err != nil {
			t.Fatalf("first client connection: %v", err)
		}
		err = c2.QueryRow(ctx, q, ws).Scan(&n)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42P05" || !strings.HasPrefix(pgErr.Message, `prepared statement "stmtcache_`) {
			t.Fatalf("second client connection, same statement: got %v; want SQLSTATE 42P05, prepared statement \"stmtcache_…\" already exists", err)
		}
		t.Logf("cache_statement through PgBouncer: %v", err)
	})
}
