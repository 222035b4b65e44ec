package rdsiam_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	rdsauth "github.com/aws/aws-sdk-go-v2/feature/rds/auth"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pendinguploads/pendinguploads/internal/testkit"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/rdsiam"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestTokens: a token signed by the SDK (feature/rds/auth) with the
// stand-in's credentials, for the user and the proxy's host:port, opens
// a session on the real server as that user over TLS; a forged one
// (another secret), one for another user, one for another host, an
// expired one, one sent without TLS, and a good one for a role without
// rds_iam are each refused with RDS's FATAL 28P01 (28000 without TLS),
// before the real server sees a query.
func TestTokens(t *testing.T) {
	dbURL := pgtest.MustURL(t)
	proxy := rdsiam.Start(t, dbURL)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	suffix := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	user, plain := "iam_"+suffix, "plain_"+suffix
	for _, sql := range []string{`CREATE ROLE ` + user + ` LOGIN`, `GRANT rds_iam TO ` + user, `CREATE ROLE ` + plain + ` LOGIN`} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := url.Parse(dbURL)
	dbName := strings.TrimPrefix(u.Path, "/")
	good := credentials.NewStaticCredentialsProvider(rdsiam.AccessKeyID, rdsiam.SecretAccessKey, rdsiam.SessionToken)
	sign := func(endpoint, user string, creds credentials.StaticCredentialsProvider) string {
		t.Helper()
		tok, err := rdsauth.BuildAuthToken(ctx, endpoint, rdsiam.Region, user, creds)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	open := func(user, password, sslmode string) (string, error) {
		cc, err := pgx.ParseConfig("postgres://" + proxy.Addr + "/" + dbName + "?sslmode=" + sslmode)
		if err != nil {
			t.Fatal(err)
		}
		cc.User, cc.Password = user, password
		c, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return "", err
		}
		defer c.Close(ctx)
		var who string
		err = c.QueryRow(ctx, `SELECT current_user`).Scan(&who)
		return who, err
	}

	t.Run("Accepted", func(t *testing.T) {
		who, err := open(user, sign(proxy.Addr, user, good), "require")
		if err != nil || who != user {
			t.Fatalf("got %q, %v; want a session as %s", who, err, user)
		}
	})
	refused := func(t *testing.T, user, password, sslmode, code string) {
		t.Helper()
		before := proxy.Refused()
		_, err := open(user, password, sslmode)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Fatalf("got %v, want SQLSTATE %s", err, code)
		}
		if proxy.Refused() != before+1 {
			t.Fatalf("refusals: got %d, want %d", proxy.Refused(), before+1)
		}
	}
	t.Run("Forged", func(t *testing.T) {
		forged := credentials.NewStaticCredentialsProvider(rdsiam.AccessKeyID, "not-the-secret-access-key-0123456789abcd", rdsiam.SessionToken)
		refused(t, user, sign(proxy.Addr, user, forged), "require", "28P01")
	})
	t.Run("Tampered", func(t *testing.T) {
		tok := sign(proxy.Addr, user, good)
		refused(t, user, strings.Replace(tok, "X-Amz-Expires=900", "X-Amz-Expires=899", 1), "require", "28P01")
	})
	t.Run("OtherUser", func(t *testing.T) {
		refused(t, user, sign(proxy.Addr, "someone_else", good), "require", "28P01")
	})
	t.Run("OtherHost", func(t *testing.T) {
		refused(t, user, sign("127.0.0.1:"+strconv.Itoa(proxy.Port+1), user, good), "require", "28P01")
	})
	t.Run("NotAToken", func(t *testing.T) {
		refused(t, user, "a-password", "require", "28P01")
	})
	t.Run("NoRDSIAM", func(t *testing.T) {
		refused(t, plain, sign(proxy.Addr, plain, good), "require", "28P01")
	})
	t.Run("NoTLS", func(t *testing.T) {
		refused(t, user, sign(proxy.Addr, user, good), "disable", "28000")
	})
	t.Run("Expired", func(t *testing.T) {
		tok := sign(proxy.Addr, user, good)
		proxy.SetClock(func() time.Time { return time.Now().Add(rdsiam.MaxTokenLife) })
		defer proxy.SetClock(time.Now)
		refused(t, user, tok, "require", "28P01")
	})
}
