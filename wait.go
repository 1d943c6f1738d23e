package jobs

import (
	"context"
	"errors"
	"time"
)

// Polling intervals of Manager.Wait. Without notifications it polls from
// waitPollMin, doubling up to waitPollMax; with notifications the poll is
// only a safety net, up to waitPollMaxNotified.
const (
	waitPollMin         = 10 * time.Millisecond
	waitPollMax         = time.Second
	waitPollMaxNotified = 5 * time.Second
)

// Wait blocks until the job reaches a terminal state (succeeded, failed or
// cancelled) and returns it. If ctx ends first, Wait returns the job as last
// read (the zero Job if it was never read) together with ctx.Err(), so a
// caller holding a request open for a while can still answer with the
// job's current state.
//
// When the store implements CloseNotifier (PostgreSQL), Wait is woken by the
// database as soon as the job closes, through one listening connection per
// store (outside its pool) shared by all waiters; it still polls slowly in
// case a notification is lost. Otherwise (SQLite), or when the store cannot
// notify, it polls with a backoff from 10ms to 1s. Behind a proxy that
// cannot carry LISTEN (PgBouncer in transaction pooling mode) the store
// cannot notify; the Manager then logs once, at warning level, that Wait
// polls and why (see ListenDSN).
//
// While the database is unavailable or busy (a failover, a restart), Wait
// keeps waiting and reading again; it returns ErrStorage only for other
// storage errors (e.g. a missing schema).
//
// Errors: ErrInvalidInput, ErrNotFound, ErrStorage, ctx.Err().
func (m *Manager) Wait(ctx context.Context, jobID string) (Job, error) {
	if err := m.checkID(ctx, "job ID", jobID); err != nil {
		return Job{}, err
	}
	// Read once before subscribing, so that a terminal job costs no
	// subscription and a context that ends early still yields the job.
	last, err := m.store.Job(ctx, jobID)
	switch {
	case err == nil && last.State.Terminal():
		return last, nil
	case err == nil || (transient(err) && ctx.Err() == nil):
	case ctx.Err() != nil:
		return Job{}, ctx.Err()
	default:
		return Job{}, err
	}
	var wake <-chan struct{}
	maxPoll := waitPollMax
	if n, ok := m.store.(CloseNotifier); ok {
		ch, stop, err := n.NotifyClosed(ctx, jobID)
		switch {
		case err == nil:
			defer stop()
			wake, maxPoll = ch, waitPollMaxNotified
		case ctx.Err() != nil:
			return last, ctx.Err()
		case errors.As(err, new(*deafError)):
			m.deafWarning.Do(func() {
				m.logger.WarnContext(ctx, "jobs: Wait polls instead of being notified", "reason", err.Error())
			})
		case !errors.Is(err, errors.ErrUnsupported):
			m.logger.DebugContext(ctx, "jobs: wait: no notifications, polling", "job", jobID, "err", err)
		}
	}
	pause := waitPollMin
	for {
		j, err := m.store.Job(ctx, jobID)
		switch {
		case err == nil && j.State.Terminal():
			return j, nil
		case err == nil:
			last = j
		case ctx.Err() != nil:
			return last, ctx.Err()
		case !transient(err):
			return last, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
			pause = min(2*pause, maxPoll)
		}
	}
}

// transient reports whether err is a storage error that time may cure: the
// database is unreachable (failing over, restarting) or busy.
func transient(err error) bool {
	var se *StorageError
	return errors.As(err, &se) && (se.Kind == StorageUnavailable || se.Kind == StorageBusy)
}
