package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DatabaseError is a database that does not answer as configured: what
// CheckDatabase returns. Its message names the setting, the server and
// the cause in words, never the password.
type DatabaseError struct {
	// Setting is where the URL came from: DATABASE_URL, DB_SECRET_ARN or
	// DB_IAM_USER.
	Setting string
	// Addr is host:port, and Database the database's name.
	Addr, Database string
	// Reason says what went wrong, in words ("connection refused: nothing
	// listens there").
	Reason string
	Err    error
}

func (e *DatabaseError) Error() string {
	return fmt.Sprintf("%s: database %s on %s: %s", e.Setting, e.Database, e.Addr, e.Reason)
}

func (e *DatabaseError) Unwrap() error { return e.Err }

// CheckDatabase connects once (a ping through the pool) and returns nil,
// or a *DatabaseError: what a program people run checks at start, so that
// a URL pointing at nothing is named then. The functions never call it
// (their pool connects lazily; a cold start does not wait on Postgres).
func (a *App) CheckDatabase(ctx context.Context) error {
	err := a.Pool.Ping(ctx)
	if err == nil {
		return nil
	}
	cc := a.Pool.Config().ConnConfig
	e := &DatabaseError{
		Setting:  "DATABASE_URL",
		Addr:     net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))),
		Database: cc.Database,
		Err:      err,
	}
	switch {
	case a.Config.DBIAMUser != "":
		e.Setting = "DB_IAM_USER"
	case a.Config.DatabaseURL == "":
		e.Setting = "DB_SECRET_ARN"
	}
	var pgErr *pgconn.PgError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		e.Reason = fmt.Sprintf("the server refused user %q (wrong password, or no such role)", cc.User)
	case errors.As(err, &pgErr) && pgErr.Code == "3D000":
		e.Reason = "no such database on that server"
	case errors.As(err, &pgErr):
		e.Reason = fmt.Sprintf("the server refused the connection: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Reason = "connection refused: no server listens there"
	case errors.As(err, &dnsErr):
		e.Reason = fmt.Sprintf("no such host %q", dnsErr.Name)
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
		e.Reason = "no answer in time (a firewall, or a server that is down?)"
	default:
		// pgx's connect errors name the host, user and database, not
		// the password.
		e.Reason = err.Error()
	}
	return e
}

// DatabaseWaitInterval is how long WaitForDatabase sleeps between tries.
const DatabaseWaitInterval = 2 * time.Second

// WaitForDatabase waits until the pool opens a connection, at most budget
// (and within ctx), trying every DatabaseWaitInterval: the scheduled runs
// (the sweep, the overdue scans' pass) and the scan results call it
// before their work. The stack's own database pauses when idle, and a
// scheduled run is what wakes it: Aurora Serverless v2 resumes in about
// 15 s, 30 s after a day paused (docs/operating.md, "The first request
// after a pause"), while a connect gives up after its timeout (5 s), so a
// run that did not wait would fail, and its function's ErrorsAlarm fire,
// at every wake. It returns nil, or the last error once the budget or ctx
// is spent (the run then fails on it as before). Requests do not wait:
// they answer 503 with Retry-After at once.
func (a *App) WaitForDatabase(ctx context.Context, budget time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for try := 1; ; try++ {
		err := a.Pool.Ping(ctx)
		if err == nil {
			if try > 1 {
				a.Logger.InfoContext(ctx, "database answered", "tries", try)
			}
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		a.Logger.InfoContext(ctx, "database not answering yet (resuming from a pause?); waiting for it", "try", try, "err", err)
		t := time.NewTimer(DatabaseWaitInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
