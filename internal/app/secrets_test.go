package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestDatabaseURLFromSecret: the full RDS shape works alone; an
// RDS-managed master secret (username and password only) works with the
// endpoint the template passes; the endpoint's fields win over the
// secret's (a proxy in front); a secret and an endpoint without a host
// say where to put one, and no error carries the password.
func TestDatabaseURLFromSecret(t *testing.T) {
	const (
		full    = `{"engine":"postgres","host":"db.internal","port":5433,"username":"app","password":"pw secret","dbname":"uploads"}`
		managed = `{"username":"app","password":"pw secret"}`
	)
	for _, c := range []struct {
		name, secret string
		ep           config.DBEndpoint
		want         string
	}{
		{"FullShape", full, config.DBEndpoint{}, "postgres://app:pw%20secret@db.internal:5433/uploads?sslmode=require"},
		{"PortAsString", `{"host":"db.internal","port":"5433","username":"app","password":"pw"}`, config.DBEndpoint{},
			"postgres://app:pw@db.internal:5433/postgres?sslmode=require"},
		{"ManagedWithEndpoint", managed, config.DBEndpoint{Host: "db.abc.us-east-1.rds.amazonaws.com", Port: 5432, Name: "pendinguploads"},
			"postgres://app:pw%20secret@db.abc.us-east-1.rds.amazonaws.com:5432/pendinguploads?sslmode=require"},
		{"ManagedWithHostOnly", managed, config.DBEndpoint{Host: "db.internal"}, "postgres://app:pw%20secret@db.internal:5432/postgres?sslmode=require"},
		{"EndpointWins", full, config.DBEndpoint{Host: "proxy.internal", Port: 6432, Name: "other"},
			"postgres://app:pw%20secret@proxy.internal:6432/other?sslmode=require"},
		{"EndpointHostOnlyKeepsTheRest", full, config.DBEndpoint{Host: "proxy.internal"},
			"postgres://app:pw%20secret@proxy.internal:5433/uploads?sslmode=require"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := app.DatabaseURLFromSecret(c.secret, c.ep)
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	for _, c := range []struct {
		name, secret, wantErr string
	}{
		{"ManagedWithoutHost", managed, "DB_HOST"},
		{"NoUsername", `{"host":"db.internal","password":"pw secret"}`, "username"},
		{"BadPort", `{"host":"db.internal","port":"x","username":"app","password":"pw secret"}`, "port"},
		{"NotJSON", `pw secret`, "RDS shape"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := app.DatabaseURLFromSecret(c.secret, config.DBEndpoint{})
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "pw secret") {
				t.Fatalf("got %v; want an error naming %q, without the password", err, c.wantErr)
			}
		})
	}
}

// TestManagedSecret: the service runs on a secret of the shape RDS
// manages for a master user (username and password, nothing else, on
// moto's Secrets Manager) with DB_HOST, DB_PORT and DB_NAME from the
// environment, as the template's own database passes them, over TLS with
// a password the server checks.
func TestManagedSecret(t *testing.T) {
	cluster := pgtest.Cluster(t)
	if cluster == nil {
		t.Skip("needs the throwaway cluster (its pg_hba.conf and TLS are changed)")
	}
	ctx := context.Background()
	dbURL := pgtest.MustURL(t)
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	role := "managed_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	for _, sql := range []string{`CREATE ROLE ` + role + ` LOGIN PASSWORD 'managed-password'`, `GRANT ALL ON ALL TABLES IN SCHEMA public TO ` + role} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	requirePasswordAndTLS(t, admin, role)

	ep := s3test.MustStart(t)
	for _, kv := range ep.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sm := secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(ep.URL) })
	b, _ := json.Marshal(map[string]string{"username": role, "password": "managed-password"})
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("rds!db-" + role), SecretString: aws.String(string(b))})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dbURL)
	env := map[string]string{
		"DB_SECRET_ARN": *created.ARN, "SECRETS_MANAGER_ENDPOINT": ep.URL, "ADMIN_TOKEN": "managed-secret-admin-token",
		"DB_HOST": "127.0.0.1", "DB_PORT": strconv.Itoa(cluster.Port()), "DB_NAME": strings.TrimPrefix(u.Path, "/"),
	}
	load := func(env map[string]string) (*app.App, error) {
		cfg, err := config.Load(func(k string) string { return env[k] }, config.NeedDatabase|config.NeedAdminToken)
		if err != nil {
			t.Fatal(err)
		}
		return app.New(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Secrets: sm})
	}
	a, err := load(env)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var user string
	if err := a.Pool.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != role {
		t.Fatalf("connected as %q, %v; want %q", user, err, role)
	}

	delete(env, "DB_HOST")
	if _, err := load(env); err == nil || !strings.Contains(err.Error(), "DB_SECRET_ARN") || !strings.Contains(err.Error(), "DB_HOST") {
		t.Fatalf("without DB_HOST: got %v, want an error naming DB_SECRET_ARN and DB_HOST", err)
	}
}
