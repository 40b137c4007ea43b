//! Reaping: polling completion queues, summarising and checking results,
//! and a source of completions without a connection.

use super::*;

/// Result types every byte pattern is a valid value of (integers and raw
/// pointers only), so that an array of them may be prefilled with any
/// byte.
pub trait PlainResult: Copy + std::fmt::Debug {}

impl PlainResult for NdkResult {}

impl PlainResult for NdkResultEx {}

/// `room` results prefilled with `fill` bytes, handed to `poll` (GetCqResults
/// or GetCqResultsEx: the array and its room): the count it returned and
/// all `room` entries.
pub fn poll_prefilled<T: PlainResult>(
    room: usize,
    fill: u8,
    poll: impl FnOnce(*mut T, u32) -> u32,
) -> (usize, Vec<T>) {
    let mut out: Vec<T> = Vec::with_capacity(room);
    // SAFETY: room for `room` entries; any bytes make a valid `T`
    // (`PlainResult`).
    unsafe { std::ptr::write_bytes(out.as_mut_ptr(), fill, room) };
    // SAFETY: initialised just above.
    unsafe { out.set_len(room) };
    let n = poll(out.as_mut_ptr(), u32::try_from(room).unwrap());
    (n as usize, out)
}

/// As [`poll_prefilled`], keeping only the results `poll` returned.
pub fn polled<T: PlainResult>(
    room: usize,
    fill: u8,
    poll: impl FnOnce(*mut T, u32) -> u32,
) -> Vec<T> {
    let (n, mut out) = poll_prefilled(room, fill, poll);
    out.truncate(n);
    out
}

/// GetCqResultsEx into an array prefilled with 0xA5 bytes, so that a field
/// the provider leaves unwritten shows.
pub fn poll_ex_dirty(cq: &Cq, max: usize) -> Vec<NdkResultEx> {
    // SAFETY: a live CQ; `polled` gives room for `room` results.
    polled(max, 0xA5, |out, room| unsafe {
        (cq.d().ndk_get_cq_results_ex)(cq.0, out, room)
    })
}

/// Calls `poll` (with the number still missing) until `n` results arrived
/// (the engine may run on a worker), within [`WAIT`].
pub fn gathered<T: PlainResult>(n: usize, mut poll: impl FnMut(usize) -> Vec<T>) -> Vec<T> {
    let deadline = std::time::Instant::now() + WAIT;
    let mut got = Vec::new();
    while got.len() < n {
        got.extend(poll(n - got.len()));
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {n} completions arrived: {got:?}",
            got.len()
        );
        if got.len() < n {
            std::thread::yield_now();
        }
    }
    got
}

/// Polls `GetCqResultsEx` until `n` results arrived.
pub fn wait_results_ex(cq: &Cq, n: usize) -> Vec<NdkResultEx> {
    gathered(n, |more| cq.poll_ex(more))
}

/// (request context, status) of each result.
pub fn summary(results: &[NdkResult]) -> Vec<(usize, NtStatus)> {
    results
        .iter()
        .map(|r| (r.request_context as usize, r.status))
        .collect()
}

/// (request context, status, type) of each extended result.
pub fn summary_ex(results: &[NdkResultEx]) -> Vec<(usize, NtStatus, NdkOperationType)> {
    results
        .iter()
        .map(|r| (r.request_context as usize, r.status, r.type_))
        .collect()
}

/// Asserts the CQ holds nothing more.
pub fn assert_empty(cq: &Cq) {
    let more = cq.poll(16);
    assert!(
        more.is_empty(),
        "unexpected completions: {:?}",
        summary(&more)
    );
}

/// A zero-length Receive.
pub fn recv0(qp: &Qp, context: usize) {
    assert_success!(qp.receive(context, &[]), "Receive");
}

/// A zero-length Send with `flags`.
pub fn send0(qp: &Qp, context: usize, flags: u32) {
    assert_success!(qp.send(context, &[], flags), "Send");
}

/// A source of completions without a connection: an unconnected QP that
/// was flushed, so that every receive posted on it completes at once with
/// `STATUS_CANCELLED` (E1) on `cq`.
pub struct Spout {
    pub adapter: Adapter,
    pub cq: Cq,
    pub pd: Pd,
    pub qp: Qp,
}

impl Spout {
    /// An adapter of its own, a CQ made by `make_cq`, a PD and a flushed QP.
    pub fn new(make_cq: impl FnOnce(&Adapter) -> Cq) -> Self {
        let adapter = open_adapter(own_address());
        let cq = make_cq(&adapter);
        let pd = adapter.pd();
        let qp = pd.qp(&cq, &cq, 0x5B);
        qp.flush();
        Self {
            adapter,
            cq,
            pd,
            qp,
        }
    }

    /// One `STATUS_CANCELLED` completion with request context `context`.
    pub fn emit(&self, context: usize) {
        recv0(&self.qp, context);
    }

    /// Closes everything (L18 checked).
    pub fn close(self) {
        for status in [self.qp.close(), self.cq.close(), self.pd.close()] {
            assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
        }
        self.adapter.close();
    }
}

/// The request context of each result.
pub fn request_contexts(results: &[NdkResult]) -> Vec<usize> {
    results.iter().map(|r| r.request_context as usize).collect()
}

/// The request contexts of the results, sorted.
pub fn sorted_contexts(results: &[NdkResult]) -> Vec<usize> {
    let mut contexts = request_contexts(results);
    contexts.sort_unstable();
    contexts
}

/// Asserts that every result is a success or a cancellation: a request
/// caught by a flush or a close is completed or cancelled, never failed
/// otherwise (D5, E2).
pub fn expect_completed_or_cancelled(results: &[NdkResult]) {
    for r in results {
        assert!(
            r.status == STATUS_SUCCESS || r.status == STATUS_CANCELLED,
            "request {}: {:#x}",
            r.request_context as usize,
            r.status
        );
    }
}

/// How long a check waits to see that a callback does *not* come (it is
/// always followed by the positive check; no test asserts on timing).
pub const SETTLE: Duration = Duration::from_millis(50);

/// Waits [`SETTLE`] and returns how many callbacks `signal` has seen.
pub fn settled_count(signal: &Signal) -> usize {
    std::thread::sleep(SETTLE);
    signal.count()
}

/// Sends `payload` from `from` (QP, CQ, memory) into a receive posted on
/// `to`, and checks both completions (SUCCESS) and the bytes received.
/// The two sides may share one CQ (a loopback connection).
pub fn ping(from: (&Qp, &Cq, &mut Mem), to: (&Qp, &Cq, &Mem), payload: &[u8]) {
    let (qp, cq, mem) = from;
    let (peer_qp, peer_cq, peer_mem) = to;
    let len = payload.len();
    mem.buffer.bytes_mut()[..len].copy_from_slice(payload);
    assert_success!(peer_qp.receive(0x5EC0, &[peer_mem.sge(0, len)]), "Receive");
    assert_success!(qp.send(0x5E4D, &[mem.sge(0, len)], 0), "Send");
    let done = if std::ptr::eq(cq.0, peer_cq.0) {
        cq.wait_results(2)
    } else {
        let mut v = cq.wait_results(1);
        v.extend(peer_cq.wait_results(1));
        v
    };
    assert_eq!(
        sorted(&done),
        [(0x5E4D, STATUS_SUCCESS), (0x5EC0, STATUS_SUCCESS)],
        "Send and Receive completions"
    );
    assert_eq!(&peer_mem.bytes()[..len], payload, "bytes received");
}

/// (request context, status) of each result, sorted by context.
pub fn sorted(results: &[NdkResult]) -> Vec<(usize, NtStatus)> {
    let mut done = summary(results);
    done.sort_unstable();
    done
}

/// (request context, status) of the next `n` results of `cq` (waited
/// for), sorted by context.
pub fn sorted_summary(cq: &Cq, n: usize) -> Vec<(usize, NtStatus)> {
    sorted(&cq.wait_results(n))
}

/// `(context, status)` for every context of `contexts`, as [`summary`]
/// reports them.
pub fn each_with(contexts: std::ops::Range<usize>, status: NtStatus) -> Vec<(usize, NtStatus)> {
    contexts.map(|context| (context, status)).collect()
}

/// [`ping`]s `payload` from A's QP to B's: each QP completes on its end's
/// CQ and sends or receives through a page of memory of its end's PD
/// (closed after). Proof that the two QPs are connected to each other.
pub fn ping_once((a, a_qp): (&End, &Qp), (b, b_qp): (&End, &Qp), payload: &[u8]) {
    let mut a_mem = Mem::all(&a.pd, 4096, 0);
    let b_mem = Mem::all(&b.pd, 4096, 0);
    ping((a_qp, &a.cq, &mut a_mem), (b_qp, &b.cq, &b_mem), payload);
    a_mem.close();
    b_mem.close();
}

/// [`ping_once`]s `there` from A's QP to B's, then `back` from B's to A's.
pub fn ping_both_ways(a: (&End, &Qp), b: (&End, &Qp), there: &[u8], back: &[u8]) {
    ping_once(a, b, there);
    ping_once(b, a, back);
}
