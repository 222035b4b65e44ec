package client

import (
	"context"
	"errors"
	"strings"

	"github.com/pendinguploads/pendinguploads/client/wire"

	"github.com/google/uuid"
)

// Push is where a server publishes upload hints (GET /uploads/limits'
// push): an MQTT broker over WebSocket.
type Push = wire.Push

// ErrNoPush is returned by PushSubscription for a server that publishes
// no hints (its limits have no push): poll instead.
var ErrNoPush = errors.New("client: the server publishes no upload hints")

// PushSubscription is what an MQTT client needs to hear of workspace
// ws's new files: the broker, the topic, and the credentials (the
// workspace's id and the client's own token, as the API takes it).
type PushSubscription struct {
	URL, Topic string
	// Authorizer is the name of AWS IoT Core's custom authorizer (also
	// in URL's query), sent as x-amz-customauthorizer-name; may be empty.
	Authorizer string
	Username   string
	Password   string
}

// PushSubscription asks the server (GET /uploads/limits) where ws's
// hints are published; ErrNoPush when it publishes none.
func (c *Client) PushSubscription(ctx context.Context, ws uuid.UUID) (PushSubscription, error) {
	l, err := c.Limits(ctx)
	if err != nil {
		return PushSubscription{}, err
	}
	if l.Push == nil || l.Push.URL == "" || !strings.Contains(l.Push.TopicTemplate, "{workspace_id}") {
		return PushSubscription{}, ErrNoPush
	}
	return PushSubscription{
		URL:        l.Push.URL,
		Topic:      strings.ReplaceAll(l.Push.TopicTemplate, "{workspace_id}", ws.String()),
		Authorizer: l.Push.Authorizer,
		Username:   ws.String(),
		Password:   c.token,
	}, nil
}
