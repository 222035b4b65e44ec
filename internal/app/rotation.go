package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/semaphore"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// MaxPasswordRereads bounds how often one connect re-reads the database
// secret after the server refused its password.
const MaxPasswordRereads = 2

// dbPassword is the database password of an RDS-managed secret, cached
// for every new connection and re-read when the server refuses it (the
// secret was rotated). Rotation puts the new password at AWSPENDING,
// changes the role, then promotes it to AWSCURRENT: between the last two
// steps only AWSPENDING works, so a refused password is looked for at
// AWSCURRENT, then at AWSPENDING.
type dbPassword struct {
	sm  SecretsAPI
	arn string

	// rereading is held while the secret is re-read: a semaphore of one,
	// so that a connect waiting for another's re-read gives up when its
	// own context ends (a sync.Mutex would hold it past its deadline).
	rereading *semaphore.Weighted
	password  atomic.Pointer[string]
}

// newDBPassword returns the password of secret arn on sm, read as pw.
func newDBPassword(sm SecretsAPI, arn, pw string) *dbPassword {
	p := &dbPassword{sm: sm, arn: arn, rereading: semaphore.NewWeighted(1)}
	p.password.Store(&pw)
	return p
}

func (p *dbPassword) current() string { return *p.password.Load() }

// refresh re-reads the secret after refused was refused. It reports
// whether it found another password (AWSCURRENT, else AWSPENDING).
// Another connect may have refreshed it already: then it is kept. It
// waits for another connect's re-read at most until ctx ends, and then
// returns ctx's error.
func (p *dbPassword) refresh(ctx context.Context, refused string) (bool, error) {
	if err := p.rereading.Acquire(ctx, 1); err != nil {
		return false, err
	}
	defer p.rereading.Release(1)
	if p.current() != refused {
		return true, nil
	}
	var errs []error
	for _, stage := range []string{"AWSCURRENT", "AWSPENDING"} {
		s, err := secretStage(ctx, p.sm, p.arn, stage)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", stage, err))
			continue
		}
		var v rdsSecret
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			errs = append(errs, fmt.Errorf("%s: not JSON of the RDS shape", stage))
			continue
		}
		if v.Password != "" && v.Password != refused {
			p.password.Store(&v.Password)
			return true, nil
		}
	}
	return false, errors.Join(errs...)
}

// beforeConnect gives each new connection the cached password.
func (p *dbPassword) beforeConnect(_ context.Context, cc *pgx.ConnConfig) error {
	if pw := p.current(); pw != "" {
		cc.Password = pw
	}
	return nil
}

// passwordRefused reports whether err is the server refusing a
// connection's password (SQLSTATE 28P01): nothing was sent yet, so the
// call may be made again with another password.
func passwordRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "28P01"
}

// RotatingPool is a pool whose connections take the password from a
// rotated secret. Its methods first make sure a connection can be had: a
// refused password re-reads the secret and tries again, at most
// MaxPasswordRereads times, within the connect timeout. They are exactly
// the methods the store and token administration use (pendinguploads.DB,
// of which admin.DB is a part): the pool is a named field, not embedded,
// so a method added to that interface fails to compile here instead of reaching the pool
// without the re-read.
type RotatingPool struct {
	pool           *pgxpool.Pool
	password       *dbPassword
	connectTimeout time.Duration
}

var _ pendinguploads.DB = (*RotatingPool)(nil)

// ready acquires (and releases) a connection, re-reading the password
// when the server refuses it.
func (p *RotatingPool) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.connectTimeout)
	defer cancel()
	for rereads := 0; ; rereads++ {
		refused := p.password.current()
		c, err := p.pool.Acquire(ctx)
		if err == nil {
			c.Release()
			return nil
		}
		if !passwordRefused(err) || rereads == MaxPasswordRereads {
			return err
		}
		if ok, rerr := p.password.refresh(ctx, refused); !ok {
			return fmt.Errorf("%w (re-reading the secret: %w)", err, rerr)
		}
	}
}

// Exec is pgxpool.Pool's, after ready.
func (p *RotatingPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := p.ready(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return p.pool.Exec(ctx, sql, args...)
}

// Query is pgxpool.Pool's, after ready.
func (p *RotatingPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p.pool.Query(ctx, sql, args...)
}

// QueryRow is pgxpool.Pool's, after ready.
func (p *RotatingPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := p.ready(ctx); err != nil {
		return errRow{err}
	}
	return p.pool.QueryRow(ctx, sql, args...)
}

// SendBatch is pgxpool.Pool's, after ready.
func (p *RotatingPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := p.ready(ctx); err != nil {
		return errBatch{err}
	}
	return p.pool.SendBatch(ctx, b)
}

// BeginTx is pgxpool.Pool's, after ready.
func (p *RotatingPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p.pool.BeginTx(ctx, opts)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
