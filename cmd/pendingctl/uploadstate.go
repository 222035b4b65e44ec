package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/uuid"
)

// uploadState is what pendingctl upload keeps of an upload in parts
// between its presign and its commit, so that running the same upload
// again (same API, workspace, path, size and modification time) resumes
// it instead of sending every part again.
type uploadState struct {
	API         string    `json:"api"`
	Workspace   uuid.UUID `json:"workspace"`
	UploadID    uuid.UUID `json:"upload_id"`
	Path        string    `json:"path"`
	Size        int64     `json:"size"`
	MTime       time.Time `json:"mtime"`
	PartBytes   int64     `json:"part_bytes"`
	PresignedAt time.Time `json:"presigned_at"`
}

// stateMaxAge is how long a state is kept without a rerun: the server
// forgets an uncommitted upload an hour after its presign, so a state
// this old can only start over.
const stateMaxAge = 24 * time.Hour

// uploadStates is the folder of the states, one small JSON file each,
// named by a digest of the API, workspace and path. A zero dir keeps
// none.
type uploadStates struct{ dir string }

// defaultStateDir is where states live without --state: the user's
// cache folder (as os.UserCacheDir finds it, from getenv), or "" when
// there is none.
func defaultStateDir(getenv func(string) string) string {
	var base string
	switch runtime.GOOS {
	case "windows":
		base = getenv("LocalAppData")
	case "darwin", "ios":
		if h := getenv("HOME"); h != "" {
			base = filepath.Join(h, "Library", "Caches")
		}
	case "plan9":
		if h := getenv("home"); h != "" {
			base = filepath.Join(h, "lib", "cache")
		}
	default:
		if d := getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
			base = d
		} else if h := getenv("HOME"); h != "" {
			base = filepath.Join(h, ".cache")
		}
	}
	if base == "" {
		return ""
	}
	return filepath.Join(base, "pendingctl", "uploads")
}

// name is the state file of the upload of path (absolute) to ws at api.
func (s uploadStates) name(api string, ws uuid.UUID, path string) string {
	if s.dir == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(api + "\x00" + ws.String() + "\x00" + path))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".json")
}

// load reads the state at name: nil without one.
func (s uploadStates) load(name string) (*uploadState, error) {
	if name == "" {
		return nil, nil
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st uploadState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &st, nil
}

// save writes st at name atomically: a temporary file in the same
// folder, synced, renamed over name. A crash leaves the old state or the
// new one, never a torn one.
func (s uploadStates) save(name string, st uploadState) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing there
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync() // the rename, durable where the OS allows
		d.Close()
	}
	return nil
}

// remove deletes the state at name, if any.
func (s uploadStates) remove(name string) {
	if name != "" {
		_ = os.Remove(name)
	}
}

// prune deletes states older than stateMaxAge, and leftovers of saves
// that crashed.
func (s uploadStates) prune(now time.Time) {
	if s.dir == "" {
		return
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".state-") {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > stateMaxAge {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
		}
	}
}

// matches says whether st is the upload of this same file: same
// workspace and API, same path, size and modification time.
func (st *uploadState) matches(api string, ws uuid.UUID, path string, fi os.FileInfo) bool {
	return st.API == api && st.Workspace == ws && st.Path == path && st.Size == fi.Size() && st.MTime.Equal(fi.ModTime())
}
