//! The adapter's iWARP transport: each miniport adapter's emulated NIC runs
//! iWARP over kernel TCP sockets (WSK), through a [`WskNet`] of its own.
//!
//! * `MiniportInitializeEx` (PASSIVE_LEVEL) registers a WSK client with
//!   `kernel_net`; `WskRegister` does not wait for WSK, and the provider
//!   is captured only when a listen or connect needs it, without waiting
//!   (`WSK_NO_WAIT`): while WSK is not up those fail and the next ones try
//!   again. Neither `DriverEntry` nor initialise ever blocks on WSK.
//! * The adapter's provider opens its NIC on the wire over that net
//!   (`provider::ndis::factory_on`).
//! * `MiniportHaltEx` (PASSIVE_LEVEL), once every NDK adapter is closed,
//!   calls [`halt`]: every socket still open is reset, the timers stop, and
//!   the halt waits (at most 5 s) for every close to complete; the
//!   registration goes (`WskDeregister`) with the last reference, in halt's
//!   `destroy`.

use crate::kernel::wsk::WskNet;

/// Bytes each connection buffers for sending (its WSK send ring), as the
/// host's streams do.
pub const SEND_RING: usize = 256 * 1024;

/// A WSK client registration and the net over it, or `None` when WSK
/// registration failed or memory ran out (the NIC then reaches only the
/// other NICs of the driver; logged). PASSIVE_LEVEL; never waits for WSK.
#[cfg(target_os = "windows")]
pub fn kernel_net() -> Option<alloc::sync::Arc<WskNet>> {
    use crate::kernel::log::Level;
    use crate::kernel::timers::{Timers, kernel_alarm};
    use crate::kernel::wsk::{Registration, RegistrationSource};

    let registration = match Registration::register() {
        Ok(registration) => registration,
        Err(status) => {
            crate::klog!(Level::Error, "WskRegister failed: {:#x}", status);
            return None;
        }
    };
    let alarm = kernel_alarm()?;
    let source = crate::kernel::mem::try_box(RegistrationSource(registration))?;
    Some(WskNet::new(source, Timers::new(alarm), SEND_RING))
}

/// Halt (PASSIVE_LEVEL, after every NDK adapter is closed): resets what is
/// left, stops the timers and waits, bounded, for every socket to close.
/// Returns whether none was left.
pub fn halt(net: &WskNet) -> bool {
    net.shutdown()
}
