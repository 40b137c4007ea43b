//! MDL chains → the spans of a region or a LAM (rules M2, M4, M28).
//!
//! Each MDL's bytes are reached through `kernel::mdl::system_span`, which does
//! what `MmGetSystemAddressForMdlSafe` does (in the kernel a non-executable,
//! normal-priority mapping; in host mode the caller's own buffer). Every MDL
//! is mapped on its own, wherever the Memory Manager places the mapping, so a
//! chain becomes a list of spans, one per MDL, merged where one mapping
//! happens to continue the previous one ([`map_chain`]).
//!
//! "Virtually contiguous" (M2, M28) is a property of the chain's *virtual
//! addresses* (`MmGetMdlVirtualAddress`, the index of M4): each MDL must start
//! where the previous one's `ByteCount` bytes end. That is checked over the
//! first `Length` bytes; where the mappings lie does not matter.
//!
//! A region is at most [`MAX_SPANS`] spans: a longer chain (after merging) is
//! refused with `STATUS_INSUFFICIENT_RESOURCES`. A chain longer than
//! `kernel::mdl::MAX_CHAIN` links is treated as corrupt (a cycle):
//! `STATUS_INVALID_PARAMETER`.
//!
//! `BuildLam` lists the pages of those spans ([`LamPlan`]): the first span's
//! pages from the one holding its first byte, then each next span's pages.
//! Where an MDL boundary falls inside a page, both MDLs describe that one page
//! (the chain is virtually contiguous, and a page is the unit of locking and
//! mapping), so it is listed once, as the earlier MDL's mapping of it.

use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::abi::{Mdl, NtStatus, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER};
use crate::kernel::mdl::{MAX_CHAIN, system_span, virtual_extent};
pub use crate::rnic::memory::MAX_SPANS;
use crate::rnic::memory::Span;
use crate::rnic::types::PAGE_SIZE;

/// `PAGE_SIZE` as a `usize`.
const PAGE: usize = 0x1000;
const _: () = assert!(PAGE as u64 == PAGE_SIZE);

/// The spans of the first `length` bytes of the chain at `mdl`, in order,
/// merged where one MDL's mapping continues the previous one's; at most
/// [`MAX_SPANS`] of them.
///
/// # Errors
/// `STATUS_INVALID_PARAMETER` for a null MDL, a zero length, a chain shorter
/// than `length`, not virtually contiguous over it (M2, M28), or longer than
/// `MAX_CHAIN` links; `STATUS_INSUFFICIENT_RESOURCES` when an MDL cannot be
/// mapped, for more than [`MAX_SPANS`] spans, or when memory runs out.
///
/// # Safety
/// `mdl` is null or heads a chain of valid MDLs (linked by `Next`) describing
/// locked memory that stays locked and mapped while the spans are used (M3).
pub unsafe fn map_chain(mdl: *const Mdl, length: usize) -> Result<Vec<Span>, NtStatus> {
    if length == 0 {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let mut spans: Vec<Span> = Vec::new();
    let mut next = NonNull::new(mdl.cast_mut());
    let mut expected_va: Option<u64> = None;
    let mut covered = 0_usize;
    let mut links = 0;
    while covered < length {
        links += 1;
        if links > MAX_CHAIN {
            return Err(STATUS_INVALID_PARAMETER);
        }
        // M3: the chain ends before `length` bytes.
        let link = next.ok_or(STATUS_INVALID_PARAMETER)?;
        // SAFETY: a valid MDL of the chain (the caller's contract).
        let (va, count) = unsafe { virtual_extent(link) };
        // M2: each MDL starts, as an index, where the previous one ends.
        if expected_va.is_some_and(|e| e != va) {
            return Err(STATUS_INVALID_PARAMETER);
        }
        expected_va = Some(
            va.checked_add(count as u64)
                .ok_or(STATUS_INVALID_PARAMETER)?,
        );
        let take = count.min(length - covered);
        if take != 0 {
            // SAFETY: as above.
            let mapped = unsafe { system_span(link) }?;
            // SAFETY: the MDL describes `mapped.len >= take` locked bytes at
            // `mapped.addr`, reachable through that mapping and kept locked
            // while the span is used (the caller's contract).
            let span = unsafe { Span::new(mapped.addr.as_ptr() as usize, take) }
                .ok_or(STATUS_INVALID_PARAMETER)?;
            push_merged(&mut spans, span)?;
            covered += take;
        }
        // SAFETY: as above; `Next` of a valid MDL is null or the next MDL.
        next = NonNull::new(unsafe { (*link.as_ptr()).next });
    }
    Ok(spans)
}

/// Appends `span`, merged into the last one when it continues it.
fn push_merged(spans: &mut Vec<Span>, span: Span) -> Result<(), NtStatus> {
    if let Some(last) = spans.last_mut()
        && last.addr().checked_add(last.len()) == Some(span.addr())
    {
        // SAFETY: both ranges are valid for as long as the chain stays locked
        // (the spans' invariant, vouched for by `map_chain`'s caller) and the
        // second starts where the first ends: their union is valid too.
        *last = unsafe { Span::new(last.addr(), last.len() + span.len()) }
            .ok_or(STATUS_INVALID_PARAMETER)?;
        return Ok(());
    }
    if spans.len() >= MAX_SPANS {
        return Err(STATUS_INSUFFICIENT_RESOURCES);
    }
    spans
        .try_reserve(1)
        .map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?;
    spans.push(span);
    Ok(())
}

/// How `BuildLam` lists the pages of a chain's spans (rule M28).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LamPlan {
    /// The first byte's offset in the first page (`*pFBO`).
    pub fbo: usize,
    /// Pages in the LAM's page array.
    pub pages: usize,
}

/// The page-list layout of `spans` (from [`map_chain`]).
///
/// `None` when the bytes cannot be listed as pages: a span after the first
/// that does not start at the same offset in its page as the previous one
/// ends (only MDLs whose `MappedSystemVa` does not keep their page offset,
/// which the Memory Manager never builds, do that), or no span at all.
#[must_use]
pub fn lam_plan(spans: &[Span]) -> Option<LamPlan> {
    let first = spans.first()?;
    let fbo = first.addr() % PAGE;
    let mut pages = 0_usize;
    let mut previous_end: Option<usize> = None;
    for span in spans {
        let (from, to) = listed_pages(span, previous_end)?;
        pages = pages.checked_add((to - from) / PAGE)?;
        previous_end = Some(span.addr() + span.len());
    }
    Some(LamPlan { fbo, pages })
}

/// The page-aligned range `[from, to)` of `span`'s pages that the LAM lists
/// for it, given where the previous span ended.
fn listed_pages(span: &Span, previous_end: Option<usize>) -> Option<(usize, usize)> {
    let start = span.addr();
    let end = start + span.len();
    let floor = start & !(PAGE - 1);
    let ceil = end.checked_next_multiple_of(PAGE)?;
    match previous_end {
        None => Some((floor, ceil)),
        // Joined at the same offset in a page: listed from the next page
        // when the boundary falls inside one (the previous span's last page
        // is that page).
        Some(prev) if prev % PAGE == start % PAGE => {
            let from = if start.is_multiple_of(PAGE) {
                start
            } else {
                floor + PAGE
            };
            Some((from.min(ceil), ceil))
        }
        Some(_) => None,
    }
}

/// Calls `each` with the logical address of every page `BuildLam` lists for
/// `spans`, in order (as many as [`lam_plan`] counts). The logical address
/// of a page is its address in the mapping.
pub fn for_each_lam_page(spans: &[Span], mut each: impl FnMut(u64)) {
    let mut previous_end: Option<usize> = None;
    for span in spans {
        let Some((from, to)) = listed_pages(span, previous_end) else {
            return;
        };
        for page in (from..to).step_by(PAGE) {
            each(page as u64);
        }
        previous_end = Some(span.addr() + span.len());
    }
}

/// The whole pages of each span, as the LAM's memory: what privileged-token
/// SGEs and FastRegister page lists may reach (M27, M33).
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out.
pub fn lam_memory(spans: &[Span]) -> Result<Vec<Span>, NtStatus> {
    let mut out = Vec::new();
    out.try_reserve_exact(spans.len())
        .map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?;
    for span in spans {
        let floor = span.addr() & !(PAGE - 1);
        let ceil = (span.addr() + span.len())
            .checked_next_multiple_of(PAGE)
            .ok_or(STATUS_INVALID_PARAMETER)?;
        // SAFETY: the pages around a locked buffer are resident and mapped
        // with it (a page is the unit of locking and mapping), for as long
        // as the LAM exists (the consumer keeps the MDL locked until
        // ReleaseLam, M32).
        let pages = unsafe { Span::new(floor, ceil - floor) }.ok_or(STATUS_INVALID_PARAMETER)?;
        out.push(pages);
    }
    Ok(out)
}

#[cfg(test)]
#[cfg(not(loom))]
pub(super) mod tests;
