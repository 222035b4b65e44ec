// Package app assembles the service from its configuration: the pool, the
// store (with S3 when a bucket is set), the authenticator and the HTTP
// API. The Lambda functions, the dev server and the tests all build it the
// same way, so what the tests run is what deploys.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/httpapi"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// App is the assembled service.
type App struct {
	Config config.Config
	// DatabaseURL is the resolved connection URL. It may hold a password:
	// never log it.
	DatabaseURL string
	Pool        *pgxpool.Pool
	// DB is what the store and the token look-ups query through: the
	// pool, or with DB_SECRET_ARN the pool that re-reads the password
	// after a rotation. Token administration (internal/admin) uses it too.
	DB      pendinguploads.DB
	Store   *pendinguploads.Store
	API     *httpapi.API // nil when no admin token is configured (sweep, migrate)
	Logger  *slog.Logger
	Metrics *metrics.Emitter
}

// Options are the process-level pieces New does not read from Config.
type Options struct {
	Logger     *slog.Logger
	MetricsOut io.Writer  // where EMF lines go: stdout in Lambda; nil for none
	MaxConns   int32      // default DefaultMaxConns
	Secrets    SecretsAPI // default: a Secrets Manager client from the AWS config
	// OpenBucket opens CONTENT_BUCKET for the store (s3blobs.OpenBucket).
	// A process that never touches the files' objects (the list and ack
	// functions) leaves it nil, and so does not link an S3 client: its
	// store has no bucket, whatever CONTENT_BUCKET says.
	OpenBucket BucketOpener
	// Tracer sees every statement the pool sends (nil: none): the
	// instrumentation that counts a request's round trips.
	Tracer pgx.QueryTracer
	// LoadAWS loads the AWS configuration, when a secret or the bucket
	// needs it (default: awsenv.Load from the environment, as a function
	// has it; programs people run pass awsprofile.Load).
	LoadAWS func(ctx context.Context, log *slog.Logger) (aws.Config, error)
}

// BucketOpener opens the bucket cfg names, for a store.
type BucketOpener func(cfg config.Config, awsCfg aws.Config) (pendinguploads.Bucket, error)

// New resolves secrets, builds the pool (lazily: no connection yet), the
// store and, when an admin token is configured, the HTTP API. Its errors
// name the setting at fault and never carry a secret.
func New(ctx context.Context, cfg config.Config, opts Options) (*App, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &App{Config: cfg, Logger: log}
	if opts.MetricsOut != nil {
		a.Metrics = metrics.New(opts.MetricsOut, metrics.Namespace)
	}

	loadAWS := opts.LoadAWS
	if loadAWS == nil {
		loadAWS = func(context.Context, *slog.Logger) (aws.Config, error) { return awsenv.Load(os.Getenv, log) }
	}
	var awsCfg *aws.Config // loaded once, when first needed
	awsConfig := func() (aws.Config, error) {
		if awsCfg == nil {
			c, err := loadAWS(ctx, log)
			if err != nil {
				return aws.Config{}, err
			}
			awsCfg = &c
		}
		return *awsCfg, nil
	}
	sm := opts.Secrets
	if sm == nil && (cfg.DBSecretARN != "" || cfg.AdminTokenSecretARN != "") {
		awsCfg, err := awsConfig()
		if err != nil {
			return nil, fmt.Errorf("aws config (for Secrets Manager): %w", err)
		}
		sm = secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) {
			if cfg.SecretsEndpoint != "" {
				o.BaseEndpoint = aws.String(cfg.SecretsEndpoint)
			}
		})
	}
	dbURL := cfg.DatabaseURL
	var rotated *dbPassword // the password of DB_SECRET_ARN, re-read after a rotation
	if dbURL == "" && cfg.DBSecretARN != "" {
		s, err := secretString(ctx, sm, cfg.DBSecretARN)
		if err != nil {
			return nil, fmt.Errorf("DB_SECRET_ARN: %w", err)
		}
		if dbURL, err = DatabaseURLFromSecret(s, cfg.DBEndpoint); err != nil {
			return nil, fmt.Errorf("DB_SECRET_ARN: %w", err)
		}
		var v rdsSecret
		_ = json.Unmarshal([]byte(s), &v) // parsed by DatabaseURLFromSecret already
		rotated = &dbPassword{sm: sm, arn: cfg.DBSecretARN, password: v.Password}
	}
	adminToken := cfg.AdminToken
	if adminToken == "" && cfg.AdminTokenSecretARN != "" {
		s, err := secretString(ctx, sm, cfg.AdminTokenSecretARN)
		if err != nil {
			return nil, fmt.Errorf("ADMIN_TOKEN_SECRET_ARN: %w", err)
		}
		if adminToken, err = AdminTokenFromSecret(s); err != nil {
			return nil, fmt.Errorf("ADMIN_TOKEN_SECRET_ARN: %w", err)
		}
		if len(adminToken) < config.MinTokenLength {
			return nil, fmt.Errorf("ADMIN_TOKEN_SECRET_ARN: token shorter than %d characters", config.MinTokenLength)
		}
	}
	if dbURL == "" {
		return nil, fmt.Errorf("DATABASE_URL or DB_SECRET_ARN: one must be set")
	}

	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	var beforeConnect func(context.Context, *pgx.ConnConfig) error
	if rotated != nil {
		beforeConnect = rotated.beforeConnect
	}
	pool, perTx, err := newPool(dbURL, cfg.DatabaseQueryMode, maxConns, beforeConnect, opts.Tracer)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	a.Pool = pool
	a.DatabaseURL = dbURL
	// What the store and the authenticator query through: with a rotated
	// secret, a pool that re-reads the password when it is refused.
	var db pendinguploads.DB = pool
	if rotated != nil {
		db = &RotatingPool{pool: pool, password: rotated, connectTimeout: pool.Config().ConnConfig.ConnectTimeout}
	}
	if perTx != nil {
		db = &pooledDB{db: db, settings: perTx}
	}
	var bucket pendinguploads.Bucket
	if cfg.ContentBucket != "" && opts.OpenBucket != nil {
		awsCfg, err := awsConfig()
		if err == nil {
			bucket, err = opts.OpenBucket(cfg, awsCfg)
		}
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("CONTENT_BUCKET: %w", err)
		}
	}
	a.DB = db
	a.Store = pendinguploads.New(db, bucket, StoreSettings(cfg))
	a.Store.Logger = log

	if adminToken != "" {
		authn, err := auth.NewAuthenticator(adminToken)
		if err != nil {
			pool.Close()
			return nil, err
		}
		if cfg.CPUpstreamURL != "" {
			if authn.Sessions, err = auth.NewSessions(cfg.CPUpstreamURL, cfg.OrgSlug); err != nil {
				pool.Close()
				return nil, fmt.Errorf("CP_UPSTREAM_URL: %w", err)
			}
			authn.Origins = cfg.SessionOrigins()
		}
		api := httpapi.New(a.Store, authn)
		api.MaxRequestBytes = cfg.MaxRequestBytes
		api.Logger = log
		api.Metrics = a.Metrics
		api.CORSAllowedOrigins = cfg.CORSAllowedOrigins
		api.Limits = httpapi.LimitsOf(cfg)
		a.API = api
	}
	return a, nil
}

// StoreSettings are the store's settings in cfg.
func StoreSettings(cfg config.Config) pendinguploads.Settings {
	return pendinguploads.Settings{
		MaxFileBytes:       cfg.MaxFileBytes,
		InlineMaxBytes:     cfg.InlineMaxBytes,
		TTL:                cfg.UploadTTL,
		SweepBatch:         config.SweepBatch,
		MultipartThreshold: cfg.MultipartThresholdBytes,
		PartBytes:          cfg.PartBytes,
		MaxPendingBytes:    cfg.WorkspaceMaxPendingBytes,
		MaxPendingFiles:    cfg.WorkspaceMaxPendingFiles,
	}
}

// Close releases the pool.
func (a *App) Close() {
	if a.Pool != nil {
		a.Pool.Close()
	}
}
