//! Benchmark of the emulated RNIC's data path, beside a plain memory copy of
//! the same size.
//!
//! * 64-byte Send → receive completion: post a receive at B, post a Send at
//!   A, poll both CQs until both completions are in;
//! * 1 MiB RDMA Write → completion: post a Write at A, poll A's CQ;
//!
//! each with the engine `Inline` (in the posting thread) and `Deferred` (on
//! the host's deferred-work threads), and `copy_from_slice` of 64 bytes and of
//! 1 MiB as the baseline. Each case is warmed up, then timed in batches; the
//! table reports the median batch's time per operation.
//!
//! `cargo bench --bench rnic` runs it (about ten seconds). Run without
//! `--bench` (as `cargo test --benches` does) it makes one short pass over
//! every case instead, to check that the code works, and prints the numbers
//! of that pass, which mean nothing.
//!
//! Uses the public API of `softndk::rnic` only; timings are printed, never
//! asserted.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use softndk::rnic::cq::Cq;
use softndk::rnic::device::EngineMode;
use softndk::rnic::mr::Pd;
use softndk::rnic::qp::{self, Payload, Qp};
use softndk::rnic::{Access, Completion, Opcode, WcStatus, WrFlags};

#[path = "common.rs"]
mod common;
use common::{Region, qp_on_own_device, wait_one};

/// Bytes of the Send.
const SEND_LEN: usize = 64;
/// Bytes of the Write.
const WRITE_LEN: usize = 1 << 20;
/// Timed batches per case; the median is reported.
const BATCHES: u32 = 15;

/// `len` bytes of `fill`, registered with `access`.
fn region(pd: &Arc<Pd>, len: usize, fill: u8, access: Access) -> Region {
    Region::of(pd, vec![fill; len], access)
}

/// One side of a connection.
struct Side {
    qp: Arc<Qp>,
    scq: Arc<Cq>,
    rcq: Arc<Cq>,
    pd: Arc<Pd>,
}

impl Side {
    fn new(mode: EngineMode, context: usize) -> Self {
        let (qp, scq, rcq, pd) = qp_on_own_device(mode, context, 256);
        Self { qp, scq, rcq, pd }
    }
}

/// Two connected QPs on two devices, with the memory both cases use.
/// Field order is drop order: the QPs go before the regions they used.
struct Fixture {
    a: Side,
    b: Side,
    send_src: Region,
    send_dst: Region,
    write_src: Region,
    write_dst: Region,
    next: usize,
}

impl Fixture {
    fn new(mode: EngineMode) -> Self {
        let a = Side::new(mode, 0xA);
        let b = Side::new(mode, 0xB);
        qp::connect(&a.qp, &b.qp, (16, 16), (16, 16)).expect("connect");
        let send_src = region(&a.pd, SEND_LEN, 0x5A, Access::empty());
        let send_dst = region(&b.pd, SEND_LEN, 0, Access::LOCAL_WRITE);
        let write_src = region(&a.pd, WRITE_LEN, 0xA5, Access::empty());
        let write_dst = region(&b.pd, WRITE_LEN, 0, Access::REMOTE_WRITE);
        Self {
            a,
            b,
            send_src,
            send_dst,
            write_src,
            write_dst,
            next: 0,
        }
    }

    fn context(&mut self) -> usize {
        self.next = self.next.wrapping_add(1);
        self.next
    }

    /// One 64-byte Send and its receive, until both completions are polled.
    fn send_receive(&mut self) {
        let context = self.context();
        self.b
            .qp
            .post_receive(context, &[self.send_dst.sge(SEND_LEN)])
            .expect("post receive");
        self.a
            .qp
            .post_send(
                context,
                Payload::Sges(&[self.send_src.sge(SEND_LEN)]),
                WrFlags::empty(),
                None,
            )
            .expect("post send");
        let sent = wait_one(&self.a.scq);
        let received = wait_one(&self.b.rcq);
        check(sent, Opcode::Send, context);
        check(received, Opcode::Receive, context);
    }

    /// One 1 MiB Write, until its completion is polled.
    fn write(&mut self) {
        let context = self.context();
        self.a
            .qp
            .post_write(
                context,
                Payload::Sges(&[self.write_src.sge(WRITE_LEN)]),
                self.write_dst.addr(),
                self.write_dst.rkey(),
                WrFlags::empty(),
            )
            .expect("post write");
        check(wait_one(&self.a.scq), Opcode::Write, context);
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.a.qp.close();
        self.b.qp.close();
    }
}

/// The benchmark measures the success path only.
fn check(completion: Completion, opcode: Opcode, context: usize) {
    assert_eq!(
        (
            completion.status,
            completion.opcode,
            completion.request_context
        ),
        (WcStatus::Success, opcode, context),
        "unexpected completion"
    );
}

/// How long to run a case.
#[derive(Clone, Copy)]
struct Plan {
    /// Warm-up time, also used to size the batches.
    warm_up: Duration,
    /// Target time of one batch.
    batch: Duration,
    batches: u32,
}

const FULL: Plan = Plan {
    warm_up: Duration::from_millis(300),
    batch: Duration::from_millis(60),
    batches: BATCHES,
};

const SMOKE: Plan = Plan {
    warm_up: Duration::from_millis(1),
    batch: Duration::from_millis(1),
    batches: 1,
};

/// Runs `op` per `plan`: warms up, sizes a batch to take about
/// `plan.batch`, and returns the median batch's nanoseconds per operation.
fn measure(plan: Plan, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut warm = 0_u32;
    while warm == 0 || start.elapsed() < plan.warm_up {
        op();
        warm += 1;
    }
    let per_op = (start.elapsed().as_nanos() / u128::from(warm)).max(1);
    let per_batch =
        u32::try_from((plan.batch.as_nanos() / per_op).clamp(1, 10_000_000)).unwrap_or(1);
    let mut samples: Vec<f64> = (0..plan.batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                op();
            }
            start.elapsed().as_secs_f64() * 1e9 / f64::from(per_batch)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// `copy_from_slice` of `len` bytes, the baseline.
fn memcpy(plan: Plan, len: usize) -> f64 {
    let src = vec![0x5A_u8; len];
    let mut dst = vec![0_u8; len];
    measure(plan, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    })
}

/// An operation the fixture measures.
type Op = fn(&mut Fixture);

struct Row {
    operation: &'static str,
    mode: &'static str,
    ns: f64,
    baseline: f64,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let plan = if full { FULL } else { SMOKE };
    let mut rows = Vec::new();

    // Each operation after its baseline: a copy of as many bytes.
    let operations = [
        (
            "64 B copy_from_slice",
            SEND_LEN,
            "64 B send -> receive",
            Fixture::send_receive as Op,
        ),
        (
            "1 MiB copy_from_slice",
            WRITE_LEN,
            "1 MiB RDMA write",
            Fixture::write,
        ),
    ];
    for (copy, len, operation, op) in operations {
        let baseline = memcpy(plan, len);
        rows.push(Row {
            operation: copy,
            mode: "-",
            ns: baseline,
            baseline,
        });
        for (mode, name) in [
            (EngineMode::Inline, "inline"),
            (EngineMode::Deferred, "deferred"),
        ] {
            let mut fixture = Fixture::new(mode);
            rows.push(Row {
                operation,
                mode: name,
                ns: measure(plan, || op(&mut fixture)),
                baseline,
            });
        }
    }

    if !full {
        println!("smoke run (pass --bench, as `cargo bench` does, to measure)");
    }
    println!(
        "{:<24} {:<9} {:>12} {:>10}",
        "operation", "mode", "ns/op", "vs memcpy"
    );
    for row in &rows {
        println!(
            "{:<24} {:<9} {:>12.1} {:>9.1}x",
            row.operation,
            row.mode,
            row.ns,
            row.ns / row.baseline
        );
    }
}
