package pendinguploads

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// TestLookupPlansStaySmall: on the platform's schema, the planner's cost
// of the look-up and of a guarded statement stays far below
// jit_above_cost (100000, Postgres's default), where Postgres would
// JIT-compile the statement on every execution (half a second each, seen
// with a walk of the org tree the planner overestimated).
func TestLookupPlansStaySmall(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.MustPlatformURL(t, false))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var jitAbove float64
	if err := pool.QueryRow(ctx, `SELECT current_setting('jit_above_cost')::float8`).Scan(&jitAbove); err != nil {
		t.Fatal(err)
	}
	tokens := &tokens{db: pool, logger: slog.Default, now: time.Now}
	s, err := tokens.readSchema(ctx)
	if err != nil || !s.orgTokens || !s.uuidv5 {
		t.Fatalf("platform schema read as %+v, %v: want org tokens and UUID v5", s, err)
	}
	hash, ws := auth.TokenIdentity("some-token").TokenHash(), uuid.New()
	for name, q := range map[string]string{
		"lookup": s.lookupSQL(),
		"guard":  `SELECT 1 FROM pending_uploads WHERE workspace_id = $2 AND ` + s.mayActSQL("$1", "$2"),
	} {
		var plan []struct {
			Plan struct {
				TotalCost float64 `json:"Total Cost"`
			} `json:"Plan"`
		}
		var raw []byte
		if err := pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+q, hash, ws).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: plan %s: %v", name, raw, err)
		}
		if cost := plan[0].Plan.TotalCost; cost > jitAbove/10 {
			t.Errorf("%s: planner's cost %.0f, want under a tenth of jit_above_cost (%.0f)", name, cost, jitAbove)
		}
	}
}
