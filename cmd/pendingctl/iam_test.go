package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsiam"
)

// TestDatabaseByIAM: pendingctl's database commands connect as
// operating.md says an operator does to the stack's own database, with
// DB_IAM_USER, DB_HOST and DB_NAME and the operator's credentials (a
// token signed in the process), here through RDS's side of IAM
// authentication (internal/testkit/rdsiam): no DATABASE_URL, no secret.
func TestDatabaseByIAM(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := rdsiam.Start(t, dbURL) // creates rds_iam, as RDS has it
	user, name := u.User.Username(), strings.TrimPrefix(u.Path, "/")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, `GRANT rds_iam TO `+user); err != nil {
		t.Fatal(err)
	}
	// The AWS SDK reads the credentials and region from the process's
	// environment, as the operator's shell gives them (and pendingctl's
	// settings from it too: the test's map).
	env := map[string]string{}
	for _, kv := range proxy.Env(user, name) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		if strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, v)
		}
	}
	r := cli(t, env, "migrate", "version")
	expect(t, r, 0, "migrate version")
	if proxy.Refused() != 0 {
		t.Errorf("the IAM stand-in refused %d connections", proxy.Refused())
	}
}
