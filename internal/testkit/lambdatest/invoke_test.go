package lambdatest_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/pendinguploads/pendinguploads/internal/testkit/lambdatest"
)

// TestInvokeServer drives hello through the InvokeServer with the AWS
// SDK's own Lambda client, as a program calling Lambda would: an answer,
// a function error, a process that exits, a name nobody serves, a body
// that is not JSON, and a request that is not signed.
func TestInvokeServer(t *testing.T) {
	bin := lambdatest.Build(t, lambdatest.Hello)
	srv := lambdatest.ServeInvoke(t, map[string]*lambdatest.Runtime{
		"hello-1": lambdatest.Start(t, bin, nil),
		"exiting": lambdatest.Start(t, bin, nil),
	})
	client := lambda.New(lambda.Options{
		Region:       lambdatest.DefaultRegion,
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "not-a-real-key", ""),
	})
	invoke := func(name, payload string) (*lambda.InvokeOutput, error) {
		return client.Invoke(ctx(t), &lambda.InvokeInput{FunctionName: aws.String(name), Payload: []byte(payload)})
	}

	t.Run("Answer", func(t *testing.T) {
		out, err := invoke("hello-1", `{"n":1}`)
		if err != nil {
			t.Fatal(err)
		}
		if out.StatusCode != 200 || out.FunctionError != nil || string(out.Payload) != `{"n":1}` {
			t.Errorf("got %d, function error %v, payload %s; want 200 and the echo", out.StatusCode, out.FunctionError, out.Payload)
		}
		if aws.ToString(out.ExecutedVersion) != "$LATEST" {
			t.Errorf("ExecutedVersion: got %q, want $LATEST", aws.ToString(out.ExecutedVersion))
		}
	})
	t.Run("ByARN", func(t *testing.T) {
		out, err := invoke("arn:aws:lambda:us-east-1:123456789012:function:hello-1", `2`)
		if err != nil || string(out.Payload) != `2` {
			t.Errorf("got %v, %v; want the echo", out, err)
		}
	})
	t.Run("FunctionError", func(t *testing.T) {
		out, err := invoke("hello-1", `{"fail":true}`)
		if err != nil {
			t.Fatal(err)
		}
		var doc lambdatest.FunctionError
		json.Unmarshal(out.Payload, &doc)
		if aws.ToString(out.FunctionError) != "Unhandled" || doc.Message != "hello: asked to fail" {
			t.Errorf("got function error %q, payload %s; want Unhandled and hello's message", aws.ToString(out.FunctionError), out.Payload)
		}
	})
	t.Run("ProcessExits", func(t *testing.T) {
		out, err := invoke("exiting", `{"exit":true}`)
		if err != nil {
			t.Fatal(err)
		}
		var doc lambdatest.FunctionError
		json.Unmarshal(out.Payload, &doc)
		if aws.ToString(out.FunctionError) != "Unhandled" || doc.Type != "Runtime.ExitError" {
			t.Errorf("got function error %q, payload %s; want Unhandled, Runtime.ExitError", aws.ToString(out.FunctionError), out.Payload)
		}
	})
	t.Run("ResourceNotFoundException", func(t *testing.T) {
		_, err := invoke("nobody", `{}`)
		var nf *types.ResourceNotFoundException
		if !errors.As(err, &nf) {
			t.Errorf("got %v, want a ResourceNotFoundException", err)
		}
	})
	t.Run("NotJSON", func(t *testing.T) {
		_, err := invoke("hello-1", `not json`)
		var bad *types.InvalidRequestContentException
		if !errors.As(err, &bad) {
			t.Errorf("got %v, want an InvalidRequestContentException", err)
		}
	})
	t.Run("Unsigned", func(t *testing.T) {
		resp, err := http.Post(srv.URL+"/2015-03-31/functions/hello-1/invocations", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("got %d, want 403", resp.StatusCode)
		}
	})
	if n := srv.Invocations(); n != 4 {
		t.Errorf("Invocations: got %d, want 4 (the unsigned and unknown ones never reach a function)", n)
	}
}
