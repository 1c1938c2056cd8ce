#!/usr/bin/env bash
# hunt.sh: run packages' tests many times under load and report every
# failure, to find tests that fail at random.
#
#   tests/flakes/hunt.sh [-n RUNS] [-p PARALLEL] [-l HOGS] [-r RUN] [-o DIR] [-norace] PKG...
#
# Each package's test binary is built once (with -race unless -norace) and
# run RUNS times, PARALLEL runs at a time across all packages, while HOGS
# busy loops keep the CPUs loaded (CI's machine when two suites overlap).
# The output of every failed run is kept in DIR/<pkg>/<n>.log; the summary
# lists, per package, the runs that failed and the tests named in them.
# Exit status: 0 when every run passed, 1 when one failed, 2 on bad use.
set -uo pipefail

runs=10 par=2 hogs=2 run= out=_flakes race=-race
usage() { sed -n '2,14p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-n) runs=$2; shift 2 ;;
	-p) par=$2; shift 2 ;;
	-l) hogs=$2; shift 2 ;;
	-r) run=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	-norace) race=; shift ;;
	-h | --help) usage ;;
	-*) echo "hunt.sh: unknown flag $1" >&2; usage ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || usage
for v in "$runs" "$par" "$hogs"; do
	[[ $v =~ ^[0-9]+$ ]] || { echo "hunt.sh: -n, -p and -l take a count, not \"$v\"" >&2; exit 2; }
done
[ "$par" -ge 1 ] || { echo "hunt.sh: -p must be at least 1" >&2; exit 2; }

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
listed=$(go list "$@") || exit 2
mapfile -t pkgs <<<"$listed"

hog_pids=()
stop_hogs() { for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap stop_hogs EXIT
for ((i = 0; i < hogs; i++)); do
	(while :; do :; done) &
	hog_pids+=($!)
done

# Build every test binary first, so the runs measure the tests only.
declare -A bin dir
for pkg in "${pkgs[@]}"; do
	name=${pkg##*/agent/}
	name=${name//\//_}
	d=$(go list -f '{{.Dir}}' "$pkg")
	mkdir -p "$out/$name"
	if ! go test $race -c -o "$out/$name/test.bin" "$pkg" >"$out/$name/build.log" 2>&1; then
		echo "hunt.sh: $pkg does not build:" >&2
		cat "$out/$name/build.log" >&2
		exit 2
	fi
	[ -x "$out/$name/test.bin" ] || { echo "hunt.sh: $pkg has no tests" >&2; continue; }
	bin[$name]=$out/$name/test.bin
	dir[$name]=$d
done

# One job per (package, run); PARALLEL at a time.
one() {
	local name=$1 n=$2 log
	log=$out/$name/$n.log
	local args=(-test.count=1 -test.timeout=20m)
	[ -n "$run" ] && args+=(-test.run "$run")
	if (cd "${dir[$name]}" && "${bin[$name]}" "${args[@]}") >"$log" 2>&1; then
		rm -f "$log"
	else
		echo "FAIL $name run $n: $log"
	fi
}
start=$SECONDS
declare -A running # pid -> 1, the jobs (the hogs are not waited for)
# reap forgets the jobs that have ended.
reap() {
	local pid
	for pid in "${!running[@]}"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null
			unset "running[$pid]"
		fi
	done
}
for ((n = 1; n <= runs; n++)); do
	for name in "${!bin[@]}"; do
		one "$name" "$n" &
		running[$!]=1
		while [ "${#running[@]}" -ge "$par" ]; do
			reap
			[ "${#running[@]}" -ge "$par" ] && sleep 0.2
		done
	done
done
for pid in "${!running[@]}"; do wait "$pid" 2>/dev/null; done

failed=0
echo "== $runs runs of ${#bin[@]} package(s), $par at a time, $hogs CPU hog(s), $((SECONDS - start)) s"
for name in "${!bin[@]}"; do
	logs=("$out/$name"/[0-9]*.log)
	[ -e "${logs[0]}" ] || { echo "ok    $name: $runs/$runs passed"; continue; }
	failed=1
	echo "FAIL  $name: ${#logs[@]}/$runs failed"
	grep -h -- "--- FAIL" "${logs[@]}" | sed 's/ (.*//' | sort | uniq -c | sed 's/^/        /'
	grep -l "panic: test timed out\|DATA RACE" "${logs[@]}" 2>/dev/null | sed 's/^/        timeout or race: /'
done
exit $failed
