package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool defaults for a Lambda process: one request at a time, so two
// connections (one spare for the fetched_at stamp or a slow close); a
// short idle time so a frozen sandbox does not hold connections long.
const (
	DefaultMaxConns         = 2
	DefaultMaxConnIdleTime  = time.Minute
	DefaultConnectTimeout   = 5 * time.Second
	DefaultStatementTimeout = 10 * time.Second
)

// newPool returns a pool on databaseURL with a BeforeConnect hook (the
// rotated password; nil: none) and a tracer (nil: none). It connects
// lazily: no I/O here, so a cold start does not wait for Postgres, and an
// unreachable database shows up as a 503 on the first request rather than
// a failed init. Settings given in the URL (pool_max_conns,
// connect_timeout, statement_timeout in options,
// default_query_exec_mode=exec for RDS Proxy) win over the defaults.
func newPool(databaseURL string, maxConns int32, beforeConnect func(context.Context, *pgx.ConnConfig) error, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// pgx's message can quote the URL, password included: keep it out.
		return nil, fmt.Errorf("database url: cannot parse (check DATABASE_URL or the secret's fields)")
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = DefaultMaxConnIdleTime
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	// A frozen server (a stopped process, a hung host) never runs its
	// statement_timeout: only the request's context ends the wait. pgx's
	// deadline handler does that by putting a deadline on the socket when
	// the context ends; its cancel-request handler would first dial the
	// same frozen server. Set here so a change of pgx's default cannot
	// bring that back.
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["statement_timeout"]; !ok && !strings.Contains(rp["options"], "statement_timeout") {
		rp["statement_timeout"] = fmt.Sprint(DefaultStatementTimeout.Milliseconds())
	}
	if _, ok := rp["idle_in_transaction_session_timeout"]; !ok {
		rp["idle_in_transaction_session_timeout"] = "30000"
	}
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = "pendinguploads"
	}
	cfg.BeforeConnect = beforeConnect
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	return pgxpool.NewWithConfig(context.Background(), cfg)
}
