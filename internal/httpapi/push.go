package httpapi

import (
	"net/url"

	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/push"
)

// Push is GET /uploads/limits' push: where a client subscribes to hear of
// new files at once (MQTT over WebSockets; username the workspace id,
// password its token), so that pull --watch needs nothing beyond what a
// pull needs. Nil (null): the deployment has no push; poll.
type Push struct {
	// URL is the broker's MQTT-over-WebSocket URL (wss:// in AWS, with
	// the authorizer's name in its query as IoT Core reads it).
	URL string `json:"url"`
	// TopicTemplate is the workspace's topic, {workspace_id} for its id.
	TopicTemplate string `json:"topic_template"`
	// Authorizer is IoT Core's custom authorizer to name (also in URL);
	// empty for a broker that needs none (make run's).
	Authorizer string `json:"authorizer"`
}

// PushOf is the push answer for cfg: IoT Core's endpoint when
// PUSH_ENDPOINT is set, else nil.
func PushOf(cfg config.Config) *Push {
	if cfg.PushEndpoint == "" {
		return nil
	}
	u := url.URL{Scheme: "wss", Host: cfg.PushEndpoint, Path: "/mqtt"}
	if cfg.PushAuthorizer != "" {
		u.RawQuery = url.Values{"x-amz-customauthorizer-name": {cfg.PushAuthorizer}}.Encode()
	}
	return &Push{URL: u.String(), TopicTemplate: push.TopicTemplate, Authorizer: cfg.PushAuthorizer}
}
