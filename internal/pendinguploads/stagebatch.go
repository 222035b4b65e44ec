package pendinguploads

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The stage's batch is sent below pgx's parameter encoding, on the
// connection's own protocol layer: pgx would copy every parameter into an
// encode buffer before copying it again into the wire message, so a file
// held in memory would be there three times (the request's bytes, pgx's
// buffer, the message) instead of twice. Here each file's bytes go into
// the message straight from the request's buffer. The statements are the
// same as elsewhere: prepared once per connection (pgx's cache of named
// statements), or sent unprepared where the pool runs in exec mode (RDS
// Proxy), and all of them in one round trip, one implicit transaction.

// stageBatch is the statements of one stage, with their parameters, in
// order.
type stageBatch struct {
	stmts []stageStmt
}

type stageStmt struct {
	sql     string
	values  [][]byte // nil entry: NULL
	formats []int16  // one per value: 0 text, 1 binary
	// read, when set, takes the statement's rows (binary columns).
	read func(rows [][][]byte) error
}

// param helpers: text and binary parameter values.
func textParam(s string) []byte    { return []byte(s) }
func uuidParam(u uuid.UUID) []byte { return []byte(u.String()) }

func (b *stageBatch) add(sql string, values [][]byte, formats []int16, read func([][][]byte) error) {
	b.stmts = append(b.stmts, stageStmt{sql: sql, values: values, formats: formats, read: read})
}

// addDeadlineGuard adds, when ctx has a deadline, the statement that
// fails once that deadline has passed on the server's clock (see
// deadlineGuardMark).
func (b *stageBatch) addDeadlineGuard(ctx context.Context) {
	if dl, ok := ctx.Deadline(); ok {
		b.add(`SELECT (CASE WHEN clock_timestamp() > $1::timestamptz THEN '`+deadlineGuardMark+`' END)::int`,
			[][]byte{textParam(dl.UTC().Format(time.RFC3339Nano))}, []int16{0}, nil)
	}
}

// addLookup adds c's token look-up (see Caller.queueLookup).
func (b *stageBatch) addLookup(c *Caller) *lookup {
	l := &lookup{c: c}
	if c.checked() {
		return l
	}
	l.queued = true
	b.add(tokenLookupSQL, [][]byte{c.TokenHash}, []int16{1}, func(rows [][][]byte) error {
		for _, row := range rows {
			if len(row) != 3 || len(row[0]) != 16 || len(row[2]) != 1 {
				return fmt.Errorf("token look-up: unexpected row")
			}
			t := &Token{Prefix: string(row[1]), Stale: row[2][0] == 1}
			copy(t.WorkspaceID[:], row[0])
			l.found = t
		}
		return nil
	})
	return l
}

// addClaim adds the consumption of the presigned uploads ids of
// workspaceID (fileIDs[i] the file ids[i] became), failing the batch
// unless every one was still there: see queueClaim's reasons. Rows are
// locked in upload_id order first, so two commits sharing uploads wait
// for each other instead of deadlocking.
func (b *stageBatch) addClaim(workspaceID uuid.UUID, ids, fileIDs []uuid.UUID) {
	idArr, fileArr := uuidArray(ids), uuidArray(fileIDs)
	ws := uuidParam(workspaceID)
	b.add(`
		SELECT 1 FROM presigned_uploads WHERE upload_id = ANY($1::uuid[]) AND workspace_id = $2::uuid
		ORDER BY upload_id FOR UPDATE`, [][]byte{idArr, ws}, []int16{0, 0}, nil)
	b.add(`
		WITH c AS (
		    UPDATE presigned_uploads p SET file_id = c.fid
		    FROM unnest($1::uuid[], $3::uuid[]) AS c(id, fid)
		    WHERE p.upload_id = c.id AND p.workspace_id = $2::uuid AND p.expires_at > now() AND p.file_id IS NULL
		    RETURNING 1)
		SELECT (CASE WHEN (SELECT count(*) FROM c) <> $4::int THEN '`+claimLostMark+`' END)::int`,
		[][]byte{idArr, ws, fileArr, textParam(strconv.Itoa(len(ids)))}, []int16{0, 0, 0, 0}, nil)
}

// uuidArray is ids as a text-format uuid[] literal.
func uuidArray(ids []uuid.UUID) []byte {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return []byte("{" + strings.Join(parts, ",") + "}")
}

// addInsert adds the INSERT of recs (the bytes of an inline one from its
// item, as they are), and fills their created_at and expires_at from its
// answer; *got counts the rows that came back.
func (b *stageBatch) addInsert(c *Caller, workspaceID uuid.UUID, items []item, recs []Record, ttl time.Duration) *int {
	values := [][]byte{uuidParam(workspaceID), textParam(strconv.FormatInt(ttl.Microseconds(), 10)), c.hash()}
	formats := []int16{0, 0, 1}
	rows := make([]string, len(recs))
	for i, r := range recs {
		var content, key []byte
		if r.s3Key != "" {
			key = textParam(r.s3Key)
		} else {
			content = items[i].Content
		}
		n := len(values)
		rows[i] = fmt.Sprintf("($%d::uuid, $%d::bytea, $%d::text, $%d::bigint, $%d::bytea, $%d::text, $%d::text)",
			n+1, n+2, n+3, n+4, n+5, n+6, n+7)
		values = append(values, uuidParam(r.FileID), content, key, textParam(strconv.FormatInt(r.SizeBytes, 10)),
			r.SHA256, textParam(r.Filename), textParam(r.Mimetype))
		formats = append(formats, 0, 1, 0, 0, 1, 0, 0)
	}
	sql := `INSERT INTO pending_uploads
		    (file_id, workspace_id, content, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		SELECT v.file_id, $1::uuid, v.content, v.s3_key, v.size_bytes, v.sha256, v.filename, v.mimetype,
		       now(), now() + $2::bigint * interval '1 microsecond'
		FROM (VALUES ` + strings.Join(rows, ", ") + `)
		     AS v(file_id, content, s3_key, size_bytes, sha256, filename, mimetype)
		WHERE ` + authorized(3, 1) + `
		RETURNING file_id, created_at, expires_at`
	byID := make(map[uuid.UUID]*Record, len(recs))
	for i := range recs {
		byID[recs[i].FileID] = &recs[i]
	}
	got := new(int)
	b.add(sql, values, formats, func(rows [][][]byte) error {
		for _, row := range rows {
			if len(row) != 3 || len(row[0]) != 16 || len(row[1]) != 8 || len(row[2]) != 8 {
				return fmt.Errorf("insert: unexpected row")
			}
			var id uuid.UUID
			copy(id[:], row[0])
			if r := byID[id]; r != nil {
				r.CreatedAt, r.ExpiresAt = pgTime(row[1]), pgTime(row[2])
				*got++
			}
		}
		return nil
	})
	return got
}

// pgEpoch is where Postgres's binary timestamps count from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// pgTime decodes a binary timestamptz: microseconds since pgEpoch.
func pgTime(b []byte) time.Time {
	us := int64(binary.BigEndian.Uint64(b))
	return pgEpoch.Add(time.Duration(us) * time.Microsecond).Local()
}

// addActivity adds the INSERT of one activity_logs row per record: the
// platforms whose workspaces poll activity_logs learn of the upload there.
func (b *stageBatch) addActivity(c *Caller, workspaceID uuid.UUID, recs []Record) error {
	values := [][]byte{uuidParam(workspaceID), c.hash()}
	formats := []int16{0, 1}
	rows := make([]string, len(recs))
	for i, r := range recs {
		body, err := json.Marshal(activityBody{
			FileID: r.FileID.String(), Name: r.Filename, Mimetype: r.Mimetype, Size: r.SizeBytes, URI: r.URI(),
		})
		if err != nil {
			return fmt.Errorf("activity: %w", err)
		}
		n := len(values)
		rows[i] = fmt.Sprintf("($%d::text, $%d::text)", n+1, n+2)
		values = append(values, textParam("chat_upload_receive: "+r.Filename), body)
		formats = append(formats, 0, 0)
	}
	b.add(`
		INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		SELECT $1::uuid, 'a2a_receive', 'chat_upload_receive', $1::uuid, v.summary, 'ok', v.body::jsonb
		FROM (VALUES `+strings.Join(rows, ", ")+`) AS v(summary, body)
		WHERE `+authorized(2, 1), values, formats, nil)
	return nil
}

// send runs the batch on a connection of db: one round trip. Statements
// are prepared once per connection, unless the pool's connections run in
// exec or simple-protocol mode; the batch is reported to the pool's
// tracer as a batch.
func (b *stageBatch) send(ctx context.Context, db DB) (err error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	pc := conn.Conn()
	prepared := true
	switch pc.Config().DefaultQueryExecMode {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		prepared = false
	}
	var pb pgconn.Batch
	for _, st := range b.stmts {
		resultFormats := []int16{1} // every column binary
		if !prepared {
			pb.ExecParams(st.sql, st.values, nil, st.formats, resultFormats)
			continue
		}
		sum := sha256.Sum256([]byte(st.sql))
		sd, err := pc.Prepare(ctx, "pendinguploads_"+hex.EncodeToString(sum[:12]), st.sql)
		if err != nil {
			return err
		}
		pb.ExecStatement(sd, st.values, st.formats, resultFormats)
	}
	tracer, _ := pc.Config().Tracer.(pgx.BatchTracer)
	if tracer != nil {
		ctx = tracer.TraceBatchStart(ctx, pc, pgx.TraceBatchStartData{Batch: &pgx.Batch{}})
		defer func() { tracer.TraceBatchEnd(ctx, pc, pgx.TraceBatchEndData{Err: err}) }()
	}
	results, err := pc.PgConn().ExecBatch(ctx, &pb).ReadAll()
	if tracer != nil {
		for i, st := range b.stmts {
			d := pgx.TraceBatchQueryData{SQL: st.sql}
			if i < len(results) {
				d.CommandTag, d.Err = results[i].CommandTag, results[i].Err
			}
			tracer.TraceBatchQuery(ctx, pc, d)
		}
	}
	if err != nil {
		return err
	}
	if len(results) != len(b.stmts) {
		return fmt.Errorf("stage: %d results for %d statements", len(results), len(b.stmts))
	}
	for i, st := range b.stmts {
		if results[i].Err != nil {
			return results[i].Err
		}
		if st.read != nil {
			if err := st.read(results[i].Rows); err != nil {
				return err
			}
		}
	}
	return nil
}
