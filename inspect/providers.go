package inspect

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/intentjobs/jobs"
)

// ProviderReport sums up one provider's recent attempts, bucket by
// bucket, and its verifications.
type ProviderReport struct {
	Provider string
	Buckets  []Bucket // oldest first, each Window/len(Buckets) long
	Total    Bucket   // the whole window

	// Verifications are the provider's latest verification per kind and
	// contract version, newest first (where the store is a
	// jobs.VerificationStore).
	Verifications []jobs.Verification
}

// Bucket counts the attempts created in one stretch of time, by outcome.
type Bucket struct {
	Start     time.Time
	Succeeded int // succeeded or lost: the provider delivered
	Failed    int // failed
	Cancelled int
	InDoubt   int           // starting or unknown
	Running   int           // running
	Latency   time.Duration // median time to a result, of those that delivered
	latencies []time.Duration
}

// Attempts is how many attempts the bucket counts.
func (b Bucket) Attempts() int { return b.Succeeded + b.Failed + b.Cancelled + b.InDoubt + b.Running }

// Rate is n as a share of the bucket's attempts (0 for none).
func (b Bucket) Rate(n int) float64 {
	if t := b.Attempts(); t > 0 {
		return float64(n) / float64(t)
	}
	return 0
}

// ProvidersQuery says what Providers sums up.
type ProvidersQuery struct {
	Window  time.Duration // how far back; 0 means 24 hours
	Buckets int           // how many stretches; 0 means 24
	// MaxAttempts bounds how many attempts are read, the newest first;
	// 0 means 50000. Sampled reports say so (Sampled).
	MaxAttempts int
}

// ProvidersReport is what Providers returns.
type ProvidersReport struct {
	Since     time.Time
	Window    time.Duration
	Providers []ProviderReport // by name
	// Sampled is set when the window held more attempts than
	// MaxAttempts: the report counts the newest of them only.
	Sampled bool
}

// Providers sums up each provider's attempts created within q.Window,
// and lists its verifications. It needs a jobs.AttemptLister.
func (in *Inspector) Providers(ctx context.Context, q ProvidersQuery) (ProvidersReport, error) {
	al, ok := in.store.(jobs.AttemptLister)
	if !ok {
		return ProvidersReport{}, unsupported("provider statistics", in.store, "AttemptLister")
	}
	window := cmpOr(q.Window, 24*time.Hour)
	n := cmpOr(q.Buckets, 24)
	maxN := cmpOr(q.MaxAttempts, 50000)
	now := in.m.Now()
	since := now.Add(-window)
	step := window / time.Duration(n)
	rep := ProvidersReport{Since: since, Window: window}
	byName := map[string]*ProviderReport{}
	get := func(name string) *ProviderReport {
		p := byName[name]
		if p == nil {
			p = &ProviderReport{Provider: name, Buckets: make([]Bucket, n), Total: Bucket{Start: since}}
			for i := range p.Buckets {
				p.Buckets[i].Start = since.Add(time.Duration(i) * step)
			}
			byName[name] = p
		}
		return p
	}
	read, after := 0, ""
	for {
		lim := min(1000, maxN-read)
		if lim <= 0 {
			// Any more in the window? Then the report is a sample.
			more, err := al.ListAttempts(ctx, jobs.AttemptQuery{CreatedAfter: since, Newest: true, After: after, Limit: 1})
			if err != nil {
				return ProvidersReport{}, err
			}
			rep.Sampled = len(more) > 0
			break
		}
		page, err := al.ListAttempts(ctx, jobs.AttemptQuery{CreatedAfter: since, Newest: true, After: after, Limit: lim})
		if err != nil {
			return ProvidersReport{}, err
		}
		for _, a := range page {
			p := get(a.Provider)
			i := min(int(a.CreatedAt.Sub(since)/step), n-1)
			if i < 0 {
				continue
			}
			p.Buckets[i].add(a)
			p.Total.add(a)
		}
		read += len(page)
		if len(page) < lim {
			break
		}
		after = page[len(page)-1].ID
	}
	if vs, ok := in.store.(jobs.VerificationStore); ok {
		all, err := vs.Verifications(ctx, jobs.VerificationFilter{Limit: 1000})
		if err != nil {
			return ProvidersReport{}, err
		}
		seen := map[[3]string]bool{}
		for _, v := range all {
			k := [3]string{v.Provider, v.Kind, v.ContractVersion}
			if seen[k] {
				continue
			}
			seen[k] = true
			p := get(v.Provider)
			p.Verifications = append(p.Verifications, v)
		}
	}
	for _, p := range byName {
		for i := range p.Buckets {
			p.Buckets[i].settle()
		}
		p.Total.settle()
		rep.Providers = append(rep.Providers, *p)
	}
	sort.Slice(rep.Providers, func(i, j int) bool { return rep.Providers[i].Provider < rep.Providers[j].Provider })
	return rep, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (b *Bucket) add(a jobs.Attempt) {
	switch a.State {
	case jobs.AttemptSucceeded, jobs.AttemptLost:
		b.Succeeded++
		if !a.FinishedAt.IsZero() {
			b.latencies = append(b.latencies, a.FinishedAt.Sub(a.CreatedAt))
		}
	case jobs.AttemptFailed:
		b.Failed++
	case jobs.AttemptCancelled:
		b.Cancelled++
	case jobs.AttemptRunning:
		b.Running++
	default:
		b.InDoubt++
	}
}

func (b *Bucket) settle() {
	if len(b.latencies) > 0 {
		slices.Sort(b.latencies)
		b.Latency = b.latencies[len(b.latencies)/2]
	}
	b.latencies = nil
}
