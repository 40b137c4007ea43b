//! The call-sequence fuzzer's CI run (`src/bin/softndk-fuzz/fuzz/`,
//! `docs/debugging.md`, "Fuzzer"): a few seeds, bounded by call count (no
//! time limit is asserted), over the fabric with one thread (a seed replays
//! exactly), several threads, and iWARP on 127.0.0.x. Each run must end
//! with no finding: every accepted post completed or flushed exactly once
//! (P6), on a strict link every entry a success, every post accepted
//! while its queue has room and every receive and checked Read holding the
//! bytes it was owed, no entry for a refused post, every close completed (L18, L21), no
//! callback after a close (L22), no guard byte written, no provider object
//! left (`SoftNdkGetLiveObjects`) and no L17 breach.
//!
//! The runs share the process's provider (its live-object count), so they
//! take turns.

#![cfg(not(target_os = "windows"))]

#[path = "../src/bin/softndk-fuzz/fuzz/mod.rs"]
mod fuzz;

#[path = "common/fuzz_run.rs"]
mod fuzz_run;

use fuzz_run::{TURN, check};
use std::sync::PoisonError;

/// One thread on the fabric with the inline engine: each seed is a fixed
/// sequence of calls and answers.
#[test]
fn fuzz_fabric_single_thread_seeds() {
    for seed in 1..=4 {
        check(&fuzz::Config {
            seed,
            calls: 30_000,
            threads: 1,
            adapters: 2,
            links: 2,
            net: 40,
            ..fuzz::Config::default()
        });
    }
}

/// The same seed twice, one thread: the same calls with the same answers.
#[test]
fn fuzz_single_thread_replays_exactly() {
    let config = fuzz::Config {
        seed: 11,
        calls: 10_000,
        threads: 1,
        adapters: 3,
        links: 3,
        net: 42,
        ..fuzz::Config::default()
    };
    let first = check(&config);
    let second = check(&config);
    assert_eq!(
        (
            first.calls,
            first.posted,
            first.refused,
            first.succeeded,
            first.flushed,
            first.failed,
            first.judged,
            first.data_checked,
            first.links
        ),
        (
            second.calls,
            second.posted,
            second.refused,
            second.succeeded,
            second.flushed,
            second.failed,
            second.judged,
            second.data_checked,
            second.links
        ),
    );
}

/// Four threads over three shared adapters.
#[test]
fn fuzz_fabric_threads() {
    check(&fuzz::Config {
        seed: 21,
        calls: 80_000,
        threads: 4,
        adapters: 3,
        links: 2,
        net: 43,
        ..fuzz::Config::default()
    });
}

/// Two threads, connections over iWARP on TCP (127.0.44.x). It used to
/// find, now and then, a posted Receive that never completed though its QP's
/// close did (P6, L21): the stream's receive thread had taken the receive
/// for an incoming Send when the consumer's close ran, and the close did not
/// wait for it (docs/debugging.md, "Fuzzer"; regression tests
/// `rnic::iwarp::link::tests::test_close_waits_for_a_receive_being_placed_rule_l21`
/// and `..._between_segments_...`).
#[test]
fn fuzz_iwarp_threads() {
    check(&fuzz::Config {
        seed: 31,
        calls: 20_000,
        threads: 2,
        adapters: 2,
        links: 2,
        iwarp: true,
        net: 44,
        ..fuzz::Config::default()
    });
}

/// One thread on the fabric with faults firing (every kind at 0.1%): an
/// injected CQ overflow drops the entries of requests accepted before it
/// (E10: no further completions are reported), which the oracle accepts
/// only once the CQ reported the overflow through an arm (E12); the seed
/// that first showed it (docs/debugging.md, "Fuzzer"). The plan is removed
/// when the run ends, so the other runs of this process see no faults.
#[test]
fn fuzz_fabric_faults() {
    check(&fuzz::Config {
        seed: 203,
        calls: 30_000,
        threads: 1,
        adapters: 2,
        links: 2,
        net: 45,
        faults: Some("seed=3,rate=0.001".into()),
        ..fuzz::Config::default()
    });
}

/// The strict oracle can fail: with strict links kept while faults fire
/// (every kind at 2%: requests completing with errors, posts refused as if
/// the queue were full, connections aborted), a valid request that an
/// injected fault fails on a strict link is reported. Without it, the IRD
/// bug of docs/iwarp.md ("Inbound Reads beyond the IRD") was no finding.
#[test]
fn fuzz_strict_links_report_a_valid_request_that_fails() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    // Several seeds, so that the check does not hang on where one seed's
    // first finding falls: every run must report a strict link's failure,
    // and some only after entries were judged there.
    let outcomes: Vec<fuzz::Outcome> = (7..=12)
        .map(|seed| {
            fuzz::run(&fuzz::Config {
                seed,
                calls: 30_000,
                threads: 1,
                adapters: 2,
                links: 2,
                net: 46,
                faults: Some("seed=5,rate=0.02".into()),
                oracle_check: fuzz::OracleCheck::StrictUnderFaults,
                ..fuzz::Config::default()
            })
        })
        .collect();
    for outcome in &outcomes {
        assert!(
            outcome
                .findings
                .iter()
                .any(|finding| finding.contains("on a strict link")),
            "no strict-link finding: {outcome:?}"
        );
    }
    assert!(
        outcomes.iter().any(|outcome| outcome.judged > 0),
        "{outcomes:?}"
    );
}

/// The data oracle compares what strict receives hold: with the fuzzer
/// itself changing a byte of each strict receive's buffer after posting it
/// (where the message does not overwrite it again), the run reports the
/// byte it did not expect.
#[test]
fn fuzz_strict_receives_report_bytes_the_send_did_not_carry() {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let outcome = fuzz::run(&fuzz::Config {
        seed: 5,
        calls: 20_000,
        threads: 1,
        adapters: 2,
        links: 2,
        net: 47,
        oracle_check: fuzz::OracleCheck::Scribble,
        ..fuzz::Config::default()
    });
    assert!(outcome.data_checked > 0, "{outcome:?}");
    // Only the changed bytes are reported: each past the message that the
    // receive (of the QP's queue or its SRQ) took (inside it, the placement wrote over the change).
    assert!(!outcome.findings.is_empty(), "no data finding: {outcome:?}");
    assert!(
        outcome
            .findings
            .iter()
            .all(|finding| finding.contains("Receive posted") && finding.contains("past the")),
        "{outcome:?}"
    );
}

/// The host debug log (`SOFTNDK_LOG`, `kernel::host::debug_print`) runs
/// inside the dispatch thunks and callbacks: a standard error that cannot
/// be written (a full disk, a reader gone) must cost the lines, not the
/// process. It used `eprint!`, whose panic cannot unwind out of an
/// `extern "system"` thunk: the process aborted (status 134) and, its
/// standard error being the broken stream, said nothing.
#[test]
fn log_to_an_unwritable_stderr_drops_the_lines_not_the_process() {
    use std::process::{Command, Stdio};
    let fuzzer = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_softndk-fuzz"));
        command
            .args(["--seed", "3", "--calls", "3000", "--threads", "1"])
            .env("SOFTNDK_LOG", "1")
            .stdout(Stdio::null());
        command
    };
    // A full disk: every write fails with ENOSPC.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let status = fuzzer().stderr(full).status().expect("the fuzzer runs");
    assert!(status.success(), "stderr on /dev/full: {status}");
    // A reader gone: every write fails with EPIPE (Rust ignores SIGPIPE).
    let mut child = fuzzer()
        .stderr(Stdio::piped())
        .spawn()
        .expect("the fuzzer runs");
    drop(child.stderr.take());
    let status = child.wait().expect("the fuzzer ends");
    assert!(status.success(), "stderr a closed pipe: {status}");
}
