package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/internal/sanitize"
)

// StateDirName is the folder, inside a Puller's directory, that holds its
// partial downloads, its delivery records and its lock.
const StateDirName = ".pendinguploads"

// ErrLocked is returned by Pull when another pull holds the directory.
var ErrLocked = errors.New("another pull is running in this directory")

// Puller delivers a workspace's pending uploads into a directory, crash
// safely: see the package documentation for the protocol. Set optional
// fields before Pull; one Puller must not run two Pulls at once (a lock
// file refuses a second pull into the same directory, in any process).
type Puller struct {
	client *client.Client
	ws     uuid.UUID
	dir    string

	// Progress, when set, is called before each download; the Progress
	// it returns (nil: none) sees the bytes and then Done.
	Progress func(f client.File) Progress
	// Lister, when set, makes the list call of each pull (a client of the
	// list function's own URL, the poll's cheapest door); downloads and
	// acks still go through the Puller's client.
	Lister *client.Client
}

// Progress observes one transfer.
type Progress interface {
	io.Writer
	// Done ends the transfer, err nil on success.
	Done(err error)
}

// New returns a Puller of ws's uploads into dir (created 0700 if absent)
// through c.
func New(c *client.Client, ws uuid.UUID, dir string) *Puller {
	return &Puller{client: c, ws: ws, dir: dir}
}

// Delivery is one file a pull placed in the directory or acked.
type Delivery struct {
	FileID uuid.UUID `json:"file_id"`
	// Name is the server's name of the file; Path where it was written.
	Name   string `json:"name"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// Recovered: an earlier pull wrote (or began to place) the file and
	// stopped before its ack; this pull finished the job without
	// downloading it again.
	Recovered bool `json:"recovered,omitempty"`
	// Acked: the server confirmed the ack. False with no error when the
	// upload was gone by then (expired or swept): the file is kept.
	Acked bool `json:"acked"`
}

// FileError is a file a pull could not deliver or ack.
type FileError struct {
	FileID uuid.UUID
	Name   string
	Err    error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s (%s): %v", e.Name, e.FileID, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// Result is what one Pull did.
type Result struct {
	// Listed is how many uploads the list showed when the pull began,
	// before it delivered any.
	Listed    int        `json:"listed"`
	Delivered []Delivery `json:"delivered"`
	// Skipped counts uploads that vanished between list and fetch.
	Skipped int          `json:"skipped,omitempty"`
	Errors  []*FileError `json:"-"`
	// Remaining is how many of the listed uploads are still pending after
	// the pull: those that failed, and those a stopped pull did not reach.
	Remaining int `json:"remaining"`
}

// record is a delivery record, D/.pendinguploads/<file_id>.record: the
// final name chosen for a verified, fsynced <file_id>.part.
type record struct {
	FileID uuid.UUID `json:"file_id"`
	Name   string    `json:"name"`  // the server's name
	Final  string    `json:"final"` // base name in Dir
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256,omitempty"`
	At     time.Time `json:"at"`
}

// Pull delivers every pending upload once: it first finishes what an
// interrupted pull left (placing and acking recorded files), then lists,
// downloads, verifies, places and acks each new one. A file that fails
// (a digest mismatch, a read error) is reported in Errors and in the
// returned error, and left unacked; the others go on. A 401, a lost lock
// or a cancelled context stops the whole pull.
func (p *Puller) Pull(ctx context.Context) (Result, error) {
	res := Result{Delivered: []Delivery{}}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return res, fmt.Errorf("pull: %w", err)
	}
	state := filepath.Join(p.dir, StateDirName)
	if err := os.Mkdir(state, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return res, fmt.Errorf("pull: %w", err)
	}
	unlock, err := lockDir(filepath.Join(state, "lock"))
	if err != nil {
		return res, fmt.Errorf("pull %s: %w", p.dir, err)
	}
	defer unlock()

	recorded, err := p.recover(ctx, &res)
	if err != nil {
		return res, err
	}
	lister := p.client
	if p.Lister != nil {
		lister = p.Lister
	}
	files, err := lister.List(ctx, p.ws)
	if err != nil {
		return res, err
	}
	res.Listed, res.Remaining = len(files), len(files)
	if err := dropStaleParts(state, files); err != nil {
		return res, err
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("pull: %w", context.Cause(ctx))
		}
		var d Delivery
		var err error
		if rec, ok := recorded[f.FileID]; ok {
			// Placed earlier; its ack failed during recovery. Ack again.
			d, err = p.finish(ctx, rec, true)
		} else {
			d, err = p.deliver(ctx, f)
		}
		switch {
		case errors.Is(err, errSkipped):
			res.Skipped++
			res.Remaining--
			continue
		case err != nil:
			res.Errors = append(res.Errors, &FileError{FileID: f.FileID, Name: f.Name, Err: err})
			if fatal(ctx, err) {
				return res, joinErrors(res.Errors)
			}
			continue
		}
		res.Delivered = append(res.Delivered, d)
		res.Remaining--
	}
	return res, joinErrors(res.Errors)
}

var errSkipped = errors.New("skipped")

func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || client.IsUnauthorized(err)
}

func joinErrors(errs []*FileError) error {
	if len(errs) == 0 {
		return nil
	}
	es := make([]error, len(errs))
	for i, e := range errs {
		es[i] = e
	}
	return errors.Join(es...)
}

// recover finishes every recorded delivery. It returns the records it
// could not ack yet. Partial downloads without a record stay, for deliver
// to resume; dropStaleParts removes those the list no longer shows.
func (p *Puller) recover(ctx context.Context, res *Result) (map[uuid.UUID]record, error) {
	state := filepath.Join(p.dir, StateDirName)
	entries, err := os.ReadDir(state)
	if err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	left := map[uuid.UUID]record{}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".record"):
			rec, err := readRecord(filepath.Join(state, name))
			if err != nil {
				return left, fmt.Errorf("pull: delivery record %s: %w (move it away to go on)", name, err)
			}
			d, err := p.finish(ctx, rec, true)
			if err != nil {
				res.Errors = append(res.Errors, &FileError{FileID: rec.FileID, Name: rec.Name, Err: err})
				left[rec.FileID] = rec
				if fatal(ctx, err) {
					return left, joinErrors(res.Errors)
				}
				continue
			}
			res.Delivered = append(res.Delivered, d)
		case strings.HasSuffix(name, ".record.tmp"):
			// A record write cut short: nothing was placed.
			_ = os.Remove(filepath.Join(state, name))
		}
	}
	return left, nil
}

// dropStaleParts removes the partial downloads (<file_id>.part without a
// record) of files the list does not show: acked elsewhere, expired or
// swept, they can never be resumed.
func dropStaleParts(state string, listed []client.File) error {
	entries, err := os.ReadDir(state)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	keep := map[string]bool{}
	for _, f := range listed {
		keep[f.FileID.String()+".part"] = true
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".part") && !keep[name] && !have[strings.TrimSuffix(name, ".part")+".record"] {
			_ = os.Remove(filepath.Join(state, name))
		}
	}
	return nil
}

// deliver downloads f into its .part, verifies it, records its final
// name, places it and acks it.
func (p *Puller) deliver(ctx context.Context, f client.File) (Delivery, error) {
	state := filepath.Join(p.dir, StateDirName)
	part := filepath.Join(state, f.FileID.String()+".part")
	if err := p.download(ctx, f, part); err != nil {
		// A transfer cut short keeps its part for the next pull to resume;
		// bytes that fail verification, or a file that is gone, do not.
		if client.IsNotFound(err) {
			_ = os.Remove(part)
			return Delivery{}, errSkipped
		}
		if errors.Is(err, client.ErrIntegrity) {
			_ = os.Remove(part)
		}
		return Delivery{}, err
	}
	final, err := uniqueName(p.dir, sanitize.Filename(f.Name))
	if err != nil {
		_ = os.Remove(part)
		return Delivery{}, err
	}
	rec := record{FileID: f.FileID, Name: f.Name, Final: final, Size: f.Size, SHA256: f.SHA256, At: time.Now().UTC()}
	if err := writeRecord(state, rec); err != nil {
		_ = os.Remove(part)
		return Delivery{}, err
	}
	return p.finish(ctx, rec, false)
}

// download fetches f into part, resuming: a part left by a pull that was
// killed or lost its connection holds the first bytes already, and only
// the rest is asked for (Range); the whole file is verified, the part's
// bytes hashed first. A part that is not shorter than the file is
// started over.
func (p *Puller) download(ctx context.Context, f client.File, part string) (err error) {
	out, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("download: %w", cerr)
		}
	}()
	if err := out.Chmod(0o600); err != nil {
		return fmt.Errorf("download: %w", err)
	}
	fi, err := out.Stat()
	if err != nil {
		return fmt.Errorf("download: %w", err)
	}
	restart := func() error {
		if err := out.Truncate(0); err != nil {
			return err
		}
		_, err := out.Seek(0, io.SeekStart)
		return err
	}
	have := fi.Size()
	if have >= f.Size {
		if err := restart(); err != nil {
			return fmt.Errorf("download: %w", err)
		}
		have = 0
	}
	var w io.Writer = out
	var prog Progress
	if p.Progress != nil {
		prog = p.Progress(f)
	}
	h := sha256.New()
	var hw io.Writer = h
	if prog != nil {
		w, hw = io.MultiWriter(out, prog), io.MultiWriter(h, prog)
		defer func() { prog.Done(err) }()
	}
	// The part's bytes: hashed (and shown as done), the offset left at
	// their end, where the rest goes.
	if n, err := io.Copy(hw, io.LimitReader(out, have)); err != nil || n != have {
		return fmt.Errorf("download: read %s: %d of %d bytes: %v", part, n, have, err)
	}
	if _, err := p.client.Resume(ctx, p.ws, f, have, h, w, restart); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("download: fsync: %w", err)
	}
	return nil
}

// finish places a recorded file (if its .part is still there), acks it,
// and drops the record. A pull that stops between the placing and the ack
// (a crash, a refused ack) leaves the record: the next pull acks the file
// without writing it again.
func (p *Puller) finish(ctx context.Context, rec record, recovered bool) (Delivery, error) {
	path, placedNow, err := p.place(&rec)
	if err != nil {
		return Delivery{}, err
	}
	_ = placedNow
	d := Delivery{FileID: rec.FileID, Name: rec.Name, Path: path, Size: rec.Size, SHA256: rec.SHA256, Recovered: recovered}
	_, err = p.client.Ack(ctx, p.ws, rec.FileID)
	switch {
	case err == nil:
		d.Acked = true
	case client.IsNotFound(err):
		// Expired or swept meanwhile: nothing left to ack; the file stays.
	default:
		return d, err
	}
	state := filepath.Join(p.dir, StateDirName)
	if err := os.Remove(filepath.Join(state, rec.FileID.String()+".record")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("drop record: %w", err)
	}
	return d, syncDir(state)
}

// place moves rec's .part to rec.Final without ever replacing a file,
// choosing (and recording) another name if rec.Final is taken by another
// file. Without a .part the file was placed already. It reports the final
// path and whether it placed the file now.
func (p *Puller) place(rec *record) (string, bool, error) {
	state := filepath.Join(p.dir, StateDirName)
	part := filepath.Join(state, rec.FileID.String()+".part")
	for range 100 {
		final := filepath.Join(p.dir, rec.Final)
		pfi, err := os.Lstat(part)
		if errors.Is(err, fs.ErrNotExist) {
			return final, false, nil // placed by an earlier run
		}
		if err != nil {
			return "", false, fmt.Errorf("place: %w", err)
		}
		if ffi, err := os.Lstat(final); err == nil {
			if os.SameFile(pfi, ffi) {
				// Linked, then interrupted before the .part was removed.
				return final, true, dropPart(part, state)
			}
			if err := p.rename(rec); err != nil {
				return "", false, err
			}
			continue
		}
		err = os.Link(part, final)
		if errors.Is(err, fs.ErrExist) {
			if err := p.rename(rec); err != nil {
				return "", false, err
			}
			continue
		}
		if err != nil {
			// No hard links here (some file systems): rename is atomic too,
			// but would replace a file created since the Lstat above.
			if rerr := os.Rename(part, final); rerr != nil {
				return "", false, fmt.Errorf("place: %w", rerr)
			}
		}
		if err := syncDir(p.dir); err != nil {
			return "", false, err
		}
		return final, true, dropPart(part, state)
	}
	return "", false, fmt.Errorf("place %s: no free name", rec.Final)
}

// rename picks a new final name for rec and records it before use.
func (p *Puller) rename(rec *record) error {
	final, err := uniqueName(p.dir, sanitize.Filename(rec.Name))
	if err != nil {
		return err
	}
	rec.Final = final
	return writeRecord(filepath.Join(p.dir, StateDirName), *rec)
}

func dropPart(part, state string) error {
	if err := os.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("place: %w", err)
	}
	return syncDir(state)
}

// uniqueName returns name, or name-1, name-2, … (before the extension),
// the first that does not exist in dir. The state folder's name is never
// returned.
func uniqueName(dir, name string) (string, error) {
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	for n := 0; n < 10000; n++ {
		cand := name
		if n > 0 {
			cand = fmt.Sprintf("%s-%d%s", stem, n, ext)
		}
		if cand == StateDirName {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, cand)); errors.Is(err, fs.ErrNotExist) {
			return cand, nil
		} else if err != nil {
			return "", fmt.Errorf("name %s: %w", cand, err)
		}
	}
	return "", fmt.Errorf("name %s: no free name", name)
}

// writeRecord writes rec atomically and durably: a temp file, fsync,
// rename, fsync of the folder.
func writeRecord(state string, rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	path := filepath.Join(state, rec.FileID.String()+".record")
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record: fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return syncDir(state)
}

func readRecord(path string) (record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return record{}, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, err
	}
	if rec.FileID == uuid.Nil || rec.Final == "" || rec.Final != filepath.Base(rec.Final) || rec.Final == "." || rec.Final == ".." {
		return record{}, errors.New("malformed")
	}
	return rec, nil
}

// syncDir makes a folder's entries (a rename, a link, a removal) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
