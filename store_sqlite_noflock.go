//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos)

package jobs

import (
	"context"
	"io"
)

// fileLocks is false where flock(2) is missing: a store's writers still
// queue among themselves, and other stores and processes are waited for by
// SQLite's busy timeout and the store's retries.
const fileLocks = false

// lockWait is never called where fileLocks is false.
func lockWait(ctx context.Context, path string) (io.Closer, error) {
	return nopCloser{}, nil
}

// lockFile is never opened where fileLocks is false.
type lockFile struct{}

func openLockFile(string) (*lockFile, error) { return &lockFile{}, nil }
func (*lockFile) tryLock() bool              { return true }
func (*lockFile) unlock()                    {}
func (*lockFile) Close() error               { return nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
