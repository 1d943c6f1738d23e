package jobsotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
	jobsotel "github.com/intentjobs/jobs/otel"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// setup returns a Manager on a new SQLite file whose events go to an
// in-memory metric reader and span exporter.
func setup(t *testing.T, opts ...jobsotel.Option) (*jobs.Manager, *sdkmetric.ManualReader, *tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() {
		ctx := context.WithoutCancel(context.Background())
		mp.Shutdown(ctx)
		tp.Shutdown(ctx)
	})
	obs, err := jobsotel.New(append([]jobsotel.Option{jobsotel.WithMeterProvider(mp), jobsotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jobs.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return jobstest.NewManager(t, s, jobs.Options{Observer: obs, Logger: slog.New(slog.DiscardHandler)}), reader, spans, tp
}

// race runs a scenario: a submit and its replay, two attempts racing, the
// loser's late result, and a purge a day later.
func race(t *testing.T, ctx context.Context, m *jobs.Manager) (job jobs.Job, winner, loser jobs.Attempt) {
	t.Helper()
	req := jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{}`)}
	j, _, err := m.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	a1, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MarkRunning(ctx, a1.ID, "r1"); err != nil {
		t.Fatal(err)
	}
	a2, err := m.StartAttempt(ctx, j.ID, "", jobs.Hedge())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, a2.ID, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, a1.ID, json.RawMessage(`{"ok":true}`)); !errors.Is(err, jobs.ErrLostRace) {
		t.Fatalf("late complete: %v", err)
	}
	if _, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return j, a2, a1
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, reader, _, _ := setup(t)
	race(t, ctx, m)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}  // jobs.events by jobs.event
	histos := map[string]uint64{} // jobs.operation.duration counts by jobs.event
	totals := map[string]int64{}  // other counters
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != jobsotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, jobsotel.ScopeName)
		}
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					if md.Name == "jobs.events" {
						ev, _ := dp.Attributes.Value(jobsotel.AttrEvent)
						counts[ev.AsString()] += dp.Value
						if kind, ok := dp.Attributes.Value(jobsotel.AttrKind); ev.AsString() == "job.created" && (!ok || kind.AsString() != "charge") {
							t.Errorf("job.created without jobs.kind=charge: %v", dp.Attributes.ToSlice())
						}
					} else {
						totals[md.Name] += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				if md.Unit != "s" {
					t.Errorf("%s unit %q, want s", md.Name, md.Unit)
				}
				for _, dp := range data.DataPoints {
					ev, _ := dp.Attributes.Value(jobsotel.AttrEvent)
					histos[ev.AsString()] += dp.Count
					if dp.Sum <= 0 {
						t.Errorf("%s: durations sum to %v", ev.AsString(), dp.Sum)
					}
				}
			}
		}
	}
	want := map[string]int64{
		"job.created": 1, "job.replayed": 1, "attempt.started": 2, "attempt.running": 1,
		"attempt.succeeded": 1, "attempt.race_lost": 1, "jobs.purged": 1,
	}
	if len(counts) != len(want) {
		t.Errorf("jobs.events = %v, want %v", counts, want)
	}
	for ev, n := range want {
		if counts[ev] != n || histos[ev] != uint64(n) {
			t.Errorf("%s: counted %d, timed %d; want %d", ev, counts[ev], histos[ev], n)
		}
	}
	if totals["jobs.purged.jobs"] != 1 || totals["jobs.purged.attempts"] != 2 {
		t.Errorf("purged counters = %v, want 1 job and 2 attempts", totals)
	}
}

func TestSpans(t *testing.T) {
	t.Parallel()
	m, _, exporter, tp := setup(t)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	before := time.Now()
	j, winner, loser := race(t, ctx, m)
	parent.End()

	got := exporter.GetSpans()
	var names []string
	byName := map[string]tracetest.SpanStub{}
	for _, s := range got {
		if s.Name == "request" {
			continue
		}
		names = append(names, s.Name)
		byName[s.Name] = s
		if s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s: parent %v, want the request span", s.Name, s.Parent.SpanID())
		}
		if s.StartTime.Before(before.Add(-time.Second)) || !s.EndTime.After(s.StartTime) {
			t.Errorf("%s: from %v to %v", s.Name, s.StartTime, s.EndTime)
		}
	}
	wantNames := []string{"jobs job.created", "jobs job.replayed", "jobs attempt.started", "jobs attempt.running",
		"jobs attempt.started", "jobs attempt.succeeded", "jobs attempt.race_lost", "jobs jobs.purged"}
	if len(names) != len(wantNames) {
		t.Fatalf("spans %v, want %v", names, wantNames)
	}
	for i := range names {
		if names[i] != wantNames[i] {
			t.Errorf("span %d = %s, want %s", i, names[i], wantNames[i])
		}
	}
	attrs := func(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
		out := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes {
			out[kv.Key] = kv.Value
		}
		return out
	}
	lost := attrs(byName["jobs attempt.race_lost"])
	if lost[jobsotel.AttrJobID].AsString() != j.ID || lost[jobsotel.AttrAttemptID].AsString() != loser.ID || lost[jobsotel.AttrWinnerID].AsString() != winner.ID {
		t.Errorf("race_lost span attributes = %v", lost)
	}
	if p := attrs(byName["jobs jobs.purged"]); p[jobsotel.AttrPurged].AsInt64() != 1 || p[jobsotel.AttrPurgedAtt].AsInt64() != 2 {
		t.Errorf("purged span attributes = %v", p)
	}
}

func TestWithoutSpans(t *testing.T) {
	t.Parallel()
	m, _, exporter, _ := setup(t, jobsotel.WithoutSpans())
	race(t, context.Background(), m)
	if n := len(exporter.GetSpans()); n != 0 {
		t.Errorf("%d spans recorded with WithoutSpans", n)
	}
}
