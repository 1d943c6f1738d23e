package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// Retention defaults; see PurgeOptions.
const (
	// DefaultRetention is how long a terminal job keeps its idempotency key
	// before Purge may remove it: 24 hours, as public idempotent APIs do.
	DefaultRetention = 24 * time.Hour

	// DefaultPurgeBatchSize is how many jobs one purge batch deletes.
	DefaultPurgeBatchSize = 500

	// MaxPurgeBatchSize bounds PurgeOptions.BatchSize, so that one batch
	// never holds its locks for long.
	MaxPurgeBatchSize = 10000
)

// PurgeOptions configures Manager.Purge. The zero value purges every job
// that closed more than DefaultRetention ago.
type PurgeOptions struct {
	// Retention is how long a terminal job is kept after it closed.
	// Defaults to the Manager's Options.Retention. Ignored when OlderThan
	// is set.
	Retention time.Duration

	// OlderThan, if not zero, is the cutoff itself: jobs closed before it
	// are purged. It must lie in the years 1 to 9999.
	OlderThan time.Time

	// BatchSize is how many jobs each batch deletes, each batch in its own
	// short transaction. Defaults to DefaultPurgeBatchSize; at most
	// MaxPurgeBatchSize.
	BatchSize int

	// DryRun counts what would be purged and deletes nothing.
	DryRun bool
}

// PurgeResult reports what Manager.Purge did.
type PurgeResult struct {
	PurgeCount
	Cutoff   time.Time     `json:"cutoff"`      // jobs closed before this were eligible
	Batches  int           `json:"batches"`     // delete statements run (0 in a dry run)
	DryRun   bool          `json:"dry_run"`     // nothing was deleted; the counts are what would be
	Duration time.Duration `json:"duration_ns"` // wall time of the whole purge
}

// Purge removes terminal jobs that closed before the retention cutoff, with
// their attempts, in bounded batches, so that their idempotency keys can be
// used again: a key submitted after its job was purged makes a new job.
// Jobs that are pending or running, and terminal jobs with an attempt still
// starting, running or unknown, are never purged, however old.
//
// Each batch is one short transaction that walks the index on closed_at;
// on PostgreSQL it skips rows locked by other transactions, so several
// purgers, and Submit or Complete running meanwhile, do not wait for each
// other. Purge stops when a batch finds fewer jobs than BatchSize, or when
// ctx ends (returning what was purged so far with the error).
//
// Errors: ErrInvalidInput (negative retention or batch size, a batch size
// over MaxPurgeBatchSize, or a cutoff outside the years 1 to 9999),
// ErrStorage, errors.ErrUnsupported (the store is not a PurgeStore).
func (m *Manager) Purge(ctx context.Context, opts PurgeOptions) (PurgeResult, error) {
	if err := ctx.Err(); err != nil {
		return PurgeResult{}, err
	}
	res := PurgeResult{DryRun: opts.DryRun}
	if err := opts.validate(); err != nil {
		return res, err
	}
	retention := opts.Retention
	if retention == 0 {
		retention = m.Retention()
	}
	batch := opts.BatchSize
	if batch == 0 {
		batch = DefaultPurgeBatchSize
	}
	res.Cutoff = opts.OlderThan.UTC()
	if opts.OlderThan.IsZero() {
		res.Cutoff = m.now().Add(-retention)
	}
	ps, ok := m.store.(PurgeStore)
	if !ok {
		return res, fmt.Errorf("jobs: Purge on a %T, which cannot purge: %w", m.store, errors.ErrUnsupported)
	}
	start := time.Now()
	if opts.DryRun {
		n, err := ps.PurgeJobs(ctx, PurgeQuery{Before: res.Cutoff, DryRun: true})
		res.PurgeCount = n
		res.Duration = time.Since(start)
		return res, err
	}
	for {
		if err := ctx.Err(); err != nil {
			res.Duration = time.Since(start)
			m.emitPurged(ctx, res, start)
			return res, err
		}
		n, err := ps.PurgeJobs(ctx, PurgeQuery{Before: res.Cutoff, Limit: batch})
		res.Batches++
		res.Jobs += n.Jobs
		res.Attempts += n.Attempts
		if err != nil {
			res.Duration = time.Since(start)
			m.emitPurged(ctx, res, start)
			return res, err
		}
		if n.Jobs < int64(batch) {
			break
		}
	}
	res.Duration = time.Since(start)
	m.emitPurged(ctx, res, start)
	return res, nil
}

// Retention returns how long terminal jobs keep their keys before Purge
// removes them by default: Options.Retention, or DefaultRetention. An HTTP
// layer reports it to clients, who may reuse a key only after it.
func (m *Manager) Retention() time.Duration {
	if m.opts.Retention > 0 {
		return m.opts.Retention
	}
	return DefaultRetention
}

func (o PurgeOptions) validate() error {
	switch {
	case o.Retention < 0:
		return invalid("Retention", "negative")
	case o.BatchSize < 0:
		return invalid("BatchSize", "negative")
	case o.BatchSize > MaxPurgeBatchSize:
		return invalid("BatchSize", "over %d", MaxPurgeBatchSize)
	case !o.OlderThan.IsZero() && (o.OlderThan.UTC().Year() < 1 || o.OlderThan.UTC().Year() > 9999):
		// PostgreSQL refuses a timestamp before 4713 BC or after 294276 AD,
		// and SQLite's microseconds since 1970 overflow near 294000 AD;
		// the years of RFC 3339 are far inside both.
		return invalid("OlderThan", "%s is outside the years 1 to 9999", o.OlderThan.UTC().Format(time.RFC3339))
	}
	return nil
}

func (m *Manager) emitPurged(ctx context.Context, res PurgeResult, start time.Time) {
	if m.obs == nil {
		return
	}
	m.emit(ctx, Event{Type: EventPurged, Count: res.Jobs, Attempts: res.Attempts, Duration: time.Since(start)})
}

// PurgerOptions configures a background Purger. The zero value purges with
// the default PurgeOptions every DefaultPurgeInterval, with jitter.
type PurgerOptions struct {
	// Purge is what each pass does.
	Purge PurgeOptions

	// Interval is the pause between passes. Defaults to DefaultPurgeInterval.
	Interval time.Duration

	// Jitter is the most that is added at random to each pause, so that
	// processes started together do not purge in lockstep. Defaults to a
	// tenth of Interval; negative means none.
	Jitter time.Duration

	// OnError, if set, receives the error of a failed pass (which is also
	// logged at warning level). The purger keeps going.
	OnError func(error)
}

// DefaultPurgeInterval is the pause between a Purger's passes.
const DefaultPurgeInterval = 10 * time.Minute

// Purger runs Manager.Purge periodically. Create it with Manager.NewPurger,
// and either call Run in a goroutine of your own, or use StartPurger.
type Purger struct {
	m    *Manager
	opts PurgerOptions
}

// NewPurger returns a background purger over m. It does nothing until Run.
func (m *Manager) NewPurger(opts PurgerOptions) *Purger {
	if opts.Interval <= 0 {
		opts.Interval = DefaultPurgeInterval
	}
	if opts.Jitter == 0 {
		opts.Jitter = opts.Interval / 10
	}
	return &Purger{m: m, opts: opts}
}

// Run purges once at once, then once per interval (plus jitter), until ctx
// ends; it then returns ctx's error. A failed pass is logged and reported
// to OnError, and does not stop the purger. Invalid PurgeOptions are
// reported at once, as ErrInvalidInput, before any pass.
func (p *Purger) Run(ctx context.Context) error {
	if err := p.opts.Purge.validate(); err != nil {
		return err
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		if _, err := p.m.Purge(ctx, p.opts.Purge); err != nil && ctx.Err() == nil {
			p.m.logger.LogAttrs(ctx, slog.LevelWarn, "jobs: purge failed", slog.String("error", err.Error()))
			if p.opts.OnError != nil {
				p.opts.OnError(err)
			}
		}
		timer.Reset(p.pause())
	}
}

// pause is the interval plus a random jitter.
func (p *Purger) pause() time.Duration {
	d := p.opts.Interval
	if p.opts.Jitter > 0 {
		d += rand.N(p.opts.Jitter + 1)
	}
	return d
}

// StartPurger runs a Purger in a new goroutine until ctx ends or stop is
// called. stop cancels it and waits until the goroutine has returned, so
// that nothing is left running; it is safe to call more than once.
func (m *Manager) StartPurger(ctx context.Context, opts PurgerOptions) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	p := m.NewPurger(opts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	var once sync.Once
	return func() {
		once.Do(cancel)
		<-done
	}
}

// String describes the result in one line, for logs.
func (r PurgeResult) String() string {
	verb := "purged"
	if r.DryRun {
		verb = "would purge"
	}
	return fmt.Sprintf("%s %s and %s closed before %s", verb, plural(r.Jobs, "job"), plural(r.Attempts, "attempt"), r.Cutoff.Format(time.RFC3339))
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
