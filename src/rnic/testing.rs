//! Test fixtures for the RNIC: devices, connected QP pairs, registered
//! buffers and LAM pages, and a CQ notifier that records what it saw.
//!
//! Compiled for tests only. Buffers are owned `Vec`s whose spans are
//! registered with the device; they outlive every use because each fixture
//! owns its buffers and drops them after its QPs and regions.

#![expect(
    clippy::missing_panics_doc,
    reason = "test fixtures panic on setup failure by design"
)]

use alloc::vec::Vec;
use std::sync::Mutex;

use super::cq::{Cq, CqEvent, CqNotify};
use super::device::{Device, EngineMode};
use super::memory::Span;
use super::mr::{Mr, Pd};
use super::qp::{self, Payload, PostError, Qp, QpConfig};
use super::srq::Srq;
use super::types::{Access, Completion, Limits, Opcode, PAGE_SIZE, Sge, WcStatus, WrFlags};
use crate::kernel::sync::Arc;

/// A notifier that records every event.
#[derive(Default)]
pub struct Recorder {
    /// Events in order.
    pub events: Mutex<Vec<CqEvent>>,
    /// `close_complete` calls.
    pub closes: Mutex<usize>,
}

impl CqNotify for Recorder {
    fn notify(&self, event: CqEvent) {
        self.events.lock().unwrap().push(event);
    }
    fn close_complete(&self) {
        *self.closes.lock().unwrap() += 1;
    }
}

impl Recorder {
    /// Events so far.
    pub fn events(&self) -> Vec<CqEvent> {
        self.events.lock().unwrap().clone()
    }
}

/// A CQ and its recorder.
pub struct TestCq {
    /// The CQ.
    pub cq: Arc<Cq>,
    /// What it notified.
    pub recorder: Arc<Recorder>,
}

impl TestCq {
    /// A CQ of `depth`.
    pub fn new(depth: u32) -> Self {
        let recorder = Arc::new(Recorder::default());
        let cq = Arc::new(Cq::new(depth, Arc::clone(&recorder) as Arc<dyn CqNotify>).unwrap());
        Self { cq, recorder }
    }

    /// Every completion queued now.
    pub fn drain(&self) -> Vec<Completion> {
        drain(&self.cq)
    }
}

/// (request context, opcode, status) of each completion, in CQ order.
pub fn summary(completions: &[Completion]) -> Vec<(usize, Opcode, WcStatus)> {
    completions
        .iter()
        .map(|c| (c.request_context, c.opcode, c.status))
        .collect()
}

/// Every completion `cq` holds now, oldest first.
pub fn drain(cq: &Cq) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut batch = [Completion::new(WcStatus::Success, Opcode::Send, 0, 0); 16];
    loop {
        let n = cq.poll(&mut batch);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&batch[..n]);
    }
}

/// A byte buffer the device may access, registered or not.
pub struct Buffer {
    bytes: Vec<u8>,
}

impl Buffer {
    /// `len` bytes of `fill`.
    pub fn new(len: usize, fill: u8) -> Self {
        Self {
            bytes: alloc::vec![fill; len],
        }
    }

    /// `len` bytes of a pattern that differs at every offset and per `seed`.
    pub fn pattern(len: usize, seed: u8) -> Self {
        let bytes = (0..len)
            .map(|i: usize| {
                let [low, high, ..] = i.to_le_bytes();
                low.wrapping_mul(31).wrapping_add(seed).wrapping_add(high)
            })
            .collect();
        Self { bytes }
    }

    /// The span of the whole buffer.
    pub fn span(&mut self) -> Span {
        // SAFETY: the buffer is owned by the fixture, which keeps it alive (and
        // never reallocates it) for as long as any span of it is used.
        unsafe { Span::new(self.bytes.as_mut_ptr() as usize, self.bytes.len()) }.unwrap()
    }

    /// Its virtual address (the region index of a registration over it).
    pub fn addr(&self) -> u64 {
        self.bytes.as_ptr() as u64
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// A registered buffer.
pub struct Registered {
    /// The memory.
    pub buffer: Buffer,
    /// Its region.
    pub mr: Arc<Mr>,
}

impl Registered {
    /// Registers `buffer` on `pd` with `access`.
    pub fn new(pd: &Arc<Pd>, mut buffer: Buffer, access: Access) -> Self {
        let mr = Mr::new(pd, false).unwrap();
        let base = buffer.addr();
        mr.register(buffer.span(), base, access).unwrap();
        Self { buffer, mr }
    }

    /// An SGE over `len` bytes at `offset`.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: self.buffer.addr() + offset,
            len,
            key: self.mr.local_key().unwrap(),
        }
    }

    /// The remote token.
    pub fn rkey(&self) -> u32 {
        self.mr.remote_key().unwrap()
    }

    /// The remote address of `offset`.
    pub fn raddr(&self, offset: u64) -> u64 {
        self.buffer.addr() + offset
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let _ = self.mr.close(alloc::boxed::Box::new(|| {}));
    }
}

/// Page-aligned memory mapped as a LAM: logical addresses of its pages.
pub struct LamPages {
    buffer: Buffer,
    start: usize,
    pages: usize,
    id: super::memory::LamId,
    device: Arc<Device>,
}

impl LamPages {
    /// `pages` pages, filled with `fill`, mapped on `device`.
    pub fn new(device: &Arc<Device>, pages: usize, fill: u8) -> Self {
        let page = PAGE_SIZE as usize;
        let mut buffer = Buffer::new((pages + 1) * page, fill);
        let start = (page - (buffer.addr() as usize % page)) % page;
        let span = buffer.span().sub(start, pages * page).unwrap();
        let (id, _) = device.build_lam(span).unwrap();
        Self {
            buffer,
            start,
            pages,
            id,
            device: Arc::clone(device),
        }
    }

    /// Logical address of page `n`.
    pub fn page(&self, n: usize) -> u64 {
        self.buffer.addr() + (self.start + n * PAGE_SIZE as usize) as u64
    }

    /// Logical addresses of every page, in order.
    pub fn page_list(&self) -> Vec<u64> {
        (0..self.pages).map(|n| self.page(n)).collect()
    }

    /// The bytes of the mapped pages.
    pub fn bytes(&self) -> &[u8] {
        &self.buffer.bytes()[self.start..self.start + self.pages * PAGE_SIZE as usize]
    }
}

impl Drop for LamPages {
    fn drop(&mut self) {
        self.device.release_lam(self.id);
    }
}

/// A region over several spans mapped apart (rule M2: an MDL chain whose
/// MDLs the kernel mapped on their own). Each part is its own allocation,
/// starting at an odd offset with guard bytes (0xEE) before and after, so no
/// two parts are adjacent and a byte written outside a part shows.
pub struct Spread {
    parts: Vec<Vec<u8>>,
    offsets: Vec<usize>,
    lens: Vec<usize>,
    /// The region.
    pub mr: Arc<Mr>,
    /// The index of its first byte (a made-up virtual address, rule M4).
    pub base: u64,
}

impl Spread {
    /// Registers parts of `lens` bytes (a pattern per part and `seed`) as
    /// one region on `pd`, indexed from `base`.
    pub fn new(pd: &Arc<Pd>, lens: &[usize], seed: u8, base: u64, access: Access) -> Self {
        let offsets: Vec<usize> = (0..lens.len()).map(|i| (i * 5 + 3) % 16).collect();
        let mut parts: Vec<Vec<u8>> = lens
            .iter()
            .zip(&offsets)
            .enumerate()
            .map(|(i, (&len, &offset))| {
                let mut part = alloc::vec![0xEE_u8; offset + len + 1];
                for (n, b) in part[offset..offset + len].iter_mut().enumerate() {
                    *b = (n as u8)
                        .wrapping_mul(29)
                        .wrapping_add(seed)
                        .wrapping_add(i as u8);
                }
                part
            })
            .collect();
        let spans: Vec<Span> = parts
            .iter_mut()
            .zip(lens.iter().zip(&offsets))
            .map(|(part, (&len, &offset))| {
                // SAFETY: each part is owned by the fixture, never resized,
                // and outlives the region (closed in `Drop` first).
                unsafe { Span::new(part.as_mut_ptr() as usize + offset, len) }.unwrap()
            })
            .collect();
        let list = super::memory::SpanList::new(&spans).unwrap();
        assert_eq!(list.count(), lens.len(), "parts are never adjacent");
        let mr = Mr::new(pd, false).unwrap();
        mr.register_spans(list, base, access).unwrap();
        Self {
            parts,
            offsets,
            lens: lens.to_vec(),
            mr,
            base,
        }
    }

    /// The region's bytes, parts concatenated.
    pub fn flat(&self) -> Vec<u8> {
        self.parts
            .iter()
            .zip(self.lens.iter().zip(&self.offsets))
            .flat_map(|(part, (&len, &offset))| part[offset..offset + len].iter().copied())
            .collect()
    }

    /// Whether no byte around a part was written.
    pub fn guards_intact(&self) -> bool {
        self.parts
            .iter()
            .zip(self.lens.iter().zip(&self.offsets))
            .all(|(part, (&len, &offset))| {
                part[..offset].iter().all(|&b| b == 0xEE) && part[offset + len] == 0xEE
            })
    }

    /// Bytes.
    pub fn total(&self) -> usize {
        self.lens.iter().sum()
    }

    /// Where each part after the first starts, as offsets into the region.
    pub fn boundaries(&self) -> Vec<usize> {
        self.lens
            .iter()
            .scan(0, |at, &len| {
                *at += len;
                Some(*at)
            })
            .take(self.lens.len().saturating_sub(1))
            .collect()
    }

    /// A local SGE over `len` bytes at `offset`.
    pub fn sge(&self, offset: u64, len: u32) -> Sge {
        Sge {
            addr: self.base + offset,
            len,
            key: self.mr.local_key().unwrap(),
        }
    }

    /// The remote token.
    pub fn rkey(&self) -> u32 {
        self.mr.remote_key().unwrap()
    }

    /// The remote address of `offset`.
    pub fn raddr(&self, offset: u64) -> u64 {
        self.base + offset
    }
}

impl Drop for Spread {
    fn drop(&mut self) {
        let _ = self.mr.close(alloc::boxed::Box::new(|| {}));
    }
}

/// One side of a connection: device, PD, CQs and QP.
pub struct Side {
    /// The device.
    pub device: Arc<Device>,
    /// The PD.
    pub pd: Arc<Pd>,
    /// Initiator CQ.
    pub scq: TestCq,
    /// Receive CQ.
    pub rcq: TestCq,
    /// The QP.
    pub qp: Arc<Qp>,
}

/// The QP configuration fixtures use unless told otherwise.
pub const CONFIG: QpConfig = QpConfig {
    context: 0,
    receive_depth: 64,
    initiator_depth: 64,
    max_receive_sge: 4,
    max_initiator_sge: 4,
    inline_size: 256,
};

impl Side {
    /// A side on `device` with QP context `context`.
    pub fn new(device: &Arc<Device>, context: usize, config: QpConfig) -> Self {
        let pd = Pd::new(device).unwrap();
        let scq = TestCq::new(256);
        let rcq = TestCq::new(256);
        let qp = Qp::new(&pd, &rcq.cq, &scq.cq, None, QpConfig { context, ..config }).unwrap();
        Self {
            device: Arc::clone(device),
            pd,
            scq,
            rcq,
            qp,
        }
    }

    /// A side on `pd` with the given CQs, taking its receives from `srq`
    /// when given.
    pub fn custom(
        pd: &Arc<Pd>,
        scq: TestCq,
        rcq: TestCq,
        srq: Option<&Arc<Srq>>,
        context: usize,
    ) -> Self {
        let qp = Qp::new(pd, &rcq.cq, &scq.cq, srq, QpConfig { context, ..CONFIG }).unwrap();
        Self {
            device: Arc::clone(pd.device()),
            pd: Arc::clone(pd),
            scq,
            rcq,
            qp,
        }
    }

    /// Registers a fresh buffer of `len` bytes of `fill`.
    pub fn buffer(&self, len: usize, fill: u8, access: Access) -> Registered {
        Registered::new(&self.pd, Buffer::new(len, fill), access)
    }

    /// Registers a fresh pattern buffer.
    pub fn pattern(&self, len: usize, seed: u8, access: Access) -> Registered {
        Registered::new(&self.pd, Buffer::pattern(len, seed), access)
    }

    /// Posts an RDMA Write (request `context`, `flags`) of `src` to `dst`
    /// at offset `at`.
    ///
    /// # Errors
    /// What [`Qp::post_write`] refuses inline.
    pub fn write_to(
        &self,
        context: usize,
        src: &[Sge],
        dst: &Registered,
        at: u64,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        self.qp.post_write(
            context,
            Payload::Sges(src),
            dst.raddr(at),
            dst.rkey(),
            flags,
        )
    }

    /// Posts an RDMA Read (request `context`, `flags`) into `sinks` from
    /// `src` at offset `at`.
    ///
    /// # Errors
    /// What [`Qp::post_read`] refuses inline.
    pub fn read_from(
        &self,
        context: usize,
        sinks: &[Sge],
        src: &Registered,
        at: u64,
        flags: WrFlags,
    ) -> Result<(), PostError> {
        self.qp
            .post_read(context, sinks, src.raddr(at), src.rkey(), flags)
    }

    /// Posts a Send of `sges` (request `context`, no flag), a
    /// SendAndInvalidate of the peer's token `invalidate` when given (C2).
    ///
    /// # Errors
    /// What [`Qp::post_send`] refuses inline.
    pub fn send(
        &self,
        context: usize,
        sges: &[Sge],
        invalidate: Option<u32>,
    ) -> Result<(), PostError> {
        self.qp
            .post_send(context, Payload::Sges(sges), WrFlags::empty(), invalidate)
    }
}

/// A device with the default limits and the inline engine.
pub fn inline_device() -> Arc<Device> {
    Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap()
}

/// Two connected QPs, on one device or two.
pub struct Pair {
    /// The active side (context 0xA).
    pub a: Side,
    /// The passive side (context 0xB).
    pub b: Side,
}

impl Pair {
    /// A connected pair on two devices with default limits, engine `mode`.
    pub fn new(mode: EngineMode) -> Self {
        Self::with(mode, CONFIG, true)
    }

    /// A connected pair with `config`, on two devices or one.
    pub fn with(mode: EngineMode, config: QpConfig, two_devices: bool) -> Self {
        let da = Device::new(Limits::DEFAULT, mode).unwrap();
        let db = if two_devices {
            Device::new(Limits::DEFAULT, mode).unwrap()
        } else {
            Arc::clone(&da)
        };
        let a = Side::new(&da, 0xA, config);
        let b = Side::new(&db, 0xB, config);
        qp::connect(&a.qp, &b.qp, (16, 16), (16, 16)).unwrap();
        Self { a, b }
    }

    /// Sides a and b on two devices of their own with default limits,
    /// engine `mode`, not connected (for a transport to connect them).
    pub fn apart(mode: EngineMode) -> Self {
        let side = |context| {
            Side::new(
                &Device::new(Limits::DEFAULT, mode).unwrap(),
                context,
                CONFIG,
            )
        };
        Self {
            a: side(0xA),
            b: side(0xB),
        }
    }

    /// Waits for deferred work (no-op for the inline engine).
    pub fn settle(&self) {
        crate::kernel::deferred::flush();
    }

    /// The buffers of a Send from a to b: a's pattern source of `len` bytes
    /// (`seed`; no access right, a local source needs none) and b's receive
    /// buffer of `inbox` zero bytes (local write).
    pub fn send_buffers(&self, len: usize, seed: u8, inbox: usize) -> (Registered, Registered) {
        (
            self.a.pattern(len, seed, Access::empty()),
            self.b.buffer(inbox, 0, Access::LOCAL_WRITE),
        )
    }

    /// Posts on b a receive of `into` (request `receive`), then from a a
    /// Send of `from` (request `send`, no flag), and settles: one message
    /// delivered into a receive that was waiting for it.
    pub fn send_to_b(&self, receive: usize, into: &[Sge], send: usize, from: &[Sge]) {
        self.b.qp.post_receive(receive, into).unwrap();
        self.a.send(send, from, None).unwrap();
        self.settle();
    }
}

/// A test's hooks into the RNIC's paths: code a test runs at a named point,
/// on the thread that reaches it, to interleave another actor there
/// deterministically (the windows loom cannot reach: the iWARP modules are
/// left out of the loom build). Set per thread, so concurrent tests do not
/// see each other's hooks.
pub mod hook {
    use alloc::boxed::Box;
    use alloc::vec::Vec;
    use core::cell::RefCell;

    /// Where a hook runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Point {
        /// The iWARP receive path, after each ULPDU is handled and before
        /// its outcome is applied, with no link lock held.
        AfterUlpdu,
        /// `Qp::take_with`, after a take from an SRQ counted itself and
        /// before it reads the QP's state, with no lock held.
        SrqTakeCounted,
    }

    type Hook = Box<dyn FnMut()>;

    std::thread_local! {
        static HOOKS: RefCell<Vec<(Point, Hook)>> = const { RefCell::new(Vec::new()) };
    }

    /// Installs `f` at `point` for this thread (until [`clear`]), in place
    /// of any hook there.
    pub fn set(point: Point, f: Hook) {
        HOOKS.with(|hooks| {
            let mut hooks = hooks.borrow_mut();
            hooks.retain(|(at, _)| *at != point);
            hooks.push((point, f));
        });
    }

    /// Removes this thread's hooks.
    pub fn clear() {
        HOOKS.with(|hooks| hooks.borrow_mut().clear());
    }

    /// Runs this thread's hook at `point`, if any. It is taken out while it
    /// runs, so it may re-enter the path that reached the point.
    pub(crate) fn run(point: Point) {
        let hook = HOOKS.with(|hooks| {
            let mut hooks = hooks.borrow_mut();
            let at = hooks.iter().position(|(at, _)| *at == point)?;
            Some(hooks.swap_remove(at).1)
        });
        if let Some(mut hook) = hook {
            hook();
            HOOKS.with(|hooks| {
                let mut hooks = hooks.borrow_mut();
                if hooks.iter().all(|(at, _)| *at != point) {
                    hooks.push((point, hook));
                }
            });
        }
    }
}
