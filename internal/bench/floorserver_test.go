package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// floorServer is the least net/http code that does what the service does
// for three requests with a workspace token, on one pgx pool: the
// baseline of BenchmarkFloor. Each request is one round trip, a pgx.Batch
// of the service's own statements (copied from internal/pendinguploads'
// access.go, list.go, fetch.go and stage.go, for a database without the
// platform's org tokens, numbered $n, with the caller's check as
// callerMayAct was written before it was named), and answers the
// service's status, headers and JSON. What it leaves out is everything
// around the SQL: the route front, the identity in the context, the
// request deadline, the checks of query strings and multipart framing,
// logging, metrics, the last_used_at stamp (once a minute), error
// answers beyond a bare status.
type floorServer struct {
	pool *pgxpool.Pool
	// quota is the service's per-workspace quota (the statements carry
	// it, as the service's do).
	maxFiles, maxBytes int64
	ttl                time.Duration
}

func (f *floorServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /workspaces/{ws}/pending-uploads", f.list)
	mux.HandleFunc("GET /workspaces/{ws}/pending-uploads/{file}/content", f.content)
	mux.HandleFunc("POST /workspaces/{ws}/chat/uploads", f.upload)
	return mux
}

// guardSQL is the store's caller check (callerMayAct: pendinguploads/access.go,
// mayActSQL) for a database without org tokens, as it read the token
// tables in every statement (the store now reads them once a
// transaction and keeps the verdict): the bearer's hash ($h) is a live
// token of workspace $w, a NULL hash standing for @caller_trusted (the
// same plan: a constant that holds or not).
func guardSQL(h, w int) string {
	return `($` + strconv.Itoa(h) + `::bytea IS NULL OR EXISTS (
		SELECT 1 FROM workspace_auth_tokens tok
		WHERE tok.token_hash = $` + strconv.Itoa(h) + ` AND tok.revoked_at IS NULL AND tok.workspace_id = $` + strconv.Itoa(w) + `::uuid))`
}

// The service's statements, with the guard in place.
var (
	floorLookupSQL = `
		SELECT 'workspace_auth_tokens', workspace_id, prefix, coalesce(last_used_at <= now() - interval '1 minute', true),
		       $2::uuid IS NULL OR workspace_id = $2::uuid
		FROM workspace_auth_tokens WHERE token_hash = $1 AND revoked_at IS NULL
		LIMIT 1`
	floorListSQL = `SELECT file_id, workspace_id, filename, mimetype, size_bytes, sha256,
		       created_at, fetched_at, expires_at
		FROM pending_uploads
		WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now() AND ` + guardSQL(3, 1) +
		` ORDER BY created_at, file_id LIMIT $2`
	floorFetchSQL = `
		WITH u AS (
		    UPDATE pending_uploads SET fetched_at = now()
		    WHERE file_id = $1 AND workspace_id = $2 AND (acked_at IS NOT NULL OR expires_at > now())
		      AND (size_bytes > $5 OR ($6 AND s3_key IS NOT NULL))
		      AND ` + guardSQL(4, 2) + `
		    RETURNING file_id, fetched_at,
		              CASE WHEN s3_key IS NULL AND size_bytes <= $3 THEN content END AS content
		)
		SELECT p.file_id, p.workspace_id, p.filename, p.mimetype, p.size_bytes, p.sha256,
		       p.created_at, coalesce(u.fetched_at, p.fetched_at), p.acked_at, p.expires_at, p.s3_key,
		       u.content, u.file_id IS NOT NULL
		FROM pending_uploads p LEFT JOIN u ON u.file_id = p.file_id
		WHERE p.file_id = $1 AND (p.acked_at IS NOT NULL OR p.expires_at > now()) AND ` + guardSQL(4, 2)
	floorLockSQL    = `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7226)) WHERE ` + guardSQL(2, 1)
	floorPendingSQL = `
	SELECT count(*), coalesce(sum(size_bytes), 0)::bigint FROM pending_uploads
	WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now() AND ` + guardSQL(2, 1)
	floorInsertSQL = `
		WITH ins AS (
		    INSERT INTO pending_uploads
		        (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		    SELECT v.file_id, $1, v.content, v.s3_key, v.size_bytes, v.sha256, v.filename, v.mimetype,
		           now(), now() + $2::bigint * interval '1 microsecond'
		    FROM (VALUES ($9::uuid, $10::bytea, $11::text, $12::bigint, $13::bytea, $14::text, $15::text))
		         AS v(file_id, content, s3_key, size_bytes, sha256, filename, mimetype)
		    WHERE ($4::timestamptz IS NULL OR now() <= $4) AND ` + guardSQL(3, 1) + ` AND ` +
		`(SELECT count(*) + $5::bigint <= $6::bigint AND coalesce(sum(size_bytes), 0) + $7::bigint <= $8::bigint
		FROM pending_uploads WHERE workspace_id = $1 AND acked_at IS NULL AND expires_at > now())
		    RETURNING file_id, filename, mimetype, size_bytes, created_at, expires_at
		), activity AS (
		    INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		    SELECT $1, 'a2a_receive', 'chat_upload_receive', $1, 'chat_upload_receive: ' || filename, 'ok',
		           jsonb_build_object('file_id', file_id, 'name', filename, 'mimeType', mimetype, 'size', size_bytes,
		                              'uri', 'platform-pending:' || $1::text || '/' || file_id::text)
		    FROM ins
		)
		SELECT file_id, created_at, expires_at FROM ins`
)

// floorCall is one request's workspace and bearer hash, and its batch
// with the token's look-up queued first.
type floorCall struct {
	ws      uuid.UUID
	hash    []byte
	batch   pgx.Batch
	allowed bool
}

// begin parses the path's workspace and the bearer, and queues the
// look-up; false after answering a refusal.
func begin(w http.ResponseWriter, r *http.Request) (*floorCall, bool) {
	ws, err := uuid.Parse(r.PathValue("ws"))
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err != nil || !ok {
		http.Error(w, "", http.StatusBadRequest)
		return nil, false
	}
	sum := sha256.Sum256([]byte(tok))
	c := &floorCall{ws: ws, hash: sum[:]}
	c.batch.Queue(floorLookupSQL, c.hash, ws).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var table, prefix string
			var tokWS *uuid.UUID
			var stale bool
			if err := rows.Scan(&table, &tokWS, &prefix, &stale, &c.allowed); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return c, true
}

// send runs the batch; false after answering 503 or 401.
func (c *floorCall) send(ctx context.Context, pool *pgxpool.Pool, w http.ResponseWriter) bool {
	if err := pool.SendBatch(ctx, &c.batch).Close(); err != nil {
		http.Error(w, "", http.StatusServiceUnavailable)
		return false
	}
	if !c.allowed {
		http.Error(w, "", http.StatusUnauthorized)
		return false
	}
	return true
}

// floorFile is one file of the list's answer (httpapi's listedFile).
type floorFile struct {
	FileID    string  `json:"file_id"`
	URI       string  `json:"uri"`
	Name      string  `json:"name"`
	MimeType  string  `json:"mimeType"`
	Size      int64   `json:"size"`
	SHA256    *string `json:"sha256"`
	CreatedAt string  `json:"created_at"`
	ExpiresAt string  `json:"expires_at"`
	FetchedAt *string `json:"fetched_at"`
}

// list is the first page (50) of the workspace's pending files.
func (f *floorServer) list(w http.ResponseWriter, r *http.Request) {
	const limit = 50
	c, ok := begin(w, r)
	if !ok {
		return
	}
	files := make([]floorFile, 0, limit+1)
	var lastAt time.Time
	var lastID uuid.UUID
	var row struct {
		id, ws           uuid.UUID
		name, mime       string
		size             int64
		sum              []byte
		created, expires time.Time
		fetched          *time.Time
	}
	c.batch.Queue(floorListSQL, c.ws, limit+1, c.hash).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan((*[16]byte)(&row.id), (*[16]byte)(&row.ws), &row.name, &row.mime, &row.size, &row.sum,
				&row.created, &row.fetched, &row.expires); err != nil {
				return err
			}
			id := row.id.String()
			ff := floorFile{FileID: id, URI: "platform-pending:" + row.ws.String() + "/" + id, Name: row.name,
				MimeType: row.mime, Size: row.size, CreatedAt: row.created.UTC().Format(time.RFC3339Nano),
				ExpiresAt: row.expires.UTC().Format(time.RFC3339Nano)}
			if row.sum != nil {
				h := hex.EncodeToString(row.sum)
				ff.SHA256 = &h
			}
			if row.fetched != nil {
				s := row.fetched.UTC().Format(time.RFC3339Nano)
				ff.FetchedAt = &s
			}
			files = append(files, ff)
			if len(files) == limit {
				lastAt, lastID = row.created, row.id
			}
		}
		return rows.Err()
	})
	if !c.send(r.Context(), f.pool, w) {
		return
	}
	body := struct {
		Uploads    []floorFile `json:"uploads"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}{Uploads: files}
	if len(files) > limit {
		body.Uploads = files[:limit]
		var cur [24]byte
		binary.BigEndian.PutUint64(cur[:8], uint64(lastAt.UnixMicro()))
		copy(cur[8:], lastID[:])
		body.NextCursor = base64.RawURLEncoding.EncodeToString(cur[:])
	}
	floorJSON(w, body)
}

// content is a whole inline file of at most 1 MiB, its fetched_at stamped.
func (f *floorServer) content(w http.ResponseWriter, r *http.Request) {
	c, ok := begin(w, r)
	if !ok {
		return
	}
	file, err := uuid.Parse(r.PathValue("file"))
	if err != nil {
		http.Error(w, "", http.StatusBadRequest)
		return
	}
	var found bool
	var ws uuid.UUID
	var name, mime string
	var size int64
	var sum, content []byte
	c.batch.Queue(floorFetchSQL, file, c.ws, int64(1<<20), c.hash, int64(0), false).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var created, expires time.Time
			var fetched, acked *time.Time
			var key *string
			var stamped bool
			if err := rows.Scan(&id, &ws, &name, &mime, &size, &sum, &created, &fetched, &acked, &expires, &key, &content, &stamped); err != nil {
				return err
			}
			found = stamped
		}
		return rows.Err()
	})
	if !c.send(r.Context(), f.pool, w) {
		return
	}
	if !found || ws != c.ws || int64(len(content)) != size {
		http.Error(w, "", http.StatusNotFound)
		return
	}
	if mime == "" {
		mime = sanitize.OctetStream
	}
	h := w.Header()
	h.Set("Content-Type", mime)
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", sanitize.ContentDisposition(name))
	h.Set("Repr-Digest", sanitize.Digest(sum))
	h.Set("Content-Digest", sanitize.Digest(sum))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", `"`+hex.EncodeToString(sum)+`"`)
	_, _ = w.Write(content)
}

// floorStaged is one file of the upload's answer (httpapi's stagedFile).
type floorStaged struct {
	FileID   string `json:"file_id"`
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// upload stores the one file of a multipart body, with its activity row,
// under the workspace's lock and quota.
func (f *floorServer) upload(w http.ResponseWriter, r *http.Request) {
	c, ok := begin(w, r)
	if !ok {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		http.Error(w, "", http.StatusBadRequest)
		return
	}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != "files" {
		http.Error(w, "", http.StatusBadRequest)
		return
	}
	var buf bytes.Buffer
	buf.Grow(int(r.ContentLength))
	if _, err := buf.ReadFrom(part); err != nil || buf.Len() == 0 {
		http.Error(w, "", http.StatusBadRequest)
		return
	}
	content := buf.Bytes()
	sum := sha256.Sum256(content)
	id := uuid.New()
	name, mime, size := sanitize.Filename(part.FileName()), sanitize.Mimetype(part.Header.Get("Content-Type")), int64(len(content))
	c.batch.Queue(floorLockSQL, c.ws, c.hash)
	c.batch.Queue(floorPendingSQL, c.ws, c.hash)
	stored := false
	c.batch.Queue(floorInsertSQL, c.ws, f.ttl.Microseconds(), c.hash, nil, int64(1), f.maxFiles, size, f.maxBytes,
		id.String(), content, nil, size, sum[:], name, mime).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			stored = true
		}
		return rows.Err()
	})
	if !c.send(r.Context(), f.pool, w) {
		return
	}
	if !stored {
		http.Error(w, "", http.StatusRequestEntityTooLarge)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	floorJSON(w, map[string]any{"files": []floorStaged{{FileID: id.String(), URI: "platform-pending:" + c.ws.String() + "/" + id.String(),
		Name: name, MimeType: mime, Size: size, SHA256: hex.EncodeToString(sum[:])}}})
}

// floorJSON answers 200 with v, as httpapi's writeJSON does.
func floorJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(append(b, '\n'))
}
