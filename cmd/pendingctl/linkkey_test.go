package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestLinkkeyRotate: pendingctl linkkey rotate adds a new key to the
// database's download_link_keys and keeps the one it replaced, which
// the service then reads as its current and previous keys; a second
// rotation deletes the first key. It prints ids, never a key; anything
// but "rotate" is a usage error.
func TestLinkkeyRotate(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustURL(t)
	db := map[string]string{"DATABASE_URL": dbURL}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	keys := func() []string {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT key FROM download_link_keys ORDER BY created_at DESC, id DESC`)
		if err != nil {
			t.Fatal(err)
		}
		k, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	first := keys()
	if len(first) != 1 {
		t.Fatalf("after the migration: %d keys, want 1", len(first))
	}

	r := cli(t, db, "linkkey", "rotate", "--json")
	expect(t, r, 0, "linkkey rotate --json")
	var got app.RotatedLinkKey
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("--json: %q, %v", r.stdout, err)
	}
	second := keys()
	if len(second) != 2 || second[1] != first[0] || got.KeyID != downloadlink.KeyID(second[0]) ||
		got.PreviousKeyID != downloadlink.KeyID(first[0]) || got.Deleted != 0 {
		t.Fatalf("the first rotation: printed %+v, the table holds %d keys; want the new key and the migration's", got, len(second))
	}
	read, err := app.LinkKeysFromDatabase(ctx, conn)
	if err != nil || read.Current != second[0] || read.Previous != first[0] {
		t.Fatalf("the service's read: %v; want the new key current, the migration's previous", err)
	}

	r = cli(t, db, "linkkey", "rotate")
	expect(t, r, 0, "linkkey rotate")
	third := keys()
	if len(third) != 2 || third[1] != second[0] {
		t.Fatalf("the second rotation: %d keys, want the new one and the one it replaced", len(third))
	}
	if want := "key " + downloadlink.KeyID(third[0]); !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "1 older keys deleted") {
		t.Errorf("rotate: got %q, want it to name %s and one key deleted", r.stdout, want)
	}
	for _, k := range append(third, first...) {
		if strings.Contains(r.stdout+r.stderr, k) {
			t.Fatalf("rotate printed a key: %q", r.stdout)
		}
	}

	expect(t, cli(t, db, "linkkey"), 2, "linkkey without rotate")
	expect(t, cli(t, db, "linkkey", "show"), 2, "linkkey show")
	expect(t, cli(t, map[string]string{}, "linkkey", "rotate"), 2, "linkkey rotate without DATABASE_URL")
}
