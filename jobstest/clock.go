package jobstest

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// Clock is a manual jobs.Clock for tests: it stands still until Advance
// moves it, and its timers fire when it passes their time. Use it as
// jobs.Options.Clock to drive silences, deadlines, claims and retention
// without sleeping.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

type timer struct {
	c      *Clock
	at     time.Time
	ch     chan time.Time
	active bool
}

var _ jobs.Clock = (*Clock)(nil)

// NewClock returns a clock set to start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires once the clock has been advanced by d;
// at once if d is not positive.
func (c *Clock) NewTimer(d time.Duration) jobs.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1), active: true}
	if d <= 0 {
		t.active = false
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.signal()
	return t
}

func (c *Clock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	t.c.prune()
	t.c.signal()
	return was
}

func (c *Clock) prune() {
	live := c.timers[:0]
	for _, t := range c.timers {
		if t.active {
			live = append(live, t)
		}
	}
	c.timers = live
}

// Advance moves the clock forward by d, firing due timers in time order.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	for _, t := range c.timers {
		if t.active && !t.at.After(end) {
			c.now = t.at
			t.active = false
			t.ch <- t.at
		}
	}
	c.now = end
	c.prune()
	c.signal()
}

// WaitTimers waits until exactly n timers are pending. Goroutines under
// test register their timers when they reach a waiting point, so this is
// how a test knows that they got there. It fails the test after a minute
// of real time, a bound meant only to end a test that hangs.
func (c *Clock) WaitTimers(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %d pending timers: have %d", n, got)
		}
	}
}

// Step waits for n pending timers, then advances the clock by d.
func (c *Clock) Step(t testing.TB, n int, d time.Duration) {
	t.Helper()
	c.WaitTimers(t, n)
	c.Advance(d)
}
