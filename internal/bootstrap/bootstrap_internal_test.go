package bootstrap

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsdatatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsiam"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestResuming: while the cluster resumes (the Data API answers
// DatabaseResumingException) each statement is tried again, and the role
// is made once it answers; a cluster that stays resuming past
// maxAttempts fails the request, named.
func TestResuming(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustEmptyURL(t)
	rdsiam.Start(t, dbURL) // the role rds_iam, as RDS has it
	u, _ := url.Parse(dbURL)
	ep := s3test.MustStart(t)
	sm := secretsmanager.New(secretsmanager.Options{Region: s3test.Region, BaseEndpoint: aws.String(ep.URL),
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, "")})
	secret := func(name, v string) string {
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name + time.Now().Format("150405.000000")), SecretString: aws.String(v)})
		if err != nil {
			t.Fatal(err)
		}
		return *out.ARN
	}
	var superuser string
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&superuser); err != nil {
		t.Fatal(err)
	}
	master := secret("master", `{"username":"`+superuser+`","password":"x"}`)
	token := secret("token", "resuming-test-admin-token-0123")
	clusterARN := "arn:aws:rds:us-east-1:123456789012:cluster:resuming"
	data := rdsdatatest.Start(t, dbURL, clusterARN, master, sm)
	env := map[string]string{EnvDataEndpoint: data.URL, EnvSecretsEndpoint: ep.URL}
	for _, kv := range ep.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	r := New(func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.wait = time.Millisecond
	role := "resuming_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	ev := cfn.Event{RequestType: cfn.RequestCreate, ResourceProperties: map[string]any{
		"ClusterArn": clusterARN, "MasterSecretArn": master, "DatabaseName": strings.TrimPrefix(u.Path, "/"),
		"IamUser": role, "AdminTokenSecretArn": token,
	}}

	data.Resuming(3)
	if _, out, err := r.Handle(ctx, ev); err != nil || out["AdminTokenSha256"] == nil {
		t.Fatalf("after 3 resuming answers: %v, %v; want the role made", out, err)
	}
	if got := data.Executed(); got != int64(len(Statements(role))) {
		t.Fatalf("statements run: %d, want %d", got, len(Statements(role)))
	}
	var member bool
	if err := conn.QueryRow(ctx, `SELECT pg_has_role($1, 'rds_iam', 'member')`, role).Scan(&member); err != nil || !member {
		t.Fatalf("%s granted rds_iam: %v %v", role, member, err)
	}

	data.Resuming(maxAttempts)
	_, _, err = r.Handle(ctx, ev)
	if err == nil || !strings.Contains(err.Error(), "DatabaseResumingException") {
		t.Fatalf("resuming past %d attempts: got %v, want a failure naming DatabaseResumingException", maxAttempts, err)
	}
	b, _ := json.Marshal(err.Error())
	if strings.Contains(string(b), "resuming-test-admin-token") {
		t.Fatalf("the reason carries the admin token")
	}
}

// TestProperties: a missing or bad property is named; the role defaults
// to DefaultRole.
func TestProperties(t *testing.T) {
	for _, c := range []struct {
		props map[string]any
		want  string
	}{
		{map[string]any{}, "AdminTokenSecretArn"},
		{map[string]any{"AdminTokenSecretArn": "a", "ClusterArn": "c", "DatabaseName": "d"}, "MasterSecretArn"},
		{map[string]any{"AdminTokenSecretArn": "a", "ClusterArn": "c", "MasterSecretArn": "m"}, "DatabaseName"},
		{map[string]any{"AdminTokenSecretArn": "a", "ClusterArn": "c", "MasterSecretArn": "m", "DatabaseName": "d", "IamUser": `x"; DROP ROLE y; --`}, "IamUser"},
	} {
		if _, err := properties(cfn.Event{ResourceProperties: c.props}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error naming %s", c.props, err, c.want)
		}
	}
	p, err := properties(cfn.Event{ResourceProperties: map[string]any{"AdminTokenSecretArn": "a"}})
	if err != nil || p.IamUser != DefaultRole {
		t.Fatalf("got %+v, %v; want the default role", p, err)
	}
}
