//! The `netio.sys` routines the driver calls to learn its interface's IP
//! addresses, declared by hand (Windows only), in the manner of
//! `ndis_sys.rs`: `raw-dylib`, so the portable image links without the WDK,
//! and `tests/driver_image.rs` reads this file when it checks that the
//! image imports nothing undeclared.
//!
//! Prototypes and IRQLs follow `shared/netioapi.h` (WDK 10.0.16299); every
//! one is declared there without an `NTDDI_VERSION` guard (Windows Vista
//! and later). The structures are in `abi::netio`.

use core::ffi::c_void;

use crate::abi::{
    AddressFamily, Boolean, MibUnicastIpAddressRow, MibUnicastIpAddressTable, NetioStatus,
    UnicastIpAddressChangeCallback,
};

#[link(name = "netio.sys", kind = "raw-dylib", modifiers = "+verbatim")]
unsafe extern "system" {
    /// PASSIVE_LEVEL: the unicast address table of `family` (`AF_UNSPEC`:
    /// both), allocated by the callee, freed with `FreeMibTable`.
    pub(super) fn GetUnicastIpAddressTable(
        family: AddressFamily,
        table: *mut *mut MibUnicastIpAddressTable,
    ) -> NetioStatus;
    /// PASSIVE_LEVEL: frees a table the routines above allocated.
    pub(super) fn FreeMibTable(memory: *mut c_void);
    /// PASSIVE_LEVEL: fills the row whose key (`Address` and
    /// `InterfaceLuid` or `InterfaceIndex`) is set.
    pub(super) fn GetUnicastIpAddressEntry(row: *mut MibUnicastIpAddressRow) -> NetioStatus;
    /// PASSIVE_LEVEL: registers `callback` for changes of unicast addresses
    /// of `family`; the callback runs at PASSIVE_LEVEL.
    pub(super) fn NotifyUnicastIpAddressChange(
        family: AddressFamily,
        callback: UnicastIpAddressChangeCallback,
        caller_context: *mut c_void,
        initial_notification: Boolean,
        notification_handle: *mut *mut c_void,
    ) -> NetioStatus;
    /// PASSIVE_LEVEL, never from the callback: deregisters; returns once no
    /// callback of the registration runs.
    pub(super) fn CancelMibChangeNotify2(notification_handle: *mut c_void) -> NetioStatus;
}
