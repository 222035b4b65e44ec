// Package bootstrap is the CloudFormation custom resource
// (Custom::Bootstrap) behind the bootstrap function, which runs outside
// the stack's network so that nothing inside it needs Secrets Manager at
// run time:
//
//   - With the stack's own database (ClusterArn set), it creates the
//     database role the in-VPC functions connect as with IAM database
//     authentication (IamUser, default pendinguploads_app), through
//     the RDS Data API with the cluster's master secret: the role LOGIN
//     if missing, granted rds_iam, what makes Aurora PostgreSQL take a
//     token as its password (Aurora User Guide, "Creating a database
//     account using IAM authentication", its PostgreSQL section,
//     https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.IAMDBAuth.DBAccounts.html;
//     "The user name used for IAM authentication must match the case of
//     the user name in the database": a lower-case name, as the
//     template's dbuser ARN spells it),
//     and USAGE and CREATE on the schema public, so that the migrations,
//     run by the in-VPC migrate function as that role, create the tables
//     it then owns and serves, with idle_session_timeout set for the
//     role, so that its idle sessions end on the server (issue 42: a
//     frozen function's connection must not keep the cluster awake).
//     Nothing more: not the master's rights,
//     not CREATEROLE, not other databases. The master user is made a
//     member of the role, so that it (an operator with the master
//     secret, RDS Proxy) can still act on the tables the role owns.
//   - Always, it reads the admin token's secret (AdminTokenSecretArn)
//     and answers Data.AdminTokenSha256, the lower-case hex SHA-256 of
//     the token exactly as app.AdminTokenFromSecret reads it: the
//     functions' ADMIN_TOKEN_SHA256, checked without a call to Secrets
//     Manager.
//
// Create and Update do both, and are idempotent (a role that exists is
// kept, a grant given again changes nothing); Delete does nothing. It
// answers CloudFormation on every request, whatever failed.
package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/rdsdata"
	rdstypes "github.com/aws/aws-sdk-go-v2/service/rdsdata/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/pendinguploads/pendinguploads/internal/app"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/cfnresource"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// PhysicalID stays the same across updates: CloudFormation would read a
// new one as a replacement.
const PhysicalID = "pendinguploads-bootstrap"

// DefaultRole is the database role the in-VPC functions connect as.
const DefaultRole = "pendinguploads_app"

// Properties are the custom resource's properties (besides ServiceToken),
// as the template gives them: the function itself has no environment of
// its own (the template's Globals would hand it the other functions',
// among them ADMIN_TOKEN_SHA256, this resource's own answer).
type Properties struct {
	// ClusterArn is the Aurora cluster the Data API runs on; empty: no
	// database step (the platform's database).
	ClusterArn string
	// MasterSecretArn is the cluster's RDS-managed master secret, which
	// the Data API authenticates with.
	MasterSecretArn string
	// DatabaseName is the database whose schema public the role gets.
	DatabaseName string
	// IamUser is the role created (DefaultRole when empty).
	IamUser string
	// AdminTokenSecretArn holds the admin token.
	AdminTokenSecretArn string
	// AdminTokenVersion is not read: a new value makes CloudFormation
	// send an Update, which hashes the token again (after a rotation).
	AdminTokenVersion string
}

// Endpoint overrides, the SDK's own service-specific variable names, for
// local stand-ins (the tests); unset in AWS.
const (
	EnvDataEndpoint    = "AWS_ENDPOINT_URL_RDS_DATA"
	EnvSecretsEndpoint = "AWS_ENDPOINT_URL_SECRETS_MANAGER"
)

// Bounds of the Data API calls. A cluster that auto-paused answers
// DatabaseResumingException while it resumes ("A request was cancelled
// because the Aurora Serverless v2 DB instance was paused. The Data API
// request automatically resumes the DB instance. Wait a few seconds and
// try again", the Data API reference's errors of ExecuteStatement,
// https://docs.aws.amazon.com/rdsdataservice/latest/APIReference/API_ExecuteStatement.html);
// each statement is tried again, resumeWait apart, within the
// invocation's deadline less answerMargin, at most maxAttempts times.
const (
	maxAttempts  = 10
	resumeWait   = 5 * time.Second
	answerMargin = 3 * time.Second
)

// validRole is what a role name may be: a plain lower-case identifier,
// quoted anyway.
var validRole = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// DataAPI is the one RDS Data API call the resource makes.
type DataAPI interface {
	ExecuteStatement(ctx context.Context, in *rdsdata.ExecuteStatementInput, opts ...func(*rdsdata.Options)) (*rdsdata.ExecuteStatementOutput, error)
}

var _ DataAPI = (*rdsdata.Client)(nil)

// Resource handles the custom resource's requests. Build it with New.
type Resource struct {
	Data    DataAPI
	Secrets app.SecretsAPI

	initErr error
	log     *slog.Logger
	// wait is how long before a resuming database is asked again.
	wait time.Duration
}

// New returns the resource over getenv's AWS configuration (awsenv:
// AWS_REGION and the role's keys, as Lambda sets them). A configuration
// that cannot be read does not stop it: Create and Update then fail with
// it as their reason, and Delete still succeeds.
func New(getenv func(string) string, log *slog.Logger) *Resource {
	if log == nil {
		log = slog.Default()
	}
	r := &Resource{log: log, wait: resumeWait}
	cfg, err := awsenv.Load(getenv, log)
	if err != nil {
		r.initErr = err
		log.Error("init failed", "err", err.Error())
		return r
	}
	r.Secrets = secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) {
		if ep := strings.TrimSpace(getenv(EnvSecretsEndpoint)); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	})
	r.Data = rdsdata.NewFromConfig(cfg, func(o *rdsdata.Options) {
		if ep := strings.TrimSpace(getenv(EnvDataEndpoint)); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	})
	return r
}

// properties reads and checks ev's properties.
func properties(ev cfn.Event) (Properties, error) {
	str := func(k string) string {
		v, _ := ev.ResourceProperties[k].(string)
		return strings.TrimSpace(v)
	}
	p := Properties{
		ClusterArn:          str("ClusterArn"),
		MasterSecretArn:     str("MasterSecretArn"),
		DatabaseName:        str("DatabaseName"),
		IamUser:             str("IamUser"),
		AdminTokenSecretArn: str("AdminTokenSecretArn"),
		AdminTokenVersion:   str("AdminTokenVersion"),
	}
	if p.IamUser == "" {
		p.IamUser = DefaultRole
	}
	var errs []error
	if p.AdminTokenSecretArn == "" {
		errs = append(errs, errors.New("AdminTokenSecretArn: must be set"))
	}
	if p.ClusterArn != "" {
		if p.MasterSecretArn == "" {
			errs = append(errs, errors.New("MasterSecretArn: must be set with ClusterArn"))
		}
		if p.DatabaseName == "" {
			errs = append(errs, errors.New("DatabaseName: must be set with ClusterArn"))
		}
		if !validRole.MatchString(p.IamUser) {
			errs = append(errs, fmt.Errorf("IamUser: want a lower-case identifier, got %q", p.IamUser))
		}
	}
	return p, errors.Join(errs...)
}

// Handle is a cfn.CustomResourceFunction (for cfn.LambdaWrap, which PUTs
// the answer to the request's ResponseURL). Delete always succeeds and
// calls nothing: the role stays with the database it can reach. Create
// and Update create the role (with a cluster) and answer
// Data.AdminTokenSha256; they fail with the setup's error, the Data
// API's or Secrets Manager's as the reason, never with the token.
//
// The answer is not NoEcho: a SHA-256 of a token of at least
// config.MinTokenLength characters (the template generates 48) cannot be
// turned back into the token, and the value is in the functions'
// environment anyway (ADMIN_TOKEN_SHA256), where lambda:GetFunction shows
// it to the same readers a NoEcho would hide it from.
func (r *Resource) Handle(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	ctx, end := reqlog.Begin(ctx, "")
	defer end()
	if ev.RequestType == cfn.RequestDelete {
		r.log.InfoContext(ctx, "stack delete: role and grants left with the database")
		return PhysicalID, nil, nil
	}
	if r.initErr != nil {
		return PhysicalID, nil, cfnresource.Reason("bootstrap cannot start: %v", r.initErr)
	}
	p, err := properties(ev)
	if err != nil {
		return PhysicalID, nil, cfnresource.Reason("bootstrap: %v", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-answerMargin))
		defer cancel()
	}
	if p.ClusterArn != "" {
		if err := r.createRole(ctx, p); err != nil {
			r.log.ErrorContext(ctx, "database role failed", "err", err.Error(), "request_type", ev.RequestType)
			return PhysicalID, nil, cfnresource.Reason("database role %s: %v", p.IamUser, err)
		}
		r.log.InfoContext(ctx, "database role ready", "role", p.IamUser, "request_type", ev.RequestType)
	}
	sum, err := r.adminTokenSHA256(ctx, p.AdminTokenSecretArn)
	if err != nil {
		r.log.ErrorContext(ctx, "admin token failed", "err", err.Error(), "request_type", ev.RequestType)
		return PhysicalID, nil, cfnresource.Reason("AdminTokenSecretArn: %v", err)
	}
	r.log.InfoContext(ctx, "admin token hashed", "request_type", ev.RequestType)
	return PhysicalID, map[string]any{"AdminTokenSha256": sum}, nil
}

// Statements are what createRole runs, one Data API call each (the Data
// API runs one statement per ExecuteStatement), for role in that order.
func Statements(role string) []string {
	id := `"` + role + `"` // validRole: no quote to double
	return []string{
		`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '` + role + `') THEN CREATE ROLE ` + id + ` LOGIN; END IF; END $$`,
		`ALTER ROLE ` + id + ` LOGIN`,
		`GRANT rds_iam TO ` + id,
		`GRANT USAGE, CREATE ON SCHEMA public TO ` + id,
		// A frozen Lambda sandbox's pooled session, whatever its client
		// set, ends on the server after app.DefaultIdleSessionTimeout
		// idle: it neither holds a slot nor keeps a cluster that pauses
		// when idle awake.
		fmt.Sprintf(`ALTER ROLE %s SET idle_session_timeout = %d`, id, app.DefaultIdleSessionTimeout.Milliseconds()),
		// The master user (the Data API's, an operator's, RDS Proxy's)
		// acts on what the role owns as a member of it.
		`GRANT ` + id + ` TO CURRENT_USER`,
	}
}

// createRole runs Statements through the Data API as the master secret's
// user.
func (r *Resource) createRole(ctx context.Context, p Properties) error {
	for _, sql := range Statements(p.IamUser) {
		if err := r.execute(ctx, p, sql); err != nil {
			return err
		}
	}
	return nil
}

// execute runs one statement, again while the database resumes.
func (r *Resource) execute(ctx context.Context, p Properties, sql string) error {
	in := &rdsdata.ExecuteStatementInput{
		ResourceArn: aws.String(p.ClusterArn),
		SecretArn:   aws.String(p.MasterSecretArn),
		Database:    aws.String(p.DatabaseName),
		Sql:         aws.String(sql),
	}
	for i := 1; ; i++ {
		_, err := r.Data.ExecuteStatement(ctx, in)
		var resuming *rdstypes.DatabaseResumingException
		if err == nil || !errors.As(err, &resuming) || i == maxAttempts {
			return err
		}
		r.log.WarnContext(ctx, "database resuming: trying again", "attempt", i)
		t := time.NewTimer(r.wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// adminTokenSHA256 reads the admin token's secret and returns the
// lower-case hex SHA-256 of the token as app.AdminTokenFromSecret reads
// it, refusing one the service would refuse (shorter than
// config.MinTokenLength).
func (r *Resource) adminTokenSHA256(ctx context.Context, arn string) (string, error) {
	out, err := r.Secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", err
	}
	if out.SecretString == nil {
		return "", errors.New("secret has no string value")
	}
	tok, err := app.AdminTokenFromSecret(*out.SecretString)
	if err != nil {
		return "", err
	}
	if len(tok) < config.MinTokenLength {
		return "", fmt.Errorf("token shorter than %d characters", config.MinTokenLength)
	}
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:]), nil
}
