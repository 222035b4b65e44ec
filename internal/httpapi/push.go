package httpapi

import (
	"net/url"

	"github.com/pendinguploads/pendinguploads/client/wire"
	"github.com/pendinguploads/pendinguploads/internal/config"
	"github.com/pendinguploads/pendinguploads/internal/push"
)

// Push is GET /uploads/limits' push (wire.Push). Nil (null): the
// deployment has no push; poll.
type Push = wire.Push

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
