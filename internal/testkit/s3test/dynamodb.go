package s3test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// moto serves DynamoDB and DynamoDB Streams on the same port as S3: a
// table with a stream stands in for the hint table (push.Table), and
// Stream reads its records as Lambda's event source mapping would hand
// them to a function.

// call sends one DynamoDB (or DynamoDB Streams) JSON operation to ep and
// decodes its answer into out (nil: none). moto reads the service from
// the credential scope and does not check the signature.
func call(ctx context.Context, ep Endpoint, target string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+AccessKeyID+"/20261206/"+Region+
		"/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", target, resp.Status, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// NewStreamTable creates an on-demand table keyed by the string
// attribute key, with a NEW_IMAGE stream, as the template's hint table,
// and returns its name and its stream.
func NewStreamTable(tb testing.TB, ep Endpoint, key string) (string, *Stream) {
	tb.Helper()
	name := "table-" + uuid.NewString()
	var created struct {
		TableDescription struct{ LatestStreamArn string }
	}
	if err := call(context.Background(), ep, "DynamoDB_20120810.CreateTable", map[string]any{
		"TableName":            name,
		"BillingMode":          "PAY_PER_REQUEST",
		"KeySchema":            []map[string]string{{"AttributeName": key, "KeyType": "HASH"}},
		"AttributeDefinitions": []map[string]string{{"AttributeName": key, "AttributeType": "S"}},
		"StreamSpecification":  map[string]any{"StreamEnabled": true, "StreamViewType": "NEW_IMAGE"},
	}, &created); err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	return name, &Stream{ep: ep, ARN: created.TableDescription.LatestStreamArn, iterators: map[string]string{}}
}

// Stream reads a table's stream from its start, shard by shard, each
// call to Next going on from where the last one stopped. Safe for
// concurrent use.
type Stream struct {
	ep  Endpoint
	ARN string

	mu        sync.Mutex
	iterators map[string]string // shard → next iterator
}

// Next returns the records written since the last call (at most 100 a
// shard), shaped as Lambda's DynamoDB event records
// (https://docs.aws.amazon.com/lambda/latest/dg/with-ddb.html, "Example
// event"): the stream's records with eventSourceARN, and
// ApproximateCreationDateTime in whole seconds, as Lambda sends it.
func (s *Stream) Next(ctx context.Context) ([]map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var desc struct {
		StreamDescription struct{ Shards []struct{ ShardId string } }
	}
	if err := call(ctx, s.ep, "DynamoDBStreams_20120810.DescribeStream", map[string]string{"StreamArn": s.ARN}, &desc); err != nil {
		return nil, err
	}
	var records []map[string]any
	for _, sh := range desc.StreamDescription.Shards {
		it, ok := s.iterators[sh.ShardId]
		if !ok {
			var got struct{ ShardIterator string }
			if err := call(ctx, s.ep, "DynamoDBStreams_20120810.GetShardIterator", map[string]string{
				"StreamArn": s.ARN, "ShardId": sh.ShardId, "ShardIteratorType": "TRIM_HORIZON"}, &got); err != nil {
				return nil, err
			}
			it = got.ShardIterator
		}
		var got struct {
			Records           []map[string]any
			NextShardIterator string
		}
		if err := call(ctx, s.ep, "DynamoDBStreams_20120810.GetRecords", map[string]any{"ShardIterator": it, "Limit": 100}, &got); err != nil {
			return nil, err
		}
		s.iterators[sh.ShardId] = got.NextShardIterator
		for _, r := range got.Records {
			r["eventSourceARN"] = s.ARN
			if d, ok := r["dynamodb"].(map[string]any); ok {
				if f, ok := d["ApproximateCreationDateTime"].(float64); ok {
					d["ApproximateCreationDateTime"] = math.Floor(f)
				}
			}
			records = append(records, r)
		}
	}
	return records, nil
}
