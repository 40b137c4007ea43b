//! `NDK_CQ` over the RNIC's completion queue (rules C1–C6, K1–K10, E9–E14,
//! L23).

use core::ffi::c_void;

use super::adapter::Adapter;
use super::checked::{self, Breach};
use super::dispatch::ndk_table;
use super::object::{Holder, Kind, Object, Slot as NdkSlot};
use super::status;
use crate::abi::{
    NdkCq, NdkCqDispatch, NdkCqNotifyType, NdkFnCqNotificationCallback, NdkFnRequestCompletion,
    NdkObjectType, NdkResult, NdkResultEx, NtStatus, STATUS_BUFFER_OVERFLOW,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INTERNAL_ERROR, STATUS_INVALID_PARAMETER,
    STATUS_NOT_SUPPORTED, STATUS_SUCCESS,
};
use crate::kernel::sync::atomic::Ordering;
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::cq::{self as rcq, ArmType, CloseState, CqEvent, CqNotify, ResizeError};
use crate::rnic::device::{Device, ObjectKind, Slot};
use crate::rnic::{Completion, Opcode, WcStatus};
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as CoreOrdering};

/// The provider state of an `NDK_CQ`.
pub struct Cq {
    /// The RNIC completion queue.
    pub(super) rnic: Arc<rcq::Cq>,
    notifier: Arc<Notifier>,
    /// The CQ's reservation on its NIC, which also names that NIC.
    slot: Slot,
    /// Checked mode (C1): the slot of the reaping or arming call running
    /// on the CQ, else null.
    reaper: AtomicPtr<NdkSlot>,
    /// Checked mode (C4): arms made from the notification callback on a CQ
    /// holding results, in a row, with no reap since; written only in
    /// checked mode.
    unreaped_arms: AtomicUsize,
}

impl Cq {
    /// The emulated NIC the CQ lives on.
    pub const fn device(&self) -> &Arc<crate::rnic::device::Device> {
        self.slot.device()
    }
}

/// Bridges RNIC notifications to the consumer's callback.
struct Notifier {
    callback: NdkFnCqNotificationCallback,
    context: usize,
    device: Arc<Device>,
    object: SpinLock<Weak<Object<Cq>>>,
    /// Checked mode (C1): notification callbacks running now, counted only
    /// in checked mode; calls made inside one are not watched (they may be
    /// nested in the ArmCq that delivered it, on the same thread).
    delivering: AtomicUsize,
}

impl Notifier {
    /// I3 for the notification callback, started at `started`.
    #[inline(never)]
    fn watch_callback(&self, started: u64) {
        let object = self.object.lock().upgrade();
        let at = object.as_ref().map_or(0, |o| o.as_ptr() as usize);
        let callback = &NdkSlot("the CQ notification callback");
        checked::callback_returned(started, callback, NdkObjectType::CQ, at);
    }
}

impl CqNotify for Notifier {
    fn notify(&self, event: CqEvent) {
        let status = match event {
            CqEvent::Completion => STATUS_SUCCESS,
            // E10.
            CqEvent::Overflow => STATUS_BUFFER_OVERFLOW,
            // E11.
            CqEvent::Fatal => STATUS_INTERNAL_ERROR,
        };
        if status != STATUS_SUCCESS {
            self.device
                .counters
                .cq_error
                .fetch_add(1, Ordering::Relaxed);
        }
        let watch = checked::checked();
        if watch {
            self.delivering.fetch_add(1, CoreOrdering::Relaxed);
        }
        // SAFETY: the consumer's notification callback and context from
        // NdkCreateCq; the RNIC CQ calls this with no lock held and never
        // twice at once (C5).
        let started = checked::callback_starts();
        // SAFETY: as above.
        unsafe { (self.callback)(self.context as *mut c_void, status) };
        if watch {
            self.delivering.fetch_sub(1, CoreOrdering::Relaxed);
            self.watch_callback(started);
        }
    }

    fn close_complete(&self) {
        // L23: the callback that kept the close pending has returned.
        let object = self.object.lock().upgrade();
        if let Some(object) = object {
            object.release();
        }
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static DISPATCH: NdkCqDispatch for Cq (CQ) at NdkCq,
        close ndk_close_cq = "NdkCloseCq";
    ndk_resize_cq = "NdkResizeCq" => resize(Resize { depth: u32,
        _completion: Option<NdkFnRequestCompletion>, _context: *mut c_void }) -> NtStatus;
    ndk_arm_cq = "NdkArmCq" => arm(notify_type: NdkCqNotifyType);
    ndk_get_cq_results = "NdkGetCqResults" => get_results(results: *mut NdkResult, n: u32) -> u32;
    ndk_control_cq_interrupt_moderation = "NdkControlCqInterruptModeration" => control_moderation(
        interval: u32, count: u32) -> NtStatus;
    ndk_get_cq_results_ex = "NdkGetCqResultsEx" => get_results_ex(results: *mut NdkResultEx, n: u32
    ) -> u32;
}

impl Kind for Cq {
    fn begin_close(object: &Object<Self>) {
        // L21/L23: a running notification keeps the close pending.
        object.hold_through(|| object.inner.rnic.close() == CloseState::Done);
    }
}

/// Creates a CQ on `adapter` (L12; `NdkCreateCq`, `adapter::create_cq`).
pub(super) fn create(
    adapter: &Object<Adapter>,
    depth: u32,
    callback: NdkFnCqNotificationCallback,
    context: usize,
) -> Result<*mut NdkCq, NtStatus> {
    let device = adapter.inner.device();
    if depth == 0 || depth > device.limits().max_cq_depth {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let slot = device.reserve(ObjectKind::Cq).map_err(status::resource)?;
    let notifier = Arc::new(Notifier {
        callback,
        context,
        device: Arc::clone(device),
        object: SpinLock::new(Weak::new()),
        delivering: AtomicUsize::new(0),
    });
    let rnic = rcq::Cq::new(depth, Arc::clone(&notifier) as Arc<dyn CqNotify>)
        .map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?;
    let inner = Cq {
        rnic: Arc::new(rnic),
        notifier: Arc::clone(&notifier),
        slot,
        reaper: AtomicPtr::new(core::ptr::null_mut()),
        unreaped_arms: AtomicUsize::new(0),
    };
    let object = Object::create_under(adapter, inner)?;
    *object.inner.notifier.object.lock() = Arc::downgrade(&object);
    Ok(object.as_ptr().cast())
}

/// `NdkResizeCq` (K2, K4): inline.
unsafe fn resize(cq: &Object<Cq>, args: Resize) -> NtStatus {
    let depth = args.depth;
    let max = cq.inner.notifier.device.limits().max_cq_depth;
    if depth > max {
        return STATUS_INVALID_PARAMETER;
    }
    match cq.inner.rnic.resize(depth) {
        Ok(()) => STATUS_SUCCESS,
        Err(ResizeError::BelowCount) => STATUS_BUFFER_OVERFLOW,
        Err(ResizeError::ZeroDepth) => STATUS_INVALID_PARAMETER,
        Err(ResizeError::InError) => STATUS_INTERNAL_ERROR,
        Err(ResizeError::NoMemory) => STATUS_INSUFFICIENT_RESOURCES,
    }
}

/// C1 in checked mode: a reaping or arming call claims the CQ for its
/// duration; one that finds it claimed by another is reported, naming both.
/// Off, one load and a branch.
#[inline]
fn serialized<'a>(cq: &'a Object<Cq>, slot: &'static NdkSlot) -> Option<Serialized<'a>> {
    if checked::checked() {
        claim(cq, slot)
    } else {
        None
    }
}

#[inline(never)]
fn claim<'a>(cq: &'a Object<Cq>, slot: &'static NdkSlot) -> Option<Serialized<'a>> {
    if cq.inner.notifier.delivering.load(CoreOrdering::Relaxed) != 0 {
        return None;
    }
    let ours = checked::slot_ptr(slot);
    match cq.inner.reaper.compare_exchange(
        core::ptr::null_mut(),
        ours,
        CoreOrdering::Acquire,
        CoreOrdering::Relaxed,
    ) {
        Ok(_) => {
            #[cfg(not(target_os = "windows"))]
            super::host::checked_pause(cq.as_ptr() as usize);
            Some(Serialized(&cq.inner.reaper))
        }
        Err(other) => {
            checked::report(
                Breach::C1,
                NdkObjectType::CQ,
                cq.as_ptr() as usize,
                slot,
                other,
            );
            None
        }
    }
}

/// A CQ claimed by a reaping or arming call (C1), released when dropped.
struct Serialized<'a>(&'a AtomicPtr<NdkSlot>);

impl Drop for Serialized<'_> {
    fn drop(&mut self) {
        self.0.store(core::ptr::null_mut(), CoreOrdering::Release);
    }
}

/// C4 in checked mode: an arm made from the CQ's notification callback
/// while the CQ holds results counts one "unreaped arm"; a reap resets the
/// count. The second in a row is reported: the callback re-arms without
/// draining, again, and a provider that satisfies such an arm at once (C4
/// allows it) would call it back for ever. An arm without draining once,
/// or from outside the callback, is legal and not counted.
#[inline]
fn watch_arm(cq: &Object<Cq>) {
    if checked::checked()
        && cq.inner.notifier.delivering.load(CoreOrdering::Relaxed) != 0
        && !cq.inner.rnic.is_empty()
        && cq.inner.unreaped_arms.fetch_add(1, CoreOrdering::Relaxed) == 1
    {
        let callback = checked::slot_ptr(&NdkSlot("its notification callback"));
        let at = cq.as_ptr() as usize;
        checked::report(
            Breach::C4,
            NdkObjectType::CQ,
            at,
            &NdkSlot("NdkArmCq"),
            callback,
        );
    }
}

/// C4: a reap (whatever it finds) ends a run of unreaped arms.
#[inline]
fn watch_reap(cq: &Object<Cq>) {
    if checked::checked() {
        cq.inner.unreaped_arms.store(0, CoreOrdering::Relaxed);
    }
}

/// Whether a notification callback of `cq` is running (counted in checked
/// mode only).
pub(super) fn delivering(cq: &Object<Cq>) -> bool {
    cq.inner.notifier.delivering.load(CoreOrdering::Relaxed) != 0
}

/// `NdkArmCq` (C3–C6). An unknown arm type is ignored.
unsafe fn arm(cq: &Object<Cq>, notify_type: NdkCqNotifyType) {
    let _serialized = serialized(cq, &NdkSlot("NdkArmCq"));
    watch_arm(cq);
    let arm = match notify_type {
        NdkCqNotifyType::ERRORS => ArmType::Errors,
        NdkCqNotifyType::ANY => ArmType::Any,
        NdkCqNotifyType::SOLICITED => ArmType::Solicited,
        _ => return,
    };
    cq.inner.rnic.arm(arm);
}

/// Entries reaped per pass, on the stack.
const BATCH: usize = 16;

/// Removes up to `n` completions into the consumer's array `results`, as
/// `result` makes each entry; returns how many. Null `results`: none.
///
/// # Safety
/// `results` is null or has room for `n` entries (the consumer's contract).
unsafe fn reap<T>(
    cq: &Object<Cq>,
    results: *mut T,
    n: u32,
    result: impl Fn(&Completion) -> T,
) -> u32 {
    // An empty CQ (read without its lock) answers before the batch below
    // is even built: a busy-polling consumer makes most calls on an empty CQ.
    if results.is_null() || cq.inner.rnic.is_empty() {
        return 0;
    }
    let mut batch = [Completion::new(WcStatus::Success, Opcode::Send, 0, 0); BATCH];
    let wanted = n as usize;
    let mut done = 0_usize;
    while done < wanted {
        let room = (wanted - done).min(BATCH);
        let Some(slice) = batch.get_mut(..room) else {
            break;
        };
        let got = cq.inner.rnic.poll(slice);
        for (i, completion) in slice.iter().take(got).enumerate() {
            let entry = result(completion);
            // SAFETY: `results` has room for `n` entries (the caller's
            // contract) and `done + i < n`.
            unsafe { results.wrapping_add(done + i).write_unaligned(entry) };
        }
        done += got;
        if got < room {
            break;
        }
    }
    u32::try_from(done).unwrap_or(n)
}

/// `NDK_RESULT` of a completion.
fn result(c: &Completion) -> NdkResult {
    NdkResult {
        status: status::wc_status(c.status),
        bytes_transferred: c.bytes,
        qp_context: c.qp_context as *mut c_void,
        request_context: c.request_context as *mut c_void,
    }
}

/// `NdkGetCqResults` (K1, C2: ReceiveAndInvalidate completions appear here
/// too, as receives).
unsafe fn get_results(cq: &Object<Cq>, results: *mut NdkResult, n: u32) -> u32 {
    let _serialized = serialized(cq, &NdkSlot("NdkGetCqResults"));
    watch_reap(cq);
    // SAFETY: the consumer's array of `n` entries.
    unsafe { reap(cq, results, n, result) }
}

/// `NdkGetCqResultsEx` (K1, C2, P22, E14).
unsafe fn get_results_ex(cq: &Object<Cq>, results: *mut NdkResultEx, n: u32) -> u32 {
    let _serialized = serialized(cq, &NdkSlot("NdkGetCqResultsEx"));
    watch_reap(cq);
    let result_ex = |c: &Completion| {
        let NdkResult {
            status,
            bytes_transferred,
            qp_context,
            request_context,
        } = result(c);
        NdkResultEx {
            status,
            bytes_transferred,
            qp_context,
            request_context,
            type_: status::operation(c.opcode),
            // E14: 0 where NDKPI 2.1 consumers read ProviderErrorCode.
            provider_error_code: 0,
            type_specific_completion_output: if c.opcode == Opcode::ReceiveAndInvalidate {
                c.invalidated_key as usize
            } else {
                0
            },
        }
    };
    // SAFETY: the consumer's array of `n` entries.
    unsafe { reap(cq, results, n, result_ex) }
}

/// `NdkControlCqInterruptModeration` (K8): the adapter does not report
/// `CQ_INTERRUPT_MODERATION_SUPPORTED` — a software CQ raises no interrupts to
/// moderate — so the call exists and answers `STATUS_NOT_SUPPORTED`. No CQ
/// is ever moderated (K5), so the rules for settings that take effect (K6's
/// invalid mix, K7's newest settings) have nothing to act on.
fn control_moderation(_cq: &Object<Cq>, _interval: u32, _count: u32) -> NtStatus {
    STATUS_NOT_SUPPORTED
}
