//! The call-sequence fuzzer: a seeded generator of NDK calls and the oracle
//! that checks the provider's answers, written against the host-mode C ABI
//! only (`SoftNdkOpenAdapter[Ex]`, `SoftNdkCloseAdapter`,
//! `SoftNdkGetLiveObjects`, `SoftNdkGetBreachCounts` and the dispatch tables),
//! as a kernel consumer would write it. Shared by the soak binary
//! (`src/bin/softndk-fuzz/main.rs`) and the CI run (`tests/fuzz.rs`, which
//! includes this module with `#[path]`). See `docs/debugging.md`, "Fuzzer".
//!
//! A run opens `adapters` adapters (fabric, or iWARP over TCP on 127.0.0.x)
//! and starts `threads` threads. Each thread owns its links — two QPs
//! connected through a listener and two connectors, each side with its own
//! CQ, PD, registered MR and MW (or, on some sides, the PD and SRQ of the
//! thread's pool on its adapter, which the QPs of several links, or both QPs
//! of one link, take their receives from: [`pool`], [`objects::Link::shared`];
//! on some links the active side connects from the thread's shared
//! endpoint on its adapter: [`endpoint`]) —
//! so the consumer's serialisation rules (C1, P2) hold; the adapters and
//! their devices are shared. A thread draws every
//! choice from its own generator (seeded from the run's seed and its
//! number): posts (Send, SendAndInvalidate, Receive, Write, Read, Bind,
//! FastRegister, Invalidate) with valid or invalid SGEs, tokens, addresses, SGE counts and
//! flags, polls, arms, flushes, disconnects, and closes of whole links in a
//! random order.
//!
//! The oracle:
//! * every post that returned `STATUS_SUCCESS` gets exactly one CQ entry
//!   (its completion or its flush) on its side's CQ, with its QP's context
//!   (P6, P21); a silent post (P14) at most one, and never a successful one;
//! * a post that failed inline gets none; no entry comes twice and none
//!   names a context never posted;
//! * on a *strict* link (clean, no injected faults, never past its CQ's
//!   room, no Read with a read limit of 0, windows read only once bound and
//!   never invalidated under a Read: [`objects::Link::strict`]), until the
//!   fuzzer itself flushes, disconnects or closes it, every entry is a
//!   success, for the oldest request of its queue still owed one (P23),
//!   a receive's with the length of the peer's Send it took (P21), and
//!   every post to a queue with room is accepted (P24): a valid request
//!   that fails is a finding;
//! * on a strict link the buffers are zoned ([`objects::Zones`]): Sends
//!   read from bytes nothing writes, each receive and half of the Reads
//!   cover a slot of their own, half of the Writes land in a slot of the
//!   peer's, the other RDMA stays apart; a successful receive must hold the
//!   bytes of the peer's Send, and such a Read the peer's source bytes,
//!   scattered over its SGEs in their order, with nothing written past them
//!   (P21); once the peer's receive of a later Send succeeds, such a Write
//!   must have landed whole (RFC 5040 §5.5); the sources must be intact at
//!   the link's close;
//! * once a QP's close has completed, every request of its queues has its
//!   entry in the CQ (L21);
//! * every close completes (L18, L21), and no notification or disconnect
//!   event arrives after its object's close completed (L22);
//! * every wait is bounded ([`WAIT`]): a hang is a finding;
//! * the bytes around each registered buffer are never written (a bounds
//!   check missed);
//! * at the end, once every adapter is closed, the provider's live objects
//!   (`SoftNdkGetLiveObjects`) are back where they were, and no L17 breach
//!   (a close racing a call inside its object) was counted.
//!
//! Determinism: one thread on the fabric with the inline engine replays a
//! seed exactly (the same calls with the same answers). With more threads,
//! iWARP or the deferred engine, the answers and their interleaving depend
//! on timing, and so do the choices that follow them (a Send waits for a
//! receive the peer had accepted; a strict link reads a window once its
//! Bind's entry was reaped), so a seed does not replay there.
//!
//! The rooms: `rng` (the generator), `signal` (callback contexts and the
//! callbacks), `objects` (dispatch tables, guarded buffers, links and their
//! sides), `fuzzer` (a thread's state and loop), `setup` (a link's objects
//! and connection), `posts`, `reap` (polls, arms, flushes, disconnects) and
//! `close` (tear-down and its checks); this file holds the configuration,
//! the outcome and a run over all threads.
#![allow(dead_code)]
// A consumer of C calls: counts go to the ABI's ULONGs (always small here:
// SGE lists of at most 5, polls of at most 16), and a fuzzer's set-up and
// tear-down read best as one sequence each.
#![allow(
    clippy::cast_possible_truncation,
    clippy::too_many_lines,
    clippy::unused_self
)]

mod close;
mod endpoint;
mod fuzzer;
mod objects;
mod pool;
mod posts;
mod race;
mod reap;
mod rng;
mod setup;
mod signal;

use std::ptr;
use std::time::{Duration, Instant};

use softndk::abi::{STATUS_SUCCESS, SockAddr};
use softndk::provider::host::{
    BreachCount, SoftNdkCloseAdapter, SoftNdkGetBreachCounts, SoftNdkGetLiveObjects,
    SoftNdkOpenAdapter, SoftNdkOpenAdapterEx, SoftNdkSetFaultPlan,
};

use fuzzer::Fuzzer;
use objects::{Adapter, sockaddr};

/// The longest the fuzzer waits for any one callback or completion; a wait
/// that runs out is a finding (a hang).
pub const WAIT: Duration = Duration::from_secs(20);

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed every thread's generator derives from.
    pub seed: u64,
    /// Provider calls to make, over all threads (each thread makes its
    /// share, then closes what it holds).
    pub calls: u64,
    /// Threads, each with its own links.
    pub threads: usize,
    /// Adapters opened (127.0.`net`.1 ..); links pick two at random.
    pub adapters: usize,
    /// Links each thread keeps open at once.
    pub links: usize,
    /// iWARP over TCP on loopback instead of the process's fabric.
    pub iwarp: bool,
    /// The third byte of the adapters' 127.0.x.y addresses (fabric and
    /// iWARP devices cannot share an address).
    pub net: u8,
    /// Fault injection plan for the provider, in `SOFTNDK_FAULTS`' text
    /// form: when set, the run installs it (`SoftNdkSetFaultPlan`) before
    /// the adapters open and removes it once they are closed (so runs of one
    /// process do not leak faults into each other, and each starts its
    /// counters at zero), and the oracle then accepts failed set-up steps
    /// (an injected failure of a create, a register or a connect) by
    /// dropping the link. `None` installs nothing and makes any failed
    /// set-up step a finding.
    pub faults: Option<String>,
    /// A run that checks the oracle itself, and must report findings.
    pub oracle_check: OracleCheck,
    /// Print every call (thread, call number, call, answer) on standard
    /// error: the way to read a finding's sequence.
    pub trace: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            seed: 1,
            calls: 10_000,
            threads: 1,
            adapters: 2,
            links: 2,
            iwarp: false,
            net: 40,
            faults: None,
            oracle_check: OracleCheck::None,
            trace: false,
        }
    }
}

/// A run that checks the oracle itself: the provider or the fuzzer goes
/// wrong on purpose, and the oracle must say so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OracleCheck {
    /// None: a normal run.
    #[default]
    None,
    /// Keep strict links with `faults` set: an injected failure of a valid
    /// request on one is then a finding.
    StrictUnderFaults,
    /// After posting each receive of a strict link, change the last byte
    /// of its slot, as a consumer that writes a buffer it lent would: the
    /// data oracle must report it where the message did not overwrite it.
    /// One thread on the fabric only (there the peer's Send is placed by a
    /// later call of the same thread, so the write races nothing).
    Scribble,
}

/// What a run did, and what it found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Provider calls made.
    pub calls: u64,
    /// Posts that returned `STATUS_SUCCESS`.
    pub posted: u64,
    /// Posts refused inline.
    pub refused: u64,
    /// CQ entries with `STATUS_SUCCESS`.
    pub succeeded: u64,
    /// CQ entries with `STATUS_CANCELLED` (flushed).
    pub flushed: u64,
    /// CQ entries with another status.
    pub failed: u64,
    /// CQ entries judged on strict links (each had to be a success).
    pub judged: u64,
    /// Receives, Reads and Writes on strict links whose bytes were
    /// compared with what they carried.
    pub data_checked: u64,
    /// Links connected.
    pub links: u64,
    /// Links whose set-up failed (fault injection only).
    pub setup_failed: u64,
    /// Objects closed (close completed).
    pub closed: u64,
    /// CQ notifications delivered.
    pub notifications: u64,
    /// Sides whose QP took its receives from an SRQ.
    pub srq_sides: u64,
    /// SRQ notifications delivered (Q4).
    pub srq_notifications: u64,
    /// FastRegisters that completed successfully (M16).
    pub fast_registered: u64,
    /// Requests whose SGEs or remote address named a fast-registered
    /// region or a LAM page under the privileged token (M27).
    pub fast_named: u64,
    /// A strict link's checked bytes named through a fast-registered
    /// region (M16) or a LAM page under the privileged token (M27): a
    /// Send's, a receive's or a Write's SGEs, or a Read's or a Write's
    /// remote address in the peer's region.
    pub sources_remapped: u64,
    /// Shared endpoints created (N9), links whose active side connected
    /// through one (N10, N11), and closes of one that pended until its
    /// last connector was closed (N10).
    pub endpoints: u64,
    pub endpoint_links: u64,
    pub endpoint_closes_pended: u64,
    /// Second connections to a destination from one shared endpoint,
    /// refused as N11 says.
    pub endpoint_tuples_refused: u64,
    /// Requests breaking a rule (FastRegisters and Invalidates of a
    /// fast-register MR) that were refused inline or failed, as they must.
    pub doomed_failed: u64,
    /// Links whose two QPs took their receives from one SRQ (Q3).
    pub shared_srqs: u64,
    /// Receives posted to a shared SRQ through one side and taken by the
    /// other side's QP (their entries came on its CQ, Q2, Q3).
    pub srq_crossed: u64,
    /// Pools made: SRQs the QPs of several links take their receives from
    /// ([`pool`]), sides whose QP took its receives from one, and receives
    /// taken by the QP of a link other than the one they were posted
    /// through (E4: left in the SRQ by that link's close, or taken while
    /// both were open).
    pub pools: u64,
    pub pooled_sides: u64,
    pub pool_crossed: u64,
    /// Calls made on another thread while this one posted on the same QP
    /// ([`race`]: a Flush, P4; a connector's close, P5; a Receive, P2; a
    /// poll of the side's CQ, C1).
    pub races: u64,
    /// Sides whose QP had a receive CQ apart from its initiator CQ (P1).
    pub receive_cqs: u64,
    /// Links whose two QPs shared their CQs, and entries polled through
    /// one side for a request of the other side's QP.
    pub shared_cqs: u64,
    pub shared_cq_entries: u64,
    /// Pools with a CQ, the receive CQ of every side on them (a CQ shared
    /// by the QPs of several links); sides on one; and entries there not
    /// polled through the link of the QP they name: through another
    /// link's side, or at the pool's close once that link had closed.
    pub pool_cqs: u64,
    pub pool_cq_sides: u64,
    pub pool_cq_crossed: u64,
    /// Sides whose missing entries were excused by their CQ's reported
    /// overflow or fatal error (E10, E11, E12).
    pub cq_errors: u64,
    /// Everything the oracle objected to; empty when the run passed.
    pub findings: Vec<String>,
}

impl Outcome {
    fn add(&mut self, other: &Self) {
        self.calls += other.calls;
        self.posted += other.posted;
        self.refused += other.refused;
        self.succeeded += other.succeeded;
        self.flushed += other.flushed;
        self.failed += other.failed;
        self.judged += other.judged;
        self.data_checked += other.data_checked;
        self.links += other.links;
        self.setup_failed += other.setup_failed;
        self.closed += other.closed;
        self.notifications += other.notifications;
        self.srq_sides += other.srq_sides;
        self.srq_notifications += other.srq_notifications;
        self.shared_srqs += other.shared_srqs;
        self.fast_registered += other.fast_registered;
        self.fast_named += other.fast_named;
        self.sources_remapped += other.sources_remapped;
        self.endpoints += other.endpoints;
        self.endpoint_links += other.endpoint_links;
        self.endpoint_closes_pended += other.endpoint_closes_pended;
        self.endpoint_tuples_refused += other.endpoint_tuples_refused;
        self.doomed_failed += other.doomed_failed;
        self.srq_crossed += other.srq_crossed;
        self.pools += other.pools;
        self.pooled_sides += other.pooled_sides;
        self.pool_crossed += other.pool_crossed;
        self.races += other.races;
        self.receive_cqs += other.receive_cqs;
        self.shared_cqs += other.shared_cqs;
        self.shared_cq_entries += other.shared_cq_entries;
        self.pool_cqs += other.pool_cqs;
        self.pool_cq_sides += other.pool_cq_sides;
        self.pool_cq_crossed += other.pool_cq_crossed;
        self.cq_errors += other.cq_errors;
        self.findings.extend(other.findings.iter().cloned());
    }
}

/// The L17 counter (a close while a call is inside the object, always
/// counted).
fn l17_breaches() -> u64 {
    let mut counts = [BreachCount {
        rule: [0; 8],
        count: 0,
    }; 8];
    let mut n = counts.len() as u32;
    // SAFETY: room for `n` entries and a writable count.
    let status = unsafe { SoftNdkGetBreachCounts(counts.as_mut_ptr(), &raw mut n) };
    if status != STATUS_SUCCESS {
        return 0;
    }
    counts
        .iter()
        .take(n as usize)
        .find(|c| c.rule.starts_with(b"L17\0"))
        .map_or(0, |c| c.count)
}

/// Runs the fuzzer as `config` says; the counts and the findings.
///
/// The live-object check assumes no other code of the process creates or
/// closes provider objects during the run.
pub fn run(config: &Config) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(plan) = &config.faults {
        let text = std::ffi::CString::new(plan.as_str()).unwrap_or_default();
        // SAFETY: a NUL-terminated string.
        let status = unsafe { SoftNdkSetFaultPlan(text.as_ptr()) };
        if status != STATUS_SUCCESS {
            outcome
                .findings
                .push(format!("the fault plan {plan:?} was refused"));
            return outcome;
        }
    }
    let live_before = SoftNdkGetLiveObjects();
    let l17_before = l17_breaches();
    let mut adapters = Vec::new();
    for n in 0..config.adapters.max(1) {
        let ip = [127, 0, config.net, u8::try_from(n + 1).unwrap_or(u8::MAX)];
        let address = sockaddr(ip, 0);
        let mut adapter = ptr::null_mut();
        let raw = (&raw const address).cast::<SockAddr>();
        let status = if config.iwarp {
            // SAFETY: a readable SOCKADDR_IN and a writable out-pointer.
            unsafe { SoftNdkOpenAdapterEx(raw, 1, &raw mut adapter) }
        } else {
            // SAFETY: as above.
            unsafe { SoftNdkOpenAdapter(raw, &raw mut adapter) }
        };
        outcome.calls += 1;
        if status != STATUS_SUCCESS {
            outcome.findings.push(format!(
                "SoftNdkOpenAdapter({ip:?}) failed with {:#010x}",
                status.cast_unsigned()
            ));
            continue;
        }
        adapters.push(Adapter {
            ptr: adapter.expose_provenance(),
            ip,
        });
    }
    if !adapters.is_empty() {
        let threads = config.threads.max(1);
        let share = config.calls / threads as u64;
        let results: Vec<Outcome> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let adapters = &adapters;
                    scope.spawn(move || Fuzzer::new(t, config, adapters, share).run())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Outcome {
                        findings: vec!["a fuzzer thread panicked".into()],
                        ..Outcome::default()
                    })
                })
                .collect()
        });
        for result in &results {
            outcome.add(result);
        }
    }
    for adapter in &adapters {
        // SAFETY: an adapter opened above, closed once, its objects closed.
        let status = unsafe { SoftNdkCloseAdapter(adapter.ptr()) };
        outcome.calls += 1;
        if status != STATUS_SUCCESS {
            outcome.findings.push(format!(
                "SoftNdkCloseAdapter failed with {:#010x}",
                status.cast_unsigned()
            ));
        }
    }
    if config.faults.is_some() {
        // SAFETY: null turns fault injection off.
        unsafe { SoftNdkSetFaultPlan(ptr::null()) };
    }
    // An object's memory goes once the last reference drops, which another
    // thread (a device's worker) may hold a moment after the close.
    let start = Instant::now();
    let mut live = SoftNdkGetLiveObjects();
    while live != live_before && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
        live = SoftNdkGetLiveObjects();
    }
    if outcome.findings.is_empty() && live != live_before {
        outcome.findings.push(format!(
            "seed {}: {} provider object(s) left allocated after every adapter closed (before the run {live_before}, after {live})",
            config.seed,
            live.wrapping_sub(live_before).cast_signed()
        ));
    }
    let l17 = l17_breaches();
    if l17 != l17_before {
        outcome.findings.push(format!(
            "seed {}: {} L17 breach(es) counted: a close raced a call inside its object",
            config.seed,
            l17 - l17_before
        ));
    }
    outcome
}
