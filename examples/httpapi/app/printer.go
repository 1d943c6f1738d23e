package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// spool is the pretend printers' memory of the requests they took, by the
// attempt's idempotency key and by their reference for it: what a
// failover.Reconciler asks about when an attempt is in doubt. It lasts as
// long as the process: an attempt left in doubt by an earlier run is one
// the printers cannot look up, and so one for an operator to resolve in
// the console.
type spool struct {
	mu    sync.Mutex
	byKey map[string]*spoolEntry
	byRef map[string]*spoolEntry
}

type spoolEntry struct {
	ref    string
	done   bool
	result json.RawMessage
}

func newSpool() *spool {
	return &spool{byKey: map[string]*spoolEntry{}, byRef: map[string]*spoolEntry{}}
}

// take records a request under the attempt's key and returns the
// printer's reference for it; a resent request gets the same reference.
func (s *spool) take(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byKey[key]; ok {
		return e.ref
	}
	e := &spoolEntry{ref: "spool-" + randomHex(4)}
	s.byKey[key], s.byRef[e.ref] = e, e
	return e.ref
}

// finish records that the request printed, with its result.
func (s *spool) finish(ref string, result json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byRef[ref]; ok {
		e.done, e.result = true, result
	}
}

// printer is one pretend printer as a failover.Provider, for the
// Reconciler: it answers lookups from the spool. The App's workers print
// themselves; Call is not used.
type printer struct {
	name  string
	spool *spool
}

func (p printer) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, failover.Definitive(fmt.Errorf("%s: the example's workers print by themselves", p.name))
}

func (p printer) Lookup(_ context.Context, a jobs.Attempt) (failover.Outcome, error) {
	p.spool.mu.Lock()
	defer p.spool.mu.Unlock()
	e := p.spool.byRef[a.ProviderRef]
	if a.ProviderRef == "" {
		e = p.spool.byKey[a.ProviderKey()]
	}
	switch {
	case e == nil:
		return failover.Outcome{}, fmt.Errorf("%s has no record of this request (it was spooled before the printer restarted): %w",
			p.name, failover.ErrLookupUnsupported)
	case e.done:
		return failover.Outcome{State: failover.OutcomeSucceeded, Result: e.result}, nil
	}
	return failover.Outcome{State: failover.OutcomePending}, nil
}

// Providers returns the printers as failover.Providers, for a
// Reconciler: it resolves the attempts whose acknowledgement or result
// never reached the worker by asking the spool.
func (a *App) Providers() map[string]failover.Provider {
	return map[string]failover.Provider{
		"laser":  printer{"laser", a.spool},
		"inkjet": printer{"inkjet", a.spool},
	}
}
