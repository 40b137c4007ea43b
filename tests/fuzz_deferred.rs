//! The call-sequence fuzzer's CI run on the deferred engine
//! (`SOFTNDK_ENGINE=deferred`: a worker thread runs each QP's requests,
//! `docs/architecture.md`), over the fabric with four threads and over
//! iWARP with two; the same oracle as `tests/fuzz.rs` (the shared check,
//! `tests/common/fuzz_run.rs`). A device takes its engine from the
//! environment when it is created, for its life, so the engine is the
//! process's: hence a test binary of its own, whose one test sets it before
//! any device exists. Seeds do not replay on this engine (timing decides
//! the interleaving), so a finding names what to look for in a `--trace`.

#![cfg(not(target_os = "windows"))]

#[path = "../src/bin/softndk-fuzz/fuzz/mod.rs"]
mod fuzz;

#[path = "common/fuzz_run.rs"]
mod fuzz_run;

use fuzz_run::check;

/// Four threads over three shared adapters, then two over iWARP on TCP
/// (127.0.49.x), all on the deferred engine.
#[test]
fn fuzz_deferred_engine_fabric_and_iwarp() {
    // SAFETY: the one test of this binary, so no other test thread exists;
    // it sets the variable before its first provider call, and no thread
    // the provider starts exists yet to read the environment.
    unsafe { std::env::set_var("SOFTNDK_ENGINE", "deferred") };
    check(&fuzz::Config {
        seed: 51,
        calls: 60_000,
        threads: 4,
        adapters: 3,
        links: 2,
        net: 48,
        ..fuzz::Config::default()
    });
    check(&fuzz::Config {
        seed: 52,
        calls: 20_000,
        threads: 2,
        adapters: 2,
        links: 2,
        iwarp: true,
        net: 49,
        ..fuzz::Config::default()
    });
}
