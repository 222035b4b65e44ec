DROP TABLE IF EXISTS workspace_auth_tokens;
