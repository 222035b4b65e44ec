package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// withAPIGWRequestID returns event with requestContext.requestId set to id
// (the field is the same in the HTTP API's and the REST API's events).
func withAPIGWRequestID(t testing.TB, event []byte, id string) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(event, &ev); err != nil {
		t.Fatal(err)
	}
	rc, _ := ev["requestContext"].(map[string]any)
	if rc == nil {
		t.Fatal("event has no requestContext")
	}
	rc["requestId"] = id
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// invocationLines stops rt (so that its output is complete) and returns
// each line it wrote, decoded; a line that is not a JSON object fails the
// test.
func invocationLines(t *testing.T, rt *lambdatest.Runtime) []map[string]any {
	t.Helper()
	rt.Stop()
	var lines []map[string]any
	for _, l := range strings.Split(rt.Logs(), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("log line is not JSON: %q", l)
			continue
		}
		lines = append(lines, m)
	}
	return lines
}

// TestLogLinesCarryRequestIDs runs upload as Lambda does, three times (a
// cold start, a warm one, and a refused request), and holds every line the
// process wrote, its log lines and its EMF metric lines alike, to carry the
// invocation's Lambda request id and API Gateway request id, and
// cold_start exactly on the first invocation's lines: so that an operator
// can join the access log ($context.requestId) to the function's lines.
// The sweep's lines carry its Lambda request id.
func TestLogLinesCarryRequestIDs(t *testing.T) {
	t.Parallel()
	url := knownDB(t)

	t.Run("upload", func(t *testing.T) {
		rt := start(t, "upload", dbEnv(url)...)
		upload := readEvent(t, "upload")
		refused := bytes.ReplaceAll(upload, []byte(adminToken), []byte("not-the-admin-token-0123456789"))
		apigw := map[string]string{} // Lambda request id -> API Gateway request id
		var first string
		for i, ev := range [][]byte{upload, upload, refused} {
			gw := []string{"gw-cold-Pk7sVh0=", "gw-warm-Qm8tWi1=", "gw-refused-Rn9uXj2="}[i]
			ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
			res, err := rt.Invoke(ctx, withAPIGWRequestID(t, ev, gw))
			cancel()
			if err != nil || res.Err != nil {
				t.Fatalf("invoke %d: %v %v", i, err, res.Err)
			}
			apigw[res.RequestID] = gw
			if i == 0 {
				first = res.RequestID
			}
		}

		seen := map[string]int{}
		for _, l := range invocationLines(t, rt) {
			id, _ := l["aws_request_id"].(string)
			gw, ok := apigw[id]
			if !ok {
				t.Errorf("line without an invocation's aws_request_id: %v", l)
				continue
			}
			seen[id]++
			if l["apigw_request_id"] != gw {
				t.Errorf("line of %s: apigw_request_id %v, want %s: %v", id, l["apigw_request_id"], gw, l)
			}
			if cold := l["cold_start"] == true; cold != (id == first) {
				t.Errorf("line of %s: cold_start %v, want %v: %v", id, l["cold_start"], id == first, l)
			}
		}
		for id, gw := range apigw {
			if seen[id] == 0 {
				t.Errorf("invocation %s (%s) wrote no line", id, gw)
			}
		}
	})

	t.Run("sweep", func(t *testing.T) {
		rt := start(t, "sweep", "DATABASE_URL="+url)
		ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
		defer cancel()
		res, err := rt.Invoke(ctx, readEvent(t, "sweep"))
		if err != nil || res.Err != nil {
			t.Fatalf("invoke: %v %v", err, res.Err)
		}
		lines := invocationLines(t, rt)
		if len(lines) == 0 {
			t.Fatal("sweep wrote no line")
		}
		for _, l := range lines {
			if l["aws_request_id"] != res.RequestID || l["cold_start"] != true {
				t.Errorf("line: got aws_request_id %v cold_start %v, want %s true: %v",
					l["aws_request_id"], l["cold_start"], res.RequestID, l)
			}
			if _, ok := l["apigw_request_id"]; ok {
				t.Errorf("a scheduled sweep's line has apigw_request_id: %v", l)
			}
		}
	})
}
