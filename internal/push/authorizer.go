package push

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Authorizer is AWS IoT Core's custom authorizer for the workspaces'
// subscriptions (functions/pushauth): it admits an MQTT connection whose
// username is a workspace id and whose password is a token allowed on it
// (Allow), and returns a policy that lets it connect with its own client
// id, subscribe to its workspace's topic and receive from it: nothing
// else (no publish, no other topic). Safe for concurrent use.
type Authorizer struct {
	verify Verifier
	// arn is "arn:<partition>:iot:<region>:<account>", the prefix of the
	// policy's resources.
	arn string

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

// NewAuthorizer returns the authorizer for the account and region of
// arnPrefix ("arn:aws:iot:us-east-1:123456789012"), checking tokens with v.
func NewAuthorizer(v Verifier, arnPrefix string) (*Authorizer, error) {
	parts := strings.Split(arnPrefix, ":")
	if len(parts) != 5 || parts[0] != "arn" || parts[2] != "iot" || parts[3] == "" || parts[4] == "" {
		return nil, errors.New(`push: want an IoT ARN prefix such as arn:aws:iot:us-east-1:123456789012, got "` + arnPrefix + `"`)
	}
	return &Authorizer{verify: v, arn: arnPrefix}, nil
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
				{Effect: "Allow", Action: []string{"iot:Connect"}, Resource: []string{a.arn + ":client/" + c.ClientID}},
				{Effect: "Allow", Action: []string{"iot:Subscribe"}, Resource: []string{a.arn + ":topicfilter/" + topic}},
				{Effect: "Allow", Action: []string{"iot:Receive"}, Resource: []string{a.arn + ":topic/" + topic}},
			},
		}},
	}, nil
}
