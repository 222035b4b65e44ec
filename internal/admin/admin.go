// Package admin manages workspace tokens on request: create, list and
// revoke, over the workspace tokens' rows (tokens.go). It is the admin function's
// handler (functions/admin, invoked with IAM, no API route), so that an
// operator can mint a token without a tunnel to the database; and
// pendingctl's token command sends the same Request to it, or, with
// DATABASE_URL, hands it to a Service of its own: one implementation
// either way.
//
// The protocol is JSON both ways. A request:
//
//	{"action":"create","workspace":"<uuid>"}
//	{"action":"list","workspace":"<uuid>","limit":100}  (workspace optional: every workspace's)
//	{"action":"revoke","workspace":"<uuid>","match":"<id, prefix or the token itself>"}
//
// An answer names its action:
//
//	{"create":{"token":"pu_…","id":"…","prefix":"pu_…","workspace_id":"…","created_at":"…"}}
//	{"list":{"tokens":[{"id","workspace_id","prefix","created_at","last_used_at","revoked_at"}, …]}}
//	{"revoke":{"revoked":1}}
//
// A request the service refuses (not an object, an unknown field or action, a
// workspace that is not a UUID or is the nil UUID, a create for a
// workspace the platform's database does not hold, a revoke that matches
// no live token) is answered, not failed:
// {"error":{"code":"bad_request"|"workspace_not_found"|"not_found",
// "message":"…"}}, and the invocation succeeds. A failure (the database
// does not answer) is a Lambda function error: the caller gets
// X-Amz-Function-Error with the error's message, and the function's Errors
// metric counts it. So a typo never looks like an outage, and an outage is
// never an answer.
//
// The token is in create's answer, once; only its SHA-256 is stored, and
// it is never logged. A list never carries a token or a hash.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// Actions of a Request.
const (
	ActionCreate = "create"
	ActionList   = "list"
	ActionRevoke = "revoke"
)

// Codes of an Error.
const (
	// CodeBadRequest: the request is not one the service takes.
	CodeBadRequest = "bad_request"
	// CodeNotFound: revoke matched no live token of the workspace.
	CodeNotFound = "not_found"
	// CodeWorkspaceNotFound: create named a workspace the database does
	// not hold (ErrWorkspaceNotFound); the HTTP API's 404 code for the
	// same.
	CodeWorkspaceNotFound = string(wire.CodeWorkspaceNotFound)
)

// List's bounds: DefaultLimit tokens when Limit is 0, at most MaxLimit.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Request is one request to the service.
type Request struct {
	Action string `json:"action"`
	// Workspace is the workspace's UUID, never the nil UUID: required by
	// create and revoke; list lists every workspace's tokens without it.
	Workspace string `json:"workspace,omitempty"`
	// Match (revoke) is a token's ID or prefix, as list shows them, or
	// the token itself. It is never logged.
	Match string `json:"match,omitempty"`
	// Limit (list) is how many tokens at most: 1..MaxLimit, 0 for
	// DefaultLimit.
	Limit int `json:"limit,omitempty"`
}

// Answer is the service's answer: exactly one of its fields is set.
type Answer struct {
	Create *Created `json:"create,omitempty"`
	List   *Listed  `json:"list,omitempty"`
	Revoke *Revoked `json:"revoke,omitempty"`
	Error  *Error   `json:"error,omitempty"`
}

// Created is create's answer: the token, shown this once, and what is
// stored of it.
type Created struct {
	Token       string    `json:"token"`
	ID          string    `json:"id"`
	Prefix      string    `json:"prefix"`
	WorkspaceID uuid.UUID `json:"workspace_id"`
	CreatedAt   time.Time `json:"created_at"`
}

// Listed is list's answer, newest first.
type Listed struct {
	Tokens []Token `json:"tokens"`
}

// Token is what is stored of a token, without the token or its hash.
type Token struct {
	ID          string     `json:"id"`
	WorkspaceID uuid.UUID  `json:"workspace_id"`
	Prefix      string     `json:"prefix"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// Revoked is revoke's answer: how many live tokens it revoked (at least 1).
type Revoked struct {
	Revoked int `json:"revoked"`
}

// Error is a refused request: Code for programs, Message for people.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Service answers requests over a token store. It is safe for concurrent
// use.
type Service struct {
	db DB
	// Logger receives one line per request that changed or read tokens,
	// never a token (default slog.Default()).
	Logger *slog.Logger
}

// New returns the service over db (app.App's DB).
func New(db DB) *Service { return &Service{db: db} }

func (s *Service) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Invoke is the admin function's Lambda handler: it decodes payload as a
// Request (strictly: an unknown field is refused) and answers it with
// Handle. A payload that is not a Request is answered with a bad_request
// Error; the returned error is a failure of the database.
func (s *Service) Invoke(ctx context.Context, payload json.RawMessage) (Answer, error) {
	ctx, end := reqlog.Begin(ctx, "")
	defer end()
	var req Request
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return refuse(CodeBadRequest, "the request is not a JSON object of action, workspace, match, limit: %v", err), nil
	}
	ans, err := s.Handle(ctx, req)
	if err != nil {
		s.logger().ErrorContext(ctx, "admin request failed", "action", req.Action, "err", err.Error())
	}
	return ans, err
}

// Handle answers req. A request it refuses is answered with an Error
// (CodeBadRequest, CodeWorkspaceNotFound, CodeNotFound); the returned
// error is a failure of the database, with the answer empty.
func (s *Service) Handle(ctx context.Context, req Request) (Answer, error) {
	var ws *uuid.UUID // nil: list's every workspace
	switch req.Action {
	case ActionCreate, ActionRevoke, ActionList:
	case "":
		return refuse(CodeBadRequest, "no action: want create, list or revoke"), nil
	default:
		return refuse(CodeBadRequest, "unknown action %q: want create, list or revoke", req.Action), nil
	}
	if req.Workspace == "" && req.Action != ActionList {
		return refuse(CodeBadRequest, "%s needs a workspace", req.Action), nil
	}
	if req.Workspace != "" {
		id, err := uuid.Parse(req.Workspace)
		if err != nil {
			return refuse(CodeBadRequest, "workspace %q is not a UUID", req.Workspace), nil
		}
		if id == uuid.Nil {
			return refuse(CodeBadRequest, "workspace %s is the nil UUID: no workspace (list without a workspace lists every one)", id), nil
		}
		ws = &id
	}
	log := s.logger().With("action", req.Action)
	if ws != nil {
		log = log.With("workspace_id", *ws)
	}
	switch req.Action {
	case ActionCreate:
		if req.Match != "" || req.Limit != 0 {
			return refuse(CodeBadRequest, "create takes only a workspace"), nil
		}
		tok, info, err := CreateToken(ctx, s.db, *ws)
		if errors.Is(err, ErrWorkspaceNotFound) {
			return refuse(CodeWorkspaceNotFound, "workspace %s does not exist", *ws), nil
		}
		if err != nil {
			return Answer{}, err
		}
		log.InfoContext(ctx, "token created", "token_id", info.ID, "token_prefix", info.Prefix)
		return Answer{Create: &Created{Token: tok, ID: info.ID, Prefix: info.Prefix, WorkspaceID: info.WorkspaceID, CreatedAt: info.CreatedAt}}, nil
	case ActionList:
		limit := req.Limit
		if limit == 0 {
			limit = DefaultLimit
		}
		if req.Match != "" || limit < 1 || limit > MaxLimit {
			return refuse(CodeBadRequest, "list takes a workspace and a limit of 1 to %d", MaxLimit), nil
		}
		infos, err := ListTokens(ctx, s.db, ws, limit)
		if err != nil {
			return Answer{}, err
		}
		out := &Listed{Tokens: make([]Token, 0, len(infos))}
		for _, t := range infos {
			out.Tokens = append(out.Tokens, Token(t))
		}
		log.InfoContext(ctx, "tokens listed", "count", len(out.Tokens))
		return Answer{List: out}, nil
	default: // revoke
		if req.Match == "" || req.Limit != 0 {
			return refuse(CodeBadRequest, "revoke takes a workspace and a match: a token's ID or prefix, or the token"), nil
		}
		n, err := RevokeToken(ctx, s.db, *ws, req.Match)
		if errors.Is(err, ErrTokenNotFound) {
			return refuse(CodeNotFound, "no live token of workspace %s matches", *ws), nil
		}
		if err != nil {
			return Answer{}, err
		}
		log.InfoContext(ctx, "tokens revoked", "count", n)
		return Answer{Revoke: &Revoked{Revoked: n}}, nil
	}
}

func refuse(code, format string, args ...any) Answer {
	return Answer{Error: &Error{Code: code, Message: fmt.Sprintf(format, args...)}}
}
