# Chromium (Debian's package) for the browser tests in e2e/, which must
# then run: JOBS_TEST_REQUIRE_BROWSER=1 turns a missing browser into a failure.
if ! command -v chromium >/dev/null 2>&1; then
	echo "installing chromium"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq chromium >/dev/null
fi
command -v chromium >/dev/null 2>&1 || { echo "FAIL: chromium is not installed"; exit 1; }
export JOBS_TEST_REQUIRE_BROWSER=1
