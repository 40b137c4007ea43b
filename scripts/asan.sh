#!/usr/bin/env bash
# AddressSanitizer over the whole host test suite: every use after free,
# out-of-bounds access or double free in the provider, the RNIC, the kernel
# backends and the tests' own unsafe code stops the run with a report (the
# access, and where the memory was allocated and freed). See
# docs/debugging.md, "AddressSanitizer".
#
#   scripts/asan.sh        install the pinned nightly if missing, run
#
# Self-contained for a clean CI machine: it installs the pinned nightly
# (ASAN_TOOLCHAIN overrides it; the same one scripts/miri.sh uses) and prints
# "asan: PASS" or "asan: FAIL" last (exit status 0 or 1).
#
# The instrumented build needs the host target named (`--target`), so that
# build scripts and proc macros, which run on the host, are built without the
# sanitizer. The standard library is not rebuilt: its own code is not
# instrumented, but every allocation goes through the sanitizer's allocator,
# so a use after free of any heap memory is caught where our code makes it.
# Leak detection is off: the tests keep callback contexts alive for good on
# purpose (a provider may still call back after a test gave up waiting).
# tests/driver_image.rs is left out: it builds the Windows image, which the
# sanitizer's flags do not apply to.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NIGHTLY=${ASAN_TOOLCHAIN:-nightly-2026-10-30}
if ! rustup run "$NIGHTLY" cargo --version >/dev/null 2>&1; then
    rustup toolchain install "$NIGHTLY" --profile minimal \
        || { echo "asan: FAIL (cannot install $NIGHTLY)"; exit 1; }
fi
host=$(rustup run "$NIGHTLY" rustc -vV | sed -n 's/^host: //p')
targets=(--lib --bins --examples --test conformance)
for file in tests/*.rs; do
    name=$(basename "$file" .rs)
    if [ "$name" != driver_image ]; then
        targets+=(--test "$name")
    fi
done
start=$(date +%s)
if RUSTFLAGS="-Zsanitizer=address" ASAN_OPTIONS="detect_leaks=0" \
    cargo "+$NIGHTLY" test --no-fail-fast --target "$host" --target-dir target/asan \
    "${targets[@]}"; then
    echo "asan: PASS ($(( $(date +%s) - start )) s)"
else
    echo "asan: FAIL ($(( $(date +%s) - start )) s)"
    exit 1
fi
