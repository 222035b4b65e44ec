// Package rdsdatatest stands in for the RDS Data API's ExecuteStatement
// on a real HTTP server in front of a real test Postgres: POST /Execute
// with the JSON body the SDK sends (resourceArn, secretArn, database,
// sql), answered in the documented shape (numberOfRecordsUpdated,
// records of typed fields) or with the documented errors
// (x-amzn-ErrorType BadRequestException, DatabaseErrorException)
// (https://docs.aws.amazon.com/rdsdataservice/latest/APIReference/API_ExecuteStatement.html).
//
// As the Data API does, it checks the request is signed for rds-data,
// that resourceArn is its cluster, and that secretArn is the cluster's
// secret; it then reads that secret from Secrets Manager (moto in the
// tests: the caller must have created it) and runs the statement as the
// secret's username in the named database. Statements with parameters,
// transactions and result-set options are refused: the service sends
// none.
package rdsdatatest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxBody bounds a request's body.
const maxBody = 64 << 10

// Server is the stand-in. Its fields are set by Start.
type Server struct {
	URL        string // base URL, the SDK's BaseEndpoint
	ClusterARN string
	SecretARN  string

	backend  *pgconn.Config
	secrets  *secretsmanager.Client
	executed atomic.Int64
	resuming atomic.Int64
}

// Resuming makes the next n requests answer DatabaseResumingException,
// as the Data API does while a paused Aurora Serverless v2 cluster
// resumes; nothing runs.
func (s *Server) Resuming(n int) { s.resuming.Store(int64(n)) }

// Start serves the Data API of cluster clusterARN, whose master secret
// is secretARN on sm, running statements on the Postgres of backendURL
// (its host and port; user and password come from the secret, the
// database from the request). It stops at tb's cleanup.
func Start(tb testing.TB, backendURL, clusterARN, secretARN string, sm *secretsmanager.Client) *Server {
	tb.Helper()
	cfg, err := pgconn.ParseConfig(backendURL)
	if err != nil {
		tb.Fatalf("rdsdatatest: backend url: %v", err)
	}
	s := &Server{ClusterARN: clusterARN, SecretARN: secretARN, backend: cfg, secrets: sm}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Executed is how many statements ran.
func (s *Server) Executed() int64 { return s.executed.Load() }

type request struct {
	ResourceArn           string          `json:"resourceArn"`
	SecretArn             string          `json:"secretArn"`
	Database              string          `json:"database"`
	SQL                   string          `json:"sql"`
	Schema                string          `json:"schema"`
	TransactionID         string          `json:"transactionId"`
	Parameters            json.RawMessage `json:"parameters"`
	ResultSetOptions      json.RawMessage `json:"resultSetOptions"`
	IncludeResultMetadata bool            `json:"includeResultMetadata"`
}

type field struct {
	StringValue *string `json:"stringValue,omitempty"`
	IsNull      *bool   `json:"isNull,omitempty"`
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/Execute" {
		fail(w, http.StatusNotFound, "UnknownOperationException", "rdsdatatest serves POST /Execute only")
		return
	}
	if !strings.Contains(req.Header.Get("Authorization"), "/rds-data/aws4_request") {
		fail(w, http.StatusForbidden, "ForbiddenException", "request not signed for rds-data")
		return
	}
	if s.resuming.Add(-1) >= 0 {
		fail(w, http.StatusBadRequest, "DatabaseResumingException", "rdsdatatest: the cluster is resuming")
		return
	}
	s.resuming.Store(0)
	var in request
	if err := json.NewDecoder(io.LimitReader(req.Body, maxBody)).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "BadRequestException", "body: "+err.Error())
		return
	}
	switch {
	case in.ResourceArn != s.ClusterARN:
		fail(w, http.StatusBadRequest, "BadRequestException", "resourceArn is not the cluster's ARN")
		return
	case in.SecretArn != s.SecretARN:
		fail(w, http.StatusBadRequest, "BadRequestException", "secretArn is not the cluster's secret")
		return
	case in.SQL == "" || in.Database == "":
		fail(w, http.StatusBadRequest, "BadRequestException", "sql and database are required")
		return
	case len(in.Parameters) > 0 && string(in.Parameters) != "null", in.TransactionID != "", len(in.ResultSetOptions) > 0, in.Schema != "":
		fail(w, http.StatusBadRequest, "BadRequestException", "rdsdatatest runs plain statements only")
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	sec, err := s.secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(in.SecretArn)})
	if err != nil || sec.SecretString == nil {
		fail(w, http.StatusBadRequest, "BadRequestException", "secret cannot be read")
		return
	}
	var cred struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal([]byte(*sec.SecretString), &cred); err != nil || cred.Username == "" {
		fail(w, http.StatusBadRequest, "BadRequestException", "secret is not {username, password}")
		return
	}
	cfg := s.backend.Copy()
	cfg.User, cfg.Password, cfg.Database = cred.Username, cred.Password, in.Database
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "3D000" {
			fail(w, http.StatusNotFound, "DatabaseNotFoundException", pgErr.Message)
			return
		}
		fail(w, http.StatusBadRequest, "DatabaseErrorException", err.Error())
		return
	}
	defer conn.Close(context.Background())
	results, err := conn.Exec(ctx, in.SQL).ReadAll()
	if err != nil {
		fail(w, http.StatusBadRequest, "DatabaseErrorException", err.Error())
		return
	}
	s.executed.Add(1)
	out := struct {
		NumberOfRecordsUpdated int64     `json:"numberOfRecordsUpdated"`
		Records                [][]field `json:"records,omitempty"`
	}{}
	for _, r := range results {
		out.NumberOfRecordsUpdated += r.CommandTag.RowsAffected()
		for _, row := range r.Rows {
			var rec []field
			for _, v := range row {
				if v == nil {
					t := true
					rec = append(rec, field{IsNull: &t})
					continue
				}
				str := string(v)
				rec = append(rec, field{StringValue: &str})
			}
			out.Records = append(out.Records, rec)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// fail answers a Data API error as restJson1 does: its type in
// x-amzn-ErrorType and a JSON message.
func fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
