//! Arrange steps the families share beyond [`Fixture`]: the memory a
//! data-path test starts with on a fresh [`Pair`] (the layouts that are not
//! [`pair_with_memory`]'s), a [`Spout`] on a watched CQ, and a close
//! started through a saved [`CloseSlot`] whose completion goes to a
//! [`Watch`]; a [`Closing`], and the teardown of a pair with such closes
//! pending.

use super::*;

/// A pair set up to Read: A's zeroed sink of `len` bytes (local write) and
/// B's region of `len` bytes filled with pattern `seed`, open to remote
/// reads and writes. Closed with [`teardown_with_regions`] or
/// [`teardown_closing`].
pub fn pair_reading(len: usize, seed: u8) -> (Pair, Region, Region) {
    let pair = Pair::new();
    let a_sink = Region::new(&pair.a_pd, len, 0, MR_LOCAL_WRITE);
    let b_mem = Region::pattern(&pair.b_pd, len, seed, MR_REMOTE);
    (pair, a_sink, b_mem)
}

/// A pair where both sides' bytes are known: A's region of `len` bytes
/// filled with pattern `a_seed` (local write) and B's filled with pattern
/// `b_seed`, open to remote reads and writes; for tests that move bytes
/// both ways or check what a failed request left in place.
pub fn pair_with_patterns(len: usize, a_seed: u8, b_seed: u8) -> (Pair, Region, Region) {
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, len, a_seed, MR_LOCAL_WRITE);
    let b_mem = Region::pattern(&pair.b_pd, len, b_seed, MR_REMOTE);
    (pair, a_mem, b_mem)
}

/// A pair set up to Send: A's region of `len` bytes filled with pattern
/// `seed` (local write) and B's zeroed receive buffer of `len` bytes (local
/// write only: no remote access).
pub fn pair_sending(len: usize, seed: u8) -> (Pair, Region, Region) {
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, len, seed, MR_LOCAL_WRITE);
    let b_recv = Region::new(&pair.b_pd, len, 0, MR_LOCAL_WRITE);
    (pair, a_mem, b_recv)
}

/// Starts the close of any object through its saved `close` slot, with
/// [`on_watch_close`] on `watch` (recorded there as [`CLOSED`]); returns
/// what the close returned, for the test to judge (L18, L21).
pub fn close_watched((header, close): CloseSlot, watch: &Arc<Watch>) -> NtStatus {
    // SAFETY: a live object and the close slot of its table; `watch`
    // outlives the close (tests wait for its completion).
    unsafe { close(header, Some(on_watch_close), watch.ctx()) }
}

/// A [`Spout`] whose CQ of `depth` entries delivers its notifications to
/// the fresh [`Watch`] returned with it.
pub fn watched_spout(depth: u32) -> (Spout, Arc<Watch>) {
    let watch = Watch::new();
    let spout = Spout::new(|adapter| watched_cq(adapter, depth, &watch));
    (spout, watch)
}

/// A close a test started through a saved [`CloseSlot`] with
/// [`close_with`] (L18 checked): what it returned, and the log its one
/// completion (if it pended) lands in.
pub struct Closing {
    pub status: NtStatus,
    pub log: Arc<Signal>,
}

impl Closing {
    /// Starts the close through `slot`, its completion logged in a fresh
    /// [`Signal`].
    pub fn start(slot: CloseSlot) -> Self {
        let log = Signal::new();
        let status = close_with(slot, &log);
        Self { status, log }
    }

    /// Waits for the close to complete ([`finish_close_logged`]: one
    /// completion if it pended, none if not).
    pub fn finish(self) {
        finish_close_logged(self.status, &self.log);
    }
}

/// [`teardown_except`] for a pair some of whose objects the test started to
/// close through their slots: the rest is torn down first (a close that
/// pends waits for those successors, L24), then each of those closes is
/// waited for ([`Closing::finish`]).
pub fn teardown_closings<const N: usize>(pair: Pair, closed: Closed, closings: [Closing; N]) {
    teardown_except(pair, closed);
    for closing in closings {
        closing.finish();
    }
}
