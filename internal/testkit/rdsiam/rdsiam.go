// Package rdsiam plays RDS's side of IAM database authentication in front
// of a real test Postgres (pgtest): a Postgres-wire proxy on a loopback
// port that asks each client for a cleartext password
// (AuthenticationCleartextPassword, as RDS does for a role granted
// rds_iam), checks it as an IAM authentication token, and only then
// relays the connection to the real server.
//
// A token is a SigV4-presigned "connect" URL ("Every authentication
// token must be accompanied by a valid signature, using AWS signature
// version 4",
// https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/UsingWithRDS.IAMDBAuth.Connecting.html).
// The proxy accepts one when: it is for Action=connect; its DBUser is the
// startup message's user; its host is the proxy's own host:port (what the
// client signed for); X-Amz-Date is within X-Amz-Expires (at most 900
// seconds: "After you generate an authentication token, it's valid for
// 15 minutes before it expires. If you try to connect using an expired
// token, the connection request is denied", same page); its credential
// scope is AccessKeyID, the date, Region and rds-db; its session token
// is SessionToken; and its signature, recomputed here from the canonical
// request with SecretAccessKey, matches in constant time. The startup
// user must also be a member of the role rds_iam on the real server
// (created by Start when missing, as RDS has it). Anything else is
// FATAL 28P01 "PAM authentication failed for user", RDS's answer to a
// bad token, and the connection ends: nothing reaches the real server.
//
// TLS: the proxy offers TLS with a throwaway self-signed certificate
// made at Start, and refuses a client that does not ask for it (FATAL
// 28000, as a pg_hba hostssl rule answers): the service connects with
// sslmode=require, as against RDS, so the path under test is production's
// own. A client that would send the token in clear is caught, not
// served; the certificate itself is not verified by sslmode=require
// (verify-full would need RDS's CA bundle, which this proxy cannot
// present).
//
// What it cannot check: that the access key is a live IAM principal
// allowed rds-db:connect on the dbuser ARN (IAM's side, proved by the
// template's policy tests instead).
package rdsiam

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// The credentials the proxy checks tokens against: a test gives them to
// the code under test (Env) as Lambda gives a function its role's.
const (
	AccessKeyID     = "AKIARDSIAMSTANDIN01"
	SecretAccessKey = "rdsiam-stand-in-secret-access-key-0123456"
	SessionToken    = "rdsiam-stand-in-session-token"
	Region          = "us-east-1"
)

// MaxTokenLife is the longest X-Amz-Expires a token may carry: RDS's 15
// minutes.
const MaxTokenLife = 900 * time.Second

// MaxConns bounds the connections one proxy relays at once; more are
// refused.
const MaxConns = 32

// handshakeTimeout bounds a client's TLS handshake, startup and
// password, and the proxy's connect to the real server.
const handshakeTimeout = 10 * time.Second

// Server is the proxy. Its fields are set by Start.
type Server struct {
	// Addr is host:port the proxy listens on (127.0.0.1), what a token
	// must be signed for; Host and Port are its halves.
	Addr string
	Host string
	Port int

	now atomic.Pointer[func() time.Time]

	backend *pgconn.Config
	tls     *tls.Config
	ln      net.Listener
	refused atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// Start starts a proxy in front of the Postgres of backendURL (its host,
// port and password; the user and database are the client's), makes
// sure the role rds_iam exists there, and stops the proxy at tb's
// cleanup.
func Start(tb testing.TB, backendURL string) *Server {
	tb.Helper()
	cfg, err := pgconn.ParseConfig(backendURL)
	if err != nil {
		tb.Fatalf("rdsiam: backend url: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ensureRole(ctx, backendURL); err != nil {
		tb.Fatalf("rdsiam: role rds_iam: %v", err)
	}
	tlsCfg, err := selfSigned()
	if err != nil {
		tb.Fatalf("rdsiam: certificate: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("rdsiam: %v", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	s := &Server{Addr: ln.Addr().String(), Host: addr.IP.String(), Port: addr.Port,
		backend: cfg, tls: tlsCfg, ln: ln, conns: map[net.Conn]bool{}}
	s.SetClock(time.Now)
	s.wg.Go(s.accept)
	tb.Cleanup(s.Close)
	return s
}

// SetClock sets the proxy's clock for a token's expiry (Start sets
// time.Now). Safe while connections are served.
func (s *Server) SetClock(now func() time.Time) { s.now.Store(&now) }

// Env is the environment a function needs to connect through s as user
// to database name: DB_IAM_USER, DB_HOST, DB_PORT, DB_NAME, and the
// credentials and region a token is signed with.
func (s *Server) Env(user, name string) []string {
	return []string{
		"DB_IAM_USER=" + user,
		"DB_HOST=" + s.Host,
		"DB_PORT=" + strconv.Itoa(s.Port),
		"DB_NAME=" + name,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_SESSION_TOKEN=" + SessionToken,
	}
}

// Refused is how many connections the proxy refused (bad token, no TLS,
// not an rds_iam member).
func (s *Server) Refused() int64 { return s.refused.Load() }

// Close stops listening and ends every connection.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// ensureRole creates the role rds_iam when the server has none (roles
// are the cluster's, shared by every test database).
func ensureRole(ctx context.Context, backendURL string) error {
	conn, err := pgx.Connect(ctx, backendURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam') THEN CREATE ROLE rds_iam NOLOGIN; END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$`)
	return err
}

func (s *Server) track(c net.Conn, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		if len(s.conns) >= 2*MaxConns { // each relayed connection is two sockets
			return false
		}
		s.conns[c] = true
	} else {
		delete(s.conns, c)
	}
	return true
}

func (s *Server) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if !s.track(c, true) {
			c.Close()
			continue
		}
		s.wg.Go(func() {
			defer s.track(c, false)
			defer c.Close()
			s.serve(c)
		})
	}
}

// refusal is a FATAL answer to a client.
type refusal struct{ code, msg string }

func (r *refusal) Error() string { return r.msg }

// serve authenticates one client and relays it to the real server.
func (s *Server) serve(raw net.Conn) {
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, startup, err := s.startup(raw)
	if err != nil {
		return
	}
	be := pgproto3.NewBackend(conn, conn)
	var user string
	if startup != nil {
		user = startup.Parameters["user"]
	}
	fail := func(r *refusal) {
		s.refused.Add(1)
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: r.code, Message: r.msg})
		_ = be.Flush()
	}
	if startup == nil {
		fail(&refusal{"28000", "no pg_hba.conf entry for host, user \"" + user + "\", no encryption"})
		return
	}
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if be.Flush() != nil {
		return
	}
	if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
		return
	}
	msg, err := be.Receive()
	if err != nil {
		return
	}
	pw, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return
	}
	pamFailed := &refusal{"28P01", `PAM authentication failed for user "` + user + `"`}
	if err := s.Verify(pw.Password, user); err != nil {
		fail(pamFailed)
		return
	}
	server, err := s.connect(startup)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			fail(&refusal{pgErr.Code, pgErr.Message})
		} else {
			fail(&refusal{"08006", "rdsiam: the real server: " + err.Error()})
		}
		return
	}
	if !s.track(server.Conn, true) {
		server.Conn.Close()
		fail(&refusal{"53300", "sorry, too many clients already"})
		return
	}
	defer s.track(server.Conn, false)
	defer server.Conn.Close()
	be.Send(&pgproto3.AuthenticationOk{})
	for k, v := range server.ParameterStatuses {
		be.Send(&pgproto3.ParameterStatus{Name: k, Value: v})
	}
	be.Send(&pgproto3.BackendKeyData{ProcessID: server.PID, SecretKey: server.SecretKey})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: server.TxStatus})
	if be.Flush() != nil {
		return
	}
	_ = raw.SetDeadline(time.Time{})
	_ = server.Conn.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server.Conn, conn); server.Conn.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, server.Conn); conn.Close(); done <- struct{}{} }()
	<-done
	<-done
}

// startup reads the client's startup, going through TLS when it asks
// (SSLRequest): the connection to go on with and its startup message,
// or a nil message when the client did not ask for TLS. A cancel request
// or a GSSAPI-only client gets nothing.
func (s *Server) startup(raw net.Conn) (net.Conn, *pgproto3.StartupMessage, error) {
	var conn net.Conn = raw
	secure := false
	for range 3 {
		be := pgproto3.NewBackend(conn, conn)
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return nil, nil, err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if secure {
				return nil, nil, errors.New("second SSLRequest")
			}
			if _, err := conn.Write([]byte{'S'}); err != nil {
				return nil, nil, err
			}
			tc := tls.Server(conn, s.tls)
			if err := tc.Handshake(); err != nil {
				return nil, nil, err
			}
			conn, secure = tc, true
		case *pgproto3.GSSEncRequest:
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return nil, nil, err
			}
		case *pgproto3.StartupMessage:
			if !secure {
				return conn, nil, nil
			}
			return conn, m, nil
		default:
			return nil, nil, fmt.Errorf("unexpected %T", msg)
		}
	}
	return nil, nil, errors.New("no startup message")
}

// connect opens the relayed connection to the real server as the startup
// message's user, to its database, with its parameters, and checks that
// the user is a member of rds_iam.
func (s *Server) connect(startup *pgproto3.StartupMessage) (*pgconn.HijackedConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	cfg := s.backend.Copy()
	cfg.User = startup.Parameters["user"]
	cfg.Database = startup.Parameters["database"]
	if cfg.Database == "" {
		cfg.Database = cfg.User
	}
	cfg.RuntimeParams = map[string]string{}
	for k, v := range startup.Parameters {
		if k != "user" && k != "database" {
			cfg.RuntimeParams[k] = v
		}
	}
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rows, err := c.Exec(ctx, `SELECT pg_has_role(current_user, 'rds_iam', 'member')`).ReadAll()
	if err != nil || len(rows) != 1 || len(rows[0].Rows) != 1 || string(rows[0].Rows[0][0]) != "t" {
		c.Close(ctx)
		return nil, &pgconn.PgError{Code: "28P01", Message: `PAM authentication failed for user "` + cfg.User + `"`}
	}
	return c.Hijack()
}

// Verify checks token as RDS would for a connection as user to s: nil,
// or why it is refused (the client reads only "PAM authentication
// failed").
func (s *Server) Verify(token, user string) error {
	u, err := url.Parse("https://" + token)
	if err != nil || u.Host == "" {
		return errors.New("not a presigned URL")
	}
	if u.Host != s.Addr {
		return fmt.Errorf("signed for host %q, not %q", u.Host, s.Addr)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errors.New("bad query")
	}
	one := func(k string) string {
		if len(q[k]) != 1 {
			return ""
		}
		return q[k][0]
	}
	switch {
	case one("Action") != "connect":
		return errors.New("not Action=connect")
	case one("DBUser") != user:
		return fmt.Errorf("DBUser %q, not %q", one("DBUser"), user)
	case one("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
		return errors.New("not AWS4-HMAC-SHA256")
	case one("X-Amz-SignedHeaders") != "host":
		return errors.New("signed headers are not host alone")
	case subtle.ConstantTimeCompare([]byte(one("X-Amz-Security-Token")), []byte(SessionToken)) != 1:
		return errors.New("not the session token")
	}
	at, err := time.Parse("20060102T150405Z", one("X-Amz-Date"))
	if err != nil {
		return errors.New("bad X-Amz-Date")
	}
	life, err := strconv.Atoi(one("X-Amz-Expires"))
	if err != nil || life <= 0 || time.Duration(life)*time.Second > MaxTokenLife {
		return errors.New("bad X-Amz-Expires")
	}
	now := (*s.now.Load())()
	if now.Before(at.Add(-5*time.Minute)) || !now.Before(at.Add(time.Duration(life)*time.Second)) {
		return errors.New("expired, or signed in the future")
	}
	day := at.Format("20060102")
	scope := day + "/" + Region + "/rds-db/aws4_request"
	if one("X-Amz-Credential") != AccessKeyID+"/"+scope {
		return errors.New("not the stand-in's access key, day, region and service")
	}
	sig, err := hex.DecodeString(one("X-Amz-Signature"))
	if err != nil {
		return errors.New("bad signature encoding")
	}
	var keys []string
	for k := range q {
		if k != "X-Amz-Signature" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var cq []string
	for _, k := range keys {
		for _, v := range q[k] {
			cq = append(cq, uriEncode(k)+"="+uriEncode(v))
		}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	emptyHash := sha256.Sum256(nil)
	canonical := strings.Join([]string{"GET", path, strings.Join(cq, "&"), "host:" + u.Host + "\n", "host", hex.EncodeToString(emptyHash[:])}, "\n")
	ch := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + one("X-Amz-Date") + "\n" + scope + "\n" + hex.EncodeToString(ch[:])
	key := []byte("AWS4" + SecretAccessKey)
	for _, part := range []string{day, Region, "rds-db", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	if !hmac.Equal(hmacSHA256(key, toSign), sig) {
		return errors.New("signature does not match")
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// uriEncode is SigV4's URI encoding: every byte but A-Z a-z 0-9 - _ . ~
// as %XX, upper case.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// selfSigned is a TLS configuration with a throwaway certificate for
// 127.0.0.1.
func selfSigned() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "rdsiam stand-in"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, nil
}
