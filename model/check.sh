#!/usr/bin/env bash
# model/check.sh: model-checks the jobs protocol (model/jobs.pml) with SPIN.
#
# Proves, by exhaustive search, the properties P1-P6 on the real (fixed)
# protocol in several configurations of concurrent actors, and P4 as a
# liveness property under weak fairness; then checks that every broken
# variant is caught by the property that guards against it. Exits non-zero
# on any unexpected result. See model/README.md.
#
# Usage: model/check.sh            (needs spin and gcc; about a minute on 2 cores)
# Env:   SPIN_TRAILS  where counterexample trails are written (default /tmp/jobs-spin-trails)
#        SPIN_JOBS    runs in parallel (default: the number of CPUs)
#        SPIN_ONLY    an extended regular expression: only the runs whose id matches
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/jobs.pml"
trails="${SPIN_TRAILS:-/tmp/jobs-spin-trails}"
par="${SPIN_JOBS:-$(nproc 2>/dev/null || echo 2)}"

for tool in spin gcc; do
	command -v "$tool" >/dev/null 2>&1 || { echo "check.sh: $tool is not installed" >&2; exit 2; }
done
work="$(mktemp -d "${TMPDIR:-/tmp}/jobs-spin.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$trails"
rm -f "$trails"/*.txt

# Configurations: which actors run concurrently (see README.md, "Configurations").
MAIN="-DNWORKERS=1 -DNRECON=1"                                         # client, worker, reconciler, operator (cancel, fail, purge, resolve), provider
WORKERS="-DNWORKERS=2 -DNRECON=1 -DNO_OPERATOR_RESOLVE -DNO_PURGE -DNO_FAILJOB"   # two Runners racing, with Run's check of the attempts
LEASES="-DNWORKERS=1 -DNRECON=2 -DNO_OPERATOR_RESOLVE -DNO_PURGE -DNO_FAILJOB"    # two reconcilers: claims, leases, take-overs
HEDGE="-DHEDGE -DNWORKERS=1 -DNRECON=1 -DNO_OPERATOR_RESOLVE -DNO_PURGE"          # hedging after silence, failover
LIVE1="-DLIVE -DNWORKERS=1 -DNRECON=1"
LIVE2="-DLIVE -DNJ=1 -DNWORKERS=1 -DNRECON=2 -DNO_OPERATOR_RESOLVE -DNO_PURGE"
ALL="-DCHK_P1 -DCHK_P2 -DCHK_P3 -DCHK_P4 -DCHK_P5 -DCHK_P6"

# Runs: id | kind | expected | properties (for the table) | defines.
#   kind: safety (exhaustive DFS), live (acceptance cycles, weak fairness),
#         bfs (breadth-first: the shortest counterexample)
#   expected: pass, the name of the assertion that must fail, or cycle
# Longest first, so that the parallel runs end together.
runs=(
	"leases|safety|pass|P1 P2 P3 P4 P5 P6|$LEASES $ALL"
	"hedge-abandon|safety|pass|P1(across jobs) P2 P3 P4 P5|$HEDGE -DABANDON_LOSERS $ALL"
	"hedge|safety|pass|P1(across jobs) P2 P3 P4 P5|$HEDGE $ALL"
	"workers|safety|pass|P1 P2 P3 P4 P5|$WORKERS $ALL"
	"live-leases|live|pass|P4 (LTL, weak fairness)|$LIVE2"
	"main|safety|pass|P1 P2 P3 P4 P5|$MAIN $ALL"
	"live-main|live|pass|P4 (LTL, weak fairness)|$LIVE1"
	"BROKEN_REUSE_GUARD|bfs|P1_never_twice|P1|$MAIN -DBROKEN_REUSE_GUARD -DCHK_P1"
	"BROKEN_REUSE_GUARD/P5|bfs|P5_key_free_safe|P5|$MAIN -DBROKEN_REUSE_GUARD -DCHK_P5"
	"BROKEN_CAS|bfs|P2_one_result|P2|$HEDGE -DBROKEN_CAS -DCHK_P2"
	"BROKEN_CAS/P3|bfs|P3_no_lost_write|P3|$MAIN -DBROKEN_CAS -DCHK_P3"
	"BROKEN_INDOUBT|bfs|P1_never_twice|P1|$MAIN -DBROKEN_INDOUBT -DCHK_P1"
	"BROKEN_INDOUBT/runners|bfs|P1_never_twice|P1|$WORKERS -DBROKEN_INDOUBT -DCHK_P1"
	"BROKEN_PURGE|bfs|P5_key_free_safe|P5|$MAIN -DBROKEN_PURGE -DCHK_P5"
	"BROKEN_PURGE/P1|bfs|P1_never_twice|P1|$MAIN -DBROKEN_PURGE -DCHK_P1"
	"BROKEN_CLAIM|bfs|P6_claim_holds|P6|$LEASES -DBROKEN_CLAIM -DCHK_P6"
	"BROKEN_ABANDON|bfs|P1_never_twice|P1(across jobs)|$HEDGE -DABANDON_LOSERS -DBROKEN_ABANDON -DCHK_P1"
	"SANITY_LEASE_OVERRUN|live|cycle|P4 (LTL)|$LIVE2 -DNA=2 -DLEASE_OVERRUN"
)

if [ -n "${SPIN_ONLY:-}" ]; then
	sel=()
	for r in "${runs[@]}"; do
		if [[ "${r%%|*}" =~ $SPIN_ONLY ]]; then sel+=("$r"); fi
	done
	runs=("${sel[@]}")
fi

# run_case id kind expected defines: builds and runs one verifier in its own
# directory, writes one result line to $work/<n>.res. Never fails itself.
run_case() {
	local n=$1 id=$2 kind=$3 expect=$4 defs=$5
	local d="$work/$n" cflags pflags
	mkdir -p "$d"
	cp "$model" "$d/jobs.pml"
	# Exhaustive search, with COLLAPSE compression (lossless: no bitstate
	# hashing). The small breadth-first searches for counterexamples are
	# compiled with -O0, which compiles several times faster than -O2.
	case $kind in
	safety) cflags="-O2 -DSAFETY -DCOLLAPSE"; pflags="-m20000 -w24" ;;
	bfs)    cflags="-O0 -DSAFETY -DBFS -DCOLLAPSE"; pflags="-m20000 -w22" ;;
	live)   cflags="-O2 -DNFAIR=3 -DCOLLAPSE"; pflags="-a -f -N p4 -m20000 -w24" ;;
	esac
	(
		cd "$d"
		# shellcheck disable=SC2086
		if ! spin -a $defs jobs.pml >spin.log 2>&1; then
			echo "ERROR|spin -a failed: $(tail -1 spin.log)" >"$work/$n.res"; exit 0
		fi
		# shellcheck disable=SC2086
		if ! gcc $cflags -o pan pan.c >gcc.log 2>&1; then
			echo "ERROR|gcc failed: $(grep -m1 error gcc.log)" >"$work/$n.res"; exit 0
		fi
		local TIMEFORMAT='%U %S' errors states trans mem secs cpu found verdict
		# shellcheck disable=SC2086
		{ time timeout 600 ./pan $pflags >pan.out 2>&1; } 2>cpu.txt || true
		cpu=$(awk '{printf "%.1f", $1 + $2}' cpu.txt 2>/dev/null || echo -)
		errors=$(awk '/errors:/ {print $NF}' pan.out | tail -1)
		states=$(awk '/states, stored/ {print $1}' pan.out | tail -1)
		trans=$(awk '/transitions \(=/ {print $1}' pan.out | tail -1)
		mem=$(awk '/total actual memory usage/ {print $1}' pan.out | tail -1)
		secs=$(awk '/pan: elapsed time/ {print $4}' pan.out | tail -1)
		found=$(grep -o -m1 -E 'assertion violated [A-Za-z0-9_]+|acceptance cycle|invalid end state' pan.out || true)
		verdict=UNEXPECTED
		if grep -q -E 'max search depth too small|out of memory' pan.out; then
			found="search truncated: $(grep -m1 -E 'max search depth too small|out of memory' pan.out)"
		elif [ -z "$errors" ]; then
			found="no verdict (pan did not finish)"
		elif [ "$expect" = pass ]; then
			[ "$errors" = 0 ] && verdict=ok
		elif [ "$expect" = cycle ]; then
			[ "$found" = "acceptance cycle" ] && verdict=ok
		else
			[ "$found" = "assertion violated $expect" ] && verdict=ok
		fi
		if [ "$errors" != 0 ] && [ -f jobs.pml.trail ]; then
			local base
			base="$trails/${id//\//-}"
			# shellcheck disable=SC2086
			spin -t -p $defs jobs.pml >"$base.trail.txt" 2>&1 || true
			# shellcheck disable=SC2086
			spin -t $defs jobs.pml 2>&1 | sed -n 's/^ *MSC: //p; s/^.*\(START OF CYCLE\).*$/--- \1 ---/p; s/^spin: text of failed assertion: /VIOLATED: /p' >"$base.story.txt" || true
		fi
		local summary
		if [ "$expect" = pass ]; then
			summary=$([ "$verdict" = ok ] && echo "proved (exhaustive, no error)" || echo "FAILED: $found")
		else
			summary=$([ "$verdict" = ok ] && echo "caught: ${found#assertion violated }" || echo "NOT CAUGHT (${found:-no error found})")
		fi
		echo "$verdict|$summary|${states:--}|${trans:--}|${mem:--}|${secs:--}|${cpu:--}" >"$work/$n.res"
	) || echo "ERROR|run failed" >"$work/$n.res"
}

echo "== SPIN model check of the jobs protocol ($(spin -V 2>&1 | head -1)), $par in parallel"
start=$(date +%s)
n=0
for r in "${runs[@]}"; do
	IFS='|' read -r id kind expect props defs <<<"$r"
	while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do wait -n || true; done
	run_case "$n" "$id" "$kind" "$expect" "$defs" &
	n=$((n + 1))
done
wait || true

bad=0
printf '\n%-24s %-30s %10s %12s %8s %7s %6s  %s\n' run properties states transitions "mem MB" "time s" "cpu s" result
n=0
for r in "${runs[@]}"; do
	IFS='|' read -r id kind expect props defs <<<"$r"
	res="$(cat "$work/$n.res" 2>/dev/null || echo "ERROR|no result")"
	IFS='|' read -r verdict summary states trans mem secs cpu <<<"$res"
	printf '%-24s %-30s %10s %12s %8s %7s %6s  %s\n' "$id" "$props" "${states:--}" "${trans:--}" "${mem:--}" "${secs:--}" "${cpu:--}" "$summary"
	if [ "$verdict" != ok ]; then
		bad=$((bad + 1))
		echo "   defines: $defs"
		if [ -f "$trails/${id//\//-}.trail.txt" ]; then
			echo "   trail (spin -t -p): $trails/${id//\//-}.trail.txt; the story:"
			sed 's/^/     /' "$trails/${id//\//-}.story.txt"
		else
			grep -E 'error|violated|truncated|too small|memory' "$work/$n/pan.out" 2>/dev/null | head -5 | sed 's/^/   pan: /' || true
		fi
	fi
	n=$((n + 1))
done
echo
echo "counterexamples (shortest, as stories and full trails): $trails"
echo "model check: $((n - bad)) of $n runs as expected, $(($(date +%s) - start)) s wall (time s: pan's own clock; cpu s: its CPU time)"
if [ "$bad" -ne 0 ]; then
	echo "FAIL: $bad unexpected result(s)"
	exit 1
fi
