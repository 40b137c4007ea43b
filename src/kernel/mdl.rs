//! MDL → system address: the one way SoftNDK reaches memory a consumer or
//! NDIS describes with an MDL (memory registration, frame headers).
//!
//! [`system_span`] does what `MmGetSystemAddressForMdlSafe` does: when the MDL
//! is already mapped to system space (`MDL_MAPPED_TO_SYSTEM_VA`) or describes
//! non-paged pool (`MDL_SOURCE_IS_NONPAGED_POOL`), its `MappedSystemVa` is the
//! address; otherwise the kernel backends map the locked pages with
//! `MmMapLockedPagesSpecifyCache(KernelMode, MmCached, NULL, FALSE,
//! NormalPagePriority | MdlMappingNoExecute)`: cached, **non-executable**,
//! allowed to fail when system PTEs run low, and never a bug check — a failed
//! mapping is `STATUS_INSUFFICIENT_RESOURCES`. That mapping belongs to the
//! MDL (the Memory Manager records it in `MappedSystemVa` and removes it when
//! the MDL's owner unlocks the pages), exactly as with the C macro, so there
//! is nothing for SoftNDK to unmap.
//!
//! The host backend cannot map anything: an MDL built on the host (by tests,
//! or by a user-mode consumer of the host library) describes memory that is
//! already addressable, so its address is `MappedSystemVa` under the same flag
//! test and `StartVa + ByteOffset` otherwise (`MmGetMdlVirtualAddress`).
//!
//! Both take `ByteCount` bytes and follow `Next` for chains
//! ([`copy_from_chain`]). IRQL: ≤ DISPATCH_LEVEL (the mapping call allows it
//! for `KernelMode`).

use crate::abi::{
    MDL_MAPPED_TO_SYSTEM_VA, MDL_SOURCE_IS_NONPAGED_POOL, Mdl, NtStatus,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER,
};
use core::ptr::NonNull;

/// The system-space view of one MDL: its first byte and its `ByteCount`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemSpan {
    /// Address of the first described byte (`MmGetSystemAddressForMdlSafe`).
    pub addr: NonNull<u8>,
    /// `ByteCount`: bytes described by this MDL.
    pub len: usize,
}

/// Chains longer than this are treated as corrupt (a cycle) rather than
/// walked forever. Real chains have a handful of elements.
pub const MAX_CHAIN: usize = 4096;

/// The `MdlFlags` bits that make `MappedSystemVa` the address.
const MAPPED_FLAGS: i16 = MDL_MAPPED_TO_SYSTEM_VA | MDL_SOURCE_IS_NONPAGED_POOL;

/// Maps one MDL (not its chain) to a system address.
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when the pages cannot be mapped (kernel:
/// the mapping failed; host: the MDL yields a null address).
///
/// # Safety
/// `mdl` points to a valid, initialised MDL header that describes resident
/// (locked or non-paged) memory, and nothing modifies the header during the
/// call. The returned address is valid for `len` bytes for as long as the
/// pages stay locked.
pub unsafe fn system_span(mdl: NonNull<Mdl>) -> Result<SystemSpan, NtStatus> {
    let header = mdl.as_ptr();
    // SAFETY: `mdl` points to a valid MDL header (caller contract); reading
    // two plain integer fields through the raw pointer creates no reference.
    let flags = unsafe { (*header).mdl_flags };
    // SAFETY: as above.
    let byte_count = unsafe { (*header).byte_count };
    let addr = if flags & MAPPED_FLAGS != 0 {
        // SAFETY: as above; the flags say `MappedSystemVa` is valid.
        unsafe { (*header).mapped_system_va }.cast::<u8>()
    } else {
        // SAFETY: caller contract: a valid header describing resident pages.
        unsafe { map_unmapped(header) }
    };
    let addr = NonNull::new(addr).ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
    Ok(SystemSpan {
        addr,
        len: byte_count as usize,
    })
}

/// One MDL's virtual address (`MmGetMdlVirtualAddress`: `StartVa` plus
/// `ByteOffset`, an index that is never dereferenced, rule M4) and its
/// `ByteCount`. The address wraps rather than fails: it is only compared.
///
/// # Safety
/// `mdl` points to a valid, initialised MDL header that nothing modifies
/// during the call.
pub unsafe fn virtual_extent(mdl: NonNull<Mdl>) -> (u64, usize) {
    let header = mdl.as_ptr();
    // SAFETY: a valid header (caller contract); plain field reads through the
    // raw pointer, no reference created.
    let start = unsafe { (*header).start_va } as usize as u64;
    // SAFETY: as above.
    let offset = unsafe { (*header).byte_offset };
    // SAFETY: as above.
    let count = unsafe { (*header).byte_count };
    (start.wrapping_add(u64::from(offset)), count as usize)
}

/// Host: an unmapped MDL's buffer is addressable as it is.
///
/// # Safety
/// `mdl` points to a valid MDL header.
#[cfg(not(target_os = "windows"))]
unsafe fn map_unmapped(mdl: *mut Mdl) -> *mut u8 {
    // SAFETY: valid header (caller contract); plain field reads.
    let start = unsafe { (*mdl).start_va }.cast::<u8>();
    // SAFETY: as above.
    let offset = unsafe { (*mdl).byte_offset } as usize;
    // `MmGetMdlVirtualAddress`: the page-aligned start plus the offset in the
    // first page. Wrapping arithmetic: this only computes an address.
    start.wrapping_add(offset)
}

/// Kernel: `MmMapLockedPagesSpecifyCache` with a non-executable,
/// normal-priority mapping that returns null instead of bug-checking.
///
/// # Safety
/// `mdl` points to a valid MDL describing locked pages.
#[cfg(target_os = "windows")]
unsafe fn map_unmapped(mdl: *mut Mdl) -> *mut u8 {
    // SAFETY: forwarded caller contract.
    unsafe { super::backend::map_locked_pages(mdl) }.cast()
}

/// Copies up to `out.len()` bytes from an MDL chain, starting `offset` bytes
/// into the data the chain describes, and returns how many were copied (less
/// than `out.len()` only when the chain ends first).
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when an MDL cannot be mapped;
/// `STATUS_INVALID_PARAMETER` for a chain longer than [`MAX_CHAIN`].
///
/// # Safety
/// Every MDL of the chain starting at `first` satisfies the contract of
/// [`system_span`], and the described memory is not written concurrently.
pub unsafe fn copy_from_chain(
    first: NonNull<Mdl>,
    offset: usize,
    out: &mut [u8],
) -> Result<usize, NtStatus> {
    let mut skip = offset;
    let mut copied = 0_usize;
    let mut current = Some(first);
    let mut walked = 0_usize;
    while let Some(mdl) = current {
        if copied == out.len() {
            break;
        }
        walked += 1;
        if walked > MAX_CHAIN {
            return Err(STATUS_INVALID_PARAMETER);
        }
        // SAFETY: every MDL of the chain satisfies `system_span`'s contract
        // (caller contract).
        let span = unsafe { system_span(mdl) }?;
        if skip >= span.len {
            skip -= span.len;
        } else {
            let available = span.len - skip;
            let want = (out.len() - copied).min(available);
            let Some(dst) = out.get_mut(copied..copied + want) else {
                return Err(STATUS_INVALID_PARAMETER);
            };
            let src = span.addr.as_ptr().wrapping_add(skip);
            // SAFETY:
            // - `src` lies `skip` bytes into the `span.len` bytes the MDL
            //   describes and `want <= span.len - skip`, so the source range is
            //   inside the mapped buffer (caller contract: resident, not written
            //   concurrently);
            // - `dst` is a distinct, exclusively borrowed Rust slice of `want`
            //   bytes, so the ranges do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), want) };
            copied += want;
            skip = 0;
        }
        // SAFETY: the header is valid (caller contract); `Next` is a plain
        // pointer field.
        current = NonNull::new(unsafe { (*mdl.as_ptr()).next });
    }
    Ok(copied)
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use core::ffi::c_void;

    fn mdl_over(buf: &mut [u8], flags: i16) -> Mdl {
        let base = buf.as_mut_ptr();
        // An unaligned "page start" is fine on the host: only the sum with
        // `byte_offset` is used.
        let start_va = base.wrapping_sub(3).cast::<c_void>();
        Mdl {
            mdl_flags: flags,
            mapped_system_va: base.cast::<c_void>(),
            ..Mdl::over(start_va, 3, u32::try_from(buf.len()).unwrap())
        }
    }

    /// [`system_span`] of an MDL over `buf` with `flags`, once `clear` has
    /// made null the address the span must not be taken from.
    fn span_of(buf: &mut [u8], flags: i16, clear: fn(&mut Mdl)) -> Result<SystemSpan, NtStatus> {
        let mut mdl = mdl_over(buf, flags);
        clear(&mut mdl);
        // SAFETY: `mdl` describes `buf`, alive for the call; no byte is read
        // through a null address.
        unsafe { system_span(NonNull::from(&mut mdl)) }
    }

    fn no_start_va(mdl: &mut Mdl) {
        mdl.start_va = core::ptr::null_mut();
    }

    fn no_system_va(mdl: &mut Mdl) {
        mdl.mapped_system_va = core::ptr::null_mut();
    }

    #[test]
    fn test_mapped_mdl_uses_mapped_system_va() {
        let mut buf = [1_u8, 2, 3, 4];
        let span = span_of(&mut buf, MDL_MAPPED_TO_SYSTEM_VA, no_start_va).unwrap();
        assert_eq!(span.addr.as_ptr(), buf.as_mut_ptr());
        assert_eq!(span.len, 4);
    }

    #[test]
    fn test_nonpaged_pool_mdl_uses_mapped_system_va() {
        let mut buf = [0_u8; 8];
        let span = span_of(&mut buf, MDL_SOURCE_IS_NONPAGED_POOL, no_start_va).unwrap();
        assert_eq!(span.addr.as_ptr(), buf.as_mut_ptr());
    }

    #[test]
    fn test_unmapped_mdl_uses_start_va_plus_byte_offset() {
        let mut buf = [0_u8; 8];
        let span = span_of(&mut buf, 0, no_system_va).unwrap();
        assert_eq!(span.addr.as_ptr(), buf.as_mut_ptr());
    }

    #[test]
    fn test_null_address_is_insufficient_resources_not_a_crash() {
        let mut buf = [0_u8; 8];
        let result = span_of(&mut buf, MDL_MAPPED_TO_SYSTEM_VA, no_system_va);
        assert_eq!(result, Err(STATUS_INSUFFICIENT_RESOURCES));
    }

    #[test]
    fn test_copy_from_chain_crosses_mdls_and_skips_offset() {
        let mut a = [1_u8, 2, 3];
        let mut b = [4_u8, 5];
        let mut c = [6_u8, 7, 8, 9];
        let mut mc = mdl_over(&mut c, 0);
        let mut mb = mdl_over(&mut b, MDL_MAPPED_TO_SYSTEM_VA);
        mb.next = &raw mut mc;
        let mut ma = mdl_over(&mut a, 0);
        ma.next = &raw mut mb;
        let mut out = [0_u8; 5];
        // SAFETY: the three MDLs describe live arrays and are linked in order.
        let n =
            unsafe { copy_from_chain(NonNull::new(&raw mut ma).unwrap(), 2, &mut out) }.unwrap();
        assert_eq!(n, 5);
        assert_eq!(out, [3, 4, 5, 6, 7]);
        let mut long = [0_u8; 16];
        // SAFETY: as above.
        let n =
            unsafe { copy_from_chain(NonNull::new(&raw mut ma).unwrap(), 7, &mut long) }.unwrap();
        assert_eq!(n, 2, "the chain ends after 9 bytes");
        assert_eq!(&long[..2], &[8, 9]);
    }

    #[test]
    fn test_copy_from_cyclic_chain_is_rejected() {
        let mut a = [1_u8];
        let mut ma = mdl_over(&mut a, 0);
        ma.next = &raw mut ma;
        let mut out = [0_u8; 1 << 13];
        // SAFETY: the MDL describes a live array; the cycle is the point.
        let result = unsafe { copy_from_chain(NonNull::new(&raw mut ma).unwrap(), 0, &mut out) };
        assert_eq!(result, Err(STATUS_INVALID_PARAMETER));
    }
}
