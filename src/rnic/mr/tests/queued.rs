//! Unit tests of windows whose Binds and Invalidates are queued behind one
//! another: what a post may look at, and what only execution may decide.
//!
//! A Bind is posted while requests posted before it are still queued (a
//! deferred chain, or simply a deferred engine behind the poster). Whether
//! its window is bound is only known once those have run, so the post
//! accepts it (P18, D2) and the Bind fails, if it must, when it runs (M21,
//! a Bind completion status of E8). Every test runs with both engines; the
//! chains are held with DEFER, so nothing runs before the last post rings
//! the doorbell and the outcome does not depend on timing.

use alloc::vec::Vec;

use super::super::{Denied, Mr, Mw, STAGE_SLOTS};
use super::{MODES, settle};
use crate::kernel::sync::Arc;
use crate::rnic::device::EngineMode;
use crate::rnic::qp::{InvalidateTarget, PostError};
use crate::rnic::testing::{LamPages, Pair, Registered, Side};
use crate::rnic::types::{Access, Completion, Opcode, WcStatus, WrFlags};

/// Flags that hold a request back (all but the last of a chain) or ring.
fn ring(last: bool) -> WrFlags {
    if last {
        WrFlags::empty()
    } else {
        WrFlags::DEFER
    }
}

/// Opcodes and statuses of every completion `side` holds now.
fn outcomes(side: &Side) -> Vec<(Opcode, WcStatus)> {
    side.scq
        .drain()
        .iter()
        .map(|c: &Completion| (c.opcode, c.status))
        .collect()
}

/// Resolves a remote access of `len` bytes at `addr` on side b with `key`.
fn reach(pair: &Pair, key: u32, addr: u64, len: u64) -> Result<(), Denied> {
    let b = &pair.b;
    b.device
        .resolve_remote(&b.pd, b.qp.id(), key, addr, len, Access::REMOTE_WRITE)
        .map(drop)
}

const BIND_OK: (Opcode, WcStatus) = (Opcode::Bind, WcStatus::Success);
const BIND_FAILED: (Opcode, WcStatus) = (Opcode::Bind, WcStatus::InvalidRequest);
const BIND_CANCELLED: (Opcode, WcStatus) = (Opcode::Bind, WcStatus::Cancelled);
const INVALIDATE_OK: (Opcode, WcStatus) = (Opcode::Invalidate, WcStatus::Success);
const INVALIDATE_CANCELLED: (Opcode, WcStatus) = (Opcode::Invalidate, WcStatus::Cancelled);

/// Side b of a pair in one engine mode, with a 3-page region (local write
/// only), an unbound window, and the count of live tokens before any Bind.
struct Window {
    pair: Pair,
    reg: Registered,
    mw: Arc<Mw>,
    keys: usize,
}

impl Window {
    fn new(mode: EngineMode) -> Self {
        let pair = Pair::new(mode);
        let reg = pair.b.buffer(3 * 4096, 0, Access::LOCAL_WRITE);
        let mw = Mw::new(&pair.b.pd).unwrap();
        let keys = pair.b.device.live_keys();
        Self {
            pair,
            reg,
            mw,
            keys,
        }
    }

    /// A window bound once (M20): the Bind ran and succeeded; returns the
    /// fixture and the binding's token.
    fn bound(mode: EngineMode) -> (Self, u32) {
        let w = Self::new(mode);
        w.bind(1, ring(true));
        settle();
        assert_eq!(w.outcomes(), [BIND_OK]);
        let token = w.mw.remote_key();
        assert_ne!(token, 0, "a bound window has a token");
        (w, token)
    }

    /// Posts a Bind of the window's first page (remote write) and checks the
    /// post accepted it.
    fn bind(&self, context: usize, flags: WrFlags) {
        let posted = self.post_bind(context, flags);
        assert_eq!(posted, Ok(()), "Bind {context} refused at post");
    }

    fn post_bind(&self, context: usize, flags: WrFlags) -> Result<(), PostError> {
        let (reg, mw) = (&self.reg, &self.mw);
        let access = Access::REMOTE_WRITE;
        let b = &self.pair.b;
        b.qp.post_bind(context, &reg.mr, mw, reg.raddr(0), 4096, access, flags)
    }

    /// Posts an Invalidate of the window and checks the post accepted it.
    fn unbind(&self, context: usize, flags: WrFlags) {
        let target = InvalidateTarget::Mw(Arc::clone(&self.mw));
        let posted = self.pair.b.qp.post_invalidate(context, target, flags);
        assert_eq!(posted, Ok(()), "Invalidate {context} refused at post");
    }

    /// Resolves 16 bytes at `offset` of the region under `key`.
    fn reach(&self, key: u32, offset: u64) -> Result<(), Denied> {
        reach(&self.pair, key, self.reg.raddr(offset), 16)
    }

    fn outcomes(&self) -> Vec<(Opcode, WcStatus)> {
        outcomes(&self.pair.b)
    }

    /// Tokens alive on side b's device now, less those before any Bind.
    fn new_keys(&self) -> usize {
        self.pair.b.device.live_keys() - self.keys
    }
}

#[test]
fn test_window_bind_invalidate_chain_queued_is_accepted_and_runs_in_order_rule_p18() {
    for mode in MODES {
        let w = Window::new(mode);
        // Bind, Invalidate, Bind, Invalidate, Bind: every Bind but the first
        // finds the window bound when posted, unbound when it runs.
        let mut tokens = Vec::new();
        for round in 0..3 {
            // The last Bind rings the doorbell for the whole chain.
            w.bind(10 + round, ring(round == 2));
            tokens.push(w.mw.remote_key());
            if round < 2 {
                w.unbind(20 + round, ring(false));
            }
        }
        // M20: each Bind's token was readable on return, each a fresh one.
        assert_eq!(tokens.len(), 3);
        assert!(tokens[0] != tokens[1] && tokens[1] != tokens[2] && tokens[0] != tokens[2]);
        settle();
        let chain = [BIND_OK, INVALIDATE_OK, BIND_OK, INVALIDATE_OK, BIND_OK];
        assert_eq!(w.outcomes(), chain, "{mode:?}");
        // The last binding is in force, under the last token only.
        assert_eq!(w.mw.remote_key(), tokens[2]);
        assert_eq!(w.reach(tokens[2], 100), Ok(()));
        for &token in &tokens[..2] {
            assert_eq!(w.reach(token, 100), Err(Denied::Token));
        }
        assert_eq!(w.new_keys(), 1, "{mode:?}");
        w.mw.close();
        assert_eq!(w.new_keys(), 0, "{mode:?}");
    }
}

#[test]
fn test_window_bind_on_bound_window_accepted_then_fails_when_it_runs_rule_m21() {
    for mode in MODES {
        let (w, first) = Window::bound(mode);
        let keys = w.new_keys();
        // Two more Binds with no Invalidate between: both accepted at post
        // (no limit on how many are queued); the first is refused when it
        // runs, which ends the connection (E5): the second is cancelled.
        w.bind(2, ring(false));
        let second = w.mw.remote_key();
        w.bind(3, ring(false));
        let third = w.mw.remote_key();
        assert!(second != first && third != second && third != first);
        w.pair.b.qp.ring_deferred();
        settle();
        assert_eq!(w.outcomes(), [BIND_FAILED, BIND_CANCELLED], "{mode:?}");
        // The first binding stands; the failed Binds' tokens are gone.
        assert_eq!(w.mw.remote_key(), first, "{mode:?}");
        assert_eq!(w.new_keys(), keys, "{mode:?}");
        assert_eq!(w.reach(first, 0), Ok(()));
        for token in [second, third] {
            assert_eq!(w.reach(token, 0), Err(Denied::Token));
        }
        w.mw.close();
    }
}

#[test]
fn test_window_queued_bind_token_names_nothing_before_it_runs_rule_m34() {
    for mode in MODES {
        let (w, old) = Window::bound(mode);
        w.unbind(2, ring(false));
        w.bind(3, ring(false));
        let new = w.mw.remote_key();
        assert_ne!(new, old);
        // Held back: the old binding is in force, the new token reaches
        // nothing yet, and cannot be invalidated remotely (M24) either.
        let b = &w.pair.b;
        assert_eq!(w.reach(old, 0), Ok(()));
        assert_eq!(w.reach(new, 0), Err(Denied::Token));
        assert_eq!(
            b.device.invalidate_key(&b.pd, new),
            Err(WcStatus::InvalidRequest)
        );
        assert_eq!(w.reach(old, 0), Ok(()), "{mode:?}");
        // Ring: the Invalidate, then the Bind, run.
        w.unbind(4, ring(false));
        w.bind(5, ring(true));
        let last = w.mw.remote_key();
        settle();
        let chain = [INVALIDATE_OK, BIND_OK, INVALIDATE_OK, BIND_OK];
        assert_eq!(w.outcomes(), chain, "{mode:?}");
        assert_eq!(w.mw.remote_key(), last);
        for token in [old, new] {
            assert_eq!(w.reach(token, 0), Err(Denied::Token));
        }
        assert_eq!(w.reach(last, 0), Ok(()));
        // Now the token in force is invalidated by its own value.
        assert_eq!(b.device.invalidate_key(&b.pd, last), Ok(()));
        assert_eq!(w.reach(last, 0), Err(Denied::Token));
        w.mw.close();
    }
}

#[test]
fn test_window_closed_with_binds_queued_releases_their_tokens_when_they_retire_rule_m22() {
    for mode in MODES {
        let w = Window::new(mode);
        w.bind(1, ring(false));
        w.unbind(2, ring(false));
        w.bind(3, ring(false));
        let queued = w.mw.remote_key();
        w.mw.close();
        assert_eq!(w.mw.remote_key(), 0, "a closed window has no token");
        assert_eq!(w.reach(queued, 0), Err(Denied::Token));
        // A post on the closed window is refused and leaves nothing.
        let refused = w.post_bind(4, WrFlags::empty());
        assert_eq!(refused, Err(PostError::InvalidParameter));
        settle();
        // The refusal rang the doorbell (D4): the queued chain ran against
        // a closed window, its first Bind failed and the rest was cancelled
        // (E5).
        let chain = [BIND_FAILED, INVALIDATE_CANCELLED, BIND_CANCELLED];
        assert_eq!(w.outcomes(), chain, "{mode:?}");
        assert_eq!(w.new_keys(), 0, "{mode:?}");
    }
}

#[test]
fn test_window_flushed_queued_binds_release_their_tokens_rule_e1() {
    for mode in MODES {
        let w = Window::new(mode);
        for context in 0..6 {
            w.bind(context, ring(false));
            w.unbind(100 + context, ring(false));
        }
        assert_eq!(w.new_keys(), 6);
        w.pair.b.qp.flush();
        settle();
        let done = w.outcomes();
        assert_eq!(done.len(), 12, "{mode:?}");
        assert!(
            done.iter().all(|&(_, s)| s == WcStatus::Cancelled),
            "{done:?}"
        );
        assert_eq!(w.new_keys(), 0, "{mode:?}");
        assert_eq!(w.mw.remote_key(), 0, "nothing ever bound");
        w.mw.close();
    }
}

#[test]
fn test_fast_register_invalidate_chain_longer_than_the_staged_lists_rule_p18_m16() {
    for mode in MODES {
        let pair = Pair::new(mode);
        let lam = LamPages::new(&pair.b.device, 16, 0);
        let mr = Mr::new(&pair.b.pd, true).unwrap();
        mr.init_fast(2, true).unwrap();
        let rkey = mr.remote_key().unwrap();
        // FastRegister, Invalidate, … eight times over: more FastRegisters
        // queued at once than the region's first STAGE_SLOTS lists, each a
        // different page list (pages 2i and 2i+1) at a different base.
        let rounds = 8;
        assert!(rounds > STAGE_SLOTS);
        for round in 0..rounds {
            let pages = [lam.page(2 * round), lam.page(2 * round + 1)];
            let base = 0x10_0000 * (round as u64 + 1);
            let posted = pair.b.qp.post_fast_register(
                round,
                &mr,
                &pages,
                0,
                2 * 4096,
                base,
                Access::REMOTE_WRITE | Access::LOCAL_WRITE,
                WrFlags::DEFER,
            );
            assert_eq!(posted, Ok(()), "{mode:?}: FastRegister {round}");
            if round + 1 < rounds {
                let target = InvalidateTarget::Mr(Arc::clone(&mr));
                let posted = pair
                    .b
                    .qp
                    .post_invalidate(100 + round, target, WrFlags::DEFER);
                assert_eq!(posted, Ok(()), "{mode:?}: Invalidate {round}");
            }
        }
        pair.b.qp.ring_deferred();
        settle();
        let done = outcomes(&pair.b);
        assert_eq!(done.len(), 2 * rounds - 1, "{mode:?}");
        for (i, outcome) in done.iter().enumerate() {
            let op = if i % 2 == 0 {
                Opcode::FastRegister
            } else {
                Opcode::Invalidate
            };
            assert_eq!(*outcome, (op, WcStatus::Success), "{mode:?}: #{i}");
        }
        // The last list is mapped, at the last base, under the same token
        // (M35); the earlier bases name nothing.
        let last = 0x10_0000 * rounds as u64;
        assert_eq!(reach(&pair, rkey, last, 2 * 4096), Ok(()));
        assert_eq!(
            reach(&pair, rkey, 0x10_0000, 16),
            Err(Denied::Range),
            "{mode:?}"
        );
        // Executed lists are free again: another round stages without
        // growing (nothing to observe but success).
        let target = InvalidateTarget::Mr(Arc::clone(&mr));
        pair.b
            .qp
            .post_invalidate(200, target, WrFlags::empty())
            .unwrap();
        settle();
        assert_eq!(outcomes(&pair.b), [(Opcode::Invalidate, WcStatus::Success)]);
    }
}
