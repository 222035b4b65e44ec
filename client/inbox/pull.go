package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
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
