package migrations

// Files are the embedded migrations, for tests that apply them the way an
// older build did.
var Files = files

// Statements is how a NoTransaction migration is split.
var Statements = statements
