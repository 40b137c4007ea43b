//! Unit tests of regions, windows, tokens and LAMs, grouped by state.
//!
//! Every test names the rule of `shared/spec/rules.md` it checks. Tests that
//! move data run in both engine modes and settle the deferred engine before
//! they look at completions or bytes; they check every byte of the memory
//! involved, including the bytes that must stay untouched.

use alloc::boxed::Box;
use alloc::vec::Vec;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Denied, Finish, Mr, MrError, Mw, Pd, Progress, Segment};
use crate::kernel::sync::Arc;
use crate::rnic::device::{Device, EngineMode, ObjectKind, ResourceError};
use crate::rnic::keys::REMOTE_BIT;
use crate::rnic::memory::LamId;
use crate::rnic::qp::{self, InvalidateTarget, Payload, PostError, Qp, QpState};
use crate::rnic::testing::{Buffer, CONFIG, LamPages, Pair, Registered, Side, TestCq};
use crate::rnic::types::{Access, Completion, Limits, Opcode, PAGE_SIZE, Sge, WcStatus, WrFlags};

/// Windows and fast regions whose requests queue behind one another (P18).
mod queued;
/// Regions over several spans mapped apart (M2).
mod spans;

/// Both engine modes: every data-path test runs in each.
const MODES: [EngineMode; 2] = [EngineMode::Inline, EngineMode::Deferred];

/// `arrange` run once in each engine mode, with the mode: the loop of
/// every data-path test.
fn each_mode<T>(arrange: impl Fn(EngineMode) -> T) -> impl Iterator<Item = (EngineMode, T)> {
    MODES.into_iter().map(move |mode| (mode, arrange(mode)))
}

/// `PAGE_SIZE` as a `usize`, for buffer sizes and slices.
const PAGE: usize = 4096;

/// Local write and both remote rights.
const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);

/// A PD on a fresh inline device with `limits`.
fn lone_pd(limits: Limits) -> (Arc<Device>, Arc<Pd>) {
    let device = Device::new(limits, EngineMode::Inline).unwrap();
    let pd = Pd::new(&device).unwrap();
    (device, pd)
}

/// A new MR (`fast` or not) of a PD on a fresh inline device with `limits`.
fn lone_mr(limits: Limits, fast: bool) -> (Arc<Device>, Arc<Pd>, Arc<Mr>) {
    let (device, pd) = lone_pd(limits);
    let mr = Mr::new(&pd, fast).unwrap();
    (device, pd, mr)
}

/// Limits small enough to reach: 4-page registrations, 2-page windows,
/// 16 fast-register pages (the minimum, rule M14), few objects.
fn small_limits() -> Limits {
    Limits {
        max_registration_size: 4 * PAGE_SIZE,
        max_window_size: 2 * PAGE_SIZE,
        max_fr_pages: 16,
        max_mr_count: 3,
        max_mw_count: 2,
        max_pd_count: 2,
        ..Limits::DEFAULT
    }
}

/// A connected pair on two devices with `limits`.
fn pair_with(mode: EngineMode, limits: Limits) -> Pair {
    let da = Device::new(limits, mode).unwrap();
    let db = Device::new(limits, mode).unwrap();
    let a = Side::new(&da, 0xA, CONFIG);
    let b = Side::new(&db, 0xB, CONFIG);
    qp::connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
    Pair { a, b }
}

/// Waits for deferred work (no-op for the inline engine).
fn settle() {
    crate::kernel::deferred::flush();
}

/// `n` as a `u64` (lengths and offsets of the tests).
fn wide(n: usize) -> u64 {
    u64::try_from(n).unwrap()
}

/// `n` as an SGE length.
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap()
}

/// A completion callback that counts its calls.
fn counted() -> (Arc<AtomicUsize>, Finish) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let finish: Finish = Box::new(move || {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    (calls, finish)
}

/// A callback that does nothing.
fn nothing() -> Finish {
    Box::new(|| {})
}

fn calls(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

/// A window that is closed when the test lets go of it, as every window
/// test ends (its token leaves the PD's table).
struct Window(Arc<Mw>);

impl core::ops::Deref for Window {
    type Target = Arc<Mw>;

    fn deref(&self) -> &Arc<Mw> {
        &self.0
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A buffer of `len` bytes of `side` registered with `access`, and a new
/// window of `side`'s PD, unbound.
fn window_over(side: &Side, len: usize, access: Access) -> (Registered, Window) {
    let reg = side.buffer(len, 0, access);
    (reg, Window(Mw::new(&side.pd).unwrap()))
}

/// Resolves a local SGE of `pd` and drops the segment at once.
fn local(pd: &Pd, key: u32, addr: u64, len: usize, need: Access) -> Result<(), Denied> {
    let sge = Sge {
        addr,
        len: len32(len),
        key,
    };
    pd.device().resolve_local(pd, &sge, need).map(drop)
}

/// Resolves a remote access arriving on QP `qp` of `pd`, then drops it.
fn remote(pd: &Pd, qp: u32, key: u32, addr: u64, len: usize, need: Access) -> Result<(), Denied> {
    pd.device()
        .resolve_remote(pd, qp, key, addr, wide(len), need)
        .map(drop)
}

/// Resolves a remote access arriving on `side`'s own QP (see [`remote`]).
fn remote_on(side: &Side, key: u32, addr: u64, len: usize, need: Access) -> Result<(), Denied> {
    remote(&side.pd, side.qp.id(), key, addr, len, need)
}

/// (opcode, status) of each completion.
fn statuses(done: &[Completion]) -> Vec<(Opcode, WcStatus)> {
    done.iter().map(|c| (c.opcode, c.status)).collect()
}

/// Rings side b's send queue with a zero-length Write (request 2) to a
/// fresh buffer of side a, so that requests posted with `DEFER` before it
/// run (D2); settles and returns every completion side b's send CQ holds.
fn ring(pair: &Pair) -> Vec<Completion> {
    let ring = pair.a.buffer(8, 0, ALL);
    pair.b
        .qp
        .post_write(
            2,
            Payload::Sges(&[]),
            ring.raddr(0),
            ring.rkey(),
            WrFlags::empty(),
        )
        .unwrap();
    settle();
    pair.b.scq.drain()
}

/// The one completion `cq` holds now.
#[track_caller]
fn one(cq: &TestCq) -> Completion {
    let all = cq.drain();
    assert_eq!(all.len(), 1, "{all:?}");
    all[0]
}

#[track_caller]
fn assert_status(c: Completion, opcode: Opcode, status: WcStatus) {
    assert_eq!((c.opcode, c.status), (opcode, status), "{c:?}");
}

/// `c` completed `opcode` with the error `status`, which ended the
/// connection (see [`assert_terminated`]).
#[track_caller]
fn expect_failed(pair: &Pair, c: Completion, opcode: Opcode, status: WcStatus) {
    assert_status(c, opcode, status);
    assert_terminated(pair);
}

/// E5: an error completion ended the connection on both sides, and a later
/// request completes cancelled.
#[track_caller]
fn assert_terminated(pair: &Pair) {
    assert_eq!(pair.a.qp.state(), QpState::Error);
    assert_eq!(pair.b.qp.state(), QpState::Error);
    pair.a
        .qp
        .post_write(99, Payload::Sges(&[]), 0, 0, WrFlags::empty())
        .unwrap();
    settle();
    assert_status(one(&pair.a.scq), Opcode::Write, WcStatus::Cancelled);
}

/// Posts an RDMA Write of `src` from side a to `raddr` under `rkey`, settles,
/// and returns its completion.
fn write(pair: &Pair, src: &[Sge], raddr: u64, rkey: u32) -> Completion {
    pair.a
        .qp
        .post_write(1, Payload::Sges(src), raddr, rkey, WrFlags::empty())
        .unwrap();
    settle();
    one(&pair.a.scq)
}

/// Writes `len` bytes of side a's pattern `seed` (see [`Buffer::pattern`])
/// to `raddr` under `rkey` with [`write`]; returns the source and the
/// completion.
fn write_pattern(
    pair: &Pair,
    len: usize,
    seed: u8,
    raddr: u64,
    rkey: u32,
) -> (Registered, Completion) {
    let src = pair.a.pattern(len, seed, Access::empty());
    let c = write(pair, &[src.sge(0, len32(len))], raddr, rkey);
    (src, c)
}

/// Writes as [`write_pattern`] does and expects the Write to complete with
/// `status`; returns the source.
#[track_caller]
fn expect_write(
    pair: &Pair,
    len: usize,
    seed: u8,
    raddr: u64,
    rkey: u32,
    status: WcStatus,
) -> Registered {
    let (src, c) = write_pattern(pair, len, seed, raddr, rkey);
    assert_status(c, Opcode::Write, status);
    src
}

/// Writes as [`write_pattern`] does and expects the Write to fail, with
/// whatever error, ending the connection (E5).
#[track_caller]
fn expect_write_error(pair: &Pair, len: usize, seed: u8, raddr: u64, rkey: u32, mode: EngineMode) {
    let (_, c) = write_pattern(pair, len, seed, raddr, rkey);
    assert_eq!(c.opcode, Opcode::Write);
    assert!(!c.status.is_success(), "{mode:?}: {c:?}");
    assert_terminated(pair);
}

/// Sends `src` from side a, settles, expects the Send and the receive side
/// b posted before to succeed; returns the receive's completion.
#[track_caller]
fn send_received(pair: &Pair, src: &[Sge]) -> Completion {
    pair.a.send(8, src, None).unwrap();
    settle();
    assert_status(one(&pair.a.scq), Opcode::Send, WcStatus::Success);
    let got = one(&pair.b.rcq);
    assert_status(got, Opcode::Receive, WcStatus::Success);
    got
}

/// Posts an RDMA Read from side a into `dst`, settles, returns its completion.
fn read(pair: &Pair, dst: &[Sge], raddr: u64, rkey: u32, flags: WrFlags) -> Completion {
    pair.a.qp.post_read(2, dst, raddr, rkey, flags).unwrap();
    settle();
    one(&pair.a.scq)
}

/// A plain RDMA Read ([`read`]) from `src` at offset `at`.
fn read_of(pair: &Pair, dst: &[Sge], src: &Registered, at: u64) -> Completion {
    read(pair, dst, src.raddr(at), src.rkey(), WrFlags::empty())
}

/// A fast-register region of `side`, initialized for `pages` pages.
fn fast(side: &Side, pages: u32, remote_ok: bool) -> Arc<Mr> {
    let mr = Mr::new(&side.pd, true).unwrap();
    mr.init_fast(pages, remote_ok).unwrap();
    mr
}

/// Two LAMs of `pages` pages each on `side`'s device, filled with `fills`.
fn two_lams(side: &Side, pages: usize, fills: [u8; 2]) -> [LamPages; 2] {
    fills.map(|fill| LamPages::new(&side.device, pages, fill))
}

/// A LAM of `lam_pages` pages filled with `fill` on `side`'s device, and a
/// fast-register region of `side` initialized for `pages` pages.
fn fast_over(
    side: &Side,
    lam_pages: usize,
    fill: u8,
    pages: u32,
    remote_ok: bool,
) -> (LamPages, Arc<Mr>) {
    (
        LamPages::new(&side.device, lam_pages, fill),
        fast(side, pages, remote_ok),
    )
}

/// A fast mapping as a FastRegister posts it (rules M15, M16): `len`
/// bytes of the page list `pages` from offset `fbo` of the first page,
/// indexed from `base`, with `access`.
#[derive(Clone, Copy)]
struct Mapping<'a> {
    pages: &'a [u64],
    fbo: u64,
    len: u64,
    base: u64,
    access: Access,
    flags: WrFlags,
}

impl<'a> Mapping<'a> {
    /// `len` bytes from the start of `pages`, indexed from 0, no right.
    fn new(pages: &'a [u64], len: u64) -> Self {
        Self {
            pages,
            fbo: 0,
            len,
            base: 0,
            access: Access::empty(),
            flags: WrFlags::empty(),
        }
    }

    /// Starting `fbo` bytes into the first page.
    fn fbo(self, fbo: u64) -> Self {
        Self { fbo, ..self }
    }

    /// Indexed from `base` (M16: the FBO plus a whole number of pages).
    fn base(self, base: u64) -> Self {
        Self { base, ..self }
    }

    fn access(self, access: Access) -> Self {
        Self { access, ..self }
    }

    /// Posted with `flags` (`DEFER`: held back for a later request, D2).
    fn flags(self, flags: WrFlags) -> Self {
        Self { flags, ..self }
    }

    /// Posts a FastRegister of this mapping of `mr` on `side`; returns what
    /// the post returns (a refusal inline, rule P3).
    fn post(self, side: &Side, mr: &Arc<Mr>) -> Result<(), PostError> {
        side.qp.post_fast_register(
            3,
            mr,
            self.pages,
            self.fbo,
            self.len,
            self.base,
            self.access,
            self.flags,
        )
    }

    /// Posts it ([`post`](Self::post)), settles, returns its completion.
    fn post_on(self, side: &Side, mr: &Arc<Mr>) -> Completion {
        self.post(side, mr).unwrap();
        settle();
        one(&side.scq)
    }

    /// Posts it ([`post_on`](Self::post_on)) and expects success (M15).
    #[track_caller]
    fn expect_mapped(self, side: &Side, mr: &Arc<Mr>) {
        let c = self.post_on(side, mr);
        assert_status(c, Opcode::FastRegister, WcStatus::Success);
    }
}

/// Posts an Invalidate on `side`, settles, returns its completion.
fn post_invalidate(side: &Side, target: InvalidateTarget) -> Completion {
    side.qp
        .post_invalidate(4, target, WrFlags::empty())
        .unwrap();
    settle();
    one(&side.scq)
}

/// A Bind as a QP posts it (rules M18-M21): window `mw` over `len` bytes of
/// `mr` from `base`, with every right unless told otherwise.
#[derive(Clone, Copy)]
struct Binding<'a> {
    mr: &'a Arc<Mr>,
    mw: &'a Arc<Mw>,
    base: u64,
    len: u64,
    access: Access,
    flags: WrFlags,
}

impl<'a> Binding<'a> {
    fn new(mr: &'a Arc<Mr>, mw: &'a Arc<Mw>, base: u64, len: u64) -> Self {
        Self {
            mr,
            mw,
            base,
            len,
            access: ALL,
            flags: WrFlags::empty(),
        }
    }

    fn access(self, access: Access) -> Self {
        Self { access, ..self }
    }

    /// Posted with `flags` (`DEFER`: held back for a later request, D2).
    fn flags(self, flags: WrFlags) -> Self {
        Self { flags, ..self }
    }

    /// Posts it on `side`; returns what the post returns (a refusal inline).
    fn post(self, side: &Side) -> Result<(), PostError> {
        let Self {
            mr,
            mw,
            base,
            len,
            access,
            flags,
        } = self;
        side.qp.post_bind(5, mr, mw, base, len, access, flags)
    }
}

/// Binds `mw` over `len` bytes of `mr` at `base` from `side`; returns the
/// window's token after a successful completion.
fn bind(side: &Side, mr: &Arc<Mr>, mw: &Arc<Mw>, base: u64, len: u64, access: Access) -> u32 {
    Binding::new(mr, mw, base, len)
        .access(access)
        .post(side)
        .unwrap();
    settle();
    assert_status(one(&side.scq), Opcode::Bind, WcStatus::Success);
    mw.remote_key()
}

/// Where byte `i` of a fast mapping lives, for a page list given as
/// (which LAM, which page of it): the LAM and the offset into its bytes.
fn place(map: &[(usize, usize)], fbo: usize, i: usize) -> (usize, usize) {
    let absolute = fbo + i;
    let (lam, page) = map[absolute / PAGE];
    (lam, page * PAGE + absolute % PAGE)
}

/// Page-aligned memory mapped as a LAM that a test may release while the
/// memory stays allocated, to check the device stops touching it.
struct Lam {
    buffer: Buffer,
    start: usize,
    pages: usize,
    id: Option<LamId>,
    device: Arc<Device>,
}

impl Lam {
    fn new(device: &Arc<Device>, pages: usize, fill: u8) -> Self {
        let mut buffer = Buffer::new((pages + 1) * PAGE, fill);
        let misalign = usize::try_from(buffer.addr() % PAGE_SIZE).unwrap();
        let start = (PAGE - misalign) % PAGE;
        let span = buffer.span().sub(start, pages * PAGE).unwrap();
        let (id, logical) = device.build_lam(span).unwrap();
        // M28: the logical address is page-aligned and names the first page.
        assert_eq!(logical % PAGE_SIZE, 0);
        assert_eq!(logical, buffer.addr() + wide(start));
        Self {
            buffer,
            start,
            pages,
            id: Some(id),
            device: Arc::clone(device),
        }
    }

    fn page(&self, n: usize) -> u64 {
        self.buffer.addr() + wide(self.start + n * PAGE)
    }

    fn bytes(&self) -> &[u8] {
        &self.buffer.bytes()[self.start..self.start + self.pages * PAGE]
    }

    fn release(&mut self) -> bool {
        self.id.take().is_some_and(|id| self.device.release_lam(id))
    }
}

impl Drop for Lam {
    fn drop(&mut self) {
        self.release();
    }
}

mod unregistered {
    use super::*;

    #[test]
    fn test_unregistered_tokens_unreadable_until_registered_rule_m12() {
        let (_device, _pd, mr) = lone_mr(Limits::DEFAULT, false);
        assert!(!mr.is_fast());
        assert_eq!(mr.local_key(), None);
        assert_eq!(mr.remote_key(), None);
        let mut buffer = Buffer::new(64, 0);
        mr.register(buffer.span(), buffer.addr(), Access::empty())
            .unwrap();
        let lkey = mr.local_key().unwrap();
        let rkey = mr.remote_key().unwrap();
        assert_ne!(lkey, 0);
        assert_ne!(lkey, rkey);
        assert_eq!(mr.close(nothing()), Progress::Done);
        assert_eq!(mr.local_key(), None);
    }

    #[test]
    fn test_unregistered_register_zero_length_refused_rule_m2() {
        let (device, _pd, mr) = lone_mr(Limits::DEFAULT, false);
        let buffer = Buffer::new(8, 0);
        assert_eq!(
            mr.register(crate::rnic::memory::Span::empty(), buffer.addr(), ALL),
            Err(MrError::InvalidParameter)
        );
        assert_eq!(mr.local_key(), None);
        assert_eq!(device.live_keys(), 1, "only the PD's privileged token");
    }

    #[test]
    fn test_unregistered_register_wrapping_index_range_refused_rule_m4() {
        let (_device, pd, mr) = lone_mr(Limits::DEFAULT, false);
        let mut buffer = Buffer::new(100, 0);
        assert_eq!(
            mr.register(buffer.span(), u64::MAX - 10, ALL),
            Err(MrError::InvalidParameter)
        );
        // The last index that fits is fine: the base is only an index.
        mr.register(buffer.span(), u64::MAX - 100, ALL).unwrap();
        let key = mr.local_key().unwrap();
        assert_eq!(
            local(&pd, key, u64::MAX - 1, 1, Access::LOCAL_WRITE),
            Ok(())
        );
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_unregistered_register_over_max_registration_size_refused_rule_m10() {
        let (_device, _pd, mr) = lone_mr(small_limits(), false);
        let mut big = Buffer::new(4 * PAGE + 1, 0);
        assert_eq!(
            mr.register(big.span(), big.addr(), ALL),
            Err(MrError::InvalidParameter)
        );
        assert_eq!(mr.local_key(), None);
        let mut exact = Buffer::new(4 * PAGE, 0);
        mr.register(exact.span(), exact.addr(), ALL).unwrap();
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_unregistered_deregister_refused_rule_m11() {
        let (_device, _pd, mr) = lone_mr(Limits::DEFAULT, false);
        let (count, finish) = counted();
        assert_eq!(mr.deregister(finish), Err(MrError::InvalidState));
        assert_eq!(calls(&count), 0, "a refused call never completes (L8)");
    }

    #[test]
    fn test_unregistered_fast_register_calls_refused_rule_m1() {
        let pair = Pair::new(EngineMode::Inline);
        let mr = Mr::new(&pair.a.pd, false).unwrap();
        assert_eq!(mr.init_fast(4, true), Err(MrError::InvalidState));
        let lam = LamPages::new(&pair.a.device, 1, 0);
        assert_eq!(
            mr.stage_fast_register(&[lam.page(0)], 0, PAGE_SIZE, 0, Access::empty()),
            Err(MrError::InvalidState)
        );
        assert_eq!(
            Mapping::new(&[lam.page(0)], PAGE_SIZE).post(&pair.a, &mr),
            Err(PostError::InvalidParameter)
        );
        settle();
        assert!(
            pair.a.scq.drain().is_empty(),
            "a refused post leaves no trace"
        );
        assert_eq!(mr.local_key(), None);
    }
}

mod registered {
    use super::*;

    #[test]
    fn test_registered_sge_addresses_are_virtual_address_indexes_rule_m4() {
        for (mode, pair) in each_mode(Pair::new) {
            // The index is unrelated to where the bytes are: the device
            // reaches them through the span only.
            let mut src = Buffer::pattern(3 * PAGE + 123, 7);
            let expected = src.bytes().to_vec();
            let mr = Mr::new(&pair.a.pd, false).unwrap();
            let base = 0x7000_0000_1234_u64;
            mr.register(src.span(), base, Access::empty()).unwrap();
            let key = mr.local_key().unwrap();
            let dst = pair.b.buffer(3 * PAGE + 123, 0, ALL);
            let sges = [
                Sge {
                    addr: base + 4000,
                    len: 200,
                    key,
                },
                Sge {
                    addr: base + 10,
                    len: 20,
                    key,
                },
                Sge {
                    addr: base + wide(3 * PAGE + 100),
                    len: 23,
                    key,
                },
            ];
            let c = write(&pair, &sges, dst.raddr(5), dst.rkey());
            assert_status(c, Opcode::Write, WcStatus::Success);
            let got = dst.buffer.bytes();
            assert_eq!(&got[5..205], &expected[4000..4200], "{mode:?}");
            assert_eq!(&got[205..225], &expected[10..30]);
            assert_eq!(&got[225..248], &expected[3 * PAGE + 100..]);
            assert!(got[..5].iter().chain(&got[248..]).all(|&b| b == 0));
            assert_eq!(mr.close(nothing()), Progress::Done);
        }
    }

    #[test]
    fn test_registered_sge_must_lie_within_region_span_rule_p11() {
        let (_device, pd) = lone_pd(Limits::DEFAULT);
        let reg = Registered::new(&pd, Buffer::new(100, 0), ALL);
        let key = reg.mr.local_key().unwrap();
        let base = reg.buffer.addr();
        let need = Access::LOCAL_WRITE;
        assert_eq!(local(&pd, key, base, 100, need), Ok(()));
        assert_eq!(local(&pd, key, base + 99, 1, need), Ok(()));
        assert_eq!(local(&pd, key, base + 100, 0, need), Ok(()));
        assert_eq!(local(&pd, key, base - 1, 1, need), Err(Denied::Range));
        assert_eq!(local(&pd, key, base - 1, 0, need), Err(Denied::Range));
        assert_eq!(local(&pd, key, base + 100, 1, need), Err(Denied::Range));
        assert_eq!(local(&pd, key, base + 1, 100, need), Err(Denied::Range));
        assert_eq!(local(&pd, key, u64::MAX, 2, need), Err(Denied::Range));
        let rkey = reg.rkey();
        assert_eq!(
            remote(&pd, 0, rkey, base + 50, 51, Access::REMOTE_READ),
            Err(Denied::Range)
        );
        assert_eq!(
            remote(&pd, 0, rkey, base + 50, 50, Access::REMOTE_READ),
            Ok(())
        );
    }

    #[test]
    fn test_registered_zero_based_addresses_refused_rule_m5() {
        for mode in MODES {
            // Locally: an SGE that counts from 0 instead of the base.
            let pair = Pair::new(mode);
            let src = pair.a.pattern(64, 1, Access::empty());
            let dst = pair.b.buffer(64, 0, ALL);
            let zero_based = Sge {
                addr: 0,
                len: 16,
                key: src.mr.local_key().unwrap(),
            };
            let c = write(&pair, &[zero_based], dst.raddr(0), dst.rkey());
            expect_failed(&pair, c, Opcode::Write, WcStatus::LocalAccessError);
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0));

            // Remotely: a remote address that counts from 0.
            let pair = Pair::new(mode);
            let src = pair.a.pattern(64, 1, Access::empty());
            let dst = pair.b.buffer(64, 0, ALL);
            let c = write(&pair, &[src.sge(0, 16)], 8, dst.rkey());
            expect_failed(&pair, c, Opcode::Write, WcStatus::RemoteOperationError);
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_registered_remote_write_implies_local_write_rule_m6() {
        for (mode, pair) in each_mode(Pair::new) {
            let dst = pair.b.buffer(32, 0, Access::REMOTE_WRITE);
            let pd = &pair.b.pd;
            let key = dst.mr.local_key().unwrap();
            assert_eq!(
                local(pd, key, dst.raddr(0), 32, Access::LOCAL_WRITE),
                Ok(())
            );
            // So it may be a receive buffer.
            let src = pair.a.pattern(32, 3, Access::empty());
            pair.b.qp.post_receive(7, &[dst.sge(0, 32)]).unwrap();
            let got = send_received(&pair, &[src.sge(0, 32)]);
            assert_eq!(got.bytes, 32);
            assert_eq!(dst.buffer.bytes(), src.buffer.bytes(), "{mode:?}");
        }
    }

    #[test]
    fn test_registered_local_read_always_granted_rule_m6() {
        for (_, pair) in each_mode(Pair::new) {
            // No rights at all: still a valid source of a Send and a Write.
            let src = pair.a.pattern(48, 9, Access::empty());
            let pd = &pair.a.pd;
            let key = src.mr.local_key().unwrap();
            assert_eq!(local(pd, key, src.raddr(0), 48, Access::empty()), Ok(()));
            assert_eq!(
                local(pd, key, src.raddr(0), 48, Access::LOCAL_WRITE),
                Err(Denied::Rights)
            );
            let dst = pair.b.buffer(48, 0, ALL);
            let c = write(&pair, &[src.sge(0, 48)], dst.raddr(0), dst.rkey());
            assert_status(c, Opcode::Write, WcStatus::Success);
            assert_eq!(dst.buffer.bytes(), src.buffer.bytes());
            // But not a Read sink: that is a local write.
            let c = read_of(&pair, &[src.sge(0, 8)], &dst, 0);
            expect_failed(&pair, c, Opcode::Read, WcStatus::LocalAccessError);
            assert_eq!(src.buffer.bytes(), dst.buffer.bytes(), "nothing landed");
        }
    }

    #[test]
    fn test_registered_remote_rights_are_exactly_those_registered_rule_m6() {
        let (_device, pd) = lone_pd(Limits::DEFAULT);
        let cases = [
            (Access::empty(), false, false, false),
            (Access::LOCAL_WRITE, true, false, false),
            (Access::REMOTE_READ, false, true, false),
            (Access::REMOTE_WRITE, true, false, true),
            (ALL, true, true, true),
        ];
        for (access, local_write, remote_read, remote_write) in cases {
            let reg = Registered::new(&pd, Buffer::new(16, 0), access);
            let (key, rkey, at) = (reg.mr.local_key().unwrap(), reg.rkey(), reg.raddr(0));
            let verdict = |granted: bool| if granted { Ok(()) } else { Err(Denied::Rights) };
            assert_eq!(
                local(&pd, key, at, 16, Access::empty()),
                Ok(()),
                "{access:?}"
            );
            assert_eq!(
                local(&pd, key, at, 16, Access::LOCAL_WRITE),
                verdict(local_write)
            );
            assert_eq!(
                remote(&pd, 0, rkey, at, 16, Access::REMOTE_READ),
                verdict(remote_read)
            );
            assert_eq!(
                remote(&pd, 0, rkey, at, 16, Access::REMOTE_WRITE),
                verdict(remote_write)
            );
        }
    }

    #[test]
    fn test_registered_read_sink_flag_never_required_never_refused_rule_m9() {
        for (mode, pair) in each_mode(Pair::new) {
            // Accepted with and without local write.
            let sink_only = pair.a.buffer(8, 0, Access::READ_SINK);
            assert!(sink_only.mr.local_key().is_some());
            let flagged = pair
                .a
                .buffer(64, 0, Access::READ_SINK | Access::LOCAL_WRITE);
            let plain = pair.a.buffer(64, 0, Access::LOCAL_WRITE);
            let src = pair.b.pattern(128, 4, Access::REMOTE_READ);
            let c = read_of(&pair, &[flagged.sge(0, 64)], &src, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            // Not required: a sink without the flag works as well.
            let c = read_of(&pair, &[plain.sge(0, 64)], &src, 64);
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(
                flagged.buffer.bytes(),
                &src.buffer.bytes()[..64],
                "{mode:?}"
            );
            assert_eq!(plain.buffer.bytes(), &src.buffer.bytes()[64..]);
        }
    }

    #[test]
    fn test_registered_remote_writes_land_at_their_offsets_rule_p19() {
        for (mode, pair) in each_mode(Pair::new) {
            let len = 3 * PAGE;
            let dst = pair.b.buffer(len, 0xEE, ALL);
            let src = pair.a.pattern(len, 5, Access::empty());
            let mut model = alloc::vec![0xEE_u8; len];
            // (source offset, destination offset, length): single bytes, page
            // crossings, and a run that ends exactly at the end.
            let writes = [
                (0, 0, 1),
                (1, 4095, 2),
                (3, 5000, 3300),
                (4000, len - 7, 7),
                (9000, 2 * PAGE - 1, 1),
            ];
            for (from, to, n) in writes {
                let c = write(
                    &pair,
                    &[src.sge(wide(from), len32(n))],
                    dst.raddr(wide(to)),
                    dst.rkey(),
                );
                assert_status(c, Opcode::Write, WcStatus::Success);
                model[to..to + n].copy_from_slice(&src.buffer.bytes()[from..from + n]);
                assert_eq!(
                    dst.buffer.bytes(),
                    &model[..],
                    "{mode:?} after {from}/{to}/{n}"
                );
            }
            // Read everything back, in two SGEs split inside a page.
            let back = pair.a.buffer(len, 0, Access::LOCAL_WRITE);
            let sges = [back.sge(0, 6000), back.sge(6000, len32(len - 6000))];
            let c = read_of(&pair, &sges, &dst, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(back.buffer.bytes(), &model[..]);
        }
    }

    #[test]
    fn test_registered_zero_length_read_and_write_touch_nothing_rule_p19() {
        for (mode, pair) in each_mode(Pair::new) {
            let target = pair.b.pattern(64, 2, ALL);
            let before = target.buffer.bytes().to_vec();
            let local = pair.a.buffer(16, 0x55, Access::LOCAL_WRITE);
            let c = write(&pair, &[local.sge(0, 0)], target.raddr(10), target.rkey());
            assert_status(c, Opcode::Write, WcStatus::Success);
            let c = write(&pair, &[], target.raddr(64), target.rkey());
            assert_status(c, Opcode::Write, WcStatus::Success);
            let c = read_of(&pair, &[local.sge(3, 0)], &target, 20);
            assert_status(c, Opcode::Read, WcStatus::Success);
            let c = read_of(&pair, &[], &target, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(target.buffer.bytes(), &before[..], "{mode:?}");
            assert!(local.buffer.bytes().iter().all(|&b| b == 0x55));
            assert_eq!(pair.a.qp.state(), QpState::Connected);
        }
    }

    #[test]
    fn test_registered_read_past_end_fails_remote_operation_error_rule_p20() {
        for (mode, pair) in each_mode(Pair::new) {
            let src = pair.b.pattern(100, 1, Access::REMOTE_READ);
            let dst = pair.a.buffer(64, 0, Access::LOCAL_WRITE);
            let c = read_of(&pair, &[dst.sge(0, 64)], &src, 50);
            expect_failed(&pair, c, Opcode::Read, WcStatus::RemoteOperationError);
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
        }
    }

    #[test]
    fn test_registered_write_past_end_refused_rule_m34() {
        for (mode, pair) in each_mode(Pair::new) {
            let dst = pair.b.buffer(100, 0, ALL);
            expect_write(
                &pair,
                64,
                1,
                dst.raddr(50),
                dst.rkey(),
                WcStatus::RemoteOperationError,
            );
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_registered_missing_remote_right_refused_rule_m34() {
        for (mode, pair) in each_mode(Pair::new) {
            let dst = pair
                .b
                .buffer(64, 0, Access::REMOTE_READ | Access::LOCAL_WRITE);
            let src = pair.a.pattern(64, 1, Access::LOCAL_WRITE);
            let c = write(&pair, &[src.sge(0, 64)], dst.raddr(0), dst.rkey());
            expect_failed(&pair, c, Opcode::Write, WcStatus::RemoteAccessError);
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");

            let pair = Pair::new(mode);
            let secret = pair.b.pattern(64, 1, Access::REMOTE_WRITE);
            let sink = pair.a.buffer(64, 0, Access::LOCAL_WRITE);
            let c = read_of(&pair, &[sink.sge(0, 64)], &secret, 0);
            expect_failed(&pair, c, Opcode::Read, WcStatus::RemoteAccessError);
            assert!(sink.buffer.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_registered_unknown_token_refused_and_connection_ends_rule_m34() {
        for mode in MODES {
            let forgeries: [fn(u32) -> u32; 3] = [
                |rkey| rkey.wrapping_add(1 << 16), // another generation
                |rkey| rkey | 0xFFFF,              // an index beyond the table
                |_| REMOTE_BIT,                    // never handed out
            ];
            for bogus in forgeries {
                let pair = Pair::new(mode);
                let dst = pair.b.buffer(64, 0, ALL);
                expect_write(
                    &pair,
                    64,
                    1,
                    dst.raddr(0),
                    bogus(dst.rkey()),
                    WcStatus::RemoteAccessError,
                );
                assert!(dst.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
                assert!(pair.b.rcq.drain().is_empty());
                assert_terminated(&pair);
            }
        }
    }

    #[test]
    fn test_registered_register_again_refused_rule_m2() {
        let (_device, pd) = lone_pd(Limits::DEFAULT);
        let reg = Registered::new(&pd, Buffer::new(16, 0), ALL);
        let key = reg.mr.local_key().unwrap();
        let mut other = Buffer::new(16, 0);
        assert_eq!(
            reg.mr.register(other.span(), other.addr(), ALL),
            Err(MrError::InvalidState)
        );
        assert_eq!(
            reg.mr.local_key(),
            Some(key),
            "the registration is unchanged"
        );
        assert_eq!(
            local(&pd, key, reg.raddr(0), 16, Access::LOCAL_WRITE),
            Ok(())
        );
    }

    #[test]
    fn test_registered_fast_register_and_invalidate_refused_inline_rule_m1() {
        let pair = Pair::new(EngineMode::Inline);
        let reg = pair.a.buffer(PAGE, 0, ALL);
        let lam = LamPages::new(&pair.a.device, 1, 0);
        assert_eq!(reg.mr.init_fast(1, true), Err(MrError::InvalidState));
        assert_eq!(
            Mapping::new(&[lam.page(0)], PAGE_SIZE)
                .access(ALL)
                .post(&pair.a, &reg.mr),
            Err(PostError::InvalidParameter)
        );
        assert_eq!(
            pair.a.qp.post_invalidate(
                2,
                InvalidateTarget::Mr(Arc::clone(&reg.mr)),
                WrFlags::empty()
            ),
            Err(PostError::InvalidParameter)
        );
        settle();
        assert!(pair.a.scq.drain().is_empty());
        assert_eq!(pair.a.qp.state(), QpState::Connected);
        assert_eq!(
            local(
                &pair.a.pd,
                reg.mr.local_key().unwrap(),
                reg.raddr(0),
                PAGE,
                Access::LOCAL_WRITE
            ),
            Ok(())
        );
    }

    #[test]
    fn test_registered_deregister_refuses_tokens_locally_and_remotely_rule_m11() {
        for (mode, pair) in each_mode(Pair::new) {
            let dst = pair.b.buffer(64, 0, ALL);
            let (lkey, rkey) = (dst.mr.local_key().unwrap(), dst.rkey());
            let (count, finish) = counted();
            assert_eq!(dst.mr.deregister(finish), Ok(Progress::Done));
            assert_eq!(calls(&count), 0, "done inline: no callback (L8)");
            // M12: no token to read any more.
            assert_eq!(dst.mr.local_key(), None);
            assert_eq!(dst.mr.remote_key(), None);
            assert_eq!(
                local(&pair.b.pd, lkey, dst.raddr(0), 1, Access::empty()),
                Err(Denied::Token)
            );
            assert_eq!(
                remote_on(&pair.b, rkey, dst.raddr(0), 1, Access::REMOTE_WRITE),
                Err(Denied::Token)
            );
            expect_write(
                &pair,
                64,
                1,
                dst.raddr(0),
                rkey,
                WcStatus::RemoteAccessError,
            );
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_registered_largest_registration_moves_every_byte_rule_m10() {
        for (mode, pair) in each_mode(|mode| pair_with(mode, small_limits())) {
            let len = 4 * PAGE;
            let dst = pair.b.buffer(len, 0, ALL);
            let src = expect_write(&pair, len, 8, dst.raddr(0), dst.rkey(), WcStatus::Success);
            assert_eq!(dst.buffer.bytes(), src.buffer.bytes(), "{mode:?}");
            let back = pair.a.buffer(len, 0, Access::LOCAL_WRITE);
            let c = read_of(&pair, &[back.sge(0, len32(len))], &dst, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(back.buffer.bytes(), src.buffer.bytes());
        }
    }
}

mod deregistering {
    use super::*;

    /// A use of the first 8 bytes of `reg`, held until it is dropped.
    fn first_use(device: &Device, pd: &Pd, reg: &Registered) -> Segment {
        device
            .resolve_local(pd, &reg.sge(0, 8), Access::empty())
            .unwrap()
    }

    /// A registered region on its own device, with its buffer.
    fn region(access: Access) -> (Arc<Device>, Arc<Pd>, Registered) {
        let (device, pd) = lone_pd(Limits::DEFAULT);
        let reg = Registered::new(&pd, Buffer::pattern(256, 1), access);
        (device, pd, reg)
    }

    #[test]
    fn test_deregistering_pends_until_last_use_ends_and_finishes_once_rule_m11() {
        let (device, pd, reg) = region(ALL);
        let (lkey, rkey) = (reg.mr.local_key().unwrap(), reg.rkey());
        let sge = reg.sge(0, 16);
        let first = device.resolve_local(&pd, &sge, Access::empty()).unwrap();
        let second = device
            .resolve_remote(&pd, 0, rkey, reg.raddr(16), 16, Access::REMOTE_READ)
            .unwrap();
        assert!(reg.mr.in_use());
        let (count, finish) = counted();
        assert_eq!(reg.mr.deregister(finish), Ok(Progress::Pending));
        assert_eq!(calls(&count), 0);
        // The tokens are refused from the moment deregister returns.
        assert_eq!(reg.mr.local_key(), None);
        assert_eq!(
            local(&pd, lkey, reg.raddr(0), 1, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(
            remote(&pd, 0, rkey, reg.raddr(0), 1, Access::REMOTE_READ),
            Err(Denied::Token)
        );
        // The in-flight uses still see their memory.
        let run = first.run(0, 16).unwrap();
        assert_eq!(wide(run.addr()), reg.raddr(0));
        drop(first);
        assert_eq!(calls(&count), 0, "one use is left");
        drop(second);
        assert_eq!(calls(&count), 1);
        assert!(!reg.mr.in_use());
        // Registered again: a fresh token.
        let mut buffer = Buffer::new(8, 0);
        reg.mr.register(buffer.span(), buffer.addr(), ALL).unwrap();
        assert_ne!(reg.mr.local_key(), Some(lkey));
        assert_eq!(reg.mr.close(nothing()), Progress::Done);
        assert_eq!(calls(&count), 1, "exactly once");
    }

    #[test]
    fn test_deregistering_calls_refused_while_pending_rule_m11() {
        let (device, pd, reg) = region(ALL);
        let seg = first_use(&device, &pd, &reg);
        let (count, finish) = counted();
        assert_eq!(reg.mr.deregister(finish), Ok(Progress::Pending));
        let (again, finish_again) = counted();
        assert_eq!(reg.mr.deregister(finish_again), Err(MrError::InvalidState));
        let mut buffer = Buffer::new(8, 0);
        assert_eq!(
            reg.mr.register(buffer.span(), buffer.addr(), ALL),
            Err(MrError::InvalidState)
        );
        drop(seg);
        assert_eq!((calls(&count), calls(&again)), (1, 0));
    }

    #[test]
    fn test_deregistering_close_in_use_pends_until_last_use_rule_l21() {
        let (device, pd, reg) = region(ALL);
        let lkey = reg.mr.local_key().unwrap();
        let seg = device
            .resolve_local(&pd, &reg.sge(8, 8), Access::LOCAL_WRITE)
            .unwrap();
        let (count, finish) = counted();
        assert_eq!(reg.mr.close(finish), Progress::Pending);
        assert_eq!(calls(&count), 0);
        assert_eq!(
            local(&pd, lkey, reg.raddr(0), 1, Access::empty()),
            Err(Denied::Token)
        );
        drop(seg);
        assert_eq!(calls(&count), 1);
    }

    #[test]
    fn test_deregistering_close_completes_after_pending_deregister_rule_l21() {
        // A close during a pending deregistration completes both, the
        // deregistration first, each exactly once (L8, L21, L22).
        let (device, pd, reg) = region(ALL);
        let seg = first_use(&device, &pd, &reg);
        let order = Arc::new(Mutex::new(Vec::new()));
        let log = |name: &'static str| -> Finish {
            let order = Arc::clone(&order);
            Box::new(move || order.lock().unwrap().push(name))
        };
        assert_eq!(reg.mr.deregister(log("deregister")), Ok(Progress::Pending));
        assert_eq!(reg.mr.close(log("close")), Progress::Pending);
        assert!(order.lock().unwrap().is_empty());
        drop(seg);
        assert_eq!(*order.lock().unwrap(), ["deregister", "close"]);
        assert_eq!(device.live_keys(), 1, "only the PD's privileged token");
    }

    #[test]
    fn test_deregistering_fast_region_close_in_use_pends_rule_l21() {
        let pair = Pair::new(EngineMode::Inline);
        let (lam, mr) = fast_over(&pair.a, 1, 0, 1, false);
        Mapping::new(&[lam.page(0)], PAGE_SIZE)
            .access(Access::LOCAL_WRITE)
            .expect_mapped(&pair.a, &mr);
        let key = mr.local_key().unwrap();
        let sge = Sge {
            addr: 100,
            len: 10,
            key,
        };
        let seg = pair
            .a
            .device
            .resolve_local(&pair.a.pd, &sge, Access::LOCAL_WRITE)
            .unwrap();
        let (count, finish) = counted();
        assert_eq!(mr.close(finish), Progress::Pending);
        assert_eq!(
            local(&pair.a.pd, key, 0, 1, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(calls(&count), 0);
        drop(seg);
        assert_eq!(calls(&count), 1);
    }

    #[test]
    fn test_deregistering_result_agrees_with_callback_when_last_use_ends_concurrently_rule_l8() {
        // The last use ends on another thread while deregister (or close)
        // runs, a little later each round so that the rounds sweep across its
        // steps. Whatever the interleaving, the callback runs exactly once if
        // and only if the call returned Pending (L8, L18).
        const ROUNDS: usize = 20_000;
        let (device, pd, reg) = region(ALL);
        let mr = Arc::clone(&reg.mr);
        let mut buffer = Buffer::new(64, 0);
        let (span, base) = (buffer.span(), buffer.addr());
        reg.mr.close(nothing());
        let start = Arc::new(crate::kernel::testing::Barrier::new(2));
        let done = Arc::new(crate::kernel::testing::Barrier::new(2));
        let (tx, rx) = std::sync::mpsc::channel::<(Segment, usize)>();
        let dropper = {
            let (start, done) = (Arc::clone(&start), Arc::clone(&done));
            std::thread::spawn(move || {
                for (seg, delay) in rx {
                    start.wait();
                    for _ in 0..delay {
                        core::hint::spin_loop();
                    }
                    drop(seg);
                    done.wait();
                }
            })
        };
        for round in 0..ROUNDS {
            mr.register(span, base, Access::empty()).unwrap();
            let sge = Sge {
                addr: base,
                len: 8,
                key: mr.local_key().unwrap(),
            };
            let seg = device.resolve_local(&pd, &sge, Access::empty()).unwrap();
            tx.send((seg, round % 256)).unwrap();
            let (count, finish) = counted();
            start.wait();
            let progress = if (round / 256) % 2 == 0 {
                mr.deregister(finish).unwrap()
            } else {
                mr.close(finish)
            };
            done.wait();
            let expected = usize::from(progress == Progress::Pending);
            assert_eq!(calls(&count), expected, "round {round}: {progress:?}");
        }
        drop(tx);
        dropper.join().unwrap();
    }
}

mod fast_uninitialized {
    use super::*;

    #[test]
    fn test_fast_uninitialized_tokens_unreadable_until_initialized_rule_m12() {
        let (_device, _pd, mr) = lone_mr(Limits::DEFAULT, true);
        assert!(mr.is_fast());
        assert_eq!((mr.local_key(), mr.remote_key()), (None, None));
        mr.init_fast(4, true).unwrap();
        let lkey = mr.local_key().unwrap();
        assert_eq!(mr.remote_key(), Some(lkey | REMOTE_BIT));
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_fast_uninitialized_register_and_deregister_refused_rule_m1() {
        let (_device, _pd, mr) = lone_mr(Limits::DEFAULT, true);
        let mut buffer = Buffer::new(64, 0);
        assert_eq!(
            mr.register(buffer.span(), buffer.addr(), ALL),
            Err(MrError::InvalidState)
        );
        assert_eq!(mr.deregister(nothing()), Err(MrError::InvalidState));
        mr.init_fast(1, true).unwrap();
        assert_eq!(
            mr.register(buffer.span(), buffer.addr(), ALL),
            Err(MrError::InvalidState)
        );
        assert_eq!(mr.deregister(nothing()), Err(MrError::InvalidState));
        assert!(mr.local_key().is_some(), "the refusals changed nothing");
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_fast_uninitialized_fast_register_refused_inline_rule_m13() {
        let pair = Pair::new(EngineMode::Inline);
        let lam = LamPages::new(&pair.a.device, 1, 0);
        let mr = Mr::new(&pair.a.pd, true).unwrap();
        assert_eq!(
            Mapping::new(&[lam.page(0)], PAGE_SIZE)
                .access(Access::LOCAL_WRITE)
                .post(&pair.a, &mr),
            Err(PostError::InvalidParameter)
        );
        settle();
        assert!(pair.a.scq.drain().is_empty());
        assert_eq!(pair.a.qp.state(), QpState::Connected);
    }

    #[test]
    fn test_fast_uninitialized_page_count_above_limit_is_implementation_limit_rule_m13() {
        let (_device, _pd, mr) = lone_mr(small_limits(), true);
        assert_eq!(mr.init_fast(17, true), Err(MrError::ImplementationLimit));
        assert_eq!(
            mr.init_fast(u32::MAX, true),
            Err(MrError::ImplementationLimit)
        );
        assert_eq!(mr.init_fast(0, true), Err(MrError::InvalidParameter));
        assert_eq!(mr.local_key(), None);
        mr.init_fast(16, true).unwrap();
        assert!(mr.local_key().is_some());
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_fast_uninitialized_sixteen_pages_always_served_rule_m14() {
        for (mode, pair) in each_mode(Pair::new) {
            assert!(pair.b.device.limits().max_fr_pages >= 16);
            let (lam, mr) = fast_over(&pair.b, 16, 0xAB, 16, true);
            // The pages in reverse order: 16 non-adjacent pages, FBO ≠ 0.
            let map: Vec<(usize, usize)> = (0..16).rev().map(|p| (0, p)).collect();
            let pages: Vec<u64> = map.iter().map(|&(_, p)| lam.page(p)).collect();
            let fbo = 0x123;
            let len = 16 * PAGE - fbo - 1;
            let base = 0x40_0000 + wide(fbo);
            Mapping::new(&pages, wide(len))
                .fbo(wide(fbo))
                .base(base)
                .access(ALL)
                .expect_mapped(&pair.b, &mr);
            let src = expect_write(
                &pair,
                len,
                6,
                base,
                mr.remote_key().unwrap(),
                WcStatus::Success,
            );
            let mut model = alloc::vec![0xAB_u8; 16 * PAGE];
            for (i, &byte) in src.buffer.bytes().iter().enumerate() {
                model[place(&map, fbo, i).1] = byte;
            }
            assert!(
                lam.bytes() == &model[..],
                "{mode:?}: every byte in its page"
            );
            let back = pair.a.buffer(len, 0, Access::LOCAL_WRITE);
            let c = read(
                &pair,
                &[back.sge(0, len32(len))],
                base,
                mr.remote_key().unwrap(),
                WrFlags::empty(),
            );
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert!(back.buffer.bytes() == src.buffer.bytes());
        }
    }
}

mod fast_idle {
    use super::*;

    #[test]
    fn test_fast_idle_initialize_again_keeps_tokens_rule_m13() {
        let pair = Pair::new(EngineMode::Inline);
        let mr = fast(&pair.a, 2, true);
        let (lkey, rkey) = (mr.local_key().unwrap(), mr.remote_key().unwrap());
        mr.init_fast(8, false).unwrap();
        assert_eq!((mr.local_key(), mr.remote_key()), (Some(lkey), Some(rkey)));
        // The new page count applies: 8 pages now fit.
        let lam = LamPages::new(&pair.a.device, 8, 0);
        Mapping::new(&lam.page_list(), 8 * PAGE_SIZE)
            .access(Access::LOCAL_WRITE)
            .expect_mapped(&pair.a, &mr);
        let c = post_invalidate(&pair.a, InvalidateTarget::Mr(Arc::clone(&mr)));
        assert_status(c, Opcode::Invalidate, WcStatus::Success);
        mr.init_fast(1, true).unwrap();
        assert_eq!((mr.local_key(), mr.remote_key()), (Some(lkey), Some(rkey)));
        assert_eq!(
            pair.a.device.live_keys(),
            2,
            "one for the PD, one for the region"
        );
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_fast_idle_remote_rights_on_local_only_region_refused_inline_rule_m15() {
        for (mode, pair) in each_mode(Pair::new) {
            let (lam, mr) = fast_over(&pair.b, 1, 0, 1, false);
            for access in [
                Access::REMOTE_READ,
                Access::REMOTE_WRITE,
                ALL,
                Access::REMOTE_READ | Access::READ_SINK,
            ] {
                assert_eq!(
                    Mapping::new(&[lam.page(0)], PAGE_SIZE)
                        .access(access)
                        .post(&pair.b, &mr),
                    Err(PostError::AccessViolation),
                    "{mode:?} {access:?}"
                );
            }
            settle();
            assert!(pair.b.scq.drain().is_empty(), "no completion for refusals");
            // Local rights are fine, and the remote token then grants nothing.
            Mapping::new(&[lam.page(0)], PAGE_SIZE)
                .access(Access::LOCAL_WRITE)
                .expect_mapped(&pair.b, &mr);
            expect_write(
                &pair,
                16,
                1,
                0,
                mr.remote_key().unwrap(),
                WcStatus::RemoteAccessError,
            );
            assert!(lam.bytes().iter().all(|&b| b == 0));
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_fast_idle_tokens_grant_nothing_before_first_fast_register_rule_m22() {
        let pair = Pair::new(EngineMode::Inline);
        let mr = fast(&pair.b, 1, true);
        let (lkey, rkey) = (mr.local_key().unwrap(), mr.remote_key().unwrap());
        let pd = &pair.b.pd;
        assert_eq!(local(pd, lkey, 0, 1, Access::empty()), Err(Denied::Token));
        assert_eq!(
            remote(pd, pair.b.qp.id(), rkey, 0, 1, Access::empty()),
            Err(Denied::Token)
        );
        expect_write(&pair, 16, 1, 0, rkey, WcStatus::RemoteAccessError);
        assert_terminated(&pair);
    }

    #[test]
    fn test_fast_idle_page_list_checked_inline_rule_m16() {
        let pair = Pair::new(EngineMode::Inline);
        let (lam, mr) = fast_over(&pair.b, 5, 0, 4, true);
        let five = lam.page_list();
        let four = &five[..4];
        let page = PAGE_SIZE;
        // (pages, fbo, len, base): each breaks one rule of M16 or M13.
        let refused: [(&[u64], u64, u64, u64); 8] = [
            (four, 100, 4 * page - 99, 100), // longer than pages × 4096 − FBO
            (four, 0, 4 * page + 1, 0),      // longer than the pages
            (four, 100, 10, 0x10_0000),      // base is not FBO + k × 4096
            (four, 0, 10, 0x10_0001),        // base is not FBO + k × 4096
            (four, page, 10, 0x10_0000),     // FBO beyond the first page
            (&five, 0, page, 0),             // more pages than initialized
            (&[], 0, 0, 0),                  // no page
            (four, 100, page, (u64::MAX - 0xFFF) + 100), // index range wraps
        ];
        for (pages, fbo, len, base) in refused {
            assert_eq!(
                Mapping::new(pages, len)
                    .fbo(fbo)
                    .base(base)
                    .access(ALL)
                    .post(&pair.b, &mr),
                Err(PostError::InvalidParameter),
                "{} pages, fbo {fbo}, len {len}, base {base:#x}",
                pages.len()
            );
        }
        settle();
        assert!(pair.b.scq.drain().is_empty());
        assert_eq!(pair.b.qp.state(), QpState::Connected);
        // The longest legal region: every byte of it is reachable.
        let (fbo, len, base) = (100, 4 * page - 100, 0x10_0000 + 100);
        Mapping::new(four, len)
            .fbo(fbo)
            .base(base)
            .access(ALL)
            .expect_mapped(&pair.b, &mr);
        let src = expect_write(
            &pair,
            4 * PAGE - 100,
            2,
            base,
            mr.remote_key().unwrap(),
            WcStatus::Success,
        );
        assert_eq!(&lam.bytes()[100..4 * PAGE], src.buffer.bytes());
        assert!(
            lam.bytes()[..100]
                .iter()
                .chain(&lam.bytes()[4 * PAGE..])
                .all(|&b| b == 0)
        );
    }

    #[test]
    fn test_fast_idle_base_zero_only_with_zero_fbo_rule_m16() {
        let pair = Pair::new(EngineMode::Inline);
        let (lam, mr) = fast_over(&pair.b, 1, 0, 1, true);
        assert_eq!(
            Mapping::new(&[lam.page(0)], 8)
                .fbo(8)
                .access(ALL)
                .post(&pair.b, &mr),
            Err(PostError::InvalidParameter)
        );
        Mapping::new(&[lam.page(0)], PAGE_SIZE)
            .access(ALL)
            .expect_mapped(&pair.b, &mr);
        let src = expect_write(
            &pair,
            8,
            3,
            4088,
            mr.remote_key().unwrap(),
            WcStatus::Success,
        );
        assert_eq!(&lam.bytes()[4088..], src.buffer.bytes());
    }

    #[test]
    fn test_fast_idle_length_over_max_registration_size_refused_rule_m10() {
        let pair = pair_with(EngineMode::Inline, small_limits());
        let (lam, mr) = fast_over(&pair.b, 5, 0, 16, true);
        assert_eq!(
            Mapping::new(&lam.page_list(), 4 * PAGE_SIZE + 1)
                .access(ALL)
                .post(&pair.b, &mr),
            Err(PostError::InvalidParameter)
        );
        settle();
        assert!(pair.b.scq.drain().is_empty());
        Mapping::new(&lam.page_list(), 4 * PAGE_SIZE)
            .access(ALL)
            .expect_mapped(&pair.b, &mr);
    }

    #[test]
    fn test_fast_idle_page_outside_live_lam_fails_at_execution_rule_m33() {
        for mode in MODES {
            let (unaligned, unmapped) = (0, 1);
            for case in [unaligned, unmapped] {
                let pair = Pair::new(mode);
                let lam = LamPages::new(&pair.b.device, 2, 0);
                // A page-aligned address no LAM covers.
                let outside = Lam::new(&pair.a.device, 1, 0);
                let pages = if case == unaligned {
                    [lam.page(0), lam.page(1) + 8]
                } else {
                    [lam.page(0), outside.page(0)]
                };
                let mr = fast(&pair.b, 2, true);
                let c = Mapping::new(&pages, 2 * PAGE_SIZE)
                    .access(ALL)
                    .post_on(&pair.b, &mr);
                assert_status(c, Opcode::FastRegister, WcStatus::InvalidRequest);
                let lkey = mr.local_key().unwrap();
                assert_eq!(
                    local(&pair.b.pd, lkey, 0, 1, Access::empty()),
                    Err(Denied::Token)
                );
                assert_terminated(&pair);
            }
        }
    }

    #[test]
    fn test_fast_idle_remote_token_readable_before_completion_rule_m17() {
        for (mode, pair) in each_mode(Pair::new) {
            let (lam, mr) = fast_over(&pair.b, 1, 0, 1, true);
            let rkey = mr.remote_key().unwrap();
            // Deferred: held back until a request without the flag (D2), so
            // it certainly has not completed when the token is read.
            Mapping::new(&[lam.page(0)], PAGE_SIZE)
                .access(ALL)
                .flags(WrFlags::DEFER)
                .post(&pair.b, &mr)
                .unwrap();
            assert_eq!(mr.remote_key(), Some(rkey));
            settle();
            assert!(pair.b.scq.drain().is_empty(), "{mode:?}: not rung yet");
            assert_eq!(mr.remote_key(), Some(rkey));
            // Ring with a zero-length Write to the peer.
            let done = ring(&pair);
            assert_eq!(
                statuses(&done),
                [
                    (Opcode::FastRegister, WcStatus::Success),
                    (Opcode::Write, WcStatus::Success)
                ]
            );
            let src = expect_write(&pair, 32, 4, 64, rkey, WcStatus::Success);
            assert_eq!(&lam.bytes()[64..96], src.buffer.bytes());
        }
    }
}

mod fast_mapped {
    use super::*;

    /// A pair whose side b has a fast region mapped over one page of a LAM
    /// at index `base`, with `access`; returns the LAM and the region.
    fn mapped(mode: EngineMode, access: Access) -> (Pair, LamPages, Arc<Mr>) {
        let pair = Pair::new(mode);
        let (lam, mr) = fast_over(&pair.b, 1, 0, 1, true);
        Mapping::new(&[lam.page(0)], PAGE_SIZE)
            .base(0x8000)
            .access(access)
            .expect_mapped(&pair.b, &mr);
        (pair, lam, mr)
    }

    #[test]
    fn test_fast_mapped_non_adjacent_pages_form_one_region_rule_m16() {
        for (mode, pair) in each_mode(Pair::new) {
            let lams = two_lams(&pair.b, 2, [0x11, 0x22]);
            let mr = fast(&pair.b, 3, true);
            let map = [(1, 1), (0, 0), (1, 0)];
            let pages: Vec<u64> = map.iter().map(|&(l, p)| lams[l].page(p)).collect();
            let fbo = 100;
            let len = 3 * PAGE - fbo - 7;
            let base = 0x5000_0000 + wide(fbo);
            let rkey = mr.remote_key().unwrap();
            Mapping::new(&pages, wide(len))
                .fbo(wide(fbo))
                .base(base)
                .access(ALL)
                .expect_mapped(&pair.b, &mr);
            let src = expect_write(&pair, len, 3, base, rkey, WcStatus::Success);
            let mut model = [
                alloc::vec![0x11_u8; 2 * PAGE],
                alloc::vec![0x22_u8; 2 * PAGE],
            ];
            for (i, &byte) in src.buffer.bytes().iter().enumerate() {
                let (lam, at) = place(&map, fbo, i);
                model[lam][at] = byte;
            }
            assert!(lams[0].bytes() == &model[0][..], "{mode:?}");
            assert!(lams[1].bytes() == &model[1][..], "{mode:?}");
            // Write across both joins, then read a run across both back.
            let patch = pair.a.pattern(PAGE + 40, 99, Access::empty());
            let first = PAGE - fbo;
            let at = first - 20;
            let c = write(
                &pair,
                &[patch.sge(0, len32(PAGE + 40))],
                base + wide(at),
                rkey,
            );
            assert_status(c, Opcode::Write, WcStatus::Success);
            for (i, &byte) in patch.buffer.bytes().iter().enumerate() {
                let (lam, off) = place(&map, fbo, at + i);
                model[lam][off] = byte;
            }
            assert!(lams[0].bytes() == &model[0][..]);
            assert!(lams[1].bytes() == &model[1][..]);
            let back = pair.a.buffer(PAGE + 60, 0, Access::LOCAL_WRITE);
            let c = read(
                &pair,
                &[back.sge(0, len32(PAGE + 60))],
                base + wide(at - 10),
                rkey,
                WrFlags::empty(),
            );
            assert_status(c, Opcode::Read, WcStatus::Success);
            for (i, &byte) in back.buffer.bytes().iter().enumerate() {
                let (lam, off) = place(&map, fbo, at - 10 + i);
                assert_eq!(byte, model[lam][off], "byte {i}");
            }
        }
    }

    #[test]
    fn test_fast_mapped_local_sges_cross_page_boundaries_rule_m16() {
        for (mode, pair) in each_mode(Pair::new) {
            let lams = two_lams(&pair.a, 1, [0x33, 0x44]);
            let mr = fast(&pair.a, 2, false);
            let map = [(1, 0), (0, 0)];
            let pages = [lams[1].page(0), lams[0].page(0)];
            let (fbo, base) = (10, 0x7777_0000 + 10);
            Mapping::new(&pages, wide(2 * PAGE - fbo))
                .fbo(wide(fbo))
                .base(base)
                .access(Access::LOCAL_WRITE)
                .expect_mapped(&pair.a, &mr);
            let key = mr.local_key().unwrap();
            // Read from the peer into a run that crosses the join.
            let src = pair.b.pattern(200, 12, Access::REMOTE_READ);
            let at = PAGE - fbo - 50;
            let sink = Sge {
                addr: base + wide(at),
                len: 200,
                key,
            };
            let c = read_of(&pair, &[sink], &src, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            let mut model = [alloc::vec![0x33_u8; PAGE], alloc::vec![0x44_u8; PAGE]];
            for (i, &byte) in src.buffer.bytes().iter().enumerate() {
                let (lam, off) = place(&map, fbo, at + i);
                model[lam][off] = byte;
            }
            assert!(lams[0].bytes() == &model[0][..], "{mode:?}");
            assert!(lams[1].bytes() == &model[1][..], "{mode:?}");
            // Send from a run that crosses it the other way round.
            let recv = pair.b.buffer(300, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(5, &[recv.sge(0, 300)]).unwrap();
            let source = Sge {
                addr: base + wide(at - 100),
                len: 300,
                key,
            };
            assert_eq!(send_received(&pair, &[source]).bytes, 300);
            for (i, &byte) in recv.buffer.bytes().iter().enumerate() {
                let (lam, off) = place(&map, fbo, at - 100 + i);
                assert_eq!(byte, model[lam][off], "byte {i}");
            }
        }
    }

    #[test]
    fn test_fast_mapped_fast_register_again_without_invalidate_fails_rule_m22() {
        for (_, (pair, lam, mr)) in each_mode(|mode| mapped(mode, ALL)) {
            let other = LamPages::new(&pair.b.device, 1, 0x5A);
            let c = Mapping::new(&[other.page(0)], PAGE_SIZE)
                .access(ALL)
                .post_on(&pair.b, &mr);
            assert_status(c, Opcode::FastRegister, WcStatus::InvalidRequest);
            // The first mapping is still the one in place.
            let key = mr.local_key().unwrap();
            assert_eq!(
                local(&pair.b.pd, key, 0x8000, PAGE, Access::LOCAL_WRITE),
                Ok(())
            );
            assert_eq!(
                local(&pair.b.pd, key, 0, 1, Access::empty()),
                Err(Denied::Range)
            );
            assert!(lam.bytes().iter().all(|&b| b == 0));
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_fast_mapped_invalidate_refuses_token_rule_m22() {
        for (mode, (pair, lam, mr)) in each_mode(|mode| mapped(mode, ALL)) {
            let (lkey, rkey) = (mr.local_key().unwrap(), mr.remote_key().unwrap());
            let src = expect_write(&pair, 16, 1, 0x8000, rkey, WcStatus::Success);
            let c = post_invalidate(&pair.b, InvalidateTarget::Mr(Arc::clone(&mr)));
            assert_status(c, Opcode::Invalidate, WcStatus::Success);
            assert_eq!(
                local(&pair.b.pd, lkey, 0x8000, 1, Access::empty()),
                Err(Denied::Token)
            );
            let patch = pair.a.pattern(16, 50, Access::empty());
            let c = write(&pair, &[patch.sge(0, 16)], 0x8000, rkey);
            expect_failed(&pair, c, Opcode::Write, WcStatus::RemoteAccessError);
            assert_eq!(&lam.bytes()[..16], src.buffer.bytes(), "{mode:?}");
            assert!(lam.bytes()[16..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_fast_mapped_segment_of_an_earlier_mapping_reads_nothing_rule_m22() {
        let (pair, _lam, mr) = mapped(EngineMode::Inline, ALL);
        let lam2 = LamPages::new(&pair.b.device, 1, 0);
        let sge = Sge {
            addr: 0x8000,
            len: 64,
            key: mr.local_key().unwrap(),
        };
        let seg = pair
            .b
            .device
            .resolve_local(&pair.b.pd, &sge, Access::LOCAL_WRITE)
            .unwrap();
        assert!(seg.run(0, 64).is_some());
        mr.invalidate().unwrap();
        assert!(seg.run(0, 64).is_none(), "invalidated under the segment");
        Mapping::new(&[lam2.page(0)], PAGE_SIZE)
            .base(0x8000)
            .access(ALL)
            .expect_mapped(&pair.b, &mr);
        assert!(seg.run(0, 64).is_none(), "a new mapping is not the old one");
    }

    #[test]
    fn test_fast_mapped_tokens_stay_the_same_across_cycles_rule_m35() {
        for (mode, pair) in each_mode(Pair::new) {
            let (lam, mr) = fast_over(&pair.b, 4, 0, 2, true);
            // Read once, right after initialization.
            let (lkey, rkey) = (mr.local_key().unwrap(), mr.remote_key().unwrap());
            let src = pair.a.pattern(64, 7, Access::empty());
            let mut model = alloc::vec![0_u8; 4 * PAGE];
            for (cycle, (page, fbo)) in [(0_usize, 0_usize), (2, 300), (1, 4000), (3, 1)]
                .into_iter()
                .enumerate()
            {
                let base = 0x1000_0000 * wide(cycle + 1) + wide(fbo);
                let pages = [lam.page(page)];
                let len = PAGE - fbo;
                Mapping::new(&pages, wide(len))
                    .fbo(wide(fbo))
                    .base(base)
                    .access(ALL)
                    .expect_mapped(&pair.b, &mr);
                assert_eq!((mr.local_key(), mr.remote_key()), (Some(lkey), Some(rkey)));
                let n = 64.min(len);
                let c = write(&pair, &[src.sge(0, len32(n))], base, rkey);
                assert_status(c, Opcode::Write, WcStatus::Success);
                let at = page * PAGE + fbo;
                model[at..at + n].copy_from_slice(&src.buffer.bytes()[..n]);
                assert!(lam.bytes() == &model[..], "{mode:?} cycle {cycle}");
                let c = post_invalidate(&pair.b, InvalidateTarget::Mr(Arc::clone(&mr)));
                assert_status(c, Opcode::Invalidate, WcStatus::Success);
                assert_eq!(
                    local(&pair.b.pd, lkey, base, 1, Access::empty()),
                    Err(Denied::Token)
                );
                assert_eq!(
                    remote_on(&pair.b, rkey, base, 1, Access::REMOTE_WRITE),
                    Err(Denied::Token)
                );
            }
        }
    }

    #[test]
    fn test_fast_mapped_read_local_invalidate_invalidates_first_sge_rule_m26() {
        for (mode, pair) in each_mode(Pair::new) {
            let (lam, mr) = fast_over(&pair.a, 2, 0, 2, false);
            let base = 0x9000_0000;
            Mapping::new(&lam.page_list(), 2 * PAGE_SIZE)
                .base(base)
                .access(Access::LOCAL_WRITE)
                .expect_mapped(&pair.a, &mr);
            let other = pair.a.buffer(100, 0, Access::LOCAL_WRITE);
            let src = pair.b.pattern(400, 5, Access::REMOTE_READ);
            let key = mr.local_key().unwrap();
            let sges = [
                Sge {
                    addr: base + 4000,
                    len: 300,
                    key,
                },
                other.sge(0, 100),
            ];
            let c = read(
                &pair,
                &sges,
                src.raddr(0),
                src.rkey(),
                WrFlags::READ_LOCAL_INVALIDATE,
            );
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(
                &lam.bytes()[4000..4300],
                &src.buffer.bytes()[..300],
                "{mode:?}"
            );
            assert_eq!(other.buffer.bytes(), &src.buffer.bytes()[300..]);
            assert_eq!(
                local(&pair.a.pd, key, base, 1, Access::empty()),
                Err(Denied::Token)
            );
            // Only the first SGE's token.
            let other_key = other.mr.local_key().unwrap();
            assert_eq!(
                local(
                    &pair.a.pd,
                    other_key,
                    other.raddr(0),
                    100,
                    Access::LOCAL_WRITE
                ),
                Ok(())
            );
            // Invalidated, so it may be fast-registered again at once (M35:
            // under the same token).
            Mapping::new(&lam.page_list(), 2 * PAGE_SIZE)
                .base(base)
                .access(Access::LOCAL_WRITE)
                .expect_mapped(&pair.a, &mr);
            assert_eq!(mr.local_key(), Some(key));
        }
    }

    #[test]
    fn test_fast_mapped_read_past_end_fails_remote_operation_error_rule_p20() {
        for (mode, pair) in each_mode(Pair::new) {
            let (lam, mr) = fast_over(&pair.b, 2, 0x77, 2, true);
            let base = 0x2000_0000;
            Mapping::new(&lam.page_list(), 5000)
                .base(base)
                .access(Access::REMOTE_READ)
                .expect_mapped(&pair.b, &mr);
            let dst = pair.a.buffer(200, 0, Access::LOCAL_WRITE);
            let c = read(
                &pair,
                &[dst.sge(0, 200)],
                base + 4900,
                mr.remote_key().unwrap(),
                WrFlags::empty(),
            );
            expect_failed(&pair, c, Opcode::Read, WcStatus::RemoteOperationError);
            assert!(dst.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
        }
    }

    /// Side a writes 64 bytes into b's fast region, then sends a
    /// SendAndInvalidate naming its remote token; checks both completions.
    fn send_and_invalidate(mode: EngineMode) -> (Pair, LamPages, Arc<Mr>, Registered) {
        let (pair, lam, mr) = mapped(mode, ALL);
        let rkey = mr.remote_key().unwrap();
        let src = expect_write(&pair, 64, 1, 0x8000, rkey, WcStatus::Success);
        let recv = pair.b.buffer(16, 0, Access::LOCAL_WRITE);
        pair.b.qp.post_receive(21, &[recv.sge(0, 16)]).unwrap();
        pair.a.send(22, &[src.sge(0, 16)], Some(rkey)).unwrap();
        settle();
        // P22: the sender's completion is a Send.
        let sent = one(&pair.a.scq);
        assert_status(sent, Opcode::Send, WcStatus::Success);
        assert_eq!(sent.request_context, 22);
        // C2: the receiver learns which token was invalidated.
        let got = one(&pair.b.rcq);
        assert_status(got, Opcode::ReceiveAndInvalidate, WcStatus::Success);
        assert_eq!(
            (got.invalidated_key, got.bytes, got.request_context),
            (rkey, 16, 21)
        );
        assert_eq!(recv.buffer.bytes(), &src.buffer.bytes()[..16]);
        let lkey = mr.local_key().unwrap();
        assert_eq!(
            local(&pair.b.pd, lkey, 0x8000, 1, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(&lam.bytes()[..64], src.buffer.bytes());
        (pair, lam, mr, src)
    }

    #[test]
    fn test_fast_mapped_send_and_invalidate_refuses_token_at_receiver_rule_m24() {
        for (mode, (pair, lam, mr, src)) in each_mode(send_and_invalidate) {
            let patch = pair.a.pattern(64, 77, Access::empty());
            let c = write(&pair, &[patch.sge(0, 64)], 0x8000, mr.remote_key().unwrap());
            expect_failed(&pair, c, Opcode::Write, WcStatus::RemoteAccessError);
            assert_eq!(&lam.bytes()[..64], src.buffer.bytes(), "{mode:?}");
            assert!(lam.bytes()[64..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_fast_mapped_invalidate_after_send_and_invalidate_fails_as_usual_rule_c2() {
        for (mode, (pair, _lam, mr, _src)) in each_mode(send_and_invalidate) {
            let c = post_invalidate(&pair.b, InvalidateTarget::Mr(Arc::clone(&mr)));
            assert_eq!(c.opcode, Opcode::Invalidate);
            assert!(!c.status.is_success(), "{mode:?}: {c:?}");
        }
    }

    #[test]
    fn test_fast_mapped_send_and_invalidate_of_invalid_token_aborts_rule_m24() {
        for (mode, (pair, lam, mr)) in each_mode(|mode| mapped(mode, ALL)) {
            let recv = pair.b.buffer(16, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(31, &[recv.sge(0, 16)]).unwrap();
            let src = pair.a.pattern(16, 2, Access::empty());
            let bogus = mr.remote_key().unwrap().wrapping_add(1 << 16);
            pair.a.send(32, &[src.sge(0, 16)], Some(bogus)).unwrap();
            settle();
            let sent = one(&pair.a.scq);
            assert_eq!(sent.opcode, Opcode::Send);
            assert!(!sent.status.is_success(), "{mode:?}: {sent:?}");
            let got = one(&pair.b.rcq);
            assert!(!got.status.is_success(), "{got:?}");
            assert_eq!(got.invalidated_key, 0);
            // The region named by the real token is untouched and still mapped.
            assert_eq!(
                local(
                    &pair.b.pd,
                    mr.local_key().unwrap(),
                    0x8000,
                    1,
                    Access::empty()
                ),
                Ok(())
            );
            assert!(lam.bytes().iter().all(|&b| b == 0));
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_fast_mapped_released_lam_refuses_access_rule_m32() {
        for (mode, pair) in each_mode(Pair::new) {
            let mut lam = Lam::new(&pair.b.device, 1, 0x66);
            let mr = fast(&pair.b, 1, true);
            Mapping::new(&[lam.page(0)], PAGE_SIZE)
                .access(ALL)
                .expect_mapped(&pair.b, &mr);
            assert!(lam.release());
            expect_write_error(&pair, 32, 1, 0, mr.remote_key().unwrap(), mode);
            assert!(
                lam.bytes().iter().all(|&b| b == 0x66),
                "the memory was not touched"
            );
        }
    }

    #[test]
    fn test_fast_mapped_remote_write_implies_local_write_rule_m7() {
        let (pair, _lam, mr) = mapped(EngineMode::Inline, Access::REMOTE_WRITE);
        let (key, rkey, pd) = (
            mr.local_key().unwrap(),
            mr.remote_key().unwrap(),
            &pair.b.pd,
        );
        assert_eq!(local(pd, key, 0x8000, 8, Access::LOCAL_WRITE), Ok(()));
        assert_eq!(
            remote(pd, pair.b.qp.id(), rkey, 0x8000, 8, Access::REMOTE_READ),
            Err(Denied::Rights)
        );
        // Without any right, local read only.
        let (pair, _lam, mr) = mapped(EngineMode::Inline, Access::empty());
        let (key, pd) = (mr.local_key().unwrap(), &pair.b.pd);
        assert_eq!(local(pd, key, 0x8000, 8, Access::empty()), Ok(()));
        assert_eq!(
            local(pd, key, 0x8000, 8, Access::LOCAL_WRITE),
            Err(Denied::Rights)
        );
    }

    #[test]
    fn test_fast_mapped_read_sink_flag_accepted_rule_m9() {
        for (mode, pair) in each_mode(Pair::new) {
            let (lam, mr) = fast_over(&pair.a, 1, 0, 1, false);
            let access = Access::READ_SINK | Access::LOCAL_WRITE;
            Mapping::new(&[lam.page(0)], PAGE_SIZE)
                .access(access)
                .expect_mapped(&pair.a, &mr);
            let src = pair.b.pattern(128, 3, Access::REMOTE_READ);
            let sink = Sge {
                addr: 7,
                len: 128,
                key: mr.local_key().unwrap(),
            };
            let c = read_of(&pair, &[sink], &src, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(&lam.bytes()[7..135], src.buffer.bytes(), "{mode:?}");
        }
    }

    #[test]
    fn test_fast_mapped_chained_fast_register_invalidate_fast_register_maps_latest_rule_m16() {
        for (mode, pair) in each_mode(Pair::new) {
            let first = LamPages::new(&pair.b.device, 1, 0x01);
            let second = LamPages::new(&pair.b.device, 1, 0x02);
            let mr = fast(&pair.b, 1, true);
            let post = |pages: &[u64], base: u64, flags: WrFlags| {
                Mapping::new(pages, PAGE_SIZE)
                    .base(base)
                    .access(ALL)
                    .flags(flags)
                    .post(&pair.b, &mr)
                    .unwrap();
            };
            // One chain (D2): FastRegister, Invalidate, FastRegister.
            post(&[first.page(0)], 0x1_0000, WrFlags::DEFER);
            pair.b
                .qp
                .post_invalidate(2, InvalidateTarget::Mr(Arc::clone(&mr)), WrFlags::DEFER)
                .unwrap();
            post(&[second.page(0)], 0x2_0000, WrFlags::empty());
            settle();
            let done = pair.b.scq.drain();
            assert!(
                done.iter().all(|c| c.status.is_success()),
                "{mode:?}: {done:?}"
            );
            assert_eq!(done.len(), 3);
            let src = expect_write(
                &pair,
                32,
                9,
                0x2_0000,
                mr.remote_key().unwrap(),
                WcStatus::Success,
            );
            assert_eq!(&second.bytes()[..32], src.buffer.bytes());
            assert!(first.bytes().iter().all(|&b| b == 0x01));
        }
    }
}

mod window_unbound {
    use super::*;

    #[test]
    fn test_window_unbound_starts_unbound_rule_m21() {
        let (device, pd) = lone_pd(Limits::DEFAULT);
        let mw = Mw::new(&pd).unwrap();
        assert_eq!(mw.remote_key(), 0);
        assert_eq!(mw.invalidate(), Err(WcStatus::InvalidRequest));
        assert_eq!(device.live_keys(), 1, "an unbound window holds no token");
        assert_eq!(
            remote(&pd, 0, REMOTE_BIT, 0, 0, Access::empty()),
            Err(Denied::Token)
        );
    }

    #[test]
    fn test_window_unbound_bind_outside_region_refused_inline_rule_m18() {
        let pair = Pair::new(EngineMode::Inline);
        let (reg, mw) = window_over(&pair.b, PAGE, ALL);
        let base = reg.raddr(0);
        let keys = pair.b.device.live_keys();
        for (at, len) in [
            (base - 1, 16),
            (base + wide(PAGE) - 15, 16),
            (base, wide(PAGE) + 1),
            (base, 0),
            (0, 16),
            (u64::MAX - 7, 16),
        ] {
            assert_eq!(
                Binding::new(&reg.mr, &mw, at, len).post(&pair.b),
                Err(PostError::InvalidParameter),
                "{at:#x}+{len}"
            );
        }
        settle();
        assert!(pair.b.scq.drain().is_empty());
        assert_eq!(mw.remote_key(), 0);
        assert_eq!(
            pair.b.device.live_keys(),
            keys,
            "refusals leave no token behind"
        );
        // The whole region is fine.
        let key = bind(&pair.b, &reg.mr, &mw, base, wide(PAGE), ALL);
        assert_ne!(key, 0);
    }

    #[test]
    fn test_window_unbound_remote_write_on_region_without_local_write_refused_rule_m19() {
        for (mode, pair) in each_mode(Pair::new) {
            let (reg, mw) = window_over(&pair.b, 64, Access::REMOTE_READ);
            assert_eq!(
                Binding::new(&reg.mr, &mw, reg.raddr(0), 64)
                    .access(Access::REMOTE_WRITE)
                    .post(&pair.b),
                Err(PostError::AccessViolation)
            );
            settle();
            assert!(pair.b.scq.drain().is_empty());
            assert_eq!(mw.remote_key(), 0);
            // Remote read only is fine.
            let key = bind(&pair.b, &reg.mr, &mw, reg.raddr(0), 64, Access::REMOTE_READ);
            assert_ne!(key, 0, "{mode:?}");
        }
    }

    #[test]
    fn test_window_unbound_longer_than_max_window_size_refused_rule_m10() {
        for (mode, pair) in each_mode(|mode| pair_with(mode, small_limits())) {
            let (reg, mw) = window_over(&pair.b, 3 * PAGE, Access::LOCAL_WRITE);
            assert_eq!(
                Binding::new(&reg.mr, &mw, reg.raddr(0), 2 * PAGE_SIZE + 1).post(&pair.b),
                Err(PostError::InvalidParameter)
            );
            // Exactly the largest window: every byte of it is reachable.
            let key = bind(&pair.b, &reg.mr, &mw, reg.raddr(100), 2 * PAGE_SIZE, ALL);
            let src = expect_write(&pair, 2 * PAGE, 4, reg.raddr(100), key, WcStatus::Success);
            let got = reg.buffer.bytes();
            assert_eq!(&got[100..100 + 2 * PAGE], src.buffer.bytes(), "{mode:?}");
            assert!(
                got[..100]
                    .iter()
                    .chain(&got[100 + 2 * PAGE..])
                    .all(|&b| b == 0)
            );
        }
    }

    #[test]
    fn test_window_unbound_token_readable_when_bind_returns_rule_m20() {
        for (mode, pair) in each_mode(Pair::new) {
            let (reg, mw) = window_over(&pair.b, 256, Access::LOCAL_WRITE);
            Binding::new(&reg.mr, &mw, reg.raddr(0), 256)
                .flags(WrFlags::DEFER)
                .post(&pair.b)
                .unwrap();
            let key = mw.remote_key();
            assert_ne!(key, 0);
            assert_ne!(key & REMOTE_BIT, 0, "a remote token");
            settle();
            assert!(pair.b.scq.drain().is_empty(), "{mode:?}: not rung yet");
            // Ring it, then use the token read before completion.
            let done = ring(&pair);
            assert_eq!(done.len(), 2);
            assert_status(done[0], Opcode::Bind, WcStatus::Success);
            assert_eq!(mw.remote_key(), key);
            let src = expect_write(&pair, 256, 2, reg.raddr(0), key, WcStatus::Success);
            assert_eq!(reg.buffer.bytes(), src.buffer.bytes());
        }
    }

    #[test]
    fn test_window_unbound_bind_across_protection_domains_refused_rule_m18() {
        let pair = Pair::new(EngineMode::Inline);
        let other_pd = Pd::new(&pair.b.device).unwrap();
        let foreign = Registered::new(&other_pd, Buffer::new(64, 0), ALL);
        let mine = pair.b.buffer(64, 0, ALL);
        let mw = Mw::new(&pair.b.pd).unwrap();
        let foreign_mw = Mw::new(&other_pd).unwrap();
        assert_eq!(
            Binding::new(&foreign.mr, &mw, foreign.raddr(0), 64).post(&pair.b),
            Err(PostError::InvalidParameter)
        );
        assert_eq!(
            Binding::new(&mine.mr, &foreign_mw, mine.raddr(0), 64).post(&pair.b),
            Err(PostError::InvalidParameter)
        );
        settle();
        assert!(pair.b.scq.drain().is_empty());
        assert_eq!((mw.remote_key(), foreign_mw.remote_key()), (0, 0));
    }
}

mod window_bound {
    use super::*;

    /// A pair whose side b has a 3-page region (local write only) and a
    /// window bound over `[1000, 6000)` of it with `access`.
    fn bound(mode: EngineMode, access: Access) -> (Pair, Registered, Window, u32) {
        let pair = Pair::new(mode);
        let (reg, mw) = window_over(&pair.b, 3 * PAGE, Access::LOCAL_WRITE);
        let key = bind(&pair.b, &reg.mr, &mw, reg.raddr(1000), 5000, access);
        (pair, reg, mw, key)
    }

    /// Settles and expects `side`'s chain posted by [`rebind`] to complete,
    /// the Invalidate and then the Bind, both with `status`.
    #[track_caller]
    fn expect_rebound(side: &Side, status: WcStatus, mode: EngineMode) {
        settle();
        let done = side.scq.drain();
        assert_eq!(
            statuses(&done),
            [(Opcode::Invalidate, status), (Opcode::Bind, status)],
            "{mode:?}"
        );
    }

    /// Expects the binding `bound` made to stand after a rebind that did not
    /// run: `mw` still has its token `key`, which grants remote write on
    /// `len` bytes at 1000 of `reg`, and the device holds the `keys` tokens
    /// it held before the rebind (the Bind's own token is gone).
    #[track_caller]
    fn expect_first_binding(
        side: &Side,
        reg: &Registered,
        mw: &Mw,
        (key, keys): (u32, usize),
        len: usize,
    ) {
        assert_eq!(mw.remote_key(), key, "still the first binding");
        assert_eq!(side.device.live_keys(), keys, "the Bind's token is gone");
        assert_eq!(
            remote_on(side, key, reg.raddr(1000), len, Access::REMOTE_WRITE),
            Ok(())
        );
    }

    /// Posts on `side`, as one chain (D2), an Invalidate of `mw` and a Bind
    /// of it over the first 64 bytes of `reg` for remote write, the Bind with
    /// `flags` (M21: a bound window is rebound only after an Invalidate).
    fn rebind(side: &Side, reg: &Registered, mw: &Arc<Mw>, flags: WrFlags) {
        side.qp
            .post_invalidate(1, InvalidateTarget::Mw(Arc::clone(mw)), WrFlags::DEFER)
            .unwrap();
        Binding::new(&reg.mr, mw, reg.raddr(0), 64)
            .access(Access::REMOTE_WRITE)
            .flags(flags)
            .post(side)
            .unwrap();
    }

    #[test]
    fn test_window_bound_peer_reaches_window_range_with_its_rights_rule_m18() {
        for (mode, (pair, reg, _mw, key)) in
            each_mode(|mode| bound(mode, Access::REMOTE_READ | Access::REMOTE_WRITE))
        {
            let src = expect_write(&pair, 5000, 3, reg.raddr(1000), key, WcStatus::Success);
            let got = reg.buffer.bytes();
            assert_eq!(&got[1000..6000], src.buffer.bytes(), "{mode:?}");
            assert!(got[..1000].iter().chain(&got[6000..]).all(|&b| b == 0));
            let back = pair.a.buffer(100, 0, Access::LOCAL_WRITE);
            let c = read(
                &pair,
                &[back.sge(0, 100)],
                reg.raddr(5900),
                key,
                WrFlags::empty(),
            );
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(back.buffer.bytes(), &src.buffer.bytes()[4900..]);
        }
    }

    #[test]
    fn test_window_bound_access_outside_window_refused_rule_m34() {
        for mode in MODES {
            // Inside the region, outside the window: before, across the end.
            for (at, len) in [(999, 1), (5990, 11), (6000, 1), (0, 16)] {
                let (pair, reg, _mw, key) = bound(mode, Access::REMOTE_READ | Access::REMOTE_WRITE);
                expect_write(
                    &pair,
                    len,
                    3,
                    reg.raddr(wide(at)),
                    key,
                    WcStatus::RemoteOperationError,
                );
                assert!(
                    reg.buffer.bytes().iter().all(|&b| b == 0),
                    "{mode:?} {at}+{len}"
                );
                assert_terminated(&pair);
            }
        }
    }

    #[test]
    fn test_window_bound_missing_right_refused_rule_m34() {
        for (mode, (pair, reg, _mw, key)) in each_mode(|mode| bound(mode, Access::REMOTE_READ)) {
            expect_write(
                &pair,
                16,
                3,
                reg.raddr(1000),
                key,
                WcStatus::RemoteAccessError,
            );
            assert!(reg.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_window_bound_region_token_grants_only_the_region_rights_rule_m18() {
        for mode in MODES {
            // The region itself has no remote right: its own token is refused
            // where the window's is honoured.
            let (pair, reg, _mw, key) = bound(mode, Access::REMOTE_WRITE);
            let src = expect_write(&pair, 16, 3, reg.raddr(2000), key, WcStatus::Success);
            let c = write(&pair, &[src.sge(0, 16)], reg.raddr(3000), reg.rkey());
            assert_status(c, Opcode::Write, WcStatus::RemoteAccessError);
            let got = reg.buffer.bytes();
            assert_eq!(&got[2000..2016], src.buffer.bytes(), "{mode:?}");
            assert!(got[3000..3016].iter().all(|&b| b == 0));
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_window_bound_rebind_without_invalidate_fails_and_keeps_binding_rule_m21() {
        for (mode, (pair, reg, mw, key)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            let keys = pair.b.device.live_keys();
            // Accepted when posted (an Invalidate could be ahead of it, D2),
            // refused when it runs: the window is still bound.
            Binding::new(&reg.mr, &mw, reg.raddr(0), 16)
                .post(&pair.b)
                .unwrap();
            settle();
            let c = one(&pair.b.scq);
            assert_eq!(c.opcode, Opcode::Bind);
            assert!(!c.status.is_success(), "{mode:?}: {c:?}");
            expect_first_binding(&pair.b, &reg, &mw, (key, keys), 16);
        }
    }

    #[test]
    fn test_window_bound_invalidate_and_rebind_in_one_chain_rule_m21() {
        for (mode, (pair, reg, mw, old)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            rebind(&pair.b, &reg, &mw, WrFlags::empty());
            // M20: the new token is readable as soon as the Bind returns.
            let new = mw.remote_key();
            assert_ne!(new, old);
            expect_rebound(&pair.b, WcStatus::Success, mode);
            assert_eq!(mw.remote_key(), new);
            assert_eq!(
                remote_on(&pair.b, old, reg.raddr(1000), 1, Access::empty()),
                Err(Denied::Token)
            );
            let src = expect_write(&pair, 64, 1, reg.raddr(0), new, WcStatus::Success);
            assert_eq!(&reg.buffer.bytes()[..64], src.buffer.bytes());
            assert!(reg.buffer.bytes()[64..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_window_bound_flushed_rebind_chain_leaves_first_binding_rule_m21() {
        for (mode, (pair, reg, mw, old)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            let keys = pair.b.device.live_keys();
            rebind(&pair.b, &reg, &mw, WrFlags::DEFER);
            assert_ne!(mw.remote_key(), old);
            pair.b.qp.flush();
            expect_rebound(&pair.b, WcStatus::Cancelled, mode);
            // Neither ran: the first binding stands, the Bind's token is gone.
            expect_first_binding(&pair.b, &reg, &mw, (old, keys), 1);
        }
    }

    #[test]
    fn test_window_bound_invalidate_then_rebind_gives_new_token_rule_m21() {
        for (mode, (pair, reg, mw, old)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            let c = post_invalidate(&pair.b, InvalidateTarget::Mw(Arc::clone(&mw)));
            assert_status(c, Opcode::Invalidate, WcStatus::Success);
            // M22: the old token grants nothing.
            assert_eq!(
                remote_on(&pair.b, old, reg.raddr(1000), 1, Access::empty()),
                Err(Denied::Token)
            );
            // Bound again, to another region: a new token.
            let second = pair.b.buffer(64, 0, Access::LOCAL_WRITE);
            let new = bind(
                &pair.b,
                &second.mr,
                &mw,
                second.raddr(0),
                64,
                Access::REMOTE_WRITE,
            );
            assert_ne!(new, old);
            let src = expect_write(&pair, 64, 1, second.raddr(0), new, WcStatus::Success);
            assert_eq!(second.buffer.bytes(), src.buffer.bytes(), "{mode:?}");
            // M23: the invalidated token ends the connection.
            let c = write(&pair, &[src.sge(0, 16)], reg.raddr(1000), old);
            expect_failed(&pair, c, Opcode::Write, WcStatus::RemoteAccessError);
            assert!(reg.buffer.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_window_bound_send_and_invalidate_unbinds_window_rule_m24() {
        for (mode, (pair, reg, mw, key)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            let recv = pair.b.buffer(8, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(1, &[recv.sge(0, 8)]).unwrap();
            let src = pair.a.pattern(8, 1, Access::empty());
            pair.a.send(2, &[src.sge(0, 8)], Some(key)).unwrap();
            settle();
            assert_status(one(&pair.a.scq), Opcode::Send, WcStatus::Success);
            let got = one(&pair.b.rcq);
            assert_status(got, Opcode::ReceiveAndInvalidate, WcStatus::Success);
            assert_eq!(got.invalidated_key, key, "{mode:?}");
            // Unbound: it may be bound again, under a new token.
            let new = bind(&pair.b, &reg.mr, &mw, reg.raddr(0), 8, Access::REMOTE_WRITE);
            assert_ne!(new, key);
            let c = write(&pair, &[src.sge(0, 8)], reg.raddr(1000), key);
            expect_failed(&pair, c, Opcode::Write, WcStatus::RemoteAccessError);
            assert!(reg.buffer.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_window_bound_access_arriving_on_another_qp_refused_rule_m21() {
        let (pair, reg, _mw, key) = bound(EngineMode::Inline, Access::REMOTE_WRITE);
        // A second connection whose passive QP shares the window's PD.
        let a2 = Side::new(&pair.a.device, 0xA2, CONFIG);
        let (scq, rcq) = (TestCq::new(16), TestCq::new(16));
        let b2 = Qp::new(&pair.b.pd, &rcq.cq, &scq.cq, None, CONFIG).unwrap();
        qp::connect(&a2.qp, &b2, (16, 16), (16, 16)).unwrap();
        let src = Registered::new(&a2.pd, Buffer::pattern(16, 1), Access::empty());
        a2.qp
            .post_write(
                1,
                Payload::Sges(&[src.sge(0, 16)]),
                reg.raddr(1000),
                key,
                WrFlags::empty(),
            )
            .unwrap();
        settle();
        assert_status(one(&a2.scq), Opcode::Write, WcStatus::RemoteAccessError);
        assert!(reg.buffer.bytes().iter().all(|&b| b == 0));
        // Through the QP it is bound to, it works.
        let mine = pair.a.pattern(16, 1, Access::empty());
        let c = write(&pair, &[mine.sge(0, 16)], reg.raddr(1000), key);
        assert_status(c, Opcode::Write, WcStatus::Success);
        assert_eq!(&reg.buffer.bytes()[1000..1016], mine.buffer.bytes());
        a2.qp.close();
        b2.close();
    }

    #[test]
    fn test_window_bound_deregistered_region_refuses_window_rule_m11() {
        for (mode, (pair, reg, _mw, key)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            assert_eq!(reg.mr.deregister(nothing()), Ok(Progress::Done));
            expect_write_error(&pair, 16, 1, reg.raddr(1000), key, mode);
            assert!(reg.buffer.bytes().iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn test_window_bound_region_registered_again_not_reachable_through_old_window_rule_m34() {
        for (mode, (pair, reg, mw, key)) in each_mode(|mode| bound(mode, Access::REMOTE_WRITE)) {
            assert_eq!(reg.mr.deregister(nothing()), Ok(Progress::Done));
            // The region is registered again, over other memory, at the same
            // index: the window was never bound to that registration.
            let mut fresh = Buffer::new(3 * PAGE, 0);
            reg.mr
                .register(fresh.span(), reg.raddr(0), Access::LOCAL_WRITE)
                .unwrap();
            expect_write_error(&pair, 16, 1, reg.raddr(1000), key, mode);
            assert!(
                fresh.bytes().iter().all(|&b| b == 0),
                "{mode:?}: new registration written"
            );
            mw.close();
            assert_eq!(reg.mr.close(nothing()), Progress::Done);
        }
    }
}

mod privileged {
    use super::*;

    #[test]
    fn test_privileged_local_access_by_logical_address_rule_m27() {
        for (mode, pair) in each_mode(Pair::new) {
            let mut lam = Lam::new(&pair.a.device, 3, 0);
            let key = pair.a.pd.privileged_key();
            // A Read lands in LAM memory across a page join (M9: a
            // privileged buffer may be a Read sink).
            let src = pair.b.pattern(300, 4, Access::REMOTE_READ);
            let sink = Sge {
                addr: lam.page(0) + 3900,
                len: 300,
                key,
            };
            let c = read_of(&pair, &[sink], &src, 0);
            assert_status(c, Opcode::Read, WcStatus::Success);
            assert_eq!(&lam.bytes()[3900..4200], src.buffer.bytes(), "{mode:?}");
            assert!(
                lam.bytes()[..3900]
                    .iter()
                    .chain(&lam.bytes()[4200..])
                    .all(|&b| b == 0)
            );
            // And a Send reads from it across the next join.
            let recv = pair.b.buffer(400, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(1, &[recv.sge(0, 400)]).unwrap();
            let source = Sge {
                addr: lam.page(1) + 3800,
                len: 400,
                key,
            };
            assert_eq!(send_received(&pair, &[source]).bytes, 400);
            assert_eq!(recv.buffer.bytes(), &lam.bytes()[PAGE + 3800..PAGE + 4200]);
            assert!(lam.release());
        }
    }

    #[test]
    fn test_privileged_address_outside_live_lam_refused_rule_m27() {
        let pair = Pair::new(EngineMode::Inline);
        let lam = LamPages::new(&pair.a.device, 2, 0);
        let (pd, key) = (&pair.a.pd, pair.a.pd.privileged_key());
        let need = Access::LOCAL_WRITE;
        assert_eq!(local(pd, key, lam.page(0), 2 * PAGE, need), Ok(()));
        assert_eq!(local(pd, key, lam.page(0) - 1, 1, need), Err(Denied::Range));
        assert_eq!(
            local(pd, key, lam.page(1) + 4000, 97, need),
            Err(Denied::Range)
        );
        let unmapped = Buffer::new(64, 0);
        assert_eq!(local(pd, key, unmapped.addr(), 8, need), Err(Denied::Range));
        assert_eq!(local(pd, key, 0, 8, need), Err(Denied::Range));
        // On the data path: the request fails locally.
        let dst = pair.b.buffer(16, 0, ALL);
        let sge = Sge {
            addr: unmapped.addr(),
            len: 16,
            key,
        };
        let c = write(&pair, &[sge], dst.raddr(0), dst.rkey());
        expect_failed(&pair, c, Opcode::Write, WcStatus::LocalAccessError);
        assert!(dst.buffer.bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn test_privileged_token_never_grants_remote_access_rule_m27() {
        for mode in MODES {
            for remote_form in [false, true] {
                let pair = Pair::new(mode);
                let lam = LamPages::new(&pair.b.device, 1, 0);
                let privileged = pair.b.pd.privileged_key();
                let key = if remote_form {
                    privileged | REMOTE_BIT
                } else {
                    privileged
                };
                assert_eq!(
                    remote_on(&pair.b, key, lam.page(0), 8, Access::empty()),
                    Err(Denied::Token)
                );
                expect_write(&pair, 16, 1, lam.page(0), key, WcStatus::RemoteAccessError);
                assert!(lam.bytes().iter().all(|&b| b == 0), "{mode:?}");
                assert_terminated(&pair);
            }
        }
    }

    #[test]
    fn test_privileged_token_of_another_pd_refused_rule_m27() {
        let (device, pd) = lone_pd(Limits::DEFAULT);
        let other = Pd::new(&device).unwrap();
        assert_ne!(pd.privileged_key(), other.privileged_key());
        let lam = LamPages::new(&device, 1, 0);
        assert_eq!(
            local(
                &pd,
                pd.privileged_key(),
                lam.page(0),
                8,
                Access::LOCAL_WRITE
            ),
            Ok(())
        );
        assert_eq!(
            local(&pd, other.privileged_key(), lam.page(0), 8, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(
            local(
                &pd,
                pd.privileged_key() | REMOTE_BIT,
                lam.page(0),
                8,
                Access::empty()
            ),
            Err(Denied::Token)
        );
    }

    #[test]
    fn test_privileged_released_lam_refused_rule_m32() {
        let (device, pd) = lone_pd(Limits::DEFAULT);
        let key = pd.privileged_key();
        let mut lam = Lam::new(&device, 2, 0x3C);
        assert_eq!(device.live_lams(), 1);
        assert_eq!(
            local(&pd, key, lam.page(1), PAGE, Access::LOCAL_WRITE),
            Ok(())
        );
        assert!(lam.release());
        assert_eq!(device.live_lams(), 0);
        assert_eq!(
            local(&pd, key, lam.page(1), PAGE, Access::LOCAL_WRITE),
            Err(Denied::Range)
        );
        assert_eq!(
            local(&pd, key, lam.page(0), 1, Access::empty()),
            Err(Denied::Range)
        );
        assert!(!lam.release(), "released twice");
        // M32: the memory is exactly as it was.
        assert!(lam.bytes().iter().all(|&b| b == 0x3C));
    }

    #[test]
    fn test_privileged_lams_build_and_release_independently_rule_m28() {
        let (device, pd) = lone_pd(Limits::DEFAULT);
        let key = pd.privileged_key();
        let mut outer = Lam::new(&device, 4, 0);
        // A second LAM over part of the same pages, as a consumer may build.
        let inner_span = {
            let start = usize::try_from(outer.page(1) - outer.buffer.addr()).unwrap();
            outer.buffer.span().sub(start, PAGE).unwrap()
        };
        let (inner, logical) = device.build_lam(inner_span).unwrap();
        assert_eq!(logical, outer.page(1));
        assert_eq!(device.live_lams(), 2);
        assert!(outer.release());
        assert_eq!(
            local(&pd, key, outer.page(1) + 10, 100, Access::LOCAL_WRITE),
            Ok(())
        );
        assert_eq!(
            local(&pd, key, outer.page(0), 1, Access::empty()),
            Err(Denied::Range)
        );
        assert_eq!(
            local(&pd, key, outer.page(2), 1, Access::empty()),
            Err(Denied::Range)
        );
        assert!(device.release_lam(inner));
        assert_eq!(
            local(&pd, key, outer.page(1), 1, Access::empty()),
            Err(Denied::Range)
        );
        assert_eq!(device.live_lams(), 0);
    }
}

mod tokens {
    use super::*;

    /// Expects `side` to know neither token of `reg` (a region of another
    /// PD or device), locally or remotely; returns the local and remote
    /// token and the index of `reg`'s first byte.
    #[track_caller]
    fn expect_unknown_to(side: &Side, reg: &Registered) -> (u32, u32, u64) {
        let (lkey, rkey, at) = (reg.mr.local_key().unwrap(), reg.rkey(), reg.raddr(0));
        assert_eq!(
            local(&side.pd, lkey, at, 8, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(
            remote(&side.pd, side.qp.id(), rkey, at, 8, Access::empty()),
            Err(Denied::Token)
        );
        (lkey, rkey, at)
    }

    #[test]
    fn test_tokens_stale_token_never_resolves_after_200000_cycles_rule_m11() {
        let (_device, pd, mr) = lone_mr(Limits::DEFAULT, false);
        let mut buffer = Buffer::new(64, 0);
        let (span, base) = (buffer.span(), buffer.addr());
        let mut seen = HashSet::with_capacity(200_000);
        let mut sample = Vec::new();
        for cycle in 0..200_000 {
            mr.register(span, base, ALL).unwrap();
            let key = mr.local_key().unwrap();
            assert!(
                seen.insert(key),
                "token {key:#x} came back after {cycle} cycles"
            );
            assert_eq!(mr.deregister(nothing()), Ok(Progress::Done));
            assert_eq!(
                local(&pd, key, base, 1, Access::empty()),
                Err(Denied::Token)
            );
            if cycle % 997 == 0 {
                sample.push(key);
            }
        }
        mr.register(span, base, ALL).unwrap();
        let current = mr.local_key().unwrap();
        assert!(!seen.contains(&current));
        assert_eq!(local(&pd, current, base, 64, Access::LOCAL_WRITE), Ok(()));
        for key in sample {
            assert_eq!(
                local(&pd, key, base, 1, Access::empty()),
                Err(Denied::Token)
            );
            assert_eq!(
                remote(&pd, 0, key | REMOTE_BIT, base, 1, Access::empty()),
                Err(Denied::Token)
            );
        }
        assert_eq!(mr.close(nothing()), Progress::Done);
    }

    #[test]
    fn test_tokens_exhausted_table_refuses_registration_instead_of_reusing_rule_m11() {
        // One slot for the PD, one for the region: the region's slot goes
        // through every generation once, then retires.
        let limits = Limits {
            max_mr_count: 1,
            max_mw_count: 0,
            max_pd_count: 1,
            ..Limits::DEFAULT
        };
        let (device, pd, mr) = lone_mr(limits, false);
        let mut buffer = Buffer::new(16, 0);
        let (span, base) = (buffer.span(), buffer.addr());
        let mut seen = HashSet::new();
        let refused = loop {
            match mr.register(span, base, ALL) {
                Ok(()) => {
                    let key = mr.local_key().unwrap();
                    assert!(seen.insert(key), "token {key:#x} handed out twice");
                    assert_eq!(mr.deregister(nothing()), Ok(Progress::Done));
                }
                Err(e) => break e,
            }
            assert!(seen.len() <= 40_000, "the slot never retired");
        };
        assert_eq!(refused, MrError::Resources);
        assert_eq!(seen.len(), 32_767);
        assert_eq!(mr.local_key(), None, "a failed registration leaves nothing");
        for &key in &seen {
            assert_eq!(
                local(&pd, key, base, 1, Access::empty()),
                Err(Denied::Token)
            );
        }
        // The PD's token is unaffected.
        assert_eq!(device.live_keys(), 1);
    }

    #[test]
    fn test_tokens_local_and_remote_forms_never_interchangeable_rule_m34() {
        let pair = Pair::new(EngineMode::Inline);
        let reg = pair.b.buffer(64, 0, ALL);
        let (lkey, rkey, at) = (reg.mr.local_key().unwrap(), reg.rkey(), reg.raddr(0));
        let (pd, qp) = (&pair.b.pd, pair.b.qp.id());
        assert_eq!(local(pd, rkey, at, 8, Access::empty()), Err(Denied::Token));
        assert_eq!(
            remote(pd, qp, lkey, at, 8, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(local(pd, lkey, at, 8, Access::LOCAL_WRITE), Ok(()));
        assert_eq!(remote(pd, qp, rkey, at, 8, Access::REMOTE_WRITE), Ok(()));
        // A window's token is remote only, in either form.
        let mw = Mw::new(pd).unwrap();
        let wkey = bind(&pair.b, &reg.mr, &mw, at, 64, Access::REMOTE_WRITE);
        assert_eq!(local(pd, wkey, at, 8, Access::empty()), Err(Denied::Token));
        assert_eq!(
            local(pd, wkey & !REMOTE_BIT, at, 8, Access::empty()),
            Err(Denied::Token)
        );
        assert_eq!(
            remote(pd, qp, wkey & !REMOTE_BIT, at, 8, Access::empty()),
            Err(Denied::Token)
        );
        // On the data path a local token used remotely ends the connection.
        expect_write(&pair, 8, 1, at, lkey, WcStatus::RemoteAccessError);
        assert!(reg.buffer.bytes().iter().all(|&b| b == 0));
        assert_terminated(&pair);
        mw.close();
    }

    #[test]
    fn test_tokens_of_another_pd_refused_rule_m34() {
        for (mode, pair) in each_mode(Pair::new) {
            let other_pd = Pd::new(&pair.b.device).unwrap();
            let foreign = Registered::new(&other_pd, Buffer::new(64, 0), ALL);
            let (lkey, rkey, at) = expect_unknown_to(&pair.b, &foreign);
            assert_eq!(local(&other_pd, lkey, at, 8, Access::LOCAL_WRITE), Ok(()));
            // A peer's Write naming it is refused.
            expect_write(&pair, 64, 1, at, rkey, WcStatus::RemoteAccessError);
            assert!(foreign.buffer.bytes().iter().all(|&b| b == 0), "{mode:?}");
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_tokens_of_another_device_refused_rule_m34() {
        for (mode, pair) in each_mode(Pair::new) {
            // Registered on a's device; b's device has no region of b's PD.
            let theirs = pair.a.pattern(64, 1, ALL);
            let (_, rkey, at) = expect_unknown_to(&pair.b, &theirs);
            // Used by b as if it were its own: never reaches a's memory.
            let before = theirs.buffer.bytes().to_vec();
            expect_write(&pair, 64, 200, at, rkey, WcStatus::RemoteAccessError);
            assert_eq!(theirs.buffer.bytes(), &before[..], "{mode:?}");
            assert_terminated(&pair);
        }
    }

    #[test]
    fn test_tokens_are_nonzero_distinct_and_marked_rule_m12() {
        let (device, pd) = lone_pd(Limits::DEFAULT);
        let regions: Vec<Registered> = (0..64)
            .map(|_| Registered::new(&pd, Buffer::new(8, 0), ALL))
            .collect();
        let mut all = HashSet::new();
        assert!(all.insert(pd.privileged_key()));
        for reg in &regions {
            let (lkey, rkey) = (reg.mr.local_key().unwrap(), reg.rkey());
            assert_ne!(lkey, 0);
            assert_eq!(lkey & REMOTE_BIT, 0);
            assert_eq!(rkey, lkey | REMOTE_BIT);
            assert!(all.insert(lkey), "{lkey:#x} twice");
        }
        assert_eq!(device.live_keys(), 65);
        drop(regions);
        assert_eq!(device.live_keys(), 1);
    }
}

mod limits {
    use super::*;

    #[test]
    fn test_limits_object_counts_enforced_and_released_on_drop_rule_a8() {
        let (device, pd) = lone_pd(small_limits());
        let second_pd = Pd::new(&device).unwrap();
        assert_eq!(Pd::new(&device).err(), Some(ResourceError::LimitReached));
        assert_eq!(device.live(ObjectKind::Pd), 2);
        let mut regions: Vec<Arc<Mr>> = (0..3).map(|i| Mr::new(&pd, i == 0).unwrap()).collect();
        assert_eq!(Mr::new(&pd, false).err(), Some(ResourceError::LimitReached));
        assert_eq!(
            Mr::new(&second_pd, true).err(),
            Some(ResourceError::LimitReached)
        );
        assert_eq!(
            device.reserve(ObjectKind::Mr).err(),
            Some(ResourceError::LimitReached)
        );
        assert_eq!(device.live(ObjectKind::Mr), 3);
        let windows: Vec<Arc<Mw>> = (0..2).map(|_| Mw::new(&pd).unwrap()).collect();
        assert_eq!(Mw::new(&pd).err(), Some(ResourceError::LimitReached));
        // Released on drop.
        regions.pop();
        assert_eq!(device.live(ObjectKind::Mr), 2);
        let slot = device.reserve(ObjectKind::Mr).unwrap();
        assert_eq!(device.live(ObjectKind::Mr), 3);
        drop(slot);
        regions.push(Mr::new(&second_pd, false).unwrap());
        drop(regions);
        drop(windows);
        drop(second_pd);
        assert_eq!(device.live(ObjectKind::Mr), 0);
        assert_eq!(device.live(ObjectKind::Mw), 0);
        assert_eq!(device.live(ObjectKind::Pd), 1);
        drop(pd);
        assert_eq!(device.live(ObjectKind::Pd), 0);
        assert_eq!(device.live_keys(), 0);
    }

    #[test]
    fn test_limits_everything_closed_leaves_no_object_token_or_lam_rule_l22() {
        for (mode, pair) in each_mode(Pair::new) {
            let devices = [Arc::clone(&pair.a.device), Arc::clone(&pair.b.device)];
            {
                let lam = LamPages::new(&pair.b.device, 2, 0);
                let fast_mr = fast(&pair.b, 2, true);
                Mapping::new(&lam.page_list(), 2 * PAGE_SIZE)
                    .access(ALL)
                    .expect_mapped(&pair.b, &fast_mr);
                let (reg, mw) = window_over(&pair.b, PAGE, Access::LOCAL_WRITE);
                let wkey = bind(
                    &pair.b,
                    &reg.mr,
                    &mw,
                    reg.raddr(0),
                    64,
                    Access::REMOTE_WRITE,
                );
                let src = pair.a.pattern(64, 1, Access::empty());
                assert_status(
                    write(&pair, &[src.sge(0, 64)], 0, fast_mr.remote_key().unwrap()),
                    Opcode::Write,
                    WcStatus::Success,
                );
                assert_status(
                    write(&pair, &[src.sge(0, 64)], reg.raddr(0), wkey),
                    Opcode::Write,
                    WcStatus::Success,
                );
                // A deregistration that pends, then finishes.
                let seg = pair
                    .b
                    .device
                    .resolve_local(&pair.b.pd, &reg.sge(0, 8), Access::empty())
                    .unwrap();
                let (count, finish) = counted();
                assert_eq!(reg.mr.deregister(finish), Ok(Progress::Pending));
                drop(seg);
                assert_eq!(calls(&count), 1);
                mw.close();
                assert_eq!(fast_mr.close(nothing()), Progress::Done);
            }
            pair.a.qp.close();
            pair.b.qp.close();
            settle();
            drop(pair);
            for device in &devices {
                for kind in [
                    ObjectKind::Pd,
                    ObjectKind::Qp,
                    ObjectKind::Mr,
                    ObjectKind::Mw,
                ] {
                    assert_eq!(device.live(kind), 0, "{mode:?} {kind:?}");
                }
                assert_eq!(device.live_keys(), 0, "{mode:?}");
                assert_eq!(device.live_lams(), 0, "{mode:?}");
            }
        }
    }
}
