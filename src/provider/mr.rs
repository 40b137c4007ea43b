//! `NDK_MR` and `NDK_MW` over the RNIC's regions and windows (rules M1–M35,
//! L8, L21).
//!
//! Every MR call completes inline except a DeregisterMr that finds DMA in
//! flight on the region (M11): it returns `STATUS_PENDING` and its request
//! completion runs, through the MR's serializer, when the last use ends. The
//! pending deregistration holds the MR open (L21), and so does DMA in flight
//! at close: the RNIC's close callback releases that hold.

use alloc::boxed::Box;
use core::ffi::c_void;

use super::dispatch::ndk_table;
use super::object::{Event, Holder, Kind, Object};
use super::pd::Pd;
use super::status;
use crate::abi::{
    Boolean, Mdl, MrFlags, NdkFnRequestCompletion, NdkMr, NdkMrDispatch, NdkMw, NdkMwDispatch,
    NtStatus, STATUS_INVALID_PARAMETER, STATUS_PENDING, STATUS_SUCCESS,
};
use crate::kernel::sync::{Arc, SpinLock};
use crate::rnic::Access;
use crate::rnic::memory::SpanList;
use crate::rnic::mr::{self as rmr, Finish, MrError, Progress};

// ----- NDK_MR ------------------------------------------------------------

/// The request completion a pending DeregisterMr owes (L8).
#[derive(Clone, Copy)]
struct Owed {
    callback: Option<NdkFnRequestCompletion>,
    context: usize,
}

/// The provider state of an `NDK_MR`.
pub struct Mr {
    /// The RNIC region.
    pub(super) rnic: Arc<rmr::Mr>,
    /// A DeregisterMr that returned (or is about to return) `STATUS_PENDING`;
    /// taken exactly once, by whoever completes it. While set, the MR holds
    /// itself open (L21).
    dereg: SpinLock<Option<Owed>>,
}

impl Kind for Mr {
    fn begin_close(object: &Object<Self>) {
        // L21: DMA in flight on the region keeps the close pending; the
        // RNIC calls `finish` when the last use ends.
        object.hold();
        let this = object.arc();
        let finish: Finish = Box::new(move || {
            // The close superseded a pending deregistration: complete it
            // first, so the close completion stays the last callback (L22).
            complete_dereg(&this);
            this.release();
        });
        if object.inner.rnic.close(finish) == Progress::Done {
            complete_dereg(object);
            object.release();
        }
    }
}

/// Completes the pending DeregisterMr, if any: its request completion
/// (serialized with the MR's other callbacks, no lock held), then its hold.
fn complete_dereg(object: &Object<Mr>) {
    let owed = object.inner.dereg.lock().take();
    let Some(owed) = owed else {
        return;
    };
    if let Some(callback) = owed.callback {
        object.deliver(Event::Request {
            callback,
            context: owed.context,
            status: STATUS_SUCCESS,
        });
    }
    object.release();
}

/// Takes back a deregistration that did not pend: no callback (L8).
fn withdraw_dereg(object: &Object<Mr>) {
    let owed = object.inner.dereg.lock().take();
    if owed.is_some() {
        object.release();
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static MR_DISPATCH: NdkMrDispatch for Mr (MR) at NdkMr,
        close ndk_close_mr = "NdkCloseMr";
    ndk_register_mr = "NdkRegisterMr" => register(Register { mdl: *mut Mdl, length: usize,
        flags: u32, _completion: Option<NdkFnRequestCompletion>, _context: *mut c_void })
        -> NtStatus;
    ndk_deregister_mr = "NdkDeregisterMr" => deregister(completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void) -> NtStatus;
    ndk_initialize_fast_register_mr = "NdkInitializeFastRegisterMr" => initialize_fast(
        InitializeFast { pages: u32, remote_access: Boolean,
        _completion: Option<NdkFnRequestCompletion>, _context: *mut c_void }) -> NtStatus;
    ndk_get_remote_token_from_mr = "NdkGetRemoteTokenFromMr" => mr_remote_token() -> u32;
    ndk_get_local_token_from_mr = "NdkGetLocalTokenFromMr" => mr_local_token() -> u32;
}

/// `NdkCreateMr`: a region on `pd`, for RegisterMr (`fast` FALSE) or for
/// fast registration (`fast` TRUE), fixed for its life (M1). Inline (L7).
pub(super) fn create_mr(pd: &Object<Pd>, fast: Boolean) -> Result<*mut NdkMr, NtStatus> {
    let rnic = rmr::Mr::new(&pd.inner.rnic, fast != 0).map_err(status::resource)?;
    let inner = Mr {
        rnic,
        dereg: SpinLock::new(None),
    };
    let object = Object::create_under(pd, inner)?;
    Ok(object.as_ptr().cast())
}

/// `NDK_MR_FLAG_*` to the rights they grant (M6, M9): local read always;
/// `ALLOW_REMOTE_WRITE` (0x5) includes local write; READ_SINK is accepted
/// (the adapter reports `RDMA_READ_SINK_NOT_REQUIRED`). `None` for bits no
/// flag defines.
fn mr_access(flags: u32) -> Option<Access> {
    let flags = MrFlags::from_bits(flags)?;
    let remote_write_bit = MrFlags::ALLOW_REMOTE_WRITE.difference(MrFlags::ALLOW_LOCAL_WRITE);
    let mut access = Access::empty();
    if flags.intersects(MrFlags::ALLOW_LOCAL_WRITE) {
        access |= Access::LOCAL_WRITE;
    }
    if flags.intersects(MrFlags::ALLOW_REMOTE_READ) {
        access |= Access::REMOTE_READ;
    }
    if flags.intersects(remote_write_bit) {
        access |= Access::REMOTE_WRITE | Access::LOCAL_WRITE;
    }
    if flags.intersects(MrFlags::RDMA_READ_SINK) {
        access |= Access::READ_SINK;
    }
    Some(access)
}

/// `NdkRegisterMr` (M2–M6, M10): inline, never pending, so the request
/// completion is never called (L8).
///
/// `STATUS_INVALID_PARAMETER` for undefined flags, a null MDL, a chain that
/// is not virtually contiguous over `length` (M2: as indexes, wherever each
/// MDL is mapped), a zero or too-long length (M10);
/// `STATUS_INVALID_DEVICE_REQUEST` on a fast-register MR (M1) or one already
/// registered; `STATUS_INSUFFICIENT_RESOURCES` when no token is left, an MDL
/// cannot be mapped, or the chain is more than `MAX_SPANS` mapped-apart
/// spans.
unsafe fn register(mr: &Object<Mr>, args: Register) -> NtStatus {
    let (mdl, length, flags) = (args.mdl, args.length, args.flags);
    let Some(access) = mr_access(flags) else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the consumer's MDL (M3): null or a valid, locked MDL.
    let Some(first) = (unsafe { mdl.as_ref() }) else {
        return STATUS_INVALID_PARAMETER;
    };
    // M4: the first MDL's virtual address (`MmGetMdlVirtualAddress`) is only
    // the index of the region's first byte; the bytes are reached through
    // the mapping below.
    let Some(base) = (first.start_va as usize as u64).checked_add(u64::from(first.byte_offset))
    else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the consumer's MDL chain is locked, describes at least `length`
    // bytes, and stays locked until the region is deregistered or closed
    // (M3); the RNIC stops using the span then (pending while DMA is in
    // flight, M11).
    let spans = match unsafe { super::map_mdl(mdl, length) } {
        Ok(spans) => spans,
        Err(status) => return status,
    };
    // M2: one span per MDL mapped apart; the region copies across them.
    let list = match SpanList::new(&spans) {
        Ok(list) => list,
        Err(e) => return status::mr(e.into()),
    };
    match mr.inner.rnic.register_spans(list, base, access) {
        Ok(()) => STATUS_SUCCESS,
        Err(e) => status::mr(e),
    }
}

/// `NdkDeregisterMr` (M11, L8): `STATUS_SUCCESS` when no DMA is in flight;
/// otherwise `STATUS_PENDING`, and the request completion runs (with
/// `STATUS_SUCCESS`) when the last use ends. A NULL completion with a
/// pending deregistration is the consumer's error: the call still pends and
/// nothing is called. `STATUS_INVALID_DEVICE_REQUEST` when nothing is
/// registered (or on a fast-register MR, or a second call while one pends).
unsafe fn deregister(
    mr: &Object<Mr>,
    completion: Option<NdkFnRequestCompletion>,
    context: *mut c_void,
) -> NtStatus {
    {
        let mut dereg = mr.inner.dereg.lock();
        if dereg.is_some() {
            return status::mr(MrError::InvalidState);
        }
        *dereg = Some(Owed {
            callback: completion,
            context: context as usize,
        });
    }
    // L21: the pending request holds the MR open.
    mr.hold();
    let this = mr.arc();
    let finish: Finish = Box::new(move || complete_dereg(&this));
    match mr.inner.rnic.deregister(finish) {
        // The completion may already have run (the last use ended meanwhile):
        // it may run before this returns (I3, L15).
        Ok(Progress::Pending) => STATUS_PENDING,
        Ok(Progress::Done) => {
            withdraw_dereg(mr);
            STATUS_SUCCESS
        }
        Err(e) => {
            withdraw_dereg(mr);
            status::mr(e)
        }
    }
}

/// `NdkInitializeFastRegisterMr` (M13–M15, M35): inline.
/// `STATUS_IMPLEMENTATION_LIMIT` above `FRMRPageCount`,
/// `STATUS_INVALID_PARAMETER` for 0 pages, `STATUS_INVALID_DEVICE_REQUEST` on
/// a RegisterMr MR (M1) or while a FastRegister mapping is active.
unsafe fn initialize_fast(mr: &Object<Mr>, args: InitializeFast) -> NtStatus {
    match mr.inner.rnic.init_fast(args.pages, args.remote_access != 0) {
        Ok(()) => STATUS_SUCCESS,
        Err(e) => status::mr(e),
    }
}

/// `NdkGetRemoteTokenFromMr` (M12, M17, M35): 0 before RegisterMr or
/// InitializeFastRegisterMr succeeded.
unsafe fn mr_remote_token(mr: &Object<Mr>) -> u32 {
    mr.inner.rnic.remote_key().unwrap_or(0)
}

/// `NdkGetLocalTokenFromMr` (M12, M35): 0 before registration.
unsafe fn mr_local_token(mr: &Object<Mr>) -> u32 {
    mr.inner.rnic.local_key().unwrap_or(0)
}

// ----- NDK_MW ------------------------------------------------------------

/// The provider state of an `NDK_MW`.
pub struct Mw {
    /// The RNIC window.
    pub(super) rnic: Arc<rmr::Mw>,
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static MW_DISPATCH: NdkMwDispatch for Mw (MW) at NdkMw,
        close ndk_close_mw = "NdkCloseMw";
    ndk_get_remote_token_from_mw = "NdkGetRemoteTokenFromMw" => mw_remote_token() -> u32;
}

impl Kind for Mw {
    fn begin_close(object: &Object<Self>) {
        // The window's token grants nothing from now on.
        object.inner.rnic.close();
    }
}

/// `NdkCreateMw`: an unbound window on `pd` (M21). Inline (L7).
pub(super) fn create_mw(pd: &Object<Pd>) -> Result<*mut NdkMw, NtStatus> {
    let rnic = rmr::Mw::new(&pd.inner.rnic).map_err(status::resource)?;
    let object = Object::create_under(pd, Mw { rnic })?;
    Ok(object.as_ptr().cast())
}

/// `NdkGetRemoteTokenFromMw` (M20): the token of the current (or last)
/// binding, readable as soon as Bind returned; 0 before the first Bind.
unsafe fn mw_remote_token(mw: &Object<Mw>) -> u32 {
    mw.inner.rnic.remote_key()
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use core::ffi::c_void;
    use core::ptr::null_mut;

    use std::vec::Vec;

    use super::super::mdl::tests::{Chain, Piece, pieces_for};
    use super::super::pd;
    use super::super::qp::tests::{
        Buf, Counter, Env, check_header, close, close_with, fast_register, init_fast, invalidate,
        local_token, on_request, poll, read, receive, register, remote_token, send, sge, summary,
        table, write,
    };
    use crate::abi::{
        Mdl, NdkMr, NdkMrDispatch, NdkObjectType, NdkOperationType, NdkSge, NtStatus, OpFlags,
        STATUS_IMPLEMENTATION_LIMIT, STATUS_INVALID_DEVICE_REQUEST, STATUS_INVALID_PARAMETER,
        STATUS_PENDING, STATUS_REMOTE_RESOURCES, STATUS_SUCCESS,
    };

    const LOCAL_WRITE: u32 = 0x1;
    const REMOTE_READ: u32 = 0x2;
    const REMOTE_WRITE: u32 = 0x5;
    const WRITE: NdkOperationType = NdkOperationType::WRITE;
    const READ: NdkOperationType = NdkOperationType::READ;
    const SEND: NdkOperationType = NdkOperationType::SEND;
    const RECEIVE: NdkOperationType = NdkOperationType::RECEIVE;
    const FAST_REGISTER: NdkOperationType = NdkOperationType::FAST_REGISTER;
    const INVALIDATE: NdkOperationType = NdkOperationType::INVALIDATE;
    use crate::provider::object::{Object, Slot};
    use crate::rnic::mr::Segment;
    use crate::rnic::{Access, Sge};

    fn deregister(mr: *mut NdkMr, counter: Option<&Counter>) -> NtStatus {
        let deregister = table::<NdkMrDispatch, _>(mr).ndk_deregister_mr;
        let (callback, context) = match counter {
            Some(c) => (Some(on_request as super::NdkFnRequestCompletion), c.ctx()),
            None => (None, null_mut()),
        };
        // SAFETY: a live MR of the test.
        unsafe { deregister(mr, callback, context) }
    }

    fn register_mdl(mr: *mut NdkMr, mdl: *mut Mdl, len: usize, flags: u32) -> NtStatus {
        let register = table::<NdkMrDispatch, _>(mr).ndk_register_mr;
        // SAFETY: a live MR; `mdl` is null or a valid chain over the test's
        // buffers.
        unsafe { register(mr, mdl, len, flags, None, null_mut()) }
    }

    /// A use of `len` bytes of the region, as DMA in flight holds one.
    fn in_flight(env: &Env, buf: &Buf, mr: *mut NdkMr, len: u32) -> Segment {
        // SAFETY: the env's live PD.
        let pd = unsafe { Object::<pd::Pd>::from_ptr(env.pd.cast(), &Slot("test")) }.unwrap();
        let sge = Sge {
            addr: buf.addr(),
            len,
            key: local_token(mr),
        };
        env.device
            .resolve_local(&pd.inner.rnic, &sge, Access::empty())
            .unwrap()
    }

    /// rules M1, M2, M6, M10–M12, L8: RegisterMr inline, tokens, errors,
    /// DeregisterMr inline without a callback.
    #[test]
    fn register_tokens_and_deregister() {
        let env = Env::new();
        let mr = env.create_mr(false);
        check_header(mr, NdkObjectType::MR);
        assert_eq!((local_token(mr), remote_token(mr)), (0, 0));
        let mut buf = Buf::new(3000, 0x321, 4);
        assert_eq!(register(mr, &mut buf, 0x10), STATUS_INVALID_PARAMETER);
        assert_eq!(
            register_mdl(mr, null_mut(), 64, 0),
            STATUS_INVALID_PARAMETER
        );
        // M2: a chain that is not contiguous.
        let mut other = Buf::new(100, 0, 0);
        let mut second = other.mdl();
        let mut first = buf.mdl();
        first.byte_count = 100;
        first.next = &raw mut second;
        assert_eq!(
            register_mdl(mr, &raw mut first, 200, 0),
            STATUS_INVALID_PARAMETER
        );
        // M10.
        assert_eq!(
            register_mdl(mr, &raw mut first, 0, 0),
            STATUS_INVALID_PARAMETER
        );
        // READ_SINK accepted (M9); remote write implies local write (M6).
        assert_eq!(register(mr, &mut buf, 0x5 | 0x2 | 0x8), STATUS_SUCCESS);
        let (local, remote) = (local_token(mr), remote_token(mr));
        assert!(local != 0 && remote != 0 && local != remote);
        assert_eq!(register(mr, &mut buf, 0), STATUS_INVALID_DEVICE_REQUEST);
        // L8: inline, so no callback.
        let done = Counter::default();
        assert_eq!(deregister(mr, Some(&done)), STATUS_SUCCESS);
        assert_eq!(done.calls(), 0);
        assert_eq!((local_token(mr), remote_token(mr)), (0, 0));
        assert_eq!(deregister(mr, Some(&done)), STATUS_INVALID_DEVICE_REQUEST);
        assert_eq!(done.calls(), 0);
        // Registered again, with fresh tokens.
        assert_eq!(register(mr, &mut buf, 0x1), STATUS_SUCCESS);
        assert_ne!(local_token(mr), local);
        // M1: the kinds do not mix.
        assert_eq!(init_fast(mr, 4, false), STATUS_INVALID_DEVICE_REQUEST);
        let fast = env.create_mr(true);
        assert_eq!(register(fast, &mut buf, 0), STATUS_INVALID_DEVICE_REQUEST);
        assert_eq!(deregister(fast, None), STATUS_INVALID_DEVICE_REQUEST);
        // M13, M35.
        assert_eq!(init_fast(fast, 0, true), STATUS_INVALID_PARAMETER);
        let max = env.device.limits().max_fr_pages;
        assert_eq!(init_fast(fast, max + 1, true), STATUS_IMPLEMENTATION_LIMIT);
        assert_eq!(init_fast(fast, 16, true), STATUS_SUCCESS);
        let tokens = (local_token(fast), remote_token(fast));
        assert_eq!(init_fast(fast, max, true), STATUS_SUCCESS);
        assert_eq!((local_token(fast), remote_token(fast)), tokens);
        for object in [mr, fast] {
            assert_eq!(close(object), STATUS_SUCCESS);
        }
        env.teardown();
    }

    /// rules M11, L8: DeregisterMr pends while DMA is in flight; the
    /// completion runs once, when the last use ends. A NULL completion still
    /// pends, and nothing is called.
    #[test]
    fn deregister_pends_while_dma_in_flight() {
        let env = Env::new();
        let mr = env.create_mr(false);
        let mut buf = Buf::new(256, 0, 2);
        assert_eq!(register(mr, &mut buf, 0x1), STATUS_SUCCESS);
        let use_ = in_flight(&env, &buf, mr, 64);
        let done = Counter::default();
        assert_eq!(deregister(mr, Some(&done)), STATUS_PENDING);
        // M11: the tokens are gone at once; a second call is refused.
        assert_eq!(local_token(mr), 0);
        assert_eq!(deregister(mr, Some(&done)), STATUS_INVALID_DEVICE_REQUEST);
        assert_eq!(done.calls(), 0);
        drop(use_);
        assert_eq!((done.calls(), done.status()), (1, STATUS_SUCCESS));
        // Without a completion.
        assert_eq!(register(mr, &mut buf, 0x1), STATUS_SUCCESS);
        let use_ = in_flight(&env, &buf, mr, 8);
        assert_eq!(deregister(mr, None), STATUS_PENDING);
        drop(use_);
        assert_eq!(done.calls(), 1);
        assert_eq!(register(mr, &mut buf, 0x1), STATUS_SUCCESS);
        assert_eq!(close(mr), STATUS_SUCCESS);
        env.teardown();
    }

    /// rules L21, L22, L24: DMA in flight keeps the MR's close pending (and
    /// so the PD's); a pending DeregisterMr completes before the close does.
    #[test]
    fn close_waits_for_dma() {
        let env = Env::new();
        let mut buf = Buf::new(256, 0, 2);
        let mr = env.create_mr(false);
        assert_eq!(register(mr, &mut buf, 0x1), STATUS_SUCCESS);
        let use_ = in_flight(&env, &buf, mr, 64);
        let closed = Counter::default();
        assert_eq!(close_with(mr, Some(&closed)), STATUS_PENDING);
        let pd_closed = Counter::default();
        let pd = env.pd;
        assert_eq!(close_with(pd, Some(&pd_closed)), STATUS_PENDING);
        drop(use_);
        assert_eq!(closed.calls(), 1);
        assert_eq!(pd_closed.calls(), 1);

        let env2 = Env::new();
        let mr = env2.create_mr(false);
        assert_eq!(register(mr, &mut buf, 0x1), STATUS_SUCCESS);
        let use_ = in_flight(&env2, &buf, mr, 64);
        let (dereg, closed) = (Counter::default(), Counter::default());
        assert_eq!(deregister(mr, Some(&dereg)), STATUS_PENDING);
        assert_eq!(close_with(mr, Some(&closed)), STATUS_PENDING);
        assert_eq!((dereg.calls(), closed.calls()), (0, 0));
        drop(use_);
        assert_eq!((dereg.calls(), closed.calls()), (1, 1));
        assert!(dereg.stamp() < closed.stamp());
        env2.teardown();

        // The first env's PD is already closed.
        assert_eq!(close(env.cq), STATUS_SUCCESS);
        assert_eq!(env.device.live_keys(), 0);
        // SAFETY: the adapter from `open`, not used afterwards.
        let _ = unsafe {
            crate::provider::adapter::close(env.adapter, &crate::provider::object::Slot("close"))
        };
    }

    /// The bytes of every piece, in chain order.
    fn flat(pieces: &[Piece]) -> Vec<u8> {
        pieces
            .iter()
            .flat_map(|p| p.bytes().iter().copied())
            .collect()
    }

    /// An SGE of `len` bytes at index `va` with `token`.
    fn at(va: u64, len: usize, token: u32) -> NdkSge {
        NdkSge {
            address: va,
            length: u32::try_from(len).unwrap(),
            memory_region_token: token,
        }
    }

    /// rule M2 (kernel backend): RegisterMr over an MDL chain whose MDLs
    /// are mapped apart (the kernel's usual case). A Write, a Read, a
    /// receive and a gathered Send whose ranges start and end inside
    /// different MDLs move exactly their bytes; the region's edges hold
    /// (M34, P11); the region deregisters and closes.
    #[test]
    fn m2_chain_mapped_apart_register_operations_deregister() {
        let env = Env::new();
        let p = env.pair();
        let va = 0x0000_6000_0000_0321_u64;
        let lens = [0x1234, 0x1AB, 0x2000];
        let total: usize = lens.iter().sum();
        let mut pieces = pieces_for(va, &lens, 9);
        let mut chain = Chain::new(va, &mut pieces);
        let mr = env.create_mr(false);
        let flags = REMOTE_WRITE | REMOTE_READ;
        assert_eq!(register_mdl(mr, chain.head(), total, flags), STATUS_SUCCESS);
        let (local, remote) = (local_token(mr), remote_token(mr));
        let mut reference = flat(&pieces);
        let mut src = Buf::new(0x3000, 0x17, 77);
        let mr_src = env.registered_mr(&mut src, LOCAL_WRITE);
        let mut sink = Buf::new(0x3000, 0x5, 0);
        let mr_sink = env.registered_mr(&mut sink, LOCAL_WRITE);

        // A Write from 0x1100: across both MDL boundaries (0x1234, 0x13DF).
        let (offset, len) = (0x1100, 0x300);
        let s = [sge(&src, mr_src, 0x10, len)];
        assert_eq!(write(p.a, 1, &s, (va + offset, remote), 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, WRITE, 1)]);
        let offset = usize::try_from(offset).unwrap();
        let len = len as usize;
        reference[offset..offset + len].copy_from_slice(&src.bytes()[0x10..0x10 + len]);
        assert_eq!(flat(&pieces), reference);

        // A Read from 0x1000 to 0x2500: inside MDL 0 to inside MDL 2.
        let s = [sge(&sink, mr_sink, 0x20, 0x1500)];
        assert_eq!(read(p.a, 2, &s, (va + 0x1000, remote), 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, READ, 2)]);
        assert_eq!(&sink.bytes()[0x20..0x1520], &reference[0x1000..0x2500]);

        // A receive at B whose one SGE spans the three MDLs.
        assert_eq!(
            receive(p.b, 3, &[at(va + 0x1230, 0x400, local)]),
            STATUS_SUCCESS
        );
        let s = [sge(&src, mr_src, 0x100, 0x400)];
        assert_eq!(send(p.a, 4, &s, 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, SEND, 4)]);
        assert_eq!(summary(&poll(p.cq_b)), [(STATUS_SUCCESS, RECEIVE, 3)]);
        reference[0x1230..0x1630].copy_from_slice(&src.bytes()[0x100..0x500]);
        assert_eq!(flat(&pieces), reference);

        // A Send from B gathering two SGEs of the chain, each across a
        // boundary, into A's sink.
        assert_eq!(
            receive(p.a, 5, &[sge(&sink, mr_sink, 0, 0x800)]),
            STATUS_SUCCESS
        );
        let g = [at(va + 0x13D0, 0x20, local), at(va + 0x1200, 0x40, local)];
        assert_eq!(send(p.b, 6, &g, 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_b)), [(STATUS_SUCCESS, SEND, 6)]);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, RECEIVE, 5)]);
        assert_eq!(&sink.bytes()[..0x20], &reference[0x13D0..0x13F0]);
        assert_eq!(&sink.bytes()[0x20..0x60], &reference[0x1200..0x1240]);

        // The last byte is inside; one more is not (M34: remote, P11: local).
        let last = va + total as u64 - 1;
        let s = [sge(&sink, mr_sink, 0, 1)];
        assert_eq!(read(p.a, 7, &s, (last, remote), 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, READ, 7)]);
        assert_eq!(sink.bytes()[0], reference[total - 1]);
        let s = [sge(&sink, mr_sink, 0, 2)];
        assert_eq!(read(p.a, 8, &s, (last, remote), 0), STATUS_SUCCESS);
        let refused = poll(p.cq_a);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].status, STATUS_REMOTE_RESOURCES);
        let q = env.pair();
        assert_eq!(receive(q.b, 9, &[at(va - 1, 2, local)]), STATUS_SUCCESS);
        assert_eq!(send(q.a, 10, &[], 0), STATUS_SUCCESS);
        let refused = poll(q.cq_b);
        assert_eq!(refused.len(), 1);
        assert_ne!(refused[0].status, STATUS_SUCCESS);
        assert_eq!(flat(&pieces), reference, "nothing moved outside");

        // Deregistered: the tokens grant nothing.
        assert_eq!(deregister(mr, None), STATUS_SUCCESS);
        assert_eq!((local_token(mr), remote_token(mr)), (0, 0));
        q.close();
        env.finish(p, &[mr, mr_src, mr_sink]);
    }

    /// M13, M16: a fast-register MR initialized again while a FastRegister
    /// posted before is still queued. The old request must not map the
    /// pages of one posted after the new initialization: it fails. (The
    /// queued request's staged slot was a plain index into lists the
    /// initialization replaced: it mapped the later request's pages and
    /// completed with success, exposing pages the consumer had not seen
    /// registered, and the later request, its slot freed by the first
    /// one's retirement, failed though the region mapped its pages.)
    #[test]
    fn m13_initializing_again_voids_a_queued_fast_register() {
        let env = Env::new();
        let p = env.pair();
        let mut one = Buf::new(4096, 0, 1);
        let mut two = Buf::new(4096, 0, 2);
        let (lam1, lam2) = (env.build_lam(&mut one), env.build_lam(&mut two));
        let fast = env.create_mr(true);
        assert_eq!(init_fast(fast, 4, true), STATUS_SUCCESS);
        let rr = OpFlags::ALLOW_REMOTE_READ.bits();
        let defer = OpFlags::DEFER.bits();
        assert_eq!(
            fast_register(p.b, 1, fast, &lam1, (4096, 0x10000), rr | defer),
            STATUS_SUCCESS
        );
        assert_eq!(init_fast(fast, 4, true), STATUS_SUCCESS);
        assert_eq!(
            fast_register(p.b, 2, fast, &lam2, (4096, 0x20000), rr),
            STATUS_SUCCESS
        );
        // The first fails (E8's InvalidRequest), which ends the connection
        // (E5): the second completes cancelled, nothing mapped.
        assert_eq!(
            summary(&poll(p.cq_b)),
            [
                (crate::abi::STATUS_INVALID_DEVICE_REQUEST, FAST_REGISTER, 1),
                (crate::abi::STATUS_CANCELLED, FAST_REGISTER, 2)
            ]
        );
        env.release_lam(lam1);
        env.finish_releasing(p, &[fast], Some(lam2));
    }

    /// rule M28 (kernel backend): BuildLam over an MDL chain whose MDLs are
    /// mapped apart lists each MDL's pages; a FastRegister of that page
    /// list is the chain's bytes for a remote Read and a remote Write
    /// across the MDL boundaries (M16).
    #[test]
    fn m28_build_lam_over_a_chain_feeds_fast_register() {
        let env = Env::new();
        let p = env.pair();
        let va = 0x0000_6100_0000_0321_u64;
        // Boundaries on pages (as SMB Direct's page-sized MDLs); the first
        // MDL starts at 0x321 into its page, the last ends inside one.
        let lens = [0x2000 - 0x321, 0x1000, 0x1234];
        let total: usize = lens.iter().sum();
        let mut pieces = pieces_for(va, &lens, 21);
        let mut chain = Chain::new(va, &mut pieces);
        let lam = env.build_lam_mdl(chain.head(), total);
        assert_eq!((lam.pages.len(), lam.fbo), (5, 0x321));
        let fast = env.create_mr(true);
        assert_eq!(init_fast(fast, 8, true), STATUS_SUCCESS);
        let base = 0x7100_0000 + u64::from(lam.fbo);
        let rw = (OpFlags::ALLOW_REMOTE_READ | OpFlags::ALLOW_REMOTE_WRITE).bits();
        assert_eq!(
            fast_register(p.b, 1, fast, &lam, (total, base), rw),
            STATUS_SUCCESS
        );
        assert_eq!(summary(&poll(p.cq_b)), [(STATUS_SUCCESS, FAST_REGISTER, 1)]);
        let remote = remote_token(fast);
        let mut reference = flat(&pieces);
        let mut sink = Buf::new(0x4000, 0x9, 0);
        let mr_sink = env.registered_mr(&mut sink, LOCAL_WRITE);
        let s = [sge(&sink, mr_sink, 0, u32::try_from(total).unwrap())];
        assert_eq!(read(p.a, 2, &s, (base, remote), 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, READ, 2)]);
        assert_eq!(&sink.bytes()[..total], &reference[..]);
        // A Write from inside MDL 0 to inside MDL 2.
        let mut src = Buf::new(0x2000, 0x3, 5);
        let mr_src = env.registered_mr(&mut src, LOCAL_WRITE);
        let s = [sge(&src, mr_src, 0, 0x1800)];
        let offset = 0x1800_usize;
        let to = base + offset as u64;
        assert_eq!(write(p.a, 3, &s, (to, remote), 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_a)), [(STATUS_SUCCESS, WRITE, 3)]);
        reference[offset..offset + 0x1800].copy_from_slice(&src.bytes()[..0x1800]);
        assert_eq!(flat(&pieces), reference);
        assert_eq!(invalidate(p.b, 4, fast, 0), STATUS_SUCCESS);
        assert_eq!(summary(&poll(p.cq_b)), [(STATUS_SUCCESS, INVALIDATE, 4)]);
        p.close();
        for mr in [fast, mr_sink, mr_src] {
            assert_eq!(close(mr), STATUS_SUCCESS);
        }
        env.release_lam(lam);
        env.teardown();
    }

    /// rules L1, L2, L29, M20: the MW table.
    #[test]
    fn mw_slots() {
        let env = Env::new();
        let mw = env.create_mw();
        let get = table::<crate::abi::NdkMwDispatch, _>(mw).ndk_get_remote_token_from_mw;
        // SAFETY: a live MW.
        assert_eq!(unsafe { get(mw) }, 0);
        let query = table::<crate::abi::NdkMwDispatch, _>(mw).ndk_query_extension;
        let guid = crate::abi::Guid::default();
        let mut interface = core::mem::MaybeUninit::<crate::abi::NdkExtensionInterface>::zeroed();
        // SAFETY: a live MW; valid GUID and out-buffer.
        let status = unsafe {
            query(
                mw.cast(),
                &raw const guid,
                crate::abi::NDK_VERSION_1_2,
                interface.as_mut_ptr(),
            )
        };
        assert_eq!(status, crate::abi::STATUS_NOT_SUPPORTED);
        let object: *mut c_void = mw.cast();
        assert_eq!(close(object), STATUS_SUCCESS);
        env.teardown();
    }
}
