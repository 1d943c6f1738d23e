package perf

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intentjobs/jobs/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// databases are the places a test opens contenders in: a SQLite file of
// each one's own at both synchronous settings, and a PostgreSQL schema of
// each one's own when PostgreSQL is configured.
var databases = []struct {
	name, dialect, synchronous string
}{
	{"sqlite-full", SQLite, "FULL"},
	{"sqlite-normal", SQLite, "NORMAL"},
	{"postgres", Postgres, ""},
}

// newDatabase returns a database of its own for one contender of t.
func newDatabase(t *testing.T, dialect, synchronous string) Database {
	t.Helper()
	if dialect == Postgres {
		return Database{Dialect: Postgres, DSN: testdb.PostgresDSN(t)}
	}
	return Database{Dialect: SQLite, DSN: filepath.Join(t.TempDir(), "bench.db"), Synchronous: synchronous}
}

// openContenders opens the library and both baselines, each in a database
// of its own, closed when t ends.
func openContenders(t *testing.T, dialect, synchronous string) []Lifecycle {
	t.Helper()
	ctx := context.Background()
	lib, err := OpenLibrary(ctx, newDatabase(t, dialect, synchronous))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	out := []Lifecycle{lib}
	for _, style := range []CompleteStyle{CompleteInOneStatement, CompleteInTransaction} {
		b, err := OpenBaseline(ctx, newDatabase(t, dialect, synchronous), style)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		out = append(out, b)
	}
	return out
}

// TestEveryWorkloadHoldsItsInvariantsForEveryContender runs each workload
// briefly for the library and both baselines and expects no violation:
// the baselines are held to the same checks as the library.
func TestEveryWorkloadHoldsItsInvariantsForEveryContender(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, c := range openContenders(t, db.dialect, db.synchronous) {
				if err := c.Tables().FillTo(ctx, 300); err != nil {
					t.Fatal(err)
				}
				for _, w := range Suite() {
					if !c.Runs(w) {
						continue
					}
					w.Stored = 300
					tr, err := Prepare(ctx, w, c, 2*StormCallers)
					if err != nil {
						t.Fatalf("%s/%s: %v", w.Name, c.Name(), err)
					}
					tr.Run(ctx)
					if r := tr.Check(ctx); r.Violations != 0 {
						t.Errorf("%s/%s: %d violations: %v", w.Name, c.Name(), r.Violations, r.Problems)
					}
				}
			}
		})
	}
}

// TestRequestParamsAreAboutAKilobyteOfJSONDifferentPerKey checks the
// requests the workloads send, and the rows they prefill, against the
// intended size and shape.
func TestRequestParamsAreAboutAKilobyteOfJSONDifferentPerKey(t *testing.T) {
	t.Parallel()
	a, b := ParamsFor("key-a"), ParamsFor("key-b")
	if string(a) != string(ParamsFor("key-a")) {
		t.Error("ParamsFor gives one key two requests")
	}
	if string(a) == string(b) {
		t.Error("ParamsFor gives two keys the same request")
	}
	for _, p := range []json.RawMessage{a, b, ResultFor("att_1")} {
		var v map[string]any
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("not JSON: %v: %s", err, p)
		}
	}
	if n := len(a); n < 900 || n > 1200 {
		t.Errorf("request of %d bytes, want about 1 KB", n)
	}
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, c := range openContenders(t, db.dialect, db.synchronous)[:2] {
				ids, err := c.Tables().FillPending(ctx, "fill", 20)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for _, id := range ids {
					var params string
					if err := c.Tables().r.QueryRowContext(ctx, c.Tables().q(`SELECT CAST(params AS text) FROM {jobs} WHERE id = $1`), id).Scan(&params); err != nil {
						t.Fatal(err)
					}
					var v map[string]any
					if err := json.Unmarshal([]byte(params), &v); err != nil {
						t.Fatalf("%s: prefilled params are not JSON: %v", c.Name(), err)
					}
					if n := len(params); n < 900 || n > 1200 {
						t.Errorf("%s: prefilled params of %d bytes, want about 1 KB", c.Name(), n)
					}
					if seen[params] {
						t.Errorf("%s: two prefilled jobs have the same params", c.Name())
					}
					seen[params] = true
				}
			}
		})
	}
}

// TestSQLiteContendersCommitWithTheRequestedSynchronous reads the setting
// back from every contender's writer connection: a DSN parameter that the
// driver silently ignores would compare one contender at FULL with another
// at NORMAL. It reads the writer's page cache size too, which decides how
// much of a large table's indexes a write finds in memory, before and after
// a prefill (which enlarges it for a while), and wants the library's.
func TestSQLiteContendersCommitWithTheRequestedSynchronous(t *testing.T) {
	t.Parallel()
	for _, sync := range []string{"FULL", "NORMAL"} {
		t.Run(sync, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var cacheSize int
			for i, c := range openContenders(t, SQLite, sync) {
				var got, cache int
				if err := c.Tables().w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if want := sqliteSynchronous[sync]; got != want {
					t.Errorf("%s: synchronous = %d, want %d (%s)", c.Name(), got, want, sync)
				}
				if err := c.Tables().FillTo(ctx, 10); err != nil {
					t.Fatal(err)
				}
				if err := c.Tables().w.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					cacheSize = cache
				} else if cache != cacheSize {
					t.Errorf("%s: cache_size = %d after a prefill, want %d as %s", c.Name(), cache, cacheSize, "jobs")
				}
			}
			if cacheSize != -32768 {
				t.Errorf("the library's writer: cache_size = %d, want -32768 (jobs.OpenSQLite's)", cacheSize)
			}
		})
	}
}

// TestBaselineKeepsALeanSchemaOfItsOwn checks that the baseline pays for
// none of the library's schema: no trigger (the library's close
// notification), no CHECK constraint, none of the library's tables, and no
// index beyond the keys, the attempts' job index and the unique index that
// keeps one attempt in doubt per job.
func TestBaselineKeepsALeanSchemaOfItsOwn(t *testing.T) {
	t.Parallel()
	wantIndexes := "attempts_job_id attempts_one_in_doubt attempts_pkey jobs_owner_idempotency_key_key jobs_pkey"
	tests := []struct {
		dialect        string
		tables         string // every table, in name order
		indexes        string // every index, in name order
		triggersChecks string // a count of triggers and CHECK constraints
	}{
		{Postgres,
			`SELECT string_agg(table_name, ' ' ORDER BY table_name) FROM information_schema.tables WHERE table_schema = current_schema()`,
			`SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes WHERE schemaname = current_schema()`,
			`SELECT (SELECT count(*) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
                      WHERE c.relnamespace = current_schema()::regnamespace AND NOT g.tgisinternal)
                  + (SELECT count(*) FROM pg_constraint WHERE connamespace = current_schema()::regnamespace AND contype = 'c')`},
		{SQLite,
			`SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name)`,
			// SQLite names the indexes of PRIMARY KEY and UNIQUE constraints
			// itself; they are named here as PostgreSQL names them.
			`SELECT group_concat(name, ' ') FROM (SELECT CASE name
                 WHEN 'sqlite_autoindex_jobs_1' THEN 'jobs_pkey' WHEN 'sqlite_autoindex_jobs_2' THEN 'jobs_owner_idempotency_key_key'
                 WHEN 'sqlite_autoindex_attempts_1' THEN 'attempts_pkey' ELSE name END AS name
               FROM sqlite_schema WHERE type = 'index' ORDER BY 1)`,
			`SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger')
                  + (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND sql LIKE '%CHECK%')`},
	}
	for _, tt := range tests {
		t.Run(tt.dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := openContenders(t, tt.dialect, "FULL")[1].(*Baseline)
			var tables, indexes string
			var triggersChecks int
			for q, dest := range map[string]any{tt.tables: &tables, tt.indexes: &indexes, tt.triggersChecks: &triggersChecks} {
				if err := b.r.QueryRowContext(ctx, q).Scan(dest); err != nil {
					t.Fatal(err)
				}
			}
			if tables != "attempts jobs" {
				t.Errorf("tables %q, want only the baseline's own: attempts jobs", tables)
			}
			if indexes != wantIndexes {
				t.Errorf("indexes %q, want %q", indexes, wantIndexes)
			}
			if triggersChecks != 0 {
				t.Errorf("%d triggers and CHECK constraints, want none", triggersChecks)
			}
		})
	}
}

// TestBaselineCompletesInOneRoundTripOnPostgres counts the requests of
// the baseline's Complete: the one-statement CAS is one round trip, the
// transaction variant one per statement.
func TestBaselineCompletesInOneRoundTripOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		style    CompleteStyle
		min, max int64 // round trips per Complete
	}{
		{CompleteInOneStatement, 1, 1},
		{CompleteInTransaction, 4, 5}, // BEGIN, if the driver sends it apart, then four statements
	}
	for _, tt := range tests {
		b, err := OpenBaseline(ctx, newDatabase(t, Postgres, ""), tt.style)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		const jobs = 10
		pairs, err := b.Tables().FillRaces(ctx, "rt", jobs+1)
		if err != nil {
			t.Fatal(err)
		}
		// Warm up: the first use of a query on a connection prepares it.
		if _, err := b.Complete(ctx, pairs[jobs][0], ResultFor(pairs[jobs][0])); err != nil {
			t.Fatal(err)
		}
		before := b.RoundTrips()
		for _, p := range pairs[:jobs] {
			if won, err := b.Complete(ctx, p[0], ResultFor(p[0])); err != nil || !won {
				t.Fatalf("%s: complete %s: won %v, %v", b.Name(), p[0], won, err)
			}
		}
		// database/sql may ping a connection that was idle for over a
		// second before reusing it: allow one.
		got := b.RoundTrips() - before
		if got < tt.min*jobs || got > tt.max*jobs+1 {
			t.Errorf("%s: %d round trips for %d completes, want %d to %d each", b.Name(), got, jobs, tt.min, tt.max)
		}
	}
}

// liar is a contender that breaks the invariants the checks exist for.
type liar struct {
	Lifecycle
	fault string
}

func (l liar) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	switch l.fault {
	case "duplicate":
		// A new job for every call, as a check-then-insert without a
		// unique key makes under a storm.
		return l.Lifecycle.Submit(ctx, owner, key+"-"+NewKey(), params)
	case "same id":
		id, _, err := l.Lifecycle.Submit(ctx, owner, "one-key", ParamsFor("one-key"))
		return id, true, err
	}
	return l.Lifecycle.Submit(ctx, owner, key, params)
}

func (l liar) Complete(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	switch l.fault {
	case "two winners":
		_, err := l.Lifecycle.Complete(ctx, attemptID, result)
		return true, err
	case "wrong result":
		// Store the result the other attempt offers.
		other := attemptID[:len(attemptID)-1] + map[byte]string{'a': "b", 'b': "a"}[attemptID[len(attemptID)-1]]
		return l.Lifecycle.Complete(ctx, attemptID, ResultFor(other))
	}
	return l.Lifecycle.Complete(ctx, attemptID, result)
}

// TestChecksCatchABrokenContender runs contenders that break one invariant
// each through the workloads' checks, which must report it.
func TestChecksCatchABrokenContender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := openContenders(t, SQLite, "NORMAL")[1]
	workload := func(name string) Workload {
		for _, w := range Suite() {
			if w.Name == name {
				return w
			}
		}
		t.Fatalf("no workload %s", name)
		return Workload{}
	}
	tests := []struct {
		fault, workload, want string
	}{
		{"duplicate", "storm-g64", "caller 1 got"},
		{"same id", "submit-new-g16", "which another new key got too"},
		{"two winners", "complete-race-g16", "2 winners"},
		{"wrong result", "complete-race-g16", "not its winner's"},
	}
	for _, tt := range tests {
		tr, err := Prepare(ctx, workload(tt.workload), liar{b, tt.fault}, 2*StormCallers)
		if err != nil {
			t.Fatal(err)
		}
		tr.Run(ctx)
		r := tr.Check(ctx)
		if !strings.Contains(strings.Join(r.Problems, "\n"), tt.want) {
			t.Errorf("%s: problems %q, want one saying %q", tt.fault, r.Problems, tt.want)
		}
	}
}

// TestWarmReadsTheIndexesSubmitReads checks that Warm reads, on SQLite,
// the indexes every Submit descends for both the library and the baseline
// (the primary key and the unique key of owner and idempotency key) and no
// partial index, and that it reads nothing on PostgreSQL.
func TestWarmReadsTheIndexesSubmitReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range openContenders(t, db.dialect, db.synchronous)[:2] {
				tables := c.Tables()
				if err := tables.FillTo(ctx, 50); err != nil {
					t.Fatal(err)
				}
				got, err := tables.Warm(ctx)
				if err != nil {
					t.Fatalf("%s: %v", c.Name(), err)
				}
				var want []string
				if db.dialect == SQLite {
					// The indexes of the jobs table's PRIMARY KEY and UNIQUE constraint.
					want = []string{"sqlite_autoindex_" + tables.s.jobs + "_1", "sqlite_autoindex_" + tables.s.jobs + "_2"}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s: warmed %q, want %q", c.Name(), got, want)
				}
			}
		})
	}
}

// TestLeanContendersHoldTheirInvariants runs the Submit workloads briefly
// for the leanest baseline and for it with each of the library's choices
// added, and expects no violation.
func TestLeanContendersHoldTheirInvariants(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			features := []LeanFeature{0}
			for _, f := range LeanFeatures {
				if f.Feature != FileLock || db.dialect == SQLite {
					features = append(features, f.Feature)
				}
			}
			for _, f := range features {
				c, err := OpenLean(ctx, newDatabase(t, db.dialect, db.synchronous), f)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				for _, w := range Suite() {
					if !c.Runs(w) && (f != 0 || w.NeedsTables()) {
						continue
					}
					if f != 0 && !w.Ablation {
						continue
					}
					tr, err := Prepare(ctx, w, c, 2*StormCallers)
					if err != nil {
						t.Fatalf("%s/%s: %v", w.Name, c.Name(), err)
					}
					tr.Run(ctx)
					if r := tr.Check(ctx); r.Violations != 0 {
						t.Errorf("%s/%s: %d violations: %v", w.Name, c.Name(), r.Violations, r.Problems)
					}
				}
			}
		})
	}
}

// TestRequestSizes checks the sizes of the requests of each size.
func TestRequestSizes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ size, lo, hi int }{{Size100B, 80, 130}, {Size1KB, 900, 1200}, {Size10KB, 9000, 11500}} {
		p := SizedParamsFor(tt.size, "k")
		var v map[string]any
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("size %d: not JSON: %v", tt.size, err)
		}
		if len(p) < tt.lo || len(p) > tt.hi {
			t.Errorf("size %d: %d bytes, want %d to %d", tt.size, len(p), tt.lo, tt.hi)
		}
		if string(p) == string(SizedParamsFor(tt.size, "other")) {
			t.Errorf("size %d: two keys, one request", tt.size)
		}
	}
}

// TestCompleteVariantsThatKeepTheContractHoldTheInvariants races Completes
// through the library's one-statement Complete and its narrow variant, run
// by the benchmark on the library's schema, and expects one winner per job
// and every loser lost. (The unlocked variant breaks that on purpose.)
func TestCompleteVariantsThatKeepTheContractHoldTheInvariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{CompleteLibrary, CompleteNarrow} {
		c, err := OpenCompleteVariant(ctx, newDatabase(t, Postgres, ""), name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		for _, w := range Suite() {
			if !c.Runs(w) {
				continue
			}
			tr, err := Prepare(ctx, w, c, 2*StormCallers)
			if err != nil {
				t.Fatalf("%s/%s: %v", w.Name, name, err)
			}
			tr.Run(ctx)
			if r := tr.Check(ctx); r.Violations != 0 {
				t.Errorf("%s/%s: %d violations: %v", w.Name, name, r.Violations, r.Problems)
			}
		}
	}
}
