package app

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	rdsauth "github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/jackc/pgx/v5"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/pendinguploads"
)

// IAMTokenReuse is how long one IAM database authentication token serves
// new connections before it is signed again. A token is good for 15
// minutes ("Authentication tokens are generated using AWS Signature
// Version 4. Each token has a lifetime of 15 minutes"), and is checked
// only when a connection opens ("The token is only used for
// authentication and doesn't affect the session after it is
// established"; both
// https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.IAMDBAuth.html):
// re-signed well before its end, a token handed to a slow connect is
// never stale when it arrives, and a long session is never cut. Reused
// rather than signed per connection because RDS throttles IAM
// authentication at 200 new connections a second, but not connections
// that present a token already used, and asks for reuse (the same page,
// its limitations).
const IAMTokenReuse = 5 * time.Minute

// iamToken is the password of DB_IAM_USER: an IAM database authentication
// token, a SigV4-presigned "connect" URL for the user at the endpoint,
// signed locally with the process's credentials by rdsauth.BuildAuthToken
// (a SigV4 presign computed in the process: no network call; "Every
// authentication token must be accompanied by a valid signature, using
// AWS signature version 4. [...] an AWS SDK [...] can automatically sign
// each token you create",
// https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.IAMDBAuth.Connecting.html).
// One token is cached and re-signed after IAMTokenReuse. Safe for
// concurrent use. The token is a credential: never logged, never in an
// error.
type iamToken struct {
	creds    aws.CredentialsProvider
	endpoint string // host:port, as the server sees it in the token
	region   string
	user     string
	now      func() time.Time

	mu       sync.Mutex
	token    string
	signedAt time.Time
}

// newIAMToken returns the token source of cfg's DB_IAM_USER, signing
// with creds.
func newIAMToken(cfg config.Config, creds aws.CredentialsProvider) *iamToken {
	return &iamToken{
		creds:    creds,
		endpoint: net.JoinHostPort(cfg.DBEndpoint.Host, strconv.Itoa(iamPort(cfg))),
		region:   cfg.AWSRegion,
		user:     cfg.DBIAMUser,
		now:      time.Now,
	}
}

// get returns the cached token, signing a new one when there is none or
// it was signed IAMTokenReuse ago or more. An error (no credentials)
// wraps pendinguploads.ErrUnavailable: the connect fails closed, a 503.
func (t *iamToken) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && t.now().Sub(t.signedAt) < IAMTokenReuse {
		return t.token, nil
	}
	at := t.now()
	tok, err := rdsauth.BuildAuthToken(ctx, t.endpoint, t.region, t.user, t.creds)
	if err != nil {
		return "", fmt.Errorf("%w: DB_IAM_USER: sign the IAM database authentication token: %w", pendinguploads.ErrUnavailable, err)
	}
	t.token, t.signedAt = tok, at
	return tok, nil
}

// beforeConnect gives each new connection the current token as its
// password.
func (t *iamToken) beforeConnect(ctx context.Context, cc *pgx.ConnConfig) error {
	tok, err := t.get(ctx)
	if err != nil {
		return err
	}
	cc.Password = tok
	return nil
}

// iamPort is DB_PORT, 5432 when unset.
func iamPort(cfg config.Config) int {
	if cfg.DBEndpoint.Port != 0 {
		return cfg.DBEndpoint.Port
	}
	return 5432
}

// iamDatabaseURL is the connection URL of DB_IAM_USER, without a
// password (beforeConnect sets the token). TLS is required
// (sslmode=require), as with DB_SECRET_ARN: the server asks for the token
// as a cleartext password, so it must never cross the network in clear
// ("Network traffic to and from the database is encrypted using Secure
// Socket Layer (SSL) or Transport Layer Security (TLS)", the benefits
// listed on the IAM database authentication page above).
func iamDatabaseURL(cfg config.Config) string {
	name := cfg.DBEndpoint.Name
	if name == "" {
		name = "postgres"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(cfg.DBIAMUser),
		Host:     net.JoinHostPort(cfg.DBEndpoint.Host, strconv.Itoa(iamPort(cfg))),
		Path:     "/" + name,
		RawQuery: "sslmode=require",
	}
	return u.String()
}
