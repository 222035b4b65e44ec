package push_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/push"
	"github.com/pendinguploads/pendinguploads/internal/testkit/iotcoretest"
	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// standIn is IoT Core's data endpoint (iotcoretest) and a publisher to
// it through its HTTPS Publish, as the relay's: over TLS through the
// stand-in's proxy, signed for region.
func standIn(t *testing.T, region string) (*iotcoretest.Server, *push.IoT) {
	t.Helper()
	iot := iotcoretest.Start(t, iotcoretest.Options{Authorize: func(context.Context, events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
		return events.IoTCoreCustomAuthorizerResponse{}, errors.New("no subscriber here")
	}})
	p, err := push.NewIoT(iot.Endpoint(), aws.Config{Region: region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{Proxy: iot.Proxy, TLSClientConfig: &tls.Config{RootCAs: iot.RootCAs}}}})
	if err != nil {
		t.Fatal(err)
	}
	return iot, p
}

// image is a hint's item as the stream's new image carries it.
func image(topic, payload string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		push.AttrID:      events.NewStringAttribute(uuid.NewString()),
		push.AttrTopic:   events.NewStringAttribute(topic),
		push.AttrPayload: events.NewStringAttribute(payload),
		push.AttrExpires: events.NewNumberAttribute("1796547600"),
	}
}

func record(seq string, img map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventID: seq, EventName: "INSERT",
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq, NewImage: img}}
}

// TestPushRelayRecords: the relay publishes a hint record's topic and
// payload as the upload function would have, re-encoded (so nothing but
// a hint's fields leaves), and skips, logging each, what is not a hint
// Table wrote: no topic, a payload that is not JSON, a hint with unknown
// fields, no file, a topic not its workspace's, a payload over IoT
// Core's 128 KiB, a number where a string belongs; a deletion (TTL) and
// an update are not hints. None fails the batch.
func TestPushRelayRecords(t *testing.T) {
	iot, pub := standIn(t, "us-east-1")
	var logs bytes.Buffer
	r := &push.Relay{Publisher: pub, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ws, file := uuid.New(), uuid.New()
	good := push.Hint{WorkspaceID: ws, FileIDs: []uuid.UUID{file}}
	bad := map[string]map[string]events.DynamoDBAttributeValue{
		"NoTopic":        {push.AttrPayload: events.NewStringAttribute(string(good.Payload()))},
		"NotJSON":        image(push.Topic(ws), "{"),
		"UnknownField":   image(push.Topic(ws), `{"workspace_id":"`+ws.String()+`","file_ids":["`+file.String()+`"],"name":"a.pdf"}`),
		"NoFile":         image(push.Topic(ws), `{"workspace_id":"`+ws.String()+`","file_ids":[]}`),
		"AnotherTopic":   image(push.Topic(uuid.New()), string(good.Payload())),
		"Oversized":      image(push.Topic(ws), `{"workspace_id":"`+ws.String()+`","file_ids":["`+strings.Repeat(file.String()+`","`, 4000)+file.String()+`"]}`),
		"PayloadANumber": {push.AttrTopic: events.NewStringAttribute(push.Topic(ws)), push.AttrPayload: events.NewNumberAttribute("1")},
	}
	var ev events.DynamoDBEvent
	for name, img := range bad {
		ev.Records = append(ev.Records, record(name, img))
	}
	ev.Records = append(ev.Records,
		events.DynamoDBEventRecord{EventID: "ttl", EventName: "REMOVE", Change: events.DynamoDBStreamRecord{SequenceNumber: "1"}},
		events.DynamoDBEventRecord{EventID: "modify", EventName: "MODIFY", Change: events.DynamoDBStreamRecord{SequenceNumber: "2", NewImage: image(push.Topic(ws), string(good.Payload()))}},
		record("good", image(push.Topic(ws), `{"file_ids":["`+file.String()+`"], "workspace_id":"`+ws.String()+`"}`)))
	ans, err := r.Handle(context.Background(), ev)
	if err != nil || len(ans.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %v, failures %v; want neither", err, ans.BatchItemFailures)
	}
	got := iot.PublishedMessages()
	if len(got) != 1 || got[0].Topic != push.Topic(ws) || string(got[0].Payload) != string(good.Payload()) {
		t.Fatalf("published %v, want one: %s on %s", got, good.Payload(), push.Topic(ws))
	}
	for name := range bad {
		if !strings.Contains(logs.String(), "event_id="+name+" ") {
			t.Errorf("record %s: not logged as skipped:\n%s", name, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "hint record skipped"); n != len(bad) {
		t.Errorf("logged %d skipped records, want %d", n, len(bad))
	}
}

// TestPushRelayStopsAtAFailure: a publication IoT Core refuses (signed
// for another region) is the batch's one failure, by its sequence
// number, and the records after it are not published (Lambda hands the
// batch over again from that record).
func TestPushRelayStopsAtAFailure(t *testing.T) {
	iot, pub := standIn(t, "eu-west-1")
	var logs bytes.Buffer
	r := &push.Relay{Publisher: pub, Timeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ws := uuid.New()
	payload := string(push.Hint{WorkspaceID: ws, FileIDs: []uuid.UUID{uuid.New()}}.Payload())
	ans, err := r.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		record("17", image(push.Topic(ws), payload)), record("18", image(push.Topic(ws), payload))}})
	if err != nil || len(ans.BatchItemFailures) != 1 || ans.BatchItemFailures[0].ItemIdentifier != "17" {
		t.Fatalf("Handle: %v, failures %v; want the first record's", err, ans.BatchItemFailures)
	}
	if n := len(iot.PublishedMessages()); n != 0 {
		t.Errorf("published %d, want none", n)
	}
	if strings.Count(logs.String(), "upload hint not published") != 1 {
		t.Errorf("want one failure logged:\n%s", logs.String())
	}
}

// TestPushTable: Table writes a hint as one new item of the hint table
// (moto's DynamoDB): a random id, the topic and payload published
// before, and expires_at TableTTL from its clock; a table it may not
// write (here: none) is Publish's error, so the Notifier logs it.
func TestPushTable(t *testing.T) {
	ep := s3test.MustStart(t)
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{Region: s3test.Region, BaseEndpoint: aws.String(ep.URL),
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKeyID, s3test.SecretAccessKey, "")})
	name := "hints-" + uuid.NewString()
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(push.AttrID), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(push.AttrID), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1796544000, 0)
	tbl := push.NewTable(client, name)
	tbl.Now = func() time.Time { return now }
	ws := uuid.New()
	payload := push.Hint{WorkspaceID: ws, FileIDs: []uuid.UUID{uuid.New()}}.Payload()
	for range 2 {
		if err := tbl.Publish(ctx, push.Topic(ws), payload); err != nil {
			t.Fatal(err)
		}
	}
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("items: got %d, want 2 (each hint its own key)", len(out.Items))
	}
	for _, it := range out.Items {
		str := func(k string) string {
			switch v := it[k].(type) {
			case *types.AttributeValueMemberS:
				return "S:" + v.Value
			case *types.AttributeValueMemberN:
				return "N:" + v.Value
			}
			return "?"
		}
		if len(it) != 4 || str(push.AttrTopic) != "S:"+push.Topic(ws) || str(push.AttrPayload) != "S:"+string(payload) ||
			str(push.AttrExpires) != "N:1796547600" || uuid.Validate(strings.TrimPrefix(str(push.AttrID), "S:")) != nil {
			t.Errorf("item %v: want id, topic, payload and expires_at an hour on, nothing else", it)
		}
	}
	if err := push.NewTable(client, "no-such-table").Publish(ctx, push.Topic(ws), payload); err == nil {
		t.Error("Publish to a missing table: no error")
	}
}
