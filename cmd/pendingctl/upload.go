package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/humanize"
	"github.com/pendinguploads/pendinguploads/client/wire"
)

const uploadUsage = `Usage: pendingctl upload --workspace W [flags] FILE...

Stage one or more files for workspace W, as the platform's canvas does. The
workspace sees them in 'pendingctl ls' and downloads them with 'pull'.

Files up to the server's request cap (4 MiB by default) go in one multipart
request; larger ones (up to the server's per-file cap, 25 MiB by default)
go straight to the bucket through a presigned PUT when the server has one,
and those above the server's multipart threshold (16 MiB by default) in
parts, several at once. Each request is all or nothing; a file that fits
neither path is refused with a clear message.

An upload in parts survives an interruption (Ctrl-C, a crash, a lost
connection, --timeout, a commit the server could not finish): it leaves a
small state file, and running the same command again (same workspace, the
file unchanged) sends only the parts the bucket lacks, then stages the
file, once. The state file goes away once the file is staged. A file that changed since, or an upload the server no
longer has (an hour after it began, or aborted), starts over, and says so.

Flags:
  --workspace W      the workspace's UUID (default: $PENDINGUPLOADS_WORKSPACE)
  --mime TYPE        the MIME type of every file (default: from the name,
                     and from the first bytes where the name says nothing
                     or misleads: go.mod, go.sum, a Makefile are text/plain)
  --parts N          parts of one file sent at once (default 4)
  --state DIR        where interrupted uploads are recorded (default: the
                     user's cache folder: ~/.cache/pendingctl/uploads on
                     Linux, ~/Library/Caches/pendingctl/uploads on macOS,
                     %LocalAppData%\pendingctl\uploads on Windows)
` + apiFlagsUsage + `
Output: one line per file: its file_id, size and the name the server kept;
with --json, {"files":[{"file_id","uri","name","mimeType","size","sha256"}]}.

Exit codes: 0 all staged, 1 failure or interrupted (files listed before the
error were staged; run the same command again to resume an upload in
parts), 2 usage error (a FILE that does not exist included).

Example:
  pendingctl upload --workspace 6f1c2d3e-0000-4000-8000-000000000001 report.pdf photo.jpg
`

func runUpload(ctx context.Context, e env, args []string) error {
	fs := newFlags("upload")
	var af apiFlags
	af.register(fs)
	mimeType := fs.String("mime", "", "")
	parts := fs.Int("parts", client.DefaultPartsInFlight, "")
	stateDir := fs.String("state", "", "")
	paths, err := parse(fs, args)
	if err != nil {
		return err
	}
	c, ws, err := af.client(e)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("no FILE given")
	}
	if *parts < 1 || *parts > 64 {
		return usagef("--parts must be 1 to 64")
	}
	c.PartsInFlight = *parts
	u := &uploadRun{e: e, c: c, ws: ws, api: c.BaseURL(), states: uploadStates{dir: *stateDir}}
	if u.states.dir == "" {
		u.states.dir = defaultStateDir(e.getenv)
	}
	for _, p := range paths {
		it, err := u.item(p, *mimeType, af.showBars(e))
		if err != nil {
			return err
		}
		u.items = append(u.items, it)
	}
	u.states.prune(time.Now())
	ctx, cancel := context.WithTimeout(ctx, af.timeout)
	defer cancel()
	err = u.run(ctx)
	staged := u.staged()
	if af.json {
		if werr := writeJSON(e.stdout, map[string]any{"files": staged}); werr != nil && err == nil {
			err = werr
		}
	} else {
		for _, s := range staged {
			fmt.Fprintf(e.stdout, "staged  %s  %10s  %s\n", s.FileID, humanize.Bytes(s.Size), s.Name)
		}
	}
	if err != nil {
		return u.failed(err)
	}
	return nil
}

// uploadRun is one pendingctl upload: the files of its command line,
// those with an interrupted upload in parts resumed first.
type uploadRun struct {
	e      env
	c      *client.Client
	ws     uuid.UUID
	api    string
	states uploadStates
	items  []*uploadItem
	// partial is what a failed client.Upload staged (not told by file).
	partial []client.StagedFile
	noted   bool // the note that nothing can be resumed was printed
}

// uploadItem is one FILE of the command line.
type uploadItem struct {
	path  string // as given
	abs   string
	fi    os.FileInfo
	f     client.UploadFile
	state string       // its state file ("" when states are not kept)
	prev  *uploadState // the state of its interrupted upload, to resume
	// recorded says a state was saved at presign in this run.
	recorded bool
	staged   *client.StagedFile
	bar      *lazyBar
}

// item prepares the file at path: its UploadFile, its progress bar, its
// state (a matching one is kept to resume; one of a file that changed is
// dropped, and its upload aborted), and the hook that records the state
// of a new upload in parts.
func (u *uploadRun) item(path, mimeType string, bars bool) (*uploadItem, error) {
	f, err := client.FileFromPath(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usagef("no file %s", path)
	}
	if err != nil {
		return nil, err
	}
	if mimeType != "" {
		f.MimeType = mimeType
	}
	it := &uploadItem{path: path, f: f}
	if it.abs, err = filepath.Abs(path); err != nil {
		return nil, err
	}
	if it.fi, err = os.Stat(path); err != nil {
		return nil, err
	}
	if bars && f.Size >= progressMin {
		it.bar = &lazyBar{w: u.e.stderr, label: "↑ " + f.Name, total: f.Size}
		it.f.Progress = it.bar.set
	}
	it.state = u.states.name(u.api, u.ws, it.abs)
	prev, err := u.states.load(it.state)
	switch {
	case err != nil:
		fmt.Fprintf(u.e.stderr, "pendingctl upload: ignoring an unreadable state of %s: %v\n", path, err)
		u.states.remove(it.state)
	case prev != nil && prev.matches(u.api, u.ws, it.abs, it.fi):
		it.prev = prev
	case prev != nil:
		fmt.Fprintf(u.e.stderr, "pendingctl upload: %s changed since its interrupted upload: starting over\n", path)
		u.states.remove(it.state)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = u.c.AbortUpload(ctx, u.ws, prev.UploadID) // best effort: it expires anyway
		cancel()
	}
	it.f.OnPresigned = func(p client.PresignedUpload) error {
		if it.prev != nil {
			u.resumed(it, p)
			return nil
		}
		u.record(it, p)
		return nil
	}
	return it, nil
}

// record saves the state of it's upload once presigned, when it goes in
// parts. A state that cannot be saved costs only the resume: the upload
// goes on.
func (u *uploadRun) record(it *uploadItem, p client.PresignedUpload) {
	if p.Multipart == nil {
		return
	}
	if it.state == "" {
		if !u.noted {
			u.noted = true
			fmt.Fprintf(u.e.stderr, "pendingctl upload: no cache folder to record uploads in (HOME unset?): an interrupted upload will start over; pass --state DIR to keep one\n")
		}
		return
	}
	st := uploadState{API: u.api, Workspace: u.ws, UploadID: p.UploadID, Path: it.abs, Size: it.fi.Size(),
		MTime: it.fi.ModTime(), PartBytes: p.Multipart.PartBytes, PresignedAt: time.Now().UTC()}
	if err := u.states.save(it.state, st); err != nil {
		fmt.Fprintf(u.e.stderr, "pendingctl upload: cannot record the upload of %s (an interruption will start it over): %v\n", it.path, err)
		return
	}
	it.recorded = true
}

// resumed tells what the bucket holds of it's interrupted upload, as the
// resume found it: the parts already there are not sent again, and its
// bar starts at their bytes.
func (u *uploadRun) resumed(it *uploadItem, p client.PresignedUpload) {
	if p.Multipart == nil {
		return
	}
	var held int64
	for _, r := range p.Multipart.Received {
		held += r.Size
	}
	if len(p.Multipart.Parts) == 0 {
		// Assembled by a commit that then failed: only the commit is left.
		fmt.Fprintf(u.e.stderr, "pendingctl upload: all %d parts of %s (%s) are in the bucket already; committing\n",
			p.Multipart.PartCount, it.path, humanize.Bytes(it.f.Size))
		return
	}
	fmt.Fprintf(u.e.stderr, "pendingctl upload: %d of %d parts of %s (%s of %s) are in the bucket already; sending the other %d\n",
		len(p.Multipart.Received), p.Multipart.PartCount, it.path, humanize.Bytes(held), humanize.Bytes(it.f.Size),
		p.Multipart.PartCount-len(p.Multipart.Received))
}

// run resumes the interrupted uploads, then uploads the other files.
func (u *uploadRun) run(ctx context.Context) error {
	var rest []*uploadItem
	for _, it := range u.items {
		if it.prev == nil {
			rest = append(rest, it)
			continue
		}
		fmt.Fprintf(u.e.stderr, "pendingctl upload: resuming the interrupted upload of %s\n", it.path)
		s, err := u.c.ResumeUpload(ctx, u.ws, it.prev.UploadID, it.f)
		it.bar.done(err)
		if errors.Is(err, client.ErrUploadGone) || notReceived(err) {
			if errors.Is(err, client.ErrUploadGone) {
				fmt.Fprintf(u.e.stderr, "pendingctl upload: the server no longer has the interrupted upload of %s (it expired or was aborted): starting over\n", it.path)
			} else {
				fmt.Fprintf(u.e.stderr, "pendingctl upload: the interrupted upload of %s does not hold the file's bytes (was it changed in place?): starting over\n", it.path)
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_ = u.c.AbortUpload(ctx, u.ws, it.prev.UploadID) // best effort: it expires anyway
				cancel()
			}
			u.states.remove(it.state)
			it.prev = nil
			rest = append(rest, it)
			continue
		}
		if err != nil {
			return err
		}
		it.staged = &s
		u.states.remove(it.state)
		it.prev = nil
	}
	if len(rest) == 0 {
		return nil
	}
	files := make([]client.UploadFile, len(rest))
	for k, it := range rest {
		files[k] = it.f
	}
	staged, err := u.c.Upload(ctx, u.ws, files)
	for _, it := range rest {
		it.bar.done(err)
	}
	if err != nil {
		u.partial = staged
		return err
	}
	for k, it := range rest {
		it.staged = &staged[k]
		if it.recorded {
			u.states.remove(it.state)
		}
	}
	return nil
}

// staged is what the run staged, in the command line's order (and then
// what a failed upload staged).
func (u *uploadRun) staged() []client.StagedFile {
	out := []client.StagedFile{}
	for _, it := range u.items {
		if it.staged != nil {
			out = append(out, *it.staged)
		}
	}
	return append(out, u.partial...)
}

// failed reports err, and how to resume the uploads it left recorded.
func (u *uploadRun) failed(err error) error {
	msg := explain(err)
	if errors.Is(err, context.Canceled) {
		msg = "interrupted"
	}
	fmt.Fprintf(u.e.stderr, "pendingctl upload: %s\n", msg)
	for _, it := range u.items {
		if it.staged == nil && (it.recorded || it.prev != nil) {
			fmt.Fprintf(u.e.stderr, "pendingctl upload: the upload of %s can be resumed: run the same command again (within the hour)\n", it.path)
		}
	}
	return errReported
}

// lazyBar is a file's progress bar, drawn from the first count the
// client reports (not while the file is hashed): the first byte sent, or,
// for a resumed upload, the bytes of the parts the bucket holds already,
// where the bar then starts.
type lazyBar struct {
	w     io.Writer
	label string
	total int64
	mu    sync.Mutex
	b     *bar
}

func (l *lazyBar) set(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b == nil {
		l.b = newBarAt(l.w, l.label, l.total, n)
		return
	}
	l.b.set(n)
}

// done ends the bar, if one was drawn (nil-safe).
func (l *lazyBar) done(err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b != nil {
		l.b.Done(err)
	}
}

// notReceived reports whether err is the commit's refusal of an upload
// whose bytes are not what its presign declared (upload_not_received):
// after a resume that sent every missing part, the file's bytes are not
// the ones the upload began with.
func notReceived(err error) bool { return client.ErrorCode(err) == wire.CodeUploadNotReceived }
