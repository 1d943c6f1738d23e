#!/usr/bin/env bash
# What each part of PostgreSQL's Complete costs on the server.
#
# Applies the library's migrations to a scratch schema, fills it with
# 200,000 running jobs of two running attempts each, and runs each statement
# of this directory with pgbench on one connection: a transaction completes
# one job's first attempt (the winner) and then its second (the loser). The
# job store is refilled before every variant, and the variants run in the
# order given, then again in reverse, to spread the machine's drift. Commits
# do not wait for the disk (synchronous_commit=off), so the figures are the
# server's CPU per pair of Completes, plus one local round trip per
# statement.
#
#   bench/ablation/run.sh [variant ...]    # default: all of them
#
# The variants (files NAME.sql, with $1 the attempt, $2 the result, $3 the
# time, $4 a claim token, $5-$7 the pieces of the loser's reason):
#   library               pgCompleteAttempt of store_postgres_sql.go, the one statement the
#                         store runs where it cannot send two together (plus a
#                         last column, whether the attempt won)
#   library-narrow        the same, returning 4 columns of the job, not 16
#   library-unlocked-job  the same, reading the job without FOR UPDATE
#                         (unsafe: a loser may not learn who won)
#   lean                  the baseline's statement, on the library's schema
#   lean-locked           lean with the attempt locked (FOR UPDATE): the
#                         cancel-vs-complete safety, nothing more
#   two-statements        what the store runs on pgx's default connections:
#                         pgCompleteJob, then pgCompleteFate, in one pipeline
#                         (one round trip); the parameters numbered as above
#
# The report (cd bench && go run ./cmd/report) runs library, library-unlocked-job
# and library-narrow as contenders too (perf.CompleteVariants, embedded by
# sql.go), through the client and interleaved with the library itself.
#
# Needs psql and pgbench, and PostgreSQL at JOBS_TEST_POSTGRES_DSN (default:
# the local test database). The scratch schema is dropped at the end.
set -euo pipefail
cd "$(dirname "$0")"
dsn="${JOBS_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
schema="jobs_ablation_$$"
seconds="${SECONDS_PER_VARIANT:-8}"
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(library library-narrow library-unlocked-job lean lean-locked two-statements)

psql_() { PGOPTIONS="-c client_min_messages=warning" psql "$dsn" -q -v ON_ERROR_STOP=1 "$@"; }
trap 'psql_ -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
tmp="$(mktemp -d)"

psql_ -c "CREATE SCHEMA $schema"
{ echo "SET search_path = $schema;"; grep -hv '^-- +goose' ../../migrations/postgres/0*.sql; } | psql_ >/dev/null

fill() {
	psql_ >/dev/null <<-EOF
	SET search_path = $schema;
	TRUNCATE intentjobs_jobs CASCADE;
	INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count, created_at, updated_at)
	SELECT 'job' || g, 'o', 'k' || g, 'charge', 'psp', '{"a":1}', 'f', 'running', 1, 2, now(), now()
	  FROM generate_series(1, 200000) g;
	INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
	SELECT 'att' || g || '_' || s, 'job' || g, s, 'psp', 'running', 1, s = 2, now(), now()
	  FROM generate_series(1, 200000) g, generate_series(1, 2) s;
	VACUUM ANALYZE intentjobs_jobs;
	VACUUM ANALYZE intentjobs_attempts;
	EOF
}

# script NAME writes a pgbench script completing attempt 1, then attempt 2,
# of a random job, each in a pipeline of its own.
script() {
	local out="$tmp/$1.pgb"
	echo '\set j random(1, 200000)' >"$out"
	for side in 1 2; do
		echo '\startpipeline' >>"$out"
		sed -e "s/\\\$1/'att' || :j || '_$side'/g" -e "s/\\\$2/'{\"r\":1}'::json/g" -e 's/\$3/now()/g' \
			-e "s/\\\$4/''/g" -e "s/\\\$5/'a'/g" -e "s/\\\$6/'b'/g" -e "s/\\\$7/'c'/g" "$1.sql" >>"$out"
		echo ';' >>"$out"
		echo '\endpipeline' >>"$out"
	done
	echo "$out"
}

run() {
	fill
	local ms
	ms="$(PGOPTIONS="-c search_path=$schema -c synchronous_commit=off" \
		pgbench "$dsn" -n -M prepared -c 1 -T "$seconds" -f "$(script "$1")" 2>&1 |
		sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')"
	[ -n "$ms" ] || { echo "ablation: $1: pgbench failed" >&2; exit 1; }
	printf '%-22s %s ms per pair\n' "$1" "$ms"
}

order=("${variants[@]}")
for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done
for v in "${order[@]}"; do run "$v"; done
