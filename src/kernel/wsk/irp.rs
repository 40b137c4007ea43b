//! The IRPs and the MDL the WSK glue owns, on both platforms.
//!
//! A WSK client passes its own IRP with every asynchronous call and learns
//! the outcome in the completion routine it set on the IRP's next stack
//! location (the inline `IoSetCompletionRoutine` of `wdm.h`, written here
//! against `abi::Irp`). In the kernel the IRP comes from
//! `IoAllocateIrp(1, FALSE)` and is readied for each call with
//! `IoReuseIrp`; on the host the same 0xD0 + 0x48 bytes are allocated and
//! initialised as `IoAllocateIrp` initialises them, so that the code that
//! sets completion routines and reads `IoStatus` is the same code, and the
//! test provider completes them as `IoCompleteRequest` does
//! ([`complete`], tests only).
//!
//! A send buffer ([`PoolBytes`]) is described by one MDL: in the kernel
//! `IoAllocateMdl` + `MmBuildMdlForNonPagedPool` (the crate's allocator
//! takes non-paged pool); on the host an MDL header whose
//! `MappedSystemVa` is the buffer, flagged `MDL_SOURCE_IS_NONPAGED_POOL`.

use core::ffi::c_void;
use core::ptr::NonNull;

#[cfg(target_os = "windows")]
use crate::abi::STATUS_UNSUCCESSFUL;
use crate::abi::{
    IoCompletionRoutine, IoStackLocation, Irp, Mdl, SL_INVOKE_ON_CANCEL, SL_INVOKE_ON_ERROR,
    SL_INVOKE_ON_SUCCESS,
};

/// An IRP with one stack location, owned by the glue; freed on drop.
pub(super) struct OwnedIrp(NonNull<Irp>);

// SAFETY: the IRP is plain memory owned by this handle; which thread uses
// it is ordered by the glue's state (one request in flight per IRP).
unsafe impl Send for OwnedIrp {}
// SAFETY: as above; `&OwnedIrp` only exposes the raw pointer.
unsafe impl Sync for OwnedIrp {}

impl OwnedIrp {
    /// A fresh IRP, or `None` when memory runs out.
    pub(super) fn new() -> Option<Self> {
        imp::allocate().map(Self)
    }

    /// The IRP, for a WSK call.
    pub(super) fn as_ptr(&self) -> *mut Irp {
        self.0.as_ptr()
    }

    /// Readies the IRP for a new request whose completion calls `routine`
    /// with `context` (on success, error and cancel alike).
    ///
    /// # Safety
    /// No request is in flight on this IRP.
    pub(super) unsafe fn prepare(&self, routine: IoCompletionRoutine, context: *mut c_void) {
        let irp = self.0.as_ptr();
        // SAFETY: the IRP is ours and idle (caller contract).
        unsafe { imp::reuse(irp) };
        // SAFETY: the IRP is valid; plain field read.
        let current = unsafe { (*irp).current_stack_location };
        // `IoGetNextIrpStackLocation`: the location before the current one,
        // inside the IRP's single stack location (a fresh IRP's current
        // location is one past it).
        let next: *mut IoStackLocation = current.wrapping_sub(1);
        // SAFETY: `next` is the IRP's own stack location (see above).
        unsafe { (*next).completion_routine = Some(routine) };
        // SAFETY: as above.
        unsafe { (*next).context = context };
        // SAFETY: as above.
        unsafe {
            (*next).control = SL_INVOKE_ON_SUCCESS | SL_INVOKE_ON_ERROR | SL_INVOKE_ON_CANCEL;
        };
    }
}

impl Drop for OwnedIrp {
    fn drop(&mut self) {
        // SAFETY: the IRP came from `imp::allocate` and no request is in
        // flight (the owner outlives every request on it).
        unsafe { imp::free(self.0.as_ptr()) };
    }
}

/// The status and `Information` of a completed IRP.
///
/// # Safety
/// `irp` points to a valid IRP.
pub(super) unsafe fn outcome(irp: *mut Irp) -> (crate::abi::NtStatus, usize) {
    // SAFETY: valid IRP (caller contract); plain field read.
    let status = unsafe { (*irp).io_status };
    (status.status, status.information)
}

/// A zeroed byte buffer from the crate's allocator (non-paged pool in the
/// kernel) that stays at one address, for MDLs to describe: a stream's send
/// ring, a datagram socket's send slots. Freed on drop, so its owner keeps
/// it while the provider may read it and declares it after the MDLs over it
/// (fields drop in order). The owner orders who writes which part.
pub(super) struct PoolBytes {
    start: NonNull<u8>,
    len: usize,
}

impl PoolBytes {
    /// `len` zeroed bytes, or `None` when memory runs out.
    pub(super) fn new(len: usize) -> Option<Self> {
        let bytes: &mut [u8] = alloc::boxed::Box::leak(crate::kernel::mem::try_filled(len, 0_u8)?);
        Some(Self {
            start: NonNull::from(bytes).cast(),
            len,
        })
    }

    /// The first byte.
    pub(super) const fn start(&self) -> NonNull<u8> {
        self.start
    }
}

impl Drop for PoolBytes {
    fn drop(&mut self) {
        let bytes = core::ptr::slice_from_raw_parts_mut(self.start.as_ptr(), self.len);
        // SAFETY: the boxed slice `new` leaked, `len` bytes, given back
        // once; nothing reads it any more (the owner outlives the requests
        // on it and the MDLs over it).
        drop(unsafe { alloc::boxed::Box::from_raw(bytes) });
    }
}

/// One MDL describing a buffer of non-paged memory; freed on drop.
pub(super) struct BufferMdl(NonNull<Mdl>);

// SAFETY: the MDL is plain memory owned by this handle and only read by
// the provider while a send is in flight.
unsafe impl Send for BufferMdl {}
// SAFETY: as above.
unsafe impl Sync for BufferMdl {}

impl BufferMdl {
    /// An MDL for `len` bytes at `buf`, or `None` when memory runs out.
    ///
    /// # Safety
    /// `buf` is valid non-paged memory of `len` bytes that outlives the MDL.
    pub(super) unsafe fn new(buf: NonNull<u8>, len: u32) -> Option<Self> {
        // SAFETY: forwarded caller contract.
        unsafe { imp::mdl_for(buf, len) }.map(Self)
    }

    /// The MDL, for a `WSK_BUF`.
    pub(super) fn as_ptr(&self) -> *mut Mdl {
        self.0.as_ptr()
    }
}

impl Drop for BufferMdl {
    fn drop(&mut self) {
        // SAFETY: the MDL came from `imp::mdl_for` and no send uses it.
        unsafe { imp::free_mdl(self.0.as_ptr()) };
    }
}

#[cfg(target_os = "windows")]
mod imp {
    use super::super::sys;
    use super::{Irp, Mdl, NonNull, STATUS_UNSUCCESSFUL};

    pub(super) fn allocate() -> Option<NonNull<Irp>> {
        // SAFETY: IoAllocateIrp may be called at ≤ DISPATCH_LEVEL; one stack
        // location (the provider's; the caller's completion routine lives
        // in it), no quota charge.
        NonNull::new(unsafe { sys::IoAllocateIrp(1, 0) })
    }

    pub(super) unsafe fn reuse(irp: *mut Irp) {
        // SAFETY: an IRP from IoAllocateIrp with nothing in flight (caller
        // contract).
        unsafe { sys::IoReuseIrp(irp, STATUS_UNSUCCESSFUL) };
    }

    pub(super) unsafe fn free(irp: *mut Irp) {
        // SAFETY: an IRP from IoAllocateIrp with nothing in flight.
        unsafe { sys::IoFreeIrp(irp) };
    }

    pub(super) unsafe fn mdl_for(buf: NonNull<u8>, len: u32) -> Option<NonNull<Mdl>> {
        // SAFETY: `buf` is `len` bytes of non-paged pool (caller contract);
        // no IRP is attached.
        let mdl = NonNull::new(unsafe {
            sys::IoAllocateMdl(buf.as_ptr().cast(), len, 0, 0, core::ptr::null_mut())
        })?;
        // SAFETY: the MDL describes non-paged pool.
        unsafe { sys::MmBuildMdlForNonPagedPool(mdl.as_ptr()) };
        Some(mdl)
    }

    pub(super) unsafe fn free_mdl(mdl: *mut Mdl) {
        // SAFETY: an MDL from IoAllocateMdl, unused.
        unsafe { sys::IoFreeMdl(mdl) };
    }
}

#[cfg(not(target_os = "windows"))]
mod imp {
    use super::{IoStackLocation, Irp, Mdl, NonNull};
    use crate::abi::{IoStatusBlock, MDL_SOURCE_IS_NONPAGED_POOL};
    use core::alloc::Layout;

    const IRP_BYTES: usize = core::mem::size_of::<Irp>() + core::mem::size_of::<IoStackLocation>();

    fn layout() -> Layout {
        // An IRP and one stack location, both 8-aligned.
        Layout::from_size_align(IRP_BYTES, 8).unwrap_or(Layout::new::<Irp>())
    }

    #[expect(
        clippy::cast_ptr_alignment,
        reason = "allocated with the IRP's 8-byte alignment (`layout`)"
    )]
    pub(super) fn allocate() -> Option<NonNull<Irp>> {
        // SAFETY: the layout has a non-zero size.
        let irp = NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout()) }.cast::<Irp>())?;
        // SAFETY: a fresh, zeroed allocation of the IRP's size.
        unsafe { reuse(irp.as_ptr()) };
        Some(irp)
    }

    pub(super) unsafe fn reuse(irp: *mut Irp) {
        let stack = irp.cast::<u8>().wrapping_add(core::mem::size_of::<Irp>());
        // What `IoAllocateIrp(1, ..)` / `IoReuseIrp` leave: one location,
        // the current one past it, no status.
        // SAFETY: the IRP is ours and idle (caller contract).
        unsafe { (*irp).stack_count = 1 };
        // SAFETY: as above.
        unsafe { (*irp).current_location = 2 };
        // SAFETY: as above.
        unsafe { (*irp).io_status = IoStatusBlock::default() };
        // SAFETY: as above.
        unsafe {
            (*irp).current_stack_location = stack
                .wrapping_add(core::mem::size_of::<IoStackLocation>())
                .cast();
        };
    }

    pub(super) unsafe fn free(irp: *mut Irp) {
        // SAFETY: allocated by `allocate` with this layout.
        unsafe { alloc::alloc::dealloc(irp.cast(), layout()) };
    }

    pub(super) unsafe fn mdl_for(buf: NonNull<u8>, len: u32) -> Option<NonNull<Mdl>> {
        let mdl = crate::kernel::mem::try_box(Mdl {
            mdl_flags: MDL_SOURCE_IS_NONPAGED_POOL,
            mapped_system_va: buf.as_ptr().cast(),
            ..Mdl::over(buf.as_ptr().cast(), 0, len)
        })?;
        NonNull::new(alloc::boxed::Box::into_raw(mdl))
    }

    pub(super) unsafe fn free_mdl(mdl: *mut Mdl) {
        // SAFETY: from `Box::into_raw` in `mdl_for`.
        drop(unsafe { alloc::boxed::Box::from_raw(mdl) });
    }
}

/// Completes `irp` as a WSK provider does: status and `Information` set,
/// then `IoCompleteRequest` calls the completion routine of the stack
/// location the caller filled (the provider had taken it as its current
/// one), with no device object.
///
/// # Safety
/// `irp` is an IRP of this module with a request in flight.
#[cfg(test)]
pub(super) unsafe fn complete(irp: *mut Irp, status: crate::abi::NtStatus, information: usize) {
    // SAFETY: valid IRP (caller contract).
    unsafe { (*irp).io_status.status = status };
    // SAFETY: as above.
    unsafe { (*irp).io_status.information = information };
    // SAFETY: as above.
    let current = unsafe { (*irp).current_stack_location };
    let location = current.wrapping_sub(1);
    // SAFETY: the IRP's own stack location.
    let routine = unsafe { (*location).completion_routine };
    // SAFETY: as above.
    let context = unsafe { (*location).context };
    if let Some(routine) = routine {
        // SAFETY: the routine and context the client set for this request.
        let _ = unsafe { routine(core::ptr::null_mut(), irp, context) };
    }
}
