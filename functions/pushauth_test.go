package functions_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/pgtest"
)

// pushPasswordPlaceholder is the token, base64 as IoT Core sends an MQTT
// password, of events/pushauth.json.
var pushPasswordPlaceholder = base64.StdEncoding.EncodeToString([]byte("WORKSPACE_TOKEN_FOR_LOCAL_INVOKE"))

// authorize invokes the push authorizer with event and decodes its answer.
func authorize(t *testing.T, rt *lambdatest.Runtime, event []byte) events.IoTCoreCustomAuthorizerResponse {
	t.Helper()
	payload := invoke(t, rt, event)
	var ans events.IoTCoreCustomAuthorizerResponse
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ans); err != nil {
		t.Fatalf("answer %s: %v", payload, err)
	}
	return ans
}

// TestPushAuthorizer runs the push authorizer (functions/pushauth) on
// IoT Core's event shape, events/pushauth.json: a workspace token of the
// workspace in the MQTT username is admitted with a policy that lets the
// connection use its own client id, subscribe to and receive from its
// workspace's topic, and nothing else (no publish, no wildcard); another
// workspace's token, a revoked or unknown one, an admin token, a client
// id not the workspace's and a connection without MQTT credentials are
// refused (an answer, not an error); a database that does not answer is
// a function error (IoT Core refuses the connection). The token is never
// logged.
func TestPushAuthorizer(t *testing.T) {
	t.Parallel()
	url := pgtest.MustURL(t)
	rt := start(t, "pushauth", "DATABASE_URL="+url)
	pool := openPool(t, url)
	ctx := context.Background()
	ws := uuid.MustParse(workspacePlaceholder)
	other := uuid.New()
	tok, _, err := admin.CreateToken(ctx, pool, ws)
	if err != nil {
		t.Fatal(err)
	}
	otherTok, _, err := admin.CreateToken(ctx, pool, other)
	if err != nil {
		t.Fatal(err)
	}
	revoked, _, err := admin.CreateToken(ctx, pool, ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeToken(ctx, pool, ws, revoked); err != nil {
		t.Fatal(err)
	}
	sample := readEvent(t, "pushauth")
	with := func(password string, more ...string) []byte {
		ev := bytes.ReplaceAll(sample, []byte(pushPasswordPlaceholder), []byte(base64.StdEncoding.EncodeToString([]byte(password))))
		for i := 0; i+1 < len(more); i += 2 {
			ev = bytes.ReplaceAll(ev, []byte(more[i]), []byte(more[i+1]))
		}
		return ev
	}

	ans := authorize(t, rt, with(tok))
	if !ans.IsAuthenticated || !regexp.MustCompile(`^[a-zA-Z0-9]{1,128}$`).MatchString(ans.PrincipalID) ||
		ans.DisconnectAfterInSeconds != 86400 || ans.RefreshAfterInSeconds != 600 || len(ans.PolicyDocuments) != 1 {
		t.Fatalf("the workspace's own token: got %+v, want authenticated, an alphanumeric principal, 86400/600 s and one policy", ans)
	}
	const arn = "arn:aws:iot:us-east-1:123456789012"
	topic := "pendinguploads/" + workspacePlaceholder + "/uploads"
	want := map[string]string{
		"iot:Connect":   arn + ":client/" + workspacePlaceholder + "-laptop1",
		"iot:Subscribe": arn + ":topicfilter/" + topic,
		"iot:Receive":   arn + ":topic/" + topic,
	}
	doc := ans.PolicyDocuments[0]
	got := map[string]string{}
	for _, st := range doc.Statement {
		if st.Effect != "Allow" || len(st.Action) != 1 || len(st.Resource) != 1 {
			t.Errorf("statement %+v: want one Allow of one action on one resource", st)
			continue
		}
		got[st.Action[0]] = st.Resource[0]
	}
	if doc.Version != "2012-10-17" || len(got) != len(want) || len(doc.Statement) != len(want) {
		t.Errorf("policy %+v: want version 2012-10-17 and exactly %v", doc, want)
	}
	for action, res := range want {
		if got[action] != res {
			t.Errorf("policy: %s on %q, want on %q", action, got[action], res)
		}
	}
	if raw, _ := json.Marshal(doc); bytes.Contains(raw, []byte("Publish")) || bytes.Contains(raw, []byte("*")) {
		t.Errorf("policy %s allows a publish or a wildcard", raw)
	}

	for _, c := range []struct {
		name  string
		event []byte
	}{
		{"another workspace's token", with(otherTok)},
		{"a revoked token", with(revoked)},
		{"an unknown token", with("pu_unknown")},
		{"the admin token", with(adminToken)},
		{"the token under another workspace's id", with(tok, `"username": "`+workspacePlaceholder, `"username": "`+other.String())},
		{"a client id not the workspace's", with(tok, `"clientId": "`+workspacePlaceholder+`-laptop1"`, `"clientId": "`+other.String()+`"`)},
		{"a client id with a wildcard", with(tok, `-laptop1"`, `-*"`)},
		{"no MQTT credentials", []byte(`{"token":"","signatureVerified":false,"protocols":["tls","http"],"protocolData":{"tls":{"serverName":"x"}},"connectionMetadata":{"id":"c"}}`)},
	} {
		if ans := authorize(t, rt, c.event); ans.IsAuthenticated || len(ans.PolicyDocuments) != 0 {
			t.Errorf("%s: got %+v, want refused with no policy", c.name, ans)
		}
	}

	t.Run("DatabaseDown", func(t *testing.T) {
		down := start(t, "pushauth", "DATABASE_URL="+deadDatabaseURL(t))
		ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
		defer cancel()
		res, err := down.Invoke(ctx, with(tok))
		if err != nil {
			t.Fatal(err)
		}
		if res.Err == nil {
			t.Errorf("got answer %s; want a function error (IoT Core then refuses the connection)", res.Payload)
		}
	})

	if logs := rt.Logs(); strings.Contains(logs, tok) || strings.Contains(logs, otherTok) || strings.Contains(logs, base64.StdEncoding.EncodeToString([]byte(tok))) {
		t.Errorf("the authorizer logged a token:\n%s", logs)
	}
}
