package push

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
)

// The attributes of a hint's item in the hint table (PUSH_HINT_TABLE):
// what the publish carried before the relay, its topic and its payload,
// under a key of its own, and the time after which DynamoDB's TTL deletes
// it. Nothing else: no name, no byte of a file.
const (
	AttrID      = "id"         // S: a random UUID, the table's partition key
	AttrTopic   = "topic"      // S: Topic(workspace)
	AttrPayload = "payload"    // S: Hint.Payload()
	AttrExpires = "expires_at" // N: Unix seconds, the table's TTL attribute
)

// TableTTL is how long a hint's item is kept: the relay reads it from the
// table's stream within a second; DynamoDB's TTL deletes it (within days
// of expires_at, for nothing: deletions by TTL are free).
const TableTTL = time.Hour

// ItemPutter is the one DynamoDB call Table makes (*dynamodb.Client).
type ItemPutter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Table hands each hint to the relay (functions/pushrelay) as an item of
// the hint table, whose stream the relay reads and publishes to IoT Core
// (Relay): from the stack's private subnets, DynamoDB is reached through a
// free gateway endpoint where IoT Core's data plane would need an
// interface endpoint billed by the hour. The function's role needs
// dynamodb:PutItem on that table only. Safe for concurrent use.
type Table struct {
	client ItemPutter
	name   string
	// Now is the clock of expires_at (default time.Now).
	Now func() time.Time
}

var _ Publisher = (*Table)(nil)

// NewTable returns a publisher to the hint table name through client.
func NewTable(client ItemPutter, name string) *Table { return &Table{client: client, name: name} }

// NewTableFromAWS returns a publisher to the hint table name with cfg's
// region, credentials and HTTP client; endpoint, when set, replaces
// DynamoDB's (a local stand-in).
func NewTableFromAWS(cfg aws.Config, name, endpoint string) *Table {
	return NewTable(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), name)
}

// Publish writes topic and payload as one new item; the relay publishes
// them. It returns PutItem's error.
func (t *Table) Publish(ctx context.Context, topic string, payload []byte) error {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	_, err := t.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(t.name),
		Item: map[string]types.AttributeValue{
			AttrID:      &types.AttributeValueMemberS{Value: uuid.NewString()},
			AttrTopic:   &types.AttributeValueMemberS{Value: topic},
			AttrPayload: &types.AttributeValueMemberS{Value: string(payload)},
			AttrExpires: &types.AttributeValueMemberN{Value: strconv.FormatInt(now().Add(TableTTL).Unix(), 10)},
		},
	})
	if err != nil {
		return fmt.Errorf("publish %s: hint table %s: %w", topic, t.name, err)
	}
	return nil
}
