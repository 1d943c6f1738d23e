# PgBouncer, for the test that runs the conformance suite through a
# transaction-pooling bouncer (the test starts and stops its own instance).
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq pgbouncer >/dev/null
	# The package's own service is not wanted; the test runs its own.
	if command -v service >/dev/null 2>&1; then service pgbouncer stop >/dev/null 2>&1 || true; fi
fi
[ -x /usr/sbin/pgbouncer ] || { echo "FAIL: pgbouncer not installed"; exit 1; }
