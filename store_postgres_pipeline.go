package jobs

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Complete on PostgreSQL is two statements (pgCompleteJob, then
// pgCompleteFate) that must run in one transaction and should cost one
// round trip. pgx's Batch does both, but its pipeline's bookkeeping
// allocates more than the rest of the call; pgconn runs the same two
// prepared statements in one message to the server, ending in one Sync,
// which makes them one implicit transaction, and hands back the row's raw
// values. pgCompletePipeline does that on a connection whose statements
// pgx prepares and caches (its default mode): the statements are prepared
// once per connection through pgx itself, so that pgx knows them. On a
// connection in another mode (unnamed statements or the simple protocol,
// as behind a transaction pooler), or of another driver, the store runs
// the one-statement form, pgCompleteAttempt, instead.

// The wire types of the statements' parameters and columns. The parameters
// are sent in binary, in which text and json are their bytes as they are.
const (
	oidBool        = 16
	oidInt8        = 20
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidTimestamptz = 1184
)

// pgCompleteFateTypes are the types of pgCompleteFate's columns, the job's
// (pgJobColsOfJobs) and then the attempt's.
var pgCompleteFateTypes = [...]uint32{
	oidText, oidText, oidText, oidText, oidText, oidJSON, oidText, oidText, oidInt8, oidInt4, oidJSON, oidText, oidText,
	oidTimestamptz, oidTimestamptz, oidTimestamptz,
	oidInt4, oidText, oidText, oidInt8, oidBool, oidText, oidText, oidTimestamptz,
}

// pgBinary asks for every column (or sends every parameter) in binary.
var pgBinary = []int16{1}

// errNotPipelined reports a connection on which pgCompletePipeline does not
// run: the caller runs pgCompleteAttempt instead.
var errNotPipelined = fmt.Errorf("jobs: connection does not cache prepared statements")

// completedRow is what Complete reads back: the job and the attempt after
// the step.
type completedRow struct {
	j     Job
	a     Attempt
	found bool
}

// pgCompletePipeline runs Complete's two statements (q.completeJob and
// q.completeFate) on c in one round trip and reads the row of the second
// into r. It returns errNotPipelined,
// having run neither, when c does not cache prepared statements, or the
// statements as prepared do not have the types the decoding below reads
// (a schema changed by hand).
func pgCompletePipeline(ctx context.Context, c *pgx.Conn, q *pgStatements, comp Completion, r *completedRow) error {
	if c.Config().DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return errNotPipelined
	}
	swap, err := c.Prepare(ctx, q.completeJob, q.completeJob) // a map lookup once prepared
	if err != nil {
		return err
	}
	fate, err := c.Prepare(ctx, q.completeFate, q.completeFate)
	if err != nil {
		return err
	}
	if !sameTypes(fate.Fields, pgCompleteFateTypes[:]) ||
		!sameOIDs(swap.ParamOIDs, oidText, oidJSON, oidTimestamptz, oidText) ||
		!sameOIDs(fate.ParamOIDs, oidText, oidTimestamptz, oidText, oidText, oidText, oidText) {
		return errNotPipelined
	}

	var at [8]byte
	binary.BigEndian.PutUint64(at[:], uint64(comp.At.UnixMicro()-pgEpochMicros))
	id, token := []byte(comp.AttemptID), []byte(comp.ClaimToken)
	var b pgconn.Batch
	b.ExecStatement(swap, [][]byte{id, comp.Result, at[:], token}, pgBinary, nil)
	b.ExecStatement(fate, [][]byte{id, at[:], token,
		[]byte(reasonLostPrefix), []byte(reasonLostSuffix), []byte(reasonClosedPrefix)}, pgBinary, pgBinary)
	mrr := c.PgConn().ExecBatch(ctx, &b)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for rr.NextRow() {
			if err := r.decode(rr.Values(), comp); err != nil {
				mrr.Close()
				return err
			}
		}
		if _, err := rr.Close(); err != nil {
			mrr.Close()
			return err
		}
	}
	return mrr.Close()
}

// badConn is an error after which the connection is closed: database/sql
// discards a connection when the function given to its Raw returns one
// (see pgxOn).
type badConn struct{ error }

func (e badConn) Unwrap() []error { return []error{e.error, driver.ErrBadConn} }

// sameTypes reports whether fields are of the types want.
func sameTypes(fields []pgconn.FieldDescription, want []uint32) bool {
	if len(fields) != len(want) {
		return false
	}
	for i, f := range fields {
		if f.DataTypeOID != want[i] {
			return false
		}
	}
	return true
}

// sameOIDs reports whether the parameter types got are want.
func sameOIDs(got []uint32, want ...uint32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// decode reads the binary values of one row of pgCompleteFate.
func (r *completedRow) decode(v [][]byte, comp Completion) error {
	if len(v) != len(pgCompleteFateTypes) {
		return fmt.Errorf("jobs: complete: %d columns, want %d", len(v), len(pgCompleteFateTypes))
	}
	var d wireDecoder
	j := &r.j
	j.ID, j.Owner, j.Key, j.Kind, j.Provider = d.text(v[0]), d.text(v[1]), d.text(v[2]), d.text(v[3]), d.text(v[4])
	j.Params, j.Fingerprint, j.State = d.bytes(v[5]), d.text(v[6]), JobState(knownState(v[7]))
	j.Version, j.Attempts = d.int8(v[8]), int(d.int4(v[9]))
	if v[10] != nil {
		j.Result = d.bytes(v[10])
	}
	if string(v[11]) == comp.AttemptID {
		j.CompletedBy = comp.AttemptID
	} else {
		j.CompletedBy = d.text(v[11])
	}
	j.Reason = d.text(v[12])
	j.CreatedAt, j.UpdatedAt, j.ClosedAt = d.time(v[13]), d.time(v[14]), d.time(v[15])

	a := &r.a
	a.ID, a.JobID, a.Seq = comp.AttemptID, j.ID, int(d.int4(v[16]))
	if string(v[17]) == j.Provider {
		a.Provider = j.Provider
	} else {
		a.Provider = d.text(v[17])
	}
	a.State, a.BaseVersion = AttemptState(knownState(v[18])), d.int8(v[19])
	a.Hedge = d.bool(v[20])
	a.ProviderRef, a.Reason, a.CreatedAt = d.text(v[21]), d.text(v[22]), d.time(v[23])
	r.found = true
	return d.err
}

// wireDecoder reads PostgreSQL's binary values, keeping the first error.
// NULL (nil) is the zero value.
type wireDecoder struct{ err error }

func (d *wireDecoder) text(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	return string(v)
}

func (d *wireDecoder) bytes(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *wireDecoder) fixed(v []byte, n int) []byte {
	if len(v) != n && v != nil && d.err == nil {
		d.err = fmt.Errorf("jobs: complete: a binary value of %d bytes, want %d", len(v), n)
	}
	if len(v) != n {
		return make([]byte, n)
	}
	return v
}

func (d *wireDecoder) int8(v []byte) int64 { return int64(binary.BigEndian.Uint64(d.fixed(v, 8))) }
func (d *wireDecoder) int4(v []byte) int32 { return int32(binary.BigEndian.Uint32(d.fixed(v, 4))) }
func (d *wireDecoder) bool(v []byte) bool  { return d.fixed(v, 1)[0] != 0 }

// time reads a timestamptz. NULL is the zero time.
func (d *wireDecoder) time(v []byte) time.Time {
	if v == nil {
		return time.Time{}
	}
	us := d.int8(v)
	if us == infinityMicros || us == -infinityMicros-1 {
		if d.err == nil {
			d.err = fmt.Errorf("jobs: complete: an infinite timestamp")
		}
		return time.Time{}
	}
	return time.UnixMicro(us + pgEpochMicros).UTC()
}

// PostgreSQL's binary timestamps count microseconds since 2000-01-01 UTC
// (pgEpochMicros in Unix microseconds), rounded down as pgx sends them;
// infinity is the largest count, -infinity the smallest.
const (
	pgEpochMicros  = 946_684_800_000_000
	infinityMicros = 1<<63 - 1
)
