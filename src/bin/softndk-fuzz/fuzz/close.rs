//! Closing: a link's objects closed in a random order, and the checks that
//! every close completes and every request has its entry.

use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use softndk::abi::{NdkConnector, STATUS_PENDING, STATUS_SUCCESS};

use super::WAIT;
use super::fuzzer::Fuzzer;
use super::objects::{
    Closable, Cq, INITIATOR_CQ, Link, Post, RECEIVE_QUEUE, SRQ_RECEIVE, queue_of, table,
};
use super::signal::{Signal, keep, on_event, on_status};

/// Closes that pended: the close's name and the signal its completion
/// comes on.
type Pending = Vec<(&'static str, Arc<Signal>)>;

impl Fuzzer<'_> {
    /// Starts the close of the object `slot` holds, if any, and empties the
    /// slot; a close that pends joins `pending`.
    pub(super) fn close<T: Closable>(&mut self, slot: &mut *mut T, pending: &mut Pending) {
        let object = std::mem::replace(slot, ptr::null_mut());
        if object.is_null() {
            return;
        }
        let what = T::CLOSE;
        let close = T::close_slot(table(object));
        let closed = Signal::new();
        // SAFETY: a live object (taken out of its slot, so closed once) and
        // its own close slot.
        let status = unsafe { close(object.cast(), Some(on_event), closed.ctx()) };
        self.call(what, status);
        match status {
            STATUS_SUCCESS => self.out.closed += 1,
            STATUS_PENDING => pending.push((what, closed)),
            other => {
                self.finding(&format!(
                    "{what} returned {:#010x} (L18: a close never fails)",
                    other.cast_unsigned()
                ));
            }
        }
    }

    /// Waits for the closes that pended; whether every one completed.
    pub(super) fn wait_closes(&mut self, pending: Pending) -> bool {
        let mut all = true;
        for (what, signal) in pending {
            if signal.wait().is_some() {
                self.out.closed += 1;
            } else {
                all = false;
                self.finding(&format!(
                    "{what} pended and its close never completed within {WAIT:?} (L18, L21)"
                ));
            }
        }
        all
    }

    /// Closes a link in a random order: connectors (after a disconnect or
    /// not) and QPs first, then the CQs are drained and checked, then the
    /// MWs, MRs (deregistered or not), CQs and PDs.
    pub(super) fn close_link(&mut self, mut link: Link) {
        if self.config.trace {
            eprintln!(
                "fuzz t{}   closing link {} noise {} strict {}",
                self.thread, link.id, link.noise, link.strict
            );
        }
        link.ended = true;
        self.at_link = link.id;
        if self.rng.chance(50) {
            for i in 0..2 {
                if self.rng.chance(50) {
                    self.disconnect(&mut link, i);
                }
            }
        }
        // QPs and connectors, in a random order.
        let mut order = [0_usize, 1, 2, 3];
        self.shuffle(&mut order);
        let mut pending = Vec::new();
        for what in order {
            let side = &mut link.sides[what / 2];
            if what % 2 == 0 {
                self.close(&mut side.qp, &mut pending);
            } else {
                if let Some((id, _)) = side.endpoint {
                    self.endpoint_check(id);
                }
                let side = &mut link.sides[what / 2];
                self.close(&mut side.connector, &mut pending);
            }
        }
        // Connectors of connect events the fuzzer did not accept, then the
        // listener.
        let extras: Vec<usize> = link
            .incoming
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .map(|(_, extra)| extra)
            .collect();
        for extra in extras {
            let mut extra: *mut NdkConnector = ptr::with_exposed_provenance_mut(extra);
            self.close(&mut extra, &mut pending);
        }
        self.close(&mut link.listener, &mut pending);
        let closed = self.wait_closes(pending);
        // The connector that connected from a shared endpoint is gone: one
        // reference fewer on it (N10). If its close never completed (a
        // finding already), the endpoint's close is not waited for.
        if closed && let Some((id, sure)) = link.sides[0].endpoint.take() {
            self.endpoint_released(id, sure);
        }
        if closed {
            let incoming = Arc::clone(&link.incoming);
            self.bury(incoming);
        } else {
            keep(&link.incoming);
        }
        for i in 0..2 {
            if closed {
                let disconnects = Arc::clone(&link.sides[i].disconnects);
                self.bury(disconnects);
            }
            for done in std::mem::take(&mut link.sides[i].disconnecting) {
                if done.wait().is_none() {
                    self.finding("NdkDisconnect pended and never completed, though its connector's close did (X1, L21)");
                }
            }
        }
        // L21: with the QPs closed, every request has its entry, but for
        // receives still in an SRQ (E4: the QP's end leaves them there;
        // the SRQ's close drops them). Both CQs first: on a shared link an
        // entry on one may be for a receive posted through the other side.
        for i in 0..2 {
            self.drain(&mut link, i);
        }
        for i in 0..2 {
            let left: Vec<Post> = link.sides[i]
                .outstanding
                .drain()
                .map(|(_, p)| p)
                .filter(|p| !p.silent && p.what != SRQ_RECEIVE)
                .collect();
            for c in [RECEIVE_QUEUE, INITIATOR_CQ] {
                let side = &link.sides[i];
                let mut missing = left
                    .iter()
                    .filter(|post| side.cq_for(queue_of(post.what)) == c);
                if closed
                    && let Some(first) = missing.next()
                    && !self.cq_failed(&link.sides[i].cqs[c])
                {
                    self.finding(&format!(
                        "{} posted request(s) never completed though the QP's close did (P6, L21); the first: {} at call {} (link {} side {i}, noise {}, strict {})",
                        1 + missing.count(),
                        first.what,
                        first.call,
                        link.id,
                        link.noise,
                        link.strict
                    ));
                }
            }
        }
        // The rest, in a random order.
        let mut order: [usize; 16] = std::array::from_fn(|n| n);
        self.shuffle(&mut order);
        let mut pending = Vec::new();
        for what in order {
            let side = &mut link.sides[what / 8];
            match what % 8 {
                // Side 0 closes the CQs side 1 borrowed.
                2 | 7 if side.borrowed_cqs => {
                    side.cqs = [Cq::new(), Cq::new()];
                }
                // A pool's CQ is the pool's to close.
                7 if side.pool_cq => {
                    side.cqs[RECEIVE_QUEUE] = Cq::new();
                }
                7 => self.close(&mut side.cqs[RECEIVE_QUEUE].ptr, &mut pending),
                0 => self.close(&mut side.mw, &mut pending),
                5 => {
                    if let Some(fast) = &mut side.fast {
                        self.close(&mut fast.mr, &mut pending);
                    }
                }
                // M32: once every request that used it completed (the
                // QPs' closes did); else the device may still use it.
                6 => {
                    let adapter = self.adapters[side.adapter].ptr();
                    if let Some(fast) = &mut side.fast
                        && let Some(mut lam) = fast.lam.take()
                    {
                        if closed {
                            // SAFETY: a live adapter and a LAM it built.
                            unsafe { (table(adapter).ndk_release_lam)(adapter, lam.ptr()) };
                            self.call("NdkReleaseLam", STATUS_SUCCESS);
                        } else {
                            std::mem::forget(lam);
                        }
                    }
                }
                // A pool's PD and SRQ are the pool's to close.
                3 | 4 if side.pool.is_some() => {
                    (side.pd, side.srq) = (ptr::null_mut(), ptr::null_mut());
                }
                4 => self.close(&mut side.srq, &mut pending),
                1 => {
                    let mr = side.mr;
                    if !mr.is_null() && side.registered && self.rng.chance(50) {
                        let done = Signal::new();
                        // SAFETY: a live, registered MR.
                        let status = unsafe {
                            (table(mr).ndk_deregister_mr)(mr, Some(on_status), done.ctx())
                        };
                        self.call("NdkDeregisterMr", status);
                        let _ = self.finish("NdkDeregisterMr", status, &done);
                    }
                    self.close(&mut side.mr, &mut pending);
                }
                2 => self.close(&mut side.cqs[INITIATOR_CQ].ptr, &mut pending),
                _ => self.close(&mut side.pd, &mut pending),
            }
        }
        let closed = self.wait_closes(pending) && closed;
        for side in &mut link.sides {
            for cq in &side.cqs {
                self.out.notifications += cq.notes.count.load(Ordering::SeqCst);
            }
            self.out.srq_notifications += side.srq_notes.count.load(Ordering::SeqCst);
            if closed {
                for cq in &side.cqs {
                    self.bury(Arc::clone(&cq.notes));
                }
                self.bury(Arc::clone(&side.srq_notes));
            }
            if let Some(buffer) = side.buffer.take() {
                if !buffer.guards_intact() {
                    self.finding(
                        "bytes around a registered buffer were written: a bounds check missed",
                    );
                }
                // A strict link's Send sources are no request's destination.
                if let Some(zones) = &side.zones
                    && buffer.read(0, zones.source.len()) != zones.source
                {
                    self.finding(&format!(
                        "link {}: the Send sources of a strict link's buffer were written, though no receive, Read or remote Write named them",
                        link.id
                    ));
                }
                if closed {
                    drop(buffer);
                } else {
                    // The device may still own the bytes.
                    std::mem::forget(buffer);
                }
            }
            if !closed {
                // Callbacks may still come: their contexts must outlive them.
                for cq in &side.cqs {
                    std::mem::forget(Arc::clone(&cq.notes));
                }
                std::mem::forget(Arc::clone(&side.srq_notes));
                std::mem::forget(Arc::clone(&side.disconnects));
            }
        }
        // The link's hold on its pools goes with it; a pool no link uses
        // may close now, or stay for later links.
        drop(link);
        self.close_idle_pools(false);
    }
}
