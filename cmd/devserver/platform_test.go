package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestOnThePlatformsDatabase: with DATABASE_URL on the platform's
// database, the dev server migrates it, adds nothing to the platform's
// workspaces, and says how to get a workspace token; with
// DEV_WORKSPACE_ID naming one of its workspaces, it mints that one's.
func TestOnThePlatformsDatabase(t *testing.T) {
	url := pgtest.MustPlatformEmptyURL(t, false)
	count := func() int {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM workspaces`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	serve := func(env map[string]string) string {
		t.Helper()
		env["DATABASE_URL"], env["PORT"], env["HOST"], env["ADMIN_TOKEN"] = url, "0", "127.0.0.1", "an-admin-token-for-the-test"
		env["LOCAL_DIR"] = t.TempDir() // the download link key it keeps, out of the source tree
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr syncBuffer
		ready := make(chan string, 1)
		exit := make(chan int, 1)
		go func() { exit <- run(ctx, func(k string) string { return env[k] }, &stdout, &stderr, ready) }()
		select {
		case <-ready:
		case code := <-exit:
			t.Fatalf("dev server exited %d:\n%s\n%s", code, stdout.String(), stderr.String())
		case <-time.After(time.Minute):
			t.Fatalf("dev server not ready:\n%s", stderr.String())
		}
		cancel()
		<-exit
		return stdout.String()
	}

	banner := serve(map[string]string{})
	if !strings.Contains(banner, "DEV_WORKSPACE_ID") || strings.Contains(banner, "workspace token  ") || count() != 0 {
		t.Fatalf("without DEV_WORKSPACE_ID: %d workspaces, banner:\n%s", count(), banner)
	}
	ws := uuid.New()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO workspaces (id, name) VALUES ($1, 'w')`, ws); err != nil {
		t.Fatal(err)
	}
	banner = serve(map[string]string{"DEV_WORKSPACE_ID": ws.String()})
	if !strings.Contains(banner, "workspace token  ") || !strings.Contains(banner, ws.String()) || count() != 1 {
		t.Fatalf("with DEV_WORKSPACE_ID: %d workspaces, banner:\n%s", count(), banner)
	}
}
