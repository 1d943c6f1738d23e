package jobs

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPgStatementsQualifyEveryTable: with a schema, every statement of the
// store names each of the library's tables it reads or writes with the
// schema, and leaves the rest of its text as it is; without one, the
// statements are the constants.
func TestPgStatementsQualifyEveryTable(t *testing.T) {
	t.Parallel()
	schema := pgx.Identifier{`App "Jobs" $1`}.Sanitize() // quotes and a $ survive
	plain, qualified := reflect.ValueOf(*pgSearchPathStatements), reflect.ValueOf(*newPgStatements(schema))
	table := regexp.MustCompile(`intentjobs_(jobs|attempts|verifications|schema_migrations)\b`)
	bare := regexp.MustCompile(`\b(FROM|JOIN|INTO|UPDATE)\s+intentjobs_`)
	for i := range plain.NumField() {
		name := plain.Type().Field(i).Name
		p, q := plain.Field(i).String(), qualified.Field(i).String()
		switch name {
		case "schema":
			if p != "" || q != schema {
				t.Errorf("schema = %q and %q, want \"\" and %q", p, q, schema)
			}
			continue
		case "jobsTable":
			if p != "intentjobs_jobs" || q != schema+".intentjobs_jobs" {
				t.Errorf("jobsTable = %q and %q", p, q)
			}
			continue
		}
		if p == "" {
			t.Errorf("%s: no statement", name)
			continue
		}
		if !table.MatchString(p) {
			t.Errorf("%s names none of the library's tables:\n%s", name, p)
		}
		if bare.MatchString(q) {
			t.Errorf("%s, qualified, still reads or writes a table by its bare name:\n%s", name, q)
		}
		if got := strings.ReplaceAll(q, schema+".", ""); got != p {
			t.Errorf("%s, qualified, differs from the constant in more than the schema:\n%s\nwant\n%s", name, q, p)
		}
	}
}
