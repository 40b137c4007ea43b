//! Deterministic fault injection (issue 11, item 2): each fault kind
//! injected through the C ABI (`SoftNdkSetFaultPlan`, `SoftNdkSetFaults`)
//! at an exact call, and seen by a consumer exactly as the rule it cites
//! says; the trace read back with `SoftNdkGetFaultTrace`; the same seed
//! replays the same faults, another seed others.
//!
//! A plan is per process, so the tests of this binary run one at a time
//! (`serial`), build their objects first, then install the plan just before
//! the call it aims at (the call counters start at the install), and turn
//! injection off before tearing down.

#[path = "conformance/harness/mod.rs"]
mod harness;

/// The transport every fixture of this binary uses (`harness::Transport`).
const TRANSPORT: harness::Transport = harness::Transport::Local;

use std::ffi::{CString, c_void};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use harness::{Pair, WAIT, assert_success};
use softndk::abi::*;
use softndk::provider::host::{SoftNdkGetFaultTrace, SoftNdkSetFaultPlan, SoftNdkSetFaults};
use softndk::rnic::fault;
use softndk::rnic::types::{Opcode, WcStatus};

const DEFER: u32 = OpFlags::DEFER.bits();

/// Turns injection off when dropped (also when a test fails).
struct Serial(#[allow(dead_code, reason = "held for its drop")] MutexGuard<'static, ()>);

impl Drop for Serial {
    fn drop(&mut self) {
        // SAFETY: null turns injection off.
        let _ = unsafe { SoftNdkSetFaultPlan(std::ptr::null()) };
    }
}

/// One test at a time, injection off at the start.
fn serial() -> Serial {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: null turns injection off.
    assert_success!(unsafe { SoftNdkSetFaultPlan(std::ptr::null()) });
    Serial(guard)
}

/// A connected pair over `transport`, made once this test holds the fault
/// plan ([`serial`]).
fn serial_pair(transport: harness::Transport) -> (Serial, Pair) {
    let serial = serial();
    (serial, harness::Fixture::new().over(transport).pair())
}

/// Installs the plan of `text` through the C entry point.
fn plan(text: &str) {
    let text = CString::new(text).unwrap();
    // SAFETY: a NUL-terminated string.
    let status = unsafe { SoftNdkSetFaultPlan(text.as_ptr()) };
    assert_success!(status, "plan {text:?}");
}

/// The injected faults, oldest first, through the size handshake.
fn trace() -> Vec<(u32, u64)> {
    let mut n = 0_u32;
    // SAFETY: a zero-room query.
    let status = unsafe { SoftNdkGetFaultTrace(std::ptr::null_mut(), &raw mut n) };
    if n == 0 {
        assert_success!(status);
        return Vec::new();
    }
    assert_eq!(status, STATUS_BUFFER_TOO_SMALL);
    let mut calls = vec![SoftNdkFaultCall::default(); n as usize];
    // SAFETY: room for `n` entries.
    assert_success!(unsafe { SoftNdkGetFaultTrace(calls.as_mut_ptr(), &raw mut n) });
    calls.truncate(n as usize);
    calls.iter().map(|c| (c.kind, c.index)).collect()
}

/// Posts a receive on B so that one Send from A lands.
fn receive_on_b(pair: &Pair) {
    assert_success!(pair.b_qp.receive(100, &[]));
}

/// Arms the test's fault: a receive on B, the plan `text` installed, then
/// A's Send (context 1), which the plan's fault aims at, accepted inline.
fn expect_send_accepted_under(pair: &Pair, text: &str) {
    receive_on_b(pair);
    plan(text);
    assert_success!(pair.a_qp.send(1, &[], 0));
}

/// Both consumers got the abort's disconnect indication (X2).
fn await_both_aborts(pair: &Pair) {
    harness::await_abort(&pair.a_disconnects);
    harness::await_abort(&pair.b_disconnects);
}

/// B's receive (`receive_on_b`) completes cancelled: the connection
/// aborted under it (E5).
fn expect_b_receive_cancelled(pair: &Pair) {
    let b = pair.b_cq.wait_results(1);
    assert_eq!(b[0].status, STATUS_CANCELLED);
    assert_eq!(b[0].request_context as usize, 100);
}

/// The plan injected exactly one fault, `kind` at call `index`; then
/// injection goes off and the pair is torn down (leniently: its connection
/// may have aborted).
fn expect_only_fault_then_teardown(pair: Pair, kind: u32, index: u64) {
    assert_eq!(trace(), [(kind, index)]);
    plan("off");
    harness::teardown_lenient(pair);
}

// ----- inline failures -------------------------------------------------------

/// L9: the first create after the plan fails inline with
/// `STATUS_INSUFFICIENT_RESOURCES` and writes nothing; the next succeeds.
#[test]
fn fault_create_fails_inline_with_insufficient_resources_rule_l9() {
    let _serial = serial();
    let (addr, _) = harness::fresh_addresses();
    let adapter = harness::open_adapter(addr);
    plan("create@1");
    let mut pd: *mut NdkPd = std::ptr::null_mut();
    // SAFETY: valid arguments.
    let status =
        unsafe { (adapter.d().ndk_create_pd)(adapter.0, None, std::ptr::null_mut(), &raw mut pd) };
    assert_eq!(status, STATUS_INSUFFICIENT_RESOURCES);
    assert!(pd.is_null(), "L7: nothing handed out");
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_CREATE, 1)]);
    let pd = adapter.pd();
    pd.close();
    adapter.close();
}

/// P24, P6, D4: a post refused inline (`STATUS_NO_MORE_ENTRIES`) leaves no
/// trace, and the deferred Send before it is handed over and completes.
#[test]
fn fault_post_refused_inline_rings_earlier_deferred_rule_p24_d4() {
    let (_serial, pair) = serial_pair(harness::Transport::Local);
    receive_on_b(&pair);
    plan("post@2");
    assert_success!(pair.a_qp.send(1, &[], DEFER));
    assert_eq!(pair.a_qp.send(2, &[], 0), STATUS_NO_MORE_ENTRIES);
    let results = pair.a_cq.wait_results(1);
    assert_eq!(results.len(), 1);
    assert_success!(results[0].status);
    assert_eq!(results[0].request_context as usize, 1);
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_POST, 2)]);
    // P6: nothing for the refused post.
    std::thread::sleep(harness::SETTLE_BRIEF);
    assert!(pair.a_cq.poll(4).is_empty());
    // A refused receive, too.
    assert_success!(pair.a_qp.receive(3, &[]));
    plan("post@1");
    assert_eq!(pair.a_qp.receive(4, &[]), STATUS_NO_MORE_ENTRIES);
    plan("off");
    pair.teardown();
}

// ----- error completions, aborts ----------------------------------------------

/// The NTSTATUS a completion carries for an RNIC status (the E8 table's
/// names, spelled out here rather than taken from the provider).
fn nt(status: WcStatus) -> NtStatus {
    match status {
        WcStatus::LengthError => STATUS_DATA_OVERRUN,
        WcStatus::LocalAccessError | WcStatus::RemoteAccessError => STATUS_ACCESS_VIOLATION,
        WcStatus::InvalidRequest => STATUS_INVALID_DEVICE_REQUEST,
        WcStatus::RemoteOperationError => STATUS_REMOTE_RESOURCES,
        WcStatus::InternalError => STATUS_INTERNAL_ERROR,
        other => panic!("not an injected status: {other:?}"),
    }
}

/// A seed under which the first `completion` fault of a Send carries
/// `status`.
fn seed_for(status: WcStatus) -> u64 {
    (0..10_000)
        .find(|&seed| fault::error_status_for(seed, Opcode::Send, 1) == status)
        .expect("some seed draws every status")
}

/// E8, E5, X2 with the status drawn from the seed: `seed=S,completion@1`
/// fails A's Send with `status`, terminates the connection (both sides see
/// the abort, B's receive is cancelled) and later Sends are cancelled.
fn error_completion_with(status: WcStatus, transport: harness::Transport) {
    let pair = harness::Fixture::new().over(transport).pair();
    receive_on_b(&pair);
    let seed = seed_for(status);
    plan(&format!("seed={seed},completion@1"));
    assert_success!(pair.a_qp.send(1, &[], 0));
    let results = pair.a_cq.wait_results(1);
    assert_eq!(results[0].status, nt(status), "seed {seed}: {status:?}");
    assert_eq!(results[0].request_context as usize, 1);
    await_both_aborts(&pair);
    expect_b_receive_cancelled(&pair);
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_COMPLETION, 1)]);
    assert_success!(pair.a_qp.send(2, &[], 0));
    assert_eq!(pair.a_cq.wait_results(1)[0].status, STATUS_CANCELLED);
    plan("off");
    harness::teardown_lenient(pair);
}

/// One test per injected status and transport: `error_completion_with`.
macro_rules! error_completion_tests {
    ($($(#[$attr:meta])* $name:ident: $status:ident over $transport:ident;)*) => {$(
        $(#[$attr])*
        fn $name() {
            let _serial = serial();
            error_completion_with(WcStatus::$status, harness::Transport::$transport);
        }
    )*};
}

error_completion_tests! {
    /// E8, E5, X2: the Send completes with `STATUS_INTERNAL_ERROR`; the
    /// connection terminates: both sides get a disconnect indication and B's
    /// receive completes cancelled.
    #[test]
    fault_error_completion_terminates_the_connection_rule_e5_e8: InternalError over Local;
    /// E8: an injected error completion of a Send may carry
    /// `STATUS_DATA_OVERRUN`, chosen by the seed.
    #[test]
    fault_error_completion_data_overrun_rule_e8: LengthError over Local;
    /// E8: ... `STATUS_ACCESS_VIOLATION`.
    #[test]
    fault_error_completion_access_violation_rule_e8: LocalAccessError over Local;
    /// E8: ... `STATUS_INVALID_DEVICE_REQUEST`.
    #[test]
    fault_error_completion_invalid_device_request_rule_e8: InvalidRequest over Local;
    /// E8: ... `STATUS_REMOTE_RESOURCES`.
    #[test]
    fault_error_completion_remote_resources_rule_e8: RemoteOperationError over Local;
}

/// E8: a Bind's injected error is one of the two statuses E8 gives Bind
/// (`STATUS_INTERNAL_ERROR`, `STATUS_INVALID_DEVICE_REQUEST`), never a
/// data operation's.
#[test]
fn fault_error_completion_of_a_bind_keeps_to_binds_statuses_rule_e8() {
    let (_serial, pair) = serial_pair(harness::Transport::Local);
    let mem = harness::Region::new(&pair.a_pd, 4096, 0, harness::MR_REMOTE);
    let mw = pair.a_pd.mw();
    // A seed whose first completion fault draws INVALID_DEVICE_REQUEST for a
    // Bind (a Send under it may draw anything).
    let seed = (0..10_000)
        .find(|&s| fault::error_status_for(s, Opcode::Bind, 1) == WcStatus::InvalidRequest)
        .unwrap();
    plan(&format!("seed={seed},completion@1"));
    assert_success!(pair.a_qp.bind(
        7,
        &mem.mr,
        &mw,
        mem.remote(0),
        1024,
        harness::OP_REMOTE_READ
    ));
    let results = pair.a_cq.wait_results(1);
    assert_eq!(results[0].status, STATUS_INVALID_DEVICE_REQUEST);
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_COMPLETION, 1)]);
    plan("off");
    harness::await_abort(&pair.a_disconnects);
    mw.close();
    mem.mr.close();
    harness::teardown_lenient(pair);
}

/// The status is part of the replay: the same seed draws the same status
/// for the same call, run after run.
#[test]
fn fault_error_completion_status_replays_by_seed_rule_e8() {
    let _serial = serial();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let pair = Pair::new();
        receive_on_b(&pair);
        plan("seed=77,completion=0.5");
        let mut statuses = Vec::new();
        for i in 0..8 {
            if pair.a_qp.send(i, &[], 0) != STATUS_SUCCESS {
                break;
            }
            let status = pair.a_cq.wait_results(1)[0].status;
            statuses.push(status);
            if status != STATUS_SUCCESS {
                break;
            }
            receive_on_b(&pair);
        }
        seen.push((statuses, trace()));
        plan("off");
        harness::teardown_lenient(pair);
    }
    assert_eq!(seen[0], seen[1]);
    let (statuses, trace) = &seen[0];
    let &(_, index) = trace.first().expect("a fault at rate 0.5 within 8 calls");
    assert_eq!(
        statuses.last().copied(),
        Some(nt(fault::error_status_for(77, Opcode::Send, index)))
    );
}

// ----- over iWARP ---------------------------------------------------------------

error_completion_tests! {
    /// E8, E5, X2 over iWARP: the injected error completion fails A's Send
    /// before it goes out; A sends a Terminate (a local catastrophic error,
    /// RFC 5040 §7) and closes the stream, so B sees the abort and its
    /// receive is cancelled; A's later Sends are cancelled.
    #[test]
    fault_error_completion_over_iwarp_terminates_the_connection_rule_e5_e8: InternalError over Iwarp;
}

/// The same with another status drawn from the seed, and a request
/// completed before it: requests before the failing one complete as usual.
#[test]
fn fault_error_completion_over_iwarp_after_a_good_send_rule_e8() {
    let (_serial, pair) = serial_pair(harness::Transport::Iwarp);
    receive_on_b(&pair);
    let seed = (0..10_000)
        .find(|&s| fault::error_status_for(s, Opcode::Send, 2) == WcStatus::LengthError)
        .unwrap();
    plan(&format!("seed={seed},completion@2"));
    assert_success!(pair.a_qp.send(1, &[], 0));
    assert_success!(pair.a_cq.wait_results(1)[0].status);
    let b = pair.b_cq.wait_results(1);
    assert_success!(b[0].status);
    receive_on_b(&pair);
    assert_success!(pair.a_qp.send(2, &[], 0));
    assert_eq!(pair.a_cq.wait_results(1)[0].status, STATUS_DATA_OVERRUN);
    harness::await_abort(&pair.b_disconnects);
    assert_eq!(pair.b_cq.wait_results(1)[0].status, STATUS_CANCELLED);
    expect_only_fault_then_teardown(pair, SOFTNDK_FAULT_KIND_COMPLETION, 2);
}

/// E5 over iWARP: B's side takes A's Send as finding no receive (it has
/// one): B answers with a Terminate (DDP untagged buffer error, no buffer
/// available, RFC 5041 §7.2) and B's receive is cancelled. A's Send has
/// already completed successfully — over iWARP a Send completes once it is
/// on the stream (RFC 5040 §7 allows it; the link records it before its
/// bytes leave), as for a queue really empty — and A then sees the abort.
#[test]
fn fault_receive_queue_empty_over_iwarp_terminates_rule_e5() {
    let (_serial, pair) = serial_pair(harness::Transport::Iwarp);
    expect_send_accepted_under(&pair, "receive-empty@1");
    assert_success!(pair.a_cq.wait_results(1)[0].status, "sent");
    await_both_aborts(&pair);
    expect_b_receive_cancelled(&pair);
    expect_only_fault_then_teardown(pair, SOFTNDK_FAULT_KIND_RECEIVE_EMPTY, 1);
}

/// X2, N24, E5: the connection aborts before the Send is queued; both
/// consumers get a disconnect indication, the Send completes cancelled.
#[test]
fn fault_abort_indicates_disconnect_to_both_sides_rule_x2() {
    let (_serial, pair) = serial_pair(harness::Transport::Local);
    expect_send_accepted_under(&pair, "abort@1");
    await_both_aborts(&pair);
    assert_eq!(pair.a_cq.wait_results(1)[0].status, STATUS_CANCELLED);
    assert_eq!(pair.b_cq.wait_results(1)[0].status, STATUS_CANCELLED);
    expect_only_fault_then_teardown(pair, SOFTNDK_FAULT_KIND_ABORT, 1);
}

/// E5, E8: the Send finds B's receive queue empty and gives up with
/// `STATUS_REMOTE_RESOURCES`; B's receive is not consumed but cancelled.
#[test]
fn fault_receive_queue_empty_fails_the_send_rule_e5() {
    let (_serial, pair) = serial_pair(harness::Transport::Local);
    expect_send_accepted_under(&pair, "receive-empty@1");
    assert_eq!(pair.a_cq.wait_results(1)[0].status, STATUS_REMOTE_RESOURCES);
    harness::await_abort(&pair.b_disconnects);
    expect_b_receive_cancelled(&pair);
    expect_only_fault_then_teardown(pair, SOFTNDK_FAULT_KIND_RECEIVE_EMPTY, 1);
}

/// E10, E12, E13: the CQ overflows at the next completion: the armed CQ's
/// callback reports `STATUS_BUFFER_OVERFLOW`, the completion is not
/// reported, and the QP's posts fail inline from then on.
#[test]
fn fault_cq_overflow_is_reported_through_the_arm_rule_e10() {
    let (_serial, pair) = serial_pair(harness::Transport::Local);
    assert_success!(pair.a_qp.receive(1, &[]));
    pair.a_cq.arm(NdkCqNotifyType::ANY);
    plan("cq-overflow@1");
    pair.a_qp.flush();
    assert_eq!(pair.a_cq.1.wait(), STATUS_BUFFER_OVERFLOW);
    assert!(pair.a_cq.poll(4).is_empty(), "E10: nothing reported");
    assert_eq!(pair.a_qp.receive(2, &[]), STATUS_INTERNAL_ERROR);
    expect_only_fault_then_teardown(pair, SOFTNDK_FAULT_KIND_CQ_OVERFLOW, 1);
}

// ----- asynchronous paths ----------------------------------------------------

/// What a create completion received.
#[derive(Default)]
struct Created {
    seen: Mutex<Vec<(NtStatus, usize, ThreadId)>>,
    cv: Condvar,
}

unsafe extern "system" fn on_created(
    ctx: *mut c_void,
    status: NtStatus,
    object: *mut NdkObjectHeader,
) {
    // SAFETY: the test passes a `Created` it keeps alive.
    let created = unsafe { &*ctx.cast::<Created>() };
    created
        .seen
        .lock()
        .unwrap()
        .push((status, object as usize, std::thread::current().id()));
    created.cv.notify_all();
}

impl Created {
    fn wait(&self) -> (NtStatus, usize, ThreadId) {
        let seen = self.seen.lock().unwrap();
        let (seen, _) = self
            .cv
            .wait_timeout_while(seen, WAIT, |s| s.is_empty())
            .unwrap();
        *seen.first().expect("the create completion (L5)")
    }
}

/// L5, L6: CreatePd returns `STATUS_PENDING`, leaves the out-pointer alone
/// and calls its completion once, later and on another thread, with the
/// new PD, which works.
#[test]
fn fault_pending_create_completes_through_its_callback_rule_l5_l6() {
    let _serial = serial();
    let (addr, _) = harness::fresh_addresses();
    let adapter = harness::open_adapter(addr);
    let created = Arc::new(Created::default());
    let sentinel = 0x5E17_1E15_usize as *mut NdkPd;
    let mut out = sentinel;
    plan("pending-create@1");
    // SAFETY: valid arguments; `created` outlives the completion (waited).
    let status = unsafe {
        (adapter.d().ndk_create_pd)(
            adapter.0,
            Some(on_created),
            Arc::as_ptr(&created).cast_mut().cast(),
            &raw mut out,
        )
    };
    assert_eq!(status, STATUS_PENDING);
    let (status, object, thread) = created.wait();
    assert_success!(status);
    assert_ne!(
        thread,
        std::thread::current().id(),
        "completed later, elsewhere"
    );
    assert_eq!(out, sentinel, "L6: the out-pointer is not written");
    std::thread::sleep(harness::SETTLE_BRIEF);
    assert_eq!(created.seen.lock().unwrap().len(), 1, "L5: exactly once");
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_PENDING_CREATE, 1)]);
    plan("off");
    let pd = harness::Pd(object as *mut NdkPd);
    // SAFETY: the PD the completion handed out.
    assert_eq!(unsafe { (*pd.header()).object_type }, NdkObjectType::PD);
    let mr = pd.mr(false);
    mr.close();
    pd.close();
    adapter.close();
}

/// L18: the close returns `STATUS_PENDING` and its completion runs once.
#[test]
fn fault_pending_close_completes_through_its_callback_rule_l18() {
    let _serial = serial();
    let (addr, _) = harness::fresh_addresses();
    let adapter = harness::open_adapter(addr);
    let pd = adapter.pd();
    plan("pending-close@1");
    let (status, closed) = pd.close_async();
    assert_eq!(status, STATUS_PENDING);
    harness::finish_close((status, closed));
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_PENDING_CLOSE, 1)]);
    plan("off");
    adapter.close();
}

/// What a request completion received, and on which thread.
#[derive(Default)]
struct Completed {
    seen: Mutex<Vec<(NtStatus, ThreadId)>>,
    cv: Condvar,
}

unsafe extern "system" fn on_completed(ctx: *mut c_void, status: NtStatus) {
    // SAFETY: the test passes a `Completed` it keeps alive.
    let completed = unsafe { &*ctx.cast::<Completed>() };
    completed
        .seen
        .lock()
        .unwrap()
        .push((status, std::thread::current().id()));
    completed.cv.notify_all();
}

/// I3, L8: with every callback delayed, the Disconnect's completion still
/// comes exactly once, from another thread than the one that completed it.
#[test]
fn fault_delayed_callback_arrives_later_from_another_thread_rule_i3() {
    let (_serial, pair) = serial_pair(harness::Transport::Local);
    let completed = Arc::new(Completed::default());
    plan("delay=1");
    // SAFETY: a live connector; `completed` outlives the completion.
    let status = unsafe {
        (pair.a_conn.d().ndk_disconnect)(
            pair.a_conn.0,
            Some(on_completed),
            Arc::as_ptr(&completed).cast_mut().cast(),
        )
    };
    let (b_status, b_done) = pair.b_conn.disconnect();
    let _ = b_done.outcome(b_status);
    if status == STATUS_PENDING {
        let seen = completed.seen.lock().unwrap();
        let (seen, _) = completed
            .cv
            .wait_timeout_while(seen, WAIT, |s| s.is_empty())
            .unwrap();
        assert_eq!(seen.len(), 1, "L8");
        assert_success!(seen[0].0);
        assert_ne!(seen[0].1, std::thread::current().id());
    } else {
        assert_success!(status);
    }
    assert!(
        trace()
            .iter()
            .all(|&(kind, _)| kind == SOFTNDK_FAULT_KIND_DELAY)
            && !trace().is_empty(),
        "{:?}",
        trace()
    );
    plan("off");
    harness::teardown_lenient(pair);
}

// ----- plans, replay -----------------------------------------------------------

/// The C structure: a bad size, rate or kind is refused; a schedule entry
/// fires.
#[test]
fn fault_structure_is_validated_and_installs_a_schedule() {
    let _serial = serial();
    let mut faults = SoftNdkFaults::NEVER;
    faults.size = 8;
    // SAFETY: a readable structure.
    let status = unsafe { SoftNdkSetFaults(&raw const faults) };
    assert_eq!(status, STATUS_INVALID_PARAMETER);
    faults = SoftNdkFaults::NEVER;
    faults.rates[0] = 1_000_001;
    // SAFETY: as above.
    let status = unsafe { SoftNdkSetFaults(&raw const faults) };
    assert_eq!(status, STATUS_INVALID_PARAMETER);
    faults = SoftNdkFaults::NEVER;
    faults.rates[15] = 1;
    // SAFETY: as above.
    let status = unsafe { SoftNdkSetFaults(&raw const faults) };
    assert_eq!(status, STATUS_INVALID_PARAMETER);
    faults = SoftNdkFaults::NEVER;
    faults.schedule_count = 1;
    faults.schedule[0] = SoftNdkFaultCall {
        kind: 99,
        reserved: 0,
        index: 1,
    };
    // SAFETY: as above.
    let status = unsafe { SoftNdkSetFaults(&raw const faults) };
    assert_eq!(status, STATUS_INVALID_PARAMETER);
    let bad = CString::new("post@0").unwrap();
    // SAFETY: a NUL-terminated string.
    let status = unsafe { SoftNdkSetFaultPlan(bad.as_ptr()) };
    assert_eq!(status, STATUS_INVALID_PARAMETER);

    let (addr, _) = harness::fresh_addresses();
    let adapter = harness::open_adapter(addr);
    faults.schedule[0] = SoftNdkFaultCall {
        kind: SOFTNDK_FAULT_KIND_CREATE,
        reserved: 0,
        index: 2,
    };
    // SAFETY: as above.
    assert_success!(unsafe { SoftNdkSetFaults(&raw const faults) });
    let first = adapter.pd();
    let mut pd: *mut NdkPd = std::ptr::null_mut();
    // SAFETY: valid arguments.
    let status =
        unsafe { (adapter.d().ndk_create_pd)(adapter.0, None, std::ptr::null_mut(), &raw mut pd) };
    assert_eq!(status, STATUS_INSUFFICIENT_RESOURCES);
    assert_eq!(trace(), [(SOFTNDK_FAULT_KIND_CREATE, 2)]);
    // SAFETY: null turns it off.
    assert_success!(unsafe { SoftNdkSetFaults(std::ptr::null()) });
    first.close();
    adapter.close();
}

/// One seeded run: receives posted on an unconnected QP (P8) with 30 % of
/// posts refused; returns the statuses and the trace.
fn seeded_run(seed: u64) -> (Vec<NtStatus>, Vec<(u32, u64)>) {
    let (addr, _) = harness::fresh_addresses();
    let adapter = harness::open_adapter(addr);
    let cq = adapter.cq(256);
    let pd = adapter.pd();
    let qp = pd.qp(&cq, &cq, 0);
    plan(&format!("seed={seed},post=0.3"));
    let statuses: Vec<NtStatus> = (0..40).map(|i| qp.receive(i, &[])).collect();
    let trace = trace();
    plan("off");
    qp.flush();
    let accepted = statuses.iter().filter(|&&s| s == STATUS_SUCCESS).count();
    assert_eq!(cq.wait_results(accepted).len(), accepted, "P6: one each");
    qp.close();
    cq.close();
    pd.close();
    adapter.close();
    (statuses, trace)
}

/// The same seed replays the same faults; another seed injects others.
#[test]
fn fault_same_seed_replays_the_same_trace() {
    let _serial = serial();
    let (statuses, first) = seeded_run(1234);
    let (again_statuses, again) = seeded_run(1234);
    assert_eq!(first, again, "same seed, same faults");
    assert_eq!(statuses, again_statuses);
    assert!(!first.is_empty() && first.len() < 40, "{first:?}");
    for (i, status) in statuses.iter().enumerate() {
        let injected = first.contains(&(SOFTNDK_FAULT_KIND_POST, i as u64 + 1));
        let expected = if injected {
            STATUS_NO_MORE_ENTRIES
        } else {
            STATUS_SUCCESS
        };
        assert_eq!(*status, expected, "post {}", i + 1);
    }
    let (_, other) = seeded_run(4321);
    assert_ne!(first, other, "another seed, other faults");
}
