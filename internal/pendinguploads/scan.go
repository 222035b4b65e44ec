package pendinguploads

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/auth"
)

// Malware scanning before delivery (issue 44; docs/scanning.md). With
// Settings.Scanned, every new file's bytes go to the bucket, and the file
// is staged in scanned_uploads, not pending_uploads: the list, fetch,
// link and ack statements never see it, and no activity row or push hint
// announces it. The scanner (GuardDuty Malware Protection for S3 in AWS,
// clamd through internal/scanresult's stand-in locally) scans the
// committed object, objects/<workspace>/<file>, and its verdict comes
// back through Decide: a clean file moves into pending_uploads in one
// transaction with its activity row, and the Notifier hears of it; an
// infected one is blocked, its object deleted; one the scanner could not
// decide is held (or delivered, by the policy, which the caller applies).

// ScanState is a scanned file's state, as the sender reads it (ScanStates).
type ScanState string

const (
	// ScanPending: the scan has not answered; the file is not delivered.
	ScanPending ScanState = "pending"
	// ScanClean: delivered (or, on a deployment that does not scan, never
	// held back).
	ScanClean ScanState = "clean"
	// ScanBlocked: the scan found a threat; never delivered, its bytes
	// deleted.
	ScanBlocked ScanState = "blocked"
	// ScanHeld: the scan could not decide, or did not answer within
	// SCAN_TIMEOUT, and the policy holds it for an operator; not delivered.
	ScanHeld ScanState = "held"
)

// Verdict is what a scan's result does to its file.
type Verdict int

const (
	// Deliver moves a pending or held file into delivery.
	Deliver Verdict = iota + 1
	// Block refuses a pending or held file for good and deletes its bytes.
	Block
	// Hold holds a pending file for an operator.
	Hold
)

func (v Verdict) String() string {
	switch v {
	case Deliver:
		return "deliver"
	case Block:
		return "block"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// ScanDecision is one scan result applied to one file (Decide).
type ScanDecision struct {
	WorkspaceID, FileID uuid.UUID
	// State is the file's state after the call: what the decision made
	// of it, or, when it changed nothing (a repeated or late result, a
	// file acked or swept), what it already was; "" when no file has the
	// key (swept, or never ours).
	State ScanState
	// Changed says whether this call moved the file.
	Changed bool
	// Filename is the file's name, for the operator's log line; the bytes
	// are never read here.
	Filename string
}

// Bounds of a verdict's words, as the table holds them.
const (
	maxScanResult = 32
	maxScanReason = 512
)

// ObjectFile returns the workspace and file an object key of ours
// (objects/<workspace>/<file>, objectKey) names; ok is false for any
// other key: a staging object, a marker, another application's.
func ObjectFile(key string) (workspaceID, fileID uuid.UUID, ok bool) {
	rest, found := strings.CutPrefix(key, "objects/")
	if !found {
		return uuid.Nil, uuid.Nil, false
	}
	ws, file, found := strings.Cut(rest, "/")
	if !found || len(ws) != 36 || len(file) != 36 {
		return uuid.Nil, uuid.Nil, false
	}
	w, err1 := uuid.Parse(ws)
	f, err2 := uuid.Parse(file)
	if err1 != nil || err2 != nil || objectKey(w, f) != key {
		return uuid.Nil, uuid.Nil, false
	}
	return w, f, true
}

// Decide applies verdict v, for the scanner's result (its word, e.g.
// GuardDuty's scanResultStatus, and the threats it named: reason), to the
// file whose object is key. It acts for the scanner, not for a caller:
// the key names the workspace, and only a file waiting in scanned_uploads
// under that workspace moves.
//
// It is idempotent and order-free, as EventBridge's at-least-once
// delivery needs: only a pending file moves (a held one too, to Deliver
// or Block); a repeated result, a result for a file already decided, acked,
// expired or swept, or for a key that is not a file of ours, changes
// nothing and is not an error. The first decisive verdict stands: a file
// delivered is never taken back. Deliver moves the file into
// pending_uploads with its activity row in one statement, its created_at
// and expires_at kept (the expiry counts from staging), then tells the
// Notifier. Block deletes the object after its row is marked, and again on
// every repeat of the result, so a deletion the bucket refused is retried
// by the event's redelivery: its error is returned.
func (s *Store) Decide(ctx context.Context, key string, v Verdict, result, reason string) (ScanDecision, error) {
	ws, file, ok := ObjectFile(key)
	if !ok {
		return ScanDecision{}, nil
	}
	d := ScanDecision{WorkspaceID: ws, FileID: file}
	result, reason = truncate(result, maxScanResult), truncate(reason, maxScanReason)
	args := pgx.NamedArgs{"workspace": ws, "file_id": file, "result": result, "reason": reason}
	var err error
	switch v {
	case Deliver:
		err = s.decideDeliver(ctx, args, &d)
	case Block, Hold:
		err = s.decideRefuse(ctx, v, args, &d)
	default:
		return d, fmt.Errorf("decide %s: unknown verdict %v", key, v)
	}
	if err != nil {
		return d, wrap("decide "+key, err)
	}
	if d.State == ScanBlocked && s.bucket != nil {
		if err := s.bucket.Delete(ctx, []string{key}); err != nil {
			return d, wrap("decide "+key+": delete the blocked object", err)
		}
	}
	if d.Changed && d.State == ScanClean {
		s.notify(ctx, ws, []Record{{FileID: file, WorkspaceID: ws}})
	}
	return d, nil
}

// deliveredAnnounced are the CTEs that follow a delivery's ins (the
// file's row now in pending_uploads, RETURNING file_id, filename,
// mimetype, size_bytes, created_at, expires_at), in the statement that
// delivers it (decideDeliver's, releaseHeld's): its activity row, and the
// workspace's running total (pending_upload_totals), so that the file
// waits for the workspace as queueInsert's do.
const deliveredAnnounced = `activity AS (
		    INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		    SELECT @workspace, 'a2a_receive', 'chat_upload_receive', @workspace, 'chat_upload_receive: ' || filename, 'ok',
		           jsonb_build_object('file_id', file_id, 'name', filename, 'mimeType', mimetype, 'size', size_bytes,
		                              'uri', 'platform-pending:' || @workspace::text || '/' || file_id::text)
		    FROM ins
		), total AS (
		    INSERT INTO pending_upload_totals AS t (workspace_id, files, bytes, max_ttl)
		    SELECT @workspace, count(*), coalesce(sum(size_bytes), 0), max(expires_at - created_at) FROM ins HAVING count(*) > 0
		    ON CONFLICT (workspace_id) DO UPDATE SET files = t.files + excluded.files, bytes = t.bytes + excluded.bytes,
		        max_ttl = greatest(t.max_ttl, excluded.max_ttl)
		)`

// decideDeliver moves a pending or held, unexpired file into delivery:
// one statement, its own transaction.
func (s *Store) decideDeliver(ctx context.Context, args pgx.NamedArgs, d *ScanDecision) error {
	var moved int
	var before *string
	var filename *string
	err := s.db.QueryRow(ctx, `
		WITH s AS (
		    UPDATE scanned_uploads SET state = 'clean', result = @result, reason = @reason, decided_at = now()
		    WHERE file_id = @file_id AND workspace_id = @workspace AND state IN ('pending', 'held') AND expires_at > now()
		    RETURNING file_id, workspace_id, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at
		), ins AS (
		    INSERT INTO pending_uploads
		        (file_id, workspace_id, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		    SELECT file_id, workspace_id, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at FROM s
		    ON CONFLICT (file_id) DO NOTHING
		    RETURNING file_id, filename, mimetype, size_bytes, created_at, expires_at
		), `+deliveredAnnounced+`
		SELECT (SELECT count(*) FROM ins)::int,
		       (SELECT state FROM scanned_uploads WHERE file_id = @file_id AND workspace_id = @workspace),
		       (SELECT filename FROM scanned_uploads WHERE file_id = @file_id AND workspace_id = @workspace)`, args,
	).Scan(&moved, &before, &filename)
	if err != nil {
		return err
	}
	if filename != nil {
		d.Filename = *filename
	}
	switch {
	case moved == 1:
		d.State, d.Changed = ScanClean, true
	case before != nil:
		d.State = ScanState(*before) // the statement's snapshot: unchanged by it
	}
	return nil
}

// decideRefuse blocks (from pending or held) or holds (from pending) a
// file, expired or not.
func (s *Store) decideRefuse(ctx context.Context, v Verdict, args pgx.NamedArgs, d *ScanDecision) error {
	from, to := `('pending', 'held')`, ScanBlocked
	if v == Hold {
		from, to = `('pending')`, ScanHeld
	}
	args["state"] = string(to)
	var changed int
	var before, filename *string
	err := s.db.QueryRow(ctx, `
		WITH upd AS (
		    UPDATE scanned_uploads SET state = @state, result = @result, reason = @reason, decided_at = now()
		    WHERE file_id = @file_id AND workspace_id = @workspace AND state IN `+from+`
		    RETURNING file_id
		)
		SELECT (SELECT count(*) FROM upd)::int,
		       (SELECT state FROM scanned_uploads WHERE file_id = @file_id AND workspace_id = @workspace),
		       (SELECT filename FROM scanned_uploads WHERE file_id = @file_id AND workspace_id = @workspace)`, args,
	).Scan(&changed, &before, &filename)
	if err != nil {
		return err
	}
	if filename != nil {
		d.Filename = *filename
	}
	switch {
	case changed == 1:
		d.State, d.Changed = to, true
	case before != nil:
		d.State = ScanState(*before)
	}
	return nil
}

// truncate bounds s to n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Overdue is one file a timeout pass (DecideOverdue) held or delivered.
type Overdue struct {
	WorkspaceID, FileID uuid.UUID
	Filename            string
}

// maxOverduePerPass bounds one DecideOverdue.
const maxOverduePerPass = 1000

// DecideOverdue applies verdict v (Hold or Deliver: the policy) to the
// files whose scan has not answered within timeout of their staging,
// result TIMEOUT, at most maxOverduePerPass of them, and returns them.
// It acts for the schedule, on every workspace. A result that arrives
// after still applies where Decide allows it (a held file may still be
// delivered or blocked).
func (s *Store) DecideOverdue(ctx context.Context, timeout time.Duration, v Verdict) ([]Overdue, error) {
	if v != Hold && v != Deliver {
		return nil, fmt.Errorf("decide overdue: verdict %v is not a policy", v)
	}
	rows, err := s.db.Query(ctx, `
		SELECT file_id, workspace_id, s3_key FROM scanned_uploads
		WHERE state = 'pending' AND created_at < now() - @timeout_micros::bigint * interval '1 microsecond'
		ORDER BY created_at LIMIT @max`,
		pgx.NamedArgs{"timeout_micros": timeout.Microseconds(), "max": maxOverduePerPass})
	if err != nil {
		return nil, wrap("decide overdue", err)
	}
	var keys []string
	for rows.Next() {
		var file, ws uuid.UUID
		var key string
		if err := rows.Scan(&file, &ws, &key); err != nil {
			rows.Close()
			return nil, wrap("decide overdue", err)
		}
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("decide overdue", err)
	}
	var out []Overdue
	for _, key := range keys {
		d, err := s.Decide(ctx, key, v, "TIMEOUT", "no scan result within "+timeout.String())
		if err != nil {
			return out, err
		}
		if d.Changed {
			out = append(out, Overdue{WorkspaceID: d.WorkspaceID, FileID: d.FileID, Filename: d.Filename})
		}
	}
	return out, nil
}

// HeldScan is a file held for an operator (HeldScans).
type HeldScan struct {
	WorkspaceID, FileID uuid.UUID
	Filename            string
	SizeBytes           int64
	Result, Reason      string
	CreatedAt           time.Time
	ExpiresAt           time.Time
}

// HeldScans returns, oldest first, at most limit (1..1000) unexpired
// files held for an operator, on every workspace: pendingctl scans and the
// held-files metric read it. It acts for the operator.
func (s *Store) HeldScans(ctx context.Context, limit int) ([]HeldScan, error) {
	limit = min(max(limit, 1), 1000)
	rows, err := s.db.Query(ctx, `
		SELECT workspace_id, file_id, filename, size_bytes, coalesce(result, ''), coalesce(reason, ''), created_at, expires_at
		FROM scanned_uploads WHERE state = 'held' AND expires_at > now()
		ORDER BY created_at LIMIT @limit`, pgx.NamedArgs{"limit": limit})
	if err != nil {
		return nil, wrap("held scans", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (HeldScan, error) {
		var h HeldScan
		err := row.Scan(&h.WorkspaceID, &h.FileID, &h.Filename, &h.SizeBytes, &h.Result, &h.Reason, &h.CreatedAt, &h.ExpiresAt)
		return h, err
	})
	return out, wrap("held scans", err)
}

// ResultOperator is the result DecideHeld records for a file an operator
// released or blocked: the word that decided it, which its sender reads
// (lower-cased, on the scan route) beside the state. The scanner's own word
// stays in the record's reason.
const ResultOperator = "OPERATOR"

// DecideHeld releases (Deliver) or blocks (Block) workspaceID's file
// fileID held for an operator (HeldScans), for the operator: pendingctl
// scans release and block, whose authority is the database's credentials.
// It acts on that one workspace as a checked caller of its own
// (operatorAccess): each statement binds the file to @workspace and names
// callerMayAct, as a caller's do.
//
// Deliver is a clean verdict's delivery (Decide's): the file moves into
// pending_uploads with its activity row and the workspace's running total
// in one statement, its created_at and expires_at kept, then the Notifier
// hears of it. Block refuses it for good, as THREATS_FOUND does: its row
// is marked, then its object deleted (and again on a repeat, so that a
// deletion the bucket refused is retried by running the command again).
// The record keeps who decided (result ResultOperator) and what the scan
// had said (reason).
//
// Only a held file moves. The call is idempotent: a file already in the
// state asked for (delivered, or blocked) is no error, and Changed is
// false. A file waiting for its scan, one delivered asked to be blocked
// (a delivered file is never taken back) and one blocked asked to be
// released are ErrNotHeld, its State saying what it is. A file the
// workspace does not have (never, expired, swept, another workspace's) is
// ErrNotFound. Block without a bucket is ErrNoBucket, before any I/O.
func (s *Store) DecideHeld(ctx context.Context, workspaceID, fileID uuid.UUID, v Verdict) (ScanDecision, error) {
	d := ScanDecision{WorkspaceID: workspaceID, FileID: fileID}
	op := fmt.Sprintf("%s held %s", v, fileID)
	var want ScanState
	switch v {
	case Deliver:
		want = ScanClean
	case Block:
		want = ScanBlocked
		if s.bucket == nil {
			return d, fmt.Errorf("%s: %w", op, ErrNoBucket)
		}
	default:
		return d, fmt.Errorf("%s: verdict %v is not an operator's", op, v)
	}
	a := s.operatorAccess(workspaceID)
	named := pgx.StrictNamedArgs{"file_id": fileID, "result": ResultOperator, "note": "by an operator"}
	var b pgx.Batch
	var moved int
	var state, filename string
	found := false
	scan := func(row pgx.Row) error {
		err := row.Scan(&moved, &state, &filename)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	}
	// The reason keeps what the scan had said: the UPDATE's right-hand
	// side reads the row as it was.
	if v == Deliver {
		b.Queue(`
			WITH s AS (
			    UPDATE scanned_uploads SET state = 'clean', result = @result, decided_at = now(),
			        reason = left('released ' || @note || '; the scan said ' || coalesce(result, 'nothing')
			                      || coalesce(': ' || nullif(reason, ''), ''), 512)
			    WHERE file_id = @file_id AND workspace_id = @workspace AND state = 'held' AND expires_at > now()
			      AND `+a.callerMayAct+`
			    RETURNING file_id, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at
			), ins AS (
			    INSERT INTO pending_uploads
			        (file_id, workspace_id, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
			    SELECT file_id, @workspace, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at FROM s
			    WHERE `+a.callerMayAct+`
			    RETURNING file_id, filename, mimetype, size_bytes, created_at, expires_at
			), `+deliveredAnnounced+`
			SELECT (SELECT count(*) FROM ins)::int, b.state, b.filename
			FROM scanned_uploads b
			WHERE b.file_id = @file_id AND b.workspace_id = @workspace AND b.expires_at > now() AND `+a.callerMayAct,
			named).QueryRow(scan)
	} else {
		b.Queue(`
			WITH upd AS (
			    UPDATE scanned_uploads SET state = 'blocked', result = @result, decided_at = now(),
			        reason = left('blocked ' || @note || '; the scan said ' || coalesce(result, 'nothing')
			                      || coalesce(': ' || nullif(reason, ''), ''), 512)
			    WHERE file_id = @file_id AND workspace_id = @workspace AND state = 'held' AND expires_at > now()
			      AND `+a.callerMayAct+`
			    RETURNING file_id
			)
			SELECT (SELECT count(*) FROM upd)::int, b.state, b.filename
			FROM scanned_uploads b
			WHERE b.file_id = @file_id AND b.workspace_id = @workspace AND b.expires_at > now() AND `+a.callerMayAct,
			named).QueryRow(scan)
	}
	if err := a.send(ctx, op, &b); err != nil {
		return d, err
	}
	if !found {
		return d, fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	d.Filename = filename
	// state is the statement's snapshot, before its UPDATE.
	switch {
	case moved == 1:
		d.State, d.Changed = want, true
	case ScanState(state) == want:
		d.State = want
	default:
		d.State = ScanState(state)
		return d, fmt.Errorf("%s: %w (it is %s)", op, ErrNotHeld, state)
	}
	if want == ScanBlocked {
		if err := s.bucket.Delete(ctx, []string{objectKey(workspaceID, fileID)}); err != nil {
			return d, wrap(op+": delete the blocked object", err)
		}
	}
	if d.Changed && want == ScanClean {
		s.notify(ctx, workspaceID, []Record{{FileID: fileID, WorkspaceID: workspaceID}})
	}
	return d, nil
}

// operatorAccess is the access of the operator (DecideHeld), on workspace
// ws alone: trusted, as the database's credentials it acts with are.
// Only DecideHeld makes one.
func (s *Store) operatorAccess(ws uuid.UUID) *access {
	return &access{s: s, ws: ws, trusted: true, callerMayAct: tokenSchema{}.mayActSQL()}
}

// FileScan is one file's scan state, as its sender reads it.
type FileScan struct {
	FileID uuid.UUID
	State  ScanState
	// Result is the scanner's word that decided it (NO_THREATS_FOUND,
	// THREATS_FOUND, UNSUPPORTED, ACCESS_DENIED, FAILED, TIMEOUT); "" while
	// pending, and for a file of a deployment that does not scan.
	Result string
}

// ScanStates returns the scan state of each of workspaceID's files among
// fileIDs, acting for id (with its check), in one round trip: a file under
// scan or scanned (scanned_uploads) by its state; a file delivered without
// a scan (pending_uploads alone: a deployment that does not scan) as
// ScanClean. Files the workspace does not have (never, expired, swept)
// are absent; so are another workspace's. It never returns the threat's
// name: that stays in the operator's record.
func (s *Store) ScanStates(ctx context.Context, id *auth.Identity, workspaceID uuid.UUID, fileIDs []uuid.UUID) (map[uuid.UUID]FileScan, error) {
	a, err := s.access(ctx, id, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]FileScan, len(fileIDs))
	var b pgx.Batch
	b.Queue(`
		SELECT file_id, state, coalesce(result, '') FROM scanned_uploads
		WHERE file_id = ANY(@file_ids::uuid[]) AND workspace_id = @workspace AND expires_at > now() AND `+a.callerMayAct+`
		UNION ALL
		SELECT p.file_id, 'clean', '' FROM pending_uploads p
		WHERE p.file_id = ANY(@file_ids::uuid[]) AND p.workspace_id = @workspace AND p.expires_at > now() AND `+a.callerMayAct+`
		  AND NOT EXISTS (SELECT 1 FROM scanned_uploads s WHERE s.file_id = p.file_id AND s.workspace_id = @workspace)`,
		pgx.StrictNamedArgs{"file_ids": uuidArray(fileIDs)},
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var f FileScan
			var state string
			if err := rows.Scan(&f.FileID, &state, &f.Result); err != nil {
				return err
			}
			f.State = ScanState(state)
			out[f.FileID] = f
		}
		return rows.Err()
	})
	if err := a.send(ctx, "scan states", &b); err != nil {
		return nil, err
	}
	return out, nil
}

// queueFiles queues the INSERT of a staging batch's files (Stage's,
// Commit's): into delivery (queueInsert), or, on a scanned deployment,
// into scanned_uploads to wait for the scan's verdict (queueScanned).
func (s *Store) queueFiles(ctx context.Context, b *pgx.Batch, callerMayAct string,
	recs []Record, contents [][]byte, uploadIDs []string, q *quota) *inserted {
	if s.Scanned {
		return queueScanned(ctx, b, callerMayAct, s.RefuseUnknownWorkspaces, s.TTL, recs, uploadIDs, q)
	}
	return queueInsert(ctx, b, callerMayAct, s.RefuseUnknownWorkspaces, s.TTL, recs, contents, uploadIDs, q)
}

// queueScanned is queueInsert for a scanned deployment: the same
// conditions (the deadline, the caller, the known workspace, the quota,
// Commit's claim), into
// scanned_uploads, every file in the bucket, no activity row (the verdict
// writes it, Decide).
func queueScanned(ctx context.Context, b *pgx.Batch, callerMayAct string, refuseUnknown bool, ttl time.Duration,
	recs []Record, uploadIDs []string, q *quota) *inserted {
	ins := &inserted{recs: make(map[uuid.UUID]*Record, len(recs)), deadline: deadlineOf(ctx)}
	fileIDs := make([]string, len(uploadIDs))
	for i := range uploadIDs {
		fileIDs[i] = recs[i].FileID.String()
	}
	n := len(recs)
	ids, keys, sizes, sums := make([]string, n), make([]string, n), make([]int64, n), make([][]byte, n)
	names, types := make([]string, n), make([]string, n)
	for i := range recs {
		r := &recs[i]
		ids[i], keys[i], sizes[i], sums[i], names[i], types[i] = r.FileID.String(), r.s3Key, r.SizeBytes, r.SHA256, r.Filename, r.Mimetype
		ins.recs[r.FileID] = r
	}
	named := q.args(pgx.StrictNamedArgs{"deadline": ins.deadline, "ttl_micros": ttl.Microseconds(),
		"upload_ids": append([]string{}, uploadIDs...), "file_ids": fileIDs, "refuse_unknown": refuseUnknown,
		"scan_file_ids": ids, "scan_keys": keys, "scan_sizes": sizes, "scan_sha256s": sums,
		"scan_filenames": names, "scan_mimetypes": types})
	b.Queue(`
		-- pending: what waits in @workspace, counted once in this
		-- statement's snapshot, as queueInsert's (its comment says why the
		-- scalar subquery): fitsPending decides on it, and the statement
		-- returns it for the refusal (a QuotaError, not a lost claim).
		WITH pending(files, bytes) AS MATERIALIZED (
		    SELECT `+pendingCount+`
		    WHERE NOT @quota_off::boolean AND (SELECT `+callerMayAct+`)
		), ins AS (
		    INSERT INTO scanned_uploads
		        (file_id, workspace_id, s3_key, size_bytes, sha256, filename, mimetype, created_at, expires_at)
		    SELECT v.file_id, @workspace, v.s3_key, v.size_bytes, v.sha256, v.filename, v.mimetype,
		           now(), now() + @ttl_micros::bigint * interval '1 microsecond'
		    FROM unnest(@scan_file_ids::uuid[], @scan_keys::text[], @scan_sizes::bigint[], @scan_sha256s::bytea[],
		                @scan_filenames::text[], @scan_mimetypes::text[])
		         AS v(file_id, s3_key, size_bytes, sha256, filename, mimetype)
		    WHERE (@deadline::timestamptz IS NULL OR now() <= @deadline) AND `+callerMayAct+` AND `+knownWorkspace+`
		      AND `+fitsPending+` AND `+claimedAll+`
		    RETURNING file_id, created_at, expires_at
		)
		SELECT ins.file_id, ins.created_at, ins.expires_at, pending.files, pending.bytes
		FROM pending LEFT JOIN ins ON true`, named,
	).Query(ins.read(q))
	return ins
}

// sweepScanned deletes, a batch at a time, the scanned_uploads rows past
// expires_at, and the objects of those never delivered (pending, held): a
// delivered file's object is its pending_uploads row's, which the expiry
// pass deletes; a blocked one's is gone already. Each batch is a range
// scan of idx_scanned_uploads_expires from where the last one ended
// (keyset on expires_at, file_id), as the sweep's other passes; a row
// whose object the bucket refused stays for the next sweep. It stops as
// sweepPass does (unfinished: MaxSweepBatches, or SweepReserve before
// ctx's deadline).
func (s *Store) sweepScanned(ctx context.Context) (total int, unfinished bool, err error) {
	var afterAt time.Time
	var afterID uuid.UUID
	for i := 0; ; i++ {
		if i >= s.maxSweepBatches() || nearDeadline(ctx, SweepReserve) {
			return total, true, nil
		}
		rows, err := s.db.Query(ctx, `
			SELECT file_id, s3_key, state, expires_at FROM scanned_uploads
			WHERE expires_at < now() AND (expires_at, file_id) > (@after_at::timestamptz, @after_id::uuid)
			ORDER BY expires_at, file_id LIMIT @batch`,
			pgx.NamedArgs{"batch": s.SweepBatch, "after_at": afterAt, "after_id": afterID})
		if err != nil {
			return total, false, wrap("sweep scanned", err)
		}
		var ids []uuid.UUID
		var keys []string
		for rows.Next() {
			var id uuid.UUID
			var key, state string
			if err := rows.Scan(&id, &key, &state, &afterAt); err != nil {
				rows.Close()
				return total, false, wrap("sweep scanned", err)
			}
			ids, afterID = append(ids, id), id
			if ScanState(state) == ScanPending || ScanState(state) == ScanHeld {
				keys = append(keys, key)
			}
		}
		if err := rows.Err(); err != nil {
			return total, false, wrap("sweep scanned", err)
		}
		if len(ids) == 0 {
			return total, false, nil
		}
		if len(keys) > 0 && s.bucket != nil {
			if err := s.bucket.Delete(ctx, keys); err != nil {
				return total, false, wrap(fmt.Sprintf("sweep scanned: delete %d objects", len(keys)), err)
			}
		}
		tag, err := s.db.Exec(ctx, `DELETE FROM scanned_uploads WHERE file_id = ANY(@ids::uuid[]) AND expires_at < now()`,
			pgx.NamedArgs{"ids": uuidArray(ids)})
		if err != nil {
			return total, false, wrap("sweep scanned", err)
		}
		total += int(tag.RowsAffected())
		if len(ids) < s.SweepBatch {
			return total, false, nil
		}
	}
}

// WaitingScan is a file whose scan has not answered (WaitingScans).
type WaitingScan struct {
	Key       string
	SizeBytes int64
}

// WaitingScans returns, oldest first, at most limit (1..1000) objects of
// files still waiting for their scan, on every workspace: what a scanner
// that is not triggered by the bucket itself (the dev server's clamd
// stand-in, internal/scanresult) has to scan. It acts for the scanner.
func (s *Store) WaitingScans(ctx context.Context, limit int) ([]WaitingScan, error) {
	limit = min(max(limit, 1), 1000)
	rows, err := s.db.Query(ctx, `
		SELECT s3_key, size_bytes FROM scanned_uploads WHERE state = 'pending' AND expires_at > now()
		ORDER BY created_at LIMIT @limit`, pgx.NamedArgs{"limit": limit})
	if err != nil {
		return nil, wrap("waiting scans", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WaitingScan, error) {
		var w WaitingScan
		err := row.Scan(&w.Key, &w.SizeBytes)
		return w, err
	})
	return out, wrap("waiting scans", err)
}
