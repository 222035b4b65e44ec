// Package docstest holds the documentation to the repository: every link
// in README.md and docs/*.md (and the other READMEs) is relative and
// names a file or directory of the repository, and its #anchor, if any,
// a heading of that file; the Layout map (docs/layout.md) names only
// paths that exist; and every package's doc comment names only files of
// its own package that exist. The package has tests only.
package docstest
