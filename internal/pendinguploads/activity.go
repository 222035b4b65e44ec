package pendinguploads

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// activityBody is the request_body of a chat_upload_receive activity row.
type activityBody struct {
	FileID   string `json:"file_id"`
	Name     string `json:"name"`
	Mimetype string `json:"mimeType"`
	Size     int64  `json:"size"`
	URI      string `json:"uri"`
}

// queueActivity queues the INSERT of one activity_logs row per record, in
// one statement: platforms whose workspaces poll activity_logs learn of
// the upload from it.
func queueActivity(b *pgx.Batch, c *Caller, workspaceID uuid.UUID, recs []Record) error {
	workspaces := make([]string, len(recs))
	summaries := make([]string, len(recs))
	bodies := make([]string, len(recs))
	for i, r := range recs {
		body, err := json.Marshal(activityBody{
			FileID: r.FileID.String(), Name: r.Filename, Mimetype: r.Mimetype, Size: r.SizeBytes, URI: r.URI(),
		})
		if err != nil {
			return fmt.Errorf("activity: %w", err)
		}
		workspaces[i] = r.WorkspaceID.String()
		summaries[i] = "chat_upload_receive: " + r.Filename
		bodies[i] = string(body)
	}
	b.Queue(`
		INSERT INTO activity_logs (workspace_id, activity_type, method, target_id, summary, status, request_body)
		SELECT u.ws, 'a2a_receive', 'chat_upload_receive', u.ws, u.summary, 'ok', u.body::jsonb
		FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u(ws, summary, body)
		WHERE `+authorized(4, 5),
		workspaces, summaries, bodies, c.hash(), workspaceID)
	return nil
}
