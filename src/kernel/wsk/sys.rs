//! The routines the WSK glue imports, declared by hand (Windows only), in
//! the manner of `driver/netio_sys.rs`: `raw-dylib`, so the portable image
//! links without the WDK, and `tests/driver_image.rs` reads this file when
//! it checks that the image imports nothing undeclared.
//!
//! `km/wsk.h` (WDK 10.0.16299) declares the four registration routines
//! without an `NTDDI_VERSION` guard; `netio.sys` has exported them since
//! Windows Vista. The IRP and MDL routines are `km/wdm.h`'s, `NTDDI_WIN2K`.

use core::ffi::c_void;

use crate::abi::{Irp, Mdl, NtStatus, WskClientNpi, WskProviderNpi, WskRegistration};

#[link(name = "netio.sys", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    /// PASSIVE_LEVEL: registers a WSK client; `registration` stays in place
    /// until `WskDeregister` returns.
    pub(super) fn WskRegister(
        client_npi: *mut WskClientNpi,
        registration: *mut WskRegistration,
    ) -> NtStatus;
    /// PASSIVE_LEVEL with a wait, ≤ DISPATCH_LEVEL with `WSK_NO_WAIT`:
    /// captures the provider NPI (`STATUS_DEVICE_NOT_READY`: not yet).
    pub(super) fn WskCaptureProviderNPI(
        registration: *mut WskRegistration,
        wait_timeout: u32,
        provider_npi: *mut WskProviderNpi,
    ) -> NtStatus;
    /// ≤ DISPATCH_LEVEL: releases one capture.
    pub(super) fn WskReleaseProviderNPI(registration: *mut WskRegistration);
    /// PASSIVE_LEVEL: waits for every capture to be released and every
    /// socket to be closed, then deregisters.
    pub(super) fn WskDeregister(registration: *mut WskRegistration);
}

#[link(name = "ntoskrnl.exe", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    /// ≤ DISPATCH_LEVEL: an IRP with `stack_size` stack locations (`CCHAR`).
    pub(super) fn IoAllocateIrp(stack_size: i8, charge_quota: u8) -> *mut Irp;
    /// ≤ DISPATCH_LEVEL.
    pub(super) fn IoFreeIrp(irp: *mut Irp);
    /// ≤ DISPATCH_LEVEL: makes a completed IRP ready to be sent again.
    pub(super) fn IoReuseIrp(irp: *mut Irp, status: NtStatus);
    /// ≤ DISPATCH_LEVEL: an MDL for `length` bytes at `virtual_address`.
    pub(super) fn IoAllocateMdl(
        virtual_address: *mut c_void,
        length: u32,
        secondary_buffer: u8,
        charge_quota: u8,
        irp: *mut Irp,
    ) -> *mut Mdl;
    /// ≤ DISPATCH_LEVEL: fills the PFN array of an MDL over non-paged pool.
    pub(super) fn MmBuildMdlForNonPagedPool(mdl: *mut Mdl);
    /// ≤ DISPATCH_LEVEL.
    pub(super) fn IoFreeMdl(mdl: *mut Mdl);
}
