package pendinguploads

// activityBody is the request_body of a chat_upload_receive activity row.
type activityBody struct {
	FileID   string `json:"file_id"`
	Name     string `json:"name"`
	Mimetype string `json:"mimeType"`
	Size     int64  `json:"size"`
	URI      string `json:"uri"`
}
