// Package app assembles the service from its configuration: the pool, the
// store (with S3 when a bucket is set), the authenticator and the HTTP
// API. The Lambda functions, the dev server and the tests all build it the
// same way, so what the tests run is what deploys.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pendinguploads/pendinguploads/internal/auth"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
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
	// BeforeConnect gives a new connection on DatabaseURL what the URL
	// does not hold: with DB_IAM_USER, a freshly signed token as its
	// password; nil otherwise. A program that opens its own connections
	// on DatabaseURL (the migrations) passes it on.
	BeforeConnect func(context.Context, *pgx.ConnConfig) error
	Pool          *pgxpool.Pool
	// DB is what the store and the token look-ups query through: the
	// pool (with DB_IAM_USER, each new connection's password a freshly
	// signed token), or with DB_SECRET_ARN the pool that re-reads the
	// password after a rotation; in a pooled query mode (DATABASE_QUERY_MODE=exec)
	// either one with the timeouts set in each transaction (pooledDB).
	// Token administration (internal/admin) uses it too.
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
// name the setting at fault and never carry a secret. It goes in named
// steps: secrets, pool, bucket, store and API; a failure after the pool
// closes it here, and only here.
func New(ctx context.Context, cfg config.Config, opts Options) (*App, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &App{Config: cfg, Logger: log}
	if opts.MetricsOut != nil {
		a.Metrics = metrics.New(opts.MetricsOut, metrics.Namespace)
		if cfg.Metrics != nil {
			a.Metrics.Only = map[string]bool{}
			for _, name := range cfg.Metrics {
				a.Metrics.Only[name] = true
			}
		}
	}
	awsConfig := awsLoader(ctx, opts, log)
	sec, err := resolveSecrets(ctx, cfg, opts.Secrets, awsConfig)
	if err != nil {
		return nil, err
	}
	if err := a.openPool(cfg, opts, sec); err != nil {
		return nil, err
	}
	if cfg.LinkKeysInDatabase {
		// Read at the first link, not now: a function starts while its
		// database cannot answer (paused), and answers links 503 until it
		// can.
		db := a.DB
		if sec.links, err = downloadlink.NewLazy(cfg.DownloadLinkTTL, func(ctx context.Context) (downloadlink.Keys, error) {
			return LinkKeysFromDatabase(ctx, db)
		}); err != nil {
			a.Pool.Close()
			return nil, fmt.Errorf("DOWNLOAD_LINK_TTL: %w", err)
		}
	}
	bucket, err := openBucket(cfg, opts.OpenBucket, awsConfig)
	if err == nil {
		a.Store = pendinguploads.New(a.DB, bucket, StoreSettings(cfg))
		a.Store.Logger = log
		a.Store.Metrics = a.Metrics
		if a.Store.Notifier, err = hints(cfg, awsConfig, log); err != nil {
			err = fmt.Errorf("PUSH_ENDPOINT: %w", err)
		}
	}
	if err == nil {
		a.API, err = a.newAPI(cfg, sec.adminHash, sec.links)
	}
	if err != nil {
		a.Pool.Close()
		return nil, err
	}
	return a, nil
}

// awsLoader returns the AWS configuration of opts (LoadAWS, default
// awsenv.Load from the environment), loaded once, when first needed: a
// process with no secret ARN, no DB_IAM_USER and no bucket never loads
// it. With DB_IAM_USER the first connect may be what needs it, after New:
// safe for concurrent use.
func awsLoader(ctx context.Context, opts Options, log *slog.Logger) func() (aws.Config, error) {
	loadAWS := opts.LoadAWS
	if loadAWS == nil {
		loadAWS = func(context.Context, *slog.Logger) (aws.Config, error) { return awsenv.Load(os.Getenv, log) }
	}
	var (
		mu     sync.Mutex
		awsCfg *aws.Config
	)
	return func() (aws.Config, error) {
		mu.Lock()
		defer mu.Unlock()
		if awsCfg == nil {
			c, err := loadAWS(ctx, log)
			if err != nil {
				return aws.Config{}, err
			}
			awsCfg = &c
		}
		return *awsCfg, nil
	}
}

// secrets are what New resolves before it builds anything.
type secrets struct {
	dbURL     string
	rotated   *dbPassword          // the password of DB_SECRET_ARN, re-read after a rotation; nil without
	iam       *iamToken            // the token of DB_IAM_USER, signed per new connection; nil without
	adminHash *[sha256.Size]byte   // the admin token's SHA-256; nil for none
	links     *downloadlink.Signer // the download links' keys; nil for none
}

// resolveSecrets reads the database URL, the admin token and the download
// links' key from cfg or from Secrets Manager (sm, default a client from
// awsConfig).
func resolveSecrets(ctx context.Context, cfg config.Config, sm SecretsAPI, awsConfig func() (aws.Config, error)) (secrets, error) {
	if sm == nil && (cfg.DBSecretARN != "" || cfg.AdminTokenSecretARN != "" || (cfg.DownloadLinkKey == "" && cfg.DownloadLinkKeySecretARN != "")) {
		awsCfg, err := awsConfig()
		if err != nil {
			return secrets{}, fmt.Errorf("aws config (for Secrets Manager): %w", err)
		}
		sm = secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) {
			if cfg.SecretsEndpoint != "" {
				o.BaseEndpoint = aws.String(cfg.SecretsEndpoint)
			}
		})
	}
	sec := secrets{dbURL: cfg.DatabaseURL}
	var err error
	if sec.adminHash, err = adminTokenHash(ctx, cfg, sm); err != nil {
		return secrets{}, err
	}
	if sec.dbURL == "" && cfg.DBSecretARN != "" {
		s, err := secretString(ctx, sm, cfg.DBSecretARN)
		if err != nil {
			return secrets{}, fmt.Errorf("DB_SECRET_ARN: %w", err)
		}
		if sec.dbURL, err = DatabaseURLFromSecret(s, cfg.DBEndpoint); err != nil {
			return secrets{}, fmt.Errorf("DB_SECRET_ARN: %w", err)
		}
		var v rdsSecret
		_ = json.Unmarshal([]byte(s), &v) // parsed by DatabaseURLFromSecret already
		sec.rotated = newDBPassword(sm, cfg.DBSecretARN, v.Password)
	}
	if cfg.DBIAMUser != "" {
		// No secret: the password is a token the process signs itself,
		// with its credentials loaded when the first connection needs
		// them (none: that connect fails, a 503, not the process).
		sec.dbURL = iamDatabaseURL(cfg)
		sec.iam = newIAMToken(cfg, aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
			awsCfg, err := awsConfig()
			if err != nil {
				return aws.Credentials{}, err
			}
			if awsCfg.Credentials == nil {
				return aws.Credentials{}, errors.New("aws config: no credentials")
			}
			return awsCfg.Credentials.Retrieve(ctx)
		}))
	}
	switch {
	case cfg.DownloadLinkKey != "":
		if sec.links, err = downloadlink.New(cfg.DownloadLinkKey, cfg.DownloadLinkTTL); err != nil {
			return secrets{}, fmt.Errorf("DOWNLOAD_LINK_KEY: %w", err)
		}
	case cfg.DownloadLinkKeySecretARN != "":
		// The secret's current and previous versions, read now and again
		// (downloadlink.NewReloading): a rotation of the secret reaches
		// every instance, and live links outlive it.
		arn := cfg.DownloadLinkKeySecretARN
		sec.links, err = downloadlink.NewReloading(ctx, cfg.DownloadLinkTTL, func(ctx context.Context) (downloadlink.Keys, error) {
			return LinkKeysFromSecret(ctx, sm, arn)
		})
		if err != nil {
			return secrets{}, fmt.Errorf("DOWNLOAD_LINK_KEY_SECRET_ARN: %w", err)
		}
	}
	if sec.dbURL == "" {
		return secrets{}, fmt.Errorf("DATABASE_URL, DB_SECRET_ARN or DB_IAM_USER: one must be set")
	}
	return sec, nil
}

// adminTokenHash is the SHA-256 of the admin token of cfg's one source:
// ADMIN_TOKEN, the secret ADMIN_TOKEN_SECRET_ARN names (read from sm now)
// or ADMIN_TOKEN_SHA256 (config.Load checked its form); nil for none.
func adminTokenHash(ctx context.Context, cfg config.Config, sm SecretsAPI) (*[sha256.Size]byte, error) {
	token := cfg.AdminToken
	switch {
	case cfg.AdminTokenSHA256 != "":
		var sum [sha256.Size]byte
		if n, err := hex.Decode(sum[:], []byte(cfg.AdminTokenSHA256)); err != nil || n != len(sum) {
			return nil, errors.New("ADMIN_TOKEN_SHA256: not a SHA-256 in hex")
		}
		return &sum, nil
	case cfg.AdminTokenSecretARN != "":
		s, err := secretString(ctx, sm, cfg.AdminTokenSecretARN)
		if err != nil {
			return nil, fmt.Errorf("ADMIN_TOKEN_SECRET_ARN: %w", err)
		}
		if token, err = AdminTokenFromSecret(s); err != nil {
			return nil, fmt.Errorf("ADMIN_TOKEN_SECRET_ARN: %w", err)
		}
		if len(token) < config.MinTokenLength {
			return nil, fmt.Errorf("ADMIN_TOKEN_SECRET_ARN: token shorter than %d characters", config.MinTokenLength)
		}
	}
	if token == "" {
		return nil, nil
	}
	sum := sha256.Sum256([]byte(token))
	return &sum, nil
}

// openPool builds the pool (no connection yet) and sets a.Pool,
// a.DatabaseURL and a.DB, what the store and token administration query
// through: the pool, or with a rotated secret a pool that re-reads the
// password when it is refused, behind a transaction pooler carrying the
// session's settings into each transaction.
func (a *App) openPool(cfg config.Config, opts Options, sec secrets) error {
	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	var beforeConnect func(context.Context, *pgx.ConnConfig) error
	switch {
	case sec.rotated != nil:
		beforeConnect = sec.rotated.beforeConnect
	case sec.iam != nil:
		beforeConnect = sec.iam.beforeConnect
	}
	pool, perTx, err := newPool(sec.dbURL, cfg.DatabaseQueryMode, maxConns, beforeConnect, opts.Tracer)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	a.Pool, a.DatabaseURL = pool, sec.dbURL
	if sec.iam != nil {
		a.BeforeConnect = sec.iam.beforeConnect
	}
	var db pendinguploads.DB = pool
	if sec.rotated != nil {
		db = &RotatingPool{pool: pool, password: sec.rotated, connectTimeout: pool.Config().ConnConfig.ConnectTimeout}
	}
	if perTx != nil {
		db = &pooledDB{db: db, settings: perTx}
	}
	a.DB = db
	return nil
}

// openBucket opens CONTENT_BUCKET with open, or returns nil (no bucket)
// when it is unset or open is nil.
func openBucket(cfg config.Config, open BucketOpener, awsConfig func() (aws.Config, error)) (pendinguploads.Bucket, error) {
	if cfg.ContentBucket == "" || open == nil {
		return nil, nil
	}
	awsCfg, err := awsConfig()
	if err != nil {
		return nil, fmt.Errorf("CONTENT_BUCKET: %w", err)
	}
	bucket, err := open(cfg, awsCfg)
	if err != nil {
		return nil, fmt.Errorf("CONTENT_BUCKET: %w", err)
	}
	return bucket, nil
}

// newAPI returns the HTTP API over a.Store, identifying callers with
// the admin token's SHA-256 adminHash and, with CP_UPSTREAM_URL, the
// control plane's sessions, and signing download links with links (none
// without); nil without an admin token (the sweep and migrate functions
// serve no API).
func (a *App) newAPI(cfg config.Config, adminHash *[sha256.Size]byte, links *downloadlink.Signer) (*httpapi.API, error) {
	if adminHash == nil {
		return nil, nil
	}
	authn := auth.NewAuthenticatorForSHA256(*adminHash)
	var err error
	if cfg.CPUpstreamURL != "" {
		if authn.Sessions, err = auth.NewSessions(cfg.CPUpstreamURL, cfg.OrgSlug); err != nil {
			return nil, fmt.Errorf("CP_UPSTREAM_URL: %w", err)
		}
		authn.Origins = cfg.SessionOrigins()
	}
	api := httpapi.New(a.Store, authn)
	api.MaxRequestBytes = cfg.MaxRequestBytes
	api.MaxFileBytes = cfg.MaxFileBytes
	api.RequestTimeout = cfg.RequestTimeout
	api.Logger = a.Logger
	api.Metrics = a.Metrics
	api.CORSAllowedOrigins = cfg.CORSAllowedOrigins
	api.Limits = httpapi.LimitsOf(cfg)
	api.Links = links
	return api, nil
}

// StoreSettings are the store's settings in cfg.
func StoreSettings(cfg config.Config) pendinguploads.Settings {
	return pendinguploads.Settings{
		MaxFileBytes:            cfg.MaxFileBytes,
		InlineMaxBytes:          cfg.InlineMaxBytes,
		TTL:                     cfg.UploadTTL,
		SweepBatch:              config.SweepBatch,
		MultipartThreshold:      cfg.MultipartThresholdBytes,
		PartBytes:               cfg.PartBytes,
		MaxPendingBytes:         cfg.WorkspaceMaxPendingBytes,
		MaxPendingFiles:         cfg.WorkspaceMaxPendingFiles,
		RefuseUnknownWorkspaces: !cfg.AcceptUnknownWorkspaces,
		RequestTimeout:          cfg.RequestTimeout,
		Scanned:                 cfg.Scan.On(),

		AcceptUnanchoredOrgTokens: cfg.AcceptUnanchoredOrgTokens,
		ActivityRetention:         cfg.ActivityRetention,
	}
}

// Close releases the pool.
func (a *App) Close() {
	if a.Pool != nil {
		a.Pool.Close()
	}
}

// CloseIdle closes the pool's idle connections before it returns and
// leaves the pool open: the next use connects anew. A scheduled function
// calls it at the end of each run, so that its process, which Lambda
// freezes until the next run, holds no session: a database that pauses
// when idle (Aurora Serverless v2 at 0 ACU) counts the time without a
// connection from the last one closed, and the server would end a frozen
// process's session only after idle_session_timeout
// (DefaultIdleSessionTimeout). pgxpool's Reset closes connections in
// goroutines, which a process frozen as its handler returns need not
// run; these are closed here, each its Terminate sent within ctx (the
// socket is closed whatever ctx says). Safe for concurrent use; a
// connection in use is left alone.
func (a *App) CloseIdle(ctx context.Context) {
	if a.Pool == nil {
		return
	}
	for _, c := range a.Pool.AcquireAllIdle(ctx) {
		_ = c.Hijack().Close(ctx)
	}
}
