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

	"github.com/pendinguploads/pendinguploads/internal/config"
)

// Pool defaults for a Lambda process: one request at a time, so two
// connections (one spare for the fetched_at stamp or a slow close); a
// short idle time so a frozen sandbox does not hold connections long.
const (
	DefaultMaxConns         = 2
	DefaultMaxConnIdleTime  = time.Minute
	DefaultConnectTimeout   = 5 * time.Second
	DefaultStatementTimeout = 10 * time.Second
	// DefaultIdleInTransactionTimeout ends a session whose transaction
	// waits on its client this long.
	DefaultIdleInTransactionTimeout = 30 * time.Second
	// DefaultIdleSessionTimeout ends, on the server, a session that sat
	// idle this long: a frozen Lambda sandbox's pooled connection (which
	// its own MaxConnIdleTime cannot close while frozen) neither holds a
	// connection slot for long nor keeps a database that pauses when
	// idle awake (Aurora Serverless v2 pauses after 5 minutes at least
	// without a connection). Longer than DefaultMaxConnIdleTime, so that
	// a running process closes its own first; a connection the server
	// closed is found dead by pgxpool's ping of a connection idle over a
	// second, and replaced, before a request uses it.
	DefaultIdleSessionTimeout = 2 * time.Minute
)

// newPool returns a pool on databaseURL in query mode mode, with a
// BeforeConnect hook (the rotated password; nil: none) and a tracer (nil:
// none). It connects lazily: no I/O here, so a cold start does not wait
// for Postgres, and an unreachable database shows up as a 503 on the
// first request rather than a failed init. Settings given in the URL
// (pool_max_conns, connect_timeout, statement_timeout, statement_timeout
// in options, default_query_exec_mode) win over the defaults and over
// mode.
//
// In a pooled mode (exec, or the URL's simple_protocol) the session's
// timeouts are not startup parameters, which a transaction pooler cannot
// give every server connection it hands out (PgBouncer refuses them);
// newPool returns them as perTx, for pooledDB to set in each transaction.
// perTx is nil otherwise.
func newPool(databaseURL string, mode config.QueryMode, maxConns int32, beforeConnect func(context.Context, *pgx.ConnConfig) error, tracer pgx.QueryTracer) (pool *pgxpool.Pool, perTx *txSettings, err error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// pgx's message can quote the URL, password included: keep it out.
		return nil, nil, fmt.Errorf("database url: cannot parse (check DATABASE_URL or the secret's fields)")
	}
	if !strings.Contains(databaseURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = execMode(mode)
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
		rp["idle_in_transaction_session_timeout"] = fmt.Sprint(DefaultIdleInTransactionTimeout.Milliseconds())
	}
	if _, ok := rp["idle_session_timeout"]; !ok && !pooled(cfg.ConnConfig.DefaultQueryExecMode) {
		// A session setting of PostgreSQL 14 and newer, which a 13 refuses
		// as a startup parameter (FATAL: unrecognized configuration
		// parameter), failing every connection: so set after connecting,
		// on a server that has it (server_version, reported at startup),
		// one round trip per new connection. Behind a transaction pooler,
		// the pooler's server connections are its own: not set.
		cfg.AfterConnect = setIdleSessionTimeout(DefaultIdleSessionTimeout)
	}
	if _, ok := rp["application_name"]; !ok {
		// A startup parameter PgBouncer and RDS Proxy pass on.
		rp["application_name"] = "pendinguploads"
	}
	if pooled(cfg.ConnConfig.DefaultQueryExecMode) {
		perTx = &txSettings{}
		for _, name := range sessionTimeouts {
			if v, ok := rp[name]; ok {
				perTx.add(name, v)
				delete(rp, name)
			}
		}
		if len(perTx.names) == 0 {
			perTx = nil
		}
	}
	cfg.BeforeConnect = beforeConnect
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, nil, err
	}
	return pool, perTx, nil
}

// setIdleSessionTimeout returns an AfterConnect hook that sets the
// session's idle_session_timeout to d on a server that has the setting
// (PostgreSQL 14 and newer), and leaves an older one as it is.
func setIdleSessionTimeout(d time.Duration) func(context.Context, *pgx.Conn) error {
	set := fmt.Sprintf("SET idle_session_timeout = %d", d.Milliseconds())
	return func(ctx context.Context, c *pgx.Conn) error {
		if serverMajor(c.PgConn().ParameterStatus("server_version")) < 14 {
			return nil
		}
		_, err := c.Exec(ctx, set)
		return err
	}
}

// serverMajor is the major version in a server_version such as "15.18",
// "14.2 (Debian 14.2-1)" or "17beta1"; 0 when it has none.
func serverMajor(v string) int {
	n := 0
	for _, r := range v {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// sessionTimeouts are the settings newPool gives every session: in a
// pooled mode, every transaction instead.
var sessionTimeouts = []string{"statement_timeout", "idle_in_transaction_session_timeout"}

// execMode is pgx's mode for mode.
func execMode(mode config.QueryMode) pgx.QueryExecMode {
	if mode == config.QueryModeExec {
		return pgx.QueryExecModeExec
	}
	return pgx.QueryExecModeCacheStatement
}

// pooled reports whether m sends only what a transaction pooler passes:
// unnamed statements, parsed in the transaction that runs them. The
// cache and describe modes name statements, or describe one in a
// transaction and run it in the next.
func pooled(m pgx.QueryExecMode) bool {
	return m == pgx.QueryExecModeExec || m == pgx.QueryExecModeSimpleProtocol
}
