//! Fault injection in the provider: the sites whose outcome the NDK layer
//! decides (pending creates and closes, delayed callbacks), and the C
//! structure's mapping onto the plan.
//!
//! The decisions — plans, the counter-based draw, the schedule, the trace —
//! are plain Rust in [`crate::rnic::fault`], which also hooks the RNIC's
//! own sites (posts, completions, aborts, CQ overflow, an empty receive
//! queue). Here are the provider's sites, each reached by one line in its
//! caller:
//!
//! * `hand_out` (every create's out-pointer): a pending create, L5–L7;
//! * `close` (the consumer's `NdkCloseObject`): a pending close, L18;
//! * `Object::deliver` (request completions and event callbacks): a delayed
//!   callback, I3 (the serializer keeps order and C5-like no-overlap);
//! * `Object::create` (every object): an inline create failure, L9.
//!
//! What is delayed runs from a deferred routine (a DPC in the kernel, a
//! worker thread in host mode): the consumer's thread is never blocked.
//! Creates and closes are not the per-request hot path, so the routine's
//! one allocation there is fine; a failed allocation is not possible to
//! report through `Deferred::new`, as for every other DPC of the provider.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering};

use super::object::{Holder, Kind as ObjectKind, Object};
use super::write_out;
use crate::abi::{
    NdkFnCloseCompletion, NdkFnCreateCompletion, NdkObjectHeader, NtStatus,
    STATUS_INVALID_PARAMETER, STATUS_PENDING, STATUS_SUCCESS, SoftNdkFaults,
};
use crate::kernel::deferred::{Deferred, DeferredRoutine};
use crate::kernel::sync::Arc;
use crate::rnic::fault::{self, KINDS, MAX_SCHEDULED, MILLION};
pub use crate::rnic::fault::{Kind, Plan};

/// Runs `routine` once, soon, on another thread (a DPC in the kernel).
pub(super) fn later<R: DeferredRoutine>(routine: R) {
    // The queue holds its own reference until the routine has run.
    let _ = Deferred::new(routine).schedule();
}

/// Whether this callback is delayed ([`Kind::Delay`]).
#[inline]
pub(super) fn hit_delay() -> bool {
    fault::hit(Kind::Delay)
}

/// A create completion due later (L5).
struct CreateLater {
    completion: NdkFnCreateCompletion,
    context: usize,
    object: usize,
    done: AtomicBool,
}

impl DeferredRoutine for CreateLater {
    fn run(&self) {
        if self.done.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: the consumer's create completion and context, given for
        // the create that returned STATUS_PENDING; called once (L5), with
        // no provider lock held (I4), at up to DISPATCH_LEVEL (I3); the
        // object is alive (its consumer reference is taken at creation and
        // only the consumer's close, after this, gives it back).
        unsafe {
            (self.completion)(
                self.context as *mut c_void,
                STATUS_SUCCESS,
                self.object as *mut NdkObjectHeader,
            );
        };
    }
}

/// Hands a created object to the consumer: through `out` (L7), or — when
/// the create has a completion and [`Kind::PendingCreate`] fires — by
/// returning `STATUS_PENDING` and calling `completion` later with the
/// object, never writing `out` (L5, L6).
///
/// # Safety
/// `out` is non-null and valid for a pointer-sized write; `completion` and
/// `context` are the consumer's for this create.
pub(super) unsafe fn hand_out(
    out: *mut *mut c_void,
    object: *mut c_void,
    completion: Option<NdkFnCreateCompletion>,
    context: *mut c_void,
) -> NtStatus {
    if let Some(completion) = completion.filter(|_| fault::hit(Kind::PendingCreate)) {
        later(CreateLater {
            completion,
            context: context as usize,
            object: object as usize,
            done: AtomicBool::new(false),
        });
        return STATUS_PENDING;
    }
    // SAFETY: the caller's contract.
    unsafe { write_out(out, object) }
}

/// Gives back a hold later: a pending close completes then.
struct ReleaseLater(Arc<dyn Holder>);

impl DeferredRoutine for ReleaseLater {
    fn run(&self) {
        self.0.release();
    }
}

/// The consumer's close of `object`: as [`Object::close`], and when the
/// close has a completion and [`Kind::PendingClose`] fires, it is kept
/// pending by a hold given back later from another thread, so that it
/// returns `STATUS_PENDING` and completes through the callback (L18, L21).
pub(super) fn close<T: ObjectKind>(
    object: &Object<T>,
    callback: Option<NdkFnCloseCompletion>,
    context: usize,
) -> NtStatus {
    let held = callback.is_some() && object.is_open() && fault::hit(Kind::PendingClose);
    if held {
        object.hold();
    }
    let status = object.close(callback, context);
    if held {
        if status == STATUS_PENDING {
            later(ReleaseLater(object.arc()));
        } else {
            // Already closed by someone else (L19 broken): ours only.
            object.release();
        }
    }
    status
}

/// The plan a `SOFTNDK_FAULTS` structure describes.
///
/// # Errors
/// `STATUS_INVALID_PARAMETER` for a wrong `Size`, a rate above a million, a
/// rate or schedule entry naming a kind that does not exist, a schedule
/// index of 0, or a count above the schedule's room.
pub fn plan_from_c(faults: &SoftNdkFaults) -> Result<Plan, NtStatus> {
    let size = u32::try_from(core::mem::size_of::<SoftNdkFaults>()).unwrap_or(u32::MAX);
    if faults.size != size || faults.schedule_count as usize > MAX_SCHEDULED {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let mut plan = Plan {
        seed: faults.seed,
        ..Plan::NEVER
    };
    for (i, &rate) in faults.rates.iter().enumerate() {
        match plan.rates.get_mut(i) {
            Some(slot) if rate <= MILLION => *slot = rate,
            None if rate == 0 => {}
            _ => return Err(STATUS_INVALID_PARAMETER),
        }
    }
    let count = faults.schedule_count as usize;
    for call in faults.schedule.iter().take(count) {
        let kind = fault::Kind::from_index(call.kind as usize).ok_or(STATUS_INVALID_PARAMETER)?;
        plan.schedule(kind, call.index)
            .map_err(|_| STATUS_INVALID_PARAMETER)?;
    }
    Ok(plan)
}

const _: () = assert!(KINDS <= crate::abi::SOFTNDK_FAULT_KINDS);
const _: () = assert!(MAX_SCHEDULED == crate::abi::SOFTNDK_FAULT_SCHEDULE);
