//! Unit tests of queue pairs, the doorbell and the engine, grouped by state.
//!
//! Every data-path test runs in both engine modes ([`EngineMode::Inline`] and
//! [`EngineMode::Deferred`], through [`both`]) and calls [`settle`] before it
//! looks at completions. Each test names the rule it pins down; bytes are
//! always pattern bytes, checked one by one, with the untouched bytes around
//! them checked too.
//!
//! Determinism: whenever a test needs a request to stay queued it uses the
//! doorbell (`DEFER`, which holds a request back in both modes) or the
//! engine's receiver-not-ready wait (a Send with no receive posted), never a
//! sleep. The race tests (P4, X3) only yield, to vary the interleaving, and
//! assert what must hold under every interleaving; the one timeout
//! ([`finishes`]) detects a deadlock, it does not measure speed.

use crate::kernel::testing::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use super::{
    ConnectError, InvalidateTarget, MAX_INLINE, Payload, PostError, Qp, QpConfig, QpEvents,
    QpState, connect,
};
use crate::kernel::sync::{Arc, Weak};
use crate::rnic::cq::{ArmType, Cq, CqEvent, CqNotify};
use crate::rnic::device::{Device, EngineMode, FRAME_OVERHEAD};
use crate::rnic::memory::{self, Span};
use crate::rnic::mr::{Mr, Mw, Pd};
use crate::rnic::srq::{Srq, SrqError, SrqEvent, SrqNotify};
use crate::rnic::testing::{
    Buffer, CONFIG, LamPages, Pair, Registered, Side, TestCq, inline_device, summary,
};
use crate::rnic::types::{Access, Completion, Limits, Opcode, PAGE_SIZE, Sge, WcStatus, WrFlags};

// ----- fixtures ---------------------------------------------------------------

/// Local write plus both remote rights.
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);

/// The context of set-up requests a test does not look at.
const PREP: usize = 0;

/// Runs `f` once per engine mode.
fn both(f: impl Fn(EngineMode)) {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        f(mode);
    }
}

/// Runs `f` once per engine mode, on a fresh connected pair of that mode.
fn both_pairs(f: impl Fn(EngineMode, Pair)) {
    both(|mode| f(mode, Pair::new(mode)));
}

/// Waits for all deferred work (a no-op for the inline engine).
fn settle() {
    crate::kernel::deferred::flush();
}

/// `len` pattern bytes of `seed`, as `Buffer::pattern` makes them.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    Buffer::pattern(len, seed).bytes().to_vec()
}

/// Request contexts, in CQ order.
fn contexts(completions: &[Completion]) -> Vec<usize> {
    completions.iter().map(|c| c.request_context).collect()
}

/// A successful completion of request `context`, as [`summary`] lists it.
const fn ok(context: usize, opcode: Opcode) -> (usize, Opcode, WcStatus) {
    (context, opcode, WcStatus::Success)
}

/// A cancelled completion of request `context` (E5), as [`summary`] lists it.
const fn cancelled(context: usize, opcode: Opcode) -> (usize, Opcode, WcStatus) {
    (context, opcode, WcStatus::Cancelled)
}

/// A's deferred chain in the flush and disconnect tests (two Sends, then a
/// Write), as its cancelled completions report it.
const A_DEFERRED: [(usize, Opcode); 3] = [(1, Opcode::Send), (2, Opcode::Send), (3, Opcode::Write)];

/// Posts [`A_DEFERRED`] from A: two 8-byte Sends of `src` (the second with
/// `second`), which wait for receives at B, then a deferred 8-byte Write of
/// `src` to the start of `target`, which stays queued behind them.
fn post_a_deferred(pair: &Pair, src: &Registered, target: &Registered, second: WrFlags) {
    send(&pair.a, 1, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
    send(&pair.a, 2, &[src.sge(0, 8)], second).unwrap();
    pair.a
        .write_to(3, &[src.sge(0, 8)], target, 0, WrFlags::DEFER)
        .unwrap();
}

/// Drains `cq` and checks it held exactly `want` (context, opcode), in
/// order, each cancelled (E5); `mode` names the engine in a failure.
#[track_caller]
fn expect_cancelled(cq: &TestCq, mode: EngineMode, want: &[(usize, Opcode)]) {
    let want: Vec<_> = want.iter().map(|&(c, o)| cancelled(c, o)).collect();
    assert_eq!(summary(&cq.drain()), want, "{mode:?}");
}

/// Drains both CQs of `side` and checks they held exactly `requests`
/// (initiator CQ) and receives `receives` (receive CQ), each in order and
/// cancelled (E5): how an ended chain of A's requests is checked.
#[track_caller]
fn expect_side_cancelled(
    side: &Side,
    mode: EngineMode,
    requests: &[(usize, Opcode)],
    receives: &[usize],
) {
    expect_cancelled(&side.scq, mode, requests);
    let receives: Vec<_> = receives.iter().map(|&c| (c, Opcode::Receive)).collect();
    expect_cancelled(&side.rcq, mode, &receives);
}

/// How many completions carry `context`.
fn count(completions: &[Completion], context: usize) -> usize {
    completions
        .iter()
        .filter(|c| c.request_context == context)
        .count()
}

/// `n` as a `u32` (test sizes always fit).
fn u32_of(n: usize) -> u32 {
    u32::try_from(n).unwrap()
}

/// A side on a fresh device, not connected.
fn idle_side(mode: EngineMode, context: usize) -> Side {
    let device = Device::new(Limits::DEFAULT, mode).unwrap();
    Side::new(&device, context, CONFIG)
}

/// A connected pair on two devices with `limits` and `config`.
fn pair_with(mode: EngineMode, limits: Limits, config: QpConfig) -> Pair {
    let da = Device::new(limits, mode).unwrap();
    let db = Device::new(limits, mode).unwrap();
    let a = Side::new(&da, 0xA, config);
    let b = Side::new(&db, 0xB, config);
    connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
    Pair { a, b }
}

/// Posts a Send of `sges` from `side`.
fn send(side: &Side, context: usize, sges: &[Sge], flags: WrFlags) -> Result<(), PostError> {
    side.qp.post_send(context, Payload::Sges(sges), flags, None)
}

/// Whether `len` bytes at `addr` under the remote token `key` resolve for
/// `need` on `side` (a window or region is live there).
fn remote_ok(side: &Side, key: u32, addr: u64, len: u64, need: Access) -> bool {
    side.device
        .resolve_remote(&side.pd, side.qp.id(), key, addr, len, need)
        .is_ok()
}

/// A QP event receiver that counts `connection_lost`.
#[derive(Default)]
struct Lost(AtomicUsize);

impl QpEvents for Lost {
    fn connection_lost(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Lost {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Installs a [`Lost`] counter on `qp`.
fn watch(qp: &Arc<Qp>) -> Arc<Lost> {
    let lost = Arc::new(Lost::default());
    qp.set_events(Some(Arc::clone(&lost) as Arc<dyn QpEvents>));
    lost
}

/// Index base of fast registrations (a whole number of pages, FBO 0).
const FR_BASE: u64 = 0x40_0000;

/// A fast-register region over LAM pages of its side's device.
struct Fast {
    mr: Arc<Mr>,
    pages: Vec<u64>,
    /// Keeps the pages mapped for as long as the region may use them.
    _lam: LamPages,
}

impl Fast {
    /// `pages` LAM pages filled with `fill`, and a region initialized for them
    /// with remote access allowed.
    fn new(side: &Side, pages: usize, fill: u8) -> Self {
        let lam = LamPages::new(&side.device, pages, fill);
        let mr = Mr::new(&side.pd, true).unwrap();
        mr.init_fast(u32_of(pages), true).unwrap();
        Self {
            mr,
            pages: lam.page_list(),
            _lam: lam,
        }
    }

    /// Bytes the region maps.
    fn len(&self) -> u64 {
        self.pages.len() as u64 * PAGE_SIZE
    }

    /// Posts a FastRegister of every page from `side`.
    fn post(
        &self,
        side: &Side,
        context: usize,
        access: Access,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        side.qp.post_fast_register(
            context,
            &self.mr,
            &self.pages,
            0,
            self.len(),
            FR_BASE,
            access,
            flags,
        )
    }

    /// Whether the mapping is live (a local SGE over it resolves).
    fn mapped(&self, side: &Side) -> bool {
        let sge = Sge {
            addr: FR_BASE,
            len: 16,
            key: self.mr.local_key().unwrap(),
        };
        side.device
            .resolve_local(&side.pd, &sge, Access::empty())
            .is_ok()
    }

    fn rkey(&self) -> u32 {
        self.mr.remote_key().unwrap()
    }
}

impl Drop for Fast {
    fn drop(&mut self) {
        let _ = self.mr.close(Box::new(|| {}));
    }
}

/// Runs `f` on its own thread and fails if it has not finished after a
/// generous time: a deadlock detector, not a speed check.
fn finishes(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_mins(1)) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: the test did not finish"),
    }
}

/// The seven initiator requests (rule P1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Send,
    SendAndInvalidate,
    Read,
    Write,
    Bind,
    FastRegister,
    Invalidate,
}

impl Op {
    const ALL: [Self; 7] = [
        Self::Send,
        Self::SendAndInvalidate,
        Self::Read,
        Self::Write,
        Self::Bind,
        Self::FastRegister,
        Self::Invalidate,
    ];

    /// The work-request flags its NDK page documents (`ndk-abi.md` §5.3), in
    /// rnic terms; the ALLOW_* and READ_SINK flags are the `Access` of Bind
    /// and FastRegister.
    fn documented_flags(self) -> WrFlags {
        let common = WrFlags::SILENT_SUCCESS | WrFlags::READ_FENCE | WrFlags::DEFER;
        match self {
            Self::Send | Self::SendAndInvalidate => common | WrFlags::SOLICITED | WrFlags::INLINE,
            Self::Read => common | WrFlags::READ_LOCAL_INVALIDATE,
            Self::Write => common | WrFlags::INLINE,
            Self::Bind | Self::FastRegister | Self::Invalidate => common,
        }
    }

    /// The opcode of its completion (P22: SendAndInvalidate completes as Send).
    const fn opcode(self) -> Opcode {
        match self {
            Self::Send | Self::SendAndInvalidate => Opcode::Send,
            Self::Read => Opcode::Read,
            Self::Write => Opcode::Write,
            Self::Bind => Opcode::Bind,
            Self::FastRegister => Opcode::FastRegister,
            Self::Invalidate => Opcode::Invalidate,
        }
    }
}

/// A connected pair (two devices) with what every initiator request needs.
struct Kit {
    pair: Pair,
    /// A: 256 pattern bytes (seed 1), sources of Sends and Writes.
    src: Registered,
    /// A: 256 zero bytes, the sink of Reads.
    sink: Registered,
    /// B: 512 pattern bytes (seed 2), remotely readable and writable.
    target: Registered,
    /// B: 256 zero bytes for receives.
    inbox: Registered,
    /// A: the region windows are bound over.
    bindable: Registered,
    /// A: a window.
    mw: Arc<Mw>,
    /// A: a fast-register region.
    a_fast: Fast,
    /// B: a fast-register region, the target of SendAndInvalidate.
    b_fast: Fast,
    /// A: 64 unregistered pattern bytes (seed 3) for inline requests.
    inline: Buffer,
    inline_span: Span,
}

impl Kit {
    fn new(mode: EngineMode) -> Self {
        let pair = Pair::new(mode);
        let mut inline = Buffer::pattern(64, 3);
        let inline_span = inline.span();
        Self {
            src: pair.a.pattern(256, 1, Access::empty()),
            sink: pair.a.buffer(256, 0, Access::LOCAL_WRITE),
            target: pair.b.pattern(512, 2, RW),
            inbox: pair.b.buffer(256, 0, Access::LOCAL_WRITE),
            bindable: pair.a.pattern(256, 4, Access::LOCAL_WRITE),
            mw: Mw::new(&pair.a.pd).unwrap(),
            a_fast: Fast::new(&pair.a, 2, 0x5A),
            b_fast: Fast::new(&pair.b, 2, 0xA5),
            inline,
            inline_span,
            pair,
        }
    }

    fn a(&self) -> &Side {
        &self.pair.a
    }

    fn b(&self) -> &Side {
        &self.pair.b
    }

    /// The payload of a Send or Write: inline with `INLINE`, else 64 bytes
    /// of `src` at `offset`.
    fn payload<'s>(&'s self, flags: WrFlags, offset: u64, sge: &'s mut [Sge; 1]) -> Payload<'s> {
        if flags.contains(WrFlags::INLINE) {
            Payload::Inline(core::slice::from_ref(&self.inline_span))
        } else {
            sge[0] = self.src.sge(offset, 64);
            Payload::Sges(&sge[..])
        }
    }

    /// Posts from A a Bind of its window over the first `len` bytes of
    /// `bindable`, for remote Reads.
    fn bind_readable(&self, context: usize, len: u64, flags: WrFlags) -> Result<(), PostError> {
        self.a().qp.post_bind(
            context,
            &self.bindable.mr,
            &self.mw,
            self.bindable.raddr(0),
            len,
            Access::REMOTE_READ,
            flags,
        )
    }

    /// Maps B's fast region through B's own QP (set-up for a
    /// SendAndInvalidate), waiting for it so that it is mapped before A's
    /// next request runs.
    fn map_b_fast(&self) {
        settle();
        self.b_fast
            .post(self.b(), PREP, RW, WrFlags::empty())
            .unwrap();
        settle();
    }

    /// Posts `op` from A with `context`, `flags` and, for Bind and
    /// FastRegister, `access`; with its set-up before it and its clean-up
    /// (unbinding, unmapping) after it, both with context [`PREP`].
    fn post(
        &self,
        op: Op,
        context: usize,
        flags: WrFlags,
        access: Access,
    ) -> Result<(), PostError> {
        let a = &self.a().qp;
        let mut sge = [Sge::default()];
        match op {
            Op::Send => {
                self.b()
                    .qp
                    .post_receive(PREP, &[self.inbox.sge(0, 256)])
                    .unwrap();
                a.post_send(context, self.payload(flags, 0, &mut sge), flags, None)
            }
            Op::SendAndInvalidate => {
                self.map_b_fast();
                self.b()
                    .qp
                    .post_receive(PREP, &[self.inbox.sge(0, 256)])
                    .unwrap();
                let key = self.b_fast.rkey();
                a.post_send(context, self.payload(flags, 0, &mut sge), flags, Some(key))
            }
            Op::Read => a.post_read(
                context,
                &[self.sink.sge(0, 64)],
                self.target.raddr(0),
                self.target.rkey(),
                flags,
            ),
            Op::Write => {
                let payload = self.payload(flags, 0, &mut sge);
                a.post_write(
                    context,
                    payload,
                    self.target.raddr(64),
                    self.target.rkey(),
                    flags,
                )
            }
            Op::Bind => {
                let result = a.post_bind(
                    context,
                    &self.bindable.mr,
                    &self.mw,
                    self.bindable.raddr(0),
                    64,
                    access,
                    flags,
                );
                a.post_invalidate(
                    PREP,
                    InvalidateTarget::Mw(Arc::clone(&self.mw)),
                    WrFlags::empty(),
                )
                .unwrap();
                result
            }
            Op::FastRegister => {
                let result = self.a_fast.post(self.a(), context, access, flags);
                a.post_invalidate(
                    PREP,
                    InvalidateTarget::Mr(Arc::clone(&self.a_fast.mr)),
                    WrFlags::empty(),
                )
                .unwrap();
                result
            }
            Op::Invalidate => {
                self.a_fast
                    .post(self.a(), PREP, RW, WrFlags::empty())
                    .unwrap();
                a.post_invalidate(
                    context,
                    InvalidateTarget::Mr(Arc::clone(&self.a_fast.mr)),
                    flags,
                )
            }
        }
    }

    /// Posts a plain 8-byte Write (context [`PREP`]): rings the doorbell.
    fn ring(&self) {
        self.a()
            .write_to(
                PREP,
                &[self.src.sge(0, 8)],
                &self.target,
                504,
                WrFlags::empty(),
            )
            .unwrap();
    }
}

/// The initiator requests a QP without a connection refuses (P7 idle, X5
/// disconnected): the seven of P1, a Send from SGEs and one inline, an
/// Invalidate of a region and one of a window.
#[derive(Clone, Copy, Debug)]
enum Refused {
    Send,
    SendInline,
    SendAndInvalidate,
    Write,
    Read,
    Bind,
    FastRegister,
    InvalidateMr,
    InvalidateMw,
}

impl Refused {
    const ALL: [Self; 9] = [
        Self::Send,
        Self::SendInline,
        Self::SendAndInvalidate,
        Self::Write,
        Self::Read,
        Self::Bind,
        Self::FastRegister,
        Self::InvalidateMr,
        Self::InvalidateMw,
    ];
}

/// What each [`Refused`] request needs, made on one side that is not
/// connected (or will not be when the requests are posted).
struct Unconnected {
    /// 64 pattern bytes (seed 1), local and remote SGEs of every request.
    buf: Registered,
    /// A window for Bind and its Invalidate.
    mw: Arc<Mw>,
    /// A one-page fast-register region (FastRegister, the Invalidate of a
    /// region, the token of SendAndInvalidate).
    fast: Fast,
    /// 16 unregistered pattern bytes (seed 2) for the inline Send.
    _raw: Buffer,
    span: Span,
}

impl Unconnected {
    fn new(side: &Side) -> Self {
        let mut raw = Buffer::pattern(16, 2);
        Self {
            buf: side.pattern(64, 1, RW),
            mw: Mw::new(&side.pd).unwrap(),
            fast: Fast::new(side, 1, 0),
            span: raw.span(),
            _raw: raw,
        }
    }

    /// Posts `kind` from `side` with `context` and `flags`.
    fn post(
        &self,
        side: &Side,
        kind: Refused,
        context: usize,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        let (qp, buf) = (&side.qp, &self.buf);
        match kind {
            Refused::Send => send(side, context, &[buf.sge(0, 64)], flags),
            Refused::SendInline => {
                qp.post_send(context, Payload::Inline(&[self.span]), flags, None)
            }
            Refused::SendAndInvalidate => {
                let sges = [buf.sge(0, 8)];
                qp.post_send(context, Payload::Sges(&sges), flags, Some(self.fast.rkey()))
            }
            Refused::Write => side.write_to(context, &[buf.sge(0, 8)], buf, 8, flags),
            Refused::Read => {
                qp.post_read(context, &[buf.sge(0, 8)], buf.raddr(8), buf.rkey(), flags)
            }
            Refused::Bind => {
                let (mr, at) = (&buf.mr, buf.raddr(0));
                qp.post_bind(context, mr, &self.mw, at, 8, Access::REMOTE_READ, flags)
            }
            Refused::FastRegister => self.fast.post(side, context, RW, flags),
            Refused::InvalidateMr => qp.post_invalidate(
                context,
                InvalidateTarget::Mr(Arc::clone(&self.fast.mr)),
                flags,
            ),
            Refused::InvalidateMw => {
                qp.post_invalidate(context, InvalidateTarget::Mw(Arc::clone(&self.mw)), flags)
            }
        }
    }

    /// Posts every [`Refused`] kind from `side`, plain and deferred, and
    /// checks each is refused inline with `ConnectionInvalid` (P7, X5).
    #[track_caller]
    fn expect_refused(&self, side: &Side, mode: EngineMode) {
        for flags in [WrFlags::empty(), WrFlags::DEFER] {
            for (context, kind) in (1..).zip(Refused::ALL) {
                assert_eq!(
                    self.post(side, kind, context, flags),
                    Err(PostError::ConnectionInvalid),
                    "{mode:?}: {kind:?} with {flags:?}"
                );
            }
        }
    }
}

// ----- idle: created, never connected ---------------------------------------

mod idle {
    use super::*;

    #[test]
    fn test_idle_initiator_posts_fail_connection_invalid_rule_p7() {
        both(|mode| {
            let side = idle_side(mode, 0xA);
            let kit = Unconnected::new(&side);
            kit.expect_refused(&side, mode);
            settle();
            // P6: a refused post leaves no trace.
            assert!(side.scq.drain().is_empty(), "{mode:?}");
            assert!(side.rcq.drain().is_empty(), "{mode:?}");
            assert_eq!(kit.mw.remote_key(), 0, "a refused Bind assigns no token");
            assert!(!kit.fast.mapped(&side));
            assert_eq!(side.qp.state(), QpState::Idle);
        });
    }

    #[test]
    fn test_idle_receive_posted_before_connect_completes_after_rule_p8() {
        both(|mode| {
            let a = idle_side(mode, 0xA);
            let b = idle_side(mode, 0xB);
            let inbox = b.buffer(128, 0, Access::LOCAL_WRITE);
            b.qp.post_receive(11, &[inbox.sge(0, 128)]).unwrap();
            b.qp.post_receive(12, &[inbox.sge(64, 64)]).unwrap();
            settle();
            assert!(
                b.rcq.drain().is_empty(),
                "nothing completes before the connection"
            );
            connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
            let src = a.pattern(40, 9, Access::empty());
            send(&a, 1, &[src.sge(0, 40)], WrFlags::empty()).unwrap();
            settle();
            let got = b.rcq.drain();
            assert_eq!(summary(&got), [ok(11, Opcode::Receive)], "{mode:?}");
            assert_eq!(got[0].bytes, 40);
            assert_eq!(&inbox.buffer.bytes()[..40], src.buffer.bytes());
            assert_eq!(summary(&a.scq.drain()), [ok(1, Opcode::Send)]);
        });
    }

    #[test]
    fn test_idle_flush_cancels_receives_rule_e1() {
        both(|mode| {
            let side = idle_side(mode, 0xA);
            let inbox = side.buffer(64, 0, Access::LOCAL_WRITE);
            for ctx in 1..=3 {
                side.qp.post_receive(ctx, &[inbox.sge(0, 64)]).unwrap();
            }
            side.qp.flush();
            settle();
            let got = side.rcq.drain();
            assert_eq!(
                summary(&got),
                (1..=3)
                    .map(|c| cancelled(c, Opcode::Receive))
                    .collect::<Vec<_>>(),
                "{mode:?}"
            );
            assert!(got.iter().all(|c| c.qp_context == 0xA));
            assert!(side.scq.drain().is_empty());
        });
    }

    #[test]
    fn test_idle_flushed_initiator_posts_still_fail_connection_invalid_rule_p7_e1() {
        both(|mode| {
            let side = idle_side(mode, 0xA);
            let buf = side.pattern(64, 1, RW);
            side.qp.flush();
            settle();
            assert_eq!(side.qp.state(), QpState::Error);
            // P7: a flush makes no connection; nothing is queued (P6).
            for flags in [WrFlags::empty(), WrFlags::DEFER] {
                assert_eq!(
                    send(&side, 1, &[buf.sge(0, 64)], flags),
                    Err(PostError::ConnectionInvalid),
                    "{mode:?}"
                );
                assert_eq!(
                    side.write_to(2, &[buf.sge(0, 8)], &buf, 8, flags),
                    Err(PostError::ConnectionInvalid),
                    "{mode:?}"
                );
            }
            // E1: a receive on the flushed queue is taken and cancelled.
            side.qp.post_receive(3, &[buf.sge(0, 64)]).unwrap();
            settle();
            assert!(side.scq.drain().is_empty(), "{mode:?}");
            expect_cancelled(&side.rcq, mode, &[(3, Opcode::Receive)]);
        });
    }

    #[test]
    fn test_idle_connect_to_itself_refused() {
        let side = idle_side(EngineMode::Inline, 0xA);
        assert_eq!(
            connect(&side.qp, &side.qp, (1, 1), (1, 1)),
            Err(ConnectError::SameQp)
        );
        assert_eq!(side.qp.state(), QpState::Idle);
    }

    #[test]
    fn test_idle_qp_limits_enforced_rule_l13() {
        let device = inline_device();
        let pd = Pd::new(&device).unwrap();
        let cq = TestCq::new(16);
        let l = Limits::DEFAULT;
        let with = |change: &dyn Fn(&mut QpConfig)| {
            let mut config = CONFIG;
            change(&mut config);
            config
        };
        let over = [
            with(&|c| c.receive_depth = l.max_receive_queue_depth + 1),
            with(&|c| c.initiator_depth = l.max_initiator_queue_depth + 1),
            with(&|c| c.initiator_depth = 0),
            with(&|c| c.max_receive_sge = l.max_receive_sge + 1),
            with(&|c| c.max_initiator_sge = l.max_initiator_sge + 1),
            with(&|c| c.inline_size = l.max_inline_data + 1),
        ];
        for config in over {
            let err = Qp::new(&pd, &cq.cq, &cq.cq, None, config).unwrap_err();
            assert_eq!(
                err,
                super::super::CreateQpError::InvalidParameter,
                "{config:?}"
            );
        }
        let at_limits = QpConfig {
            context: 1,
            receive_depth: l.max_receive_queue_depth,
            initiator_depth: 4,
            max_receive_sge: l.max_receive_sge,
            max_initiator_sge: l.max_initiator_sge,
            inline_size: u32_of(MAX_INLINE),
        };
        assert!(Qp::new(&pd, &cq.cq, &cq.cq, None, at_limits).is_ok());
    }

    /// Rule A8 with L13: the device reports `max_inline_data` (4096 by
    /// default) as its limit, so a QP asking for exactly that must be
    /// created. `Qp::new` also refuses anything above `MAX_INLINE` (1024),
    /// whose comment says "device limits are clamped to it", but nothing
    /// clamps them: `Limits::DEFAULT` (types.rs) and `Device::new`
    /// (device.rs) report 4096.
    #[test]
    fn test_idle_qp_with_device_max_inline_size_created_rule_l13_a8() {
        let device = inline_device();
        let pd = Pd::new(&device).unwrap();
        let cq = TestCq::new(16);
        let config = QpConfig {
            inline_size: device.limits().max_inline_data,
            ..CONFIG
        };
        assert!(Qp::new(&pd, &cq.cq, &cq.cq, None, config).is_ok());
    }
}

// ----- connected: the data path ---------------------------------------------

mod connected {
    use super::*;

    #[test]
    fn test_connected_send_moves_bytes_between_offsets_rule_p21() {
        both_pairs(|mode, pair| {
            let (src, inbox) = pair.send_buffers(300, 1, 512);
            pair.send_to_b(0x77, &[inbox.sge(33, 300)], 0x55, &[src.sge(17, 200)]);
            let sent = pair.a.scq.drain();
            assert_eq!(summary(&sent), [ok(0x55, Opcode::Send)], "{mode:?}");
            assert_eq!(sent[0].qp_context, 0xA);
            let got = pair.b.rcq.drain();
            assert_eq!(summary(&got), [ok(0x77, Opcode::Receive)]);
            assert_eq!(got[0].qp_context, 0xB);
            assert_eq!(got[0].bytes, 200, "P21: the bytes placed");
            assert_eq!(got[0].invalidated_key, 0);
            assert!(!got[0].solicited);
            let bytes = inbox.buffer.bytes();
            assert_eq!(&bytes[33..233], &src.buffer.bytes()[17..217]);
            assert!(
                bytes[..33].iter().chain(&bytes[233..]).all(|&b| b == 0),
                "nothing else touched"
            );
            // P1: nothing crossed over to the other CQs.
            assert!(pair.a.rcq.drain().is_empty());
            assert!(pair.b.scq.drain().is_empty());
        });
    }

    #[test]
    fn test_connected_send_multi_sge_with_unaligned_boundaries() {
        both_pairs(|mode, pair| {
            let s1 = pair.a.pattern(100, 1, Access::empty());
            let s2 = pair.a.pattern(200, 2, Access::empty());
            let (d1, d2, d3) = (
                pair.b.buffer(50, 0, Access::LOCAL_WRITE),
                pair.b.buffer(80, 0, Access::LOCAL_WRITE),
                pair.b.buffer(200, 0, Access::LOCAL_WRITE),
            );
            // Receiver SGEs of 50, 0, 64 and 200 bytes; sender SGEs of 10,
            // 0, 100 and 37: no boundary lines up with one on the other side.
            let recv = [d1.sge(0, 50), d2.sge(0, 0), d2.sge(3, 64), d3.sge(0, 200)];
            let sges = [s1.sge(0, 10), s2.sge(7, 0), s2.sge(5, 100), s1.sge(50, 37)];
            pair.send_to_b(1, &recv, 2, &sges);
            let got = pair.b.rcq.drain();
            assert_eq!(summary(&got), [ok(1, Opcode::Receive)], "{mode:?}");
            assert_eq!(got[0].bytes, 147);
            let sent: Vec<u8> = [
                &s1.buffer.bytes()[0..10],
                &s2.buffer.bytes()[5..105],
                &s1.buffer.bytes()[50..87],
            ]
            .concat();
            assert_eq!(d1.buffer.bytes(), &sent[..50]);
            assert_eq!(&d2.buffer.bytes()[..3], [0; 3]);
            assert_eq!(&d2.buffer.bytes()[3..67], &sent[50..114]);
            assert!(d2.buffer.bytes()[67..].iter().all(|&b| b == 0));
            assert_eq!(&d3.buffer.bytes()[..33], &sent[114..]);
            assert!(d3.buffer.bytes()[33..].iter().all(|&b| b == 0));
        });
    }

    #[test]
    fn test_connected_zero_length_send_without_sges() {
        both_pairs(|mode, pair| {
            let inbox = pair.b.buffer(16, 0xCC, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(1, &[]).unwrap();
            pair.b.qp.post_receive(2, &[inbox.sge(0, 16)]).unwrap();
            send(&pair.a, 3, &[], WrFlags::empty()).unwrap();
            send(&pair.a, 4, &[], WrFlags::empty()).unwrap();
            pair.settle();
            let got = pair.b.rcq.drain();
            assert_eq!(
                summary(&got),
                [ok(1, Opcode::Receive), ok(2, Opcode::Receive)],
                "{mode:?}"
            );
            assert!(got.iter().all(|c| c.bytes == 0));
            assert!(inbox.buffer.bytes().iter().all(|&b| b == 0xCC));
            assert_eq!(contexts(&pair.a.scq.drain()), [3, 4]);
        });
    }

    #[test]
    fn test_connected_write_and_read_multi_sge_with_offsets_rule_p19() {
        both_pairs(|mode, pair| {
            let (w1, w2) = (
                pair.a.pattern(64, 1, Access::empty()),
                pair.a.pattern(128, 2, Access::empty()),
            );
            let target = pair.b.buffer(256, 0, RW);
            pair.a
                .write_to(
                    1,
                    &[w1.sge(3, 40), w2.sge(0, 77)],
                    &target,
                    10,
                    WrFlags::empty(),
                )
                .unwrap();
            pair.settle();
            let written = [&w1.buffer.bytes()[3..43], &w2.buffer.bytes()[..77]].concat();
            let t = target.buffer.bytes();
            assert_eq!(&t[10..127], &written[..], "{mode:?}");
            assert!(t[..10].iter().chain(&t[127..]).all(|&b| b == 0));
            // Read back part of it, into two sinks at offsets.
            let (r1, r2) = (
                pair.a.buffer(40, 0, Access::LOCAL_WRITE),
                pair.a.buffer(80, 0, Access::LOCAL_WRITE),
            );
            pair.a
                .read_from(
                    2,
                    &[r1.sge(0, 30), r2.sge(7, 50)],
                    &target,
                    15,
                    WrFlags::empty(),
                )
                .unwrap();
            pair.settle();
            assert_eq!(&r1.buffer.bytes()[..30], &t[15..45]);
            assert!(r1.buffer.bytes()[30..].iter().all(|&b| b == 0));
            assert_eq!(&r2.buffer.bytes()[7..57], &t[45..95]);
            assert!(
                r2.buffer.bytes()[..7]
                    .iter()
                    .chain(&r2.buffer.bytes()[57..])
                    .all(|&b| b == 0)
            );
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(1, Opcode::Write), ok(2, Opcode::Read)]
            );
            // P1: one-sided operations complete nothing at the target.
            assert!(pair.b.rcq.drain().is_empty());
            assert!(pair.b.scq.drain().is_empty());
        });
    }

    #[test]
    fn test_connected_max_transfer_length_moves_and_one_more_byte_refused_rule_p10() {
        const MAX: usize = 1 << 20;
        both(|mode| {
            let limits = Limits {
                max_transfer_length: u32_of(MAX),
                ..Limits::DEFAULT
            };
            let pair = pair_with(mode, limits, CONFIG);
            let src = pair.a.pattern(MAX + 1, 5, Access::empty());
            let inbox = pair.b.buffer(MAX + 1, 0, RW);
            let too_long = Err(PostError::TooLong);
            // One byte over, split over two SGEs: refused on every queue.
            let over = [src.sge(0, u32_of(MAX)), src.sge(0, 1)];
            assert_eq!(
                pair.b
                    .qp
                    .post_receive(9, &[inbox.sge(0, u32_of(MAX)), inbox.sge(0, 1)]),
                too_long
            );
            assert_eq!(send(&pair.a, 9, &over, WrFlags::empty()), too_long);
            assert_eq!(
                pair.a.write_to(9, &over, &inbox, 0, WrFlags::empty()),
                too_long
            );
            let sink = pair.a.buffer(MAX + 1, 0, Access::LOCAL_WRITE);
            let over_sink = [sink.sge(0, u32_of(MAX)), sink.sge(0, 1)];
            assert_eq!(
                pair.a.read_from(9, &over_sink, &inbox, 0, WrFlags::empty()),
                too_long
            );
            // Exactly the maximum, split unevenly over SGEs on both sides.
            pair.b
                .qp
                .post_receive(
                    1,
                    &[inbox.sge(0, 1000), inbox.sge(1000, u32_of(MAX - 1000))],
                )
                .unwrap();
            send(
                &pair.a,
                2,
                &[src.sge(1, 4097), src.sge(4098, u32_of(MAX - 4097))],
                WrFlags::empty(),
            )
            .unwrap();
            pair.settle();
            let got = pair.b.rcq.drain();
            assert_eq!(summary(&got), [ok(1, Opcode::Receive)], "{mode:?}");
            assert_eq!(got[0].bytes, u32_of(MAX));
            assert!(
                inbox.buffer.bytes()[..MAX] == src.buffer.bytes()[1..=MAX],
                "every byte of the maximum transfer"
            );
            // And a Write of the maximum into the same region, from offset 0.
            pair.a
                .write_to(3, &[src.sge(0, u32_of(MAX))], &inbox, 1, WrFlags::empty())
                .unwrap();
            pair.settle();
            assert!(inbox.buffer.bytes()[1..=MAX] == src.buffer.bytes()[..MAX]);
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(2, Opcode::Send), ok(3, Opcode::Write)]
            );
        });
    }

    #[test]
    fn test_connected_too_many_sge_refused_reads_use_device_limit_rule_p9() {
        both(|mode| {
            // The QP allows 4 initiator SGEs; the device allows 16 per Read.
            let pair = Pair::new(mode);
            let target = pair.b.pattern(256, 3, RW);
            let buf = pair.a.buffer(256, 0, Access::LOCAL_WRITE);
            let five: Vec<Sge> = (0..5).map(|i| buf.sge(i * 8, 8)).collect();
            let many = Err(PostError::TooManySge);
            assert_eq!(send(&pair.a, 1, &five, WrFlags::empty()), many);
            assert_eq!(
                pair.a.write_to(1, &five, &target, 0, WrFlags::empty()),
                many
            );
            assert_eq!(
                pair.a.qp.post_receive(1, &five),
                many,
                "receives: max_receive_sge"
            );
            let read_max = Limits::DEFAULT.max_read_sge as usize;
            let sinks: Vec<Sge> = (0..=read_max).map(|i| buf.sge(i as u64 * 10, 10)).collect();
            assert_eq!(
                pair.a.read_from(1, &sinks, &target, 0, WrFlags::empty()),
                many
            );
            pair.a
                .read_from(2, &sinks[..read_max], &target, 0, WrFlags::empty())
                .unwrap();
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(2, Opcode::Read)],
                "{mode:?}"
            );
            let n = read_max * 10;
            assert_eq!(&buf.buffer.bytes()[..n], &target.buffer.bytes()[..n]);
            assert!(buf.buffer.bytes()[n..].iter().all(|&b| b == 0));
        });
    }

    #[test]
    fn test_connected_read_sge_limit_is_the_devices_not_the_qps_rule_p9() {
        both(|mode| {
            let limits = Limits {
                max_read_sge: 2,
                ..Limits::DEFAULT
            };
            let pair = pair_with(mode, limits, CONFIG);
            let target = pair.b.pattern(64, 3, RW);
            let buf = pair.a.buffer(64, 0, Access::LOCAL_WRITE);
            let three = [buf.sge(0, 8), buf.sge(8, 8), buf.sge(16, 8)];
            // Three SGEs fit the QP's 4 initiator SGEs, but not a Read.
            assert_eq!(
                pair.a.read_from(1, &three, &target, 0, WrFlags::empty()),
                Err(PostError::TooManySge)
            );
            pair.a
                .write_to(2, &three, &target, 32, WrFlags::empty())
                .unwrap();
            pair.settle();
            assert_eq!(contexts(&pair.a.scq.drain()), [2], "{mode:?}");
        });
    }

    #[test]
    fn test_connected_completions_go_to_their_cqs_rule_p1() {
        both_pairs(|mode, pair| {
            let (a_buf, b_buf) = (pair.a.pattern(64, 1, RW), pair.b.pattern(64, 2, RW));
            pair.a.qp.post_receive(10, &[a_buf.sge(0, 64)]).unwrap();
            pair.b.qp.post_receive(20, &[b_buf.sge(0, 64)]).unwrap();
            send(&pair.a, 1, &[a_buf.sge(0, 8)], WrFlags::empty()).unwrap();
            pair.a
                .write_to(2, &[a_buf.sge(0, 8)], &b_buf, 32, WrFlags::empty())
                .unwrap();
            send(&pair.b, 3, &[b_buf.sge(0, 8)], WrFlags::empty()).unwrap();
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(1, Opcode::Send), ok(2, Opcode::Write)],
                "{mode:?}"
            );
            assert_eq!(summary(&pair.b.rcq.drain()), [ok(20, Opcode::Receive)]);
            assert_eq!(summary(&pair.b.scq.drain()), [ok(3, Opcode::Send)]);
            assert_eq!(summary(&pair.a.rcq.drain()), [ok(10, Opcode::Receive)]);
        });
    }

    #[test]
    fn test_connected_one_cq_for_both_queues_rule_p1() {
        both(|mode| {
            let device = Device::new(Limits::DEFAULT, mode).unwrap();
            let pd = Pd::new(&device).unwrap();
            let cq = TestCq::new(64);
            let config = QpConfig {
                context: 0xC,
                ..CONFIG
            };
            let qp = Qp::new(&pd, &cq.cq, &cq.cq, None, config).unwrap();
            let peer = idle_side(mode, 0xB);
            connect(&qp, &peer.qp, (1, 1), (1, 1)).unwrap();
            let mine = Registered::new(&pd, Buffer::pattern(32, 1), Access::LOCAL_WRITE);
            let theirs = peer.pattern(32, 2, Access::LOCAL_WRITE);
            qp.post_receive(1, &[mine.sge(0, 32)]).unwrap();
            peer.qp.post_receive(2, &[theirs.sge(0, 32)]).unwrap();
            qp.post_send(3, Payload::Sges(&[mine.sge(0, 16)]), WrFlags::empty(), None)
                .unwrap();
            settle();
            send(&peer, 4, &[theirs.sge(0, 32)], WrFlags::empty()).unwrap();
            settle();
            let all = cq.drain();
            assert_eq!(
                summary(&all),
                [ok(3, Opcode::Send), ok(1, Opcode::Receive)],
                "{mode:?}"
            );
            assert!(all.iter().all(|c| c.qp_context == 0xC));
            assert_eq!(all[1].bytes, 32);
        });
    }

    #[test]
    fn test_a_received_send_leaves_the_receiver_quiescent_rule_l21() {
        // A receive taken for an incoming Send is counted until its entry is
        // in the CQ (L21); the count must come back to zero, or the
        // receiver's close never completes. (The receive path that copies a
        // few SGEs out, `take_receive_into`, once took without counting and
        // `complete_taken` then wrapped the count.)
        both_pairs(|mode, pair| {
            let (src, inbox) = pair.send_buffers(48, 4, 64);
            pair.send_to_b(7, &[inbox.sge(0, 64)], 1, &[src.sge(0, 48)]);
            assert_eq!(contexts(&pair.b.rcq.drain()), [7], "{mode:?}");
            assert!(pair.b.qp.is_quiescent(), "{mode:?}: nothing taken is left");
            assert!(pair.a.qp.is_quiescent(), "{mode:?}");
        });
    }

    #[test]
    fn test_connected_send_waits_for_a_receive_posted_later() {
        // The engine's documented choice (engine.rs): a Send that finds no
        // receive at the peer waits for one (an infinite RNR retry count),
        // so a consumer may post its receive just after the peer's Send.
        both_pairs(|mode, pair| {
            let (src, inbox) = pair.send_buffers(48, 4, 64);
            send(&pair.a, 1, &[src.sge(0, 48)], WrFlags::empty()).unwrap();
            send(&pair.a, 2, &[src.sge(8, 8)], WrFlags::empty()).unwrap();
            pair.settle();
            assert!(
                pair.a.scq.drain().is_empty(),
                "{mode:?}: waits while no receive is posted"
            );
            assert_eq!(pair.a.qp.state(), QpState::Connected);
            pair.b.qp.post_receive(7, &[inbox.sge(0, 64)]).unwrap();
            pair.settle();
            assert_eq!(summary(&pair.a.scq.drain()), [ok(1, Opcode::Send)]);
            assert_eq!(&inbox.buffer.bytes()[..48], src.buffer.bytes());
            pair.b.qp.post_receive(8, &[inbox.sge(0, 64)]).unwrap();
            pair.settle();
            assert_eq!(contexts(&pair.a.scq.drain()), [2]);
            assert_eq!(contexts(&pair.b.rcq.drain()), [7, 8]);
        });
    }

    #[test]
    fn test_connected_counters_count_octets_and_frames() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(10_000, 1, RW);
            let target = pair.b.pattern(10_000, 2, RW);
            pair.b.qp.post_receive(1, &[target.sge(0, 100)]).unwrap();
            send(&pair.a, 1, &[src.sge(0, 100)], WrFlags::empty()).unwrap();
            pair.a
                .write_to(2, &[src.sge(0, 10_000)], &target, 0, WrFlags::empty())
                .unwrap();
            pair.a
                .read_from(3, &[src.sge(0, 5000)], &target, 0, WrFlags::empty())
                .unwrap();
            pair.settle();
            assert_eq!(pair.a.scq.drain().len(), 3, "{mode:?}");
            let (a, b) = (&pair.a.device.counters, &pair.b.device.counters);
            let load = |c: &core::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
            // A to B: the Send (1 frame) and the Write (3 frames of 4 KiB).
            assert_eq!(load(&a.rdma_out_frames), 4);
            assert_eq!(load(&a.rdma_out_octets), 10_100 + 4 * FRAME_OVERHEAD);
            assert_eq!(load(&b.rdma_in_frames), 4);
            assert_eq!(load(&b.rdma_in_octets), 10_100 + 4 * FRAME_OVERHEAD);
            // B to A: the Read's 5000 bytes (2 frames).
            assert_eq!(load(&b.rdma_out_frames), 2);
            assert_eq!(load(&b.rdma_out_octets), 5000 + 2 * FRAME_OVERHEAD);
            assert_eq!(load(&a.rdma_in_frames), 2);
            assert_eq!(load(&a.rdma_in_octets), 5000 + 2 * FRAME_OVERHEAD);
        });
    }
}

// ----- connected: flags, inline data, ordering, queue limits -----------------

mod connected_flags {
    use super::*;

    #[test]
    fn test_connected_inline_send_copies_bytes_at_post_time_rule_p12() {
        both_pairs(|mode, pair| {
            let inbox = pair.b.buffer(256, 0, Access::LOCAL_WRITE);
            let mut source = Buffer::pattern(100, 7);
            let original = source.bytes().to_vec();
            let span = source.span();
            // Held back by the doorbell, so it cannot have run yet when the
            // consumer reuses its buffer.
            pair.a
                .qp
                .post_send(1, Payload::Inline(&[span]), WrFlags::DEFER, None)
                .unwrap();
            memory::copy_from_slice(span, &[0xEE; 100]).unwrap();
            // Held back by the missing receive (RNR wait), likewise.
            pair.a
                .qp
                .post_send(2, Payload::Inline(&[span]), WrFlags::empty(), None)
                .unwrap();
            memory::copy_from_slice(span, &[0x11; 100]).unwrap();
            pair.settle();
            assert!(pair.a.scq.drain().is_empty(), "{mode:?}");
            pair.b.qp.post_receive(10, &[inbox.sge(0, 128)]).unwrap();
            pair.b.qp.post_receive(11, &[inbox.sge(128, 128)]).unwrap();
            pair.settle();
            assert_eq!(contexts(&pair.a.scq.drain()), [1, 2]);
            assert_eq!(
                &inbox.buffer.bytes()[..100],
                &original[..],
                "the bytes of post time"
            );
            assert!(inbox.buffer.bytes()[128..228].iter().all(|&b| b == 0xEE));
        });
    }

    #[test]
    fn test_connected_inline_takes_more_spans_than_max_sge_rule_p12() {
        both_pairs(|mode, pair| {
            let inbox = pair.b.buffer(256, 0, Access::LOCAL_WRITE);
            let mut parts: Vec<Buffer> = (0..7)
                .map(|i| Buffer::pattern(10 + i * 5, u8::try_from(i).unwrap()))
                .collect();
            let spans: Vec<Span> = parts.iter_mut().map(Buffer::span).collect();
            assert!(spans.len() > CONFIG.max_initiator_sge as usize);
            pair.b.qp.post_receive(1, &[inbox.sge(0, 256)]).unwrap();
            // P12: the tokens are ignored; these buffers are not even registered.
            pair.a
                .qp
                .post_send(2, Payload::Inline(&spans), WrFlags::empty(), None)
                .unwrap();
            pair.settle();
            let expected: Vec<u8> = parts
                .iter()
                .flat_map(|p| p.bytes().iter().copied())
                .collect();
            let got = pair.b.rcq.drain();
            assert_eq!(got[0].bytes, u32_of(expected.len()), "{mode:?}");
            assert_eq!(&inbox.buffer.bytes()[..expected.len()], &expected[..]);
            assert!(
                inbox.buffer.bytes()[expected.len()..]
                    .iter()
                    .all(|&b| b == 0)
            );
        });
    }

    #[test]
    fn test_connected_inline_exactly_max_size_and_one_byte_over_rule_p12() {
        both(|mode| {
            for inline_size in [CONFIG.inline_size, u32_of(MAX_INLINE)] {
                let pair = Pair::with(
                    mode,
                    QpConfig {
                        inline_size,
                        ..CONFIG
                    },
                    true,
                );
                let size = inline_size as usize;
                let inbox = pair.b.buffer(size + 1, 0, Access::LOCAL_WRITE);
                let mut whole = Buffer::pattern(size + 1, 8);
                let span = whole.span();
                let (exact, over) = (span.sub(0, size).unwrap(), span);
                let (head, tail) = (span.sub(0, 1).unwrap(), span.sub(1, size).unwrap());
                for flags in [WrFlags::empty(), WrFlags::DEFER] {
                    assert_eq!(
                        pair.a
                            .qp
                            .post_send(9, Payload::Inline(&[over]), flags, None),
                        Err(PostError::InlineTooLong)
                    );
                    assert_eq!(
                        pair.a
                            .qp
                            .post_send(9, Payload::Inline(&[head, tail]), flags, None),
                        Err(PostError::InlineTooLong)
                    );
                    let t = pair.b.buffer(size + 1, 0, RW);
                    assert_eq!(
                        pair.a.qp.post_write(
                            9,
                            Payload::Inline(&[over]),
                            t.raddr(0),
                            t.rkey(),
                            flags
                        ),
                        Err(PostError::InlineTooLong)
                    );
                }
                pair.b
                    .qp
                    .post_receive(1, &[inbox.sge(0, u32_of(size + 1))])
                    .unwrap();
                pair.a
                    .qp
                    .post_send(2, Payload::Inline(&[exact]), WrFlags::empty(), None)
                    .unwrap();
                pair.settle();
                assert_eq!(
                    summary(&pair.a.scq.drain()),
                    [ok(2, Opcode::Send)],
                    "{mode:?} {size}"
                );
                assert_eq!(pair.b.rcq.drain()[0].bytes, inline_size);
                assert_eq!(&inbox.buffer.bytes()[..size], &whole.bytes()[..size]);
                assert_eq!(inbox.buffer.bytes()[size], 0);
            }
        });
    }

    #[test]
    fn test_connected_inline_write_rule_p13() {
        both_pairs(|mode, pair| {
            let target = pair.b.buffer(300, 0, RW);
            let mut parts: Vec<Buffer> = (0..6)
                .map(|i| Buffer::pattern(30, 40 + u8::try_from(i).unwrap()))
                .collect();
            let spans: Vec<Span> = parts.iter_mut().map(Buffer::span).collect();
            pair.a
                .qp
                .post_write(
                    1,
                    Payload::Inline(&spans),
                    target.raddr(20),
                    target.rkey(),
                    WrFlags::empty(),
                )
                .unwrap();
            // Overwritten after the post: the Write carries the old bytes.
            for span in &spans {
                memory::copy_from_slice(*span, &[0xFF; 30]).unwrap();
            }
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(1, Opcode::Write)],
                "{mode:?}"
            );
            let expected: Vec<u8> = (0..6)
                .flat_map(|i| pattern(30, 40 + u8::try_from(i).unwrap()))
                .collect();
            let t = target.buffer.bytes();
            assert_eq!(&t[20..200], &expected[..]);
            assert!(t[..20].iter().chain(&t[200..]).all(|&b| b == 0));
        });
    }

    #[test]
    fn test_connected_inline_flag_on_sges_or_read_is_refused_rule_p25() {
        both_pairs(|mode, pair| {
            let buf = pair.a.pattern(16, 1, RW);
            let target = pair.b.buffer(16, 0, RW);
            let bad = Err(PostError::InvalidParameter);
            assert_eq!(send(&pair.a, 1, &[buf.sge(0, 16)], WrFlags::INLINE), bad);
            assert_eq!(
                pair.a
                    .read_from(1, &[buf.sge(0, 16)], &target, 0, WrFlags::INLINE),
                bad
            );
            pair.settle();
            assert!(pair.a.scq.drain().is_empty(), "{mode:?}");
        });
    }

    #[test]
    fn test_connected_silent_success_reports_only_failures_rule_p14() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(32, 1, Access::empty());
            let target = pair.b.buffer(64, 0, RW);
            let no_write = pair.b.buffer(64, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(5, &[target.sge(0, 32)]).unwrap();
            let silent = WrFlags::SILENT_SUCCESS;
            send(&pair.a, 1, &[src.sge(0, 32)], silent).unwrap();
            pair.a
                .write_to(2, &[src.sge(0, 32)], &target, 32, silent)
                .unwrap();
            let sink = pair.a.buffer(8, 0, Access::LOCAL_WRITE);
            pair.a
                .read_from(3, &[sink.sge(0, 8)], &target, 0, silent)
                .unwrap();
            pair.settle();
            assert!(
                pair.a.scq.drain().is_empty(),
                "{mode:?}: silent successes report nothing"
            );
            assert_eq!(
                contexts(&pair.b.rcq.drain()),
                [5],
                "the peer's receive still completes"
            );
            assert_eq!(&target.buffer.bytes()[32..], src.buffer.bytes());
            // A silent request that fails still reports its error.
            pair.a
                .write_to(4, &[src.sge(0, 32)], &no_write, 0, silent)
                .unwrap();
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [(4, Opcode::Write, WcStatus::RemoteAccessError)]
            );
        });
    }

    #[test]
    fn test_connected_read_fence_honoured_rule_p16() {
        both_pairs(|mode, pair| {
            let remote = pair.b.pattern(64, 9, RW);
            let staging = pair.a.buffer(64, 0, Access::LOCAL_WRITE);
            let inbox = pair.b.buffer(64, 0, Access::LOCAL_WRITE);
            let copy = pair.b.buffer(64, 0, RW);
            pair.b.qp.post_receive(1, &[inbox.sge(0, 64)]).unwrap();
            // Read into the staging buffer, then forward it with fenced
            // requests: they may only start once the Read has completed, so
            // they carry what it read.
            pair.a
                .read_from(10, &[staging.sge(0, 64)], &remote, 0, WrFlags::DEFER)
                .unwrap();
            send(
                &pair.a,
                11,
                &[staging.sge(0, 64)],
                WrFlags::READ_FENCE | WrFlags::DEFER,
            )
            .unwrap();
            pair.a
                .write_to(12, &[staging.sge(0, 64)], &copy, 0, WrFlags::READ_FENCE)
                .unwrap();
            pair.settle();
            assert_eq!(contexts(&pair.a.scq.drain()), [10, 11, 12], "{mode:?}");
            assert_eq!(inbox.buffer.bytes(), remote.buffer.bytes());
            assert_eq!(copy.buffer.bytes(), remote.buffer.bytes());
        });
    }

    #[test]
    fn test_connected_solicited_flag_marks_receive_and_wakes_solicited_arm_rule_p17() {
        both_pairs(|mode, pair| {
            let (src, inbox) = pair.send_buffers(8, 1, 64);
            let key_owner = Fast::new(&pair.b, 1, 0);
            key_owner.post(&pair.b, PREP, RW, WrFlags::empty()).unwrap();
            pair.settle();
            for ctx in 1..=3 {
                pair.b.qp.post_receive(ctx, &[inbox.sge(0, 64)]).unwrap();
            }
            pair.b.rcq.cq.arm(ArmType::Solicited);
            send(&pair.a, 1, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            pair.settle();
            assert!(
                pair.b.rcq.recorder.events().is_empty(),
                "{mode:?}: an unsolicited receive does not wake a SOLICITED arm"
            );
            send(&pair.a, 2, &[src.sge(0, 8)], WrFlags::SOLICITED).unwrap();
            pair.settle();
            assert_eq!(pair.b.rcq.recorder.events(), [CqEvent::Completion]);
            pair.a
                .qp
                .post_send(
                    3,
                    Payload::Sges(&[src.sge(0, 8)]),
                    WrFlags::SOLICITED,
                    Some(key_owner.rkey()),
                )
                .unwrap();
            pair.settle();
            let got = pair.b.rcq.drain();
            let solicited: Vec<_> = got
                .iter()
                .map(|c| (c.request_context, c.solicited))
                .collect();
            assert_eq!(solicited, [(1, false), (2, true), (3, true)]);
            assert_eq!(got[2].opcode, Opcode::ReceiveAndInvalidate);
        });
    }

    /// Posts `op` with each documented flag alone, then with all of them at
    /// once, and checks each completes successfully (or silently).
    fn every_flag(mode: EngineMode) {
        let kit = Kit::new(mode);
        let mut expected = Vec::new();
        let mut context = 100;
        for op in Op::ALL {
            let documented = op.documented_flags();
            for flags in documented.iter().chain([documented]) {
                context += 1;
                assert_eq!(
                    kit.post(op, context, flags, Access::REMOTE_READ),
                    Ok(()),
                    "{mode:?} {op:?} {flags:?}"
                );
                if flags.contains(WrFlags::DEFER) {
                    kit.ring();
                }
                // Let the clean-up run before the next post (see the ignored
                // test_deferred_bind_behind_queued_invalidate_of_same_window).
                settle();
                expected.push((context, op, flags));
            }
        }
        // The ALLOW_* and READ_SINK flags of Bind and FastRegister.
        let rights = [
            (Op::Bind, Access::REMOTE_READ),
            (Op::Bind, Access::REMOTE_WRITE),
            (Op::FastRegister, Access::REMOTE_READ),
            (Op::FastRegister, Access::LOCAL_WRITE),
            (Op::FastRegister, Access::REMOTE_WRITE),
            (Op::FastRegister, Access::READ_SINK),
            (Op::FastRegister, Access::all()),
        ];
        for (op, access) in rights {
            context += 1;
            assert_eq!(
                kit.post(op, context, WrFlags::empty(), access),
                Ok(()),
                "{mode:?} {op:?} {access:?}"
            );
            settle();
            expected.push((context, op, WrFlags::empty()));
        }
        settle();
        let done = kit.a().scq.drain();
        assert!(
            done.iter().all(|c| c.status == WcStatus::Success),
            "{mode:?}: {:?}",
            summary(&done)
        );
        for (ctx, op, flags) in expected {
            let mine: Vec<_> = done.iter().filter(|c| c.request_context == ctx).collect();
            if flags.contains(WrFlags::SILENT_SUCCESS) {
                assert!(mine.is_empty(), "{mode:?} {op:?} {flags:?}: silent");
            } else {
                assert_eq!(mine.len(), 1, "{mode:?} {op:?} {flags:?}");
                assert_eq!(mine[0].opcode, op.opcode());
            }
        }
        assert!(
            kit.b()
                .rcq
                .drain()
                .iter()
                .all(|c| c.status == WcStatus::Success)
        );
        assert_eq!(kit.a().qp.state(), QpState::Connected);
    }

    #[test]
    fn test_connected_every_documented_flag_accepted_and_honoured_rule_p18() {
        both(every_flag);
    }

    #[test]
    fn test_connected_send_and_invalidate_completes_as_send_rule_p22_c2() {
        both_pairs(|mode, pair| {
            let fast = Fast::new(&pair.b, 1, 0x3C);
            fast.post(&pair.b, 1, RW, WrFlags::empty()).unwrap();
            pair.settle();
            assert!(fast.mapped(&pair.b));
            let (src, inbox) = pair.send_buffers(20, 6, 32);
            pair.b.qp.post_receive(2, &[inbox.sge(0, 32)]).unwrap();
            pair.a
                .send(3, &[src.sge(0, 20)], Some(fast.rkey()))
                .unwrap();
            pair.settle();
            let sent = pair.a.scq.drain();
            assert_eq!(summary(&sent), [ok(3, Opcode::Send)], "{mode:?}: P22");
            let got = pair.b.rcq.drain();
            assert_eq!(summary(&got), [ok(2, Opcode::ReceiveAndInvalidate)]);
            assert_eq!(
                got[0].invalidated_key,
                fast.rkey(),
                "C2: the token named by the peer"
            );
            assert_eq!(got[0].bytes, 20);
            assert_eq!(&inbox.buffer.bytes()[..20], src.buffer.bytes());
            assert!(!fast.mapped(&pair.b), "C2: invalidated at the receiver");
            assert!(!remote_ok(
                &pair.b,
                fast.rkey(),
                FR_BASE,
                8,
                Access::REMOTE_READ
            ));
            // A later Invalidate of that token fails as usual.
            pair.b
                .qp
                .post_invalidate(
                    4,
                    InvalidateTarget::Mr(Arc::clone(&fast.mr)),
                    WrFlags::empty(),
                )
                .unwrap();
            pair.settle();
            let inv = pair.b.scq.drain();
            assert_eq!(
                inv.last().map(|c| (c.request_context, c.status)),
                Some((4, WcStatus::InvalidRequest))
            );
        });
    }

    #[test]
    fn test_connected_completion_order_is_post_order_for_mixed_ops_rule_p23() {
        use Opcode::{Bind, FastRegister, Invalidate, Read, Send, Write};
        both(|mode| {
            let kit = Kit::new(mode);
            let (a, b) = (kit.a(), kit.b());
            let key = kit.b_fast.rkey();
            kit.map_b_fast();
            // The first Send waits for a receive (none posted yet), so every
            // later request queues behind it, whatever its kind.
            send(a, 1, &[kit.src.sge(0, 16)], WrFlags::empty()).unwrap();
            a.write_to(
                2,
                &[kit.src.sge(16, 16)],
                &kit.target,
                100,
                WrFlags::empty(),
            )
            .unwrap();
            a.read_from(3, &[kit.sink.sge(0, 16)], &kit.target, 0, WrFlags::empty())
                .unwrap();
            kit.bind_readable(4, 16, WrFlags::empty()).unwrap();
            kit.a_fast.post(a, 5, RW, WrFlags::empty()).unwrap();
            a.qp.post_invalidate(
                6,
                InvalidateTarget::Mr(Arc::clone(&kit.a_fast.mr)),
                WrFlags::empty(),
            )
            .unwrap();
            a.send(7, &[kit.src.sge(32, 16)], Some(key)).unwrap();
            a.qp.post_invalidate(
                8,
                InvalidateTarget::Mw(Arc::clone(&kit.mw)),
                WrFlags::empty(),
            )
            .unwrap();
            a.qp.post_send(
                9,
                Payload::Inline(&[kit.inline_span]),
                WrFlags::empty(),
                None,
            )
            .unwrap();
            settle();
            assert!(
                a.scq.drain().is_empty(),
                "{mode:?}: all behind the waiting Send"
            );
            for ctx in 11..=13 {
                b.qp.post_receive(ctx, &[kit.inbox.sge((ctx as u64 - 11) * 64, 64)])
                    .unwrap();
            }
            settle();
            let done = a.scq.drain();
            assert_eq!(contexts(&done), (1..=9).collect::<Vec<_>>(), "{mode:?}");
            assert!(
                done.iter().all(|c| c.status == WcStatus::Success),
                "{:?}",
                summary(&done)
            );
            let ops: Vec<Opcode> = done.iter().map(|c| c.opcode).collect();
            assert_eq!(
                ops,
                [
                    Send,
                    Write,
                    Read,
                    Bind,
                    FastRegister,
                    Invalidate,
                    Send,
                    Invalidate,
                    Send
                ]
            );
            let got = b.rcq.drain();
            assert_eq!(contexts(&got), [11, 12, 13], "receives in post order too");
            assert_eq!(
                &kit.inbox.buffer.bytes()[..16],
                &kit.src.buffer.bytes()[..16]
            );
            assert_eq!(
                &kit.inbox.buffer.bytes()[64..80],
                &kit.src.buffer.bytes()[32..48]
            );
            assert_eq!(&kit.inbox.buffer.bytes()[128..192], kit.inline.bytes());
        });
    }

    #[test]
    fn test_connected_full_queues_refuse_and_lose_nothing_rule_p24() {
        both(|mode| {
            let config = QpConfig {
                initiator_depth: 8,
                receive_depth: 8,
                ..CONFIG
            };
            let pair = Pair::with(mode, config, true);
            let src = pair.a.pattern(64, 1, RW);
            let inbox = pair.b.buffer(8 * 64, 0, Access::LOCAL_WRITE);
            // The first Send waits for a receive; the other seven queue.
            for ctx in 1..=8 {
                send(&pair.a, ctx, &[src.sge(ctx as u64, 8)], WrFlags::empty()).unwrap();
            }
            assert_eq!(
                send(&pair.a, 9, &[src.sge(0, 8)], WrFlags::empty()),
                Err(PostError::QueueFull)
            );
            assert_eq!(
                pair.a
                    .write_to(9, &[src.sge(0, 8)], &inbox, 0, WrFlags::DEFER),
                Err(PostError::QueueFull)
            );
            for ctx in 21..=28 {
                pair.a.qp.post_receive(ctx, &[src.sge(0, 64)]).unwrap();
            }
            assert_eq!(
                pair.a.qp.post_receive(29, &[src.sge(0, 64)]),
                Err(PostError::QueueFull)
            );
            for ctx in 11..=18 {
                pair.b
                    .qp
                    .post_receive(ctx, &[inbox.sge((ctx as u64 - 11) * 64, 64)])
                    .unwrap();
            }
            pair.settle();
            let sent = pair.a.scq.drain();
            assert_eq!(contexts(&sent), (1..=8).collect::<Vec<_>>(), "{mode:?}");
            assert!(sent.iter().all(|c| c.status == WcStatus::Success));
            for (i, ctx) in (1..=8_usize).enumerate() {
                assert_eq!(
                    &inbox.buffer.bytes()[i * 64..i * 64 + 8],
                    &src.buffer.bytes()[ctx..ctx + 8]
                );
            }
            // The receive queue drains too: every accepted receive completes.
            for ctx in 31..=38 {
                send(&pair.b, ctx, &[inbox.sge(0, 4)], WrFlags::empty()).unwrap();
            }
            pair.settle();
            assert_eq!(contexts(&pair.a.rcq.drain()), (21..=28).collect::<Vec<_>>());
            assert_eq!(pair.b.scq.drain().len(), 8);
        });
    }

    #[test]
    fn test_connected_failed_posts_never_complete_rule_p6_d3() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(64, 1, RW);
            let target = pair.b.buffer(64, 0, RW);
            let other_pd = pair.b.pattern(8, 1, RW);
            let plain_mr = pair.a.buffer(8, 0, RW);
            let mw = Mw::new(&pair.a.pd).unwrap();
            let mut big = Buffer::pattern(CONFIG.inline_size as usize + 1, 0);
            let five: Vec<Sge> = (0..5).map(|i| src.sge(i, 1)).collect();
            let huge = [
                Sge {
                    len: u32::MAX,
                    ..src.sge(0, 0)
                },
                Sge {
                    len: u32::MAX,
                    ..src.sge(0, 0)
                },
            ];
            let mut ok = 0;
            for (fail, flags) in [(1000, WrFlags::empty()), (2000, WrFlags::DEFER)] {
                ok += 1;
                pair.a
                    .write_to(ok, &[src.sge(0, 8)], &target, 0, flags)
                    .unwrap();
                assert_eq!(
                    send(&pair.a, fail + 1, &five, flags),
                    Err(PostError::TooManySge)
                );
                assert_eq!(
                    send(&pair.a, fail + 2, &huge, flags),
                    Err(PostError::TooLong)
                );
                assert_eq!(
                    pair.a
                        .qp
                        .post_send(fail + 3, Payload::Inline(&[big.span()]), flags, None),
                    Err(PostError::InlineTooLong)
                );
                assert_eq!(
                    plain_post_fast_register(&pair.a, fail + 4, &plain_mr, flags),
                    Err(PostError::InvalidParameter)
                );
                assert_eq!(
                    pair.a.qp.post_bind(
                        fail + 5,
                        &other_pd.mr,
                        &mw,
                        other_pd.raddr(0),
                        8,
                        Access::REMOTE_READ,
                        flags
                    ),
                    Err(PostError::InvalidParameter)
                );
                assert_eq!(
                    pair.a.qp.post_bind(
                        fail + 6,
                        &plain_mr.mr,
                        &mw,
                        plain_mr.raddr(4),
                        8,
                        Access::REMOTE_READ,
                        flags
                    ),
                    Err(PostError::InvalidParameter)
                );
                assert_eq!(
                    pair.a.qp.post_invalidate(
                        fail + 7,
                        InvalidateTarget::Mr(Arc::clone(&plain_mr.mr)),
                        flags
                    ),
                    Err(PostError::InvalidParameter)
                );
                ok += 1;
                pair.a
                    .write_to(ok, &[src.sge(8, 8)], &target, 8, flags)
                    .unwrap();
            }
            pair.a
                .write_to(99, &[src.sge(0, 1)], &target, 0, WrFlags::empty())
                .unwrap();
            pair.settle();
            let done = pair.a.scq.drain();
            assert_eq!(
                contexts(&done),
                [1, 2, 3, 4, 99],
                "{mode:?}: one completion per accepted post, none for refused ones"
            );
            assert!(done.iter().all(|c| c.status == WcStatus::Success));
            assert_eq!(mw.remote_key(), 0, "refused Binds assigned no token");
            assert_eq!(pair.a.qp.state(), QpState::Connected);
        });
    }

    /// A FastRegister of a region that is not a fast-register region.
    fn plain_post_fast_register(
        side: &Side,
        context: usize,
        plain: &Registered,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        let lam = LamPages::new(&side.device, 1, 0);
        side.qp.post_fast_register(
            context,
            &plain.mr,
            &lam.page_list(),
            0,
            PAGE_SIZE,
            0,
            RW,
            flags,
        )
    }
}

// ----- deferred: the doorbell ------------------------------------------------

mod deferred {
    use super::*;

    /// Posts one request of each kind with DEFER (contexts 1–7), with B
    /// ready for them: three receives (contexts 21–23) and its fast region
    /// mapped. Returns nothing; the chain is still open.
    fn post_deferred_chain(kit: &Kit) {
        let (a, b) = (kit.a(), kit.b());
        kit.map_b_fast();
        for ctx in 21..=23 {
            b.qp.post_receive(ctx, &[kit.inbox.sge((ctx as u64 - 21) * 64, 64)])
                .unwrap();
        }
        let d = WrFlags::DEFER;
        kit.bind_readable(1, 64, d).unwrap();
        kit.a_fast.post(a, 2, RW, d).unwrap();
        a.qp.post_invalidate(3, InvalidateTarget::Mr(Arc::clone(&kit.a_fast.mr)), d)
            .unwrap();
        a.read_from(4, &[kit.sink.sge(0, 64)], &kit.target, 0, d)
            .unwrap();
        a.write_to(5, &[kit.src.sge(0, 64)], &kit.target, 256, d)
            .unwrap();
        send(a, 6, &[kit.src.sge(64, 64)], d).unwrap();
        a.qp.post_send(
            7,
            Payload::Sges(&[kit.src.sge(128, 64)]),
            d,
            Some(kit.b_fast.rkey()),
        )
        .unwrap();
    }

    const CHAIN: [(usize, Opcode, WcStatus); 8] = [
        ok(1, Opcode::Bind),
        ok(2, Opcode::FastRegister),
        ok(3, Opcode::Invalidate),
        ok(4, Opcode::Read),
        ok(5, Opcode::Write),
        ok(6, Opcode::Send),
        ok(7, Opcode::Send),
        ok(8, Opcode::Send),
    ];

    #[test]
    fn test_deferred_flag_accepted_on_every_initiator_request_rule_d1() {
        both(|mode| {
            let kit = Kit::new(mode);
            post_deferred_chain(&kit);
            send(kit.a(), 8, &[kit.src.sge(192, 64)], WrFlags::empty()).unwrap();
            settle();
            assert_eq!(summary(&kit.a().scq.drain()), CHAIN, "{mode:?}");
            let got = kit.b().rcq.drain();
            assert_eq!(
                summary(&got),
                [
                    ok(21, Opcode::Receive),
                    ok(22, Opcode::ReceiveAndInvalidate),
                    ok(23, Opcode::Receive),
                ]
            );
            assert_eq!(got[1].invalidated_key, kit.b_fast.rkey());
        });
    }

    #[test]
    fn test_deferred_chain_runs_only_when_a_post_without_the_flag_rings_rule_d2() {
        both(|mode| {
            let kit = Kit::new(mode);
            let (a, b) = (kit.a(), kit.b());
            post_deferred_chain(&kit);
            settle();
            // Nothing ran: no completion and no byte moved, on either side.
            assert!(a.scq.drain().is_empty(), "{mode:?}");
            assert!(b.rcq.drain().is_empty());
            assert!(
                kit.sink.buffer.bytes().iter().all(|&x| x == 0),
                "Read not run"
            );
            assert_eq!(
                &kit.target.buffer.bytes()[256..320],
                &pattern(512, 2)[256..320],
                "Write not run"
            );
            assert!(
                kit.inbox.buffer.bytes().iter().all(|&x| x == 0),
                "Sends not run"
            );
            assert!(
                !remote_ok(
                    a,
                    kit.mw.remote_key(),
                    kit.bindable.raddr(0),
                    8,
                    Access::REMOTE_READ
                ),
                "Bind not run"
            );
            assert!(kit.b_fast.mapped(b), "SendAndInvalidate not run");
            // The undeferred post rings the doorbell for the whole chain.
            send(a, 8, &[kit.src.sge(192, 64)], WrFlags::empty()).unwrap();
            settle();
            assert_eq!(summary(&a.scq.drain()), CHAIN, "{mode:?}");
            assert_eq!(
                &kit.sink.buffer.bytes()[..64],
                &kit.target.buffer.bytes()[..64]
            );
            assert_eq!(
                &kit.target.buffer.bytes()[256..320],
                &kit.src.buffer.bytes()[..64]
            );
            assert_eq!(
                &kit.inbox.buffer.bytes()[..192],
                &kit.src.buffer.bytes()[64..]
            );
            assert!(remote_ok(
                a,
                kit.mw.remote_key(),
                kit.bindable.raddr(0),
                8,
                Access::REMOTE_READ
            ));
            assert!(
                !kit.a_fast.mapped(a),
                "registered, then invalidated, in order"
            );
            assert!(!kit.b_fast.mapped(b));
            assert_eq!(contexts(&b.rcq.drain()), [21, 22, 23]);
        });
    }

    /// Two deferred Writes (contexts 1, 2) then `fail`, which must be
    /// refused with `expected`; the Writes must complete anyway (D4).
    fn inline_failure_rings(
        mode: EngineMode,
        config: QpConfig,
        expected: PostError,
        fail: impl Fn(&Pair, &Registered) -> Result<(), PostError>,
    ) {
        let pair = Pair::with(mode, config, true);
        let src = pair.a.pattern(64, 1, RW);
        let target = pair.b.buffer(64, 0, RW);
        pair.a
            .write_to(1, &[src.sge(0, 16)], &target, 0, WrFlags::DEFER)
            .unwrap();
        pair.a
            .write_to(2, &[src.sge(16, 16)], &target, 16, WrFlags::DEFER)
            .unwrap();
        assert_eq!(fail(&pair, &src), Err(expected), "{mode:?}");
        pair.settle();
        let done = pair.a.scq.drain();
        assert_eq!(
            summary(&done),
            [ok(1, Opcode::Write), ok(2, Opcode::Write)],
            "{mode:?} {expected:?}"
        );
        assert_eq!(&target.buffer.bytes()[..32], &src.buffer.bytes()[..32]);
    }

    #[test]
    fn test_deferred_inline_failure_rings_earlier_deferred_requests_rule_d4() {
        both(|mode| {
            let d = WrFlags::DEFER;
            inline_failure_rings(mode, CONFIG, PostError::TooManySge, |p, s| {
                send(&p.a, 9, &(0..5).map(|i| s.sge(i, 1)).collect::<Vec<_>>(), d)
            });
            inline_failure_rings(mode, CONFIG, PostError::TooLong, |p, s| {
                let huge = Sge {
                    len: u32::MAX,
                    ..s.sge(0, 0)
                };
                send(&p.a, 9, &[huge, huge], WrFlags::empty())
            });
            inline_failure_rings(mode, CONFIG, PostError::InlineTooLong, |p, _| {
                let mut big = Buffer::new(CONFIG.inline_size as usize + 1, 0);
                p.a.qp.post_send(9, Payload::Inline(&[big.span()]), d, None)
            });
            inline_failure_rings(mode, CONFIG, PostError::InvalidParameter, |p, s| {
                p.a.qp
                    .post_read(9, &[s.sge(0, 8)], s.raddr(0), s.rkey(), WrFlags::INLINE | d)
            });
            inline_failure_rings(mode, CONFIG, PostError::InvalidParameter, |p, s| {
                p.a.qp
                    .post_invalidate(9, InvalidateTarget::Mr(Arc::clone(&s.mr)), d)
            });
            inline_failure_rings(mode, CONFIG, PostError::AccessViolation, |p, _| {
                // M15: remote rights on a region initialized without them.
                let lam = LamPages::new(&p.a.device, 1, 0);
                let mr = Mr::new(&p.a.pd, true).unwrap();
                mr.init_fast(1, false).unwrap();
                p.a.qp.post_fast_register(
                    9,
                    &mr,
                    &lam.page_list(),
                    0,
                    PAGE_SIZE,
                    0,
                    Access::REMOTE_READ,
                    d,
                )
            });
            let two = QpConfig {
                initiator_depth: 2,
                ..CONFIG
            };
            inline_failure_rings(mode, two, PostError::QueueFull, |p, s| {
                send(&p.a, 9, &[s.sge(0, 1)], d)
            });
        });
    }

    /// Opens a chain of three deferred Writes (contexts 1–3) and a deferred
    /// Send (4), with two receives at A (contexts 11, 12), then runs `end`.
    /// Every request must complete exactly once, cancelled (D5, E1).
    fn open_chain_ended_by(mode: EngineMode, end: impl Fn(&Pair)) {
        let pair = Pair::new(mode);
        let src = pair.a.pattern(64, 1, RW);
        let target = pair.b.pattern(64, 2, RW);
        for ctx in 1..=3 {
            pair.a
                .write_to(ctx, &[src.sge(0, 8)], &target, 0, WrFlags::DEFER)
                .unwrap();
        }
        send(
            &pair.a,
            4,
            &[src.sge(0, 8)],
            WrFlags::DEFER | WrFlags::SILENT_SUCCESS,
        )
        .unwrap();
        pair.a.qp.post_receive(11, &[src.sge(0, 64)]).unwrap();
        pair.a.qp.post_receive(12, &[src.sge(0, 64)]).unwrap();
        end(&pair);
        pair.settle();
        let chain = [
            (1, Opcode::Write),
            (2, Opcode::Write),
            (3, Opcode::Write),
            (4, Opcode::Send),
        ];
        expect_side_cancelled(&pair.a, mode, &chain, &[11, 12]);
        assert_eq!(target.buffer.bytes(), pattern(64, 2), "nothing ran");
        assert!(pair.a.qp.is_quiescent());
    }

    /// D5: one test per way an open chain ends, in both engine modes.
    macro_rules! open_chain_ended_by {
        ($(#[$test:meta] $name:ident: $end:expr;)*) => {$(
            #[$test]
            fn $name() {
                both(|mode| open_chain_ended_by(mode, $end));
            }
        )*};
    }

    open_chain_ended_by! {
        #[test] test_deferred_open_chain_cancelled_by_flush_rule_d5: |p| p.a.qp.flush();
        #[test] test_deferred_open_chain_cancelled_by_disconnect_rule_d5: |p| p.a.qp.disconnect();
        #[test] test_deferred_open_chain_cancelled_by_close_rule_d5: |p| p.a.qp.close();
        #[test] test_deferred_open_chain_cancelled_by_peer_disconnect_rule_d5: |p| p.b.qp.disconnect();
    }

    #[test]
    fn test_deferred_worked_example_one_completion_rule_d6() {
        both_pairs(|mode, pair| {
            let lam = LamPages::new(&pair.a.device, 2, 0x42);
            let first = Mr::new(&pair.a.pd, true).unwrap();
            first.init_fast(2, true).unwrap();
            let never_initialized = Mr::new(&pair.a.pd, true).unwrap();
            let pages = lam.page_list();
            let d = WrFlags::DEFER;
            pair.a
                .qp
                .post_fast_register(1, &first, &pages, 0, 2 * PAGE_SIZE, FR_BASE, RW, d)
                .unwrap();
            let refused = pair.a.qp.post_fast_register(
                2,
                &never_initialized,
                &pages,
                0,
                2 * PAGE_SIZE,
                FR_BASE,
                RW,
                d,
            );
            assert_eq!(refused, Err(PostError::InvalidParameter), "{mode:?}");
            // No Send follows. Exactly one completion: the first FastRegister.
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(1, Opcode::FastRegister)],
                "{mode:?}"
            );
            let sge = Sge {
                addr: FR_BASE + 10,
                len: 8,
                key: first.local_key().unwrap(),
            };
            assert!(
                pair.a
                    .device
                    .resolve_local(&pair.a.pd, &sge, Access::LOCAL_WRITE)
                    .is_ok(),
                "it ran"
            );
            pair.settle();
            assert!(
                pair.a.scq.drain().is_empty(),
                "and nothing for the refused one, ever"
            );
            let _ = first.close(Box::new(|| {}));
        });
    }

    #[test]
    fn test_deferred_malformed_page_list_also_fails_inline_rule_d6() {
        both_pairs(|mode, pair| {
            let fast = Fast::new(&pair.a, 2, 0);
            let second = Fast::new(&pair.a, 2, 0);
            fast.post(&pair.a, 1, RW, WrFlags::DEFER).unwrap();
            // M16: the base index must be the FBO plus whole pages.
            let bad = pair.a.qp.post_fast_register(
                2,
                &second.mr,
                &second.pages,
                0,
                PAGE_SIZE,
                FR_BASE + 1,
                RW,
                WrFlags::DEFER,
            );
            assert_eq!(bad, Err(PostError::InvalidParameter));
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(1, Opcode::FastRegister)],
                "{mode:?}"
            );
            assert!(fast.mapped(&pair.a));
            assert!(!second.mapped(&pair.a));
        });
    }

    #[test]
    fn test_deferred_post_after_flush_is_not_held_back_rule_e5_d5() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(8, 1, RW);
            pair.a.qp.flush();
            pair.a
                .write_to(1, &[src.sge(0, 8)], &src, 0, WrFlags::DEFER)
                .unwrap();
            pair.settle();
            // Nothing will ever ring it; it completes cancelled on its own.
            expect_cancelled(&pair.a.scq, mode, &[(1, Opcode::Write)]);
        });
    }

    /// Rules M21 and D2 with P23: Bind, Invalidate, Bind of one window,
    /// posted back to back, execute in order, so the second Bind finds the
    /// window unbound. `Mw::prepare_bind` (mr.rs) instead checks the window's
    /// state at post time and refuses the second Bind while the Invalidate is
    /// still queued: with DEFER in both engine modes, and in deferred mode
    /// even without the flag, so whether the post succeeds depends on engine
    /// timing.
    #[test]
    fn test_deferred_bind_behind_queued_invalidate_of_same_window_rule_m21_d2() {
        both(|mode| {
            let kit = Kit::new(mode);
            let a = kit.a();
            let bind = |ctx, flags| kit.bind_readable(ctx, 32, flags);
            bind(1, WrFlags::DEFER).unwrap();
            a.qp.post_invalidate(2, InvalidateTarget::Mw(Arc::clone(&kit.mw)), WrFlags::DEFER)
                .unwrap();
            assert_eq!(bind(3, WrFlags::empty()), Ok(()), "{mode:?}");
            settle();
            assert_eq!(contexts(&a.scq.drain()), [1, 2, 3]);
            assert!(remote_ok(
                a,
                kit.mw.remote_key(),
                kit.bindable.raddr(0),
                32,
                Access::REMOTE_READ
            ));
        });
    }

    /// Rules M16 and D2 with P23: FastRegister(pages P), Invalidate,
    /// FastRegister(pages Q) of one region, posted back to back, leave Q
    /// mapped. `Mr::stage_fast_register` (mr.rs) keeps one staged page list
    /// per region, so the second post overwrites the first's staging before
    /// it executes: the first FastRegister maps Q, and the second then maps
    /// whatever `fast_register` swapped out (an empty list), so the region
    /// ends up mapping nothing.
    #[test]
    fn test_deferred_fast_register_pipeline_on_one_region_maps_latest_pages_rule_m16_d2() {
        both_pairs(|mode, pair| {
            let fast = Fast::new(&pair.a, 1, 0x11);
            let other = LamPages::new(&pair.a.device, 1, 0x22);
            let target = pair.b.buffer(16, 0, RW);
            let d = WrFlags::DEFER;
            fast.post(&pair.a, 1, RW, d).unwrap();
            pair.a
                .qp
                .post_invalidate(2, InvalidateTarget::Mr(Arc::clone(&fast.mr)), d)
                .unwrap();
            pair.a
                .qp
                .post_fast_register(
                    3,
                    &fast.mr,
                    &other.page_list(),
                    0,
                    PAGE_SIZE,
                    FR_BASE,
                    RW,
                    d,
                )
                .unwrap();
            // Copy 16 bytes of what the region maps to B.
            let fr_sge = Sge {
                addr: FR_BASE,
                len: 16,
                key: fast.mr.local_key().unwrap(),
            };
            pair.a
                .write_to(4, &[fr_sge], &target, 0, WrFlags::empty())
                .unwrap();
            pair.settle();
            let done = pair.a.scq.drain();
            assert_eq!(
                summary(&done).iter().map(|s| s.2).collect::<Vec<_>>(),
                [WcStatus::Success; 4],
                "{mode:?}: {:?}",
                summary(&done)
            );
            assert!(
                target.buffer.bytes().iter().all(|&b| b == 0x22),
                "the latest pages are mapped"
            );
        });
    }
}

// ----- error: flushed, or terminated by an error completion -----------------

mod error {
    use super::*;

    #[test]
    fn test_error_flush_cancels_every_pending_receive_and_request_rule_e1_e2() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(64, 1, RW);
            let target = pair.b.pattern(64, 2, RW);
            for ctx in 11..=13 {
                pair.a.qp.post_receive(ctx, &[src.sge(0, 64)]).unwrap();
            }
            // Two Sends waiting for receives at B, then a deferred Write.
            post_a_deferred(&pair, &src, &target, WrFlags::empty());
            pair.settle();
            assert!(pair.a.scq.drain().is_empty());
            pair.a.qp.flush();
            pair.settle();
            expect_side_cancelled(&pair.a, mode, &A_DEFERRED, &[11, 12, 13]);
            assert_eq!(pair.a.qp.state(), QpState::Error);
            assert_eq!(target.buffer.bytes(), pattern(64, 2));
            // A receive posted at B now finds no waiting Send: none completes twice.
            pair.b.qp.post_receive(21, &[target.sge(0, 64)]).unwrap();
            pair.settle();
            assert!(pair.a.scq.drain().is_empty());
            assert!(pair.b.rcq.drain().is_empty());
            // Flushing again finds nothing more to cancel.
            pair.a.qp.flush();
            pair.settle();
            assert!(pair.a.scq.drain().is_empty() && pair.a.rcq.drain().is_empty());
        });
    }

    #[test]
    fn test_error_completion_cancels_outstanding_and_later_requests_on_both_sides_rule_e5_e9() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(64, 1, RW);
            let target = pair.b.pattern(64, 2, RW);
            let no_write = pair.b.buffer(64, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(11, &[target.sge(0, 64)]).unwrap();
            pair.b.qp.post_receive(12, &[target.sge(0, 64)]).unwrap();
            pair.a.scq.cq.arm(ArmType::Solicited);
            pair.a
                .write_to(1, &[src.sge(0, 8)], &no_write, 0, WrFlags::DEFER)
                .unwrap();
            send(&pair.a, 2, &[src.sge(0, 8)], WrFlags::DEFER).unwrap();
            pair.a
                .write_to(3, &[src.sge(0, 8)], &target, 0, WrFlags::empty())
                .unwrap();
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [
                    (1, Opcode::Write, WcStatus::RemoteAccessError),
                    cancelled(2, Opcode::Send),
                    cancelled(3, Opcode::Write)
                ],
                "{mode:?}"
            );
            assert_eq!(
                pair.a.scq.recorder.events(),
                [CqEvent::Completion],
                "E9: an error satisfies a SOLICITED arm"
            );
            assert_eq!(pair.a.qp.state(), QpState::Error);
            assert_eq!(
                pair.b.qp.state(),
                QpState::Error,
                "the peer is terminated too"
            );
            expect_cancelled(
                &pair.b.rcq,
                mode,
                &[(11, Opcode::Receive), (12, Opcode::Receive)],
            );
            assert_eq!(
                target.buffer.bytes(),
                pattern(64, 2),
                "nothing after the error ran"
            );
            // Everything posted later, on either side, completes cancelled.
            pair.a
                .write_to(4, &[src.sge(0, 8)], &target, 0, WrFlags::empty())
                .unwrap();
            pair.a.qp.post_receive(5, &[src.sge(0, 8)]).unwrap();
            send(&pair.b, 6, &[target.sge(0, 8)], WrFlags::SILENT_SUCCESS).unwrap();
            pair.b.qp.post_receive(7, &[target.sge(0, 8)]).unwrap();
            pair.settle();
            expect_cancelled(&pair.a.scq, mode, &[(4, Opcode::Write)]);
            expect_cancelled(&pair.a.rcq, mode, &[(5, Opcode::Receive)]);
            expect_cancelled(&pair.b.scq, mode, &[(6, Opcode::Send)]);
            expect_cancelled(&pair.b.rcq, mode, &[(7, Opcode::Receive)]);
        });
    }

    #[test]
    fn test_error_inline_failure_does_not_harm_earlier_or_later_requests_rule_e6() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(64, 1, RW);
            let target = pair.b.buffer(64, 0, RW);
            pair.a
                .write_to(1, &[src.sge(0, 16)], &target, 0, WrFlags::empty())
                .unwrap();
            let five: Vec<Sge> = (0..5).map(|i| src.sge(i, 1)).collect();
            assert_eq!(
                send(&pair.a, 2, &five, WrFlags::empty()),
                Err(PostError::TooManySge)
            );
            assert_eq!(
                pair.a
                    .qp
                    .post_read(3, &[src.sge(0, 8)], 0, 0, WrFlags::INLINE),
                Err(PostError::InvalidParameter)
            );
            pair.a
                .write_to(4, &[src.sge(16, 16)], &target, 16, WrFlags::empty())
                .unwrap();
            pair.settle();
            assert_eq!(
                summary(&pair.a.scq.drain()),
                [ok(1, Opcode::Write), ok(4, Opcode::Write)],
                "{mode:?}"
            );
            assert_eq!(&target.buffer.bytes()[..32], &src.buffer.bytes()[..32]);
            assert_eq!(pair.a.qp.state(), QpState::Connected);
        });
    }

    #[test]
    fn test_error_receive_too_small_fails_both_sides_and_terminates_rule_e7() {
        both_pairs(|mode, pair| {
            let (lost_a, lost_b) = (watch(&pair.a.qp), watch(&pair.b.qp));
            let (src, inbox) = pair.send_buffers(100, 1, 320);
            pair.b.qp.post_receive(11, &[inbox.sge(0, 50)]).unwrap();
            pair.b.qp.post_receive(12, &[inbox.sge(64, 256)]).unwrap();
            send(&pair.a, 1, &[src.sge(0, 100)], WrFlags::empty()).unwrap();
            send(&pair.a, 2, &[src.sge(0, 10)], WrFlags::empty()).unwrap();
            pair.settle();
            let got = pair.b.rcq.drain();
            assert_eq!(
                summary(&got),
                [
                    (11, Opcode::Receive, WcStatus::ReceiveTooSmall),
                    cancelled(12, Opcode::Receive)
                ],
                "{mode:?}"
            );
            let sent = pair.a.scq.drain();
            assert_eq!(contexts(&sent), [1, 2]);
            assert!(
                !sent[0].status.is_success() && sent[0].status != WcStatus::Cancelled,
                "the sender fails: {:?}",
                sent[0]
            );
            assert_eq!(sent[1].status, WcStatus::Cancelled);
            assert_eq!(
                (pair.a.qp.state(), pair.b.qp.state()),
                (QpState::Error, QpState::Error),
                "terminated"
            );
            assert_eq!(
                (lost_a.count(), lost_b.count()),
                (1, 1),
                "each side hears of it once"
            );
            assert!(
                inbox.buffer.bytes()[64..].iter().all(|&b| b == 0),
                "the other receive got nothing"
            );
        });
    }

    /// Completion statuses each operation may report (rule E8, NDSPI v2
    /// table), under the NTSTATUS each `WcStatus` stands for: Success →
    /// SUCCESS, LengthError → DATA_OVERRUN, ReceiveTooSmall →
    /// BUFFER_OVERFLOW, Local/RemoteAccessError → ACCESS_VIOLATION,
    /// RemoteOperationError → REMOTE_RESOURCES, InvalidRequest →
    /// INVALID_DEVICE_REQUEST, InternalError → INTERNAL_ERROR, Cancelled →
    /// CANCELLED. SendAndInvalidate follows Send, FastRegister follows Bind.
    /// Every operation may report Success, Cancelled, InvalidRequest and
    /// InternalError; the data-moving ones the three access errors too, and
    /// the length status of their side.
    fn allowed(op: Opcode) -> Vec<WcStatus> {
        use WcStatus::{
            Cancelled, InternalError, InvalidRequest, LengthError, LocalAccessError,
            ReceiveTooSmall, RemoteAccessError, RemoteOperationError, Success,
        };
        let mut allowed = vec![Success, Cancelled, InvalidRequest, InternalError];
        let length = match op {
            Opcode::Send | Opcode::Read | Opcode::Write => LengthError,
            Opcode::Receive | Opcode::ReceiveAndInvalidate => ReceiveTooSmall,
            Opcode::Bind | Opcode::FastRegister | Opcode::Invalidate => return allowed,
        };
        allowed.extend([
            length,
            LocalAccessError,
            RemoteAccessError,
            RemoteOperationError,
        ]);
        allowed
    }

    /// Runs `scenario` on a fresh kit whose B has two receives posted, then
    /// a trailing Write; checks every completion of both sides against
    /// [`allowed`] and that the scenario produced `expected`.
    fn check_statuses(mode: EngineMode, expected: (Opcode, WcStatus), scenario: impl Fn(&Kit)) {
        let kit = Kit::new(mode);
        kit.b()
            .qp
            .post_receive(21, &[kit.inbox.sge(0, 128)])
            .unwrap();
        kit.b()
            .qp
            .post_receive(22, &[kit.inbox.sge(128, 128)])
            .unwrap();
        scenario(&kit);
        kit.a()
            .write_to(99, &[kit.src.sge(0, 8)], &kit.target, 0, WrFlags::empty())
            .unwrap();
        settle();
        let all: Vec<Completion> = [&kit.a().scq, &kit.a().rcq, &kit.b().scq, &kit.b().rcq]
            .iter()
            .flat_map(|cq| cq.drain())
            .collect();
        for c in &all {
            assert!(
                allowed(c.opcode).contains(&c.status),
                "{mode:?}: E8 forbids {:?} for {:?}",
                c.status,
                c.opcode
            );
        }
        assert!(
            all.iter().any(|c| (c.opcode, c.status) == expected),
            "{mode:?}: {expected:?} not in {:?}",
            summary(&all)
        );
    }

    #[test]
    fn test_error_statuses_of_data_operations_stay_within_table_rule_e8() {
        both(|mode| {
            use Opcode::{Read, Receive, Send, Write};
            use WcStatus::{
                LocalAccessError, ReceiveTooSmall, RemoteAccessError, RemoteOperationError,
            };
            check_statuses(mode, (Receive, ReceiveTooSmall), |k| {
                send(k.a(), 1, &[k.src.sge(0, 200)], WrFlags::empty()).unwrap();
            });
            check_statuses(mode, (Send, LocalAccessError), |k| {
                send(
                    k.a(),
                    1,
                    &[Sge {
                        key: 0x0BAD,
                        ..k.src.sge(0, 8)
                    }],
                    WrFlags::empty(),
                )
                .unwrap();
            });
            check_statuses(mode, (Receive, LocalAccessError), |k| {
                // The third Send lands in a receive the device may not write.
                let read_only = k.b().pattern(64, 0, Access::empty());
                k.b().qp.post_receive(23, &[read_only.sge(0, 64)]).unwrap();
                for ctx in 1..=3 {
                    send(k.a(), ctx, &[k.src.sge(0, 8)], WrFlags::empty()).unwrap();
                }
                settle();
            });
            check_statuses(mode, (Write, RemoteAccessError), |k| {
                k.a()
                    .qp
                    .post_write(
                        1,
                        Payload::Sges(&[k.src.sge(0, 8)]),
                        k.target.raddr(0),
                        k.target.rkey() ^ 0x40,
                        WrFlags::empty(),
                    )
                    .unwrap();
            });
            check_statuses(mode, (Read, RemoteOperationError), |k| {
                k.a()
                    .read_from(1, &[k.sink.sge(0, 64)], &k.target, 500, WrFlags::empty())
                    .unwrap();
            });
            check_statuses(mode, (Read, LocalAccessError), |k| {
                k.a()
                    .read_from(1, &[k.src.sge(0, 8)], &k.target, 0, WrFlags::empty())
                    .unwrap();
            });
        });
    }

    #[test]
    fn test_error_statuses_of_memory_operations_stay_within_table_rule_e8() {
        both(|mode| {
            use Opcode::{Bind, FastRegister, Invalidate, Receive};
            use WcStatus::{Cancelled, InvalidRequest};
            check_statuses(mode, (FastRegister, InvalidRequest), |k| {
                // Page-aligned, but not in any LAM: refused when it runs.
                let nowhere = [0x7000_0000_0000_u64];
                k.a()
                    .qp
                    .post_fast_register(
                        1,
                        &k.a_fast.mr,
                        &nowhere,
                        0,
                        PAGE_SIZE,
                        FR_BASE,
                        RW,
                        WrFlags::empty(),
                    )
                    .unwrap();
            });
            check_statuses(mode, (Invalidate, InvalidRequest), |k| {
                k.a()
                    .qp
                    .post_invalidate(
                        1,
                        InvalidateTarget::Mr(Arc::clone(&k.a_fast.mr)),
                        WrFlags::empty(),
                    )
                    .unwrap();
            });
            check_statuses(mode, (Bind, InvalidRequest), |k| {
                k.bind_readable(1, 8, WrFlags::DEFER).unwrap();
                assert_eq!(
                    k.bindable.mr.deregister(Box::new(|| {})),
                    Ok(crate::rnic::mr::Progress::Done)
                );
            });
            check_statuses(mode, (Receive, InvalidRequest), |k| {
                // B's fast region is not mapped: the token is not valid there
                // (M24), so the receive fails (and nothing was invalidated).
                k.a()
                    .qp
                    .post_send(
                        1,
                        Payload::Sges(&[k.src.sge(0, 8)]),
                        WrFlags::empty(),
                        Some(k.b_fast.rkey()),
                    )
                    .unwrap();
            });
            check_statuses(mode, (Bind, Cancelled), |k| {
                let d = WrFlags::DEFER;
                k.bind_readable(1, 8, d).unwrap();
                k.a_fast.post(k.a(), 2, RW, d).unwrap();
                k.a()
                    .qp
                    .post_invalidate(3, InvalidateTarget::Mr(Arc::clone(&k.a_fast.mr)), d)
                    .unwrap();
                k.a()
                    .read_from(4, &[k.sink.sge(0, 8)], &k.target, 0, d)
                    .unwrap();
                k.a().qp.flush();
            });
        });
    }
}

// ----- error, continued: cancelled waits, silent requests, flush races ------

mod error_cancel {
    use super::*;

    #[test]
    fn test_error_send_waiting_for_receive_ends_cancelled_by_flush() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(8, 1, Access::empty());
            send(&pair.a, 1, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            pair.settle();
            assert!(pair.a.scq.drain().is_empty());
            pair.a.qp.flush();
            pair.settle();
            expect_cancelled(&pair.a.scq, mode, &[(1, Opcode::Send)]);
            // The receive that arrives afterwards is not consumed by it.
            let inbox = pair.b.buffer(8, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(2, &[inbox.sge(0, 8)]).unwrap();
            pair.settle();
            assert!(pair.b.rcq.drain().is_empty());
            assert!(pair.a.scq.drain().is_empty(), "completed once only");
            assert!(inbox.buffer.bytes().iter().all(|&b| b == 0));
        });
    }

    #[test]
    fn test_error_cancelled_silent_request_still_reported_rule_p15() {
        both_pairs(|mode, pair| {
            let src = pair.a.pattern(8, 1, RW);
            let silent = WrFlags::SILENT_SUCCESS;
            send(&pair.a, 1, &[src.sge(0, 8)], silent).unwrap();
            pair.a
                .write_to(2, &[src.sge(0, 8)], &src, 0, silent | WrFlags::DEFER)
                .unwrap();
            pair.a.qp.flush();
            pair.a
                .write_to(3, &[src.sge(0, 8)], &src, 0, silent)
                .unwrap();
            pair.settle();
            expect_cancelled(
                &pair.a.scq,
                mode,
                &[(1, Opcode::Send), (2, Opcode::Write), (3, Opcode::Write)],
            );
        });
    }

    #[test]
    fn test_error_flush_racing_posts_loses_and_duplicates_nothing_rule_p4() {
        const POSTS: usize = 150;
        const RECEIVES: usize = 60;
        both(|mode| {
            for round in 0..8 {
                let pair = Pair::new(mode);
                let src = pair.a.pattern(8, 1, RW);
                let target = pair.b.buffer(8, 0, RW);
                let barrier = Barrier::new(3);
                let (accepted, received): (Vec<bool>, Vec<bool>) = thread::scope(|s| {
                    let poster = s.spawn(|| {
                        barrier.wait();
                        (1..=POSTS)
                            .map(|ctx| {
                                let flags = if ctx % 3 == 0 {
                                    WrFlags::DEFER
                                } else {
                                    WrFlags::empty()
                                };
                                pair.a
                                    .write_to(ctx, &[src.sge(0, 8)], &target, 0, flags)
                                    .is_ok()
                            })
                            .collect()
                    });
                    // Receives race the flush on the other queue (P2 allows it).
                    let receiver = s.spawn(|| {
                        barrier.wait();
                        (1..=RECEIVES)
                            .map(|ctx| pair.a.qp.post_receive(1000 + ctx, &[src.sge(0, 8)]).is_ok())
                            .collect()
                    });
                    s.spawn(|| {
                        barrier.wait();
                        // Vary where in the stream of posts the flush lands.
                        for _ in 0..round * 20 {
                            thread::yield_now();
                        }
                        pair.a.qp.flush();
                    });
                    (poster.join().unwrap(), receiver.join().unwrap())
                });
                pair.settle();
                let done = pair.a.scq.drain();
                for (i, ok) in accepted.iter().enumerate() {
                    assert_eq!(
                        count(&done, i + 1),
                        usize::from(*ok),
                        "{mode:?} round {round}: request {}",
                        i + 1
                    );
                }
                // No Send ever reached A, so every accepted receive ends
                // cancelled by the flush: exactly once.
                let receive_done = pair.a.rcq.drain();
                for (i, ok) in received.iter().enumerate() {
                    assert_eq!(
                        count(&receive_done, 1001 + i),
                        usize::from(*ok),
                        "{mode:?} round {round}: receive {}",
                        1001 + i
                    );
                }
                assert!(
                    received.iter().all(|&ok| ok),
                    "the receive queue is deep enough for all"
                );
                assert!(receive_done.iter().all(|c| c.status == WcStatus::Cancelled));
                assert!(
                    done.windows(2)
                        .all(|w| w[0].request_context < w[1].request_context),
                    "P23: in post order"
                );
                let first_cancelled = done
                    .iter()
                    .position(|c| c.status == WcStatus::Cancelled)
                    .unwrap_or(done.len());
                assert!(
                    done[..first_cancelled]
                        .iter()
                        .all(|c| c.status == WcStatus::Success)
                );
                assert!(
                    done[first_cancelled..]
                        .iter()
                        .all(|c| c.status == WcStatus::Cancelled),
                    "nothing runs after the flush"
                );
                assert_eq!(pair.a.qp.state(), QpState::Error);
            }
        });
    }
}

// ----- unusable: a CQ of the QP overflowed (E10, E13) ------------------------

mod unusable {
    use super::*;

    /// A connected pair whose A side has an initiator CQ of `scq` entries
    /// and a receive CQ of `rcq` entries.
    fn pair_with_small_cqs(mode: EngineMode, scq: u32, rcq: u32) -> Pair {
        let device = Device::new(Limits::DEFAULT, mode).unwrap();
        let pd = Pd::new(&device).unwrap();
        let a = Side::custom(&pd, TestCq::new(scq), TestCq::new(rcq), None, 0xA);
        let b = idle_side(mode, 0xB);
        connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
        Pair { a, b }
    }

    /// Every post on `side` is refused with `Unusable`.
    fn assert_unusable(side: &Side, buf: &Registered, mode: EngineMode) {
        let u = Err(PostError::Unusable);
        assert_eq!(
            side.write_to(50, &[buf.sge(0, 8)], buf, 0, WrFlags::empty()),
            u,
            "{mode:?}: Write"
        );
        assert_eq!(
            send(side, 51, &[buf.sge(0, 8)], WrFlags::DEFER),
            u,
            "{mode:?}: Send"
        );
        assert_eq!(
            side.read_from(52, &[buf.sge(0, 8)], buf, 0, WrFlags::empty()),
            u,
            "{mode:?}: Read"
        );
        assert_eq!(
            side.qp.post_receive(53, &[buf.sge(0, 8)]),
            u,
            "{mode:?}: Receive"
        );
    }

    #[test]
    fn test_unusable_after_initiator_cq_overflow_rule_e10_e13() {
        both(|mode| {
            let pair = pair_with_small_cqs(mode, 2, 64);
            let src = pair.a.pattern(8, 1, RW);
            let target = pair.b.buffer(8, 0, RW);
            for ctx in 1..=3 {
                pair.a
                    .write_to(ctx, &[src.sge(0, 8)], &target, 0, WrFlags::empty())
                    .unwrap();
            }
            pair.settle();
            assert!(
                pair.a.scq.cq.is_error(),
                "{mode:?}: the third completion overflowed"
            );
            assert_unusable(&pair.a, &src, mode);
            // E10: the completions queued before the overflow can still be
            // reaped, and the overflow is reported through the next arm.
            assert_eq!(contexts(&pair.a.scq.drain()), [1, 2]);
            pair.a.scq.cq.arm(ArmType::Errors);
            assert_eq!(pair.a.scq.recorder.events(), [CqEvent::Overflow]);
            // E13: it still closes normally, and the peer is not left hanging.
            assert_eq!(pair.b.qp.state(), QpState::Error);
            pair.a.qp.close();
            assert_eq!(pair.a.qp.state(), QpState::Disconnected);
            assert!(pair.a.qp.is_quiescent());
        });
    }

    #[test]
    fn test_unusable_after_receive_cq_overflow_rule_e10_e13() {
        both(|mode| {
            let pair = pair_with_small_cqs(mode, 64, 1);
            let buf = pair.a.buffer(16, 0, RW);
            pair.a.qp.post_receive(1, &[buf.sge(0, 8)]).unwrap();
            pair.a.qp.post_receive(2, &[buf.sge(8, 8)]).unwrap();
            let src = pair.b.pattern(8, 1, Access::empty());
            send(&pair.b, 11, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            send(&pair.b, 12, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            pair.settle();
            assert!(pair.a.rcq.cq.is_error(), "{mode:?}");
            assert_unusable(&pair.a, &buf, mode);
            assert_eq!(contexts(&pair.a.rcq.drain()), [1]);
            assert!(
                pair.a.scq.drain().is_empty(),
                "refused posts leave no trace"
            );
        });
    }
}

// ----- disconnected: disconnect, close, and the peer's view -----------------

mod disconnected {
    use super::*;

    #[test]
    fn test_disconnected_posts_fail_inline_and_reconnect_refused_rule_x5() {
        both_pairs(|mode, pair| {
            let kit = Unconnected::new(&pair.a);
            pair.a.qp.disconnect();
            assert_eq!(pair.a.qp.state(), QpState::Disconnected, "{mode:?}");
            kit.expect_refused(&pair.a, mode);
            let qp = &pair.a.qp;
            assert_eq!(
                qp.post_receive(8, &[kit.buf.sge(0, 8)]),
                Err(PostError::ConnectionInvalid),
                "receives too"
            );
            // X5: never connected again, to anyone.
            let fresh = idle_side(mode, 0xC);
            assert_eq!(
                connect(qp, &fresh.qp, (1, 1), (1, 1)),
                Err(ConnectError::NotIdle)
            );
            assert_eq!(
                connect(&fresh.qp, qp, (1, 1), (1, 1)),
                Err(ConnectError::NotIdle)
            );
            assert_eq!(
                connect(qp, &pair.b.qp, (1, 1), (1, 1)),
                Err(ConnectError::NotIdle)
            );
            assert_eq!(
                fresh.qp.state(),
                QpState::Idle,
                "the refused partner is left as it was"
            );
            // A flush or a second disconnect changes nothing.
            qp.flush();
            qp.disconnect();
            assert_eq!(qp.state(), QpState::Disconnected);
            pair.settle();
            assert!(
                pair.a.scq.drain().is_empty() && pair.a.rcq.drain().is_empty(),
                "P6: no trace"
            );
            assert_eq!(kit.mw.remote_key(), 0);
            assert!(!kit.fast.mapped(&pair.a));
        });
    }

    #[test]
    fn test_disconnected_outstanding_requests_cancelled_on_both_sides_rule_x6_x7() {
        both_pairs(|mode, pair| {
            let (lost_a, lost_b) = (watch(&pair.a.qp), watch(&pair.b.qp));
            let a_buf = pair.a.pattern(64, 1, RW);
            let b_buf = pair.b.pattern(64, 2, RW);
            pair.a.qp.post_receive(11, &[a_buf.sge(0, 64)]).unwrap();
            pair.a.qp.post_receive(12, &[a_buf.sge(0, 64)]).unwrap();
            post_a_deferred(&pair, &a_buf, &b_buf, WrFlags::SILENT_SUCCESS);
            pair.b
                .write_to(31, &[b_buf.sge(0, 8)], &a_buf, 0, WrFlags::DEFER)
                .unwrap();
            send(&pair.b, 32, &[b_buf.sge(0, 8)], WrFlags::DEFER).unwrap();
            pair.settle();
            pair.a.qp.disconnect();
            pair.settle();
            expect_side_cancelled(&pair.a, mode, &A_DEFERRED, &[11, 12]);
            // X6: no half-closed connection; the peer's requests end too.
            expect_cancelled(
                &pair.b.scq,
                mode,
                &[(31, Opcode::Write), (32, Opcode::Send)],
            );
            assert_eq!(
                (pair.a.qp.state(), pair.b.qp.state()),
                (QpState::Disconnected, QpState::Error)
            );
            assert!(pair.a.qp.is_quiescent() && pair.b.qp.is_quiescent());
            assert_eq!(a_buf.buffer.bytes(), pattern(64, 1));
            assert_eq!(b_buf.buffer.bytes(), pattern(64, 2));
            assert_eq!(
                (lost_a.count(), lost_b.count()),
                (0, 1),
                "X2: only the peer is told"
            );
            pair.b.qp.disconnect();
            pair.settle();
            assert_eq!(pair.b.qp.state(), QpState::Disconnected);
            assert!(
                pair.a.scq.drain().is_empty() && pair.b.scq.drain().is_empty(),
                "nothing completes twice"
            );
            assert_eq!((lost_a.count(), lost_b.count()), (0, 1));
        });
    }

    #[test]
    fn test_disconnected_peer_learns_connection_lost_exactly_once_rule_x2() {
        both(|mode| {
            for close in [false, true] {
                let pair = Pair::new(mode);
                let (lost_a, lost_b) = (watch(&pair.a.qp), watch(&pair.b.qp));
                if close {
                    pair.a.qp.close();
                } else {
                    pair.a.qp.disconnect();
                }
                pair.a.qp.disconnect();
                pair.a.qp.close();
                pair.b.qp.flush();
                pair.b.qp.disconnect();
                pair.b.qp.close();
                pair.settle();
                assert_eq!(
                    (lost_a.count(), lost_b.count()),
                    (0, 1),
                    "{mode:?} close={close}"
                );
            }
            // A local flush is not a lost connection.
            let pair = Pair::new(mode);
            let (lost_a, lost_b) = (watch(&pair.a.qp), watch(&pair.b.qp));
            pair.a.qp.flush();
            assert_eq!((lost_a.count(), lost_b.count()), (0, 0));
            assert_eq!(pair.b.qp.state(), QpState::Connected);
        });
    }

    #[test]
    fn test_disconnected_concurrently_by_both_sides_without_double_completion_rule_x3() {
        both(|mode| {
            for round in 0..20 {
                let pair = Pair::new(mode);
                let (lost_a, lost_b) = (watch(&pair.a.qp), watch(&pair.b.qp));
                let (a_buf, b_buf) = (pair.a.pattern(64, 1, RW), pair.b.pattern(64, 2, RW));
                for ctx in 101..=104 {
                    pair.a.qp.post_receive(ctx, &[a_buf.sge(0, 64)]).unwrap();
                    pair.b
                        .qp
                        .post_receive(ctx + 100, &[b_buf.sge(0, 64)])
                        .unwrap();
                }
                for ctx in 1..=6 {
                    send(&pair.a, ctx, &[a_buf.sge(0, 8)], WrFlags::empty()).unwrap();
                    send(&pair.b, ctx + 10, &[b_buf.sge(0, 8)], WrFlags::empty()).unwrap();
                }
                pair.a
                    .write_to(7, &[a_buf.sge(0, 8)], &b_buf, 0, WrFlags::DEFER)
                    .unwrap();
                let barrier = Barrier::new(2);
                thread::scope(|s| {
                    s.spawn(|| {
                        barrier.wait();
                        pair.a.qp.disconnect();
                    });
                    s.spawn(|| {
                        barrier.wait();
                        pair.b.qp.disconnect();
                    });
                });
                pair.settle();
                let sides = [
                    (&pair.a, (1..=7).collect::<Vec<_>>(), 101..=104),
                    (&pair.b, (11..=16).collect(), 201..=204),
                ];
                for (side, initiator, receives) in sides {
                    let (sent, got) = (side.scq.drain(), side.rcq.drain());
                    for ctx in initiator {
                        assert_eq!(
                            count(&sent, ctx),
                            1,
                            "{mode:?} round {round}: request {ctx}"
                        );
                    }
                    for ctx in receives {
                        assert_eq!(count(&got, ctx), 1, "{mode:?} round {round}: receive {ctx}");
                    }
                    assert!(
                        sent.iter()
                            .chain(&got)
                            .all(|c| matches!(c.status, WcStatus::Success | WcStatus::Cancelled))
                    );
                    assert_eq!(side.qp.state(), QpState::Disconnected);
                }
                assert!(
                    lost_a.count() <= 1 && lost_b.count() <= 1,
                    "X3: at most one indication each"
                );
            }
        });
    }
}

// ----- srq: shared receive queues -------------------------------------------

mod srq {
    use super::*;

    /// An SRQ notifier that records every event.
    #[derive(Default)]
    struct SrqLog(Mutex<Vec<SrqEvent>>);

    impl SrqNotify for SrqLog {
        fn notify(&self, event: SrqEvent) {
            self.0.lock().unwrap().push(event);
        }
    }

    impl SrqLog {
        fn events(&self) -> Vec<SrqEvent> {
            self.0.lock().unwrap().clone()
        }
    }

    /// An SRQ on B's device with two attached QPs (contexts 0xB1, 0xB2),
    /// each with its own CQs and connected to its own peer (0xA1, 0xA2).
    struct Rig {
        srq: Arc<Srq>,
        log: Arc<SrqLog>,
        b: [Side; 2],
        a: [Side; 2],
        /// Receive buffers on B's PD: 4 KiB of zeros.
        inbox: Registered,
    }

    impl Rig {
        /// The rig with an unarmed SRQ of `depth` that holds the receives
        /// `posted` (as [`Rig::post`]).
        fn new(mode: EngineMode, depth: u32, posted: impl IntoIterator<Item = usize>) -> Self {
            let device = Device::new(Limits::DEFAULT, mode).unwrap();
            let pd = Pd::new(&device).unwrap();
            let log = Arc::new(SrqLog::default());
            let srq = Srq::new(
                &pd,
                depth,
                4,
                0,
                Some(Arc::clone(&log) as Arc<dyn SrqNotify>),
            )
            .unwrap();
            let b = [0xB1, 0xB2]
                .map(|ctx| Side::custom(&pd, TestCq::new(64), TestCq::new(64), Some(&srq), ctx));
            let a = [0xA1, 0xA2].map(|ctx| idle_side(mode, ctx));
            for (a, b) in a.iter().zip(&b) {
                connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
            }
            let inbox = Registered::new(&pd, Buffer::new(4096, 0), Access::LOCAL_WRITE);
            let rig = Self {
                srq,
                log,
                b,
                a,
                inbox,
            };
            rig.post(posted);
            rig
        }

        /// Posts SRQ receives `contexts`, each of 64 bytes at 64 × context.
        fn post(&self, contexts: impl IntoIterator<Item = usize>) {
            for ctx in contexts {
                self.srq
                    .post_receive(ctx, &[self.inbox.sge(ctx as u64 * 64, 64)])
                    .unwrap();
            }
        }

        /// Sends 8 pattern bytes of `seed` from peer `i` and waits for it
        /// (its source is released on return: a receive must be there).
        fn send_from(&self, i: usize, context: usize, seed: u8) {
            let src = self.a[i].pattern(8, seed, Access::empty());
            send(&self.a[i], context, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            settle();
        }
    }

    #[test]
    fn test_srq_completions_on_the_consuming_qps_receive_cq_rule_q2_q3() {
        both(|mode| {
            let rig = Rig::new(mode, 16, 1..=3);
            rig.send_from(1, 21, 7);
            rig.send_from(0, 22, 8);
            rig.send_from(1, 23, 9);
            // Any attached QP takes the SRQ's oldest receive (Q3).
            let b0 = rig.b[0].rcq.drain();
            let b1 = rig.b[1].rcq.drain();
            assert_eq!(
                summary(&b1),
                [ok(1, Opcode::Receive), ok(3, Opcode::Receive)],
                "{mode:?}"
            );
            assert_eq!(summary(&b0), [ok(2, Opcode::Receive)]);
            // Q2: each carries the consuming QP's own context.
            assert!(b0.iter().all(|c| c.qp_context == 0xB1 && c.bytes == 8));
            assert!(b1.iter().all(|c| c.qp_context == 0xB2 && c.bytes == 8));
            let bytes = rig.inbox.buffer.bytes();
            assert_eq!(&bytes[64..72], &pattern(8, 7)[..]);
            assert_eq!(&bytes[128..136], &pattern(8, 8)[..]);
            assert_eq!(&bytes[192..200], &pattern(8, 9)[..]);
            assert!(rig.srq.is_empty());
            assert!(rig.b[0].scq.drain().is_empty() && rig.b[1].scq.drain().is_empty());
        });
    }

    #[test]
    fn test_srq_send_waits_for_a_receive_posted_later() {
        both(|mode| {
            let rig = Rig::new(mode, 16, []);
            let src = rig.a[0].pattern(8, 7, Access::empty());
            send(&rig.a[0], 21, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            settle();
            assert!(
                rig.a[0].scq.drain().is_empty(),
                "{mode:?}: waits for an SRQ receive"
            );
            rig.post([5]);
            settle();
            assert_eq!(
                summary(&rig.a[0].scq.drain()),
                [ok(21, Opcode::Send)],
                "{mode:?}"
            );
            assert_eq!(contexts(&rig.b[0].rcq.drain()), [5]);
            assert_eq!(&rig.inbox.buffer.bytes()[320..328], &pattern(8, 7)[..]);
        });
    }

    #[test]
    fn test_srq_receives_survive_flush_disconnect_and_close_of_attached_qp_rule_e4() {
        both(|mode| {
            let rig = Rig::new(mode, 16, 1..=3);
            rig.b[0].qp.flush();
            settle();
            assert!(
                rig.b[0].rcq.drain().is_empty(),
                "{mode:?}: SRQ receives are not cancelled"
            );
            assert_eq!(rig.srq.len(), 3);
            rig.b[0].qp.disconnect();
            rig.b[0].qp.close();
            settle();
            assert!(rig.b[0].rcq.drain().is_empty());
            assert_eq!(rig.srq.len(), 3);
            assert_eq!(rig.srq.attached(), 1, "close detaches");
            rig.send_from(1, 21, 7);
            assert_eq!(
                contexts(&rig.b[1].rcq.drain()),
                [1],
                "the other QP still consumes them, oldest first"
            );
        });
    }

    #[test]
    fn test_srq_threshold_fires_once_when_count_drops_below_rule_q4_q5() {
        both(|mode| {
            let rig = Rig::new(mode, 16, 1..=4);
            rig.srq.modify(0, 2).unwrap();
            assert!(rig.log.events().is_empty(), "{mode:?}: 4 is not below 2");
            rig.send_from(0, 21, 1);
            rig.send_from(0, 22, 1);
            assert!(rig.log.events().is_empty(), "2 is not below 2");
            rig.send_from(1, 23, 1);
            assert_eq!(rig.log.events(), [SrqEvent::BelowThreshold], "1 is below 2");
            rig.send_from(1, 24, 1);
            // Q5: disarmed until the next modify with a nonzero threshold.
            rig.post(5..=7);
            for ctx in 25..=27 {
                rig.send_from(0, ctx, 1);
            }
            assert_eq!(rig.log.events().len(), 1);
            rig.srq.modify(0, 0).unwrap();
            assert_eq!(rig.log.events().len(), 1, "threshold 0 does not re-arm");
            // Q4: armed while already below fires at once.
            rig.srq.modify(0, 3).unwrap();
            assert_eq!(rig.log.events(), [SrqEvent::BelowThreshold; 2]);
            rig.post(8..=11);
            rig.srq.modify(0, 2).unwrap();
            for ctx in 28..=31 {
                rig.send_from(1, ctx, 1);
            }
            assert_eq!(rig.log.events(), [SrqEvent::BelowThreshold; 3]);
        });
    }

    #[test]
    fn test_srq_created_armed_and_below_threshold_fires_at_once_rule_q4() {
        let device = inline_device();
        let pd = Pd::new(&device).unwrap();
        let log = Arc::new(SrqLog::default());
        let srq = Srq::new(&pd, 8, 1, 1, Some(Arc::clone(&log) as Arc<dyn SrqNotify>)).unwrap();
        assert_eq!(log.events(), [SrqEvent::BelowThreshold]);
        let buf = Registered::new(&pd, Buffer::new(8, 0), Access::LOCAL_WRITE);
        srq.post_receive(1, &[buf.sge(0, 8)]).unwrap();
        assert_eq!(log.events().len(), 1, "once per arm");
        let quiet = Arc::new(SrqLog::default());
        let _unarmed =
            Srq::new(&pd, 8, 1, 0, Some(Arc::clone(&quiet) as Arc<dyn SrqNotify>)).unwrap();
        assert!(quiet.events().is_empty(), "threshold 0 does not arm");
    }

    #[test]
    fn test_srq_modify_depth_zero_keeps_and_above_max_refused_rule_q6() {
        both(|mode| {
            let rig = Rig::new(mode, 4, 1..=3);
            rig.srq.modify(0, 0).unwrap();
            assert_eq!((rig.srq.depth(), rig.srq.len()), (4, 3));
            let max = Limits::DEFAULT.max_srq_depth;
            assert_eq!(rig.srq.modify(max + 1, 0), Err(SrqError::InvalidParameter));
            assert_eq!(rig.srq.modify(max + 1, 1), Err(SrqError::InvalidParameter));
            assert!(rig.log.events().is_empty(), "a refused modify does not arm");
            // Growing keeps every queued receive, in order.
            rig.srq.modify(32, 0).unwrap();
            assert_eq!((rig.srq.depth(), rig.srq.len()), (32, 3));
            rig.post(4..=32);
            assert_eq!(rig.srq.post_receive(33, &[]), Err(PostError::QueueFull));
            for ctx in 1..=3 {
                rig.send_from(0, 40 + ctx, u8::try_from(ctx).unwrap());
            }
            assert_eq!(contexts(&rig.b[0].rcq.drain()), [1, 2, 3], "{mode:?}");
            assert_eq!(&rig.inbox.buffer.bytes()[192..200], &pattern(8, 3)[..]);
        });
    }

    #[test]
    fn test_srq_shrink_below_count_refused_and_unchanged_rule_q7() {
        both(|mode| {
            let rig = Rig::new(mode, 8, 1..=5);
            assert_eq!(rig.srq.modify(4, 0), Err(SrqError::BelowCount));
            assert_eq!(rig.srq.modify(4, 10), Err(SrqError::BelowCount));
            assert_eq!(
                (rig.srq.depth(), rig.srq.len()),
                (8, 5),
                "{mode:?}: unchanged"
            );
            assert!(
                rig.log.events().is_empty(),
                "the refused modify did not arm either"
            );
            rig.srq.modify(5, 0).unwrap();
            assert_eq!((rig.srq.depth(), rig.srq.len()), (5, 5));
            assert_eq!(rig.srq.post_receive(6, &[]), Err(PostError::QueueFull));
            for ctx in 1..=5 {
                rig.send_from(1, 40 + ctx, u8::try_from(ctx).unwrap());
            }
            assert_eq!(contexts(&rig.b[1].rcq.drain()), [1, 2, 3, 4, 5]);
            assert_eq!(&rig.inbox.buffer.bytes()[320..328], &pattern(8, 5)[..]);
        });
    }

    /// B on its own device, receiving through an SRQ without callback,
    /// connected to an idle A, with an inbox registered at B.
    struct SrqLink {
        srq: Arc<Srq>,
        a: Side,
        b: Side,
        inbox: Registered,
    }

    impl SrqLink {
        /// An SRQ of (depth, threshold) and one SGE, a receive CQ of
        /// `rcq_depth` at B and an inbox of `inbox_len` bytes, whose two
        /// halves the SRQ holds as receives 1 and 2.
        fn new(
            mode: EngineMode,
            (depth, threshold): (u32, u32),
            rcq_depth: u32,
            inbox_len: usize,
        ) -> Self {
            let device = Device::new(Limits::DEFAULT, mode).unwrap();
            let pd = Pd::new(&device).unwrap();
            let srq = Srq::new(&pd, depth, 1, threshold, None).unwrap();
            let rcq = TestCq::new(rcq_depth);
            let b = Side::custom(&pd, TestCq::new(16), rcq, Some(&srq), 0xB);
            let a = idle_side(mode, 0xA);
            connect(&a.qp, &b.qp, (1, 1), (1, 1)).unwrap();
            let inbox = Registered::new(&pd, Buffer::new(inbox_len, 0), Access::LOCAL_WRITE);
            let half = u32_of(inbox_len / 2);
            for (ctx, at) in [(1, 0), (2, u64::from(half))] {
                srq.post_receive(ctx, &[inbox.sge(at, half)]).unwrap();
            }
            Self { srq, a, b, inbox }
        }
    }

    #[test]
    fn test_srq_without_callback_notifies_nothing_and_works_rule_q8() {
        both(|mode| {
            // Armed and below its threshold from the start, with no callback.
            let SrqLink { srq, a, b, inbox } = SrqLink::new(mode, (4, 2), 16, 64);
            srq.modify(0, 3).unwrap();
            let src = a.pattern(32, 4, Access::empty());
            send(&a, 3, &[src.sge(0, 32)], WrFlags::empty()).unwrap();
            settle();
            assert_eq!(contexts(&b.rcq.drain()), [1], "{mode:?}");
            assert_eq!(&inbox.buffer.bytes()[..32], src.buffer.bytes());
            srq.fail();
            assert_eq!(srq.post_receive(4, &[]), Err(PostError::Unusable));
        });
    }

    #[test]
    fn test_srq_fatal_error_reported_once_and_srq_and_qps_unusable_rule_q9() {
        both(|mode| {
            let rig = Rig::new(mode, 8, 1..=2);
            rig.srq.fail();
            rig.srq.fail();
            assert_eq!(
                rig.log.events(),
                [SrqEvent::Fatal],
                "{mode:?}: reported once"
            );
            assert_eq!(rig.srq.post_receive(9, &[]), Err(PostError::Unusable));
            assert_eq!(rig.srq.modify(0, 8), Err(SrqError::InError));
            assert_eq!(rig.srq.modify(16, 0), Err(SrqError::InError));
            // Every QP attached to it is unusable too.
            let buf = rig.b[0].pattern(8, 1, RW);
            let target = rig.a[0].buffer(8, 0, RW);
            for b in &rig.b {
                assert_eq!(
                    send(b, 1, &[buf.sge(0, 8)], WrFlags::empty()),
                    Err(PostError::Unusable)
                );
                assert_eq!(
                    b.write_to(2, &[buf.sge(0, 8)], &target, 0, WrFlags::empty()),
                    Err(PostError::Unusable)
                );
            }
            settle();
            assert!(
                rig.b
                    .iter()
                    .all(|b| b.scq.drain().is_empty() && b.rcq.drain().is_empty()),
                "nothing more reported"
            );
            assert_eq!(rig.log.events(), [SrqEvent::Fatal]);
            assert_eq!(target.buffer.bytes(), [0; 8]);
        });
    }

    #[test]
    fn test_srq_qp_whose_receive_cq_overflowed_is_unusable_rule_e10_q2() {
        both(|mode| {
            let SrqLink {
                srq: _srq,
                a,
                b,
                inbox,
            } = SrqLink::new(mode, (8, 0), 1, 16);
            let src = a.pattern(8, 1, Access::empty());
            send(&a, 11, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            send(&a, 12, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
            settle();
            assert!(
                b.rcq.cq.is_error(),
                "{mode:?}: the second receive completion overflowed"
            );
            let target = a.buffer(8, 0, RW);
            assert_eq!(
                b.write_to(1, &[inbox.sge(0, 8)], &target, 0, WrFlags::empty()),
                Err(PostError::Unusable)
            );
            assert_eq!(
                send(&b, 2, &[inbox.sge(0, 8)], WrFlags::empty()),
                Err(PostError::Unusable)
            );
            settle();
            assert!(b.scq.drain().is_empty());
            assert_eq!(target.buffer.bytes(), [0; 8]);
        });
    }

    #[test]
    fn test_srq_creation_limits_rule_l12_q1() {
        let none = Device::new(
            Limits {
                max_srq_depth: 0,
                ..Limits::DEFAULT
            },
            EngineMode::Inline,
        )
        .unwrap();
        let pd = Pd::new(&none).unwrap();
        for depth in [0, 1, 16, u32::MAX] {
            assert_eq!(
                Srq::new(&pd, depth, 1, 0, None).unwrap_err(),
                SrqError::InvalidParameter,
                "Q1: no SRQ at all, depth {depth}"
            );
        }
        let device = inline_device();
        let pd = Pd::new(&device).unwrap();
        let l = Limits::DEFAULT;
        assert_eq!(
            Srq::new(&pd, l.max_srq_depth + 1, 1, 0, None).unwrap_err(),
            SrqError::InvalidParameter
        );
        assert_eq!(
            Srq::new(&pd, 0, 1, 0, None).unwrap_err(),
            SrqError::InvalidParameter
        );
        assert_eq!(
            Srq::new(&pd, 4, l.max_receive_sge + 1, 0, None).unwrap_err(),
            SrqError::InvalidParameter
        );
        let srq = Srq::new(&pd, l.max_srq_depth, l.max_receive_sge, 0, None).unwrap();
        assert_eq!(srq.depth(), l.max_srq_depth as usize);
    }

    #[test]
    fn test_srq_post_receive_limits_rule_p9_p10_p24() {
        let device = Device::new(
            Limits {
                max_transfer_length: 100,
                ..Limits::DEFAULT
            },
            EngineMode::Inline,
        )
        .unwrap();
        let pd = Pd::new(&device).unwrap();
        let srq = Srq::new(&pd, 2, 2, 0, None).unwrap();
        let buf = Registered::new(&pd, Buffer::new(128, 0), Access::LOCAL_WRITE);
        assert_eq!(
            srq.post_receive(1, &[buf.sge(0, 1); 3]),
            Err(PostError::TooManySge)
        );
        assert_eq!(
            srq.post_receive(1, &[buf.sge(0, 60), buf.sge(60, 41)]),
            Err(PostError::TooLong)
        );
        srq.post_receive(1, &[buf.sge(0, 60), buf.sge(60, 40)])
            .unwrap();
        srq.post_receive(2, &[]).unwrap();
        assert_eq!(srq.post_receive(3, &[]), Err(PostError::QueueFull));
        assert_eq!(srq.len(), 2);
        // A QP with an SRQ has no receive queue of its own (Q2).
        let side = Side::custom(&pd, TestCq::new(4), TestCq::new(4), Some(&srq), 0xB);
        assert_eq!(
            side.qp.post_receive(4, &[]),
            Err(PostError::InvalidParameter)
        );
    }
}

// ----- callbacks: consumer code re-entering from a notification --------------

mod callbacks {
    use super::*;

    /// What a [`Reentrant`] notifier posts from inside its callback.
    #[derive(Clone, Copy)]
    enum Repost {
        /// A Send of this SGE.
        Send(Sge),
        /// A receive into this SGE.
        Receive(Sge),
    }

    /// A CQ notifier that, inside every callback, re-arms its CQ, polls it
    /// dry and posts one more request on its QP until `budget` runs out:
    /// everything Linux rxe's "callback while holding the CQ lock" bug
    /// deadlocked on.
    struct Reentrant {
        cq: OnceLock<Weak<Cq>>,
        qp: OnceLock<Weak<Qp>>,
        repost: OnceLock<Repost>,
        budget: AtomicUsize,
        next_context: AtomicUsize,
        seen: Mutex<Vec<Completion>>,
    }

    impl Reentrant {
        fn new(budget: usize, first_context: usize) -> Arc<Self> {
            Arc::new(Self {
                cq: OnceLock::new(),
                qp: OnceLock::new(),
                repost: OnceLock::new(),
                budget: AtomicUsize::new(budget),
                next_context: AtomicUsize::new(first_context),
                seen: Mutex::new(Vec::new()),
            })
        }

        fn seen(&self) -> Vec<Completion> {
            self.seen.lock().unwrap().clone()
        }
    }

    impl CqNotify for Reentrant {
        fn notify(&self, event: CqEvent) {
            assert_eq!(event, CqEvent::Completion);
            let (Some(cq), Some(qp)) = (
                self.cq.get().and_then(Weak::upgrade),
                self.qp.get().and_then(Weak::upgrade),
            ) else {
                return;
            };
            cq.arm(ArmType::Any);
            self.seen
                .lock()
                .unwrap()
                .extend(crate::rnic::testing::drain(&cq));
            let Some(repost) = self.repost.get() else {
                return;
            };
            if self
                .budget
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1))
                .is_ok()
            {
                let context = self.next_context.fetch_add(1, Ordering::SeqCst);
                let posted = match *repost {
                    Repost::Send(sge) => {
                        qp.post_send(context, Payload::Sges(&[sge]), WrFlags::empty(), None)
                    }
                    Repost::Receive(sge) => qp.post_receive(context, &[sge]),
                };
                posted.unwrap();
            }
        }

        fn close_complete(&self) {}
    }

    /// A side on a fresh device whose initiator CQ (`initiator`) or receive
    /// CQ notifies `notifier`.
    fn reentrant_side(
        mode: EngineMode,
        context: usize,
        notifier: &Arc<Reentrant>,
        initiator: bool,
    ) -> Side {
        let device = Device::new(Limits::DEFAULT, mode).unwrap();
        let pd = Pd::new(&device).unwrap();
        let cq = Arc::new(Cq::new(256, Arc::clone(notifier) as Arc<dyn CqNotify>).unwrap());
        let mine = TestCq {
            cq: Arc::clone(&cq),
            recorder: Arc::new(crate::rnic::testing::Recorder::default()),
        };
        let plain = TestCq::new(256);
        let (scq, rcq) = if initiator {
            (mine, plain)
        } else {
            (plain, mine)
        };
        let side = Side::custom(&pd, scq, rcq, None, context);
        notifier.cq.set(Arc::downgrade(&cq)).unwrap();
        notifier.qp.set(Arc::downgrade(&side.qp)).unwrap();
        side
    }

    #[test]
    fn test_callback_rearms_polls_and_posts_without_deadlock_rxe_regression_rule_i4() {
        const ROUNDS: usize = 32;
        both(|mode| {
            finishes(move || {
                // A's initiator CQ posts the next Send and B's receive CQ the
                // next receive, each from inside its callback.
                let sends = Reentrant::new(ROUNDS - 1, 2);
                let receives = Reentrant::new(ROUNDS - 1, 102);
                let a = reentrant_side(mode, 0xA, &sends, true);
                let b = reentrant_side(mode, 0xB, &receives, false);
                let src = a.pattern(16, 5, Access::empty());
                let inbox = b.buffer(16, 0, Access::LOCAL_WRITE);
                sends
                    .repost
                    .set(Repost::Send(src.sge(0, 16)))
                    .unwrap_or_else(|_| unreachable!());
                receives
                    .repost
                    .set(Repost::Receive(inbox.sge(0, 16)))
                    .unwrap_or_else(|_| unreachable!());
                connect(&a.qp, &b.qp, (1, 1), (1, 1)).unwrap();
                a.scq.cq.arm(ArmType::Any);
                b.rcq.cq.arm(ArmType::Any);
                b.qp.post_receive(101, &[inbox.sge(0, 16)]).unwrap();
                send(&a, 1, &[src.sge(0, 16)], WrFlags::empty()).unwrap();
                settle();
                let (sent, got) = (sends.seen(), receives.seen());
                assert_eq!(
                    contexts(&sent),
                    (1..=ROUNDS).collect::<Vec<_>>(),
                    "{mode:?}"
                );
                assert!(
                    sent.iter()
                        .all(|c| c.status == WcStatus::Success && c.opcode == Opcode::Send)
                );
                assert_eq!(contexts(&got), (101..=100 + ROUNDS).collect::<Vec<_>>());
                assert!(
                    got.iter()
                        .all(|c| c.status == WcStatus::Success && c.bytes == 16)
                );
                assert_eq!(inbox.buffer.bytes(), src.buffer.bytes());
            });
        });
    }

    /// The same for an SRQ notification: from inside it the consumer
    /// refills the SRQ and re-arms it with `modify`.
    #[test]
    fn test_callback_srq_notification_refills_and_rearms_without_deadlock_rule_i4_q5() {
        #[derive(Default)]
        struct Refill {
            srq: OnceLock<Weak<Srq>>,
            sge: OnceLock<Sge>,
            calls: AtomicUsize,
        }
        impl SrqNotify for Refill {
            fn notify(&self, event: SrqEvent) {
                assert_eq!(event, SrqEvent::BelowThreshold);
                let calls = self.calls.fetch_add(1, Ordering::SeqCst);
                let (Some(srq), Some(sge)) =
                    (self.srq.get().and_then(Weak::upgrade), self.sge.get())
                else {
                    return;
                };
                if calls < 8 {
                    srq.post_receive(1000 + calls, &[*sge]).unwrap();
                    srq.post_receive(2000 + calls, &[*sge]).unwrap();
                    srq.modify(0, 2).unwrap();
                }
            }
        }
        both(|mode| {
            finishes(move || {
                let device = Device::new(Limits::DEFAULT, mode).unwrap();
                let pd = Pd::new(&device).unwrap();
                let refill = Arc::new(Refill::default());
                let srq = Srq::new(
                    &pd,
                    64,
                    1,
                    0,
                    Some(Arc::clone(&refill) as Arc<dyn SrqNotify>),
                )
                .unwrap();
                refill.srq.set(Arc::downgrade(&srq)).unwrap();
                let b = Side::custom(&pd, TestCq::new(64), TestCq::new(64), Some(&srq), 0xB);
                let a = idle_side(mode, 0xA);
                connect(&a.qp, &b.qp, (1, 1), (1, 1)).unwrap();
                let inbox = Registered::new(&pd, Buffer::new(8, 0), Access::LOCAL_WRITE);
                refill.sge.set(inbox.sge(0, 8)).unwrap();
                srq.post_receive(1, &[inbox.sge(0, 8)]).unwrap();
                srq.modify(0, 2).unwrap();
                let src = a.pattern(8, 1, Access::empty());
                for ctx in 1..=10 {
                    send(&a, ctx, &[src.sge(0, 8)], WrFlags::empty()).unwrap();
                }
                settle();
                assert_eq!(
                    contexts(&a.scq.drain()),
                    (1..=10).collect::<Vec<_>>(),
                    "{mode:?}"
                );
                assert_eq!(b.rcq.drain().len(), 10);
                assert!(refill.calls.load(Ordering::SeqCst) >= 5);
            });
        });
    }
}

// ----- counters of failed connections ----------------------------------------

mod connection_errors {
    use super::*;

    fn connection_errors(side: &Side) -> u64 {
        side.device
            .counters
            .connection_error
            .load(Ordering::Relaxed)
    }

    #[test]
    fn test_connection_error_counted_once_on_each_side_rule_a18() {
        both(|mode| {
            // E7 on two devices: each adapter's connection hit an error.
            let pair = Pair::new(mode);
            let (src, inbox) = pair.send_buffers(100, 1, 64);
            pair.b.qp.post_receive(1, &[inbox.sge(0, 50)]).unwrap();
            send(&pair.a, 1, &[src.sge(0, 100)], WrFlags::empty()).unwrap();
            send(&pair.a, 2, &[src.sge(0, 10)], WrFlags::empty()).unwrap();
            pair.settle();
            assert_eq!(
                (connection_errors(&pair.a), connection_errors(&pair.b)),
                (1, 1),
                "{mode:?}"
            );
            pair.a.qp.disconnect();
            pair.settle();
            assert_eq!(
                (connection_errors(&pair.a), connection_errors(&pair.b)),
                (1, 1)
            );
        });
    }

    #[test]
    fn test_connection_error_counted_once_despite_overflow_cascade_rule_a18() {
        both(|mode| {
            let device = Device::new(Limits::DEFAULT, mode).unwrap();
            let pd = Pd::new(&device).unwrap();
            let a = Side::custom(&pd, TestCq::new(1), TestCq::new(64), None, 0xA);
            let b = idle_side(mode, 0xB);
            connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
            let src = a.pattern(8, 1, RW);
            let target = b.buffer(8, 0, RW);
            // Four completions into a CQ of one: every one after the first
            // fails to queue, and each failure terminates the connection.
            for ctx in 1..=3 {
                a.write_to(ctx, &[src.sge(0, 8)], &target, 0, WrFlags::DEFER)
                    .unwrap();
            }
            a.write_to(4, &[src.sge(0, 8)], &target, 0, WrFlags::empty())
                .unwrap();
            settle();
            assert!(a.scq.cq.is_error());
            assert_eq!(
                (connection_errors(&a), connection_errors(&b)),
                (1, 1),
                "{mode:?}"
            );
        });
    }

    #[test]
    fn test_flush_and_disconnect_are_not_connection_errors_rule_a18() {
        both_pairs(|mode, pair| {
            pair.a.qp.flush();
            pair.b.qp.disconnect();
            pair.a.qp.disconnect();
            pair.settle();
            assert_eq!(
                (connection_errors(&pair.a), connection_errors(&pair.b)),
                (0, 0),
                "{mode:?}"
            );
        });
    }
}
