package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

const scansUsage = `Usage:
  pendingctl scans [--json] [--limit N]
  pendingctl scans release [--workspace W] [--json] FILE
  pendingctl scans block [--workspace W] [--json] FILE

Malware scanning's held files, on a server that scans (docs/scanning.md).
A file is held when its scan could not decide (UNSUPPORTED, ACCESS_DENIED,
FAILED) or did not answer within SCAN_TIMEOUT, under SCAN_UNDECIDED=hold: it
is not delivered, and it expires with the others. A later scan result still
decides it, and so can an operator:

  (none)    list the held files, oldest first
  release   deliver W's held file FILE, as a clean result does: the
            workspace sees it, its activity row is written with it, the
            push hint follows
  block     refuse W's held file FILE for good, as THREATS_FOUND does: it is
            never delivered and its object is deleted (needs CONTENT_BUCKET)

Only a held file moves. Run again, release and block change nothing and
succeed; a file waiting for its scan, one delivered (never taken back) or
one blocked (never delivered) is refused, and so is a file W does not have.
The record keeps the decision as the operator's (result OPERATOR, and what
the scan had said); its sender reads reason "operator" on the scan route.
A log line on stderr names the workspace, the file and the action.

Flags:
  --json         print a JSON array (release, block: {"workspace_id",
                 "file_id","name","state","changed"})
  --limit N      at most N files (1 to 1000, default 100)
  --workspace W  release, block: the workspace (default
                 $PENDINGUPLOADS_WORKSPACE)
  --timeout D    give up after D (default 30s)

` + dbEnvUsage + `  CONTENT_BUCKET     block: the bucket, so that the file's object goes
                     (with the usual AWS credentials; S3_ENDPOINT for a
                     local S3)

Exit codes: 0 listed, released or blocked, 1 failure (also: not held, or no
such file), 2 usage error, 3 none held.
`

func runScans(ctx context.Context, e env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "release":
			return runScansDecide(ctx, e, pendinguploads.Deliver, args[1:])
		case "block":
			return runScansDecide(ctx, e, pendinguploads.Block, args[1:])
		case "list":
			args = args[1:]
		}
	}
	fs := newFlags("scans")
	asJSON := fs.Bool("json", false, "")
	limit := fs.Int("limit", 100, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	if *limit < 1 || *limit > 1000 {
		return usagef("--limit %d: want 1 to 1000", *limit)
	}
	a, ctx, done, err := openAppWithin(ctx, e, *timeout)
	if err != nil {
		return err
	}
	defer done()
	held, err := a.Store.HeldScans(ctx, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			WorkspaceID string    `json:"workspace_id"`
			FileID      string    `json:"file_id"`
			Name        string    `json:"name"`
			Size        int64     `json:"size"`
			Result      string    `json:"result"`
			Reason      string    `json:"reason,omitempty"`
			CreatedAt   time.Time `json:"created_at"`
			ExpiresAt   time.Time `json:"expires_at"`
		}
		rows := make([]row, len(held))
		for i, h := range held {
			rows[i] = row{h.WorkspaceID.String(), h.FileID.String(), h.Filename, h.SizeBytes, h.Result, h.Reason, h.CreatedAt, h.ExpiresAt}
		}
		if err := writeJSON(e.stdout, rows); err != nil {
			return err
		}
	} else if len(held) > 0 {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKSPACE\tFILE\tNAME\tSIZE\tRESULT\tSTAGED\tEXPIRES")
		for _, h := range held {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", h.WorkspaceID, h.FileID, h.Filename, h.SizeBytes, h.Result,
				h.CreatedAt.Local().Format("2006-01-02 15:04"), h.ExpiresAt.Local().Format("2006-01-02 15:04"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(held) == 0 {
		if !*asJSON {
			fmt.Fprintln(e.stdout, "no file held")
		}
		return errNothing
	}
	return nil
}

// runScansDecide is pendingctl scans release (v Deliver) and block (v
// Block): the operator's decision on one held file (Store.DecideHeld).
func runScansDecide(ctx context.Context, e env, v pendinguploads.Verdict, args []string) error {
	action := map[pendinguploads.Verdict]string{pendinguploads.Deliver: "release", pendinguploads.Block: "block"}[v]
	fs := newFlags("scans " + action)
	wsFlag := fs.String("workspace", "", "")
	asJSON := fs.Bool("json", false, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("scans %s takes one FILE (its UUID, from pendingctl scans)", action)
	}
	file, err := uuid.Parse(rest[0])
	if err != nil || len(rest[0]) != 36 {
		return usagef("FILE %q is not a UUID", rest[0])
	}
	ws, err := parseWorkspace(*wsFlag, e)
	if err != nil {
		return err
	}
	if v == pendinguploads.Block && strings.TrimSpace(e.getenv("CONTENT_BUCKET")) == "" {
		return usagef("scans block deletes the file's object: set CONTENT_BUCKET to the stack's bucket")
	}
	a, ctx, done, err := openAppWithin(ctx, e, *timeout)
	if err != nil {
		return err
	}
	defer done()
	d, err := a.Store.DecideHeld(ctx, ws, file, v)
	switch {
	case errors.Is(err, pendinguploads.ErrNotFound):
		return fmt.Errorf("workspace %s has no file %s (never, expired, swept, or another workspace's)", ws, file)
	case errors.Is(err, pendinguploads.ErrNotHeld):
		return fmt.Errorf("file %s of workspace %s is %s, not held: nothing to %s", file, ws, d.State, action)
	case err != nil:
		return err
	}
	// The operator's log line: who decided what, on which file; never the
	// bytes. Warn, so that it shows beside the tool's own warnings.
	a.Logger.Warn("held file decided by an operator", "action", action, "workspace_id", ws, "file_id", file,
		"filename", d.Filename, "state", string(d.State), "changed", d.Changed)
	if *asJSON {
		return writeJSON(e.stdout, map[string]any{"workspace_id": ws, "file_id": file, "name": d.Filename,
			"state": d.State, "changed": d.Changed})
	}
	switch {
	case !d.Changed && v == pendinguploads.Deliver:
		fmt.Fprintf(e.stdout, "%s (%s) was delivered already\n", file, d.Filename)
	case !d.Changed:
		fmt.Fprintf(e.stdout, "%s (%s) was blocked already; its object is deleted\n", file, d.Filename)
	case v == pendinguploads.Deliver:
		fmt.Fprintf(e.stdout, "released %s (%s): delivered to workspace %s\n", file, d.Filename, ws)
	default:
		fmt.Fprintf(e.stdout, "blocked %s (%s): never delivered, its object deleted\n", file, d.Filename)
	}
	return nil
}
