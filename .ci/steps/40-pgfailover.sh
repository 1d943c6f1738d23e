# PostgreSQL with automatic failover, for reliability/failover_test.go: a
# pg_auto_failover monitor and two data nodes on 127.0.0.1 with synchronous
# replication between them, run as the postgres OS user (pg_autoctl refuses
# root), all their state in one directory. .ci/run sources it; by hand:
#
#   source .ci/steps/40-pgfailover.sh        # start (or find) the cluster
#   bash .ci/steps/40-pgfailover.sh stop     # stop it and remove its state
#
# Safe to source twice: when the cluster is up it only exports what the test
# reads (JOBS_TEST_FAILOVER_DSN, _MONITOR, _DIR) and
# JOBS_TEST_REQUIRE_FAILOVER=1, which turns a missing cluster into a test
# failure. JOBS_PGFAILOVER_DIR chooses the state directory.
jobs_pgfailover() {
	local dir="${JOBS_PGFAILOVER_DIR:-/tmp/jobs-pgfailover}"
	local bin=/usr/lib/postgresql/15/bin
	local owner=postgres
	[ "$(id -u)" -eq 0 ] || owner="$(id -un)"

	# pg_autoctl as the owner, with its configuration, data and pid files
	# under $dir rather than in the owner's home.
	local env="env -i LANG=C.UTF-8 PATH=$bin:/usr/bin:/bin HOME=$dir XDG_CONFIG_HOME=$dir/config XDG_DATA_HOME=$dir/share XDG_RUNTIME_DIR=$dir/run"
	jobs_pgf_autoctl() {
		if [ "$(id -u)" -eq 0 ]; then runuser -u "$owner" -- $env pg_autoctl "$@"; else $env pg_autoctl "$@"; fi
	}

	# jobs_pgf_remove stops every service and server of the cluster and
	# removes its state.
	jobs_pgf_remove() {
		local n pid
		for n in node2 node1 monitor; do
			[ -d "$dir/$n" ] && jobs_pgf_autoctl stop --pgdata "$dir/$n" --fast >/dev/null 2>&1
		done
		sleep 1
		# What is left: pg_autoctl's supervisors (they rename themselves
		# "pg_autoctl: …" and restart a server that stops), then the servers.
		# pg_autoctl runs here for this cluster only.
		pkill -9 -u "$owner" -f '^pg_autoctl' 2>/dev/null
		for n in node2 node1 monitor; do
			pid="$(head -n 1 "$dir/$n/postmaster.pid" 2>/dev/null)"
			[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
		done
		sleep 1
		rm -rf "$dir"
	}

	if [ "${1:-}" = stop ]; then
		jobs_pgf_remove
		echo "pg_auto_failover cluster in $dir stopped and removed"
		return 0
	fi

	if ! command -v pg_autoctl >/dev/null 2>&1; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "FAIL: pg_autoctl is missing: apt-get install postgresql-15-auto-failover"
			return 1
		fi
		echo "installing postgresql-15-auto-failover"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-auto-failover >/dev/null ||
			{ echo "FAIL: could not install postgresql-15-auto-failover"; return 1; }
	fi

	local pm p1 p2 monitor admin dsn

	# jobs_pgf_ports chooses three free ports in a high range once and keeps
	# them with the state.
	jobs_pgf_ports() {
		mkdir -p "$dir/run" && chmod 700 "$dir/run" && chown -R "$owner" "$dir" || return 1
		if [ ! -s "$dir/ports" ]; then
			local p free=()
			for p in $(seq 56100 56999); do
				[ -z "$(ss -Htln "sport = :$p")" ] && free+=("$p")
				[ "${#free[@]}" -eq 3 ] && break
			done
			[ "${#free[@]}" -eq 3 ] || { echo "FAIL: no free ports in 56100-56999"; return 1; }
			echo "${free[*]}" >"$dir/ports"
		fi
		read -r pm p1 p2 <"$dir/ports"
		monitor="postgres://autoctl_node@127.0.0.1:$pm/pg_auto_failover?sslmode=disable"
		admin="postgres://postgres@127.0.0.1:$pm/pg_auto_failover?sslmode=disable"
		dsn="postgres://postgres@127.0.0.1:$p1,127.0.0.1:$p2/test?target_session_attrs=read-write&sslmode=disable&connect_timeout=5"
	}

	# jobs_pgf_run starts the service of an existing node unless it is running.
	jobs_pgf_run() {
		jobs_pgf_autoctl status --pgdata "$dir/$1" >/dev/null 2>&1 && return 0
		if [ "$(id -u)" -eq 0 ]; then
			runuser -u "$owner" -- $env setsid -f pg_autoctl run --pgdata "$dir/$1" >>"$dir/$1.log" 2>&1 </dev/null
		else
			$env setsid -f pg_autoctl run --pgdata "$dir/$1" >>"$dir/$1.log" 2>&1 </dev/null
		fi
	}

	# jobs_pgf_ready: the monitor sees one primary and one secondary, as
	# reported and assigned; both nodes answer; and the primary commits
	# synchronously. With two nodes pg_auto_failover sets
	# synchronous_standby_names to ANY 1 (the standby) while the standby is
	# healthy (number_sync_standbys 0 and replication quorum on, its
	# defaults). The monitor's view alone is not enough: it can still show a
	# healthy pair for a moment after both nodes stopped.
	jobs_pgf_ready() {
		[ "$(psql "$admin" -Atc "SELECT string_agg(reportedstate || '/' || goalstate, ' ' ORDER BY reportedstate)
			FROM pgautofailover.node" 2>/dev/null)" = "primary/primary secondary/secondary" ] || return 1
		pg_isready -q -h 127.0.0.1 -p "$p1" && pg_isready -q -h 127.0.0.1 -p "$p2" || return 1
		case "$(psql "$dsn" -Atc "SHOW synchronous_standby_names" 2>/dev/null)" in
		"ANY 1 ("*) return 0 ;;
		esac
		return 1
	}
	jobs_pgf_wait_ready() {
		local i
		for i in $(seq 1 "$1"); do jobs_pgf_ready && return 0; sleep 1; done
		return 1
	}

	# jobs_pgf_up creates what is missing of the cluster and starts every
	# service that is not running.
	jobs_pgf_up() {
		jobs_pgf_ports || return 1
		# A node frozen by an interrupted failover test (SIGSTOP on its
		# pg_autoctl processes) resumes.
		local pid
		for pid in $(pgrep -u "$owner" -f "pg_autoctl run --pgdata $dir/"); do
			kill -CONT "$pid" $(pgrep -P "$pid") 2>/dev/null
		done
		if [ ! -d "$dir/monitor" ]; then
			echo "creating the pg_auto_failover monitor on port $pm"
			jobs_pgf_autoctl create monitor --pgdata "$dir/monitor" --pgport "$pm" --hostname 127.0.0.1 \
				--listen 127.0.0.1 --auth trust --no-ssl >"$dir/create-monitor.log" 2>&1 ||
				{ cat "$dir/create-monitor.log"; echo "FAIL: pg_autoctl create monitor"; return 1; }
		fi
		jobs_pgf_run monitor
		local i
		for i in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p "$pm" && break; sleep 1; done
		# Fail over within seconds rather than the defaults' tens of seconds:
		# health checks every second, a node silent for 3s is unhealthy, and
		# a primary that stopped reporting is demoted after 5s (more than the
		# nodes' network_partition_timeout, after which an isolated primary
		# demotes itself).
		psql "$admin" -q \
			-c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
			-c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000" \
			-c "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1" \
			-c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
			-c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 3000" \
			-c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 5000" \
			-c "ALTER SYSTEM SET pgautofailover.startup_grace_period = 2000" \
			-c "SELECT pg_reload_conf()" >/dev/null || { echo "FAIL: cannot configure the monitor"; return 1; }

		local n port
		for n in node1 node2; do
			port=$p1
			[ "$n" = node2 ] && port=$p2
			if [ ! -d "$dir/$n" ]; then
				echo "creating pg_auto_failover node $n on port $port"
				jobs_pgf_autoctl create postgres --pgdata "$dir/$n" --pgport "$port" --hostname 127.0.0.1 \
					--listen 127.0.0.1 --name "$n" --auth trust --no-ssl --dbname test \
					--monitor "$monitor" >"$dir/create-$n.log" 2>&1 ||
					{ cat "$dir/create-$n.log"; echo "FAIL: pg_autoctl create postgres $n"; return 1; }
				jobs_pgf_autoctl config set --pgdata "$dir/$n" timeout.network_partition_timeout 3 >/dev/null
			fi
			jobs_pgf_run "$n"
			# The first node is primary before the second one joins.
			[ "$n" = node1 ] && for i in $(seq 1 60); do
				[ -n "$(psql "$admin" -Atc "SELECT 1 FROM pgautofailover.node WHERE reportedstate IN ('single', 'primary', 'secondary')" 2>/dev/null)" ] && break
				sleep 1
			done
		done
		return 0
	}

	# A cluster left by an earlier run is used if it is, or becomes, healthy;
	# otherwise it is removed and created anew, once.
	jobs_pgf_ports || return 1
	if ! jobs_pgf_ready; then
		jobs_pgf_up || return 1
		if ! jobs_pgf_wait_ready 120; then
			echo "the pg_auto_failover cluster in $dir is not healthy; creating it anew"
			jobs_pgf_remove
			jobs_pgf_up || return 1
			jobs_pgf_wait_ready 180 || {
				psql "$admin" -c "SELECT nodename, nodeport, reportedstate, goalstate FROM pgautofailover.node"
				psql "$dsn" -Atc "SHOW synchronous_standby_names"
				tail -n 20 "$dir"/node*.log
				echo "FAIL: the pg_auto_failover cluster in $dir is not healthy"
				return 1
			}
		fi
	fi
	local sync
	sync="$(psql "$dsn" -Atc "SHOW synchronous_standby_names")"

	export JOBS_TEST_FAILOVER_DSN="$dsn"
	export JOBS_TEST_FAILOVER_MONITOR="$admin"
	export JOBS_TEST_FAILOVER_DIR="$dir"
	export JOBS_TEST_REQUIRE_FAILOVER=1
	echo "pg_auto_failover: monitor :$pm, nodes :$p1 :$p2, synchronous_standby_names '$sync', state in $dir"
}

# Called in a || list: errexit, which CI sets, does not apply inside; the
# function reports its own failures.
jobs_pgfailover_status=0
jobs_pgfailover "$@" || jobs_pgfailover_status=$?
unset -f jobs_pgfailover jobs_pgf_autoctl jobs_pgf_remove jobs_pgf_ports jobs_pgf_run jobs_pgf_ready jobs_pgf_wait_ready jobs_pgf_up
# shellcheck disable=SC2317 # exit only when run rather than sourced
return "$jobs_pgfailover_status" 2>/dev/null || exit "$jobs_pgfailover_status"
