//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

package jobs

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"
)

// fileLocks is true where writers of a database queue across stores and
// processes through an OS lock on a file next to it.
const fileLocks = true

// lockWait opens the lock file at path (creating it if needed) and takes an
// exclusive flock(2) on it, waiting until it is free or ctx ends. Closing
// the returned file releases the lock, and so does the end of the process,
// however it ends.
//
// flock belongs to the open file description, so every call opens the file
// anew: two stores of one process exclude each other like two processes,
// and a wait given up when ctx ends can be left to finish on its own file.
func lockWait(ctx context.Context, path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	err = flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	// Held elsewhere: wait in the kernel, which wakes this waiter as soon as
	// the lock is released. The blocking call cannot be interrupted, so it
	// runs on its own goroutine; if ctx ends first, that goroutine releases
	// the lock as soon as it gets it.
	got := make(chan error)
	abandoned := make(chan struct{})
	go func() {
		err := flock(fd, syscall.LOCK_EX)
		select {
		case got <- err:
		case <-abandoned:
			f.Close()
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		return f, nil
	case <-ctx.Done():
		close(abandoned)
		return nil, ctx.Err()
	}
}

// lockFile is a lock file held open, locked and unlocked without waiting.
type lockFile struct {
	f  *os.File
	fd int
}

// openLockFile opens the lock file at path, creating it if needed.
func openLockFile(path string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &lockFile{f: f, fd: int(f.Fd())}, nil
}

// tryLock takes the exclusive lock if it is free, and reports whether it
// did.
func (l *lockFile) tryLock() bool { return flock(l.fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil }

// unlock releases the lock tryLock took.
func (l *lockFile) unlock() { flock(l.fd, syscall.LOCK_UN) }

// Close closes the file, releasing its lock if it is held.
func (l *lockFile) Close() error { return l.f.Close() }

// flock is flock(2), resumed after a signal.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if err != syscall.EINTR {
			return err
		}
	}
}
