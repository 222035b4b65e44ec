package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client"
)

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

func dropPart(part, state string) error {
	if err := os.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("place: %w", err)
	}
	return syncDir(state)
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
