package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// PurgeJobs implements jobs.Store. One call holds the store for as long as
// it takes to find and delete its batch, which q.Limit bounds.
func (s *Store) PurgeJobs(ctx context.Context, q jobs.PurgeQuery) (jobs.PurgeCount, error) {
	if err := s.lock(ctx); err != nil {
		return jobs.PurgeCount{}, err
	}
	defer s.mu.Unlock()
	victims := s.purgeable(q.Before)
	if !q.DryRun {
		victims = victims[:min(max(q.Limit, 0), len(victims))]
	}
	var n jobs.PurgeCount
	for _, j := range victims {
		n.Jobs++
		n.Attempts += int64(len(j.tries))
		if !q.DryRun {
			s.delete(j)
		}
	}
	return n, nil
}

// purgeable returns, oldest first (by creation, as the SQL stores read
// them), the jobs that were created and closed before before and whose
// attempts are all terminal. An open job, or one with an
// open attempt, is never purged, however old.
func (s *Store) purgeable(before time.Time) []*job {
	var out []*job
	for _, j := range s.jobs {
		if j.State.Terminal() && j.CreatedAt.Before(before) && j.ClosedAt.Before(before) && !j.hasOpenAttempt() {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(x, y *job) int {
		return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), strings.Compare(x.ID, y.ID))
	})
	return out
}

func (j *job) hasOpenAttempt() bool {
	return slices.ContainsFunc(j.tries, func(a *attempt) bool { return a.State.Open() })
}

// delete removes the job and its attempts. Its key is free again: the same
// intent submitted later makes a new job.
func (s *Store) delete(j *job) {
	for _, a := range j.tries {
		delete(s.attempts, a.ID)
	}
	delete(s.keys, j.storedKey())
	delete(s.jobs, j.ID)
	if i, found := slices.BinarySearch(s.ids, j.ID); found {
		s.ids = slices.Delete(s.ids, i, i+1)
	}
}
