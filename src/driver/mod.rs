//! The Windows driver: `DriverEntry` and (later) the NDIS miniport that
//! registers SoftNDK as an NDK provider.
//!
//! For now `DriverEntry` only announces itself and installs an unload routine,
//! so that the image can be loaded and unloaded on a test VM; NDIS miniport
//! registration is added with the driver issue.

use crate::kernel::log::Level;
use core::ffi::c_void;

/// `NTSTATUS`.
type NtStatus = i32;
/// `STATUS_SUCCESS`.
const STATUS_SUCCESS: NtStatus = 0;

/// `PDRIVER_UNLOAD`.
type DriverUnload = unsafe extern "system" fn(driver_object: *mut DriverObjectHead);

/// The start of `DRIVER_OBJECT` on x64, through `DriverUnload` (`wdm.h`: Type,
/// Size, DeviceObject, Flags, DriverStart, DriverSize, DriverSection,
/// DriverExtension, DriverName, HardwareDatabase, FastIoDispatch, DriverInit,
/// DriverStartIo, then DriverUnload at 0x68). Only `driver_unload` is written.
#[repr(C)]
pub struct DriverObjectHead {
    fields_before_unload: [usize; 13],
    driver_unload: Option<DriverUnload>,
}

const _: () = assert!(core::mem::offset_of!(DriverObjectHead, driver_unload) == 0x68);

/// The driver's entry point, called once by the I/O manager at PASSIVE_LEVEL.
///
/// # Safety
/// Called by the kernel with a valid `DRIVER_OBJECT` and registry path.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn DriverEntry(
    driver_object: *mut DriverObjectHead,
    _registry_path: *const c_void,
) -> NtStatus {
    crate::klog!(
        Level::Info,
        "DriverEntry (portable image {})",
        env!("CARGO_PKG_VERSION")
    );
    // SAFETY: the kernel passes a valid, writable DRIVER_OBJECT (its first
    // 0x70 bytes are `DriverObjectHead`), and DriverEntry is where a driver
    // sets DriverUnload; a null pointer gives `None`.
    if let Some(driver) = unsafe { driver_object.as_mut() } {
        driver.driver_unload = Some(driver_unload);
    }
    STATUS_SUCCESS
}

/// Unload routine: waits for queued deferred work, so no code of the image
/// runs after it is unmapped.
unsafe extern "system" fn driver_unload(_driver_object: *mut DriverObjectHead) {
    crate::kernel::deferred::flush();
    crate::klog!(Level::Info, "unloaded");
}
