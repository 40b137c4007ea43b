//! The raw backend: the kernel reached through imports declared by hand.
//!
//! Used for the portable driver image (`x86_64-pc-windows-msvc` without feature
//! `wdk`): every routine below is imported from `ntoskrnl.exe` with
//! `raw-dylib`, so the image links with rust-lld on any host, no WDK import
//! libraries needed. The prototypes follow `wdm.h`; the kernel's own `memcpy`,
//! `memset`, `memcmp`, `memmove`, `strlen` and `__chkstk` are imported too,
//! because `core` and `alloc` call them and a driver links no C runtime.
//!
//! The image runs on Windows 10 1809 / Windows Server 2019 (build 17763) and
//! later, so only routines that kernel exports are imported statically (the
//! image test checks each against its minimum build). `ExAllocatePool2` is
//! newer (Windows 10 2004, build 19041): [`init`] looks it up at run time with
//! `MmGetSystemRoutineAddress`, and where the kernel lacks it the pool
//! allocator falls back to `ExAllocatePoolWithTag(NonPagedPoolNx)`.

use super::log::{Level, Message};
use super::pool::POOL_TAG;
use crate::abi::{
    KERNEL_MODE, MDL_MAPPING_NO_EXECUTE, MM_CACHED, Mdl, NORMAL_PAGE_PRIORITY, UnicodeString,
};
use core::alloc::Layout;
use core::ffi::c_void;
use core::sync::atomic::{AtomicPtr, Ordering};

// The DPC: `kdpc`, the same for the wdk backend.
pub(super) use super::kdpc::{DpcSlot, dpc_flush, dpc_init, dpc_schedule};

/// `POOL_FLAG_NON_PAGED` for `ExAllocatePool2`: non-paged, no-execute.
const POOL_FLAG_NON_PAGED: u64 = 0x0000_0000_0000_0040;
/// `POOL_FLAG_UNINITIALIZED`: `alloc` callers do not expect zeroed memory
/// (without it `ExAllocatePool2` zeroes the block).
const POOL_FLAG_UNINITIALIZED: u64 = 0x0000_0000_0000_0002;
/// `POOL_TYPE` `NonPagedPoolNx` for `ExAllocatePoolWithTag`: non-paged,
/// no-execute, like `POOL_FLAG_NON_PAGED`.
const NON_PAGED_POOL_NX: u32 = 512;
/// `DPFLTR_IHVNETWORK_ID`: the component id of network drivers' debug output.
const DPFLTR_IHVNETWORK_ID: u32 = 78;
/// The pool's natural alignment on x64.
const POOL_ALIGN: usize = 16;
/// Bug check code of a Rust panic in SoftNDK ("SNDK").
const PANIC_BUGCHECK_CODE: u32 = u32::from_be_bytes(*b"SNDK");

#[link(name = "ntoskrnl.exe", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    fn KeAcquireSpinLockRaiseToDpc(spin_lock: *mut usize) -> u8;
    fn KeReleaseSpinLock(spin_lock: *mut usize, new_irql: u8);
    fn ExAllocatePoolWithTag(pool_type: u32, number_of_bytes: usize, tag: u32) -> *mut c_void;
    fn ExFreePoolWithTag(p: *mut c_void, tag: u32);
    fn MmGetSystemRoutineAddress(system_routine_name: *const UnicodeString) -> *mut c_void;
    fn KeQueryInterruptTimePrecise(qpc_time_stamp: *mut u64) -> u64;
    fn KeDelayExecutionThread(wait_mode: i8, alertable: u8, interval: *const i64) -> i32;
    fn KeBugCheckEx(code: u32, p1: usize, p2: usize, p3: usize, p4: usize) -> !;
    fn MmMapLockedPagesSpecifyCache(
        memory_descriptor_list: *mut Mdl,
        access_mode: u8,
        cache_type: u32,
        requested_address: *mut c_void,
        bug_check_on_failure: u32,
        priority: u32,
    ) -> *mut c_void;
    fn vDbgPrintEx(
        component_id: u32,
        level: u32,
        format: *const u8,
        arg_list: *const c_void,
    ) -> u32;
}

// The C runtime routines the compiler and `core` emit calls to. Declared so that
// the import library rust-lld builds resolves them; never called from Rust.
#[expect(
    dead_code,
    reason = "declared only so the import library exports them to the linker"
)]
#[link(name = "ntoskrnl.exe", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "C" {
    fn memcpy(dst: *mut c_void, src: *const c_void, n: usize) -> *mut c_void;
    fn memmove(dst: *mut c_void, src: *const c_void, n: usize) -> *mut c_void;
    fn memset(dst: *mut c_void, c: i32, n: usize) -> *mut c_void;
    fn memcmp(a: *const c_void, b: *const c_void, n: usize) -> i32;
    fn strlen(s: *const u8) -> usize;
    fn __chkstk();
}

/// Marks the image as using floating point; MSVC's CRT would define it.
#[unsafe(no_mangle)]
#[used]
pub static _fltused: i32 = 0;

/// The C++ frame handler the precompiled `core` may reference from unwind
/// tables. The driver is built with `panic=abort`, so nothing unwinds and this
/// is never called; if it were, that is a bug check like any panic.
#[unsafe(no_mangle)]
pub extern "system" fn __CxxFrameHandler3() -> ! {
    bug_check(0)
}

/// Stops the machine with `code` and its four parameters (checked mode's
/// stop at a consumer breach, `kernel::stop`).
pub(super) fn bug_check_ex(code: u32, parameters: [usize; 4]) -> ! {
    let [p1, p2, p3, p4] = parameters;
    // SAFETY: KeBugCheckEx may be called at any IRQL and does not return; the
    // arguments are plain integers shown in the crash dump.
    unsafe { KeBugCheckEx(code, p1, p2, p3, p4) }
}

fn bug_check(line: u32) -> ! {
    // SAFETY: KeBugCheckEx may be called at any IRQL and does not return; the
    // arguments are plain integers shown in the crash dump.
    unsafe { KeBugCheckEx(PANIC_BUGCHECK_CODE, line as usize, 0, 0, 0) }
}

pub(super) fn spin_lock_acquire(word: *mut usize) -> u8 {
    // SAFETY: `word` points to a KSPIN_LOCK inside a live `SpinLock` borrowed by
    // the caller for as long as it is held; callers run at IRQL <= DISPATCH_LEVEL.
    unsafe { KeAcquireSpinLockRaiseToDpc(word) }
}

pub(super) fn spin_lock_release(word: *mut usize, old_irql: u8) {
    // SAFETY: the caller's guard acquired `word` with `spin_lock_acquire`, which
    // returned `old_irql`; each guard releases exactly once, in its drop.
    unsafe { KeReleaseSpinLock(word, old_irql) }
}

pub(super) fn debug_print(level: Level, message: &Message) {
    let args: [*const u8; 1] = [message.as_c_bytes().as_ptr()];
    // SAFETY: the format "%s" consumes exactly one pointer-sized argument from
    // the x64 `va_list`, which is a pointer to consecutive 8-byte slots: `args`
    // holds that one pointer to a NUL-terminated string that outlives the call.
    unsafe {
        vDbgPrintEx(
            DPFLTR_IHVNETWORK_ID,
            level as u32,
            c"%s".as_ptr().cast(),
            args.as_ptr().cast(),
        )
    };
}

/// Maps an MDL's locked pages into system space the way
/// `MmGetSystemAddressForMdlSafe` does for an unmapped MDL: kernel mode,
/// cached, anywhere, **no bug check on failure** (null instead), normal
/// priority, non-executable.
///
/// # Safety
/// `mdl` points to a valid MDL describing locked pages; IRQL <= DISPATCH_LEVEL.
pub(super) unsafe fn map_locked_pages(mdl: *mut Mdl) -> *mut c_void {
    // SAFETY: caller contract (valid MDL over locked pages, IRQL <=
    // DISPATCH_LEVEL, which KernelMode mappings allow); `BugCheckOnFailure`
    // is FALSE, so a failure returns null rather than stopping the machine.
    unsafe {
        MmMapLockedPagesSpecifyCache(
            mdl,
            KERNEL_MODE,
            MM_CACHED,
            core::ptr::null_mut(),
            0,
            NORMAL_PAGE_PRIORITY | MDL_MAPPING_NO_EXECUTE,
        )
    }
}

pub(super) fn monotonic_100ns() -> u64 {
    let mut qpc = 0_u64;
    // SAFETY: `qpc` is a valid out-parameter; callable at any IRQL.
    unsafe { KeQueryInterruptTimePrecise(&raw mut qpc) }
}

pub(super) fn sleep_100ns(duration: u64) {
    // A negative interval is relative time.
    let interval = -i64::try_from(duration).unwrap_or(i64::MAX);
    // SAFETY: PASSIVE_LEVEL (documented on `time::sleep_passive_100ns`);
    // KernelMode (0), not alertable, a valid interval.
    let _ = unsafe { KeDelayExecutionThread(0, 0, &raw const interval) };
}

/// `ExAllocatePool2`'s prototype (`wdm.h`, `NTDDI_VERSION >= NTDDI_WIN10_VB`):
/// newer than the floor, so called only through the address [`init`] finds.
type ExAllocatePool2Fn =
    unsafe extern "system" fn(flags: u64, number_of_bytes: usize, tag: u32) -> *mut c_void;

/// `"ExAllocatePool2"` in UTF-16, for `MmGetSystemRoutineAddress`.
static EX_ALLOCATE_POOL2_NAME: [u16; 15] = super::ascii_utf16("ExAllocatePool2");

/// The kernel's `ExAllocatePool2`, or null: before [`init`] has run, and on
/// kernels older than Windows 10 2004, which do not export it. Written only
/// by [`init`]; every value it ever holds is a correct choice, so readers
/// need no other synchronisation.
static EX_ALLOCATE_POOL2: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// Looks up, once, the kernel routines newer than the floor (Windows 10
/// 1809, build 17763) that the image uses when present: `ExAllocatePool2`.
/// Called first thing in `DriverEntry`, at PASSIVE_LEVEL (what
/// `MmGetSystemRoutineAddress` requires), before the driver allocates or
/// starts anything concurrent. Allocation-free; calling it again is harmless.
pub(super) fn init() {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a 15-character name: 30 bytes"
    )]
    let length = core::mem::size_of_val(&EX_ALLOCATE_POOL2_NAME) as u16;
    let name = UnicodeString {
        length,
        maximum_length: length,
        padding_04: 0,
        buffer: EX_ALLOCATE_POOL2_NAME.as_ptr(),
    };
    // SAFETY: PASSIVE_LEVEL (DriverEntry); `name` is a counted UTF-16 string
    // over a static buffer, which the kernel only reads; the result is the
    // routine's address, or null when the kernel does not export it.
    let routine = unsafe { MmGetSystemRoutineAddress(&raw const name) };
    EX_ALLOCATE_POOL2.store(routine, Ordering::Release);
}

/// Allocates `size` bytes of non-paged, no-execute pool tagged `SNdk`, zeroed
/// if asked, or returns null. `ExAllocatePool2` when [`init`] found it,
/// otherwise `ExAllocatePoolWithTag(NonPagedPoolNx)` (zeroed here when
/// asked, as `ExAllocatePool2` zeroes unless told not to). Either block is
/// freed by `ExFreePoolWithTag`. IRQL <= DISPATCH_LEVEL.
fn allocate_block(size: usize, zeroed: bool) -> *mut u8 {
    let routine = EX_ALLOCATE_POOL2.load(Ordering::Acquire);
    if routine.is_null() {
        // SAFETY: ExAllocatePoolWithTag (every Windows) takes non-paged pool
        // of any size at IRQL <= DISPATCH_LEVEL and returns null on failure.
        let block: *mut u8 =
            unsafe { ExAllocatePoolWithTag(NON_PAGED_POOL_NX, size, POOL_TAG) }.cast();
        if zeroed && !block.is_null() {
            // SAFETY: `block` is a fresh pool block of `size` writable bytes.
            unsafe { block.write_bytes(0, size) };
        }
        return block;
    }
    // SAFETY: `routine` is non-null, so it is what MmGetSystemRoutineAddress
    // returned for "ExAllocatePool2": that kernel routine, whose prototype is
    // `ExAllocatePool2Fn`.
    let allocate = unsafe { core::mem::transmute::<*mut c_void, ExAllocatePool2Fn>(routine) };
    let flags = if zeroed {
        POOL_FLAG_NON_PAGED
    } else {
        POOL_FLAG_NON_PAGED | POOL_FLAG_UNINITIALIZED
    };
    // SAFETY: ExAllocatePool2 accepts any size at IRQL <= DISPATCH_LEVEL for
    // non-paged pool and returns null on failure.
    unsafe { allocate(flags, size, POOL_TAG) }.cast()
}

/// Allocates non-paged pool for `layout` (zeroed if `zeroed`), or returns
/// null.
pub(super) fn pool_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    if layout.align() <= POOL_ALIGN {
        return allocate_block(layout.size(), zeroed);
    }
    // Over-aligned: allocate size + align, align up past a header slot, and store
    // the pool block's address just below the returned pointer.
    let Some(total) = layout.size().checked_add(layout.align()) else {
        return core::ptr::null_mut();
    };
    let block = allocate_block(total, zeroed);
    if block.is_null() {
        return block;
    }
    let offset = layout.align() - (block as usize % layout.align());
    // `offset` is in 16..=align (block is 16-aligned, align > 16), so the header
    // slot below the result lies inside the block and is pointer-aligned.
    let aligned = block.wrapping_add(offset);
    let header = header_slot(aligned);
    // SAFETY: the header slot lies inside the block (offset >= 16) and is
    // 8-aligned (`aligned` is at least 16-aligned).
    unsafe { header.write(block) };
    aligned
}

/// The pointer-sized slot just below an over-aligned allocation, where
/// `pool_alloc` keeps the address of the pool block.
#[expect(
    clippy::cast_ptr_alignment,
    reason = "over-aligned allocations are at least 32-aligned"
)]
fn header_slot(aligned: *mut u8) -> *mut *mut u8 {
    aligned
        .wrapping_sub(core::mem::size_of::<*mut u8>())
        .cast::<*mut u8>()
}

/// Frees what `pool_alloc` returned for the same `layout`.
///
/// # Safety
/// `ptr` must come from `pool_alloc(layout)` and not have been freed.
pub(super) unsafe fn pool_free(ptr: *mut u8, layout: Layout) {
    let block = if layout.align() <= POOL_ALIGN {
        ptr
    } else {
        let header = header_slot(ptr);
        // SAFETY: for over-aligned layouts `pool_alloc` stored the block address
        // in the 8 bytes below `ptr` (caller contract).
        unsafe { header.read() }
    };
    // SAFETY: `block` is a live pool allocation with our tag (caller contract).
    unsafe { ExFreePoolWithTag(block.cast(), POOL_TAG) }
}

/// A panic in a driver is a bug check: log where, then stop the machine with
/// code `SNDK` and the source line as the first parameter.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let line = info.location().map_or(0, core::panic::Location::line);
    crate::klog!(Level::Error, "panic: {}", info);
    bug_check(line)
}
