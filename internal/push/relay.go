package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
)

// MaxPayloadBytes bounds a hint the relay publishes: AWS IoT Core's
// message size quota, 128 KiB (as localbroker.MaxPacketBytes). A hint of
// a whole batch of files is far below it.
const MaxPayloadBytes = 128 * 1024

// errMalformed marks a record that is not a hint Table wrote: published
// never, retried never (it would fail the same way).
var errMalformed = errors.New("not a hint")

// Relay publishes the hints Table writes, read from the hint table's
// stream (functions/pushrelay: a DynamoDB event source mapping, outside
// the stack's network), to the broker (IoT Core's HTTPS Publish): the
// same topic and payload the upload function published before there was
// a relay, so subscribers see no difference. Safe for concurrent use.
//
// Delivery is at least once: Lambda may hand a record over again, and the
// hint is then published again, which costs a watcher one more list.
type Relay struct {
	Publisher Publisher
	// Timeout bounds one publication (default DefaultTimeout).
	Timeout time.Duration
	// Logger receives the records skipped and the publications that
	// failed (default slog.Default()).
	Logger *slog.Logger
}

// Handle publishes ev's new items in order. A record that is not a new
// hint (a deletion by TTL, an update) is skipped; a malformed one is
// logged and skipped. At the first publication that fails, Handle stops
// and reports that record as the batch's failure
// (FunctionResponseTypes ReportBatchItemFailures): Lambda retries from
// it, within the event source mapping's bounds. It never returns an
// error.
func (r *Relay) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, rec := range ev.Records {
		if rec.EventName != string(events.DynamoDBOperationTypeInsert) {
			continue
		}
		topic, payload, err := hintOf(rec.Change.NewImage)
		if err != nil {
			log.WarnContext(ctx, "hint record skipped", "event_id", rec.EventID, "err", err)
			continue
		}
		if err := r.publish(ctx, topic, payload); err != nil {
			log.WarnContext(ctx, "upload hint not published; Lambda retries it, else the workspace's fallback poll will find the files",
				"event_id", rec.EventID, "topic", topic, "err", err)
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
				{ItemIdentifier: rec.Change.SequenceNumber}}}, nil
		}
	}
	return events.DynamoDBEventResponse{}, nil
}

func (r *Relay) publish(ctx context.Context, topic string, payload []byte) error {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.Publisher.Publish(ctx, topic, payload)
}

// hintOf returns the topic and payload of a hint's item as Table wrote
// it, checked: the payload a Hint with a workspace and at least one file,
// at most MaxPayloadBytes, and the topic that workspace's. The payload is
// the hint re-encoded, so nothing but a hint's fields is published.
func hintOf(img map[string]events.DynamoDBAttributeValue) (string, []byte, error) {
	topic, ok1 := stringAttr(img, AttrTopic)
	raw, ok2 := stringAttr(img, AttrPayload)
	if !ok1 || !ok2 {
		return "", nil, fmt.Errorf("%w: no %s or %s string", errMalformed, AttrTopic, AttrPayload)
	}
	if len(raw) > MaxPayloadBytes {
		return "", nil, fmt.Errorf("%w: payload of %d bytes, over %d", errMalformed, len(raw), MaxPayloadBytes)
	}
	var h Hint
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return "", nil, fmt.Errorf("%w: payload: %v", errMalformed, err)
	}
	if h.WorkspaceID == uuid.Nil || len(h.FileIDs) == 0 {
		return "", nil, fmt.Errorf("%w: no workspace or no file", errMalformed)
	}
	if topic != Topic(h.WorkspaceID) {
		return "", nil, fmt.Errorf("%w: topic %q is not workspace %s's", errMalformed, topic, h.WorkspaceID)
	}
	return topic, h.Payload(), nil
}

func stringAttr(img map[string]events.DynamoDBAttributeValue, name string) (string, bool) {
	v, ok := img[name]
	if !ok || v.DataType() != events.DataTypeString {
		return "", false
	}
	return v.String(), true
}
