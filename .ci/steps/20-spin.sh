# SPIN and a C compiler, for the model check of the protocol (model/check.sh).
if ! command -v spin >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq spin >/dev/null
fi
command -v spin >/dev/null 2>&1 || { echo "FAIL: spin not installed"; exit 1; }
command -v gcc >/dev/null 2>&1 || { echo "FAIL: gcc not installed (model/check.sh compiles SPIN's verifiers)"; exit 1; }
spin -V
