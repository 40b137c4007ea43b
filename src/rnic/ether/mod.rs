//! The virtual Ethernet's frame logic: VXLAN (RFC 7348) encapsulation, the
//! MAC learning table and the switch that floods or unicasts.
//!
//! Plain, safe, `no_std` Rust with no I/O: the caller (the NDIS miniport and
//! its WSK socket in the driver, a TAP device and a UDP socket in the host
//! harness of `tests/vxlan_linux.rs`) moves the bytes, passes a clock and
//! supplies every buffer. Nothing allocates per frame: the peer list and the
//! learning table are allocated once when the [`Switch`] is made. Nothing
//! panics: every read of received bytes is checked.
//!
//! * [`vxlan`] — the 8-byte header: build, and parse with every field checked.
//! * [`mac`] — Ethernet addresses.
//! * [`learn`] — the bounded, aging MAC → peer table.
//! * [`switch`] — the switch: transmit (unicast or flood), receive (check,
//!   learn, deliver), statistics.
//!
//! See `docs/ether.md` for the design.

pub mod learn;
pub mod mac;
pub mod switch;
pub mod vxlan;

pub use learn::{LearnTable, Learned, PeerIndex};
pub use mac::MacAddr;
pub use switch::{Config, ConfigError, RxDrop, Stats, Switch, Targets, Transmit, TxDrop};
pub use vxlan::{FrameBounds, ReservedBits, Vni};

#[cfg(test)]
mod tests;
