// Package bootstrap is the CloudFormation custom resource
// (Custom::Bootstrap) behind the bootstrap function, which runs outside
// the stack's network so that nothing inside it needs Secrets Manager at
// run time:
//
//   - With the stack's own database (DB_CLUSTER_ARN set), it creates the
//     database role the in-VPC functions connect as with IAM database
//     authentication (DB_IAM_USER, default pendinguploads_app), through
//     the RDS Data API with the cluster's master secret: the role LOGIN
//     if missing, granted rds_iam ("To use IAM authentication with
//     PostgreSQL, connect to the DB instance, create database users, and
//     then grant them the rds_iam role",
//     https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.IAMDBAuth.DBAccounts.html),
//     and USAGE and CREATE on the schema public, so that the migrations,
//     run by the in-VPC migrate function as that role, create the tables
//     it then owns and serves. Nothing more: not the master's rights,
//     not CREATEROLE, not other databases.
//   - Always, it reads the admin token's secret (ADMIN_TOKEN_SECRET_ARN)
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

// Environment variables the resource reads, besides awsenv's.
const (
	// EnvClusterARN (DB_CLUSTER_ARN) is the Aurora cluster the Data API
	// runs on; unset: no database step (the platform's database).
	EnvClusterARN = "DB_CLUSTER_ARN"
	// EnvMasterSecretARN (DB_MASTER_SECRET_ARN) is the cluster's
	// RDS-managed master secret, which the Data API authenticates with.
	EnvMasterSecretARN = "DB_MASTER_SECRET_ARN"
	// EnvDatabase (DB_NAME) is the database the role is given the schema
	// public of.
	EnvDatabase = "DB_NAME"
	// EnvRole (DB_IAM_USER) is the role created (DefaultRole when unset).
	EnvRole = "DB_IAM_USER"
	// EnvAdminTokenSecretARN (ADMIN_TOKEN_SECRET_ARN) holds the admin
	// token.
	EnvAdminTokenSecretARN = "ADMIN_TOKEN_SECRET_ARN"
	// EnvDataEndpoint and EnvSecretsEndpoint override the services' URLs
	// (the SDK's own service-specific variable names) for local
	// stand-ins; unset in AWS.
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

	clusterARN, masterSecretARN, database, role string
	adminTokenSecretARN                         string

	initErr error
	log     *slog.Logger
	// wait is how long before a resuming database is asked again.
	wait time.Duration
}

// New returns the resource over getenv's settings and AWS configuration
// (awsenv). A setting that cannot be read does not stop it: Create and
// Update then fail with it as their reason, and Delete still succeeds.
func New(getenv func(string) string, log *slog.Logger) *Resource {
	if log == nil {
		log = slog.Default()
	}
	r := &Resource{log: log, wait: resumeWait,
		clusterARN:          strings.TrimSpace(getenv(EnvClusterARN)),
		masterSecretARN:     strings.TrimSpace(getenv(EnvMasterSecretARN)),
		database:            strings.TrimSpace(getenv(EnvDatabase)),
		role:                strings.TrimSpace(getenv(EnvRole)),
		adminTokenSecretARN: strings.TrimSpace(getenv(EnvAdminTokenSecretARN)),
	}
	if r.role == "" {
		r.role = DefaultRole
	}
	var errs []error
	if r.adminTokenSecretARN == "" {
		errs = append(errs, fmt.Errorf("%s: must be set", EnvAdminTokenSecretARN))
	}
	if r.clusterARN != "" {
		if r.masterSecretARN == "" {
			errs = append(errs, fmt.Errorf("%s: must be set with %s", EnvMasterSecretARN, EnvClusterARN))
		}
		if r.database == "" {
			errs = append(errs, fmt.Errorf("%s: must be set with %s", EnvDatabase, EnvClusterARN))
		}
		if !validRole.MatchString(r.role) {
			errs = append(errs, fmt.Errorf("%s: want a lower-case identifier, got %q", EnvRole, r.role))
		}
	}
	cfg, err := awsenv.Load(getenv, log)
	errs = append(errs, err)
	if r.initErr = errors.Join(errs...); r.initErr != nil {
		log.Error("init failed", "err", r.initErr.Error())
		return r
	}
	r.Secrets = secretsmanager.NewFromConfig(cfg, func(o *secretsmanager.Options) {
		if ep := strings.TrimSpace(getenv(EnvSecretsEndpoint)); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	})
	if r.clusterARN != "" {
		r.Data = rdsdata.NewFromConfig(cfg, func(o *rdsdata.Options) {
			if ep := strings.TrimSpace(getenv(EnvDataEndpoint)); ep != "" {
				o.BaseEndpoint = aws.String(ep)
			}
		})
	}
	return r
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
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-answerMargin))
		defer cancel()
	}
	if r.clusterARN != "" {
		if err := r.createRole(ctx); err != nil {
			r.log.ErrorContext(ctx, "database role failed", "err", err.Error(), "request_type", ev.RequestType)
			return PhysicalID, nil, cfnresource.Reason("database role %s: %v", r.role, err)
		}
		r.log.InfoContext(ctx, "database role ready", "role", r.role, "request_type", ev.RequestType)
	}
	sum, err := r.adminTokenSHA256(ctx)
	if err != nil {
		r.log.ErrorContext(ctx, "admin token failed", "err", err.Error(), "request_type", ev.RequestType)
		return PhysicalID, nil, cfnresource.Reason("%s: %v", EnvAdminTokenSecretARN, err)
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
	}
}

// createRole runs Statements through the Data API as the master secret's
// user.
func (r *Resource) createRole(ctx context.Context) error {
	for _, sql := range Statements(r.role) {
		if err := r.execute(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// execute runs one statement, again while the database resumes.
func (r *Resource) execute(ctx context.Context, sql string) error {
	in := &rdsdata.ExecuteStatementInput{
		ResourceArn: aws.String(r.clusterARN),
		SecretArn:   aws.String(r.masterSecretARN),
		Database:    aws.String(r.database),
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
func (r *Resource) adminTokenSHA256(ctx context.Context) (string, error) {
	out, err := r.Secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(r.adminTokenSecretARN)})
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
