package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// A transaction pooler (PgBouncer in transaction mode, RDS Proxy) hands
// each transaction to whichever server connection is free, so nothing a
// session remembers follows the service from one transaction to the
// next: not a prepared statement (hence exec mode), not a setting sent
// at connect (PgBouncer 1.18 refuses statement_timeout as a startup
// parameter; told to ignore it, it drops it). pooledDB carries the
// session's timeouts inside every transaction instead, in the same round
// trip.

// txSettings are the settings pooledDB gives every transaction: one
// statement of set_config(name, value, true), SET LOCAL's function form.
type txSettings struct {
	names, values []string
	sql           string
	args          []any
}

// add adds the setting name = value.
func (s *txSettings) add(name, value string) {
	s.names = append(s.names, name)
	s.values = append(s.values, value)
	calls := make([]string, len(s.names))
	s.args = s.args[:0]
	for i, n := range s.names {
		calls[i] = fmt.Sprintf("set_config('%s', $%d, true)", n, i+1)
		s.args = append(s.args, s.values[i])
	}
	s.sql = "SELECT " + strings.Join(calls, ", ")
}

// queued is the settings' statement, for the head of a batch.
func (s *txSettings) queued() *pgx.QueuedQuery {
	return &pgx.QueuedQuery{SQL: s.sql, Arguments: s.args}
}

// pooledDB is the service's database behind a transaction pooler: every
// call goes as one batch, the settings' statement first. Statements of a
// batch up to its Sync are one transaction on one server connection, the
// settings last to its end, and Postgres starts each statement's timeout
// anew, so each statement after them runs under statement_timeout. A
// batch that begins its own transaction (pgx.Batch.BeginTx) is not
// supported; BeginTx is. It is safe for concurrent use.
type pooledDB struct {
	db       pendinguploads.DB
	settings *txSettings
}

var _ pendinguploads.DB = (*pooledDB)(nil)

// send sends queries after the settings, and reads the settings' result.
func (p *pooledDB) send(ctx context.Context, queries ...*pgx.QueuedQuery) pgx.BatchResults {
	b := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery{p.settings.queued()}, queries...)}
	br := p.db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errBatch{err}
	}
	return br
}

// SendBatch sends b after the settings, in one round trip.
func (p *pooledDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return p.send(ctx, b.QueuedQueries...)
}

// Exec runs sql after the settings, in one round trip.
func (p *pooledDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br := p.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs sql after the settings, in one round trip.
func (p *pooledDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br := p.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	return batchRow{row: br.QueryRow(), br: br}
}

// Query runs sql after the settings, in one round trip. The connection
// goes back to the pool when the rows are closed or read to their end.
func (p *pooledDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br := p.send(ctx, &pgx.QueuedQuery{SQL: sql, Arguments: args})
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// BeginTx begins a transaction and sets the settings in it, in one round
// trip (pgx.Batch.BeginTx).
func (p *pooledDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	b := &pgx.Batch{}
	b.BeginTx(opts)
	b.QueuedQueries = append(b.QueuedQueries, p.settings.queued())
	br := p.db.SendBatch(ctx, b)
	err := br.Close()
	tx := br.Tx()
	if err != nil || tx == nil {
		if tx != nil {
			_ = tx.Rollback(ctx)
		}
		if err == nil {
			err = fmt.Errorf("begin: no transaction")
		}
		return nil, err
	}
	return tx, nil
}

// batchRow is a batch's one row: Scan also closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are a batch's rows: closing them, or reading past the last,
// also closes the batch.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) closeBatch() {
	if !r.closed {
		r.closed = true
		r.Rows.Close()
		r.err = r.br.Close()
	}
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.closeBatch()
	return false
}

func (r *batchRows) Close() { r.closeBatch() }

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}
