package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"

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
