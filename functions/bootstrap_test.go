package functions_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsdatatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsiam"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
	"github.com/pendinguploads/pendinguploads/migrations"
)

// runBootstrap starts bootstrap with env, invokes it with
// events/bootstrap.json as a request of requestType with props and returns its answer to
// CloudFormation, and the answer's raw bytes.
func runBootstrap(t testing.TB, requestType cfn.RequestType, props map[string]any, env ...string) (cfn.Response, []byte) {
	t.Helper()
	url, puts := cfnServer(t)
	rt := start(t, "bootstrap", env...)
	var ev map[string]any
	if err := json.Unmarshal(readEvent(t, "bootstrap"), &ev); err != nil {
		t.Fatal(err)
	}
	ev["ResponseURL"], ev["RequestType"] = url, string(requestType)
	props["ServiceToken"] = ev["ServiceToken"]
	ev["ResourceProperties"] = props
	if requestType != cfn.RequestCreate {
		ev["PhysicalResourceId"] = "pendinguploads-bootstrap"
	}
	b, _ := json.Marshal(ev)
	invoke(t, rt, b)
	var put cfnPut
	select {
	case put = <-puts:
	default:
		t.Fatalf("bootstrap answered without a PUT to the ResponseURL; logs:\n%s", rt.Logs())
	}
	var resp cfn.Response
	if err := json.Unmarshal(put.body, &resp); err != nil {
		t.Fatalf("response %s: %v", put.body, err)
	}
	if strings.Contains(rt.Logs(), bootstrapAdminToken) {
		t.Errorf("bootstrap logged the admin token")
	}
	return resp, put.body
}

// bootstrapAdminToken is the admin token the bootstrap test's secret holds.
const bootstrapAdminToken = "bootstrap-test-admin-token-0123456789abcdef"

// TestBootstrapThenIAM is the own-database shape from zero, through the
// binaries: bootstrap (outside the VPC) creates the database role through
// the Data API stand-in (rdsdatatest: the master secret on moto, the
// statements run as a master user that, as RDS's, is no superuser) and
// answers the admin token's SHA-256; it does so again on Update; then
// migrate applies the migrations as that role through the IAM stand-in
// (rdsiam), and upload and list serve as that role, with DB_IAM_USER and
// a token signed from the function's own (fake) credentials: no
// DB_SECRET_ARN, no DATABASE_URL.
func TestBootstrapThenIAM(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.MustEmptyURL(t)
	u, _ := url.Parse(dbURL)
	dbName := strings.TrimPrefix(u.Path, "/")
	proxy := rdsiam.Start(t, dbURL) // creates rds_iam, as RDS has it
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	master, role := "master_"+suffix, "app_"+suffix
	admin := openPool(t, dbURL)
	for _, sql := range []string{
		// RDS's master user: CREATEROLE, the database's owner, rds_iam's
		// admin; not a superuser.
		`CREATE ROLE ` + master + ` LOGIN CREATEROLE NOSUPERUSER`,
		`ALTER DATABASE ` + dbName + ` OWNER TO ` + master,
		`GRANT rds_iam TO ` + master + ` WITH ADMIN OPTION`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	ep := s3test.MustStart(t)
	sm := secretsmanager.New(secretsmanager.Options{Region: s3test.Region, BaseEndpoint: aws.String(ep.URL),
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, "")})
	newSecret := func(name, value string) string {
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name + "-" + suffix), SecretString: aws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		return *out.ARN
	}
	masterSecret := newSecret("master", `{"username":"`+master+`","password":"not-checked-by-trust"}`)
	tokenSecret := newSecret("admin-token", `{"token":"`+bootstrapAdminToken+`"}`)
	clusterARN := "arn:aws:rds:us-east-1:123456789012:cluster:pendinguploads-" + suffix
	data := rdsdatatest.Start(t, dbURL, clusterARN, masterSecret, sm)

	env := append(ep.Env(), "AWS_ENDPOINT_URL_SECRETS_MANAGER="+ep.URL, "AWS_ENDPOINT_URL_RDS_DATA="+data.URL)
	props := map[string]any{"ClusterArn": clusterARN, "MasterSecretArn": masterSecret, "DatabaseName": dbName,
		"IamUser": role, "AdminTokenSecretArn": tokenSecret, "AdminTokenVersion": "1"}
	sum := sha256.Sum256([]byte(bootstrapAdminToken))
	for _, rt := range []cfn.RequestType{cfn.RequestCreate, cfn.RequestUpdate} {
		resp, raw := runBootstrap(t, rt, props, env...)
		if resp.Status != cfn.StatusSuccess {
			t.Fatalf("%s: got %s (%s), want SUCCESS", rt, resp.Status, resp.Reason)
		}
		if got := resp.Data["AdminTokenSha256"]; got != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: AdminTokenSha256 %v, want the token's SHA-256", rt, got)
		}
		if strings.Contains(string(raw), bootstrapAdminToken) {
			t.Errorf("%s: the answer to CloudFormation carries the admin token", rt)
		}
	}
	// Beside the platform (no cluster): the hash alone, no Data API call.
	before := data.Executed()
	resp, _ := runBootstrap(t, cfn.RequestUpdate, map[string]any{"AdminTokenSecretArn": tokenSecret}, env...)
	if resp.Status != cfn.StatusSuccess || resp.Data["AdminTokenSha256"] != hex.EncodeToString(sum[:]) || data.Executed() != before {
		t.Fatalf("without a cluster: %s (%s) %v, %d statements; want the hash alone", resp.Status, resp.Reason, resp.Data, data.Executed()-before)
	}
	// A token the service would refuse, a missing property: FAILED, named.
	short := newSecret("short-token", "too-short")
	for name, p := range map[string]map[string]any{
		"AdminTokenSecretArn": {"AdminTokenSecretArn": short},
		"DatabaseName":        {"AdminTokenSecretArn": tokenSecret, "ClusterArn": clusterARN, "MasterSecretArn": masterSecret},
	} {
		if resp, raw := runBootstrap(t, cfn.RequestCreate, p, env...); resp.Status != cfn.StatusFailed || !strings.Contains(resp.Reason, name) || strings.Contains(string(raw), "too-short") {
			t.Errorf("%s: got %s (%s), want FAILED naming it, without the secret", name, resp.Status, resp.Reason)
		}
	}
	if resp, _ := runBootstrap(t, cfn.RequestDelete, map[string]any{}, env...); resp.Status != cfn.StatusSuccess {
		t.Errorf("Delete: got %s (%s), want SUCCESS", resp.Status, resp.Reason)
	}

	var iam, login, masterIn bool
	if err := admin.QueryRow(ctx, `SELECT pg_has_role(rolname, 'rds_iam', 'member'), rolcanlogin, pg_has_role($2, rolname, 'member') FROM pg_roles WHERE rolname = $1`,
		role, master).Scan(&iam, &login, &masterIn); err != nil || !iam || !login || !masterIn {
		t.Fatalf("role %s: rds_iam %v, login %v, the master a member %v, %v", role, iam, login, masterIn, err)
	}

	var settings []string
	if err := admin.QueryRow(ctx, `SELECT coalesce(setconfig, '{}') FROM pg_db_role_setting WHERE setrole = $1::regrole AND setdatabase = 0`, role).Scan(&settings); err != nil ||
		!slices.Contains(settings, "idle_session_timeout=120000") {
		t.Fatalf("role %s's settings %v (%v), want idle_session_timeout=120000", role, settings, err)
	}

	iamEnv := proxy.Env(role, dbName)
	resp = runMigrate(t, cfn.RequestCreate, iamEnv...)
	if resp.Status != cfn.StatusSuccess {
		t.Fatalf("migrate as %s: %s (%s)", role, resp.Status, resp.Reason)
	}
	var owner string
	if err := admin.QueryRow(ctx, `SELECT tableowner FROM pg_tables WHERE tablename = 'pending_uploads'`).Scan(&owner); err != nil || owner != role {
		t.Fatalf("pending_uploads' owner: %q (%v), want %s", owner, err, role)
	}
	if v, _, err := migrations.Version(ctx, dbURL); err != nil || v != migrations.Latest {
		t.Fatalf("version %d (%v), want %d", v, err, migrations.Latest)
	}

	fnEnv := append(iamEnv, "ADMIN_TOKEN="+adminToken, "DOWNLOAD_LINK_KEY="+linkKey, "ACCEPT_UNKNOWN_WORKSPACES=true")
	var staged struct {
		Files []stagedFile `json:"files"`
	}
	wantJSON(t, invokeHTTP(t, start(t, "upload", fnEnv...), readEvent(t, "upload")), http.StatusOK, &staged)
	var list listBody
	wantJSON(t, invokeHTTP(t, start(t, "list", fnEnv...), readEvent(t, "list")), http.StatusOK, &list)
	if len(staged.Files) == 0 || len(list.Uploads) != len(staged.Files) {
		t.Fatalf("staged %d files, listed %d", len(staged.Files), len(list.Uploads))
	}
	if proxy.Refused() != 0 {
		t.Fatalf("the IAM stand-in refused %d connections", proxy.Refused())
	}
}
