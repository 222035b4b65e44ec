package pendinguploads_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// statementCounter counts the statements a pool sends, by a substring.
type statementCounter struct {
	stmts atomic.Pointer[[]string]
	// trips counts round trips: a statement sent alone, or a batch.
	trips atomic.Int64
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.trips.Add(1)
	c.record(d.SQL)
	return ctx
}

func (c *statementCounter) record(sql string) {
	for {
		old := c.stmts.Load()
		var next []string
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, sql)
		if c.stmts.CompareAndSwap(old, &next) {
			return
		}
	}
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The batch side of the tracer: each statement of a batch counts once.
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips.Add(1)
	return ctx
}
func (c *statementCounter) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.record(d.SQL)
}
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *statementCounter) count(substr string) int {
	n := 0
	if p := c.stmts.Load(); p != nil {
		for _, s := range *p {
			if strings.Contains(s, substr) {
				n++
			}
		}
	}
	return n
}

func (c *statementCounter) total() int {
	if p := c.stmts.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// openTraced returns a store over a fresh database whose every statement
// is counted.
func openTraced(t *testing.T) (*pendinguploads.Store, *pgxpool.Pool, *statementCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.MustURL(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := &statementCounter{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pendinguploads.New(pool, nil, apptest.StoreSettings()), pool, tr
}

func open(t *testing.T) (*pendinguploads.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.MustOpen(t)
	return pendinguploads.New(pool, nil, apptest.StoreSettings()), pool
}

func mustStage(t *testing.T, s *pendinguploads.Store, ws uuid.UUID, name string) pendinguploads.Record {
	t.Helper()
	r, err := stageOne(context.Background(), s, ws, []byte("content of "+name), name, "text/plain")
	if err != nil {
		t.Fatalf("stage %s: %v", name, err)
	}
	return r
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// stageOne stages one file.
func stageOne(ctx context.Context, s *pendinguploads.Store, ws uuid.UUID, content []byte, name, mimetype string) (pendinguploads.Record, error) {
	recs, err := s.Stage(ctx, auth.AdminIdentity(), ws, []pendinguploads.File{{Content: content, Filename: name, Mimetype: mimetype}})
	if err != nil {
		return pendinguploads.Record{}, err
	}
	return recs[0], nil
}
