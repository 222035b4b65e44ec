package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/humanize"
	"github.com/pendinguploads/pendinguploads/client/inbox"
	"github.com/pendinguploads/pendinguploads/client/watch"
)

const apiFlagsUsage = `  --api URL          the API's base URL (default: $PENDINGUPLOADS_API)
  --token-file FILE  read the token from FILE
  --token TOKEN      the token (default: $PENDINGUPLOADS_TOKEN; prefer the
                     variable or --token-file: flags show in the process list)
  --timeout D        give up after D (default 10m)
  --json             print JSON for scripts instead of text
  -q, --quiet        no progress bars (they only show on a terminal anyway)
`

const lsUsage = `Usage: pendingctl ls --workspace W [flags]

List workspace W's pending files (staged, not yet acked, not expired),
oldest first, all pages.

Flags:
  --workspace W      the workspace's UUID (default: $PENDINGUPLOADS_WORKSPACE)
` + apiFlagsUsage + `
Output: FILE_ID, SIZE, CREATED, FETCHED (yes once downloaded) and NAME; with
--json, {"uploads":[{"file_id","uri","name","mimeType","size","sha256",
"created_at","expires_at","fetched_at"}]}.

Exit codes: 0 files listed, 3 nothing pending, 1 failure, 2 usage error.
`

const pullUsage = `Usage: pendingctl pull --workspace W --dir D [--once | --interval 5s | --watch] [flags]

Download workspace W's pending files into folder D, verify each (its size
and SHA-256 must match the list and the Repr-Digest header), and ack it
so that it is not offered again. With --once (the default) pull once and
exit; with --interval, pull again every interval until interrupted (Ctrl-C).

Files land in D with mode 0600 under their (sanitized) name; a name already
taken gets -1, -2, … before the extension: nothing is overwritten. A file
whose bytes do not match is an error: it is not written and not acked.

Crash safety: D/.pendinguploads holds partial downloads and delivery
records. A pull stopped at any point (killed, power cut) loses nothing, and
the next pull finishes its work: a file written but not acked is acked, not
downloaded again. Do not delete D/.pendinguploads while a pull runs or
after one failed; one pull at a time per folder (a second one is refused).

Flags:
  --workspace W      the workspace's UUID (default: $PENDINGUPLOADS_WORKSPACE)
  --dir D            the folder to deliver into (created 0700 if missing)
  --once             pull once, then exit (the default)
  --interval D       pull every D (such as 5s or 1m) until interrupted
  --watch            pull as soon as the server hints at a new file (MQTT over
                     WebSocket, where GET /uploads/limits says), and at least
                     every --fallback-interval, until interrupted
  --fallback-interval D  with --watch, the slow poll that finds a file whose
                     hint was lost (default 5m)
  --poll-url URL     list through this URL, the stack's PollUrl (the list
                     function's own, 17 times cheaper a call than the API);
                     downloads and acks still use --api
                     (default: $PENDINGUPLOADS_POLL_URL)
` + apiFlagsUsage + `  (with --interval, --timeout bounds each round)

Output: one line per file delivered ("delivered PATH (SIZE)"); with --json,
one JSON object per round: {"listed","delivered":[{"file_id","name",
"path","size","sha256","recovered","acked"}],"errors":[{"file_id","name",
"error"}],"remaining"}: "listed" is how many files the list showed as the
round began, "remaining" how many of them are still pending after it
(failed, or not reached).

Exit codes: 0 files delivered (or --interval, --watch stopped by a
signal), 3 nothing was pending (--once), 1 a file failed (the others were
still delivered) or a signal (Ctrl-C) interrupted --once, 2 usage error.
A signal that cuts a download short says so: the files pulled before it
are kept, and the same command run again resumes the download where it
stopped.

Example:
  pendingctl pull --workspace 6f1c2d3e-0000-4000-8000-000000000001 --dir ~/inbox --interval 5s
`

func runLs(ctx context.Context, e env, args []string) error {
	fs := newFlags("ls")
	var af apiFlags
	af.register(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	c, ws, err := af.client(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, af.timeout)
	defer cancel()
	files, err := c.List(ctx, ws)
	if err != nil {
		return err
	}
	if af.json {
		if err := writeJSON(e.stdout, map[string]any{"uploads": files}); err != nil {
			return err
		}
	} else if len(files) == 0 {
		fmt.Fprintln(e.stderr, "no pending uploads")
	} else {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE_ID\tSIZE\tCREATED\tFETCHED\tNAME")
		for _, f := range files {
			fetched := "no"
			if f.FetchedAt != nil {
				fetched = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.FileID, humanize.Bytes(f.Size),
				f.CreatedAt.Local().Format("2006-01-02 15:04:05"), fetched, f.Name)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(files) == 0 {
		return errNothing
	}
	return nil
}

func runPull(ctx context.Context, e env, args []string) error {
	fs := newFlags("pull")
	var af apiFlags
	af.register(fs)
	dir := fs.String("dir", "", "")
	once := fs.Bool("once", false, "")
	interval := fs.Duration("interval", 0, "")
	watchFlag := fs.Bool("watch", false, "")
	fallback := fs.Duration("fallback-interval", watch.DefaultFallback, "")
	pollURL := fs.String("poll-url", "", "")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	if *dir == "" {
		return usagef("--dir is required")
	}
	if *once && *interval != 0 {
		return usagef("--once and --interval exclude each other")
	}
	if err := checkWatchFlags(*watchFlag, *once, *interval, *fallback); err != nil {
		return err
	}
	if *interval < 0 || (*interval > 0 && *interval < 100*time.Millisecond) {
		return usagef("--interval must be at least 100ms")
	}
	c, ws, err := af.client(e)
	if err != nil {
		return err
	}
	p := inbox.New(c, ws, *dir)
	if err := usePollURL(p, af, e, *pollURL); err != nil {
		return err
	}
	if af.showBars(e) {
		p.Progress = func(f client.File) inbox.Progress {
			if f.Size < progressMin {
				return nil
			}
			return newBar(e.stderr, "↓ "+f.Name, f.Size)
		}
	}
	// round pulls once; cut says a signal stopped it before it was done.
	round := func() (res inbox.Result, cut bool, err error) {
		rctx, cancel := context.WithTimeout(ctx, af.timeout)
		defer cancel()
		res, err = p.Pull(rctx)
		cut = err != nil && ctx.Err() != nil
		if cut {
			res.Errors = slices.DeleteFunc(res.Errors, func(fe *inbox.FileError) bool { return interruption(ctx, fe.Err) })
		}
		report(e, af.json, res, err, cut)
		return res, cut, err
	}
	switch {
	case *watchFlag:
		return runWatch(ctx, e, c, ws, round, *fallback)
	case *interval == 0:
		return pullOnce(e, af, round)
	}
	return pullEvery(ctx, e, *interval, round)
}

// pullRound is one pull of runPull: its result, whether a signal cut it
// short, and its error (reported already).
type pullRound func() (res inbox.Result, cut bool, err error)

// pullOnce is pull without --interval or --watch: one round; exit 3
// (errNothing) when there was nothing to pull.
func pullOnce(e env, af apiFlags, round pullRound) error {
	res, cut, err := round()
	if cut {
		return interrupted(e)
	}
	if err != nil {
		if len(res.Errors) > 0 {
			return errReported
		}
		return err
	}
	if len(res.Delivered) == 0 {
		if !af.json {
			fmt.Fprintln(e.stderr, "nothing to pull")
		}
		return errNothing
	}
	return nil
}

// pullEvery is pull --interval: a round every interval until a signal
// (exit 0), or an error no later round can mend.
func pullEvery(ctx context.Context, e env, interval time.Duration, round pullRound) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		res, cut, err := round()
		if cut && (res.Listed > 0 || len(res.Delivered) > 0) {
			// A signal is the way to stop --interval (exit 0), but one
			// that cuts a delivery short says what it left.
			return stopped(e)
		}
		if err != nil && ctx.Err() == nil {
			if client.IsUnauthorized(err) || errors.Is(err, inbox.ErrLocked) {
				return err
			}
			fmt.Fprintf(e.stderr, "pendingctl pull: %s (will retry)\n", explain(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// interruption reports whether err is only the end of ctx, the
// command's (a signal: Ctrl-C, SIGTERM).
func interruption(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(ctx)))
}

// interrupted tells the user what a pull cut short by a signal left and
// what to do, as upload does: exit 1.
func interrupted(e env) error {
	fmt.Fprintln(e.stderr, "pendingctl pull: interrupted; "+cutShortNote)
	return errReported
}

// stopped is interrupted for --interval and --watch, which a signal is
// the way to stop: the same note, exit 0.
func stopped(e env) error {
	fmt.Fprintln(e.stderr, "pendingctl pull: stopped; "+cutShortNote)
	return nil
}

const cutShortNote = "files already pulled are kept, and a download cut short resumes: run the same command again"

// report prints one pull round; cut says a signal stopped it (its own
// error is then not a failure to report).
func report(e env, asJSON bool, res inbox.Result, err error, cut bool) {
	if asJSON {
		type ferr struct {
			FileID string `json:"file_id"`
			Name   string `json:"name"`
			Error  string `json:"error"`
		}
		errs := []ferr{}
		for _, fe := range res.Errors {
			errs = append(errs, ferr{fe.FileID.String(), fe.Name, explain(fe.Err)})
		}
		switch {
		case cut:
			errs = append(errs, ferr{Error: "interrupted"})
		case err != nil && len(res.Errors) == 0:
			errs = append(errs, ferr{Error: explain(err)})
		}
		_ = writeJSON(e.stdout, map[string]any{"listed": res.Listed, "delivered": res.Delivered, "skipped": res.Skipped,
			"errors": errs, "remaining": res.Remaining})
		return
	}
	for _, d := range res.Delivered {
		note := ""
		if d.Recovered {
			note = ", recovered from an interrupted pull"
		}
		if !d.Acked {
			note += ", not acked: the upload expired meanwhile"
		}
		fmt.Fprintf(e.stdout, "delivered %s (%s%s)\n", d.Path, humanize.Bytes(d.Size), note)
	}
	for _, fe := range res.Errors {
		fmt.Fprintf(e.stderr, "failed    %s (%s): %s\n", fe.Name, fe.FileID, explainFile(fe.Err))
	}
}

func explainFile(err error) string {
	if errors.Is(err, client.ErrIntegrity) {
		return err.Error() + "; not written, not acked"
	}
	return explain(err)
}
