package inbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pendinguploads/pendinguploads/client"
	"github.com/pendinguploads/pendinguploads/client/wire"
)

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
	final, err := uniqueName(p.dir, wire.SanitizeFilename(f.Name))
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
	final, err := uniqueName(p.dir, wire.SanitizeFilename(rec.Name))
	if err != nil {
		return err
	}
	rec.Final = final
	return writeRecord(filepath.Join(p.dir, StateDirName), *rec)
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
