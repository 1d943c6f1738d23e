package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// Default limits and timeouts; see Options.
const (
	DefaultMaxParamsBytes = 64 << 10 // 64 KiB
	DefaultMaxResultBytes = 1 << 20  // 1 MiB
	DefaultWriteTimeout   = 15 * time.Second
)

// Options configures a Manager. The zero value is ready to use.
type Options struct {
	// Clock is the time source of the Manager and of what is built on it,
	// such as package failover's Runners and Reconcilers: the times stored
	// with jobs and attempts, silences, deadlines, claims and retention.
	// Tests set a manual one (jobstest.Clock). Defaults to SystemClock.
	// Times are stored in UTC with microsecond precision.
	Clock Clock

	// Logger receives lost races (at warning level) and other notable events.
	// Defaults to slog.Default().
	Logger *slog.Logger

	// Observer, if set, receives an Event for every meaningful change.
	Observer Observer

	// Hedging lets every StartAttempt start past a running attempt, as if
	// Hedge() were passed. It never allows an attempt past a starting or
	// unknown one.
	Hedging bool

	// MaxParamsBytes limits the size of SubmitRequest.Params in bytes.
	// Defaults to DefaultMaxParamsBytes.
	MaxParamsBytes int

	// MaxResultBytes limits the size of a result passed to Complete.
	// Defaults to DefaultMaxResultBytes.
	MaxResultBytes int

	// Retention is how long a terminal job keeps its idempotency key before
	// Purge removes it, unless a PurgeOptions says otherwise. Defaults to
	// DefaultRetention. See Manager.Retention.
	Retention time.Duration

	// Contracts maps a job kind to the contract its results must satisfy.
	// Complete checks a result against its kind's contract before offering
	// it to the job, and a failover attempt for a kind with a contract needs
	// a passing verification of its provider (see VerifyProvider). Kinds
	// without a contract are not checked. New refuses a contract with an
	// empty Version or a nil Validate.
	Contracts map[string]Contract

	// WriteTimeout bounds writes that record an attempt's outcome (Complete,
	// Fail, Cancel, MarkRunning, MarkUnknown, FailJob, CancelJob). They run to
	// the end even if the caller's context is cancelled once they have begun,
	// so that an outcome the provider already produced is not lost.
	// Defaults to DefaultWriteTimeout.
	WriteTimeout time.Duration
}

// Manager is the entry point: it validates input, fingerprints intents, owns
// the state machines and maps the store's answers to this package's errors.
// The Store only persists. A Manager is safe for concurrent use.
type Manager struct {
	store  Store
	opts   Options
	logger *slog.Logger
	obs    Observer

	contracts map[string]Contract // copied from Options.Contracts

	deafWarning sync.Once // Wait warns once that notifications cannot reach it
}

// New returns a Manager over store. It checks opts first: a nil store, a
// negative limit or timeout, or a contract without a Version or a Validate
// function, or for a kind no job can have, is an *InputError.
func New(store Store, opts Options) (*Manager, error) {
	if store == nil {
		return nil, invalid("store", "nil")
	}
	for _, o := range [...]struct {
		name string
		neg  bool
	}{
		{"MaxParamsBytes", opts.MaxParamsBytes < 0}, {"MaxResultBytes", opts.MaxResultBytes < 0},
		{"Retention", opts.Retention < 0}, {"WriteTimeout", opts.WriteTimeout < 0},
	} {
		if o.neg {
			return nil, invalid(o.name, "negative")
		}
	}
	contracts, err := copyContracts(opts.Contracts)
	if err != nil {
		return nil, err
	}
	if opts.MaxParamsBytes == 0 {
		opts.MaxParamsBytes = DefaultMaxParamsBytes
	}
	if opts.MaxResultBytes == 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock
	}
	m := &Manager{store: store, opts: opts, logger: opts.Logger, obs: opts.Observer, contracts: contracts}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	return m, nil
}

// now is the Manager's clock's time as stored: UTC, to the microsecond.
func (m *Manager) now() time.Time { return m.opts.Clock.Now().UTC().Truncate(time.Microsecond) }

// Clock returns the Manager's clock (Options.Clock, or SystemClock).
func (m *Manager) Clock() Clock { return m.opts.Clock }

// Now returns the time by the Manager's clock as the store records it: in
// UTC, to the microsecond. Code that writes to the store beside the
// Manager, such as a reconciler's claims (package failover), stamps its
// writes with it, so that they compare with the Manager's own.
func (m *Manager) Now() time.Time { return m.now() }

// Options returns the options the Manager runs with, the defaults New
// filled in included (the Logger too). Layers built on the Manager, such as
// package failover, read its clock, logger and WriteTimeout from it. The
// Contracts map is a copy.
func (m *Manager) Options() Options {
	o := m.opts
	o.Logger = m.logger
	o.Contracts = maps.Clone(m.contracts)
	return o
}

// Store returns the store the Manager writes to.
func (m *Manager) Store() Store { return m.store }

// writeContext detaches an outcome-recording write from the caller's
// cancellation, bounded by WriteTimeout.
func (m *Manager) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	// A context that can never be cancelled and has no deadline (as
	// context.Background) is detached already.
	if _, ok := ctx.Deadline(); ok || ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, m.opts.WriteTimeout)
}

// checkID checks ctx and an ID argument before anything is read or written.
// An empty or oversized ID is invalid input. An ID that is not valid UTF-8
// or holds a NUL byte names nothing: the Manager makes IDs of base32 text,
// and PostgreSQL cannot even compare such a value with a stored one, so it
// is reported as not found without asking the store. Any other text is
// looked up, so that rows written by other means keep their IDs.
func (m *Manager) checkID(ctx context.Context, field, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return invalid(field, "empty")
	}
	if len(id) > maxNameBytes {
		return invalid(field, "longer than %d bytes", maxNameBytes)
	}
	if checkChars(field, id) != nil {
		return fmt.Errorf("jobs: %s %q: %w", field, id, ErrNotFound)
	}
	return nil
}

// Emit sends e to the Manager's Observer, stamped with the time by the
// Manager's clock, as the Manager's own events are. It is for layers built
// on the Manager, such as package failover, whose events (hedges,
// reconciliations) belong in the same stream. Without an Observer it does
// nothing.
func (m *Manager) Emit(ctx context.Context, e Event) { m.emit(ctx, e) }

func (m *Manager) emit(ctx context.Context, e Event) {
	if m.obs == nil {
		return
	}
	e.Time = m.now()
	m.obs.Observe(ctx, e)
}
