#!/usr/bin/env bash
# Miri (Rust's interpreter for undefined behaviour) over the unsafe code that
# consumers' calls reach: the ABI layouts, rnic::memory's copies, and the
# provider's objects (create, enter, strong references, close) through a
# registration's whole life. See docs/debugging.md, "Miri".
#
#   scripts/miri.sh           install the pinned nightly + miri if missing, run
#
# Spans carry consumer addresses as integers (rnic::memory), hence
# -Zmiri-permissive-provenance. Multi-threaded provider tests are left out:
# under Miri's interpreter they take far beyond CI's budget.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NIGHTLY=${MIRI_TOOLCHAIN:-nightly}
if ! rustup run "$NIGHTLY" cargo miri --version >/dev/null 2>&1; then
    rustup toolchain install "$NIGHTLY" --profile minimal --component miri,rust-src
fi
export MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-permissive-provenance"
cargo "+$NIGHTLY" miri test --lib --target-dir target/miri -- \
    abi:: rnic::memory provider::mr::tests::register_tokens_and_deregister
