package contracttest

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit/apptest"
)

// TestPushLimitsMatchDocument: GET /uploads/limits with push on (an IoT
// Core endpoint and its authorizer) matches openapi.yaml, and says where
// to subscribe.
func TestPushLimitsMatchDocument(t *testing.T) {
	// The publisher is built from the AWS configuration; it never runs here.
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	srv := apptest.NewServer(t, apptest.Options{Env: map[string]string{
		"PUSH_ENDPOINT": "a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com", "PUSH_AUTHORIZER": "stack-push"}})
	c := newChecker(t, srv.URL)
	ans := c.do("limits with push", request(t, "GET", srv.URL+"/uploads/limits", "", "", nil), http.StatusOK)
	var l struct {
		Push *struct {
			URL, TopicTemplate, Authorizer string
		} `json:"push"`
	}
	if err := json.Unmarshal(ans.body, &l); err != nil {
		t.Fatal(err)
	}
	want := "wss://a1b2c3d4e5f6g7-ats.iot.us-east-1.amazonaws.com/mqtt?x-amz-customauthorizer-name=stack-push"
	if l.Push == nil || l.Push.URL != want || l.Push.Authorizer != "stack-push" {
		t.Errorf("push: got %s, want url %s and authorizer stack-push", ans.body, want)
	}
}
