package bench

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgbouncertest"
)

// BenchmarkQueryMode prices DATABASE_QUERY_MODE=exec: the poll (the first
// page, 50 of 200 rows, with a workspace token) and an ack, on loopback,
// where the extra work of exec mode (each statement parsed and planned
// at every call, and the timeouts' set_config in the same round trip)
// is all there is to see, called in turn in three services:
// cache_statement straight to Postgres (the default), exec straight to
// Postgres, and exec through PgBouncer in transaction mode (the
// pooler's hop too). It reports each one's median per call (p50-ms) and
// exec's over cache_statement's (x-exec, x-pgbouncer).
func BenchmarkQueryMode(b *testing.B) {
	type mode struct {
		name string
		srv  *apptest.Server
		ws   uuid.UUID
		tok  string
		ack  string
		d    map[string][]time.Duration
	}
	env := func(m string) map[string]string {
		return map[string]string{"DATABASE_QUERY_MODE": m, "WORKSPACE_MAX_PENDING_BYTES": "0", "WORKSPACE_MAX_PENDING_FILES": "0"}
	}
	modes := []*mode{
		{name: "cache_statement", srv: apptest.NewServer(b, apptest.Options{Env: env("cache_statement")})},
		{name: "exec", srv: apptest.NewServer(b, apptest.Options{Env: env("exec")})},
		{name: "exec+pgbouncer", srv: apptest.NewServer(b, apptest.Options{Env: env("exec"), PgBouncer: &pgbouncertest.Options{}})},
	}
	for _, m := range modes {
		m.ws = uuid.New()
		m.tok = m.srv.WorkspaceToken(b, m.ws)
		m.d = map[string][]time.Duration{}
		mustExec(b, m.srv, `
			INSERT INTO pending_uploads (workspace_id, content, size_bytes, sha256, filename, mimetype, created_at, expires_at)
			SELECT $1, '\x78'::bytea, 1, sha256('\x78'::bytea), 'f' || g || '.txt', 'text/plain',
			       now() - interval '1 hour' + g * interval '1 millisecond', now() + interval '24 hours'
			FROM generate_series(1, 200) g`, m.ws)
		var id uuid.UUID
		if err := m.srv.Pool.QueryRow(context.Background(), `SELECT file_id FROM pending_uploads WHERE workspace_id = $1 LIMIT 1`, m.ws).Scan(&id); err != nil {
			b.Fatal(err)
		}
		m.ack = "/workspaces/" + m.ws.String() + "/pending-uploads/" + id.String() + "/ack"
	}
	calls := []struct {
		name string
		do   func(*mode)
	}{
		{"list", func(m *mode) {
			serve(b, m.srv.App.API.Mux(), "GET", "/workspaces/"+m.ws.String()+"/pending-uploads", m.tok, "", nil, 200)
		}},
		{"ack", func(m *mode) { serve(b, m.srv.App.API.Mux(), "POST", m.ack, m.tok, "", nil, 200) }},
	}
	for _, m := range modes { // warm: statements prepared, tokens stamped
		for _, c := range calls {
			c.do(m)
			c.do(m)
		}
	}
	for b.Loop() {
		for _, c := range calls {
			for _, m := range modes {
				t0 := time.Now()
				c.do(m)
				m.d[c.name] = append(m.d[c.name], time.Since(t0))
			}
		}
	}
	for _, c := range calls {
		base := percentile(modes[0].d[c.name], 50)
		for _, m := range modes {
			p := percentile(m.d[c.name], 50)
			b.ReportMetric(ms(p), c.name+"-"+m.name+"-p50-ms")
			if m != modes[0] && base > 0 {
				b.ReportMetric(float64(p)/float64(base), c.name+"-x-"+m.name)
			}
		}
	}
}
