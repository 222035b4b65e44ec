package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgbouncertest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestPoolerTimeoutsPerTransaction: in exec mode the pool sends no
// session timeouts at connect (PgBouncer 1.18 would refuse them), and
// every call of the service's database (Query, QueryRow, Exec, a batch,
// a transaction) runs under them all the same, set in its own
// transaction: a statement past statement_timeout is cancelled, straight
// to Postgres as through PgBouncer in transaction mode.
func TestPoolerTimeoutsPerTransaction(t *testing.T) {
	direct := pgtest.MustURL(t)
	bouncer := pgbouncertest.MustStart(t, direct, pgbouncertest.Options{})
	for name, u := range map[string]string{
		"Postgres":  direct,
		"PgBouncer": bouncer.URL,
		// The URL's mode wins; simple_protocol is pooled as exec is.
		"PgBouncerSimpleProtocolInURL": bouncer.URL + "&default_query_exec_mode=simple_protocol",
	} {
		t.Run(name, func(t *testing.T) {
			pool, perTx, err := newPool(u+"&statement_timeout=300", config.QueryModeExec, 2, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if perTx == nil {
				t.Fatal("exec mode: no settings per transaction")
			}
			wantMode := pgx.QueryExecModeExec
			if strings.Contains(u, "simple_protocol") {
				wantMode = pgx.QueryExecModeSimpleProtocol
			}
			if got := pool.Config().ConnConfig.DefaultQueryExecMode; got != wantMode {
				t.Fatalf("query mode: got %v, want %v", got, wantMode)
			}
			for _, p := range []string{sessionTimeouts[0], sessionTimeouts[1], "idle_session_timeout"} {
				if v, ok := pool.Config().ConnConfig.RuntimeParams[p]; ok {
					t.Errorf("startup parameter %s=%s sent in exec mode", p, v)
				}
			}
			if pool.Config().AfterConnect != nil {
				t.Errorf("exec mode: a session setting made after connecting (idle_session_timeout), which the pooler would hand to other clients")
			}
			db := &pooledDB{db: pool, settings: perTx}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			const show = `SELECT current_setting('statement_timeout') || ' ' || current_setting('idle_in_transaction_session_timeout')`
			const want = "300ms 30s"
			var got string
			if err := db.QueryRow(ctx, show).Scan(&got); err != nil || got != want {
				t.Errorf("QueryRow: got %q, %v; want %q", got, err, want)
			}
			rows, err := db.Query(ctx, show)
			if err != nil {
				t.Fatal(err)
			}
			got = ""
			for rows.Next() {
				if err := rows.Scan(&got); err != nil {
					t.Fatal(err)
				}
			}
			if rows.Err() != nil || got != want {
				t.Errorf("Query: got %q, %v; want %q", got, rows.Err(), want)
			}
			b := &pgx.Batch{}
			b.Queue(`SELECT 1`)
			b.Queue(show).QueryRow(func(r pgx.Row) error { return r.Scan(&got) })
			if err := db.SendBatch(ctx, b).Close(); err != nil || got != want {
				t.Errorf("SendBatch: got %q, %v; want %q", got, err, want)
			}
			tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.QueryRow(ctx, show).Scan(&got); err != nil || got != want {
				t.Errorf("BeginTx: got %q, %v; want %q", got, err, want)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}

			// The settings are the transaction's, not the session's.
			if err := pool.QueryRow(ctx, `SELECT current_setting('statement_timeout')`).Scan(&got); err != nil || got != "0" {
				t.Errorf("the session's statement_timeout: got %q, %v; want 0 (the server's default)", got, err)
			}

			start := time.Now()
			_, err = db.Exec(ctx, `SELECT pg_sleep(5)`)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "57014" || time.Since(start) > 4*time.Second {
				t.Errorf("Exec of a 5 s sleep under a 300 ms statement_timeout: got %v after %s; want SQLSTATE 57014 (query_canceled)", err, time.Since(start))
			}
			b = &pgx.Batch{}
			b.Queue(`SELECT 1`)
			b.Queue(`SELECT pg_sleep(5)`)
			start = time.Now()
			err = db.SendBatch(ctx, b).Close()
			if !errors.As(err, &pgErr) || pgErr.Code != "57014" || time.Since(start) > 4*time.Second {
				t.Errorf("a batch's second statement, a 5 s sleep: got %v after %s; want SQLSTATE 57014", err, time.Since(start))
			}
		})
	}
}

// TestPoolerCacheStatementModeSendsTimeouts: the default mode keeps the
// timeouts as startup parameters, set once per session, and no settings
// per transaction.
func TestPoolerCacheStatementModeSendsTimeouts(t *testing.T) {
	pool, perTx, err := newPool(pgtest.MustURL(t), config.QueryModeCacheStatement, 2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cc := pool.Config().ConnConfig
	if perTx != nil || cc.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement ||
		cc.RuntimeParams["statement_timeout"] != "10000" || cc.RuntimeParams["idle_in_transaction_session_timeout"] != "30000" {
		t.Fatalf("cache_statement: per transaction %v, mode %v, startup parameters %v", perTx, cc.DefaultQueryExecMode, cc.RuntimeParams)
	}
	if _, ok := cc.RuntimeParams["idle_session_timeout"]; ok {
		t.Errorf("idle_session_timeout sent as a startup parameter, which PostgreSQL 13 refuses: %v", cc.RuntimeParams)
	}
	var got, idle string
	if err := pool.QueryRow(context.Background(), `SELECT current_setting('statement_timeout'), current_setting('idle_session_timeout')`).Scan(&got, &idle); err != nil || got != "10s" || idle != "2min" {
		t.Fatalf("statement_timeout, idle_session_timeout: got %q, %q, %v; want 10s, 2min", got, idle, err)
	}
}

// TestServerMajor: idle_session_timeout is set only on a server whose
// server_version says 14 or newer.
func TestServerMajor(t *testing.T) {
	for v, want := range map[string]int{"15.18": 15, "13.12": 13, "14.2 (Debian 14.2-1.pgdg120+1)": 14, "17beta1": 17, "9.6.24": 9, "": 0, "x": 0} {
		if got := serverMajor(v); got != want {
			t.Errorf("serverMajor(%q) = %d, want %d", v, got, want)
		}
	}
}
