package push

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/google/uuid"
)

// TopicTemplate is the topic of a workspace's hints, with {workspace_id}
// for its id: what GET /uploads/limits announces (push.topic_template).
const TopicTemplate = "pendinguploads/{workspace_id}/uploads"

// Topic is workspace ws's topic.
func Topic(ws uuid.UUID) string {
	return strings.Replace(TopicTemplate, "{workspace_id}", ws.String(), 1)
}

// Hint is the message published on a workspace's topic after files were
// committed: ids only. A subscriber needs none of it to act (it pulls);
// it is there for logs and for a client that wants to fetch one file.
type Hint struct {
	WorkspaceID uuid.UUID   `json:"workspace_id"`
	FileIDs     []uuid.UUID `json:"file_ids"`
}

// Payload is the hint's JSON.
func (h Hint) Payload() []byte {
	b, _ := json.Marshal(h) // uuids and a slice of them: cannot fail
	return b
}

// Publisher sends a payload to a topic: IoT Core's Publish, or the local
// broker's. Publish must honour ctx's deadline.
type Publisher interface {
	Publish(ctx context.Context, topic string, payload []byte) error
}
