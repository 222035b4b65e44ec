package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"
)

const scansUsage = `Usage: pendingctl scans [flags]

List the files held for an operator on a server that scans for malware
(docs/scanning.md): their scan could not decide (UNSUPPORTED, ACCESS_DENIED,
FAILED) or did not answer within SCAN_TIMEOUT, under SCAN_UNDECIDED=hold.
They are not delivered; a later scan result still decides one, and each
expires with the others. Oldest first.

Flags:
  --json       print a JSON array
  --limit N    at most N files (1 to 1000, default 100)
  --timeout D  give up after D (default 30s)

` + dbEnvUsage + `
Exit codes: 0 listed, 1 failure, 2 usage error, 3 none held.
`

func runScans(ctx context.Context, e env, args []string) error {
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
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	a, err := openApp(ctx, e)
	if err != nil {
		return err
	}
	defer a.Close()
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
