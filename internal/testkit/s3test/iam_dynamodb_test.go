package s3test_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"

	"github.com/pendinguploads/pendinguploads/internal/testkit/s3test"
)

// TestIAMProxyDynamoDB: a DynamoDB call through the proxy is judged as
// dynamodb:<API> on its table's ARN: PutItem on the granted table
// passes, on another table and any other API (GetItem) it is
// AccessDeniedException and the item is not written.
func TestIAMProxyDynamoDB(t *testing.T) {
	ep := s3test.MustStart(t)
	mine, other := "hints-"+uuid.NewString(), "other-"+uuid.NewString()
	proxy := s3test.StartIAMProxy(t, ep, map[string]s3test.Policy{
		"AKIAPUTTER": {{Actions: []string{"dynamodb:PutItem"}, Resources: []string{s3test.TableARN(mine)}}},
	})
	as := func(key, url string) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{Region: s3test.Region, BaseEndpoint: aws.String(url),
			Credentials: credentials.NewStaticCredentialsProvider(key, s3test.SecretAccessKey, "")})
	}
	ctx := context.Background()
	admin := as(s3test.AccessKeyID, ep.URL)
	for _, name := range []string{mine, other} {
		if _, err := admin.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	item := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "x"}}
	putter := as("AKIAPUTTER", proxy.URL)
	if _, err := putter.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(mine), Item: item}); err != nil {
		t.Fatalf("PutItem on the granted table: %v", err)
	}
	denied := func(err error) bool {
		var ae smithy.APIError
		return errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException"
	}
	if _, err := putter.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(other), Item: item}); !denied(err) {
		t.Errorf("PutItem on another table: got %v, want AccessDeniedException", err)
	}
	if _, err := putter.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(mine), Key: item}); !denied(err) {
		t.Errorf("GetItem: got %v, want AccessDeniedException", err)
	}
	if got, err := admin.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(other), Key: item}); err != nil || got.Item != nil {
		t.Errorf("the other table's item: got %v (%v), want none written", got.Item, err)
	}
	if n := len(proxy.Denied()); n != 2 {
		t.Errorf("denied %d calls, want 2: %v", n, proxy.Denied())
	}
}
