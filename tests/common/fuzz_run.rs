//! The fuzzer's CI runs' shared check (`tests/fuzz.rs` on the inline
//! engine, `tests/fuzz_deferred.rs` on the deferred one): a run must end
//! with no finding, having done what a run is for. Included by both with
//! `#[path]`.

use std::sync::{Mutex, PoisonError};

use crate::fuzz;

/// One run at a time: the live-object check counts the whole process.
pub static TURN: Mutex<()> = Mutex::new(());

/// Runs `config`, which must end with no finding, having done what a run
/// is for; its outcome.
pub fn check(config: &fuzz::Config) -> fuzz::Outcome {
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let outcome = fuzz::run(config);
    assert!(
        outcome.findings.is_empty(),
        "fuzzer findings (replay: cargo run --release --bin softndk-fuzz -- --seed {} --calls {} --threads {} --adapters {} --links {}{}{}{} --trace):\n{}",
        config.seed,
        config.calls,
        config.threads,
        config.adapters,
        config.links,
        if config.iwarp { " --iwarp" } else { "" },
        if std::env::var_os("SOFTNDK_ENGINE").is_some_and(|e| e == "deferred") {
            " --deferred"
        } else {
            ""
        },
        config
            .faults
            .as_ref()
            .map_or(String::new(), |plan| format!(" --faults {plan}")),
        outcome.findings.join("\n")
    );
    assert!(
        outcome.calls >= config.calls,
        "the run stopped early: {outcome:?}"
    );
    // The run exercised what it is for: posts that completed, were
    // flushed, failed and were refused; links set up and closed.
    assert!(
        outcome.posted > 0 && outcome.succeeded > 0 && outcome.flushed > 0,
        "{outcome:?}"
    );
    assert!(outcome.refused > 0 && outcome.failed > 0, "{outcome:?}");
    assert!(outcome.links > 1 && outcome.closed > 0, "{outcome:?}");
    // A quarter of the sides take their receives from an SRQ, whose
    // threshold notifications (Q4) came.
    assert!(
        outcome.srq_sides > 0 && outcome.srq_notifications > 0,
        "{outcome:?}"
    );
    // Some links' two QPs shared one SRQ, and a receive posted through one
    // side was taken by the other side's QP (Q3).
    assert!(
        outcome.shared_srqs > 0 && outcome.srq_crossed > 0,
        "{outcome:?}"
    );
    // Some sides took their receives from a thread's pool, and a receive
    // posted through one link was taken by another link's QP (Q3; E4 when
    // the first link had closed).
    assert!(
        outcome.pools > 0 && outcome.pooled_sides > outcome.pools && outcome.pool_crossed > 0,
        "{outcome:?}"
    );
    // Some pools had a CQ, the receive CQ of every side on them, and an
    // entry there was polled outside the link of the QP it names (P21):
    // through another link's side, or at the pool's close, after the QP's
    // link closed (a CQ shared by the QPs of several links outlives them).
    assert!(
        outcome.pool_cqs > 0 && outcome.pool_cq_sides > outcome.pool_cqs,
        "{outcome:?}"
    );
    assert!(outcome.pool_cq_crossed > 0, "{outcome:?}");
    // Some QPs had a receive CQ of their own (P1), and some links' two
    // QPs shared their CQs, each entry for the QP its context names (P21).
    assert!(
        outcome.receive_cqs > 0 && outcome.shared_cqs > 0 && outcome.shared_cq_entries > 0,
        "{outcome:?}"
    );
    // With several threads, calls raced posts on their QP from a second
    // thread (P2, P4, P5, C1); one thread replays exactly, so races none.
    assert_eq!(outcome.races > 0, config.threads > 1, "{outcome:?}");
    // Fast-register MRs were mapped (M16) and used, locally and by the
    // peer, with LAM pages under the privileged token (M27); rule-breaking
    // FastRegisters and Invalidates were refused or failed.
    assert!(
        outcome.fast_registered > 0 && outcome.fast_named > 0 && outcome.doomed_failed > 0,
        "{outcome:?}"
    );
    // Links connected from shared endpoints, and some endpoint closes
    // pended until their last connector was closed (N10, N11).
    assert!(
        outcome.endpoint_links > 0 && outcome.endpoint_closes_pended > 0,
        "{outcome:?}"
    );
    // Strict links (none under injected faults) had their entries judged,
    // and the bytes of their receives compared with the Sends'.
    assert_eq!(outcome.judged > 0, config.faults.is_none(), "{outcome:?}");
    assert_eq!(
        outcome.data_checked > 0,
        config.faults.is_none(),
        "{outcome:?}"
    );
    // Some of those Sends named their sources through a fast-registered
    // region or a LAM page (M16, M27), and their bytes were checked too.
    assert_eq!(
        outcome.sources_remapped > 0,
        config.faults.is_none(),
        "{outcome:?}"
    );
    outcome
}
