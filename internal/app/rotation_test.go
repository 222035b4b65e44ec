package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/testkit"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// countingSecrets counts the Secrets Manager reads.
type countingSecrets struct {
	*secretsmanager.Client
	reads atomic.Int64
}

func (c *countingSecrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.reads.Add(1)
	return c.Client.GetSecretValue(ctx, in, opts...)
}

// TestSecretRotation: with DB_SECRET_ARN (an RDS-shaped secret on moto's
// Secrets Manager) and a role whose password really changes (ALTER ROLE
// on the test cluster, which checks passwords for that role), requests
// keep answering through a rotation: while the new password is only at
// AWSPENDING, and after it is promoted to AWSCURRENT. A password no
// version holds fails after a bounded number of reads.
func TestSecretRotation(t *testing.T) {
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
	role := "rot_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	exec := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE ROLE ` + role + ` LOGIN PASSWORD 'first-password'`)
	exec(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ` + role)
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
	sm := &countingSecrets{Client: secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(ep.URL) })}
	u, _ := url.Parse(dbURL)
	secretJSON := func(pw string) *string {
		b, _ := json.Marshal(map[string]any{"engine": "postgres", "host": "127.0.0.1", "port": cluster.Port(),
			"username": role, "password": pw, "dbname": strings.TrimPrefix(u.Path, "/")})
		return aws.String(string(b))
	}
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("db-" + role), SecretString: secretJSON("first-password")})
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := config.Load(func(k string) string {
		return map[string]string{"DB_SECRET_ARN": *created.ARN, "ADMIN_TOKEN": "rotation-test-admin-token",
			"SECRETS_MANAGER_ENDPOINT": ep.URL}[k]
	}, config.NeedDatabase|config.NeedAdminToken)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Secrets: sm})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.API.Mux())
	defer srv.Close()
	list := func() int {
		t.Helper()
		a.Pool.Reset() // every request on a new connection, as after Lambda's idle timeout
		req, _ := http.NewRequest("GET", srv.URL+"/workspaces/"+uuid.NewString()+"/pending-uploads", nil)
		req.Header.Set("Authorization", "Bearer rotation-test-admin-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := list(); got != 200 {
		t.Fatalf("before any rotation: %d", got)
	}

	// A rotation, step by step: AWSPENDING, the role, then AWSCURRENT.
	rotate := func(pw string, promote bool) {
		t.Helper()
		put, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN,
			SecretString: secretJSON(pw), VersionStages: []string{"AWSPENDING"}})
		if err != nil {
			t.Fatal(err)
		}
		exec(`ALTER ROLE ` + role + ` PASSWORD '` + pw + `'`)
		if !promote {
			return
		}
		cur, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: created.ARN})
		if err != nil {
			t.Fatal(err)
		}
		var old string
		for id, stages := range cur.VersionIdsToStages {
			for _, s := range stages {
				if s == "AWSCURRENT" {
					old = id
				}
			}
		}
		if _, err := sm.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{SecretId: created.ARN,
			VersionStage: aws.String("AWSCURRENT"), MoveToVersionId: put.VersionId, RemoveFromVersionId: aws.String(old)}); err != nil {
			t.Fatal(err)
		}
	}
	rotate("second-password", false)
	if got := list(); got != 200 {
		t.Fatalf("new password only at AWSPENDING: %d", got)
	}
	rotate("third-password", true)
	if got := list(); got != 200 {
		t.Fatalf("new password promoted to AWSCURRENT: %d", got)
	}
	if got := list(); got != 200 {
		t.Fatalf("again, from the cache: %d", got)
	}

	// A password no version of the secret holds: refused after at most
	// MaxPasswordRereads re-reads of two stages each, quickly.
	exec(`ALTER ROLE ` + role + ` PASSWORD 'nobody-knows'`)
	before := sm.reads.Load()
	start := time.Now()
	if got := list(); got < 500 {
		t.Fatalf("unknown password: %d, want an error", got)
	}
	if n := sm.reads.Load() - before; n > 2*app.MaxPasswordRereads {
		t.Fatalf("secret reads for one request: %d, want at most %d", n, 2*app.MaxPasswordRereads)
	}
	if d := time.Since(start); d > app.DefaultConnectTimeout+2*time.Second {
		t.Fatalf("refusal took %v", d)
	}
}

// requirePasswordAndTLS makes the test cluster check role's password
// (scram, over TCP) and offer TLS, which DatabaseURLFromSecret requires.
// Other roles keep trust.
func requirePasswordAndTLS(t *testing.T, admin *pgxpool.Pool, role string) {
	t.Helper()
	ctx := context.Background()
	var hba, dataDir string
	if err := admin.QueryRow(ctx, `SELECT current_setting('hba_file'), current_setting('data_directory')`).Scan(&hba, &dataDir); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	rule := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\n", role)
	if err := os.WriteFile(hba, append([]byte(rule), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(hba, old, 0o600) })

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	for name, block := range map[string]*pem.Block{"server.crt": {Type: "CERTIFICATE", Bytes: der}, "server.key": {Type: "EC PRIVATE KEY", Bytes: kder}} {
		p := filepath.Join(dataDir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(p, int(sys.Uid), int(sys.Gid))
	}
	if _, err := admin.Exec(ctx, `ALTER SYSTEM SET ssl = on`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	// The reload is asynchronous: wait until a new session sees it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, admin.Config().ConnConfig.ConnString())
		if err == nil {
			var ssl string
			_ = conn.QueryRow(ctx, `SHOW ssl`).Scan(&ssl)
			conn.Close(ctx)
			if ssl == "on" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssl not on after reload: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
