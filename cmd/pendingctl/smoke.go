package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
)

const smokeUsage = `Usage: pendingctl smoke --workspace W [flags]

Check a running API end to end, as the platform and workspace W use it,
with W's token: the limits (GET /uploads/limits), a small upload, the list
(it shows the file), the file's content byte for byte (SHA-256 compared
with what was sent), and, when the server has a bucket, a file just above
its multipart threshold sent in parts: stopped after its first part,
resumed once (the client's ResumeUpload: only the missing parts go), and
committed; its content byte for byte; the ack of both files; and the list
again (it no longer shows them).

Each step is printed as it ends: STEP, RESULT (ok, FAIL or skipped), TIME
and what it found. The first step that fails ends the run, and names
itself. Whatever the run staged is acked, and an upload it began is
aborted, before it exits, after a failure too (and after Ctrl-C).

The run stages two files named pendingctl-smoke-… in W (a few KiB, and the
multipart threshold plus one byte): a pull of W running at the same time
may deliver them. A workspace kept for checks is the safest target.

Flags:
  --workspace W      the workspace's UUID (default: $PENDINGUPLOADS_WORKSPACE)
  --step-timeout D   give up on a step after D (default 2m); --timeout bounds
                     the whole run, the clean-up excepted (at most one more
                     step's time)
` + apiFlagsUsage + `
Output: the table; with --json, one object at the end: {"ok","failed_step",
"steps":[{"step","result","ms","detail"}]}, where result is "ok", "fail" or
"skipped", and failed_step is "" when every step passed.

Exit codes: 0 every step passed, 1 a step failed (its name is on stderr),
2 usage error (a missing setting such as PENDINGUPLOADS_API included).

Example, right after make run-s3 (its export lines in the shell):
  pendingctl smoke
`

// Names of the steps of pendingctl smoke, in their order.
const (
	stepLimits       = "limits"
	stepUpload       = "upload"
	stepList         = "list"
	stepContent      = "content"
	stepParts        = "upload-parts"
	stepResume       = "resume"
	stepPartsContent = "content-parts"
	stepAck          = "ack"
	stepListAfterAck = "list-after-ack"
	stepCleanup      = "cleanup"
)

// smokeSmallBytes is the size of the small file smoke stages.
const smokeSmallBytes = 4 << 10

func runSmoke(ctx context.Context, e env, args []string) error {
	fs := newFlags("smoke")
	var af apiFlags
	af.register(fs)
	stepTimeout := fs.Duration("step-timeout", 2*time.Minute, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	if *stepTimeout <= 0 {
		return usagef("--step-timeout must be positive")
	}
	c, ws, err := af.client(e)
	if err != nil {
		return err
	}
	s := &smoke{c: c, ws: ws, stepTimeout: *stepTimeout}
	if !af.json {
		s.table = e.stdout
		fmt.Fprintf(s.table, "%-15s %-7s %8s  %s\n", "STEP", "RESULT", "TIME", "DETAIL")
	}
	began := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, af.timeout)
	err = s.run(runCtx)
	cancel()
	// The clean-up outlives the run's deadline and Ctrl-C, bounded by one
	// step's time.
	cleanupErr := s.step(context.WithoutCancel(ctx), stepCleanup, s.cleanup)
	if af.json {
		if werr := s.writeJSON(e.stdout); werr != nil && err == nil {
			err = werr
		}
	}
	failed := false
	for _, err := range []error{err, cleanupErr} {
		var se *stepError
		if errors.As(err, &se) {
			fmt.Fprintf(e.stderr, "pendingctl smoke: step %q failed: %s\n", se.step, se.msg)
			failed = true
		}
	}
	switch {
	case failed:
		return errReported
	case err != nil:
		return err
	}
	if !af.json {
		fmt.Fprintf(e.stdout, "all steps passed in %s\n", roundDuration(time.Since(began)))
	}
	return nil
}

// smoke is one run of pendingctl smoke: its steps as they went, and what
// it staged or began that is not acked or aborted yet.
type smoke struct {
	c           *client.Client
	ws          uuid.UUID
	stepTimeout time.Duration
	table       io.Writer // nil: no table (--json)
	steps       []smokeStep

	limits client.Limits
	small  sentFile
	parts  sentFile
	// partsUpload is the presigned upload of parts, as presign answered.
	partsUpload client.PresignedUpload

	// unacked are the files staged and not acked yet; unfinished the
	// presigned uploads neither committed nor aborted yet.
	unacked    []uuid.UUID
	unfinished []uuid.UUID
}

// sentFile is a file smoke sends: its bytes' digest, and what the server
// answered once it was staged.
type sentFile struct {
	f      client.UploadFile
	sum    [sha256.Size]byte
	staged client.StagedFile
}

// newSentFile is a file of n random bytes named name.
func newSentFile(name string, n int64) sentFile {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return sentFile{f: client.BytesFile(name, "application/octet-stream", b), sum: sha256.Sum256(b)}
}

// smokeStep is one row of the table.
type smokeStep struct {
	Name   string `json:"step"`
	Result string `json:"result"` // ok, fail, skipped
	MS     int64  `json:"ms"`
	Detail string `json:"detail"`
}

// stepError is a failed step: its name and what went wrong, explained.
type stepError struct {
	step, msg string
	err       error
}

func (e *stepError) Error() string { return e.step + ": " + e.msg }
func (e *stepError) Unwrap() error { return e.err }

// errSkipped ends a step that does not apply to this server; its detail
// says why.
var errSkipped = errors.New("skipped")

// step runs fn as the step name, within the step's time, and prints its
// row. fn returns the row's detail. A failure comes back as a
// *stepError; a skipped step is no error.
func (s *smoke) step(ctx context.Context, name string, fn func(context.Context) (string, error)) error {
	sctx, cancel := context.WithTimeout(ctx, s.stepTimeout)
	defer cancel()
	start := time.Now()
	detail, err := fn(sctx)
	took := time.Since(start)
	row := smokeStep{Name: name, Result: "ok", MS: took.Milliseconds(), Detail: detail}
	var out error
	switch {
	case errors.Is(err, errSkipped):
		row.Result = "skipped"
	case err != nil:
		var msg string
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			msg = "interrupted: " + err.Error()
		case ctx.Err() != nil:
			msg = "the run took longer than --timeout: " + err.Error()
		case sctx.Err() != nil:
			msg = fmt.Sprintf("no answer within --step-timeout (%s): %s", s.stepTimeout, err.Error())
		default:
			msg = explain(err)
		}
		row.Result, row.Detail = "fail", msg
		out = &stepError{step: name, msg: msg, err: err}
	}
	s.steps = append(s.steps, row)
	if s.table != nil {
		fmt.Fprintf(s.table, "%-15s %-7s %8s  %s\n", row.Name, strings.ToUpper(row.Result[:1])+row.Result[1:], roundDuration(took), row.Detail)
	}
	return out
}

// roundDuration is d as the table shows it: ms under a second, else
// seconds with one decimal.
func roundDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func (s *smoke) writeJSON(w io.Writer) error {
	failed := ""
	for _, st := range s.steps {
		if st.Result == "fail" && failed == "" {
			failed = st.Name
		}
	}
	return writeJSON(w, map[string]any{"ok": failed == "", "failed_step": failed, "steps": s.steps})
}

// run runs the steps in order, up to the first that fails.
func (s *smoke) run(ctx context.Context) error {
	tag := randomTag()
	s.small = newSentFile("pendingctl-smoke-"+tag+".bin", smokeSmallBytes)
	steps := []struct {
		name string
		fn   func(context.Context) (string, error)
	}{
		{stepLimits, s.checkLimits},
		{stepUpload, s.upload},
		{stepList, s.list},
		{stepContent, func(ctx context.Context) (string, error) { return s.content(ctx, &s.small) }},
	}
	for _, st := range steps {
		if err := s.step(ctx, st.name, st.fn); err != nil {
			return err
		}
	}
	if why := s.noParts(); why != "" {
		if err := s.step(ctx, stepParts, func(context.Context) (string, error) { return why, errSkipped }); err != nil {
			return err
		}
	} else {
		s.parts = newSentFile("pendingctl-smoke-"+tag+"-parts.bin", s.limits.MultipartThresholdBytes+1)
		for _, st := range []struct {
			name string
			fn   func(context.Context) (string, error)
		}{
			{stepParts, s.uploadFirstPart},
			{stepResume, s.resume},
			{stepPartsContent, func(ctx context.Context) (string, error) { return s.content(ctx, &s.parts) }},
		} {
			if err := s.step(ctx, st.name, st.fn); err != nil {
				return err
			}
		}
	}
	if err := s.step(ctx, stepAck, s.ack); err != nil {
		return err
	}
	return s.step(ctx, stepListAfterAck, s.listAfterAck)
}

// randomTag is 8 hex digits that tell one run's files from another's.
func randomTag() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *smoke) checkLimits(ctx context.Context) (string, error) {
	l, err := s.c.Limits(ctx)
	if err != nil {
		return "", err
	}
	if l.PerFileBytes <= 0 || l.PerRequestBytes <= 0 {
		return "", fmt.Errorf("limits: per_file_bytes %d and per_request_bytes %d, want both positive", l.PerFileBytes, l.PerRequestBytes)
	}
	s.limits = l
	d := fmt.Sprintf("per file %s, per request %s", humanBytes(l.PerFileBytes), humanBytes(l.PerRequestBytes))
	switch {
	case !l.Presign:
		d += ", no presign (no bucket)"
	case l.MultipartThresholdBytes > 0:
		d += fmt.Sprintf(", presign, parts of %s above %s", humanBytes(l.MultipartPartBytes), humanBytes(l.MultipartThresholdBytes))
	default:
		d += ", presign, no parts"
	}
	return d, nil
}

// noParts says why this server takes no file in parts, or "".
func (s *smoke) noParts() string {
	l := s.limits
	switch {
	case !l.Presign:
		return "the server has no bucket (limits: presign false): no file goes in parts"
	case l.MultipartThresholdBytes <= 0 || l.MultipartPartBytes <= 0:
		return "the server takes no parts (limits: no multipart threshold)"
	case l.MultipartThresholdBytes+1 > l.PerFileBytes:
		return fmt.Sprintf("the multipart threshold (%s) is the per-file cap: no file goes in parts", humanBytes(l.MultipartThresholdBytes))
	}
	return ""
}

func (s *smoke) upload(ctx context.Context) (string, error) {
	staged, err := s.c.Upload(ctx, s.ws, []client.UploadFile{s.small.f})
	for _, f := range staged {
		s.unacked = append(s.unacked, f.FileID)
	}
	if err != nil {
		return "", err
	}
	if err := s.small.check(staged[0]); err != nil {
		return "", err
	}
	s.small.staged = staged[0]
	return fmt.Sprintf("%s (%s) staged as %s", staged[0].Name, humanBytes(staged[0].Size), staged[0].FileID), nil
}

// check holds what the server answered for the staged file to what was
// sent.
func (f *sentFile) check(got client.StagedFile) error {
	if got.Size != f.f.Size || got.SHA256 != hex.EncodeToString(f.sum[:]) {
		return fmt.Errorf("the server staged %s as %d bytes with SHA-256 %s; sent %d bytes with %x", got.FileID, got.Size, got.SHA256, f.f.Size, f.sum)
	}
	return nil
}

func (s *smoke) list(ctx context.Context) (string, error) {
	files, err := s.c.List(ctx, s.ws)
	if err != nil {
		return "", err
	}
	want := s.small.staged
	for _, f := range files {
		if f.FileID != want.FileID {
			continue
		}
		if f.Size != want.Size || f.SHA256 != want.SHA256 || f.Name != want.Name {
			return "", fmt.Errorf("the list shows %s as %q, %d bytes, SHA-256 %s; staged as %q, %d bytes, %s", f.FileID, f.Name, f.Size, f.SHA256, want.Name, want.Size, want.SHA256)
		}
		return fmt.Sprintf("shows %s among %d pending", want.FileID, len(files)), nil
	}
	return "", fmt.Errorf("the list of %d pending files does not show %s", len(files), want.FileID)
}

// content downloads f and compares its SHA-256 with the bytes sent (the
// client checks it against the list's and Content-Digest too).
func (s *smoke) content(ctx context.Context, f *sentFile) (string, error) {
	st := f.staged
	h := sha256.New()
	n, err := s.c.Download(ctx, s.ws, client.File{FileID: st.FileID, Name: st.Name, Size: st.Size, SHA256: st.SHA256}, h)
	if err != nil {
		return "", err
	}
	if got := h.Sum(nil); n != f.f.Size || !bytes.Equal(got, f.sum[:]) {
		return "", fmt.Errorf("content %s: %d bytes with SHA-256 %x; sent %d bytes with %x", st.FileID, n, got, f.f.Size, f.sum)
	}
	return fmt.Sprintf("%s byte for byte (SHA-256 %s…)", humanBytes(n), hex.EncodeToString(f.sum[:6])), nil
}

// uploadFirstPart presigns the file in parts and sends only its first
// part: an upload interrupted there.
func (s *smoke) uploadFirstPart(ctx context.Context) (string, error) {
	ups, err := s.c.Presign(ctx, s.ws, []client.UploadFile{s.parts.f})
	if err != nil {
		return "", err
	}
	p := ups[0]
	s.unfinished = append(s.unfinished, p.UploadID)
	s.partsUpload = p
	if p.Multipart == nil {
		return "", fmt.Errorf("presign planned one PUT for %s, a file above the multipart threshold: want parts", humanBytes(s.parts.f.Size))
	}
	plan := *p.Multipart
	i := slices.IndexFunc(plan.Parts, func(pp client.PresignedPart) bool { return pp.PartNumber == 1 })
	if plan.PartCount < 2 || i < 0 {
		return "", fmt.Errorf("presign planned %d parts, %d to send: want at least 2, part 1 among them", plan.PartCount, len(plan.Parts))
	}
	plan.Parts = plan.Parts[i : i+1]
	first := p
	first.Multipart = &plan
	if err := s.c.PutPresigned(ctx, first, s.parts.f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s in %d parts of %s as upload %s: part 1 sent, then stopped", humanBytes(s.parts.f.Size), plan.PartCount, humanBytes(plan.PartBytes), p.UploadID), nil
}

// resume finishes the interrupted upload through the client's
// ResumeUpload, which must find part 1 in the bucket and send only the
// others.
func (s *smoke) resume(ctx context.Context) (string, error) {
	id := s.partsUpload.UploadID
	f := s.parts.f
	var progress []int64
	f.Progress = func(sent int64) { progress = append(progress, sent) }
	staged, err := s.c.ResumeUpload(ctx, s.ws, id, f)
	if err != nil {
		if errors.Is(err, client.ErrUploadGone) {
			return "", fmt.Errorf("the resume of upload %s, begun a moment ago, answered 404: does the API serve POST /workspaces/{workspaceId}/chat/uploads/presign/{uploadId}? (%w)", id, err)
		}
		return "", err
	}
	s.unfinished = slices.DeleteFunc(s.unfinished, func(u uuid.UUID) bool { return u == id })
	s.unacked = append(s.unacked, staged.FileID)
	if err := s.parts.check(staged); err != nil {
		return "", err
	}
	s.parts.staged = staged
	// The client reports the parts the bucket holds as sent before it
	// sends any byte.
	part1 := min(s.partsUpload.Multipart.PartBytes, f.Size)
	if len(progress) == 0 || progress[0] != part1 {
		return "", fmt.Errorf("the resume did not start from part 1 held in the bucket (%s): its first progress was %v bytes", humanBytes(part1), firstOr(progress))
	}
	rest := s.partsUpload.Multipart.PartCount - 1
	parts := "part"
	if rest > 1 {
		parts = "parts"
	}
	return fmt.Sprintf("the bucket held part 1; sent the other %d %s (%s) and committed as %s", rest, parts, humanBytes(f.Size-part1), staged.FileID), nil
}

func firstOr(p []int64) any {
	if len(p) == 0 {
		return "none"
	}
	return p[0]
}

func (s *smoke) ack(ctx context.Context) (string, error) {
	n := 0
	for len(s.unacked) > 0 {
		id := s.unacked[0]
		if _, err := s.c.Ack(ctx, s.ws, id); err != nil {
			return "", err
		}
		s.unacked = s.unacked[1:]
		n++
	}
	if n == 1 {
		return "1 file acked", nil
	}
	return fmt.Sprintf("%d files acked", n), nil
}

func (s *smoke) listAfterAck(ctx context.Context) (string, error) {
	files, err := s.c.List(ctx, s.ws)
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if f.FileID == s.small.staged.FileID || (s.parts.staged.FileID != uuid.Nil && f.FileID == s.parts.staged.FileID) {
			return "", fmt.Errorf("the list still shows %s after its ack", f.FileID)
		}
	}
	return fmt.Sprintf("no longer shows them (%d pending)", len(files)), nil
}

// cleanup acks what the run staged and aborts what it began, after a
// failure; an upload whose abort finds it committed (its commit's answer
// was lost) is committed again, which answers its file, and that is
// acked. It tries every one, and reports what it could not clean.
func (s *smoke) cleanup(ctx context.Context) (string, error) {
	var done, left []string
	for _, id := range s.unfinished {
		err := s.c.AbortUpload(ctx, s.ws, id)
		var ae *client.APIError
		switch {
		case err == nil:
			done = append(done, "aborted upload "+id.String())
		case client.IsNotFound(err):
			done = append(done, "upload "+id.String()+" was gone already")
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			staged, cerr := s.c.Commit(ctx, s.ws, []uuid.UUID{id})
			if cerr != nil {
				left = append(left, fmt.Sprintf("upload %s (%s)", id, explain(cerr)))
				continue
			}
			s.unacked = append(s.unacked, staged[0].FileID)
		default:
			left = append(left, fmt.Sprintf("upload %s (%s; it expires an hour after it began)", id, explain(err)))
		}
	}
	s.unfinished = nil
	for _, id := range s.unacked {
		if _, err := s.c.Ack(ctx, s.ws, id); err != nil && !client.IsNotFound(err) {
			left = append(left, fmt.Sprintf("file %s (%s; it stays pending until it expires)", id, explain(err)))
			continue
		}
		done = append(done, "acked "+id.String())
	}
	s.unacked = nil
	if len(left) > 0 {
		return "", fmt.Errorf("could not clean up %s", strings.Join(left, ", "))
	}
	if len(done) == 0 {
		return "nothing left to clean up", nil
	}
	return strings.Join(done, ", "), nil
}
