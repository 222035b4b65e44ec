package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// streamEvent reads the stream's records written since its last read,
// shaped as Lambda's DynamoDB event records.
func streamEvent(t *testing.T, stream *s3test.Stream) []map[string]any {
	t.Helper()
	recs, err := stream.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestPushRelay: the hint's whole route through the real binaries. The
// upload function (as in the stack's network, PUSH_HINT_TABLE set)
// commits an upload and writes its hint to the hint table (moto's
// DynamoDB); the table's stream records, read from moto and handed over
// as Lambda's DynamoDB event, go to the relay function, which publishes
// each hint through IoT Core's HTTPS Publish (SigV4, iotcoretest's
// stand-in, reached through its proxy and trusted by its certificate) on
// the workspace's topic with the payload the upload function published
// before the relay: {"workspace_id", "file_ids"}. A record handed over
// again is published again (at least once, harmless: one more list); a
// malformed record (no payload, a topic not its workspace's, unknown
// fields) and a deletion by TTL are skipped without failing the batch; a
// publication IoT Core refuses fails that record alone
// (batchItemFailures, its sequence number), for Lambda to retry.
func TestPushRelay(t *testing.T) {
	t.Parallel()
	ep := s3test.MustStart(t)
	table, stream := s3test.NewStreamTable(t, ep, push.AttrID)
	iot := iotcoretest.Start(t, iotcoretest.Options{Authorize: func(context.Context, events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
		return events.IoTCoreCustomAuthorizerResponse{}, errors.New("no subscriber in this test")
	}})
	certFile := filepath.Join(t.TempDir(), "iot.pem")
	if err := os.WriteFile(certFile, iot.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	upload := start(t, "upload", append(append(dbEnv(knownDB(t)), ep.Env()...),
		"PUSH_HINT_TABLE="+table, "DYNAMODB_ENDPOINT="+ep.URL)...)
	var staged struct {
		Files []stagedFile `json:"files"`
	}
	wantJSON(t, invokeHTTP(t, upload, readEvent(t, "upload")), http.StatusOK, &staged)
	if len(staged.Files) == 0 {
		t.Fatal("upload staged no file")
	}
	records := streamEvent(t, stream)
	if len(records) != 1 || records[0]["eventName"] != "INSERT" {
		t.Fatalf("the hint table's stream: got %v, want one INSERT", records)
	}

	relayEnv := []string{"PUSH_ENDPOINT=" + iot.Endpoint(), "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=AKIATESTPUSHRELAY",
		"AWS_SECRET_ACCESS_KEY=secret", "AWS_SESSION_TOKEN=", "HTTPS_PROXY=" + iot.ProxyURL.String(), "SSL_CERT_FILE=" + certFile}
	relay := start(t, "pushrelay", relayEnv...)
	event := func(recs ...map[string]any) []byte {
		b, err := json.Marshal(map[string]any{"Records": recs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	answer := func(ev []byte) events.DynamoDBEventResponse {
		t.Helper()
		var ans events.DynamoDBEventResponse
		if err := json.Unmarshal(invoke(t, relay, ev), &ans); err != nil {
			t.Fatal(err)
		}
		return ans
	}

	// Malformed records, built from the real one.
	clone := func(change func(img map[string]any)) map[string]any {
		b, _ := json.Marshal(records[0])
		var r map[string]any
		_ = json.Unmarshal(b, &r)
		change(r["dynamodb"].(map[string]any)["NewImage"].(map[string]any))
		return r
	}
	noPayload := clone(func(img map[string]any) { delete(img, push.AttrPayload) })
	otherTopic := clone(func(img map[string]any) {
		img[push.AttrTopic] = map[string]any{"S": push.Topic(uuid.New())}
	})
	extraField := clone(func(img map[string]any) {
		p := img[push.AttrPayload].(map[string]any)["S"].(string)
		img[push.AttrPayload] = map[string]any{"S": strings.TrimSuffix(p, "}") + `,"name":"secret.pdf"}`}
	})
	removed := map[string]any{"eventID": "ttl", "eventName": "REMOVE", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
		"awsRegion": "us-east-1", "eventSourceARN": stream.ARN, "dynamodb": map[string]any{"Keys": map[string]any{push.AttrID: map[string]any{"S": "x"}},
			"SequenceNumber": "1", "SizeBytes": 10, "StreamViewType": "NEW_IMAGE"}}

	if ans := answer(event(noPayload, records[0], otherTopic, removed, records[0], extraField)); len(ans.BatchItemFailures) != 0 {
		t.Fatalf("batchItemFailures %v, want none", ans.BatchItemFailures)
	}
	ws := uuid.MustParse(workspacePlaceholder)
	var ids []uuid.UUID
	for _, f := range staged.Files {
		ids = append(ids, uuid.MustParse(f.FileID))
	}
	want := iotcoretest.Published{Topic: push.Topic(ws), Payload: push.Hint{WorkspaceID: ws, FileIDs: ids}.Payload()}
	got := iot.PublishedMessages()
	if len(got) != 2 {
		t.Fatalf("published %d messages, want 2 (the record, handed over twice); refusals %v", len(got), iot.Refusals())
	}
	for _, m := range got {
		if m.Topic != want.Topic || string(m.Payload) != string(want.Payload) {
			t.Errorf("published %s %s, want %s %s", m.Topic, m.Payload, want.Topic, want.Payload)
		}
	}
	// The log lines come through the process's output pipe, which may
	// still hold the last one when the answer is in: wait a little for it.
	for deadline := time.Now().Add(5 * time.Second); strings.Count(relay.Logs(), "hint record skipped") < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(relay.Logs(), "hint record skipped"); n != 3 {
		t.Errorf("logged %d skipped records, want 3 (no payload, another topic, an unknown field):\n%s", n, relay.Logs())
	}

	// The sample event (events/pushrelay.json): the placeholder file's hint.
	if ans := answer(readEvent(t, "pushrelay")); len(ans.BatchItemFailures) != 0 {
		t.Fatalf("events/pushrelay.json: batchItemFailures %v, want none", ans.BatchItemFailures)
	}
	sample := push.Hint{WorkspaceID: ws, FileIDs: []uuid.UUID{uuid.MustParse(filePlaceholder)}}.Payload()
	if got := iot.PublishedMessages(); len(got) != 3 || got[2].Topic != push.Topic(ws) || string(got[2].Payload) != string(sample) {
		t.Errorf("published %v, want the third %s on %s (events/pushrelay.json)", got, sample, push.Topic(ws))
	}

	// IoT Core refuses (signed for another region): the record is the
	// batch's failure, by its sequence number, and the records after it
	// are left for the retry.
	elsewhere := start(t, "pushrelay", append(relayEnv, "AWS_REGION=eu-west-1")...)
	relay = elsewhere
	seq := records[0]["dynamodb"].(map[string]any)["SequenceNumber"].(string)
	ans := answer(event(records[0], noPayload))
	if len(ans.BatchItemFailures) != 1 || ans.BatchItemFailures[0].ItemIdentifier != seq {
		t.Errorf("batchItemFailures %v, want the record's %s", ans.BatchItemFailures, seq)
	}
	if len(iot.PublishedMessages()) != 3 {
		t.Errorf("a refused publication was delivered")
	}
	if strings.Contains(relay.Logs(), "hint record skipped") {
		t.Errorf("the records after the failed one were read; Lambda hands them over again from the failure")
	}
}
