package migrations

// Files are the embedded migrations, for tests that apply them the way an
// older build did.
var Files = files
