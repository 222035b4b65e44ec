// Package config reads the service's settings from the environment, once,
// at process start. A bad value is an error that names the variable;
// nothing is guessed.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pendinguploads/pendinguploads/internal/limits"
	"github.com/pendinguploads/pendinguploads/internal/metrics"
)

// Config is every setting of the service: the environment variables of
// the Configuration table of docs/operating.md.
type Config struct {
	DatabaseURL string // DATABASE_URL
	DBSecretARN string // DB_SECRET_ARN: Secrets Manager, RDS JSON shape
	// DBIAMUser (DB_IAM_USER) is the database role the service connects
	// as with RDS IAM database authentication: its password is a token
	// signed with the function's own credentials, at DBEndpoint (DB_HOST
	// required; DB_PORT default 5432, DB_NAME default postgres), in
	// AWSRegion. Exclusive with DATABASE_URL and DB_SECRET_ARN.
	DBIAMUser string
	// AWSRegion (AWS_REGION, which Lambda sets) is the region an IAM
	// database authentication token is signed for.
	AWSRegion string
	// DBEndpoint (DB_HOST, DB_PORT, DB_NAME) says where the database of
	// DB_SECRET_ARN or DB_IAM_USER is, over the secret's own fields.
	DBEndpoint DBEndpoint
	// DatabaseQueryMode (DATABASE_QUERY_MODE) is how the pool sends
	// statements: QueryModeCacheStatement (the default) or QueryModeExec,
	// for a transaction pooler (RDS Proxy, PgBouncer in transaction mode).
	DatabaseQueryMode QueryMode

	// The admin token comes from one of three sources, never two:
	// AdminToken (ADMIN_TOKEN), the secret AdminTokenSecretARN
	// (ADMIN_TOKEN_SECRET_ARN) names, or AdminTokenSHA256
	// (ADMIN_TOKEN_SHA256): the token's SHA-256 in lower-case hex, which
	// the admin check compares the bearer's hash with, so that no secret
	// is read at run time (a hash of a token is not a secret: a token of
	// at least MinTokenLength random characters cannot be found from it).
	AdminToken          string
	AdminTokenSecretARN string
	AdminTokenSHA256    string

	// DownloadLinkKey (DOWNLOAD_LINK_KEY) or DownloadLinkKeySecretARN
	// (DOWNLOAD_LINK_KEY_SECRET_ARN) is the key download links are signed
	// with (internal/downloadlink); DownloadLinkTTL (DOWNLOAD_LINK_TTL) how
	// long one lasts.
	DownloadLinkKey          string
	DownloadLinkKeySecretARN string
	DownloadLinkTTL          time.Duration
	// LinkKeysInDatabase is set by Load for a process that signs links
	// (NeedLinkKey) when neither DOWNLOAD_LINK_KEY nor
	// DOWNLOAD_LINK_KEY_SECRET_ARN is: the keys are the database's
	// (download_link_keys, rotated by pendingctl linkkey rotate), the
	// default, which reads no secret.
	LinkKeysInDatabase bool

	ContentBucket   string // CONTENT_BUCKET: unset keeps bytes in Postgres
	InlineMaxBytes  int64  // INLINE_MAX_BYTES
	MaxRequestBytes int64  // MAX_REQUEST_BYTES
	MaxFileBytes    int64  // MAX_FILE_BYTES: the per-file cap

	// WorkspaceMaxPendingBytes and WorkspaceMaxPendingFiles
	// (WORKSPACE_MAX_PENDING_BYTES, _FILES) bound what one workspace may
	// have waiting, unacked and unexpired; 0 turns either off.
	WorkspaceMaxPendingBytes int64
	WorkspaceMaxPendingFiles int64

	// AcceptUnknownWorkspaces (ACCEPT_UNKNOWN_WORKSPACES, default false):
	// on the service's own database, stage for any workspace UUID, not
	// only one a token was ever made for (pendinguploads.Settings,
	// RefuseUnknownWorkspaces).
	AcceptUnknownWorkspaces bool

	// MultipartThresholdBytes (MULTIPART_THRESHOLD_BYTES) and PartBytes
	// (MULTIPART_PART_BYTES): a presigned file above the threshold goes to
	// the bucket in parts of PartBytes (the last one shorter), for a
	// client that asks for parts.
	MultipartThresholdBytes int64
	PartBytes               int64

	UploadTTL    time.Duration // UPLOAD_TTL
	AckRetention time.Duration // ACK_RETENTION (negative means 0)
	// ActivityRetention (ACTIVITY_RETENTION) is how long the sweep keeps
	// the activity_logs rows this service wrote, on a standalone database
	// (where the table is ours); 0 keeps them. On the platform's database
	// the table is the platform's and the sweep never touches it.
	ActivityRetention time.Duration
	// RequestTimeout (REQUEST_TIMEOUT) bounds a request's calls to
	// Postgres and S3; a commit of presigned uploads gets more, for the
	// bytes it copies (pendinguploads.CommitTimeout).
	RequestTimeout time.Duration

	S3Endpoint       string // S3_ENDPOINT
	S3ForcePathStyle bool   // S3_FORCE_PATH_STYLE

	// AcceptUnanchoredOrgTokens (ACCEPT_UNANCHORED_ORG_TOKENS, default
	// false) lets an org token without an anchor workspace act on every
	// workspace, the platform's legacy rule; false refuses it
	// (pendinguploads.Settings.AcceptUnanchoredOrgTokens).
	AcceptUnanchoredOrgTokens bool

	// SecretsEndpoint (SECRETS_MANAGER_ENDPOINT) points Secrets Manager
	// calls at a local endpoint (moto) instead of AWS.
	SecretsEndpoint string

	// CORSAllowedOrigins (CORS_ALLOWED_ORIGINS, comma-separated) are the
	// browser origins the API answers with CORS headers; empty: none.
	CORSAllowedOrigins []string

	// PushEndpoint (PUSH_ENDPOINT) is the AWS IoT Core data endpoint (a
	// host name) the service publishes upload hints to and clients
	// subscribe at; PushAuthorizer (PUSH_AUTHORIZER) the custom
	// authorizer's name clients present. Unset: no push (see internal/push).
	PushEndpoint, PushAuthorizer string
	// PushHintTable (PUSH_HINT_TABLE) is the DynamoDB table the service
	// writes upload hints to, for the relay (functions/pushrelay) to
	// publish at PushEndpoint: set, the service writes there instead of
	// publishing itself (push.Table). DynamoDBEndpoint
	// (DYNAMODB_ENDPOINT) points its calls at a local endpoint (moto)
	// instead of AWS.
	PushHintTable, DynamoDBEndpoint string

	// Metrics (METRICS) are the names of the custom metrics the service
	// emits (metrics.Names), comma-separated; unset or "all": every one
	// (nil). The template's Monitoring=essential sets the one its alarm
	// reads, so an idle stack bills one custom metric, not seven.
	Metrics []string

	// CPUpstreamURL (CP_UPSTREAM_URL) and OrgSlug (MOLECULE_ORG_SLUG),
	// both set or neither, turn session cookies on: a request without a
	// bearer acts with the control plane's session when
	// {CPUpstreamURL}/cp/auth/tenant-member?slug={OrgSlug} says its cookie
	// is a member of this tenant.
	CPUpstreamURL string
	OrgSlug       string
	// PublicOrigin (PUBLIC_ORIGIN) is the service's own origin as the
	// browser sees it (the canvas's, when the platform's edge routes these
	// paths): a cookie-authenticated request must come from it or from a
	// CORS origin.
	PublicOrigin string

	// Scan is malware scanning before delivery (MALWARE_SCAN, scan.go).
	Scan Scan
}

// DBEndpoint is where the database of DB_SECRET_ARN is, when the secret
// does not say (an RDS-managed master secret holds only username and
// password) or says otherwise (a proxy in front has a host of its own).
// Each field set wins over the secret's; an empty one (0) leaves it. Not
// used with DATABASE_URL.
type DBEndpoint struct {
	Host string // DB_HOST
	Port int    // DB_PORT
	Name string // DB_NAME: the database
}

// SessionOrigins are the origins a cookie-authenticated request may come
// from: the CORS origins and the public origin.
func (c Config) SessionOrigins() []string {
	out := append([]string(nil), c.CORSAllowedOrigins...)
	if c.PublicOrigin != "" {
		out = append(out, c.PublicOrigin)
	}
	return out
}

// QueryMode is how the service's pool sends statements (pgx's
// DefaultQueryExecMode).
type QueryMode string

const (
	// QueryModeCacheStatement prepares each statement once per connection
	// and keeps it (pgx's default): named prepared statements, which live
	// in one server session.
	QueryModeCacheStatement QueryMode = "cache_statement"
	// QueryModeExec sends each statement unnamed, parsed with its
	// execution, and carries the session's settings (statement_timeout,
	// idle_in_transaction_session_timeout) inside each transaction: what a
	// transaction pooler passes, whichever server connection it picks.
	QueryModeExec QueryMode = "exec"
)

// Defaults.
const (
	DefaultInlineMaxBytes  = 256 << 10
	DefaultMaxRequestBytes = limits.DefaultRequestBytes
	DefaultMaxFileBytes    = limits.DefaultFileBytes
	DefaultUploadTTL       = 24 * time.Hour
	// DefaultWorkspaceMaxPendingBytes and DefaultWorkspaceMaxPendingFiles
	// are the quota: 5 GiB and 10,000 files waiting per workspace.
	DefaultWorkspaceMaxPendingBytes = 5 << 30
	DefaultWorkspaceMaxPendingFiles = 10_000
	DefaultAckRetention             = time.Hour
	// DefaultActivityRetention is ACTIVITY_RETENTION's default, 30 days:
	// a month of receipts for an operator to read back, about 520 bytes a
	// file (issue 41).
	DefaultActivityRetention = 30 * 24 * time.Hour
	// DefaultRequestTimeout is REQUEST_TIMEOUT's default: with the 2 s of
	// cleanup after a failure, a 503 within API.md's 15 s.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultDownloadLinkTTL is how long a download link lasts, at most
	// MaxDownloadLinkTTL.
	DefaultDownloadLinkTTL = 5 * time.Minute
	MaxDownloadLinkTTL     = time.Hour

	// MaxFileBytesCap bounds MAX_FILE_BYTES: the platform's own cap, and
	// what the schema's CHECK allows (100 MiB).
	MaxFileBytesCap = limits.MaxFileBytes
	// maxRowLife bounds UPLOAD_TTL + ACK_RETENTION with a bucket: the
	// bucket's backstop rule deletes objects/ after 3 days, and a row must
	// never outlive its object.
	maxRowLife = 72 * time.Hour
	// minRequestTimeout and maxRequestTimeout bound REQUEST_TIMEOUT: under
	// a second a connect alone may not fit; Lambda ends any invocation
	// at 15 minutes.
	minRequestTimeout = time.Second
	maxRequestTimeout = 15 * time.Minute
	// maxRequestCap bounds MAX_REQUEST_BYTES, for the dev server too: 64
	// files of 25 MiB.
	maxRequestCap = 64 * DefaultMaxFileBytes
)

// SweepBatch is how many rows one sweep statement deletes: a large
// backlog never holds one long lock. Not a setting.
const SweepBatch = 1000

// Defaults is the configuration of an empty environment: every default.
func Defaults() Config {
	c, err := Load(func(string) string { return "" }, 0)
	if err != nil {
		panic("config: the defaults do not load: " + err.Error())
	}
	return c
}

// Requirement says which settings a process cannot start without.
type Requirement int

const (
	// NeedDatabase: DATABASE_URL, DB_SECRET_ARN or DB_IAM_USER.
	NeedDatabase Requirement = 1 << iota
	// NeedAdminToken: ADMIN_TOKEN, ADMIN_TOKEN_SECRET_ARN or
	// ADMIN_TOKEN_SHA256.
	NeedAdminToken
	// NeedLinkKey: the process signs and checks download links (the
	// content function): with DOWNLOAD_LINK_KEY or
	// DOWNLOAD_LINK_KEY_SECRET_ARN, else with the database's keys
	// (LinkKeysInDatabase).
	NeedLinkKey
)

// Load reads the settings through getenv (os.Getenv in production; a map
// in tests) and checks what need asks for. The error names the variable.
func Load(getenv func(string) string, need Requirement) (Config, error) {
	c := Config{
		DatabaseURL:              strings.TrimSpace(getenv("DATABASE_URL")),
		DBSecretARN:              strings.TrimSpace(getenv("DB_SECRET_ARN")),
		DBIAMUser:                strings.TrimSpace(getenv("DB_IAM_USER")),
		AWSRegion:                strings.TrimSpace(getenv("AWS_REGION")),
		AdminToken:               strings.TrimSpace(getenv("ADMIN_TOKEN")),
		AdminTokenSecretARN:      strings.TrimSpace(getenv("ADMIN_TOKEN_SECRET_ARN")),
		AdminTokenSHA256:         strings.TrimSpace(getenv("ADMIN_TOKEN_SHA256")),
		DownloadLinkKey:          strings.TrimSpace(getenv("DOWNLOAD_LINK_KEY")),
		DownloadLinkKeySecretARN: strings.TrimSpace(getenv("DOWNLOAD_LINK_KEY_SECRET_ARN")),
		ContentBucket:            strings.TrimSpace(getenv("CONTENT_BUCKET")),
		S3Endpoint:               strings.TrimSpace(getenv("S3_ENDPOINT")),
		SecretsEndpoint:          strings.TrimSpace(getenv("SECRETS_MANAGER_ENDPOINT")),
		DBEndpoint: DBEndpoint{
			Host: strings.TrimSpace(getenv("DB_HOST")),
			Name: strings.TrimSpace(getenv("DB_NAME")),
		},
		CPUpstreamURL:    strings.TrimSpace(getenv("CP_UPSTREAM_URL")),
		OrgSlug:          strings.TrimSpace(getenv("MOLECULE_ORG_SLUG")),
		PushEndpoint:     strings.TrimSpace(getenv("PUSH_ENDPOINT")),
		PushAuthorizer:   strings.TrimSpace(getenv("PUSH_AUTHORIZER")),
		PushHintTable:    strings.TrimSpace(getenv("PUSH_HINT_TABLE")),
		DynamoDBEndpoint: strings.TrimSpace(getenv("DYNAMODB_ENDPOINT")),
	}
	var errs errorList
	c.readSizes(getenv, &errs)
	c.readDatabase(getenv, &errs)
	c.readDurations(getenv, &errs)
	c.readOrigins(getenv, &errs)
	c.readScan(getenv, &errs)
	errs.add(c.readMetrics(getenv))
	errs.add(c.checkSessions())
	c.checkNeeds(need, &errs)
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// errorList gathers every bad setting, so that Load reports them at once.
type errorList []error

func (l *errorList) add(err error) {
	if err != nil {
		*l = append(*l, err)
	}
}

// readSizes reads the byte caps, the workspace quota and the part sizes.
func (c *Config) readSizes(getenv func(string) string, errs *errorList) {
	var err error
	c.MaxFileBytes, err = bytesVar(getenv, "MAX_FILE_BYTES", DefaultMaxFileBytes, 1, MaxFileBytesCap)
	errs.add(err)
	c.InlineMaxBytes, err = bytesVar(getenv, "INLINE_MAX_BYTES", DefaultInlineMaxBytes, 1, MaxFileBytesCap)
	errs.add(err)
	c.MaxRequestBytes, err = bytesVar(getenv, "MAX_REQUEST_BYTES", DefaultMaxRequestBytes, 1024, maxRequestCap)
	errs.add(err)
	c.WorkspaceMaxPendingBytes, err = quotaVar(getenv, "WORKSPACE_MAX_PENDING_BYTES", "bytes", DefaultWorkspaceMaxPendingBytes, c.MaxFileBytes, 1<<40)
	errs.add(err)
	c.WorkspaceMaxPendingFiles, err = quotaVar(getenv, "WORKSPACE_MAX_PENDING_FILES", "files", DefaultWorkspaceMaxPendingFiles, limits.MaxFiles, 10_000_000)
	errs.add(err)
	c.MultipartThresholdBytes, err = bytesVar(getenv, "MULTIPART_THRESHOLD_BYTES", limits.DefaultMultipartThresholdBytes, limits.MinPartBytes, MaxFileBytesCap)
	errs.add(err)
	c.PartBytes, err = bytesVar(getenv, "MULTIPART_PART_BYTES", limits.DefaultPartBytes, limits.MinPartBytes, MaxFileBytesCap)
	errs.add(err)
}

// readMetrics reads METRICS: "all" (or unset) or metric names.
func (c *Config) readMetrics(getenv func(string) string) error {
	v := strings.TrimSpace(getenv("METRICS"))
	if v == "" || v == "all" {
		return nil
	}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(metrics.Names, name) {
			return fmt.Errorf("METRICS: %q is not a metric of the service (want all, or names of internal/metrics)", name)
		}
		c.Metrics = append(c.Metrics, name)
	}
	return nil
}

// readDatabase reads DB_PORT, DATABASE_QUERY_MODE, S3_FORCE_PATH_STYLE,
// ACCEPT_UNANCHORED_ORG_TOKENS and ACCEPT_UNKNOWN_WORKSPACES.
func (c *Config) readDatabase(getenv func(string) string, errs *errorList) {
	var err error
	c.DBEndpoint.Port, err = portVar(getenv, "DB_PORT")
	errs.add(err)
	c.DatabaseQueryMode, err = queryModeVar(getenv, "DATABASE_QUERY_MODE")
	errs.add(err)
	errs.add(c.checkIAMUser())
	c.S3ForcePathStyle, err = boolVar(getenv, "S3_FORCE_PATH_STYLE")
	errs.add(err)
	c.AcceptUnanchoredOrgTokens, err = boolVar(getenv, "ACCEPT_UNANCHORED_ORG_TOKENS")
	errs.add(err)
	c.AcceptUnknownWorkspaces, err = boolVar(getenv, "ACCEPT_UNKNOWN_WORKSPACES")
	errs.add(err)
}

// boolVar reads the boolean variable name: unset or empty is false.
func boolVar(getenv func(string) string, name string) (bool, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: want true or false, got %q", name, v)
	}
	return b, nil
}

// readDurations reads UPLOAD_TTL, ACK_RETENTION, ACTIVITY_RETENTION and REQUEST_TIMEOUT, and
// holds the first two's sum under the bucket's backstop rule when there
// is a bucket.
func (c *Config) readDurations(getenv func(string) string, errs *errorList) {
	var err error
	c.RequestTimeout, err = durationVar(getenv, "REQUEST_TIMEOUT", DefaultRequestTimeout)
	errs.add(err)
	if err == nil && (c.RequestTimeout < minRequestTimeout || c.RequestTimeout > maxRequestTimeout) {
		errs.add(fmt.Errorf("REQUEST_TIMEOUT: want %s to %s, got %s", minRequestTimeout, maxRequestTimeout, c.RequestTimeout))
	}
	c.UploadTTL, err = durationVar(getenv, "UPLOAD_TTL", DefaultUploadTTL)
	errs.add(err)
	if err == nil && c.UploadTTL <= 0 {
		errs.add(fmt.Errorf("UPLOAD_TTL: must be positive, got %s", c.UploadTTL))
	}
	c.AckRetention, err = durationVar(getenv, "ACK_RETENTION", DefaultAckRetention)
	errs.add(err)
	c.AckRetention = max(c.AckRetention, 0)
	c.ActivityRetention, err = durationVar(getenv, "ACTIVITY_RETENTION", DefaultActivityRetention)
	errs.add(err)
	if err == nil && c.ActivityRetention < 0 {
		errs.add(fmt.Errorf("ACTIVITY_RETENTION: want 0 (keep) or more, got %s", c.ActivityRetention))
	}
	if c.ContentBucket != "" && c.UploadTTL+c.AckRetention >= maxRowLife {
		errs.add(fmt.Errorf("UPLOAD_TTL: with ACK_RETENTION must stay under %s (the bucket's backstop rule), got %s + %s",
			maxRowLife, c.UploadTTL, c.AckRetention))
	}
	c.DownloadLinkTTL, err = durationVar(getenv, "DOWNLOAD_LINK_TTL", DefaultDownloadLinkTTL)
	errs.add(err)
	if err == nil && (c.DownloadLinkTTL < time.Second || c.DownloadLinkTTL > MaxDownloadLinkTTL) {
		errs.add(fmt.Errorf("DOWNLOAD_LINK_TTL: want 1s to %s, got %s", MaxDownloadLinkTTL, c.DownloadLinkTTL))
	}
}

// readOrigins reads CORS_ALLOWED_ORIGINS and PUBLIC_ORIGIN (one origin).
func (c *Config) readOrigins(getenv func(string) string, errs *errorList) {
	var err error
	c.CORSAllowedOrigins, err = originsVar(getenv, "CORS_ALLOWED_ORIGINS")
	errs.add(err)
	public, err := originsVar(getenv, "PUBLIC_ORIGIN")
	errs.add(err)
	switch {
	case len(public) > 1:
		errs.add(fmt.Errorf("PUBLIC_ORIGIN: want one origin, got %d", len(public)))
	case len(public) == 1:
		c.PublicOrigin = public[0]
	}
}

// checkNeeds checks that what the caller needs is set: a database, an
// admin token (of one source, long enough); and, for a process that signs
// links, sets where their keys come from (LinkKeysInDatabase).
func (c *Config) checkNeeds(need Requirement, errs *errorList) {
	if need&NeedDatabase != 0 && c.DatabaseURL == "" && c.DBSecretARN == "" && c.DBIAMUser == "" {
		errs.add(errors.New("DATABASE_URL, DB_SECRET_ARN or DB_IAM_USER: one must be set"))
	}
	errs.add(c.checkAdminToken(need))
	c.LinkKeysInDatabase = need&NeedLinkKey != 0 && c.DownloadLinkKey == "" && c.DownloadLinkKeySecretARN == ""
	if c.DownloadLinkKey != "" && len(c.DownloadLinkKey) < MinLinkKeyLength {
		errs.add(fmt.Errorf("DOWNLOAD_LINK_KEY: must be at least %d characters", MinLinkKeyLength))
	}
}

// checkAdminToken checks the admin token's one source: set (when need
// asks for it), not two at once, a token long enough, a hash of the
// right form. Its errors name the variables, never their values.
func (c *Config) checkAdminToken(need Requirement) error {
	var set []string
	for _, v := range []struct{ name, value string }{
		{"ADMIN_TOKEN", c.AdminToken}, {"ADMIN_TOKEN_SECRET_ARN", c.AdminTokenSecretARN}, {"ADMIN_TOKEN_SHA256", c.AdminTokenSHA256},
	} {
		if v.value != "" {
			set = append(set, v.name)
		}
	}
	switch {
	case len(set) > 1:
		return fmt.Errorf("%s: set one source of the admin token, not %d", strings.Join(set, " and "), len(set))
	case len(set) == 0 && need&NeedAdminToken != 0:
		return errors.New("ADMIN_TOKEN, ADMIN_TOKEN_SECRET_ARN or ADMIN_TOKEN_SHA256: one must be set")
	case c.AdminToken != "" && len(c.AdminToken) < MinTokenLength:
		return fmt.Errorf("ADMIN_TOKEN: must be at least %d characters", MinTokenLength)
	case c.AdminTokenSHA256 != "" && !isSHA256Hex(c.AdminTokenSHA256):
		return errors.New(`ADMIN_TOKEN_SHA256: want the admin token's SHA-256 as 64 lower-case hex digits (printf %s "$TOKEN" | sha256sum)`)
	}
	return nil
}

// isSHA256Hex reports whether s is a SHA-256 in lower-case hex, as
// sha256sum prints it.
func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// checkIAMUser checks DB_IAM_USER's companions: alone among the ways to
// reach the database, with DB_HOST and AWS_REGION to sign for.
func (c Config) checkIAMUser() error {
	if c.DBIAMUser == "" {
		return nil
	}
	var errs []error
	if c.DatabaseURL != "" || c.DBSecretARN != "" {
		errs = append(errs, errors.New("DB_IAM_USER: set with DATABASE_URL or DB_SECRET_ARN; set one way to reach the database"))
	}
	if c.DBEndpoint.Host == "" {
		errs = append(errs, errors.New("DB_IAM_USER: DB_HOST must be set (the host the token is signed for)"))
	}
	if c.AWSRegion == "" {
		errs = append(errs, errors.New("DB_IAM_USER: AWS_REGION must be set (the region the token is signed for)"))
	}
	return errors.Join(errs...)
}

// checkSessions checks the session settings: both or neither, a URL the
// functions can call, and somewhere a cookie may come from.
func (c Config) checkSessions() error {
	switch {
	case c.CPUpstreamURL == "" && c.OrgSlug == "":
		return nil
	case c.CPUpstreamURL == "":
		return errors.New("CP_UPSTREAM_URL: must be set with MOLECULE_ORG_SLUG (session cookies need both)")
	case c.OrgSlug == "":
		return errors.New("MOLECULE_ORG_SLUG: must be set with CP_UPSTREAM_URL (session cookies need both)")
	}
	u, err := url.Parse(c.CPUpstreamURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("CP_UPSTREAM_URL: want the control plane's base URL such as https://cp.example.com, got %q", c.CPUpstreamURL)
	}
	if len(c.SessionOrigins()) == 0 {
		return errors.New("CP_UPSTREAM_URL: session cookies need PUBLIC_ORIGIN or CORS_ALLOWED_ORIGINS (the pages whose requests may carry the cookie)")
	}
	return nil
}

// MinTokenLength is the shortest admin token accepted: a short shared
// secret is a guessable one.
const MinTokenLength = 16

// MinLinkKeyLength is the shortest download-link key accepted
// (downloadlink.MinKeyBytes).
const MinLinkKeyLength = 32

func bytesVar(getenv func(string) string, name string, def, lo, hi int64) (int64, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: want a whole number of bytes, got %q", name, v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s: want %d to %d bytes, got %d", name, lo, hi, n)
	}
	return n, nil
}

// portVar reads a TCP port; unset is 0.
func portVar(getenv func(string) string, name string) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s: want a port number, 1 to 65535, got %q", name, v)
	}
	return n, nil
}

// quotaVar reads a quota: 0 (off), or lo to hi (a quota under one
// request's worth would refuse every full request).
func quotaVar(getenv func(string) string, name, unit string, def, lo, hi int64) (int64, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || (n != 0 && (n < lo || n > hi)) {
		return 0, fmt.Errorf("%s: want %d to %d %s, or 0 for no quota, got %q", name, lo, hi, unit, v)
	}
	return n, nil
}

func queryModeVar(getenv func(string) string, name string) (QueryMode, error) {
	switch m := QueryMode(strings.TrimSpace(getenv(name))); m {
	case "":
		return QueryModeCacheStatement, nil
	case QueryModeCacheStatement, QueryModeExec:
		return m, nil
	default:
		return "", fmt.Errorf("%s: want %s or %s, got %q", name, QueryModeCacheStatement, QueryModeExec, string(m))
	}
}

func durationVar(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: want a duration such as 24h or 90m, got %q", name, v)
	}
	return d, nil
}

// originsVar reads a comma-separated list of origins: each exactly
// scheme://host[:port], as a browser sends it in Origin (no path, no
// trailing slash), so that comparing strings is comparing origins.
// A "*" is refused: the API answers with credentials, per origin.
func originsVar(getenv func(string) string, name string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(getenv(name), ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		scheme, host, ok := strings.Cut(o, "://")
		if !ok || (scheme != "https" && scheme != "http") || host == "" || strings.ContainsAny(host, "/?#*@ ") {
			return nil, fmt.Errorf("%s: want origins such as https://canvas.example.com, got %q", name, o)
		}
		out = append(out, o)
	}
	return out, nil
}
