package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// Files the dev server keeps in LOCAL_DIR beside its Postgres, so that a
// restart finds what the last run printed still working.
const (
	adminTokenFile  = "admin-token"       // the generated admin token, 0600
	workspaceFile   = "workspace"         // the dev workspace's ID, with its own Postgres
	downloadKeyFile = "download-link-key" // the generated DOWNLOAD_LINK_KEY, 0600
)

// ensureDatabase creates database name unless it exists, and reports
// whether it did.
func ensureDatabase(ctx context.Context, adminURL, name string) (bool, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err == nil, err
}

// keptAdminToken returns the admin token kept in dir (kept: true), or
// makes one and keeps it there (mode 0600) for the next runs. The data and
// the workspace tokens outlive a run in dir; an admin token that did not
// would be the one credential a restart breaks.
func keptAdminToken(dir string) (token string, kept bool, err error) {
	return keptSecret(filepath.Join(dir, adminTokenFile), func() (string, error) {
		tok, err := auth.NewToken()
		return "admin_" + strings.TrimPrefix(tok, auth.TokenPrefix), err
	})
}

// keptLinkKey returns the download links' key kept in dir (kept: true),
// or makes one (32 random bytes, hex) and keeps it there (mode 0600): a
// link printed or handed out before a restart still opens after it, for
// its few minutes, as it would across a deploy of the stack, whose key
// outlives its functions.
func keptLinkKey(dir string) (key string, kept bool, err error) {
	return keptSecret(filepath.Join(dir, downloadKeyFile), func() (string, error) {
		var b [32]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
		return hex.EncodeToString(b[:]), nil
	})
}

// keptSecret returns the secret in the file at path (kept: true), or
// mints one and writes it there, mode 0600, for the next runs.
func keptSecret(path string, mint func() (string, error)) (secret string, kept bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, true, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	s, err := mint()
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", false, err
	}
	return s, false, nil
}

// devWorkspace picks the workspace the dev server mints a token for: the
// one DEV_WORKSPACE_ID names; else, on its own Postgres (own), the one
// kept in dir by an earlier run, so that a restart lists what was staged
// before; else a fresh one. On the platform's database (it has a
// workspaces table, which tokens and activity rows reference) a fresh one
// cannot be made without writing the platform's own table, which the dev
// server never does: without DEV_WORKSPACE_ID it returns uuid.Nil, and
// with it the workspace must exist there.
func devWorkspace(ctx context.Context, db *pgxpool.Pool, named, dir string, own bool) (uuid.UUID, error) {
	var platform bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('workspaces') IS NOT NULL`).Scan(&platform); err != nil {
		return uuid.Nil, err
	}
	if named == "" {
		switch {
		case platform:
			return uuid.Nil, nil
		case !own:
			return uuid.New(), nil
		}
		path := filepath.Join(dir, workspaceFile)
		if b, err := os.ReadFile(path); err == nil {
			if ws, err := uuid.Parse(strings.TrimSpace(string(b))); err == nil {
				return ws, nil
			}
		}
		ws := uuid.New()
		if err := os.WriteFile(path, []byte(ws.String()+"\n"), 0o644); err != nil {
			return uuid.Nil, fmt.Errorf("keep the workspace in %s: %w", dir, err)
		}
		return ws, nil
	}
	ws, err := uuid.Parse(named)
	if err != nil {
		return uuid.Nil, fmt.Errorf("want a workspace UUID, got %q", named)
	}
	if platform {
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)`, ws).Scan(&exists); err != nil {
			return uuid.Nil, err
		}
		if !exists {
			return uuid.Nil, fmt.Errorf("no workspace %s in the platform's workspaces table", ws)
		}
	}
	return ws, nil
}

// earlier is what the dev server's own Postgres held from earlier runs.
type earlier struct {
	files, workspaces, tokens int64
	// lostBytes: waiting files whose bytes were in an earlier run's local
	// S3, which moto does not keep; expired now, so the sweep removes them.
	lostBytes int64
}

// earlierData counts what earlier runs left in the dev server's own
// database. With a local S3 (localS3), the waiting files whose bytes
// were in an earlier run's moto, gone with it, are then expired, so that
// the start's sweep removes them rather than a pull failing on each for a
// day. The statements on the files are the store's (Backlog,
// ExpireBucketFiles), as every one is.
func earlierData(ctx context.Context, db *pgxpool.Pool, store *pendinguploads.Store, localS3 bool) (earlier, error) {
	var e earlier
	b, err := store.Backlog(ctx)
	if err != nil {
		return e, err
	}
	e.files, e.workspaces = b.Files, b.Workspaces
	if err := db.QueryRow(ctx, `SELECT count(*) FROM workspace_auth_tokens WHERE revoked_at IS NULL`).Scan(&e.tokens); err != nil {
		return e, err
	}
	if localS3 {
		if e.lostBytes, err = store.ExpireBucketFiles(ctx); err != nil {
			return e, err
		}
	}
	return e, nil
}

// plural is "1 file" or "2 files".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
