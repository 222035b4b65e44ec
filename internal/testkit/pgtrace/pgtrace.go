// Package pgtrace counts the round trips a pgx pool makes to Postgres: a
// statement sent alone (Query, QueryRow, Exec, and a transaction's BEGIN
// and COMMIT), a batch (one round trip, however many statements), and a
// statement prepared on its own (not one pgx had prepared already). Set a *RoundTrips as the pool's tracer
// (apptest.Options.CountRoundTrips does).
package pgtrace

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips counts round trips. It is safe for concurrent use.
type RoundTrips struct{ n atomic.Int64 }

var (
	_ pgx.QueryTracer   = (*RoundTrips)(nil)
	_ pgx.BatchTracer   = (*RoundTrips)(nil)
	_ pgx.PrepareTracer = (*RoundTrips)(nil)
)

// Count is the number counted since the last Reset.
func (r *RoundTrips) Count() int64 { return r.n.Load() }

// Reset starts the count again at zero.
func (r *RoundTrips) Reset() { r.n.Store(0) }

func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (r *RoundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

// TracePrepareEnd counts a prepare that went to the server: pgx traces
// one answered from its cache of prepared statements too.
func (r *RoundTrips) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		r.n.Add(1)
	}
}
