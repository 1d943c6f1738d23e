package memstore

import "context"

// NotifyClosed implements jobs.CloseNotifier, so that Manager.Wait returns
// as soon as the job closes instead of polling for it. The channel
// receives a value when the job becomes terminal.
func (s *Store) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	if err := s.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	wake := make(chan struct{}, 1)
	if s.waiters[jobID] == nil {
		s.waiters[jobID] = map[chan struct{}]bool{}
	}
	s.waiters[jobID][wake] = true
	stop := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.waiters[jobID], wake)
		if len(s.waiters[jobID]) == 0 {
			delete(s.waiters, jobID)
		}
	}
	return wake, stop, nil
}

// wake tells the waiters of the job that it closed. A waiter that has not
// yet taken an earlier value has nothing more to learn, so none blocks the
// store.
func (s *Store) wake(jobID string) {
	for w := range s.waiters[jobID] {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}
