# MariaDB (standalone, 127.0.0.1:3306, root with an empty password, database
# test) for the MySQL store's tests in module mysql. The machine usually
# runs it already; this starts it when it is down, installing the server
# first where it is missing, and waits until it answers. Each test run
# creates and drops databases of its own. Exports JOBS_TEST_MYSQL_DSN and
# JOBS_TEST_REQUIRE_MYSQL=1, which turns a missing server into a test
# failure.
jobs_mariadb_sql() { mariadb --no-defaults -h 127.0.0.1 -P 3306 -u root --connect-timeout=2 -N -B -e "$1" 2>/dev/null; }

jobs_mariadb() {
	if jobs_mariadb_sql 'SELECT 1' >/dev/null; then
		jobs_mariadb_finish
		return
	fi
	if [ ! -x /usr/sbin/mariadbd ] || ! command -v mariadb >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq mariadb-server mariadb-client >/dev/null ||
			{ echo "FAIL: could not install mariadb-server"; return 1; }
	fi
	install -d -o mysql -g mysql /run/mysqld
	if [ ! -d /var/lib/mysql/mysql ]; then
		mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=normal \
			--skip-test-db >/dev/null || { echo "FAIL: mariadb-install-db"; return 1; }
	fi
	echo "starting MariaDB"
	# The pid file tells this server from the Galera nodes, which run the
	# same executable (see 60-galera.sh).
	start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid \
		--exec /usr/sbin/mariadbd -- --user=mysql
	for _ in $(seq 1 60); do
		jobs_mariadb_sql 'SELECT 1' >/dev/null && break
		sleep 1
	done
	jobs_mariadb_sql 'SELECT 1' >/dev/null || { echo "FAIL: MariaDB does not answer on 127.0.0.1:3306"; return 1; }
	jobs_mariadb_finish
}

# jobs_mariadb_finish makes sure root may connect over TCP from 127.0.0.1
# and that database test exists, then exports what the tests read.
jobs_mariadb_finish() {
	jobs_mariadb_sql 'CREATE DATABASE IF NOT EXISTS test' >/dev/null ||
		{ echo "FAIL: cannot create database test on MariaDB"; return 1; }
	export JOBS_TEST_MYSQL_DSN="${JOBS_TEST_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/test}"
	export JOBS_TEST_REQUIRE_MYSQL=1
	echo "mariadb: $(jobs_mariadb_sql 'SELECT VERSION()') on 127.0.0.1:3306"
}

# Called in a || list: errexit, which CI sets, does not apply inside; the
# function reports its own failures.
jobs_mariadb_status=0
jobs_mariadb || jobs_mariadb_status=$?
unset -f jobs_mariadb jobs_mariadb_finish jobs_mariadb_sql
# shellcheck disable=SC2317 # exit only when run rather than sourced
return "$jobs_mariadb_status" 2>/dev/null || exit "$jobs_mariadb_status"
