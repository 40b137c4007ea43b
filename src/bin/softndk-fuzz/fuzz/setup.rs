//! Set-up: a link's objects (CQ, PD, QP, MR, MW on each side) and its
//! connection through a listener.

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use softndk::abi::{
    MrFlags, NdkAdapter, NdkAdapterInfo, NdkConnector, NdkCq, NdkListener, NdkPd, NdkQp, NdkSrq,
    NtStatus, PAGE_SIZE, STATUS_BUFFER_TOO_SMALL, STATUS_CONNECTION_ABORTED,
    STATUS_CONNECTION_REFUSED, STATUS_PENDING, STATUS_SUCCESS, SockAddr, SockAddrIn,
};

use super::fuzzer::{Fuzzer, SetupFailed};
use super::objects::{
    Adapter, Buffer, Cq, Fast, INITIATOR_CQ, LANDINGS, Lam, Link, RECEIVE_QUEUE, SOCKADDR_IN_LEN,
    SOURCE, Side, Zones, sockaddr, table,
};
use super::pool::Shared;
use super::signal::{Signal, keep, on_connect, on_create, on_event, on_status};
use super::{OracleCheck, WAIT};

/// A turned-down request's objects: the active connector, its QP, the
/// passive connector, the passive side's QP (null where none was made).
type Turned = (*mut NdkConnector, *mut NdkQp, *mut NdkConnector, *mut NdkQp);

/// Where a QP takes its receives from.
#[derive(Clone, Copy)]
enum Receives {
    /// Its own receive queue of `depth` receives of up to `sge` SGEs.
    Own { depth: u32, sge: u32 },
    /// The SRQ (Q2).
    Srq(*mut NdkSrq),
}

/// The percentage of sides with a fast-register MR and a LAM
/// ([`Fast`]).
const FAST_SIDES: u64 = 50;

/// The percentage of links whose active side connects from the thread's
/// shared endpoint on its adapter (N10, N11).
const SHARED_ENDPOINT: u64 = 25;

/// The percentage of links whose two sides are on one adapter that share
/// one PD and one SRQ between their QPs, their adapter's pool
/// ([`Link::shared`]).
const SHARED_SRQ: u64 = 30;

/// The percentage of the other sides of links that are not strict that
/// take their receives from the thread's pool on their adapter
/// ([`pool`](super::pool)).
const POOLED_SIDES: u64 = 20;

/// The percentage of links whose listener first turns down a request of
/// its own ([`Fuzzer::refused`]).
const REFUSED: u64 = 10;

/// Where a side's CQs come from on a link whose two QPs share them.
enum Share {
    /// The side makes them, with room for the other side's queues too.
    Lend,
    /// The other side's.
    Borrow([Cq; 2]),
}

/// The percentage of the links whose two sides are on one adapter and
/// take no receives from a pool whose two QPs share their CQs
/// ([`Link::shared_cq`]).
const SHARED_CQS: u64 = 30;

/// The percentage of sides whose QP has a receive CQ apart from its
/// initiator CQ (P1).
const RECEIVE_CQS: u64 = 30;

/// The percentage of sides whose QP takes its receives from an SRQ of
/// the receive queue's depth (Q2, Q3).
const SRQ_SIDES: u64 = 25;

impl Fuzzer<'_> {
    /// A set-up step's status: `Ok` on success, else the failure (a finding
    /// unless faults are injected).
    pub(super) fn expect(&mut self, what: &str, status: NtStatus) -> Result<(), SetupFailed> {
        if status == STATUS_SUCCESS {
            Ok(())
        } else {
            Err(SetupFailed(format!(
                "{what} failed with {:#010x}",
                status.cast_unsigned()
            )))
        }
    }

    /// A call that starts a connection step, counted: what it returned, a
    /// failure other than pending judged.
    pub(super) fn started(
        &mut self,
        what: &'static str,
        status: NtStatus,
    ) -> Result<NtStatus, SetupFailed> {
        self.call(what, status);
        if status != STATUS_PENDING {
            self.expect(what, status)?;
        }
        Ok(status)
    }

    /// A connector on `adapter` and a QP of one receive and one request on
    /// `side`'s PD and CQ, for a connection attempt beside the link's own;
    /// each goes into its slot as soon as it is made, for the caller to
    /// close.
    pub(super) fn spare_connector(
        &mut self,
        adapter: *mut NdkAdapter,
        side: &Side,
        (connector, qp): (&mut *mut NdkConnector, &mut *mut NdkQp),
    ) -> Result<(), SetupFailed> {
        // SAFETY: a live adapter and an out-pointer; `create` keeps the
        // completion's context until it came.
        *connector = self.create("NdkCreateConnector", |done, out| unsafe {
            (table(adapter).ndk_create_connector)(adapter, Some(on_create), done, out)
        })?;
        let cq = side.cqs[INITIATOR_CQ].ptr;
        *qp = self.create_qp(
            (side.pd, (cq, cq)),
            0,
            Receives::Own { depth: 1, sge: 1 },
            (1, 1, 0),
        )?;
        Ok(())
    }

    /// A SOCKADDR_IN that `read` writes (a GetLocalAddress or
    /// GetPeerAddress slot, given the buffer and its length), counted and
    /// judged: the address and the length written.
    pub(super) fn address(
        &mut self,
        what: &'static str,
        read: impl FnOnce(*mut SockAddr, *mut u32) -> NtStatus,
    ) -> Result<(SockAddrIn, u32), SetupFailed> {
        let mut address = SockAddrIn::default();
        let mut len = SOCKADDR_IN_LEN;
        let status = read((&raw mut address).cast::<SockAddr>(), &raw mut len);
        self.call(what, status);
        self.expect(what, status)?;
        Ok((address, len))
    }

    /// A set-up step that may pend, already counted with [`Fuzzer::call`]:
    /// `returned`, or the status its completion on `signal` brought, as
    /// [`Fuzzer::expect`] judges it; on success, the object the completion
    /// carried (0 when none).
    fn settle(
        &mut self,
        what: &str,
        returned: NtStatus,
        signal: &Arc<Signal>,
    ) -> Result<usize, SetupFailed> {
        let (status, object) = self
            .finish(what, returned, signal)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect(what, status)?;
        Ok(object)
    }

    /// A set-up call that may pend: counted, then settled.
    fn step_up(
        &mut self,
        what: &'static str,
        returned: NtStatus,
        signal: &Arc<Signal>,
    ) -> Result<(), SetupFailed> {
        self.call(what, returned);
        self.settle(what, returned, signal).map(drop)
    }

    /// A create: `create` makes the call, given the create completion's
    /// context and the out-pointer (it passes `on_create` as the
    /// completion). L5: a create may pend and hand its object to the
    /// completion instead of the out-pointer. The object, or why it failed.
    pub(super) fn create<T>(
        &mut self,
        what: &'static str,
        create: impl FnOnce(*mut c_void, *mut *mut T) -> NtStatus,
    ) -> Result<*mut T, SetupFailed> {
        let created = Signal::new();
        let mut out = ptr::null_mut();
        let status = create(created.ctx(), &raw mut out);
        self.call(what, status);
        let object = self.settle(what, status, &created)?;
        Ok(if object == 0 {
            out
        } else {
            ptr::with_exposed_provenance_mut(object)
        })
    }

    /// Creates a side's CQs (unless it borrows the other side's, `cqs`),
    /// PD and SRQ (unless it takes them from `pool`),
    /// QP, MR (registered) and MW; on a `strict` link its buffer has
    /// [`Zones`] (four pages more, for the slots).
    fn open_side(
        &mut self,
        side: &mut Side,
        strict: bool,
        (pool, cqs): (Option<Shared>, Option<Share>),
    ) -> Result<(), SetupFailed> {
        let adapter = self.adapters[side.adapter].ptr();
        let d = table(adapter);
        let mut receive_depth = self.rng.range(1, 16);
        let mut receive_depth_shared = 0;
        let initiator_depth = self.rng.range(1, 16);
        side.receive_sge = self.rng.range(1, 4);
        side.initiator_sge = self.rng.range(1, 4);
        side.inline = if self.rng.chance(50) { 0 } else { 64 };
        if let Some(pool) = &pool {
            // The CQ has room for every receive of the SRQ too, and the
            // receives posted through this side fit the SRQ.
            let pool = pool.borrow();
            (receive_depth, side.receive_sge) = (pool.side.depths.0, pool.side.receive_sge);
        }
        // Room for every entry the queues can have outstanding, so that no
        // CQ overflows; on some sides the receive queue's entries go to a
        // CQ of their own (P1).
        side.depths = (receive_depth, initiator_depth);
        match cqs {
            // The other side's: made with room for this side's queues too.
            Some(Share::Borrow(cqs)) => {
                side.cqs = cqs;
                side.borrowed_cqs = true;
            }
            share => {
                // Room for the other side's queues (at most 16 each).
                let other = if share.is_some() { 16 } else { 0 };
                let pool_cq = pool.as_ref().and_then(|pool| {
                    let pool = pool.borrow();
                    pool.has_cq().then(|| pool.side.cqs[RECEIVE_QUEUE].share())
                });
                if let Some(cq) = pool_cq {
                    // The pool's: the receive CQ of the QPs of all its
                    // sides, whichever link they belong to.
                    side.cqs[RECEIVE_QUEUE] = cq;
                    side.pool_cq = true;
                    self.out.pool_cq_sides += 1;
                } else if self.rng.chance(RECEIVE_CQS) {
                    let depth = receive_depth + other + self.rng.range(0, 4);
                    self.open_cq(side, RECEIVE_QUEUE, depth)?;
                    self.out.receive_cqs += 1;
                } else {
                    receive_depth_shared = receive_depth + other;
                }
                let depth = receive_depth_shared + initiator_depth + other + self.rng.range(0, 8);
                self.open_cq(side, INITIATOR_CQ, depth)?;
            }
        }
        if let Some(pool) = pool {
            (side.pd, side.srq) = (pool.borrow().side.pd, pool.borrow().side.srq);
            side.pool = Some(pool);
            self.out.srq_sides += 1;
            self.out.pooled_sides += 1;
        } else {
            // SAFETY: as above.
            side.pd = self.create("NdkCreatePd", |done, out| unsafe {
                (d.ndk_create_pd)(adapter, Some(on_create), done, out)
            })?;
        }

        let pd = side.pd;
        let cqs = (
            side.cqs[side.cq_for(RECEIVE_QUEUE)].ptr,
            side.cqs[INITIATOR_CQ].ptr,
        );
        let pdd = table(pd);
        side.qp_ctx = self.context();
        let (receive_sge, initiator_sge, inline) =
            (side.receive_sge, side.initiator_sge, side.inline);
        if side.pool.is_none() && self.rng.chance(SRQ_SIDES) {
            self.open_srq(side, receive_depth, receive_sge)?;
            self.out.srq_sides += 1;
        }
        let receives = if side.srq.is_null() {
            Receives::Own {
                depth: receive_depth,
                sge: receive_sge,
            }
        } else {
            Receives::Srq(side.srq)
        };
        side.qp = self.create_qp(
            (pd, cqs),
            side.qp_ctx,
            receives,
            (initiator_depth, initiator_sge, inline),
        )?;
        if side.pool_cq
            && let Some(pool) = &side.pool
        {
            pool.borrow_mut().qps.insert(side.qp_ctx, self.at_link);
        }
        let pages = usize::try_from(self.rng.range(1, 3)).unwrap_or(1) + 4 * usize::from(strict);
        let len = pages * PAGE_SIZE;
        let mut buffer = Buffer::new(len);
        if strict {
            // Written before the buffer is registered: nothing else ever
            // writes the sources.
            let source: Vec<u8> = (0..SOURCE).map(|_| self.rng.next() as u8).collect();
            buffer.storage[buffer.start..][..source.len()].copy_from_slice(&source);
            side.zones = Some(Zones {
                source,
                receiving: vec![false; receive_depth as usize],
                reading: vec![false; initiator_depth as usize],
                landing: vec![false; LANDINGS],
            });
        }
        side.buffer = Some(buffer);
        self.register(
            side,
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE,
        )?;

        // SAFETY: as for the creates above.
        side.mw = self.create("NdkCreateMw", |done, out| unsafe {
            (pdd.ndk_create_mw)(pd, Some(on_create), done, out)
        })?;
        if self.rng.chance(FAST_SIDES) {
            self.open_fast(side, pd)?;
        }
        Ok(())
    }

    /// Creates side `side`'s CQ `c` ([`Side::cqs`]) of `depth` entries,
    /// its notifications on the CQ's signal.
    pub(super) fn open_cq(
        &mut self,
        side: &mut Side,
        c: usize,
        depth: u32,
    ) -> Result<(), SetupFailed> {
        let adapter = self.adapters[side.adapter].ptr();
        let cq = &mut side.cqs[c];
        cq.depth = depth;
        let notes = cq.notes.ctx();
        // SAFETY: a live adapter and an out-pointer; `create` keeps the
        // completion's context until it came, and the CQ's notification
        // context lives as long as the CQ.
        cq.ptr = self.create("NdkCreateCq", |done, out| unsafe {
            (table(adapter).ndk_create_cq)(
                adapter,
                depth,
                Some(on_status),
                notes,
                ptr::null(),
                Some(on_create),
                done,
                out,
            )
        })?;
        Ok(())
    }

    /// Creates an SRQ of `depth` receives of up to `sge` SGEs in `side`'s
    /// PD, with a threshold (Q4; 0: unarmed) at or below the depth, so that
    /// the notification comes once the queue runs low.
    pub(super) fn open_srq(
        &mut self,
        side: &mut Side,
        depth: u32,
        sge: u32,
    ) -> Result<(), SetupFailed> {
        let threshold = self.rng.range(0, depth);
        let (pd, notes) = (side.pd, side.srq_notes.ctx());
        // SAFETY: a live PD and an out-pointer; `create` keeps the
        // completion's context until it came; the notification's context
        // lives as long as the SRQ.
        side.srq = self.create("NdkCreateSrq", |done, out| unsafe {
            (table(pd).ndk_create_srq)(
                pd,
                depth,
                sge,
                threshold,
                Some(on_status),
                notes,
                ptr::null(),
                Some(on_create),
                done,
                out,
            )
        })?;
        Ok(())
    }

    /// Creates an MR in `side`'s PD and registers the side's buffer with
    /// `flags` (M1, M2); reads its tokens (M35).
    pub(super) fn register(&mut self, side: &mut Side, flags: MrFlags) -> Result<(), SetupFailed> {
        let pd = side.pd;
        // SAFETY: a live PD and an out-pointer; `create` keeps the
        // completion's context until it came.
        side.mr = self.create("NdkCreateMr", |done, out| unsafe {
            (table(pd).ndk_create_mr)(pd, 0, Some(on_create), done, out)
        })?;
        let Some(buffer) = &mut side.buffer else {
            return Ok(());
        };
        let (mdl, len) = (&raw mut *buffer.mdl, buffer.len);
        let done = Signal::new();
        // SAFETY: a live MR; the MDL describes `len` bytes of the side's
        // buffer, which is kept until the MR's close has completed.
        let status = unsafe {
            (table(side.mr).ndk_register_mr)(
                side.mr,
                mdl,
                len,
                flags.bits(),
                Some(on_status),
                done.ctx(),
            )
        };
        self.step_up("NdkRegisterMr", status, &done)?;
        side.registered = true;
        // SAFETY: a live, registered MR.
        side.local_token = unsafe { (table(side.mr).ndk_get_local_token_from_mr)(side.mr) };
        self.call("NdkGetLocalTokenFromMr", STATUS_SUCCESS);
        // SAFETY: as above.
        side.remote_token = unsafe { (table(side.mr).ndk_get_remote_token_from_mr)(side.mr) };
        self.call("NdkGetRemoteTokenFromMr", STATUS_SUCCESS);
        Ok(())
    }

    /// Builds a LAM over the side's buffer (M28, M29, M31) and a
    /// fast-register MR of `pd` initialized for 1 to 16 pages (M13, M14),
    /// with or without remote access (M15); reads its tokens (M12, M35)
    /// and the PD's privileged token (M27).
    fn open_fast(&mut self, side: &mut Side, pd: *mut NdkPd) -> Result<(), SetupFailed> {
        let adapter = self.adapters[side.adapter].ptr();
        let Some(buffer) = &mut side.buffer else {
            return Ok(());
        };
        let mdl = &raw mut *buffer.mdl;
        let (len, pages) = (buffer.len, buffer.len / PAGE_SIZE);
        let needed = u32::try_from(16 + 8 * pages).unwrap_or(u32::MAX);
        // `*pLAMSize` and `*pFBO`, on the heap: a BuildLam that pended and
        // never completed (a finding) may still write them.
        let mut out = Box::new([0_u32, u32::MAX]);
        let (lam_size, fbo) = (&raw mut out[0], &raw mut out[1]);
        // SAFETY: a live adapter; the MDL describes the side's buffer, which
        // stays until the LAM is released; no LAM to write, no completion.
        let status = unsafe {
            (table(adapter).ndk_build_lam)(
                adapter,
                mdl,
                len,
                None,
                ptr::null_mut(),
                ptr::null_mut(),
                lam_size,
                fbo,
            )
        };
        self.call("NdkBuildLam", status);
        if status != STATUS_BUFFER_TOO_SMALL || out[0] != needed {
            return Err(SetupFailed(format!(
                "NdkBuildLam with no room answered {:#010x} and a size of {}, not STATUS_BUFFER_TOO_SMALL and {needed} (M29)",
                status.cast_unsigned(),
                out[0]
            )));
        }
        let mut lam = Lam::new(needed);
        let completion = self.rng.chance(50);
        let done = Signal::new();
        // SAFETY: as above; `lam` has room for `needed` bytes and outlives
        // its release; `done` is kept by `finish` until the completion came.
        let status = unsafe {
            (table(adapter).ndk_build_lam)(
                adapter,
                mdl,
                len,
                completion.then_some(on_status),
                done.ctx(),
                lam.ptr(),
                lam_size,
                fbo,
            )
        };
        self.call("NdkBuildLam", status);
        if status == STATUS_PENDING && !completion {
            std::mem::forget((lam, out));
            return Err(SetupFailed(
                "NdkBuildLam without a completion returned STATUS_PENDING (M31)".into(),
            ));
        }
        if let Err(failed) = self.settle("NdkBuildLam", status, &done) {
            if status == STATUS_PENDING {
                // It may still complete, and write.
                std::mem::forget((lam, out));
            }
            return Err(failed);
        }
        let found = lam.pages();
        let aligned = found.iter().all(|&page| page % PAGE_SIZE as u64 == 0);
        let distinct = found.iter().collect::<std::collections::HashSet<_>>().len() == found.len();
        let well_formed = lam.count() == pages && out[1] == 0 && aligned && distinct;
        side.fast = Some(Fast {
            mr: ptr::null_mut(),
            lam: Some(lam),
            pages: 0,
            remote_access: false,
            local_token: 0,
            remote_token: 0,
            privileged: 0,
            mapped: false,
            retired: false,
            registering: None,
            region: None,
        });
        if !well_formed {
            return Err(SetupFailed(format!(
                "NdkBuildLam over {pages} page-aligned pages gave {} pages, an FBO of {}, pages aligned {aligned}, distinct {distinct} (M28)",
                side.fast
                    .as_ref()
                    .and_then(|f| f.lam.as_ref())
                    .map_or(0, Lam::count),
                out[1]
            )));
        }
        let pdd = table(pd);
        // SAFETY: a live PD and an out-pointer; `create` keeps the
        // completion's context until it came.
        let mr = self.create("NdkCreateMr", |done, out| unsafe {
            (pdd.ndk_create_mr)(pd, 1, Some(on_create), done, out)
        })?;
        let count = self.rng.range(1, 16);
        let remote_access = self.rng.chance(70);
        if let Some(fast) = &mut side.fast {
            (fast.mr, fast.pages, fast.remote_access) = (mr, count, remote_access);
        }
        let done = Signal::new();
        // SAFETY: a live fast-register MR; `done` is kept until the request
        // completed.
        let status = unsafe {
            (table(mr).ndk_initialize_fast_register_mr)(
                mr,
                count,
                u8::from(remote_access),
                Some(on_status),
                done.ctx(),
            )
        };
        self.step_up("NdkInitializeFastRegisterMr", status, &done)?;
        // SAFETY: a live MR, initialized (M12).
        let local = unsafe { (table(mr).ndk_get_local_token_from_mr)(mr) };
        self.call("NdkGetLocalTokenFromMr", STATUS_SUCCESS);
        // SAFETY: as above.
        let remote = unsafe { (table(mr).ndk_get_remote_token_from_mr)(mr) };
        self.call("NdkGetRemoteTokenFromMr", STATUS_SUCCESS);
        let mut privileged = 0;
        // SAFETY: a live PD and a writable token.
        unsafe { (pdd.ndk_get_privileged_memory_region_token)(pd, &raw mut privileged) };
        self.call("NdkGetPrivilegedMemoryRegionToken", STATUS_SUCCESS);
        if let Some(fast) = &mut side.fast {
            (fast.local_token, fast.remote_token, fast.privileged) = (local, remote, privileged);
        }
        Ok(())
    }

    /// A QP of `pd` whose entries go to `cq` (both queues), with QP
    /// context `context`, its receives from `receives`, and `initiator`'s
    /// (depth, SGEs, inline size).
    fn create_qp(
        &mut self,
        (pd, (receive_cq, initiator_cq)): (*mut NdkPd, (*mut NdkCq, *mut NdkCq)),
        context: usize,
        receives: Receives,
        (depth, sge, inline): (u32, u32, u32),
    ) -> Result<*mut NdkQp, SetupFailed> {
        let pdd = table(pd);
        let context = ptr::without_provenance_mut(context);
        match receives {
            // SAFETY: a live PD, CQ and SRQ and an out-pointer; `create`
            // keeps the completion's context until it came. The SRQ stays
            // open until the QP's close completed.
            Receives::Srq(srq) => self.create("NdkCreateQpWithSrq", |done, out| unsafe {
                (pdd.ndk_create_qp_with_srq)(
                    pd,
                    receive_cq,
                    initiator_cq,
                    srq,
                    context,
                    depth,
                    sge,
                    inline,
                    Some(on_create),
                    done,
                    out,
                )
            }),
            Receives::Own {
                depth: receive_depth,
                sge: receive_sge,
            } => {
                // SAFETY: as above, without an SRQ.
                self.create("NdkCreateQp", |done, out| unsafe {
                    (pdd.ndk_create_qp)(
                        pd,
                        receive_cq,
                        initiator_cq,
                        context,
                        receive_depth,
                        depth,
                        receive_sge,
                        sge,
                        inline,
                        Some(on_create),
                        done,
                        out,
                    )
                })
            }
        }
    }

    /// Connects side 0 (connector, `NdkConnect`) to side 1 (listener,
    /// `NdkAccept`); the listener is closed once the connection is up.
    pub(super) fn connect(&mut self, link: &mut Link) -> Result<(), SetupFailed> {
        let [a, b] = &mut link.sides;
        let a_adapter = self.adapters[a.adapter];
        let b_adapter = self.adapters[b.adapter];

        // SAFETY: a live adapter and an out-pointer; `create` keeps the
        // completion's context until it came.
        a.connector = self.create("NdkCreateConnector", |done, out| unsafe {
            (table(a_adapter.ptr()).ndk_create_connector)(
                a_adapter.ptr(),
                Some(on_create),
                done,
                out,
            )
        })?;

        let incoming = Signal::new();
        let incoming_ctx = incoming.ctx();
        // SAFETY: as above; `incoming` outlives the listener (it is kept
        // until the listener's close completed).
        let listener: *mut NdkListener = self.create("NdkCreateListener", |done, out| unsafe {
            (table(b_adapter.ptr()).ndk_create_listener)(
                b_adapter.ptr(),
                Some(on_connect),
                incoming_ctx,
                Some(on_create),
                done,
                out,
            )
        })?;
        // The listener's close stays pending until the connector its
        // connect event brought is closed (L24): it closes with the link.
        link.listener = listener;
        link.incoming = Arc::clone(&incoming);
        link.read_limit = self.rng.range(0, 16);
        let [a, b] = &mut link.sides;
        self.listen_and_connect(a_adapter, listener, &incoming, (a, b), link.read_limit)
    }

    fn listen_and_connect(
        &mut self,
        a_adapter: Adapter,
        listener: *mut NdkListener,
        incoming: &Arc<Signal>,
        (a, b): (&mut Side, &mut Side),
        read_limit: u32,
    ) -> Result<(), SetupFailed> {
        let b_ip = self.adapters[b.adapter].ip;
        let ld = table(listener);
        let address = sockaddr(b_ip, 0);
        let done = Signal::new();
        // SAFETY: a live listener; the address is valid for the call.
        let status = unsafe {
            (ld.ndk_listen)(
                listener,
                (&raw const address).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                Some(on_status),
                done.ctx(),
            )
        };
        self.step_up("NdkListen", status, &done)?;
        // SAFETY: a live listener; `address` gives a SOCKADDR_IN-sized
        // buffer and its length.
        let (bound, _) = self.address("NdkGetListenerLocalAddress", |at, len| unsafe {
            (ld.ndk_get_local_address)(listener, at, len)
        })?;
        let port = u16::from_be(bound.sin_port);

        let ends = (sockaddr(a_adapter.ip, 0), sockaddr(b_ip, port));
        if self.rng.chance(REFUSED) {
            self.refused(a_adapter, (a, b), incoming, ends, read_limit)?;
        }
        let connected = Signal::new();
        // Now and then from the thread's shared endpoint on A's adapter,
        // which other links' connections go out from too (N10, N11).
        let status = if self.rng.chance(SHARED_ENDPOINT) {
            let (id, endpoint, _) = self.endpoint_on(a.adapter)?;
            let status = self.start_connect_from(
                (a.connector, a.qp),
                endpoint,
                ends.1,
                read_limit,
                &connected,
            )?;
            (a.endpoint, a.dst) = (Some((id, false)), ends.1);
            self.endpoint_tied(id, false);
            status
        } else {
            self.start_connect(a.connector, a.qp, ends, read_limit, &[], &connected)?
        };
        b.connector = self.connect_event(incoming, status, &connected)?;
        let accepted = Signal::new();
        let accept = self.start_accept(
            (b.connector, b.qp),
            read_limit,
            &[],
            (&b.disconnects, &accepted),
        )?;
        // From here a failure leaves the accept pending: its completion
        // comes when the connector closes, so its context must outlive that.
        self.settle("NdkConnect", status, &connected)
            .inspect_err(|_| keep(&accepted))?;
        let completed = Signal::new();
        // SAFETY: live objects; the signals are kept as above.
        let status = unsafe {
            (table(a.connector).ndk_complete_connect)(
                a.connector,
                Some(on_event),
                a.disconnects.ctx(),
                Some(on_status),
                completed.ctx(),
            )
        };
        self.step_up("NdkCompleteConnect", status, &completed)
            .inspect_err(|_| keep(&accepted))?;
        self.settle("NdkAccept", accept, &accepted).map(drop)
    }

    /// `NdkConnect` of `connector` with `qp` from `ends.0` to `ends.1`,
    /// with `data` as its private data; what it returned (a failure other
    /// than pending already judged), its completion coming on `connected`.
    fn start_connect(
        &mut self,
        connector: *mut NdkConnector,
        qp: *mut NdkQp,
        (src, dst): (SockAddrIn, SockAddrIn),
        read_limit: u32,
        data: &[u8],
        connected: &Arc<Signal>,
    ) -> Result<NtStatus, SetupFailed> {
        // SAFETY: live objects; addresses and private data valid for the
        // call; `connected` kept until the completion.
        let status = unsafe {
            (table(connector).ndk_connect)(
                connector,
                qp,
                (&raw const src).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                (&raw const dst).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                read_limit,
                read_limit,
                data.as_ptr().cast(),
                data.len() as u32,
                Some(on_status),
                connected.ctx(),
            )
        };
        self.started("NdkConnect", status)
    }

    /// `NdkAccept` of the passive `connector` with `qp` and `data` as its
    /// private data; what it returned (a failure other than pending already
    /// judged). Its disconnect indications come on `signals.0`, its
    /// completion on `signals.1`: the caller keeps both as long as the
    /// provider may call them.
    fn start_accept(
        &mut self,
        (connector, qp): (*mut NdkConnector, *mut NdkQp),
        read_limit: u32,
        data: &[u8],
        (disconnects, accepted): (&Arc<Signal>, &Arc<Signal>),
    ) -> Result<NtStatus, SetupFailed> {
        // SAFETY: a live connector and QP; the private data is valid for the
        // call; the caller keeps both signals (see above).
        let status = unsafe {
            (table(connector).ndk_accept)(
                connector,
                qp,
                read_limit,
                read_limit,
                data.as_ptr().cast(),
                data.len() as u32,
                Some(on_event),
                disconnects.ctx(),
                Some(on_status),
                accepted.ctx(),
            )
        };
        self.started("NdkAccept", status)
    }

    /// The connector the listener's connect event brought for a connect
    /// that returned `status`, unless the connect fails first (an injected
    /// fault): then its completion explains the missing event at once.
    fn connect_event(
        &mut self,
        incoming: &Arc<Signal>,
        status: NtStatus,
        connected: &Arc<Signal>,
    ) -> Result<*mut NdkConnector, SetupFailed> {
        let failed = |connected: &Signal| {
            connected
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .first()
                .is_some_and(|&(status, _)| status != STATUS_SUCCESS)
        };
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if status == STATUS_PENDING && failed(connected) {
                break;
            }
            if let Some((_, connector)) = incoming.wait_up_to(Duration::from_millis(10)) {
                return Ok(ptr::with_exposed_provenance_mut(connector));
            }
        }
        keep(incoming);
        // The connect's own completion explains it, or it is a hang.
        if let Some((status, _)) = self.finish("NdkConnect", status, connected) {
            self.expect("NdkConnect", status)?;
        }
        self.finding(&format!(
            "NdkConnect: no connect event at the listener within {WAIT:?}"
        ));
        Err(SetupFailed("no connect event".into()))
    }

    /// A request turned down before the link's own connect (N16), from a
    /// connector and a QP of its own on side `a`'s adapter and PD, with
    /// private data that the passive side reads back (N18: the bytes, and
    /// their length as RDS). Half the time the passive side rejects it with
    /// data of its own (synchronous, `STATUS_SUCCESS`), and the connect then
    /// completes `STATUS_CONNECTION_REFUSED`; otherwise it accepts and the
    /// active side abandons the connection ([`Fuzzer::abandon`]). Its
    /// objects are closed before the link's connect.
    fn refused(
        &mut self,
        a_adapter: Adapter,
        sides: (&Side, &Side),
        incoming: &Arc<Signal>,
        ends: (SockAddrIn, SockAddrIn),
        read_limit: u32,
    ) -> Result<(), SetupFailed> {
        let mut objects = (
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
        );
        let result = self.refuse(a_adapter, sides, incoming, (ends, read_limit), &mut objects);
        let (mut active, mut qp, mut passive, mut passive_qp) = objects;
        let mut pending = Vec::new();
        self.close(&mut passive, &mut pending);
        self.close(&mut active, &mut pending);
        self.close(&mut qp, &mut pending);
        self.close(&mut passive_qp, &mut pending);
        if self.wait_closes(pending) {
            result
        } else {
            Err(SetupFailed(
                "a refused request's objects did not close".into(),
            ))
        }
    }

    /// [`Fuzzer::refused`] up to the closes: each object it makes goes
    /// into `objects` (active connector, QP, passive connector) at once.
    fn refuse(
        &mut self,
        a_adapter: Adapter,
        (a, b): (&Side, &Side),
        incoming: &Arc<Signal>,
        (ends, read_limit): ((SockAddrIn, SockAddrIn), u32),
        objects: &mut Turned,
    ) -> Result<(), SetupFailed> {
        let adapter = a_adapter.ptr();
        self.spare_connector(adapter, a, (&mut objects.0, &mut objects.1))?;
        // N17: at most `MaxCallerData` on the connect, `MaxCalleeData` on
        // the reject.
        let mut info = std::mem::MaybeUninit::<NdkAdapterInfo>::zeroed();
        let mut size = size_of::<NdkAdapterInfo>() as u32;
        // SAFETY: a live adapter and a buffer of `size` bytes.
        let queried = unsafe {
            (table(adapter).ndk_query_adapter_info)(adapter, info.as_mut_ptr(), &raw mut size)
        };
        self.call("NdkQueryAdapterInfo", queried);
        self.expect("NdkQueryAdapterInfo", queried)?;
        // SAFETY: zeroed, and filled by the successful call (plain integers).
        let info = unsafe { info.assume_init() };
        let caller = u64::from(info.max_caller_data.min(64));
        let data: Vec<u8> = (0..self.rng.below(caller + 1))
            .map(|_| self.rng.next() as u8)
            .collect();
        let connected = Signal::new();
        let status =
            self.start_connect(objects.0, objects.1, ends, read_limit, &data, &connected)?;
        // From here the connect's completion may come as late as the
        // connector's close: its context must outlive that.
        keep(&connected);
        objects.2 = self.connect_event(incoming, status, &connected)?;
        let passive = objects.2;
        let mut got = [0_u8; 64];
        let mut len = got.len() as u32;
        let (mut ird, mut ord) = (0, 0);
        // SAFETY: a live connector; the buffer holds `len` bytes.
        let read = unsafe {
            (table(passive).ndk_get_connection_data)(
                passive,
                &raw mut ird,
                &raw mut ord,
                got.as_mut_ptr().cast(),
                &raw mut len,
            )
        };
        self.call("NdkGetConnectionData", read);
        self.expect("NdkGetConnectionData", read)?;
        if got.get(..len as usize) != Some(&data[..]) {
            self.finding(&format!(
                "NdkGetConnectionData at the listener gave {len} bytes of private data that are not the {} bytes the connect carried (N18)",
                data.len()
            ));
        }
        let answer: Vec<u8> = (0..self.rng.below(u64::from(info.max_callee_data) + 1))
            .map(|_| self.rng.next() as u8)
            .collect();
        if self.rng.chance(50) {
            return self.abandon(b, objects, (status, &connected), read_limit, &answer);
        }
        // SAFETY: a live connector; the private data is valid for the call.
        let rejected = unsafe {
            (table(passive).ndk_reject)(passive, answer.as_ptr().cast(), answer.len() as u32)
        };
        self.call("NdkReject", rejected);
        self.expect("NdkReject", rejected)?;
        self.ends_with(
            ("NdkConnect turned down by NdkReject", status, &connected),
            STATUS_CONNECTION_REFUSED,
        )
    }

    /// That the request `what`, which returned `returned`, completed on
    /// `signal` with `expected` (N16), else why not.
    fn ends_with(
        &mut self,
        (what, returned, signal): (&str, NtStatus, &Arc<Signal>),
        expected: NtStatus,
    ) -> Result<(), SetupFailed> {
        match self.finish(what, returned, signal) {
            Some((status, _)) if status == expected => Ok(()),
            Some((other, _)) => Err(SetupFailed(format!(
                "{what} completed with {:#010x}, not {:#010x} (N16)",
                other.cast_unsigned(),
                expected.cast_unsigned()
            ))),
            None => Err(SetupFailed(format!("{what} never completed"))),
        }
    }

    /// The other way a request is turned down (N16): the passive side
    /// accepts it with a QP of its own on side `b`'s PD and `answer` as its
    /// private data; once the connect completed, the active side rejects
    /// the connection instead of completing it (`STATUS_SUCCESS`), and the
    /// Accept then completes `STATUS_CONNECTION_ABORTED`.
    fn abandon(
        &mut self,
        b: &Side,
        objects: &mut Turned,
        (status, connected): (NtStatus, &Arc<Signal>),
        read_limit: u32,
        answer: &[u8],
    ) -> Result<(), SetupFailed> {
        let cq = b.cqs[INITIATOR_CQ].ptr;
        objects.3 = self.create_qp(
            (b.pd, (cq, cq)),
            0,
            Receives::Own { depth: 1, sge: 1 },
            (1, 1, 0),
        )?;
        let (active, passive, qp) = (objects.0, objects.2, objects.3);
        // Both may be called as late as the connectors' close.
        let (accepted, disconnects) = (Signal::new(), Signal::new());
        keep(&accepted);
        keep(&disconnects);
        let accept =
            self.start_accept((passive, qp), read_limit, answer, (&disconnects, &accepted))?;
        // The connect completes successfully: the peer accepted (N13).
        self.settle("NdkConnect", status, connected)?;
        // SAFETY: a live connector whose connect completed; no private data.
        let rejected = unsafe { (table(active).ndk_reject)(active, ptr::null(), 0) };
        self.call("NdkReject", rejected);
        self.expect("NdkReject", rejected)?;
        self.ends_with(
            (
                "NdkAccept abandoned by the active side's NdkReject",
                accept,
                &accepted,
            ),
            STATUS_CONNECTION_ABORTED,
        )
    }

    /// Opens a link between two random adapters; `None` when set-up failed
    /// (a finding, unless faults are injected).
    pub(super) fn open_link(&mut self) -> Option<Link> {
        let a = self.rng.index(self.adapters.len());
        let b = self.rng.index(self.adapters.len());
        let noise = if self.rng.chance(60) {
            0
        } else {
            self.rng.below(10) + 1
        };
        let strict = noise == 0
            && (self.config.faults.is_none()
                || self.config.oracle_check == OracleCheck::StrictUnderFaults)
            && self.rng.chance(50);
        // A pool's receives are any of its QPs' to take (Q3): no side of a
        // strict link takes its receives from one.
        let shared = !strict && a == b && self.rng.chance(SHARED_SRQ);
        let pooled = [0, 1].map(|_| shared || (!strict && self.rng.chance(POOLED_SIDES)));
        let shared_cq = a == b && pooled == [false; 2] && self.rng.chance(SHARED_CQS);
        self.at_link = self.out.links + self.out.setup_failed;
        let mut link = Link {
            id: self.at_link,
            disconnected: false,
            strict,
            ended: false,
            read_limit: 0,
            noise,
            sides: [Side::new(a), Side::new(b)],
            listener: ptr::null_mut(),
            incoming: Signal::new(),
        };
        let mut result = Ok(());
        for (i, pooled) in pooled.into_iter().enumerate() {
            let adapter = link.sides[i].adapter;
            let pool = match pooled.then(|| self.pool(adapter)).transpose() {
                Ok(pool) => pool,
                Err(failed) => {
                    result = Err(failed);
                    break;
                }
            };
            let cqs = shared_cq.then(|| match i {
                0 => Share::Lend,
                _ => Share::Borrow(link.sides[0].cqs.each_ref().map(Cq::share)),
            });
            let mut side = std::mem::replace(&mut link.sides[i], Side::new(0));
            result = self.open_side(&mut side, link.strict, (pool, cqs));
            link.sides[i] = side;
            if result.is_err() {
                break;
            }
        }
        self.noise = link.noise;
        if result.is_ok() {
            // Receives before the connection (P8): over iWARP a Send that
            // finds none ends the connection.
            for i in 0..2 {
                for _ in 0..self.rng.below(4) {
                    self.receive(&mut link, i);
                }
            }
            result = self.connect(&mut link);
        }
        if result.is_ok()
            && let Some((id, _)) = link.sides[0].endpoint
        {
            // Connected: the connector's reference is sure now.
            result = self.check_peer_address(&link, id);
            self.endpoint_tied(id, true);
            self.endpoint_released(id, false);
            link.sides[0].endpoint = Some((id, true));
        }
        match result {
            Ok(()) => {
                self.out.links += 1;
                self.out.shared_srqs += u64::from(shared);
                self.out.shared_cqs += u64::from(link.shared_cq());
                self.out.endpoint_links += u64::from(link.sides[0].endpoint.is_some());
                Some(link)
            }
            Err(SetupFailed(text)) => {
                if self.config.faults.is_none() {
                    self.finding(&format!("link set-up: {text}"));
                }
                self.out.setup_failed += 1;
                self.close_link(link);
                None
            }
        }
    }
}
