#!/usr/bin/env bash
# Loaded conformance loops: runs the conformance binaries (the fabric and
# iWARP suites, on the inline and the deferred engine) one after another,
# again and again, next to busy-looping CPU hogs, for a bounded time. Races
# between a test and the provider's threads (the iWARP stream readers, the
# deferred engine's worker) show up here long before they show up in CI: a
# test that passes alone but fails once a core is starved names a missing
# wait in the harness or a real ordering bug (docs/conformance.md, "Loaded
# runs").
#
#   scripts/stress.sh [SECONDS] [HOGS]
#
# SECONDS: how long to keep starting runs (default 600); a run already
# started finishes, bounded by its own timeout (300 s). HOGS: busy loops
# beside the runs (default 1; the machine's cores minus one keeps one core
# for the tests and their threads). Each failing run's output is kept in
# target/stress/; the script prints each failure's first panic lines and
# exits non-zero if any run failed. Every child (hogs included) is bounded by
# `timeout` and killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-600}
hogs=${2:-1}
case "$seconds$hogs" in
*[!0-9]*)
    echo "usage: scripts/stress.sh [SECONDS] [HOGS]" >&2
    exit 2
    ;;
esac

# The test binaries, built once (the debug profile `cargo test` uses).
binaries=$(cargo test --test conformance --test conformance_iwarp --no-run \
    --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\/conformance[^"]*\)".*/\1/p')
fabric=$(echo "$binaries" | grep '/conformance-' | tail -n 1)
iwarp=$(echo "$binaries" | grep '/conformance_iwarp-' | tail -n 1)
test -x "$fabric"
test -x "$iwarp"

out=target/stress
mkdir -p "$out"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
for _ in $(seq 1 "$hogs"); do
    timeout "$((seconds + 330))" sh -c 'while :; do :; done' &
    pids+=($!)
done

runs=0
failures=0
end=$((SECONDS + seconds))
while [ "$SECONDS" -lt "$end" ]; do
    for case in "iwarp inline" "iwarp deferred" "fabric deferred" "fabric inline"; do
        [ "$SECONDS" -lt "$end" ] || break
        set -- $case
        binary=$fabric
        if [ "$1" = iwarp ]; then binary=$iwarp; fi
        runs=$((runs + 1))
        log="$out/run.log"
        if SOFTNDK_ENGINE=$2 timeout 300 "$binary" -q >"$log" 2>&1; then
            continue
        fi
        failures=$((failures + 1))
        kept="$out/fail-$runs-$1-$2.log"
        cp "$log" "$kept"
        echo "FAIL run $runs: $1 on the $2 engine ($kept)"
        grep -E 'panicked|left:|right:|^test .* FAILED' "$kept" | head -n 8 || true
    done
done
echo "stress: $runs runs in $SECONDS s beside $hogs hog(s), $failures failed"
[ "$failures" -eq 0 ]
