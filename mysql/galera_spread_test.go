package mysql_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/mysql"
)

// spread is one store over the three nodes of a cluster: each call goes
// to the next node, so that every read may follow a write made through
// another node a moment before, and every race of the suite is between
// nodes. Transactions of the caller's (SubmitTx) run on node 1, whose
// handle DB returns.
type spread struct {
	nodes []*mysql.Store
	next  atomic.Int64
}

// spread has every capability of the store, so that the suite runs
// every case on it.
var _ interface {
	jobs.TxStore
	jobs.JobLister
	jobs.JobCounter
	jobs.AttemptLister
	jobs.LookupStore
	jobs.ClaimStore
	jobs.VerificationStore
	jobs.PurgeStore
	jobs.CloseNotifier
} = (*spread)(nil)

func (s *spread) node() *mysql.Store { return s.nodes[int(s.next.Add(1))%len(s.nodes)] }

func (s *spread) CreateJob(ctx context.Context, j jobs.Job) (jobs.Job, bool, error) {
	return s.node().CreateJob(ctx, j)
}
func (s *spread) ReplaceJob(ctx context.Context, r jobs.JobReplacement) (jobs.Job, bool, error) {
	return s.node().ReplaceJob(ctx, r)
}
func (s *spread) Job(ctx context.Context, id string) (jobs.Job, error) { return s.node().Job(ctx, id) }
func (s *spread) JobByKey(ctx context.Context, owner, key string) (jobs.Job, error) {
	return s.node().JobByKey(ctx, owner, key)
}
func (s *spread) CloseJob(ctx context.Context, c jobs.JobClose) (jobs.Job, error) {
	return s.node().CloseJob(ctx, c)
}
func (s *spread) Attempt(ctx context.Context, id string) (jobs.Attempt, error) {
	return s.node().Attempt(ctx, id)
}
func (s *spread) Attempts(ctx context.Context, jobID string) ([]jobs.Attempt, error) {
	return s.node().Attempts(ctx, jobID)
}
func (s *spread) CreateAttempt(ctx context.Context, a jobs.NewAttempt) (jobs.Attempt, error) {
	return s.node().CreateAttempt(ctx, a)
}
func (s *spread) UpdateAttempt(ctx context.Context, u jobs.AttemptUpdate) (jobs.Attempt, error) {
	return s.node().UpdateAttempt(ctx, u)
}
func (s *spread) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	return s.node().CompleteAttempt(ctx, c)
}
func (s *spread) CreateJobTx(ctx context.Context, tx jobs.DBTX, j jobs.Job) (jobs.Job, bool, error) {
	return s.nodes[0].CreateJobTx(ctx, tx, j)
}
func (s *spread) DB() *sql.DB { return s.nodes[0].DB() }
func (s *spread) ListJobs(ctx context.Context, q jobs.JobQuery) ([]jobs.Job, error) {
	return s.node().ListJobs(ctx, q)
}
func (s *spread) StaleAttempts(ctx context.Context, q jobs.StaleQuery) ([]jobs.Attempt, error) {
	return s.node().StaleAttempts(ctx, q)
}
func (s *spread) ClaimAttempt(ctx context.Context, c jobs.AttemptClaim) (jobs.Attempt, bool, error) {
	return s.node().ClaimAttempt(ctx, c)
}
func (s *spread) RenewClaim(ctx context.Context, c jobs.AttemptClaim) (bool, error) {
	return s.node().RenewClaim(ctx, c)
}
func (s *spread) RecordVerification(ctx context.Context, v jobs.Verification) error {
	return s.node().RecordVerification(ctx, v)
}
func (s *spread) Verifications(ctx context.Context, f jobs.VerificationFilter) ([]jobs.Verification, error) {
	return s.node().Verifications(ctx, f)
}
func (s *spread) PurgeJobs(ctx context.Context, q jobs.PurgeQuery) (jobs.PurgeCount, error) {
	return s.node().PurgeJobs(ctx, q)
}
func (s *spread) CountJobs(ctx context.Context, q jobs.JobQuery) (int64, error) {
	return s.node().CountJobs(ctx, q)
}
func (s *spread) ListAttempts(ctx context.Context, q jobs.AttemptQuery) ([]jobs.Attempt, error) {
	return s.node().ListAttempts(ctx, q)
}
func (s *spread) RecordLookup(ctx context.Context, l jobs.AttemptLookup) error {
	return s.node().RecordLookup(ctx, l)
}
func (s *spread) ReconcileStates(ctx context.Context, attemptIDs []string) ([]jobs.ReconcileState, error) {
	return s.node().ReconcileStates(ctx, attemptIDs)
}
func (s *spread) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	return s.node().NotifyClosed(ctx, jobID)
}

// The whole conformance suite with every call of a case going to the
// next node: the cluster answers as one database.
func TestGaleraConformanceAcrossNodes(t *testing.T) {
	dsns, ctl := galeraDSNs(t)
	galeraCtl(t, ctl, "up")
	jobstest.Run(t, func(t testing.TB) jobs.Store {
		dsn := newDatabase(t, dsns[0])
		name := dbName(t, dsn)
		s := &spread{}
		for _, d := range dsns {
			var n *mysql.Store
			var err error
			for try := 0; ; try++ {
				n, err = mysql.Open(context.Background(), withDB(t, d, name), mysql.PollInterval(20*time.Millisecond))
				if err == nil || try == 50 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			n.DB().SetMaxOpenConns(12)
			t.Cleanup(func() { n.Close() })
			s.nodes = append(s.nodes, n)
		}
		return s
	})
}
