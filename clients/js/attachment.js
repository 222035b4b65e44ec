// pendingFile reads an attachment URI of the service, as the canvas keeps
// them in chat history: platform-pending:<workspaceId>/<fileId> (what
// uploadFiles answers), or the legacy /workspaces/<ws>/content/<file>/content.
// It returns {workspaceId, fileId}, or null for any other URI (an http(s)
// URL, a container path): those are not the service's to open.
export function pendingFile(uri) {
  if (typeof uri !== "string") return null;
  let m = /^platform-pending:([^/]+)\/([^/]+)$/.exec(uri);
  if (!m) m = /^\/workspaces\/([^/]+)\/content\/([^/]+)\/content$/.exec(uri);
  return m ? { workspaceId: m[1], fileId: m[2] } : null;
}
