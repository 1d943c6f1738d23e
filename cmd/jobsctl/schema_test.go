package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// schema fails when the database is at another version than jobsctl, so
// that a deploy script can stop on it, and its status line says which way.
func TestSchemaExitStatusSaysBehindOrAhead(t *testing.T) {
	t.Parallel()
	future := time.Now().UTC().Format(time.RFC3339Nano)
	steps := []struct {
		name   string
		sql    string // run before, with $1 the last version
		code   int
		status string
	}{
		{"up to date", "", 0, "status    up to date\n"},
		{"ahead", `INSERT INTO intentjobs_schema_migrations (version, name, applied_at) VALUES ($1 + 1, 'from a newer release', '` + future + `')`,
			1, "status    ahead: the database was upgraded by a newer release; use a newer jobsctl\n"},
		{"behind", `DELETE FROM intentjobs_schema_migrations WHERE version >= $1`,
			1, "status    behind: LAST missing; run jobsctl migrate"}, // LAST: the newest migration
	}
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			last := lastVersion(t, jobs.Dialect(db.name))
			for _, st := range steps {
				if st.sql != "" {
					db.exec(t, st.sql, last)
				}
				jobsctl(t, nil, db.args("schema")...).want(t, st.code, strings.ReplaceAll(st.status, "LAST", lastMigration(t, jobs.Dialect(db.name))))

				r := jobsctl(t, nil, db.args("schema", "--json")...)
				r.want(t, st.code)
				var rep schemaReport
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Status != st.name {
					t.Errorf("%s: schema --json status %q, %v\n%s", st.name, rep.Status, err, r.stdout)
				}
			}
		})
	}
}

// lastMigration is the name of the dialect's newest migration.
func lastMigration(t *testing.T, dialect jobs.Dialect) string {
	t.Helper()
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Name
}

// lastVersion is the version of the dialect's newest migration.
func lastVersion(t *testing.T, dialect jobs.Dialect) int {
	t.Helper()
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}
