//go:build !unix

package pgtest

import "errors"

// Freeze and Thaw need Unix signals.
func Freeze() error { return errors.New("pgtest: Freeze needs a Unix system") }

// Thaw: see Freeze.
func Thaw() error { return errors.New("pgtest: Thaw needs a Unix system") }
