package push

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Authorizer is AWS IoT Core's custom authorizer for the workspaces'
// subscriptions (functions/pushauth): it admits an MQTT connection whose
// username is a workspace id and whose password is a token allowed on it
// (Allow), and returns a policy that lets it connect with its own client
// id, subscribe to its workspace's topic and receive from it: nothing
// else (no publish, no other topic). Safe for concurrent use.
type Authorizer struct {
	verify Verifier

	// DisconnectAfter bounds one connection (default
	// DefaultDisconnectAfter): a revoked token loses its subscription
	// within it. RefreshAfter is how often IoT Core asks again while
	// connected (default DefaultRefreshAfter).
	DisconnectAfter, RefreshAfter uint32
	// Logger receives each refusal and each failed look-up (default
	// slog.Default()); never a token.
	Logger *slog.Logger
}

// Connection bounds, in seconds.
const (
	// DefaultDisconnectAfter is a day: IoT Core's longest.
	DefaultDisconnectAfter = 24 * 60 * 60
	// DefaultRefreshAfter is 10 minutes: a revoked token is heard of
	// within that, at the price of one look-up per connection per refresh.
	DefaultRefreshAfter = 10 * 60
)

// NewAuthorizer returns the authorizer, checking tokens with v. The
// policy's resources are in the partition, region and account of the
// function's own ARN (the invocation's).
func NewAuthorizer(v Verifier) *Authorizer { return &Authorizer{verify: v} }

// iotARN is "arn:<partition>:iot:<region>:<account>" for the function
// ARN "arn:<partition>:lambda:<region>:<account>:function:<name>[:alias]".
func iotARN(functionARN string) (string, error) {
	p := strings.Split(functionARN, ":")
	if len(p) < 7 || p[0] != "arn" || p[2] != "lambda" || p[3] == "" || p[4] == "" {
		return "", fmt.Errorf("push: the invocation's function ARN %q is not a Lambda function's", functionARN)
	}
	return strings.Join([]string{"arn", p[1], "iot", p[3], p[4]}, ":"), nil
}

func (a *Authorizer) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// Handle answers one IoT Core authorization request. Credentials that may
// not subscribe are an answer (isAuthenticated false); a look-up that
// failed (the database) is an error: IoT Core then refuses the
// connection, and the client retries. Fails closed either way.
func (a *Authorizer) Handle(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
	var c Credentials
	if req.ProtocolData != nil && req.ProtocolData.MQTT != nil {
		m := req.ProtocolData.MQTT
		c = Credentials{Username: m.Username, Password: m.Password, ClientID: m.ClientID}
	}
	connID := ""
	if req.ConnectionMetadata != nil {
		connID = req.ConnectionMetadata.ID
	}
	lc, _ := lambdacontext.FromContext(ctx)
	if lc == nil {
		return events.IoTCoreCustomAuthorizerResponse{}, errors.New("push: no Lambda context")
	}
	arn, err := iotARN(lc.InvokedFunctionArn)
	if err != nil {
		return events.IoTCoreCustomAuthorizerResponse{}, err
	}
	ws, err := Allow(ctx, a.verify, c)
	if errors.Is(err, ErrRefused) {
		a.logger().InfoContext(ctx, "push connection refused", "connection_id", connID, "reason", err.Error())
		return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: false, PrincipalID: "refused",
			PolicyDocuments: []*events.IAMPolicyDocument{}}, nil
	}
	if err != nil {
		a.logger().ErrorContext(ctx, "push connection not checked", "connection_id", connID, "err", err)
		return events.IoTCoreCustomAuthorizerResponse{}, err
	}
	disconnect, refresh := a.DisconnectAfter, a.RefreshAfter
	if disconnect == 0 {
		disconnect = DefaultDisconnectAfter
	}
	if refresh == 0 {
		refresh = DefaultRefreshAfter
	}
	topic := Topic(ws)
	return events.IoTCoreCustomAuthorizerResponse{
		IsAuthenticated: true,
		// Alphanumeric, 1..128: the workspace's id without its dashes.
		PrincipalID:              strings.ReplaceAll(ws.String(), "-", ""),
		DisconnectAfterInSeconds: disconnect,
		RefreshAfterInSeconds:    refresh,
		PolicyDocuments: []*events.IAMPolicyDocument{{
			Version: "2012-10-17",
			Statement: []events.IAMPolicyStatement{
				{Effect: "Allow", Action: []string{"iot:Connect"}, Resource: []string{arn + ":client/" + c.ClientID}},
				{Effect: "Allow", Action: []string{"iot:Subscribe"}, Resource: []string{arn + ":topicfilter/" + topic}},
				{Effect: "Allow", Action: []string{"iot:Receive"}, Resource: []string{arn + ":topic/" + topic}},
			},
		}},
	}, nil
}
