package main

// pendingctlBuildLine is how README says to build pendingctl, and what
// the banner prints: one line, held to README's by TestNewcomerPrintedLines.
const pendingctlBuildLine = "go build -buildvcs=true ./cmd/pendingctl"

// contentLine is the printed curl line that saves a file's content under
// the name the server gives it (-OJ), in a fresh folder of its own, and
// prints where: curl refuses to overwrite a file with -J, and the
// working directory (the clone) holds README.md, the file the banner's
// first line stages. auth is the -H option of the token.
func contentLine(auth, url string) string {
	return `(cd "$(mktemp -d)" && curl -sS -OJ ` + auth + ` ` + url + ` && ls "$PWD"/*)`
}
