package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Client talks to one pendinguploads API with one bearer token. Set the
// optional fields before the first call; it is then safe for concurrent
// use. The token is never logged, never put in an error, and never sent
// anywhere but BaseURL's host: redirects to the bucket and presigned PUTs
// go without it.
type Client struct {
	baseURL *url.URL
	token   string

	// HTTPClient makes the requests (default: a client with no overall
	// timeout: every call is bounded by its context instead). Its
	// CheckRedirect is not used: the client follows the one redirect of
	// the API (content's 307) itself.
	HTTPClient *http.Client
	// Retry bounds the retries of the calls that are safe to retry
	// (default DefaultRetry).
	Retry RetryPolicy
	// MaxRequestBytes is the request cap the client assumes before the
	// server tells it otherwise with a 413 (default
	// DefaultMaxRequestBytes, the server's default MAX_REQUEST_BYTES).
	MaxRequestBytes int64
	// UserAgent is sent with every request (default "pendinguploads-client").
	UserAgent string
	// PartsInFlight is the most parts of one file PutPresigned sends at
	// once, for a file that goes in parts (default DefaultPartsInFlight).
	PartsInFlight int

	// learned is the request cap named by the server's last 413.
	learned atomic.Int64
	limitsState
}

// DefaultMaxRequestBytes is the server's default MAX_REQUEST_BYTES (4 MiB).
//
// This constant and the two below restate the server's caps (its
// internal/limits, which this module cannot import); a test of the server
// module holds them equal.
const DefaultMaxRequestBytes = 4 << 20

// MaxFileBytes is the server's default per-file cap (MAX_FILE_BYTES's
// default, 25 MiB); Upload uses the cap the server announces at GET
// /uploads/limits, and this one only when the server has no such route.
const MaxFileBytes = 25 << 20

// MaxFilesPerRequest is the most files one upload or presign request takes (64).
const MaxFilesPerRequest = 64

// New returns a client of the API at baseURL (scheme and host, and an
// optional path prefix such as an API Gateway stage) acting with token.
// It returns an error for a URL that is not absolute http(s) or an empty
// token; the error never contains the token.
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: API URL %q: want http(s)://host[/prefix]", baseURL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: API URL: want no credentials, query or fragment")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, errors.New("client: empty token")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return nil, errors.New("client: token contains white space")
	}
	return &Client{baseURL: u, token: token}, nil
}

// BaseURL returns the API's base URL.
func (c *Client) BaseURL() string { return c.baseURL.String() }

// RetryPolicy bounds retries with exponential backoff and full jitter.
// Only calls that are safe to repeat are retried: list, content (before
// its body is handed over), ack (idempotent by contract), presign, resume
// and abort (nothing is visible until commit), the presigned PUT and each
// part's (same key, same bytes), and commit (a commit whose uploads were
// all committed before answers the same files, storing nothing). A
// multipart upload is never retried: a lost answer may hide a success,
// and a second try would stage the files twice. It is sent again only
// after an answer that proves nothing was stored (a 413 that teaches the
// request cap).
type RetryPolicy struct {
	// MaxAttempts is the most tries of one call, the first included
	// (default 4; 1 disables retries).
	MaxAttempts int
	// BaseDelay is the delay ceiling before the second try; it doubles for
	// each further try (default 250ms).
	BaseDelay time.Duration
	// MaxDelay caps one delay, a Retry-After included (default 5s).
	MaxDelay time.Duration
	// RetryAfterBudget is how long a call waits in all for a server that
	// asks it to come back: while its answers carry Retry-After (the
	// API's 503 while its database resumes from a pause, about 15 s, 30 s
	// after a day), a call that retries (MaxAttempts above 1) is tried
	// again past MaxAttempts as long as its waits together stay within
	// this, and at most MaxRetryAfterAttempts times in all (default 30s;
	// negative: MaxAttempts alone bounds the tries).
	RetryAfterBudget time.Duration
}

// MaxRetryAfterAttempts is the most tries of one call that
// RetryPolicy.RetryAfterBudget lets run past MaxAttempts.
const MaxRetryAfterAttempts = 16

// DefaultRetry is the retry policy of a zero RetryPolicy.
var DefaultRetry = RetryPolicy{MaxAttempts: 4, BaseDelay: 250 * time.Millisecond, MaxDelay: 5 * time.Second, RetryAfterBudget: 30 * time.Second}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRetry.MaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultRetry.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultRetry.MaxDelay
	}
	if p.RetryAfterBudget == 0 {
		p.RetryAfterBudget = DefaultRetry.RetryAfterBudget
	}
	return p
}

// comesBack reports whether a call whose try number attempt was answered
// with retryAfter (0: none) is tried again past MaxAttempts, having
// waited, delay included, that long in all.
func (p RetryPolicy) comesBack(attempt int, retryAfter, waited time.Duration) bool {
	return p.MaxAttempts > 1 && retryAfter > 0 && waited <= p.RetryAfterBudget && attempt < MaxRetryAfterAttempts
}

// delay is the wait before try number attempt+1 (attempt counts from 1).
func (p RetryPolicy) delay(attempt int, retryAfter time.Duration) time.Duration {
	ceil := p.BaseDelay << min(attempt-1, 20)
	if ceil > p.MaxDelay || ceil <= 0 {
		ceil = p.MaxDelay
	}
	d := time.Duration(rand.Int64N(int64(ceil)) + 1)
	if retryAfter > d {
		d = min(retryAfter, p.MaxDelay)
	}
	return d
}

func (c *Client) httpClient() *http.Client {
	hc := http.DefaultClient
	if c.HTTPClient != nil {
		hc = c.HTTPClient
	}
	cp := *hc
	// The client follows redirects itself, so that the bearer never leaves
	// the API's host.
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

func (c *Client) maxRequest() int64 {
	if m := c.learned.Load(); m > 0 {
		return m
	}
	if c.MaxRequestBytes > 0 {
		return c.MaxRequestBytes
	}
	return DefaultMaxRequestBytes
}

func (c *Client) userAgent() string {
	if c.UserAgent != "" {
		return c.UserAgent
	}
	return "pendinguploads-client"
}

// endpoint returns the URL of an API path (segments are escaped).
func (c *Client) endpoint(query url.Values, segments ...string) string {
	u := *c.baseURL
	var b strings.Builder
	b.WriteString(strings.TrimRight(u.Path, "/"))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	u.Path = b.String()
	u.RawPath = ""
	u.RawQuery = query.Encode()
	return u.String()
}

// request is one API call.
type request struct {
	method string
	url    string
	// body makes a fresh body for each try (nil: no body).
	body        func() (io.ReadCloser, error)
	size        int64
	contentType string
	// auth sends the bearer (API calls; not S3).
	auth bool
	// header is extra headers, sent verbatim.
	header map[string]string
	// retry says whether the call is safe to repeat.
	retry bool
	op    string
}

// send makes the request, retrying by the policy when req.retry (past
// MaxAttempts while the server asks to come back, within
// RetryAfterBudget), and returns a response with a 2xx or 3xx status.
// Any other status comes back as an *APIError (the body read and closed).
func (c *Client) send(ctx context.Context, req request) (*http.Response, error) {
	pol := c.Retry.withDefaults()
	attempts := 1
	if req.retry {
		attempts = pol.MaxAttempts
	}
	hc := c.httpClient()
	var lastErr error
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		resp, err := c.try(ctx, hc, req)
		if err == nil && resp.StatusCode < 400 {
			return resp, nil
		}
		var retryAfter time.Duration
		if err == nil {
			retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
			err = readAPIError(resp, req.op)
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", req.op, context.Cause(ctx))
		}
		if !retryable(err) {
			return nil, lastErr
		}
		d := pol.delay(attempt, retryAfter)
		if attempt >= attempts && !(req.retry && pol.comesBack(attempt, retryAfter, waited+d)) {
			return nil, lastErr
		}
		waited += d
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s: %w (last error: %w)", req.op, context.Cause(ctx), lastErr)
		case <-t.C:
		}
	}
}

func (c *Client) try(ctx context.Context, hc *http.Client, req request) (*http.Response, error) {
	var body io.ReadCloser
	if req.body != nil {
		b, err := req.body()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.op, err)
		}
		body = b
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, req.url, body)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, fmt.Errorf("%s: %w", req.op, err)
	}
	if body != nil {
		hr.ContentLength = req.size
		if req.size == 0 {
			hr.Body = http.NoBody
		}
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	for k, v := range req.header {
		if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Host") {
			continue // set by ContentLength / the URL
		}
		hr.Header.Set(k, v)
	}
	hr.Header.Set("User-Agent", c.userAgent())
	if req.auth {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, &TransportError{Op: req.op, Err: scrubURLError(err)}
	}
	return resp, nil
}

// scrubURLError drops the query of a *url.Error's URL: a presigned URL
// carries a signature that should not end up in logs.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.RawQuery != "" {
			u.RawQuery = ""
			return &url.Error{Op: ue.Op, URL: u.String() + "?…", Err: ue.Err}
		}
	}
	return err
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

// retryable says whether a failed try may be repeated: a connection error,
// a 503 (the API's "retry shortly"), a 429, or a gateway's 502/504.
func retryable(err error) bool {
	var te *TransportError
	if errors.As(err, &te) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// jsonBody returns a body func and size for v.
func jsonBody(v any) (func() (io.ReadCloser, error), int64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, err
	}
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, int64(len(b)), nil
}

// maxJSONBytes bounds a JSON answer the client reads.
const maxJSONBytes = 8 << 20

// decodeJSON reads a JSON answer into v and closes the body.
func decodeJSON(resp *http.Response, op string, v any) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &APIError{Status: resp.StatusCode, Message: "unexpected status " + resp.Status, Op: op}
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBytes))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return nil
}
