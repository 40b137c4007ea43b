//! What the two benchmarks (`rnic.rs`, `wire.rs`) share: a QP on a device of
//! its own, registered memory, a CQ notifier that ignores everything and the
//! wait for one completion. Included by both with `#[path]`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use softndk::rnic::cq::{Cq, CqEvent, CqNotify};
use softndk::rnic::device::{Device, EngineMode};
use softndk::rnic::memory::Span;
use softndk::rnic::mr::{Mr, Pd};
use softndk::rnic::qp::{Qp, QpConfig};
use softndk::rnic::{Access, Completion, Limits, Opcode, Sge, WcStatus};

/// A CQ notifier that ignores everything: the benchmark polls.
pub struct Quiet;

impl CqNotify for Quiet {
    fn notify(&self, _event: CqEvent) {}
    fn close_complete(&self) {}
}

/// A QP (request context `context`, `depth` requests deep each way, one
/// SGE) on a device of its own in `mode`, with its PD and its two CQs:
/// `(qp, send CQ, receive CQ, pd)`.
pub fn qp_on_own_device(
    mode: EngineMode,
    context: usize,
    depth: u32,
) -> (Arc<Qp>, Arc<Cq>, Arc<Cq>, Arc<Pd>) {
    let device = Device::new(Limits::DEFAULT, mode).expect("device");
    let pd = Pd::new(&device).expect("pd");
    let cq = || Arc::new(Cq::new(1024, Arc::new(Quiet)).expect("cq"));
    let (scq, rcq) = (cq(), cq());
    let config = QpConfig {
        context,
        receive_depth: depth,
        initiator_depth: depth,
        max_receive_sge: 1,
        max_initiator_sge: 1,
        inline_size: 0,
    };
    let qp = Qp::new(&pd, &rcq, &scq, None, config).expect("qp");
    (qp, scq, rcq, pd)
}

/// Memory registered with a device. The bytes are owned here and outlive the
/// registration: [`Drop`] closes the region before they are freed. They are
/// accessed only while no request using them is in flight.
pub struct Region {
    pub mr: Arc<Mr>,
    pub bytes: Vec<u8>,
}

impl Region {
    /// Registers `bytes` with `access`.
    pub fn of(pd: &Arc<Pd>, mut bytes: Vec<u8>, access: Access) -> Self {
        let ptr = bytes.as_mut_ptr() as usize;
        // SAFETY: `bytes` is a heap allocation owned by this `Region`; it is
        // never reallocated or freed before `Drop` has closed the region, and
        // it is accessed only while no request using it is in flight.
        let span = unsafe { Span::new(ptr, bytes.len()) }.expect("a heap buffer does not wrap");
        let mr = Mr::new(pd, false).expect("region");
        mr.register(span, ptr as u64, access).expect("register");
        Self { mr, bytes }
    }

    pub fn addr(&self) -> u64 {
        self.bytes.as_ptr() as u64
    }

    pub fn sge(&self, len: usize) -> Sge {
        Sge {
            addr: self.addr(),
            len: u32::try_from(len).expect("length fits an SGE"),
            key: self.mr.local_key().expect("registered"),
        }
    }

    pub fn rkey(&self) -> u32 {
        self.mr.remote_key().expect("registered")
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // Every request using the region has completed (the benchmark polls
        // each one), so the close is immediate and no copy is in flight.
        let _ = self.mr.close(Box::new(|| {}));
        black_box(&self.bytes);
    }
}

/// Polls `cq` until it returns one completion (for a minute at most).
pub fn wait_one(cq: &Cq) -> Completion {
    let mut out = [Completion::new(WcStatus::Success, Opcode::Send, 0, 0)];
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut spins = 0_u32;
    loop {
        if cq.poll(&mut out) == 1 {
            return out[0];
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            assert!(Instant::now() < deadline, "no completion in a minute");
            // Two cores: let the deferred-work and stream threads have one.
            std::thread::yield_now();
        }
    }
}
