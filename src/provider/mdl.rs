//! MDL chains → one contiguous span (rules M2, M4, M28).
//!
//! An MDL's bytes are reached the way `MmGetSystemAddressForMdlSafe` reaches
//! them: `MappedSystemVa` when `MdlFlags` says the MDL is mapped to system
//! address space or describes non-paged pool, otherwise (host mode, where the
//! "MDL" describes the caller's own buffer) `StartVa + ByteOffset`. A chain is
//! accepted only when each MDL's bytes follow the previous one's in that
//! address space, so the registration is one virtually contiguous span.

use crate::abi::Mdl;
use crate::rnic::memory::Span;

/// `MDL_MAPPED_TO_SYSTEM_VA`.
const MDL_MAPPED_TO_SYSTEM_VA: i16 = 0x0001;
/// `MDL_SOURCE_IS_NONPAGED_POOL`.
const MDL_SOURCE_IS_NONPAGED_POOL: i16 = 0x0004;
/// Longest chain followed: a bound on the work per call.
const MAX_CHAIN: usize = 1024;

/// The address of an MDL's first byte and its byte count.
fn describe(mdl: &Mdl) -> Option<(usize, usize)> {
    let base = if mdl.mdl_flags & (MDL_MAPPED_TO_SYSTEM_VA | MDL_SOURCE_IS_NONPAGED_POOL) != 0 {
        mdl.mapped_system_va as usize
    } else {
        (mdl.start_va as usize).checked_add(mdl.byte_offset as usize)?
    };
    (base != 0).then_some((base, mdl.byte_count as usize))
}

/// One span for the first `length` bytes of the chain at `mdl`, or `None`
/// when the chain is shorter, not contiguous, or malformed.
///
/// # Safety
/// `mdl` heads a chain of valid MDLs (linked by `Next`) describing locked
/// memory that stays locked and mapped while the span is used (M3).
pub unsafe fn map_chain(mdl: *const Mdl, length: usize) -> Option<Span> {
    // SAFETY: the caller's contract: a valid MDL.
    let first = unsafe { mdl.as_ref() }?;
    let (start, mut covered) = describe(first)?;
    let mut next = first.next.cast_const();
    let mut links = 0;
    while covered < length {
        links += 1;
        if links > MAX_CHAIN {
            return None;
        }
        // SAFETY: `Next` of a valid MDL is null or the next valid MDL.
        let link = unsafe { next.as_ref() }?;
        let (base, count) = describe(link)?;
        // M2: the chain must continue exactly where the bytes so far end.
        if base != start.checked_add(covered)? {
            return None;
        }
        covered = covered.checked_add(count)?;
        next = link.next.cast_const();
    }
    // SAFETY: the chain describes at least `length` contiguous, locked bytes
    // from `start` (checked above; locking is the caller's contract).
    unsafe { Span::new(start, length) }
}
