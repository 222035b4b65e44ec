package s3test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Statement is one Allow statement of an IAM policy, its ARNs resolved:
// the actions it grants (s3:GetObject; a trailing * matches any suffix),
// the resources (arn:aws:s3:::bucket or arn:aws:s3:::bucket/prefix*),
// and an optional StringLike condition on s3:prefix (ListBucket's).
type Statement struct {
	Actions   []string
	Resources []string
	// PrefixLike, when not empty, are the s3:prefix patterns the request
	// must match (StringLike): a request without a prefix matches none.
	PrefixLike []string
}

// Policy is what one principal may do: the union of its statements
// (there is no Deny here, as there is none in the template).
type Policy []Statement

// Decision is how the IAMProxy judged one S3 call.
type Decision struct {
	Principal string // the access key that signed it
	Operation string // the S3 API, e.g. DeleteObjects
	Action    string // the IAM action checked
	Resource  string // the ARN checked
	Allowed   bool
}

func (d Decision) String() string {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("%s %s: %s on %s %s", d.Principal, d.Operation, d.Action, d.Resource, verdict)
}

// IAMProxy is a loopback HTTP proxy in front of an S3 endpoint that judges
// each call as AWS's IAM would for the principal that signed it (the
// access key of the Authorization header, or of X-Amz-Credential for a
// presigned URL: a presigned request acts with its signer's rights): the
// IAM action of each API (HeadObject is s3:GetObject, UploadPart and
// CompleteMultipartUpload are s3:PutObject, ListParts is
// s3:ListMultipartUploadParts...), DeleteObjects per key (the keys
// refused come back as AccessDenied errors in a 200, the others are
// deleted), CopyObject on its target (s3:PutObject) and source
// (s3:GetObject), and a GetObject or HeadObject of a missing key answered
// 403, not 404, when the principal may not s3:ListBucket the bucket.
// A DynamoDB call (moto serves it on the same port: an X-Amz-Target of
// DynamoDB_20120810.<API>) is judged as dynamodb:<API> on its table's
// ARN (TableARN). A denied call is answered 403 AccessDenied (DynamoDB's
// 400 AccessDeniedException) and never reaches the endpoint. Give each principal a key of its own (AWS_ACCESS_KEY_ID);
// moto ignores which. Principals without a policy (the test's own
// client) may do anything. Safe for concurrent use.
type IAMProxy struct {
	URL string

	target   *url.URL
	client   *s3.Client // the test's own, to delete allowed keys one by one
	policies map[string]Policy

	mu        sync.Mutex
	decisions []Decision
}

// maxDeleteBody bounds a DeleteObjects request's body (1,000 keys of up
// to 1,024 bytes).
const maxDeleteBody = 2 << 20

// StartIAMProxy serves an IAMProxy of ep on a free loopback port until
// tb's cleanup, judging the principals of policies (access key → policy).
func StartIAMProxy(tb testing.TB, ep Endpoint, policies map[string]Policy) *IAMProxy {
	tb.Helper()
	u, err := url.Parse(ep.URL)
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	p := &IAMProxy{target: u, client: NewClient(ep), policies: policies}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serve(w, r, rp)
	}))
	tb.Cleanup(hs.Close)
	p.URL = hs.URL
	return p
}

// Endpoint is the proxy as an S3 endpoint, for a principal's environment
// (Env, with its own AWS_ACCESS_KEY_ID appended after).
func (p *IAMProxy) Endpoint() Endpoint { return Endpoint{URL: p.URL} }

// Decisions returns every call judged so far, in order.
func (p *IAMProxy) Decisions() []Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Decision(nil), p.decisions...)
}

// Denied returns the calls denied so far.
func (p *IAMProxy) Denied() []Decision {
	var out []Decision
	for _, d := range p.Decisions() {
		if !d.Allowed {
			out = append(out, d)
		}
	}
	return out
}

var credentialKey = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// principal is the access key that signed r, or "".
func principal(r *http.Request) string {
	if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
		k, _, _ := strings.Cut(c, "/")
		return k
	}
	if m := credentialKey.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	return ""
}

// check is one IAM check a call needs.
type check struct {
	action, resource, prefix string
}

func (p *IAMProxy) serve(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) {
	who := principal(r)
	policy, judged := p.policies[who]
	if !judged {
		rp.ServeHTTP(w, r)
		return
	}
	if op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), dynamoDBTarget); ok {
		p.dynamoDB(w, r, rp, who, policy, op)
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	op, checks := operation(r, bucket, key)
	if op == "DeleteObjects" {
		p.deleteObjects(w, r, who, policy, bucket)
		return
	}
	for _, c := range checks {
		if !p.judge(who, op, policy, c) {
			denied(w, r)
			return
		}
	}
	if (op == "GetObject" || op == "HeadObject") && !policy.allows("s3:ListBucket", bucketARN(bucket), "") {
		// Without s3:ListBucket, S3 does not say whether the key exists:
		// a missing key is 403, as a denied one.
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if rec.Code == http.StatusNotFound {
			denied(w, r)
			return
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	rp.ServeHTTP(w, r)
}

// operation names the S3 API of r and the IAM checks it needs.
func operation(r *http.Request, bucket, key string) (string, []check) {
	q := r.URL.Query()
	obj := objectARN(bucket, key)
	switch {
	case key == "" && r.Method == http.MethodGet && q.Has("uploads"):
		return "ListMultipartUploads", []check{{"s3:ListBucketMultipartUploads", bucketARN(bucket), ""}}
	case key == "" && r.Method == http.MethodGet:
		return "ListObjects", []check{{"s3:ListBucket", bucketARN(bucket), q.Get("prefix")}}
	case key == "" && r.Method == http.MethodPost && q.Has("delete"):
		return "DeleteObjects", nil // judged per key
	case key == "":
		return r.Method + " bucket", []check{{"s3:" + r.Method + "Bucket*", bucketARN(bucket), ""}} // never granted
	case r.Method == http.MethodGet && q.Has("uploadId"):
		return "ListParts", []check{{"s3:ListMultipartUploadParts", obj, ""}}
	case r.Method == http.MethodGet:
		return "GetObject", []check{{"s3:GetObject", obj, ""}}
	case r.Method == http.MethodHead:
		return "HeadObject", []check{{"s3:GetObject", obj, ""}}
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		src, _ := url.PathUnescape(strings.TrimPrefix(r.Header.Get("X-Amz-Copy-Source"), "/"))
		src, _, _ = strings.Cut(src, "?versionId=")
		sb, sk, _ := strings.Cut(src, "/")
		op := "CopyObject"
		if q.Has("partNumber") {
			op = "UploadPartCopy"
		}
		return op, []check{{"s3:PutObject", obj, ""}, {"s3:GetObject", objectARN(sb, sk), ""}}
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return "UploadPart", []check{{"s3:PutObject", obj, ""}}
	case r.Method == http.MethodPut:
		return "PutObject", []check{{"s3:PutObject", obj, ""}}
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "CreateMultipartUpload", []check{{"s3:PutObject", obj, ""}}
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "CompleteMultipartUpload", []check{{"s3:PutObject", obj, ""}}
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return "AbortMultipartUpload", []check{{"s3:AbortMultipartUpload", obj, ""}}
	case r.Method == http.MethodDelete:
		return "DeleteObject", []check{{"s3:DeleteObject", obj, ""}}
	}
	return r.Method + " object", []check{{"s3:" + r.Method + "Object*", obj, ""}} // never granted
}

func bucketARN(bucket string) string { return "arn:aws:s3:::" + bucket }
func objectARN(bucket, key string) string {
	return "arn:aws:s3:::" + bucket + "/" + key
}

func (p *IAMProxy) judge(who, op string, policy Policy, c check) bool {
	ok := policy.allows(c.action, c.resource, c.prefix)
	p.mu.Lock()
	p.decisions = append(p.decisions, Decision{who, op, c.action, c.resource, ok})
	p.mu.Unlock()
	return ok
}

// allows reports whether a statement grants action on resource (with
// s3:prefix prefix, for ListBucket).
func (pol Policy) allows(action, resource, prefix string) bool {
	for _, st := range pol {
		if !matchAny(st.Actions, action) || !matchAny(st.Resources, resource) {
			continue
		}
		if len(st.PrefixLike) > 0 && (prefix == "" || !matchAny(st.PrefixLike, prefix)) {
			continue
		}
		return true
	}
	return false
}

// matchAny matches s against IAM patterns, where * is any run of
// characters and ? one (path.Match's * stops at '/', so it is not used).
func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		re := "^" + strings.ReplaceAll(strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, ".*"), `\?`, ".") + "$"
		if regexp.MustCompile(re).MatchString(s) {
			return true
		}
	}
	return false
}

// deleteRequest and deleteResult are DeleteObjects' XML.
type deleteRequest struct {
	Objects []struct {
		Key string `xml:"Key"`
	} `xml:"Object"`
	Quiet bool `xml:"Quiet"`
}

type deleteResult struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
	Deleted []struct {
		Key string `xml:"Key"`
	} `xml:"Deleted"`
	Errors []deleteError `xml:"Error"`
}

type deleteError struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// deleteObjects answers DeleteObjects as S3 does under IAM: each key is
// judged (s3:DeleteObject); the allowed ones are deleted, the others come
// back as AccessDenied errors of a 200.
func (p *IAMProxy) deleteObjects(w http.ResponseWriter, r *http.Request, who string, policy Policy, bucket string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxDeleteBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req deleteRequest
	if err := xml.Unmarshal(body, &req); err != nil {
		http.Error(w, "malformed DeleteObjects body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var res deleteResult
	for _, o := range req.Objects {
		if !p.judge(who, "DeleteObjects", policy, check{"s3:DeleteObject", objectARN(bucket, o.Key), ""}) {
			res.Errors = append(res.Errors, deleteError{o.Key, "AccessDenied", "Access Denied"})
			continue
		}
		if _, err := p.client.DeleteObject(r.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.Key)}); err != nil {
			res.Errors = append(res.Errors, deleteError{o.Key, "InternalError", err.Error()})
			continue
		}
		if !req.Quiet {
			res.Deleted = append(res.Deleted, struct {
				Key string `xml:"Key"`
			}{o.Key})
		}
	}
	out, _ := xml.Marshal(res)
	w.Header().Set("Content-Type", "application/xml")
	_, _ = w.Write(append([]byte(xml.Header), out...))
}

// denied answers 403 AccessDenied as S3 does (no body for HEAD).
func denied(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, xml.Header+`<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
	}
}

// dynamoDBTarget prefixes the X-Amz-Target of DynamoDB's API.
const dynamoDBTarget = "DynamoDB_20120810."

// maxDynamoDBBody bounds a judged DynamoDB request's body (an item is
// at most 400 KB).
const maxDynamoDBBody = 1 << 20

// motoAccount is the account moto's ARNs name.
const motoAccount = "123456789012"

// TableARN is the ARN of table name as IAM judges a DynamoDB call on it
// through the proxy (moto's account, Region).
func TableARN(name string) string {
	return "arn:aws:dynamodb:" + Region + ":" + motoAccount + ":table/" + name
}

// dynamoDB judges one DynamoDB call: dynamodb:<op> on the table its body
// names.
func (p *IAMProxy) dynamoDB(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy, who string, policy Policy, op string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxDynamoDBBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct{ TableName string }
	_ = json.Unmarshal(body, &req)
	if !p.judge(who, op, policy, check{"dynamodb:" + op, TableARN(req.TableName), ""}) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.service#AccessDeniedException","message":"not authorized to perform dynamodb:`+op+`"}`)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	rp.ServeHTTP(w, r)
}
