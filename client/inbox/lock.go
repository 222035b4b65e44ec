package inbox

import (
	"fmt"

	"github.com/gofrs/flock"
)

// lockDir takes an exclusive lock on the file path (flock on Unix,
// LockFileEx on Windows), refusing at once with ErrLocked if another
// process, or another Pull of this one, holds it. The lock goes with the
// process, so a crash frees it.
func lockDir(path string) (func(), error) {
	l := flock.New(path, flock.SetPermissions(0o600))
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if !ok {
		return nil, ErrLocked
	}
	return func() { _ = l.Close() }, nil
}
