package push

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// IoT publishes through AWS IoT Core's HTTPS Publish (the iot-data
// service: POST https://<endpoint>/topics/<topic>?qos=0, SigV4 as
// iotdevicegateway), with the function's own credentials: the role needs
// iot:Publish on the topics. QoS 0: a hint is fire-and-forget, and IoT
// Core bills it as one message. Safe for concurrent use.
type IoT struct {
	endpoint string // host name, iot:Data-ATS
	region   string
	creds    aws.CredentialsProvider
	signer   *v4.Signer
	// HTTPClient sends the requests: the AWS configuration's, the one
	// every AWS call of the service makes (internal/awsenv: dial and
	// response-header timeouts); Publish is bounded by its context.
	HTTPClient aws.HTTPClient
	// Scheme is "https" (default); "http" only for a local stand-in.
	Scheme string
}

var _ Publisher = (*IoT)(nil)

// NewIoT returns a publisher to endpoint, the account's IoT data endpoint
// (aws iot describe-endpoint --endpoint-type iot:Data-ATS, a host name;
// host:port for a local stand-in),
// with cfg's region and credentials.
func NewIoT(endpoint string, cfg aws.Config) (*IoT, error) {
	if endpoint == "" || strings.ContainsAny(endpoint, "/?#@ ") {
		return nil, fmt.Errorf("push: want the IoT data endpoint's host name (…-ats.iot.<region>.amazonaws.com), got %q", endpoint)
	}
	if cfg.Region == "" || cfg.Credentials == nil {
		return nil, errors.New("push: the AWS configuration has no region or no credentials")
	}
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	return &IoT{endpoint: endpoint, region: cfg.Region, creds: cfg.Credentials, signer: v4.NewSigner(), HTTPClient: client}, nil
}

// Publish sends payload to topic at QoS 0.
func (p *IoT) Publish(ctx context.Context, topic string, payload []byte) error {
	scheme := p.Scheme
	if scheme == "" {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: p.endpoint, Path: "/topics/" + topic,
		RawPath: "/topics/" + url.PathEscape(topic), RawQuery: "qos=0"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	req.Header.Set("Content-Type", "application/json")
	creds, err := p.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("publish %s: credentials: %w", topic, err)
	}
	sum := sha256.Sum256(payload)
	if err := p.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "iotdevicegateway", p.region, time.Now()); err != nil {
		return fmt.Errorf("publish %s: sign: %w", topic, err)
	}
	resp, err := p.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("publish %s: %s: %s", topic, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}
