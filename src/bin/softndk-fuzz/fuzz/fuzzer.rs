//! One thread of a run: its state, its bookkeeping of calls and findings,
//! and its loop of random steps.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use softndk::abi::{NtStatus, STATUS_PENDING};

use super::objects::{Adapter, Link};
use super::rng::Rng;
use super::signal::Signal;
use super::{Config, Outcome, WAIT};

/// One thread of a run.
pub(super) struct Fuzzer<'a> {
    pub(super) thread: usize,
    pub(super) rng: Rng,
    pub(super) adapters: &'a [Adapter],
    pub(super) config: &'a Config,
    pub(super) budget: u64,
    pub(super) next_context: usize,
    pub(super) out: Outcome,
    pub(super) links: Vec<Link>,
    /// Its pools, open (one an adapter at most), used or not.
    pub(super) pools: Vec<super::pool::Shared>,
    /// Its second thread, for races ([`super::race`]), made at the first.
    pub(super) second: Option<super::race::Second>,
    /// Its shared endpoints, open or closing (N9–N11).
    pub(super) endpoints: Vec<super::endpoint::Endpoint>,
    /// The current link's noise: the percentage of parameters made invalid
    /// (0 on a clean link).
    pub(super) noise: u64,
    /// Signals of objects whose close completed, kept a while so that a
    /// callback after the close (L22) is counted rather than a use after
    /// free.
    pub(super) graveyard: std::collections::VecDeque<Arc<Signal>>,
    /// The link the current step works on (for [`Recent`]).
    pub(super) at_link: u64,
    /// The thread's last [`RECENT`] calls and CQ entries, printed on
    /// standard error with its first finding: the sequence that led to it,
    /// without `--trace`'s cost (a trace's output slows a run about four
    /// times, which hides timing-dependent findings).
    pub(super) recent: std::collections::VecDeque<Recent>,
}

/// How many calls and entries a thread remembers for its first finding.
pub(super) const RECENT: usize = 1024;

/// A call (its answer) or a CQ entry (`what` is `"entry"`), as remembered
/// for a finding.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recent {
    pub(super) call: u64,
    pub(super) link: u64,
    pub(super) what: &'static str,
    pub(super) status: NtStatus,
    /// The request context of a post or an entry (0 for other calls).
    pub(super) context: usize,
}

/// How many closed objects' signals a thread keeps watching.
pub(super) const GRAVEYARD: usize = 256;

/// A failed set-up step: the message, and whether it is a finding.
pub(super) struct SetupFailed(pub(super) String);

impl<'a> Fuzzer<'a> {
    pub(super) fn new(
        thread: usize,
        config: &'a Config,
        adapters: &'a [Adapter],
        budget: u64,
    ) -> Self {
        let salt = (thread as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        Self {
            thread,
            rng: Rng::new(config.seed ^ salt),
            adapters,
            config,
            budget,
            next_context: 0,
            out: Outcome::default(),
            links: Vec::new(),
            pools: Vec::new(),
            second: None,
            endpoints: Vec::new(),
            graveyard: std::collections::VecDeque::new(),
            noise: 0,
            at_link: 0,
            recent: std::collections::VecDeque::with_capacity(RECENT),
        }
    }

    /// Marks `signal`'s object closed and watches it for late callbacks
    /// (L22) until it leaves the graveyard.
    pub(super) fn bury(&mut self, signal: Arc<Signal>) {
        signal.closed.store(true, Ordering::SeqCst);
        self.graveyard.push_back(signal);
        while self.graveyard.len() > GRAVEYARD {
            if let Some(old) = self.graveyard.pop_front() {
                self.check_grave(&old);
            }
        }
    }

    pub(super) fn check_grave(&mut self, signal: &Signal) {
        let late = signal.late.swap(0, Ordering::SeqCst);
        if late != 0 {
            self.finding(&format!(
                "{late} callback(s) came after their object's close completed (L22)"
            ));
        }
    }

    /// Remembers a call or an entry (see [`Fuzzer::recent`]).
    pub(super) fn remember(&mut self, what: &'static str, status: NtStatus, context: usize) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(Recent {
            call: self.out.calls,
            link: self.at_link,
            what,
            status,
            context,
        });
    }

    /// Counts one provider call, remembers it and traces it.
    pub(super) fn call(&mut self, what: &'static str, status: NtStatus) {
        self.out.calls += 1;
        self.remember(what, status, 0);
        if self.config.trace {
            eprintln!(
                "fuzz t{} #{}: {what} -> {:#010x}",
                self.thread,
                self.out.calls,
                status.cast_unsigned()
            );
        }
    }

    pub(super) fn finding(&mut self, text: &str) {
        let mut line = String::new();
        let _ = write!(
            line,
            "seed {} thread {} call {}: {text}",
            self.config.seed, self.thread, self.out.calls
        );
        if self.config.trace {
            eprintln!("fuzz FINDING {line}");
        } else if self.out.findings.is_empty() {
            // The thread's first finding: what led to it.
            let mut text = format!("fuzz t{} recent calls before: {line}\n", self.thread);
            for r in &self.recent {
                let _ = writeln!(
                    text,
                    "fuzz t{} #{} link {}: {} -> {:#010x} context {:#x}",
                    self.thread,
                    r.call,
                    r.link,
                    r.what,
                    r.status.cast_unsigned(),
                    r.context
                );
            }
            eprint!("{text}");
        }
        self.out.findings.push(line);
    }

    /// A fresh request context: unique in the process (thread in the top
    /// bits), never null.
    pub(super) fn context(&mut self) -> usize {
        self.next_context += 1;
        ((self.thread + 1) << 40) | self.next_context
    }

    /// The outcome of a call that may pend, waiting for its callback.
    pub(super) fn finish(
        &mut self,
        what: &str,
        returned: NtStatus,
        signal: &Arc<Signal>,
    ) -> Option<(NtStatus, usize)> {
        if returned != STATUS_PENDING {
            return Some((returned, 0));
        }
        let got = signal.wait();
        if got.is_none() {
            self.finding(&format!(
                "{what} returned STATUS_PENDING and never completed within {WAIT:?}"
            ));
        }
        got
    }

    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.rng.index(i + 1);
            items.swap(i, j);
        }
    }

    /// One random step on one of the thread's links.
    pub(super) fn step(&mut self) {
        if self.links.len() < self.config.links && (self.links.is_empty() || self.rng.chance(5)) {
            if let Some(link) = self.open_link() {
                self.links.push(link);
            }
            return;
        }
        let Some(index) = (!self.links.is_empty()).then(|| self.rng.index(self.links.len())) else {
            return;
        };
        let mut link = self.links.swap_remove(index);
        self.noise = link.noise;
        self.at_link = link.id;
        let i = self.rng.index(2);
        let mut choice = self.rng.below(1000);
        // A disconnected link refuses every post (X5): close it soon.
        if link.disconnected && self.rng.chance(20) {
            choice = 999;
        }
        // A consumer sizes its CQ for what it has outstanding: with the CQ
        // possibly full, reap instead of posting (but now and then post
        // anyway, so that overflows (E10) are exercised too; never on a
        // strict link).
        let full = link.full_cq(i);
        if choice < 620 && full.is_some() && (link.strict || !self.rng.chance(2)) {
            choice = 620;
        }
        match choice {
            0..=199 => self.receive(&mut link, i),
            200..=349 => self.send(&mut link, i, false),
            350..=379 => self.send(&mut link, i, true),
            380..=479 => self.rdma(&mut link, i, false),
            480..=569 => self.rdma(&mut link, i, true),
            570..=594 => self.bind(&mut link, i),
            595..=609 => self.fast_register(&mut link, i),
            610..=619 => self.invalidate(&mut link, i),
            870..=879 => self.resize_cq(&mut link, i),
            // One thread replays a seed exactly: it races nothing.
            860..=869 if self.config.threads > 1 => self.race_on(&mut link, i),
            620 => {
                let c = full.unwrap_or_else(|| link.sides[i].any_cq(&mut self.rng));
                self.poll_cq(&mut link, i, c, 16);
            }
            621..=869 => {
                let room = self.rng.index(17);
                self.poll(&mut link, i, room);
            }
            880..=899 if !link.sides[i].srq.is_null() => self.modify_srq(&mut link, i),
            880..=979 => self.arm(&mut link, i),
            // A flush leaves the queues in error: every later post completes
            // cancelled (E1, E5); so rarely, for links to do work first.
            980..=984 => self.flush(&mut link, i),
            985..=989 => self.disconnect(&mut link, i),
            // A shared endpoint closed while connections may still go out
            // from it (N10); the next link that wants one makes another.
            990..=992 if !self.endpoints.is_empty() => {
                // One that connections go out from, if any.
                let used: Vec<usize> = (0..self.endpoints.len())
                    .filter(|&at| self.endpoints[at].users > 0)
                    .collect();
                let at = if used.is_empty() {
                    self.rng.index(self.endpoints.len())
                } else {
                    used[self.rng.index(used.len())]
                };
                self.close_endpoint(at);
            }
            993..=994 => self.connect_again(&link),
            _ => {
                self.close_link(link);
                return;
            }
        }
        self.links.push(link);
    }

    pub(super) fn run(mut self) -> Outcome {
        while self.out.calls < self.budget && self.out.findings.is_empty() {
            self.step();
        }
        // Half the time the shared endpoints close first, while their
        // connections are still up: their closes pend until the links'
        // connectors are closed (N10).
        if self.rng.chance(50) {
            for at in (0..self.endpoints.len()).rev() {
                self.close_endpoint(at);
            }
        }
        for link in std::mem::take(&mut self.links) {
            self.close_link(link);
        }
        self.close_endpoints();
        self.close_idle_pools(true);
        for signal in std::mem::take(&mut self.graveyard) {
            self.check_grave(&signal);
        }
        self.out
    }
}
