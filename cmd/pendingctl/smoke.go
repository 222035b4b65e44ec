package main

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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

Each step is printed as it ends: STEP, RESULT (Ok, Fail or Skipped), TIME
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
		fmt.Fprintf(s.table, "%-15s %-7s %8s  %s\n", row.Name, tableResult(row.Result), roundDuration(took), row.Detail)
	}
	return out
}

// tableResult is a step's result as the table prints it: "ok" as "Ok"
// (the words smokeUsage lists).
func tableResult(result string) string {
	return strings.ToUpper(result[:1]) + result[1:]
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
