//! Closing: a link's objects closed in a random order, and the checks that
//! every close completes and every request has its entry.

use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use softndk::abi::{NdkConnector, NdkObjectHeader, STATUS_PENDING, STATUS_SUCCESS};

use super::WAIT;
use super::fuzzer::Fuzzer;
use super::objects::{Link, Post, table};
use super::signal::{Signal, keep, on_event, on_status};

impl Fuzzer<'_> {
    /// Starts the close of `object` through `close`; the signal to wait on
    /// (`None`: closed at once).
    pub(super) fn start_close(
        &mut self,
        what: &'static str,
        object: *mut NdkObjectHeader,
        close: softndk::abi::NdkFnCloseObject,
    ) -> Option<(&'static str, Arc<Signal>)> {
        let closed = Signal::new();
        // SAFETY: a live object and its own close slot, called once.
        let status = unsafe { close(object, Some(on_event), closed.ctx()) };
        self.call(what, status);
        match status {
            STATUS_SUCCESS => {
                self.out.closed += 1;
                None
            }
            STATUS_PENDING => Some((what, closed)),
            other => {
                self.finding(&format!(
                    "{what} returned {:#010x} (L18: a close never fails)",
                    other.cast_unsigned()
                ));
                None
            }
        }
    }

    pub(super) fn wait_closes(&mut self, pending: Vec<(&'static str, Arc<Signal>)>) -> bool {
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
                "fuzz t{}   closing link {} noise {}",
                self.thread, link.id, link.noise
            );
        }
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
                let qp = std::mem::replace(&mut side.qp, ptr::null_mut());
                if !qp.is_null() {
                    pending.extend(self.start_close(
                        "NdkCloseQp",
                        qp.cast(),
                        table(qp).ndk_close_qp,
                    ));
                }
            } else {
                let connector = std::mem::replace(&mut side.connector, ptr::null_mut());
                if !connector.is_null() {
                    pending.extend(self.start_close(
                        "NdkCloseConnector",
                        connector.cast(),
                        table(connector).ndk_close_connector,
                    ));
                }
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
            let extra: *mut NdkConnector = ptr::with_exposed_provenance_mut(extra);
            pending.extend(self.start_close(
                "NdkCloseConnector",
                extra.cast(),
                table(extra).ndk_close_connector,
            ));
        }
        let listener = std::mem::replace(&mut link.listener, ptr::null_mut());
        if !listener.is_null() {
            pending.extend(self.start_close(
                "NdkCloseListener",
                listener.cast(),
                table(listener).ndk_close_listener,
            ));
        }
        let closed = self.wait_closes(pending);
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
        // L21: with the QPs closed, every request has its entry.
        for i in 0..2 {
            if link.sides[i].cq.is_null() {
                continue;
            }
            self.drain(&mut link, i);
            let left: Vec<Post> = link.sides[i]
                .outstanding
                .drain()
                .map(|(_, p)| p)
                .filter(|p| !p.silent)
                .collect();
            if closed
                && let Some(first) = left.first()
                && !self.cq_failed(&link.sides[i])
            {
                self.finding(&format!(
                    "{} posted request(s) never completed though the QP's close did (P6, L21); the first: {} at call {}",
                    left.len(),
                    first.what,
                    first.call
                ));
            }
        }
        // The rest, in a random order.
        let mut order = [0_usize, 1, 2, 3, 4, 5, 6, 7];
        self.shuffle(&mut order);
        let mut pending = Vec::new();
        for what in order {
            let side = &mut link.sides[what / 4];
            match what % 4 {
                0 => {
                    let mw = std::mem::replace(&mut side.mw, ptr::null_mut());
                    if !mw.is_null() {
                        pending.extend(self.start_close(
                            "NdkCloseMw",
                            mw.cast(),
                            table(mw).ndk_close_mw,
                        ));
                    }
                }
                1 => {
                    let mr = std::mem::replace(&mut side.mr, ptr::null_mut());
                    if !mr.is_null() {
                        if side.registered && self.rng.chance(50) {
                            let done = Signal::new();
                            // SAFETY: a live, registered MR.
                            let status = unsafe {
                                (table(mr).ndk_deregister_mr)(mr, Some(on_status), done.ctx())
                            };
                            self.call("NdkDeregisterMr", status);
                            let _ = self.finish("NdkDeregisterMr", status, &done);
                        }
                        pending.extend(self.start_close(
                            "NdkCloseMr",
                            mr.cast(),
                            table(mr).ndk_close_mr,
                        ));
                    }
                }
                2 => {
                    let cq = std::mem::replace(&mut side.cq, ptr::null_mut());
                    if !cq.is_null() {
                        pending.extend(self.start_close(
                            "NdkCloseCq",
                            cq.cast(),
                            table(cq).ndk_close_cq,
                        ));
                    }
                }
                _ => {
                    let pd = std::mem::replace(&mut side.pd, ptr::null_mut());
                    if !pd.is_null() {
                        pending.extend(self.start_close(
                            "NdkClosePd",
                            pd.cast(),
                            table(pd).ndk_close_pd,
                        ));
                    }
                }
            }
        }
        let closed = self.wait_closes(pending) && closed;
        for side in &mut link.sides {
            self.out.notifications += side.notes.count.load(Ordering::SeqCst);
            if closed {
                self.graveyard.push_back(Arc::clone(&side.notes));
                side.notes.closed.store(true, Ordering::SeqCst);
            }
            if let Some(buffer) = side.buffer.take() {
                if !buffer.guards_intact() {
                    self.finding(
                        "bytes around a registered buffer were written: a bounds check missed",
                    );
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
                std::mem::forget(Arc::clone(&side.notes));
                std::mem::forget(Arc::clone(&side.disconnects));
            }
        }
    }
}
