// Package iotendpoint is the CloudFormation custom resource
// (Custom::IotEndpoint) behind the iotendpoint function, which turns push
// on from zero: Create and Update look up the account's AWS IoT Core data
// endpoint (iot:DescribeEndpoint, endpointType iot:Data-ATS) and answer
// it as Data.Address, the template's PUSH_ENDPOINT when its PushEndpoint
// parameter is "discover"; Delete does nothing. It answers CloudFormation
// on every request, whatever failed (a custom resource that never answers
// holds a deploy, a rollback or a stack delete until its ServiceTimeout).
//
// The one call is signed by hand with the SDK's SigV4 signer (service
// "iot"), as push.IoT signs its Publish: the SDK's iot service module is
// 7 MB of source for one GET, and made the bootstrap 0.9 MB larger.
// https://docs.aws.amazon.com/iot/latest/apireference/API_DescribeEndpoint.html
package iotendpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/cfnresource"
	"github.com/pendinguploads/pendinguploads/internal/reqlog"
)

// PhysicalID stays the same across updates: CloudFormation would read a
// new one as a replacement.
const PhysicalID = "pendinguploads-iot-data-endpoint"

// EndpointType is the endpoint looked up: the data endpoint with Amazon
// Trust Services certificates, the one AWS recommends and the publisher
// and pull --watch expect.
const EndpointType = "iot:Data-ATS"

// EndpointEnv overrides the IoT control plane's URL: the SDK's own
// service-specific override variable (AWS_ENDPOINT_URL_<SERVICE>), for a
// local stand-in (the tests; the template declares no environment for
// the function, so sam local invoke calls the real IoT). Unset (in AWS):
// https://iot.<region>.amazonaws.com, .com.cn in the China regions
// (https://docs.aws.amazon.com/general/latest/gr/iot-core.html).
const EndpointEnv = "AWS_ENDPOINT_URL_IOT"

// Bounds of the look-up.
const (
	attempts     = 3               // a throttled or failed call is tried again, twice
	retryWait    = time.Second     // before the second attempt; doubled before the third
	answerMargin = 2 * time.Second // kept from the invocation's deadline for the answer to CloudFormation
	maxBody      = 64 << 10
)

// ValidAddress is what an address must look like: the template's
// PushEndpoint pattern (…-ats.iot.<region>.amazonaws.com[.cn]).
var ValidAddress = regexp.MustCompile(`^[a-z0-9]+(-ats)?\.iot\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// Resource handles the custom resource's requests. Build it with New.
// Safe for concurrent use.
type Resource struct {
	endpoint string // the control plane's base URL
	cfg      aws.Config
	signer   *v4.Signer
	initErr  error
	log      *slog.Logger
}

// New returns the resource over getenv's AWS configuration (awsenv:
// AWS_REGION and the role's keys, as Lambda sets them) and EndpointEnv.
// A configuration that cannot be read does not stop it: Create and Update
// then fail with it as their reason, and Delete still succeeds.
func New(getenv func(string) string, log *slog.Logger) *Resource {
	if log == nil {
		log = slog.Default()
	}
	r := &Resource{signer: v4.NewSigner(), log: log}
	r.cfg, r.initErr = awsenv.Load(getenv, log)
	if r.initErr != nil {
		log.Error("init failed", "err", r.initErr.Error())
		return r
	}
	r.endpoint = strings.TrimRight(strings.TrimSpace(getenv(EndpointEnv)), "/")
	if r.endpoint == "" {
		r.endpoint = "https://iot." + r.cfg.Region + ".amazonaws.com"
		if strings.HasPrefix(r.cfg.Region, "cn-") {
			r.endpoint += ".cn"
		}
	}
	if u, err := url.Parse(r.endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		r.initErr = fmt.Errorf("%s: want a URL such as https://iot.us-east-1.amazonaws.com, got %q", EndpointEnv, r.endpoint)
		log.Error("init failed", "err", r.initErr.Error())
	}
	return r
}

// Handle is a cfn.CustomResourceFunction (for cfn.LambdaWrap, which PUTs
// the answer to the request's ResponseURL). Delete always succeeds and
// calls nothing. Create and Update answer Data.Address, the account's
// iot:Data-ATS endpoint; they fail with the setup's error, or IoT's
// answer (its status, error type and message), as the reason.
func (r *Resource) Handle(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	ctx, end := reqlog.Begin(ctx, "")
	defer end()
	if ev.RequestType == cfn.RequestDelete {
		r.log.InfoContext(ctx, "stack delete: nothing to remove")
		return PhysicalID, nil, nil
	}
	if r.initErr != nil {
		return PhysicalID, nil, cfnresource.Reason("iotendpoint cannot start: %v", r.initErr)
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-answerMargin))
		defer cancel()
	}
	addr, err := r.lookUp(ctx)
	if err != nil {
		r.log.ErrorContext(ctx, "iot:DescribeEndpoint failed", "err", err.Error(), "request_type", ev.RequestType)
		return PhysicalID, nil, cfnresource.Reason("%v", err)
	}
	r.log.InfoContext(ctx, "IoT data endpoint", "address", addr, "request_type", ev.RequestType)
	return PhysicalID, map[string]any{"Address": addr}, nil
}

// lookUp calls DescribeEndpoint, again after a throttle, a 5xx or a
// network error (at most attempts in all, within ctx).
func (r *Resource) lookUp(ctx context.Context) (string, error) {
	wait := retryWait
	for i := 1; ; i++ {
		addr, retry, err := r.describe(ctx)
		if err == nil || !retry || i == attempts {
			return addr, err
		}
		r.log.WarnContext(ctx, "iot:DescribeEndpoint: trying again", "err", err.Error(), "attempt", i)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", err
		case <-t.C:
		}
		wait *= 2
	}
}

// describe makes one DescribeEndpoint call; retry reports whether
// another attempt may succeed.
func (r *Resource) describe(ctx context.Context) (addr string, retry bool, err error) {
	u := r.endpoint + "/endpoint?" + url.Values{"endpointType": {EndpointType}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", false, fmt.Errorf("iot:DescribeEndpoint: %w", err)
	}
	creds, err := r.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", false, fmt.Errorf("iot:DescribeEndpoint: credentials: %w", err)
	}
	empty := sha256.Sum256(nil)
	if err := r.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(empty[:]), "iot", r.cfg.Region, time.Now()); err != nil {
		return "", false, fmt.Errorf("iot:DescribeEndpoint: sign: %w", err)
	}
	resp, err := r.cfg.HTTPClient.Do(req)
	if err != nil {
		return "", ctx.Err() == nil, fmt.Errorf("iot:DescribeEndpoint %s: %w", r.endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", ctx.Err() == nil, fmt.Errorf("iot:DescribeEndpoint: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, refusal(resp, body)
	}
	var out struct {
		EndpointAddress string `json:"endpointAddress"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", false, fmt.Errorf("iot:DescribeEndpoint: the answer is not JSON: %w", err)
	}
	if !ValidAddress.MatchString(out.EndpointAddress) {
		return "", false, fmt.Errorf("iot:DescribeEndpoint answered %q, not an IoT data endpoint's host name", out.EndpointAddress)
	}
	return out.EndpointAddress, false, nil
}

// refusal is IoT's error answer: its status, error type (the
// X-Amzn-ErrorType header, as the REST-JSON protocol sends it) and
// message.
func refusal(resp *http.Response, body []byte) error {
	typ, _, _ := strings.Cut(resp.Header.Get("X-Amzn-ErrorType"), ":")
	var e struct {
		Message  string `json:"message"`
		Message2 string `json:"Message"`
	}
	_ = json.Unmarshal(body, &e)
	msg := e.Message
	if msg == "" {
		msg = e.Message2
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	if typ == "" {
		typ = "error"
	}
	return errors.New("iot:DescribeEndpoint: " + resp.Status + ": " + typ + ": " + msg)
}
