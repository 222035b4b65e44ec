package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"

	"github.com/pendinguploads/pendinguploads/internal/admin"
	"github.com/pendinguploads/pendinguploads/internal/awsenv"
	"github.com/pendinguploads/pendinguploads/internal/awsprofile"
)

// adminFunctionOutput is the stack output that names the admin function
// (template.yaml's Outputs).
const adminFunctionOutput = "AdminFunctionName"

// tokenService answers a token request: internal/admin's Service over the
// database itself, or the deployed admin function running that same
// Service.
type tokenService func(ctx context.Context, req admin.Request) (admin.Answer, error)

// databaseTokens is the service over DATABASE_URL (or DB_SECRET_ARN);
// close releases its pool.
func databaseTokens(ctx context.Context, e env) (svc tokenService, close func(), err error) {
	a, err := openApp(ctx, e)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) && ue.msg == noDatabase {
			return nil, nil, usageError{noDatabase + "; or, for a deployed stack, pass --stack NAME (no tunnel needed)"}
		}
		return nil, nil, err
	}
	s := admin.New(a.DB)
	s.Logger = a.Logger
	return s.Handle, a.Close, nil
}

// functionTokens is the service of the admin function: the one named
// function, or else the one stack's output AdminFunctionName names. It
// calls AWS with the caller's credentials (the SDK's default chain:
// environment, profiles, SSO, …); AWS_ENDPOINT_URL_LAMBDA and
// AWS_ENDPOINT_URL_CLOUDFORMATION point it elsewhere, as for every AWS
// SDK.
func functionTokens(ctx context.Context, e env, function, stack string) (tokenService, error) {
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg, err := awsprofile.Load(ctx, log)
	if err != nil {
		return nil, err
	}
	if function == "" {
		if function, err = stackOutput(ctx, cloudformation.NewFromConfig(cfg), stack, adminFunctionOutput); err != nil {
			return nil, err
		}
	}
	client := lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		// Lambda answers when the function has run (a cold start in a VPC,
		// a secret, a connection): no per-attempt bound on the answer, the
		// --timeout bounds it all. One attempt: an invocation that may have
		// run is not repeated (a create run twice mints two tokens).
		o.HTTPClient = awshttp.NewBuildableClient().WithDialerOptions(func(d *net.Dialer) { d.Timeout = awsenv.DialTimeout })
		o.RetryMaxAttempts = 1
	})
	return func(ctx context.Context, req admin.Request) (admin.Answer, error) {
		return invokeAdmin(ctx, client, function, req)
	}, nil
}

// invokeAdmin sends req to the admin function and decodes its answer. A
// function error (X-Amz-Function-Error: the function failed, or could not
// start) is returned as an error with the function's message.
func invokeAdmin(ctx context.Context, client *lambda.Client, function string, req admin.Request) (admin.Answer, error) {
	payload, err := json.Marshal(req)
	if err != nil {
		return admin.Answer{}, err
	}
	out, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(function), Payload: payload})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException" {
			return admin.Answer{}, fmt.Errorf("%w (your AWS identity needs lambda:InvokeFunction on %s)", err, function)
		}
		return admin.Answer{}, err
	}
	if out.FunctionError != nil {
		var fe struct {
			Message string `json:"errorMessage"`
			Type    string `json:"errorType"`
		}
		if json.Unmarshal(out.Payload, &fe) != nil || fe.Message == "" {
			fe.Message = string(out.Payload)
		}
		return admin.Answer{}, fmt.Errorf("the admin function %s failed (%s): %s: %s (its log group has the details)",
			function, aws.ToString(out.FunctionError), fe.Type, fe.Message)
	}
	var ans admin.Answer
	if err := json.Unmarshal(out.Payload, &ans); err != nil || (ans == admin.Answer{}) {
		return admin.Answer{}, fmt.Errorf("function %s answered %.200q: not the admin function's answer (is it the stack's %s?)", function, out.Payload, adminFunctionOutput)
	}
	return ans, nil
}

// stackOutput returns the value of stack's output key.
func stackOutput(ctx context.Context, cf *cloudformation.Client, stack, key string) (string, error) {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		return "", fmt.Errorf("stack %s: %w", stack, err)
	}
	for _, s := range out.Stacks {
		for _, o := range s.Outputs {
			if aws.ToString(o.OutputKey) == key && aws.ToString(o.OutputValue) != "" {
				return aws.ToString(o.OutputValue), nil
			}
		}
	}
	return "", fmt.Errorf("stack %s has no output %s: deploy this version's template.yaml, or pass --function NAME", stack, key)
}
