//! The NDK provider: SoftNDK's RNIC behind the NDKPI 1.2 dispatch tables.
//!
//! Each NDK object is an [`object::Object`] whose first bytes are the C
//! shape the consumer sees (header and dispatch pointer) and whose tail is
//! the provider's state over the RNIC. Every dispatch slot is an
//! `extern "system"` thunk written by `dispatch::ndk_table!` from one line
//! per slot: it enters the object and calls the slot's method, which checks
//! the consumer's other pointers, turns the call into an `rnic` call and the
//! outcome into an NTSTATUS (one mapping, in [`status`]).
//!
//! What the provider guarantees, with the rules of `../shared/spec/rules.md`:
//! * every slot of every table is a working function (L1);
//! * creates complete inline (L7), so create completions are never called;
//!   requests that can wait (Connect, Accept, CompleteConnect, Disconnect,
//!   DeregisterMr under DMA) return `STATUS_PENDING` and call their request
//!   completion exactly once (L8); the others complete inline;
//! * close never fails and respects antecedent / successor order (L18–L27,
//!   see [`object`]);
//! * callbacks run with no provider lock held, serialized per object (I4).
//!
//! The adapter is opened and closed outside the tables: by the driver's
//! NDIS handlers in the kernel, by `SoftNdkOpenAdapter` /
//! `SoftNdkCloseAdapter` in host mode ([`host`]).

use core::ffi::c_void;

use crate::abi::{
    Guid, Mdl, NdkExtensionInterface, NdkObjectHeader, NdkVersion, NtStatus, STATUS_SUCCESS,
};

pub mod adapter;
pub mod checked;
pub mod cm;
pub mod cq;
mod dispatch;
pub mod fault;
pub mod iface;
pub mod mr;
#[cfg(not(loom))]
pub mod ndis;
pub mod object;
pub mod pd;
pub mod qp;
pub mod status;
#[cfg(test)]
#[cfg(not(loom))]
pub(crate) mod testing;

#[cfg(not(target_os = "windows"))]
pub mod host;

/// Host mode's test hook into every dispatch thunk (`tests/close_race.rs`).
#[cfg(not(target_os = "windows"))]
pub use dispatch::hook;

/// `NdkQueryExtension`, slot 1 of every table (slot 0 of the adapter's): no
/// extension interface is implemented (L29).
unsafe extern "system" fn query_extension(
    _object: *mut NdkObjectHeader,
    id: *const Guid,
    _version: NdkVersion,
    interface: *mut NdkExtensionInterface,
) -> NtStatus {
    adapter::no_extension(id, interface)
}

/// The consumer's create completion and its context (L5).
type Completion = (Option<crate::abi::NdkFnCreateCompletion>, *mut c_void);

/// Every create slot's end, said once (L5–L7; `dispatch::ndk_table!` calls
/// it after refusing a null `out` and running the create): hands what was
/// made to the consumer ([`fault::hand_out`]: through `out`, or later through
/// the completion when fault injection makes the create pend) or returns
/// the create's error.
///
/// # Safety
/// `out` is non-null and valid for a pointer-sized write; the completion and
/// its context are the consumer's for this create.
unsafe fn created<T>(
    out: *mut *mut T,
    (completion, context): Completion,
    made: Result<*mut T, NtStatus>,
) -> NtStatus {
    match made {
        // SAFETY: the caller's contract.
        Ok(object) => unsafe { fault::hand_out(out.cast(), object.cast(), completion, context) },
        Err(status) => status,
    }
}

/// Writes a created object to the consumer's out-pointer (L7).
///
/// # Safety
/// `out` is non-null and valid for a pointer-sized write.
unsafe fn write_out(out: *mut *mut c_void, object: *mut c_void) -> NtStatus {
    // SAFETY: the caller's contract.
    unsafe { out.write_unaligned(object) };
    STATUS_SUCCESS
}

/// The memory an MDL chain describes, `length` bytes from its first byte,
/// as spans: one per MDL, merged where the mappings continue one another
/// (M2, M28; `mdl::map_chain`).
///
/// # Errors
/// `STATUS_INVALID_PARAMETER` when the chain is not virtually contiguous over
/// `length` bytes (or shorter, or corrupt); `STATUS_INSUFFICIENT_RESOURCES`
/// when an MDL cannot be mapped or the chain has more than `mdl::MAX_SPANS`
/// spans.
///
/// # Safety
/// `mdl` is null or a locked MDL chain describing at least `length` bytes
/// that stays locked for as long as the spans are used (M3).
unsafe fn map_mdl(
    mdl: *mut Mdl,
    length: usize,
) -> Result<alloc::vec::Vec<crate::rnic::memory::Span>, NtStatus> {
    // SAFETY: the caller's contract.
    unsafe { mdl::map_chain(mdl, length) }
}

mod mdl;
