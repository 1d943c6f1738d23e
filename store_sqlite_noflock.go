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

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
