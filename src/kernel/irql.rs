//! The current IRQL, for the callers that must tell NDIS whether they run
//! at DISPATCH_LEVEL (`NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL`, the frame path
//! of `driver::frames`).
//!
//! On x64 `KeGetCurrentIrql` is not an export: `wdm.h` defines it inline
//! as a read of the CR8 register (the task priority register, which holds
//! the IRQL), and so does this. On the host there is no IRQL: PASSIVE.

/// `DISPATCH_LEVEL` (2).
pub const DISPATCH_LEVEL: u8 = 2;

/// The current IRQL.
#[cfg(all(target_os = "windows", target_arch = "x86_64"))]
#[must_use]
pub fn current() -> u8 {
    let cr8: u64;
    // SAFETY: the driver runs in kernel mode, where reading CR8 is allowed
    // and has no side effect (it is `KeGetCurrentIrql` on x64).
    unsafe {
        core::arch::asm!("mov {}, cr8", out(reg) cr8, options(nomem, nostack, preserves_flags));
    }
    u8::try_from(cr8 & 0xF).unwrap_or(0)
}

/// The current IRQL (the host has none: PASSIVE_LEVEL).
#[cfg(not(all(target_os = "windows", target_arch = "x86_64")))]
#[must_use]
pub const fn current() -> u8 {
    0
}

/// Whether the caller runs at DISPATCH_LEVEL or above.
#[must_use]
pub fn at_dispatch() -> bool {
    current() >= DISPATCH_LEVEL
}
