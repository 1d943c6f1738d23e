# A three-node MariaDB Galera cluster on 127.0.0.1 (SQL ports 3311-3313) for
# the Galera store's tests, beside the standalone MariaDB on 3306, which it
# leaves alone. The work is done by .ci/galera-ctl, which the tests also run
# to kill and restart nodes; see its header. .ci/run sources this file; by
# hand:
#
#   source .ci/steps/60-galera.sh        # start, repair or find the cluster
#   bash .ci/steps/60-galera.sh stop     # stop it and remove its state
#
# Safe to source twice: when the cluster is healthy it only exports what the
# tests read: JOBS_TEST_GALERA_DSNS (three go-sql-driver/mysql DSNs, comma
# separated, node 1 first), JOBS_TEST_GALERA_CTL (the absolute path of
# galera-ctl) and JOBS_TEST_REQUIRE_GALERA=1, which turns a missing cluster
# into a test failure. JOBS_GALERA_DIR chooses the state directory
# (/tmp/jobs-galera by default); it is exported so that the tests' galera-ctl
# finds the same cluster.
jobs_galera() {
	local ctl
	ctl="$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)/galera-ctl" || return 1
	if [ "${1:-}" = stop ]; then
		"$ctl" stop
		return
	fi
	# Absolute, since the tests run galera-ctl from their package directory.
	export JOBS_GALERA_DIR="${JOBS_GALERA_DIR:-/tmp/jobs-galera}"
	case "$JOBS_GALERA_DIR" in /*) ;; *) JOBS_GALERA_DIR="$PWD/$JOBS_GALERA_DIR" ;; esac
	"$ctl" up || { echo "FAIL: the Galera cluster did not come up (see above)"; return 1; }
	JOBS_TEST_GALERA_DSNS="$("$ctl" dsns)" || return 1
	export JOBS_TEST_GALERA_DSNS
	export JOBS_TEST_GALERA_CTL="$ctl"
	export JOBS_TEST_REQUIRE_GALERA=1
	echo "galera: 3 nodes Synced on 127.0.0.1:3311-3313, state in $JOBS_GALERA_DIR"
}

# Called in a || list: errexit, which CI sets, does not apply inside; the
# function reports its own failures.
jobs_galera_status=0
jobs_galera "$@" || jobs_galera_status=$?
unset -f jobs_galera
# shellcheck disable=SC2317 # exit only when run rather than sourced
return "$jobs_galera_status" 2>/dev/null || exit "$jobs_galera_status"
