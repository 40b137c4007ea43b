#!/usr/bin/env bash
# Miri (Rust's interpreter for undefined behaviour) over the unsafe code that
# consumers' calls reach: the ABI layouts, rnic::memory's copies, a provider
# registration's whole life, and the provider thunks (objects created,
# entered and closed through the dispatch tables; posts and polls on a
# connected pair). See docs/debugging.md, "Miri".
#
#   scripts/miri.sh        install the pinned nightly with miri if missing, run
#
# Self-contained for a clean CI machine: it installs the pinned nightly
# (MIRI_TOOLCHAIN overrides it) with the miri and rust-src components, and
# prints "miri: PASS" or "miri: FAIL" last (exit status 0 or 1).
#
# Spans carry consumer addresses as integers (rnic::memory), hence
# -Zmiri-permissive-provenance. Only single-threaded tests run: the
# multi-threaded provider tests take tens of minutes each under Miri.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# A dated nightly that has miri (rustup's manifest of 2026-10-30; rustc
# 1.101.0-nightly 92b5b8c87). Change it in one place when moving on.
NIGHTLY=${MIRI_TOOLCHAIN:-nightly-2026-10-30}
if ! rustup run "$NIGHTLY" cargo miri --version >/dev/null 2>&1; then
    rustup toolchain install "$NIGHTLY" --profile minimal --component miri,rust-src \
        || { echo "miri: FAIL (cannot install $NIGHTLY with miri)"; exit 1; }
fi
export MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-permissive-provenance"
start=$(date +%s)
# The tests, by module path:
#   abi::                               every layout and constant check
#   rnic::memory                        the copies between consumer spans
#   provider::mr::tests::register_tokens_and_deregister
#                                       an MR's create / register / tokens /
#                                       deregister / close through the tables
#   provider::qp::tests::inline_data_is_copied_at_post_time
#   provider::qp::tests::flush_cancels_everything_pending
#   provider::qp::tests::close_order    the QP thunks: a connected pair's
#                                       posts, polls, flush and closes in
#                                       every order (one thread, inline engine)
if cargo "+$NIGHTLY" miri test --lib --target-dir target/miri -- \
    abi:: rnic::memory \
    provider::mr::tests::register_tokens_and_deregister \
    provider::qp::tests::inline_data_is_copied_at_post_time \
    provider::qp::tests::flush_cancels_everything_pending \
    provider::qp::tests::close_order; then
    echo "miri: PASS ($(( $(date +%s) - start )) s)"
else
    echo "miri: FAIL ($(( $(date +%s) - start )) s)"
    exit 1
fi
