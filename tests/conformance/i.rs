//! Family I of the rules catalogue, through the C ABI: IRQL and threading.
//!
//! Host mode has no IRQL; what a consumer can check is the threading half:
//! calls from many threads at once, no call waiting on a consumer callback,
//! callbacks on the posting thread, re-entry from callbacks, inline data
//! lifetime, and the Affinity argument.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;

use softndk::abi::*;

use super::harness::*;

/// (request context, status, bytes) of a result: plain data, to hand
/// between threads.
fn plain(r: &NdkResult) -> (usize, NtStatus, u32) {
    (r.request_context as usize, r.status, r.bytes_transferred)
}

/// I1: provider functions may be called from any thread (in the kernel, at
/// any IRQL up to DISPATCH_LEVEL): several threads at once create, use and
/// close objects on one shared adapter, and each runs a whole connection of
/// its own, while the main thread keeps polling a CQ of the shared adapter.
#[test]
fn i1_calls_are_usable_from_many_threads_at_once() {
    const THREADS: usize = 4;
    let pair = Pair::new();
    let start = Barrier::new(THREADS + 1);
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (shared, start, done) = (&pair.a, &start, &done);
            s.spawn(move || {
                start.wait();
                // On the shared adapter.
                for _ in 0..5 {
                    let info = shared.info();
                    assert!(info.max_cq_depth > 0);
                    let cq = shared.cq(16);
                    let pd = shared.pd();
                    let region = Region::pattern(&pd, 4096, t as u8, MR_REMOTE);
                    assert_ne!(region.mr.local_token(), 0);
                    assert_ne!(region.token(), 0);
                    assert_success!(region.mr.deregister());
                    let mw = pd.mw();
                    cq.arm(NdkCqNotifyType::ANY);
                    assert!(cq.poll(4).is_empty());
                    assert_close(mw.close());
                    region.close();
                    assert_closed([pd.close(), cq.close()]);
                }
                // A connection of its own.
                let own = Pair::new();
                let src = Region::pattern(&own.a_pd, 4096, t as u8, MR_LOCAL_WRITE);
                let dst = Region::new(&own.b_pd, 4096, 0, MR_REMOTE);
                for i in 0..16 {
                    assert_success!(own.b_qp.receive(i, &[dst.sge(i * 64, 64)]));
                    assert_success!(own.a_qp.send(i, &[src.sge(i * 64, 64)], 0));
                }
                assert_eq!(
                    sorted_contexts(&own.a_cq.wait_results(16)),
                    (0..16).collect::<Vec<_>>()
                );
                assert_eq!(
                    sorted_contexts(&own.b_cq.wait_results(16)),
                    (0..16).collect::<Vec<_>>()
                );
                assert_eq!(&dst.bytes()[..1024], &src.bytes()[..1024]);
                src.close();
                dst.close();
                own.teardown();
                done.fetch_add(1, Ordering::AcqRel);
            });
        }
        start.wait();
        wait_until("every thread's own objects done", || {
            assert!(pair.a_cq.poll(4).is_empty());
            done.load(Ordering::Acquire) == THREADS
        });
    });
    pair.teardown();
}

/// A CQ notification callback that holds its thread until released.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
    timed_out: AtomicBool,
}

#[derive(Default)]
struct GateState {
    entered: usize,
    open: bool,
    statuses: Vec<NtStatus>,
}

impl Gate {
    fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    /// Waits until the callback was entered `n` times.
    fn wait_entered(&self, n: usize) {
        let guard = self.state.lock().unwrap();
        let (_guard, timeout) = self
            .cv
            .wait_timeout_while(guard, WAIT, |s| s.entered < n)
            .unwrap();
        assert!(!timeout.timed_out(), "callback #{n} never came");
    }

    fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.cv.notify_all();
    }
}

/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` that blocks until the gate opens (at
/// most [`WAIT`]: if a provider call waits for this callback, the callback
/// gives up, records it, and the test fails instead of hanging).
unsafe extern "system" fn gated(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: the test passes a Gate it keeps alive until the CQ is closed.
    let gate = unsafe { &*ctx.cast::<Gate>() };
    let mut state = gate.state.lock().unwrap();
    state.entered += 1;
    state.statuses.push(status);
    gate.cv.notify_all();
    let (_state, timeout) = gate
        .cv
        .wait_timeout_while(state, WAIT, |s| !s.open)
        .unwrap();
    if timeout.timed_out() {
        gate.timed_out.store(true, Ordering::Release);
    }
}

/// I2 (inference from I1): no provider function waits or blocks on a
/// consumer: while one thread is held inside A's CQ notification callback,
/// posts on both sides (A's receive queue included), polls and arms of both
/// CQs, a completion queued to the busy CQ, and object creation and close all
/// return — before the callback is released.
#[test]
fn i2_no_call_blocks_while_a_consumer_callback_is_busy() {
    let gate = Arc::new(Gate::default());
    let (a, b) = Side::two();
    // SAFETY: the gate outlives the CQ (closed below); no affinity.
    let a_cq = unsafe { cq_with(&a.adapter, 64, gated, gate.ctx(), std::ptr::null()) }.unwrap();
    let b_cq = b.adapter.cq(64);
    let a_qp = a.pd.qp(&a_cq, &a_cq, 0xA);
    let b_qp = b.pd.qp(&b_cq, &b_cq, 0xB);
    let link = a.connect(&a_qp, &b, &b_qp);
    let a_mem = Region::pattern(&a.pd, 4096, 1, MR_REMOTE);
    let b_mem = Region::pattern(&b.pd, 4096, 2, MR_REMOTE);
    let a_src = a_mem.sge(0, 64);
    let (b_remote, b_token) = (b_mem.remote(0), b_mem.token());
    let finished_before_release = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (a_cq_ref, a_qp_ref) = (&a_cq, &a_qp);
        let holder = s.spawn(move || {
            a_cq_ref.arm(NdkCqNotifyType::ANY);
            // The completion fires the callback, here or on another thread;
            // either way it holds its thread.
            assert_success!(a_qp_ref.write(1, &[a_src], b_remote, b_token, 0));
        });
        gate.wait_entered(1);
        // Everything below runs while the callback is held.
        assert_success!(b_qp.write(
            10,
            &[b_mem.sge(0, 64)],
            a_mem.remote(1024),
            a_mem.token(),
            0
        ));
        assert_eq!(summary(&b_cq.wait_results(1)), [(10, STATUS_SUCCESS)]);
        assert_success!(a_qp.receive(20, &[a_mem.sge(2048, 64)]));
        assert_success!(b_qp.send(11, &[b_mem.sge(0, 32)], 0));
        assert_eq!(summary(&b_cq.wait_results(1)), [(11, STATUS_SUCCESS)]);
        let reaped = a_cq.wait_results(2);
        assert_eq!(sorted_contexts(&reaped), [1, 20]);
        // Arm, and make a notification due while the callback still runs.
        a_cq.arm(NdkCqNotifyType::ANY);
        assert_success!(a_qp.receive(21, &[a_mem.sge(3072, 64)]));
        assert_success!(b_qp.send(12, &[b_mem.sge(0, 32)], 0));
        assert_eq!(summary(&b_cq.wait_results(1)), [(12, STATUS_SUCCESS)]);
        assert_eq!(summary(&a_cq.wait_results(1)), [(21, STATUS_SUCCESS)]);
        b_cq.arm(NdkCqNotifyType::ANY);
        assert!(b_cq.poll(4).is_empty());
        let extra_cq = a.adapter.cq(8);
        let extra_pd = a.adapter.pd();
        let extra_region = Region::new(&extra_pd, 4096, 0, MR_LOCAL_WRITE);
        extra_region.close();
        assert_closed([extra_pd.close(), extra_cq.close()]);
        // A flush of the QP whose completion the held callback reports: it
        // returns; the cancellations (none pending here) follow later.
        a_qp.flush();
        assert_eq!(
            gate.state.lock().unwrap().entered,
            1,
            "C5: a second callback overlapped"
        );
        finished_before_release.store(true, Ordering::Release);
        gate.open();
        holder.join().unwrap();
    });
    // The notification that came due meanwhile is delivered after the first
    // callback returned.
    gate.wait_entered(2);
    assert!(finished_before_release.load(Ordering::Acquire));
    assert!(
        !gate.timed_out.load(Ordering::Acquire),
        "a provider call waited for the callback"
    );
    assert_eq!(
        gate.state.lock().unwrap().statuses,
        [STATUS_SUCCESS, STATUS_SUCCESS]
    );
    a_mem.close();
    b_mem.close();
    link.close();
    a.close_with(a_qp, a_cq);
    b.close_with(b_qp, b_cq);
}

/// What a notification callback saw: its thread, and what it reaped from the
/// CQ from inside the callback.
#[derive(Default)]
struct Seen {
    cq: AtomicUsize,
    calls: Mutex<Vec<Call>>,
}

/// One notification: its thread and what it reaped.
type Call = (ThreadId, Vec<(usize, NtStatus)>);

/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` recording into a [`Seen`]; it reaps the
/// CQ from inside the callback.
unsafe extern "system" fn record(ctx: *mut c_void, _status: NtStatus) {
    // SAFETY: the test passes a Seen it keeps alive until the CQ is closed.
    let seen = unsafe { &*ctx.cast::<Seen>() };
    // A non-owning view of the CQ (never closed through this wrapper).
    let cq = Cq(seen.cq.load(Ordering::Acquire) as *mut NdkCq, Signal::new());
    let reaped = summary(&cq.poll(16));
    seen.calls
        .lock()
        .unwrap()
        .push((std::thread::current().id(), reaped));
}

/// I3: the provider may call a consumer callback from inside the provider
/// function whose request it completes, on the calling thread: the consumer's
/// notification callback then runs before the posting call returns, and can
/// already reap the completion. The test records the callback's thread and
/// checks that, whatever thread it ran on, the completion is seen exactly
/// once and a callback on the posting thread ran within the call.
#[test]
fn i3_callbacks_may_run_on_the_posting_thread_inside_the_call() {
    let seen = Arc::new(Seen::default());
    let pair = Pair::new();
    // SAFETY: `seen` outlives the CQ (closed below); no affinity.
    let cq = unsafe {
        cq_with(
            &pair.a,
            64,
            record,
            Arc::as_ptr(&seen).cast_mut().cast(),
            std::ptr::null(),
        )
    }
    .unwrap();
    seen.cq.store(cq.0 as usize, Ordering::Release);
    let qp = pair.a_pd.qp(&cq, &cq, 0xD);
    let mem = Region::new(&pair.a_pd, 4096, 0, MR_LOCAL_WRITE);
    let poster = std::thread::current().id();
    let mut threads = Vec::new();
    for round in 0..3_usize {
        cq.arm(NdkCqNotifyType::ANY);
        // A receive on an unconnected QP (P8), cancelled by a flush (E1):
        // the completion is queued by the flush call itself.
        assert_success!(qp.receive(round, &[mem.sge(round * 64, 64)]));
        qp.flush();
        let calls_at_return = seen.calls.lock().unwrap().len();
        wait_until("no notification", || {
            seen.calls.lock().unwrap().len() > round
        });
        let (thread, reaped) = seen.calls.lock().unwrap()[round].clone();
        if thread == poster {
            assert!(
                calls_at_return > round,
                "a callback on the posting thread after the call"
            );
        }
        let mut all = reaped;
        all.extend(summary(&cq.poll(16)));
        assert_eq!(all, [(round, STATUS_CANCELLED)], "round {round}");
        threads.push(thread);
    }
    // For the record: this provider (inline engine) calls back on the
    // posting thread.
    eprintln!(
        "i3: notifications on the posting thread: {}/3",
        threads.iter().filter(|t| **t == poster).count()
    );
    assert_closed([qp.close(), cq.close()]);
    teardown_with_regions(pair, [mem]);
}

/// The CQ and QP a notification callback drives, stored by the test once
/// they exist (the callback's context is made before them).
#[derive(Default)]
struct Driven {
    cq: AtomicUsize,
    qp: AtomicUsize,
}

impl Driven {
    fn set(&self, cq: &Cq, qp: &Qp) {
        self.cq.store(cq.0 as usize, Ordering::Release);
        self.qp.store(qp.0 as usize, Ordering::Release);
    }

    /// Non-owning views of the CQ and the QP (never closed through these
    /// wrappers).
    fn views(&self) -> (Cq, Qp) {
        let cq = Cq(self.cq.load(Ordering::Acquire) as *mut NdkCq, Signal::new());
        (cq, Qp(self.qp.load(Ordering::Acquire) as *mut NdkQp))
    }
}

/// Polls `cq` until it is empty, handing each batch to `reaped`.
fn drain(cq: &Cq, mut reaped: impl FnMut(Vec<NdkResult>)) {
    loop {
        let got = cq.poll(16);
        if got.is_empty() {
            break;
        }
        reaped(got);
    }
}

/// A chain driven from inside the CQ notification callback: it reaps the
/// CQ, posts the next Write and re-arms.
struct Chain {
    driven: Driven,
    sge: NdkSge,
    remote: u64,
    token: u32,
    limit: usize,
    posted: AtomicUsize,
    calls: AtomicUsize,
    reaped: Mutex<Vec<(usize, NtStatus)>>,
    post_failures: Mutex<Vec<NtStatus>>,
}

/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` driving a [`Chain`].
unsafe extern "system" fn chain_step(ctx: *mut c_void, _status: NtStatus) {
    // SAFETY: the test passes a Chain it keeps alive until the CQ is closed.
    let chain = unsafe { &*ctx.cast::<Chain>() };
    chain.calls.fetch_add(1, Ordering::AcqRel);
    let (cq, qp) = chain.driven.views();
    drain(&cq, |got| {
        chain.reaped.lock().unwrap().extend(summary(&got));
    });
    let next = chain.posted.load(Ordering::Acquire);
    if next < chain.limit {
        chain.posted.store(next + 1, Ordering::Release);
        let status = qp.write(next, &[chain.sge], chain.remote, chain.token, 0);
        if status != STATUS_SUCCESS {
            chain.post_failures.lock().unwrap().push(status);
        }
    }
    cq.arm(NdkCqNotifyType::ANY);
}

/// I4 (inference from L15, C3–C5): no callback is made while the provider
/// holds a lock a call from inside it needs: from inside its CQ notification
/// callback the consumer reaps the CQ, posts the next request on the QP whose
/// completion triggered it, and re-arms — fifty times over, with no
/// deadlock (Linux rxe's bug) and no completion lost or doubled.
#[test]
fn i4_callback_reaps_posts_and_rearms_without_deadlock() {
    const LIMIT: usize = 50;
    let (a, b) = Side::two();
    let a_mem = Region::pattern(&a.pd, 4096, 3, MR_LOCAL_WRITE);
    let b_mem = Region::new(&b.pd, 4096, 0, MR_REMOTE);
    let chain = Arc::new(Chain {
        driven: Driven::default(),
        sge: a_mem.sge(0, 64),
        remote: b_mem.remote(0),
        token: b_mem.token(),
        limit: LIMIT,
        posted: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
        reaped: Mutex::new(Vec::new()),
        post_failures: Mutex::new(Vec::new()),
    });
    let ctx = Arc::as_ptr(&chain).cast_mut().cast();
    // SAFETY: `chain` outlives the CQ (closed below); no affinity.
    let a_cq = unsafe { cq_with(&a.adapter, 64, chain_step, ctx, std::ptr::null()) }.unwrap();
    let b_cq = b.adapter.cq(64);
    let a_qp = a.pd.qp(&a_cq, &a_cq, 0xA);
    let b_qp = b.pd.qp(&b_cq, &b_cq, 0xB);
    chain.driven.set(&a_cq, &a_qp);
    let link = a.connect(&a_qp, &b, &b_qp);
    a_cq.arm(NdkCqNotifyType::ANY);
    chain.posted.store(1, Ordering::Release);
    assert_success!(a_qp.write(0, &[chain.sge], chain.remote, chain.token, 0));
    let deadline = std::time::Instant::now() + WAIT;
    while chain.reaped.lock().unwrap().len() < LIMIT {
        assert!(
            std::time::Instant::now() < deadline,
            "the chain stalled after {} completions",
            chain.reaped.lock().unwrap().len()
        );
        std::thread::yield_now();
    }
    let mut reaped = chain.reaped.lock().unwrap().clone();
    reaped.sort_unstable();
    let expected: Vec<_> = (0..LIMIT).map(|i| (i, STATUS_SUCCESS)).collect();
    assert_eq!(reaped, expected);
    assert!(chain.post_failures.lock().unwrap().is_empty());
    assert!(chain.calls.load(Ordering::Acquire) >= 1);
    link.close();
    a_mem.close();
    b_mem.close();
    a.close_with(a_qp, a_cq);
    b.close_with(b_qp, b_cq);
}

/// One side of a ping-pong driven from its CQ notification callback.
struct Player {
    driven: Driven,
    /// Receive slots (reposted round-robin) and the message to send.
    slots: Vec<NdkSge>,
    message: NdkSge,
    limit: usize,
    received: AtomicUsize,
    sent: AtomicUsize,
    failures: Mutex<Vec<(usize, NtStatus)>>,
}

impl Player {
    fn new(slots: Vec<NdkSge>, message: NdkSge, limit: usize) -> Arc<Self> {
        Arc::new(Self {
            driven: Driven::default(),
            slots,
            message,
            limit,
            received: AtomicUsize::new(0),
            sent: AtomicUsize::new(0),
            failures: Mutex::new(Vec::new()),
        })
    }

    fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    fn send_next(&self, qp: &Qp) {
        let n = self.sent.fetch_add(1, Ordering::AcqRel);
        if n < self.limit {
            let status = qp.send(100_000 + n, &[self.message], 0);
            if status != STATUS_SUCCESS {
                self.failures.lock().unwrap().push((100_000 + n, status));
            }
        }
    }
}

/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` of a [`Player`]: reaps; for each
/// message received, reposts the receive and answers; re-arms.
unsafe extern "system" fn play(ctx: *mut c_void, _status: NtStatus) {
    // SAFETY: the test passes a Player it keeps alive until the CQ is closed.
    let player = unsafe { &*ctx.cast::<Player>() };
    let (cq, qp) = player.driven.views();
    drain(&cq, |got| {
        for r in got {
            let context = r.request_context as usize;
            if r.status != STATUS_SUCCESS {
                player.failures.lock().unwrap().push((context, r.status));
            } else if context < 100_000 {
                // A receive: repost its slot, answer.
                player.received.fetch_add(1, Ordering::AcqRel);
                let slot = context % player.slots.len();
                let status = qp.receive(context + player.slots.len(), &[player.slots[slot]]);
                if status != STATUS_SUCCESS {
                    player.failures.lock().unwrap().push((context, status));
                }
                player.send_next(&qp);
            }
        }
    });
    cq.arm(NdkCqNotifyType::ANY);
}

/// I4, both sides at once: a ping-pong in which every receive is reposted and
/// every answer sent from inside the receiving side's CQ callback — which the
/// inline engine calls from inside the *peer's* posting call — runs to the
/// end without deadlock or loss.
#[test]
fn i4_ping_pong_driven_from_both_sides_callbacks() {
    const LIMIT: usize = 40;
    const SLOTS: usize = 4;
    let (a, b) = Side::two();
    let a_mem = Region::pattern(&a.pd, 4096, 7, MR_LOCAL_WRITE);
    let b_mem = Region::pattern(&b.pd, 4096, 8, MR_LOCAL_WRITE);
    let slots = |region: &Region| (0..SLOTS).map(|i| region.sge(2048 + i * 64, 64)).collect();
    let pa = Player::new(slots(&a_mem), a_mem.sge(0, 48), LIMIT);
    let pb = Player::new(slots(&b_mem), b_mem.sge(0, 48), LIMIT);
    // SAFETY: the players outlive the CQs (closed below); no affinity.
    let a_cq = unsafe { cq_with(&a.adapter, 256, play, pa.ctx(), std::ptr::null()) }.unwrap();
    // SAFETY: as above.
    let b_cq = unsafe { cq_with(&b.adapter, 256, play, pb.ctx(), std::ptr::null()) }.unwrap();
    let a_qp = a.pd.qp(&a_cq, &a_cq, 0xA);
    let b_qp = b.pd.qp(&b_cq, &b_cq, 0xB);
    for (player, cq, qp) in [(&pa, &a_cq, &a_qp), (&pb, &b_cq, &b_qp)] {
        player.driven.set(cq, qp);
        for (i, slot) in player.slots.iter().enumerate() {
            assert_success!(qp.receive(i, &[*slot]));
        }
        cq.arm(NdkCqNotifyType::ANY);
    }
    let link = a.connect(&a_qp, &b, &b_qp);
    // A serves first; from then on the callbacks play.
    pa.send_next(&a_qp);
    let deadline = std::time::Instant::now() + WAIT;
    while pa.received.load(Ordering::Acquire) < LIMIT || pb.received.load(Ordering::Acquire) < LIMIT
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the ping-pong stalled at {} / {}",
            pa.received.load(Ordering::Acquire),
            pb.received.load(Ordering::Acquire)
        );
        std::thread::yield_now();
    }
    assert!(
        pa.failures.lock().unwrap().is_empty(),
        "{:?}",
        pa.failures.lock().unwrap()
    );
    assert!(
        pb.failures.lock().unwrap().is_empty(),
        "{:?}",
        pb.failures.lock().unwrap()
    );
    link.close();
    a_mem.close();
    b_mem.close();
    a.close_with(a_qp, a_cq);
    b.close_with(b_qp, b_cq);
}

/// I5: inline data (and inline SGE buffers) need be valid only until the
/// posting call returns: buffers overwritten and freed right after the post
/// — while the request still waits for the peer, or is held back by DEFER —
/// still deliver the original bytes.
#[test]
fn i5_inline_buffers_may_be_reused_once_the_post_returns() {
    only_on_fabric!(
        "a Send waits for the peer's receive on the fabric; over iWARP it goes at once and, with no receive posted, the peer terminates (RFC 5040)"
    );
    let (pair, a_src, b_mem) = pair_with_memory(4096, 6);
    let b_recv = Region::new(&pair.b_pd, 4096, 0, MR_LOCAL_WRITE);
    let original: Vec<u8> = (0..200).map(|i| (i * 7 + 3) as u8).collect();
    {
        let mut heap = original.clone();
        let sges = [inline_sge(&heap[..150]), inline_sge(&heap[150..200])];
        // No receive at B yet: the Send waits.
        assert_success!(pair.a_qp.send(1, &sges, INLINE));
        heap.fill(0xFF);
    }
    {
        let mut stack = [0x42_u8; 64];
        let sge = inline_sge(&stack);
        assert_success!(
            pair.a_qp
                .write(2, &[sge], b_mem.remote(0), b_mem.token(), INLINE | DEFER)
        );
        stack.fill(0);
        std::hint::black_box(&mut stack);
    }
    {
        // Not inline: the SGE array itself is the caller's only during the
        // call; the provider keeps its own copy of the entries.
        let mut sgl = vec![a_src.sge(100, 96)];
        assert_success!(
            pair.a_qp
                .write(4, &sgl, b_mem.remote(512), b_mem.token(), DEFER)
        );
        sgl[0] = NdkSge {
            address: 0xDEAD_0000,
            length: 1,
            memory_region_token: 0x0BAD_0BAD,
        };
    }
    // Reuse the freed memory for something else.
    let scribble = vec![0xAB_u8; 4096];
    std::hint::black_box(&scribble);
    assert_success!(pair.a_qp.send(3, &[], 0));
    assert_success!(pair.b_qp.receive(10, &[b_recv.sge(0, 1024)]));
    assert_success!(pair.b_qp.receive(11, &[b_recv.sge(1024, 1024)]));
    assert_eq!(
        summary(&pair.a_cq.wait_results(4)),
        [
            (1, STATUS_SUCCESS),
            (2, STATUS_SUCCESS),
            (4, STATUS_SUCCESS),
            (3, STATUS_SUCCESS)
        ]
    );
    let got = pair.b_cq.wait_results(2);
    assert_eq!(got[0].bytes_transferred, 200);
    assert_eq!(&b_recv.bytes()[..200], &original[..]);
    assert_eq!(&b_mem.bytes()[..64], &[0x42_u8; 64]);
    assert_eq!(&b_mem.bytes()[512..512 + 96], &a_src.bytes()[100..196]);
    a_src.close();
    b_recv.close();
    b_mem.close();
    pair.teardown();
}

/// I6: apart from what consumers serialize, provider calls run concurrently:
/// Writes on A's initiator queue, receives on A's receive queue and B's
/// Sends into them, each CQ reaped by its own thread while the engine fills
/// it, and on a second connection a flush racing a stream of posts. Every
/// accepted request completes exactly once, every message arrives whole.
#[test]
fn i6_posts_flushes_and_polls_race_the_engine() {
    only_on_fabric!(
        "a Send waits for the peer's receive on the fabric; over iWARP it goes at once and, with no receive posted, the peer terminates (RFC 5040)"
    );
    const WRITES: usize = 200;
    const MESSAGES: usize = 60;
    let one = Pair::new();
    let two = Pair::new();
    let a_mem = Region::pattern(&one.a_pd, 8192, 4, MR_LOCAL_WRITE);
    let b_mem = Region::new(&one.b_pd, 8192, 0, MR_REMOTE);
    let mut b_src = Region::new(&one.b_pd, MESSAGES * 32, 0, MR_LOCAL_WRITE);
    for m in 0..MESSAGES {
        b_src.bytes_mut()[m * 32..(m + 1) * 32].fill(m as u8 + 1);
    }
    let two_src = Region::pattern(&two.a_pd, 4096, 5, MR_LOCAL_WRITE);
    let two_dst = Region::new(&two.b_pd, 4096, 0, MR_REMOTE);
    let write_sge = a_mem.sge(0, 128);
    let (remote, token) = (b_mem.remote(0), b_mem.token());
    let recv: Vec<NdkSge> = (0..MESSAGES)
        .map(|m| a_mem.sge(4096 + m * 32, 32))
        .collect();
    let send: Vec<NdkSge> = (0..MESSAGES).map(|m| b_src.sge(m * 32, 32)).collect();
    let two_sge = two_src.sge(0, 64);
    let (two_remote, two_token) = (two_dst.remote(0), two_dst.token());
    let start = Barrier::new(6);
    let meet = Barrier::new(2);
    let mut two_accepted = Vec::new();
    let (mut a_seen, mut b_seen) = (Vec::new(), Vec::new());
    // A's Write completions reaped so far: the writer keeps at most a queue
    // depth (64) outstanding, as a post past it is refused (P24) — with the
    // deferred engine the posts may run ahead of the completions.
    let writes_reaped = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let (one_a, one_b) = (&one.a_qp, &one.b_qp);
        let (a_cq, b_cq) = (&one.a_cq, &one.b_cq);
        let (start, meet, recv, send) = (&start, &meet, &recv, &send);
        let writes_reaped = &writes_reaped;
        s.spawn(move || {
            start.wait();
            for i in 0..WRITES {
                wait_until("I6: room in the initiator queue", || {
                    i < writes_reaped.load(Ordering::SeqCst) + 64
                });
                assert_success!(one_a.write(i, &[write_sge], remote, token, 0));
            }
        });
        s.spawn(move || {
            start.wait();
            for (m, sge) in recv.iter().enumerate() {
                assert_success!(one_a.receive(1000 + m, &[*sge]));
            }
        });
        s.spawn(move || {
            start.wait();
            for (m, sge) in send.iter().enumerate() {
                assert_success!(one_b.send(2000 + m, &[*sge], 0));
            }
        });
        let a_poller = s.spawn(move || {
            start.wait();
            let mut seen = Vec::new();
            let deadline = std::time::Instant::now() + WAIT;
            while seen.len() < WRITES + MESSAGES {
                let got: Vec<_> = a_cq.poll(32).iter().map(plain).collect();
                let writes = got.iter().filter(|r| r.0 < WRITES).count();
                writes_reaped.fetch_add(writes, Ordering::SeqCst);
                seen.extend(got);
                assert!(std::time::Instant::now() < deadline);
            }
            seen
        });
        let b_poller = s.spawn(move || {
            start.wait();
            let mut seen = Vec::new();
            let deadline = std::time::Instant::now() + WAIT;
            while seen.len() < MESSAGES {
                seen.extend(b_cq.poll(32).iter().map(plain));
                assert!(std::time::Instant::now() < deadline);
            }
            seen
        });
        let two_qp = &two.a_qp;
        let two_poster = s.spawn(move || {
            let mut accepted = Vec::new();
            for i in 0..300 {
                if i == 100 {
                    meet.wait();
                }
                if two_qp.write(i, &[two_sge], two_remote, two_token, 0) == STATUS_SUCCESS {
                    accepted.push(i);
                }
            }
            accepted
        });
        start.wait();
        meet.wait();
        two.a_qp.flush();
        two_accepted = two_poster.join().unwrap();
        a_seen = a_poller.join().unwrap();
        b_seen = b_poller.join().unwrap();
    });
    let mut expected: Vec<usize> = (0..WRITES).chain(1000..1000 + MESSAGES).collect();
    expected.sort_unstable();
    let contexts = |seen: &[(usize, NtStatus, u32)]| {
        let mut c: Vec<usize> = seen.iter().map(|r| r.0).collect();
        c.sort_unstable();
        c
    };
    assert_eq!(contexts(&a_seen), expected);
    assert!(a_seen.iter().all(|r| r.1 == STATUS_SUCCESS));
    assert_eq!(
        contexts(&b_seen),
        (2000..2000 + MESSAGES).collect::<Vec<_>>()
    );
    assert!(b_seen.iter().all(|r| r.1 == STATUS_SUCCESS));
    // Each receive got the message sent in the same order.
    for &(context, _, bytes) in a_seen.iter().filter(|r| r.0 >= 1000) {
        let m = context - 1000;
        assert_eq!(bytes, 32);
        let bytes = &a_mem.bytes()[4096 + m * 32..4096 + (m + 1) * 32];
        assert!(bytes.iter().all(|&b| b == m as u8 + 1), "message {m}");
    }
    assert_eq!(&b_mem.bytes()[..128], &a_mem.bytes()[..128]);
    let done = two.a_cq.wait_results(two_accepted.len());
    assert_eq!(sorted_contexts(&done), two_accepted);
    expect_completed_or_cancelled(&done);
    one.assert_cqs_empty();
    assert_empty(&two.a_cq);
    for region in [a_mem, b_mem, b_src, two_src, two_dst] {
        region.close();
    }
    one.teardown();
    teardown_lenient(two);
}

/// I7: CreateCq takes an Affinity (a GROUP_AFFINITY naming processors for
/// the notification callback; a hint consumers cannot count on): it is
/// accepted, and the CQ's notifications work.
#[test]
fn i7_create_cq_accepts_a_group_affinity() {
    let pair = Pair::new();
    let cpus = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(64);
    let all = if cpus == 64 {
        usize::MAX
    } else {
        (1_usize << cpus) - 1
    };
    for mask in [1, all] {
        let affinity = GroupAffinity {
            mask,
            group: 0,
            reserved: [0; 3],
        };
        let watch = Signal::new();
        // SAFETY: `watch` outlives the CQ; the affinity lives during the call.
        let cq = unsafe { cq_with(&pair.a, 32, on_status, watch.ctx(), &raw const affinity) }
            .expect("CreateCq with an affinity");
        let qp = pair.a_pd.qp(&cq, &cq, 0xF);
        let mem = Region::new(&pair.a_pd, 4096, 0, MR_LOCAL_WRITE);
        cq.arm(NdkCqNotifyType::ANY);
        assert_success!(qp.receive(1, &[mem.sge(0, 64)]));
        qp.flush();
        assert_success!(watch.wait(), "mask {mask:#x}");
        assert_eq!(summary(&cq.wait_results(1)), [(1, STATUS_CANCELLED)]);
        assert_closed([qp.close(), cq.close()]);
        mem.close();
    }
    pair.teardown();
}
