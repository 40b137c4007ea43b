//! MDL chains → one contiguous span (rules M2, M4, M28).
//!
//! Each MDL's bytes are reached through `kernel::mdl::system_span`, which does
//! what `MmGetSystemAddressForMdlSafe` does (in the kernel a non-executable,
//! normal-priority mapping; in host mode the caller's own buffer). A chain is
//! accepted only when each MDL's bytes follow the previous one's in that
//! address space, so that the registration is one contiguous span. In the
//! kernel, separately mapped MDLs are rarely adjacent, so a multi-MDL chain
//! is usually refused with `STATUS_INVALID_PARAMETER` (documented in
//! `docs/driver.md`); single-MDL registrations, what NDK consumers use, work.

use core::ptr::NonNull;

use crate::abi::Mdl;
use crate::kernel::mdl::{MAX_CHAIN, system_span};
use crate::rnic::memory::Span;

/// One span for the first `length` bytes of the chain at `mdl`, or `None`
/// when the chain is shorter, not contiguous, cannot be mapped, or is
/// malformed.
///
/// # Safety
/// `mdl` heads a chain of valid MDLs (linked by `Next`) describing locked
/// memory that stays locked and mapped while the span is used (M3).
pub unsafe fn map_chain(mdl: *const Mdl, length: usize) -> Option<Span> {
    let mut next = NonNull::new(mdl.cast_mut());
    let mut start = None;
    let mut covered = 0_usize;
    let mut links = 0;
    while covered < length {
        links += 1;
        if links > MAX_CHAIN {
            return None;
        }
        let link = next?;
        // SAFETY: a valid MDL of the chain (the caller's contract).
        let span = unsafe { system_span(link) }.ok()?;
        let addr = span.addr.as_ptr() as usize;
        let base = *start.get_or_insert(addr);
        // M2: the chain must continue exactly where the bytes so far end.
        if addr != base.checked_add(covered)? {
            return None;
        }
        covered = covered.checked_add(span.len)?;
        // SAFETY: as above; `Next` of a valid MDL is null or the next MDL.
        next = NonNull::new(unsafe { (*link.as_ptr()).next });
    }
    let start = start?;
    // SAFETY: the chain describes at least `length` contiguous, locked,
    // mapped bytes from `start` (checked above; locking is the caller's
    // contract).
    unsafe { Span::new(start, length) }
}
