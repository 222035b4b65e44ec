package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/downloadlink"
)

// SecretsAPI is the one Secrets Manager call the service makes.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretsAPI = (*secretsmanager.Client)(nil)

// rdsSecret is the JSON shape RDS writes into its managed secrets.
type rdsSecret struct {
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"` // a number, or a string of one
	Username string          `json:"username"`
	Password string          `json:"password"`
	DBName   string          `json:"dbname"`
}

// LinkKeysFromSecret reads the download links' keys from the secret arn
// (a plain string, at least config.MinLinkKeyLength characters): its
// version at AWSCURRENT, created when it replaced the one at AWSPREVIOUS
// (the rotation), and that one, accepted for the links' overlap (none
// before the first rotation). Putting a new value moves both labels at
// once (PutSecretValue: "If you don't include VersionStages, then Secrets
// Manager automatically moves the staging label AWSCURRENT to this
// version. [...] If this operation moves the staging label AWSCURRENT
// from another version to this version, then Secrets Manager also
// automatically moves the staging label AWSPREVIOUS to the version that
// AWSCURRENT was removed from",
// https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_PutSecretValue.html;
// likewise UpdateSecretVersionStage,
// https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_UpdateSecretVersionStage.html).
// A previous value too short to have been a key is left out.
func LinkKeysFromSecret(ctx context.Context, sm SecretsAPI, arn string) (downloadlink.Keys, error) {
	// The two versions are read side by side: a cold start of the content
	// function waits for one round trip to Secrets Manager, not two.
	type answer struct {
		out *secretsmanager.GetSecretValueOutput
		err error
	}
	previous := make(chan answer, 1)
	go func() {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn), VersionStage: aws.String("AWSPREVIOUS")})
		previous <- answer{out, err}
	}()
	cur, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	prevAnswer := <-previous
	if err != nil {
		return downloadlink.Keys{}, err
	}
	if cur.SecretString == nil {
		return downloadlink.Keys{}, errors.New("secret has no string value")
	}
	k := downloadlink.Keys{Current: strings.TrimSpace(*cur.SecretString)}
	if len(k.Current) < config.MinLinkKeyLength {
		return downloadlink.Keys{}, fmt.Errorf("key shorter than %d characters", config.MinLinkKeyLength)
	}
	if cur.CreatedDate != nil {
		k.Rotated = *cur.CreatedDate
	}
	prev, err := prevAnswer.out, prevAnswer.err
	var notFound *smtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		// No rotation yet: no version holds AWSPREVIOUS.
	case err != nil:
		return downloadlink.Keys{}, fmt.Errorf("AWSPREVIOUS: %w", err)
	case prev.SecretString != nil && len(strings.TrimSpace(*prev.SecretString)) >= config.MinLinkKeyLength:
		k.Previous = strings.TrimSpace(*prev.SecretString)
	}
	return k, nil
}

// secretString fetches the current value of a secret.
func secretString(ctx context.Context, sm SecretsAPI, arn string) (string, error) {
	return secretStage(ctx, sm, arn, "")
}

// secretStage fetches the version of a secret at stage (AWSCURRENT when
// empty, AWSPENDING during a rotation).
func secretStage(ctx context.Context, sm SecretsAPI, arn, stage string) (string, error) {
	in := &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)}
	if stage != "" {
		in.VersionStage = aws.String(stage)
	}
	out, err := sm.GetSecretValue(ctx, in)
	if err != nil {
		return "", err
	}
	if out.SecretString == nil {
		return "", errors.New("secret has no string value")
	}
	return *out.SecretString, nil
}

// DatabaseURLFromSecret builds a connection URL from a secret of RDS's
// JSON shape: the full one of a secret written for RDS (host, port,
// username, password, dbname), or the username and password alone of an
// RDS-managed master secret, with ep saying where the database is. A field
// set in ep wins over the secret's (a proxy in front of the database has
// a host of its own); the port defaults to 5432 and the database to
// postgres. TLS is required (sslmode=require): RDS offers it everywhere.
// The error never carries the password.
func DatabaseURLFromSecret(secret string, ep config.DBEndpoint) (string, error) {
	var s rdsSecret
	if err := json.Unmarshal([]byte(secret), &s); err != nil {
		return "", errors.New("not JSON of the RDS shape (username, password; host, port, dbname unless DB_HOST, DB_PORT, DB_NAME say)")
	}
	port := 5432
	if p := strings.Trim(string(s.Port), `"`); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return "", fmt.Errorf("port %q is not a port number", p)
		}
		port = n
	}
	if ep.Host != "" {
		s.Host = ep.Host
	}
	if ep.Port != 0 {
		port = ep.Port
	}
	if ep.Name != "" {
		s.DBName = ep.Name
	}
	switch {
	case s.Username == "":
		return "", errors.New("username is required")
	case s.Host == "":
		return "", errors.New("no host: the secret has none (an RDS-managed secret holds only username and password) and DB_HOST is unset")
	}
	if s.DBName == "" {
		s.DBName = "postgres"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.Username, s.Password),
		Host:     net.JoinHostPort(s.Host, strconv.Itoa(port)),
		Path:     "/" + s.DBName,
		RawQuery: "sslmode=require",
	}
	return u.String(), nil
}

// AdminTokenFromSecret accepts a plain-string secret, or JSON with a
// "token" field.
func AdminTokenFromSecret(secret string) (string, error) {
	secret = strings.TrimSpace(secret)
	if strings.HasPrefix(secret, "{") {
		var v struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal([]byte(secret), &v); err != nil || v.Token == "" {
			return "", errors.New(`JSON secret without a "token" field`)
		}
		return v.Token, nil
	}
	if secret == "" {
		return "", errors.New("empty secret")
	}
	return secret, nil
}
