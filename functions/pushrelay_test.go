package functions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// moto calls one DynamoDB (or DynamoDB Streams) JSON operation on moto
// and decodes its answer into out (nil: none). moto reads the service
// from the credential scope and does not check the signature.
func moto(t *testing.T, ep s3test.Endpoint, target string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, ep.URL+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s3test.AccessKeyID+"/20261206/"+s3test.Region+
		"/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", target, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", target, err, b)
		}
	}
}

// hintTable creates a hint table as the template's PushHints (keyed by
// push.AttrID, a NEW_IMAGE stream) and returns its name and stream ARN.
func hintTable(t *testing.T, ep s3test.Endpoint) (string, string) {
	t.Helper()
	name := "hints-" + uuid.NewString()
	var created struct {
		TableDescription struct{ LatestStreamArn string }
	}
	moto(t, ep, "DynamoDB_20120810.CreateTable", map[string]any{
		"TableName":            name,
		"BillingMode":          "PAY_PER_REQUEST",
		"KeySchema":            []map[string]string{{"AttributeName": push.AttrID, "KeyType": "HASH"}},
		"AttributeDefinitions": []map[string]string{{"AttributeName": push.AttrID, "AttributeType": "S"}},
		"StreamSpecification":  map[string]any{"StreamEnabled": true, "StreamViewType": "NEW_IMAGE"},
	}, &created)
	return name, created.TableDescription.LatestStreamArn
}

// streamEvent reads every record of the stream's shards (GetShardIterator
// from TRIM_HORIZON, GetRecords) and shapes them as Lambda's DynamoDB
// event (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html,
// "Example event"): the records as the stream gives them, with
// eventSourceARN, and ApproximateCreationDateTime in whole seconds.
func streamEvent(t *testing.T, ep s3test.Endpoint, stream string) []map[string]any {
	t.Helper()
	var desc struct {
		StreamDescription struct{ Shards []struct{ ShardId string } }
	}
	moto(t, ep, "DynamoDBStreams_20120810.DescribeStream", map[string]string{"StreamArn": stream}, &desc)
	var records []map[string]any
	for _, sh := range desc.StreamDescription.Shards {
		var it struct{ ShardIterator string }
		moto(t, ep, "DynamoDBStreams_20120810.GetShardIterator", map[string]string{
			"StreamArn": stream, "ShardId": sh.ShardId, "ShardIteratorType": "TRIM_HORIZON"}, &it)
		var got struct{ Records []map[string]any }
		moto(t, ep, "DynamoDBStreams_20120810.GetRecords", map[string]any{"ShardIterator": it.ShardIterator, "Limit": 100}, &got)
		for _, r := range got.Records {
			r["eventSourceARN"] = stream
			if d, ok := r["dynamodb"].(map[string]any); ok {
				if f, ok := d["ApproximateCreationDateTime"].(float64); ok {
					d["ApproximateCreationDateTime"] = math.Floor(f)
				}
			}
			records = append(records, r)
		}
	}
	return records
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
	table, stream := hintTable(t, ep)
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
	records := streamEvent(t, ep, stream)
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
		"awsRegion": "us-east-1", "eventSourceARN": stream, "dynamodb": map[string]any{"Keys": map[string]any{push.AttrID: map[string]any{"S": "x"}},
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
