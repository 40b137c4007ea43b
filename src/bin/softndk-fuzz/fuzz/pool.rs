//! SRQs that the QPs of several links take their receives from: a thread's
//! pool on an adapter (Q2, Q3), which outlives the links that use it, so
//! that a receive posted while one link was open is taken by the QP of a
//! link made later (E4: a QP's close leaves the SRQ's receives in it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use softndk::abi::{MrFlags, PAGE_SIZE, STATUS_SUCCESS};

use super::fuzzer::{Fuzzer, SetupFailed};
use super::objects::{Buffer, POLL, Post, RECEIVE_QUEUE, Side, table};
use super::reap::Polled;
use super::signal::on_create;

/// The percentage of pools with a CQ of their own, the receive CQ of every
/// side on the pool: a CQ shared by the QPs of several links.
const POOL_CQS: u64 = 40;

/// A pool, held by the thread ([`Fuzzer::pools`]) and by each side whose
/// QP takes its receives from it.
pub(super) type Shared = Rc<RefCell<Pool>>;

/// An SRQ in a PD of its own, with a registered buffer that every receive
/// posted to it names: a receive may be taken by the QP of any link in the
/// PD, long after the link it was posted through closed, so it must not
/// name that link's memory.
pub(super) struct Pool {
    /// Its objects, kept as a side without a QP, CQ or connector: the
    /// adapter, PD, SRQ (and its notifications), MR and buffer; in
    /// `outstanding` the receives posted to the SRQ and not yet reaped (an
    /// upper bound of what the SRQ holds: a receive taken and not yet
    /// reaped is counted too), in `credits` those no accepted Send was
    /// counted against yet, in `depths.0` the SRQ's depth and in
    /// `receive_sge` the SGEs a receive may have.
    pub(super) side: Side,
    /// The link and side each outstanding receive was posted through.
    pub(super) by: HashMap<usize, (u64, usize)>,
    /// On a pool with a CQ (`side.cqs[RECEIVE_QUEUE]`, the receive CQ of
    /// every side on the pool): the context of each QP made on it, with its
    /// link. An entry there may be for any of them, open or closed.
    pub(super) qps: HashMap<usize, u64>,
}

impl Pool {
    /// Records the accepted receive `context`, posted through side `i` of
    /// link `link`; whether the context was already outstanding.
    pub(super) fn hold(&mut self, context: usize, post: Post, (link, i): (u64, usize)) -> bool {
        self.side.credits += 1;
        self.by.insert(context, (link, i));
        self.side.outstanding.insert(context, post).is_some()
    }

    /// Whether it has a CQ, the receive CQ of every side on it.
    pub(super) fn has_cq(&self) -> bool {
        !self.side.cqs[RECEIVE_QUEUE].ptr.is_null()
    }

    /// Whether its CQ has no room for the entry of one more receive: the
    /// receives not yet reaped are as many as its depth (each may have an
    /// entry there). A receive is then not posted, so that the CQ never
    /// overflows: that would end every later link on the pool.
    pub(super) fn cq_full(&self) -> bool {
        self.has_cq() && self.side.outstanding.len() >= self.side.cqs[RECEIVE_QUEUE].depth as usize
    }

    /// Takes the outstanding receive `context` out: the receive, and
    /// whether it was posted through a side other than side `i` of link
    /// `link` (and through another link).
    pub(super) fn take(
        &mut self,
        context: usize,
        (link, i): (u64, usize),
    ) -> Option<(Post, bool, bool)> {
        let post = self.side.outstanding.remove(&context)?;
        let by = self.by.remove(&context);
        let crossed = by.is_some_and(|by| by != (link, i));
        let other_link = by.is_some_and(|(by, _)| by != link);
        Some((post, crossed, other_link))
    }
}

impl Fuzzer<'_> {
    /// The thread's open pool on `adapter`, made if it has none: a PD, an
    /// SRQ of 1 to 16 receives of up to 1 to 4 SGEs (threshold at or below
    /// its depth, Q4), and an MR over one or two pages of its own that
    /// grants local write (M1).
    pub(super) fn pool(&mut self, adapter: usize) -> Result<Shared, SetupFailed> {
        if let Some(pool) = self
            .pools
            .iter()
            .find(|p| p.borrow().side.adapter == adapter)
        {
            return Ok(Rc::clone(pool));
        }
        let mut side = Side::new(adapter);
        let made = self.open_pool(&mut side);
        let pool = Rc::new(RefCell::new(Pool {
            side,
            by: HashMap::new(),
            qps: HashMap::new(),
        }));
        match made {
            Ok(()) => {
                self.out.pools += 1;
                self.pools.push(Rc::clone(&pool));
                Ok(pool)
            }
            Err(failed) => {
                self.close_pool(pool);
                Err(failed)
            }
        }
    }

    fn open_pool(&mut self, side: &mut Side) -> Result<(), SetupFailed> {
        let adapter = self.adapters[side.adapter].ptr();
        let depth = self.rng.range(1, 16);
        let sge = self.rng.range(1, 4);
        (side.depths.0, side.receive_sge) = (depth, sge);
        // SAFETY: a live adapter and an out-pointer; `create` keeps the
        // completion's context until it came.
        side.pd = self.create("NdkCreatePd", |done, out| unsafe {
            (table(adapter).ndk_create_pd)(adapter, Some(on_create), done, out)
        })?;
        self.open_srq(side, depth, sge)?;
        if self.rng.chance(POOL_CQS) {
            // Room for the entry of every receive the SRQ can hold.
            let cq_depth = depth + self.rng.range(0, 4);
            self.open_cq(side, RECEIVE_QUEUE, cq_depth)?;
            self.out.pool_cqs += 1;
        }
        let pages = usize::try_from(self.rng.range(1, 2)).unwrap_or(1);
        side.buffer = Some(Buffer::new(pages * PAGE_SIZE));
        self.register(side, MrFlags::ALLOW_LOCAL_WRITE)
    }

    /// Closes the pools no side uses any more: every one (`all`), or each
    /// by chance (the others stay, their receives queued, for later links).
    pub(super) fn close_idle_pools(&mut self, all: bool) {
        let mut at = 0;
        while at < self.pools.len() {
            if Rc::strong_count(&self.pools[at]) == 1 && (all || self.rng.chance(30)) {
                let pool = self.pools.swap_remove(at);
                self.close_pool(pool);
            } else {
                at += 1;
            }
        }
    }

    /// Closes a pool's SRQ, CQ, MR and PD in a random order (as
    /// [`Fuzzer::close_link`] closes a link's), after polling its CQ
    /// empty; the receives still queued are dropped with the SRQ (E4).
    /// Every close must complete (L18, L21), and the bytes around the
    /// buffer must be intact.
    fn close_pool(&mut self, pool: Shared) {
        let Ok(mut pool) = Rc::try_unwrap(pool).map(RefCell::into_inner) else {
            self.finding("a pool was closed while a side still used it (a fuzzer bug)");
            return;
        };
        let had_cq = pool.has_cq();
        if had_cq {
            self.drain_pool(&mut pool);
        }
        let mut side = pool.side;
        let mut order = [0, 1, 2, 3];
        self.shuffle(&mut order);
        let mut pending = Vec::new();
        for what in order {
            match what {
                0 => self.close(&mut side.srq, &mut pending),
                1 => self.close(&mut side.mr, &mut pending),
                2 => self.close(&mut side.cqs[RECEIVE_QUEUE].ptr, &mut pending),
                _ => self.close(&mut side.pd, &mut pending),
            }
        }
        let closed = self.wait_closes(pending);
        if had_cq {
            let notes = &side.cqs[RECEIVE_QUEUE].notes;
            self.out.notifications += notes.count.load(Ordering::SeqCst);
            if closed {
                self.bury(Arc::clone(notes));
            } else {
                std::mem::forget(Arc::clone(notes));
            }
        }
        self.out.srq_notifications += side.srq_notes.count.load(Ordering::SeqCst);
        if let Some(buffer) = side.buffer.take() {
            if !buffer.guards_intact() {
                self.finding(
                    "bytes around a pool's registered buffer were written: a bounds check missed",
                );
            }
            if closed {
                drop(buffer);
            } else {
                std::mem::forget(buffer);
            }
        }
        if closed {
            self.bury(Arc::clone(&side.srq_notes));
        } else {
            std::mem::forget(Arc::clone(&side.srq_notes));
        }
    }

    /// Polls a pool's CQ until it is empty (bounded), once no QP uses it:
    /// each entry must be for a receive of the pool not yet reaped (P6),
    /// from a QP made on the CQ (P21).
    fn drain_pool(&mut self, pool: &mut Pool) {
        let cq = pool.side.cqs[RECEIVE_QUEUE].ptr;
        for _ in 0..100_000 {
            let polled = Polled::take(cq, self.rng.chance(50), POLL);
            self.call(polled.what, STATUS_SUCCESS);
            if polled.n == 0 {
                return;
            }
            for entry in polled.taken() {
                let (context, qp) = (entry.request_context, entry.qp_context);
                self.remember("entry", entry.status, context);
                if pool.take(context, (u64::MAX, 0)).is_none() {
                    self.finding(&format!(
                        "an entry (status {:#010x}) on a pool's CQ for request context {context:#x}, which has no outstanding receive there: a duplicate or a stray (P6)",
                        entry.status.cast_unsigned()
                    ));
                } else if pool.qps.contains_key(&qp) {
                    // Its QP's link has closed.
                    self.out.pool_cq_crossed += 1;
                } else {
                    self.finding(&format!(
                        "an entry on a pool's CQ carries QP context {qp:#x}, which no QP on that CQ has (P21)"
                    ));
                }
            }
        }
        self.finding("a pool's CQ still had entries after 100000 polls");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::objects::{Post, RECEIVE_QUEUE, SRQ_RECEIVE, Side, Via};
    use super::Pool;

    fn receive(call: u64) -> Post {
        Post {
            what: SRQ_RECEIVE,
            call,
            silent: false,
            via: Via::Mr,
            into_region: false,
            slot: None,
            doomed: None,
        }
    }

    fn pool() -> Pool {
        Pool {
            side: Side::new(0),
            by: HashMap::new(),
            qps: HashMap::new(),
        }
    }

    #[test]
    fn a_receive_is_reaped_once_and_says_who_posted_it() {
        let mut pool = pool();
        assert!(!pool.hold(1, receive(10), (7, 0)));
        assert!(!pool.hold(2, receive(11), (7, 0)));
        assert!(!pool.hold(3, receive(12), (7, 1)));
        assert_eq!(pool.side.credits, 3, "each receive is a credit");
        // Taken by the side that posted it.
        let (post, crossed, other_link) = pool.take(1, (7, 0)).unwrap();
        assert_eq!((post.call, crossed, other_link), (10, false, false));
        // By the other side of the same link.
        let (post, crossed, other_link) = pool.take(2, (7, 1)).unwrap();
        assert_eq!((post.call, crossed, other_link), (11, true, false));
        // By a QP of another link.
        let (post, crossed, other_link) = pool.take(3, (8, 1)).unwrap();
        assert_eq!((post.call, crossed, other_link), (12, true, true));
        // Each once: a second entry is a duplicate.
        assert!(pool.take(1, (7, 0)).is_none());
        assert!(pool.side.outstanding.is_empty() && pool.by.is_empty());
    }

    #[test]
    fn no_receive_goes_to_a_pool_whose_cq_may_be_full() {
        let mut pool = pool();
        assert!(!pool.hold(1, receive(1), (0, 0)));
        assert!(!pool.cq_full(), "no CQ: never full");
        // A CQ of depth 2 (never dereferenced here).
        pool.side.cqs[RECEIVE_QUEUE].ptr = std::ptr::NonNull::dangling().as_ptr();
        pool.side.cqs[RECEIVE_QUEUE].depth = 2;
        assert!(
            !pool.cq_full(),
            "one receive outstanding, room for two entries"
        );
        assert!(!pool.hold(2, receive(2), (0, 1)));
        assert!(
            pool.cq_full(),
            "each receive not yet reaped may have its entry there"
        );
        assert!(pool.take(1, (3, 0)).is_some());
        assert!(!pool.cq_full(), "a receive reaped frees its room");
    }

    #[test]
    fn a_context_held_twice_is_reported() {
        let mut pool = pool();
        assert!(!pool.hold(5, receive(1), (0, 0)));
        assert!(
            pool.hold(5, receive(2), (1, 0)),
            "the context was outstanding"
        );
    }
}
