// Package jobsotel reports the events of a jobs.Manager as OpenTelemetry
// metrics and spans. It lives in a module of its own, so that the jobs
// package itself does not depend on OpenTelemetry.
//
//	obs, err := jobsotel.New() // the global MeterProvider and TracerProvider
//	if err != nil { … }
//	m, err := jobs.New(store, jobs.Options{Observer: obs})
//
// Metrics (attributes in brackets):
//
//	jobs.events              counter   every event [jobs.event, jobs.kind, jobs.provider]
//	jobs.operation.duration  histogram seconds spent in the store [jobs.event]
//	jobs.purged.jobs         counter   jobs removed by retention
//	jobs.purged.attempts     counter   attempts removed with them
//
// Race losses, refusals and key conflicts are jobs.events with jobs.event
// set to attempt.race_lost, attempt.refused and job.key_conflict.
//
// Each event also becomes a span named "jobs " + the event type, a child of
// the span in the caller's context, timed from the start of the store
// operation to its end, with the job, attempt and winner IDs as attributes.
// Owners are not recorded: they are often personal data.
package jobsotel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentjobs/jobs"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/intentjobs/jobs/otel"

// Attribute keys.
const (
	AttrEvent     = attribute.Key("jobs.event")
	AttrKind      = attribute.Key("jobs.kind")
	AttrProvider  = attribute.Key("jobs.provider")
	AttrJobID     = attribute.Key("jobs.job_id")
	AttrAttemptID = attribute.Key("jobs.attempt_id")
	AttrWinnerID  = attribute.Key("jobs.winner_id")
	AttrReason    = attribute.Key("jobs.reason")
	AttrPurged    = attribute.Key("jobs.purged.jobs")
	AttrPurgedAtt = attribute.Key("jobs.purged.attempts")
)

// durationBuckets suit database round trips: 0.5 ms to 10 s.
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Option configures New.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	spans bool
}

// WithMeterProvider sets where metrics go. Defaults to otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets where spans go. Defaults to otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithoutSpans records metrics only.
func WithoutSpans() Option { return func(c *config) { c.spans = false } }

// Observer is a jobs.Observer that records metrics and spans. It is safe
// for concurrent use.
type Observer struct {
	events         metric.Int64Counter
	duration       metric.Float64Histogram
	purgedJobs     metric.Int64Counter
	purgedAttempts metric.Int64Counter
	tracer         trace.Tracer // nil without spans
}

var _ jobs.Observer = (*Observer)(nil)

// New returns an Observer that records on the given providers.
func New(opts ...Option) (*Observer, error) {
	c := config{spans: true}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	meter := c.mp.Meter(ScopeName)
	o := &Observer{}
	var err error
	if o.events, err = meter.Int64Counter("jobs.events",
		metric.WithDescription("Events of jobs and attempts: created, replayed, started, refused, lost races, …"),
		metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("jobsotel: %w", err)
	}
	if o.duration, err = meter.Float64Histogram("jobs.operation.duration",
		metric.WithDescription("Time spent in the store by the operation behind an event."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("jobsotel: %w", err)
	}
	if o.purgedJobs, err = meter.Int64Counter("jobs.purged.jobs",
		metric.WithDescription("Terminal jobs removed by retention."),
		metric.WithUnit("{job}")); err != nil {
		return nil, fmt.Errorf("jobsotel: %w", err)
	}
	if o.purgedAttempts, err = meter.Int64Counter("jobs.purged.attempts",
		metric.WithDescription("Attempts removed with their jobs by retention."),
		metric.WithUnit("{attempt}")); err != nil {
		return nil, fmt.Errorf("jobsotel: %w", err)
	}
	if c.spans {
		o.tracer = c.tp.Tracer(ScopeName)
	}
	return o, nil
}

// Observe implements jobs.Observer.
func (o *Observer) Observe(ctx context.Context, e jobs.Event) {
	typ := AttrEvent.String(string(e.Type))
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, typ)
	if e.Kind != "" {
		attrs = append(attrs, AttrKind.String(e.Kind))
	}
	if e.Provider != "" {
		attrs = append(attrs, AttrProvider.String(e.Provider))
	}
	o.events.Add(ctx, 1, metric.WithAttributes(attrs...))
	o.duration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(typ))
	if e.Type == jobs.EventPurged {
		o.purgedJobs.Add(ctx, e.Count)
		o.purgedAttempts.Add(ctx, e.Attempts)
	}
	if o.tracer == nil {
		return
	}
	_, span := o.tracer.Start(ctx, "jobs "+string(e.Type),
		trace.WithTimestamp(e.Time.Add(-e.Duration)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	if e.JobID != "" {
		span.SetAttributes(AttrJobID.String(e.JobID))
	}
	if e.AttemptID != "" {
		span.SetAttributes(AttrAttemptID.String(e.AttemptID))
	}
	if e.WinnerID != "" {
		span.SetAttributes(AttrWinnerID.String(e.WinnerID))
	}
	if e.Reason != "" {
		span.SetAttributes(AttrReason.String(e.Reason))
	}
	if e.Type == jobs.EventPurged {
		span.SetAttributes(AttrPurged.Int64(e.Count), AttrPurgedAtt.Int64(e.Attempts))
	}
	if e.Err != nil {
		// A refusal is an answer, not a failure of the system: recorded,
		// without marking the span as an error.
		span.RecordError(e.Err, trace.WithTimestamp(e.Time))
	}
	span.End(trace.WithTimestamp(e.Time))
}
