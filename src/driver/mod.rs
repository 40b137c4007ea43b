//! The driver: a root-enumerated virtual NDIS 6.50 miniport (no hardware, in
//! the manner of the NDIS `netvmini` sample) that NDIS recognises as
//! RDMA-capable, and from which kernel consumers open NDK adapters backed by
//! the emulated RNIC.
//!
//! The logic is platform-neutral and unit-tested on the host; only the NDIS
//! entry points and the calls into `ndis.sys` are Windows code:
//!
//! | module | what | where |
//! |---|---|---|
//! | [`ndk`] | the [`NdkProvider`](ndk::NdkProvider) boundary, version negotiation (A1–A3) | everywhere |
//! | [`state`] | NDK enable / disable, open counting, the announcing work item (A5, A13–A15) | everywhere |
//! | [`addresses`] | the interface's IP addresses on the device: initial table, change notifications, DAD filter | everywhere |
//! | [`adapter`] | one miniport adapter: open / close handler bodies (A4–A6), pause, send accounting | everywhere |
//! | [`oid`] | OID requests: parsing, answers, NDK structure serialisation (A9, A13, A16–A21) | everywhere |
//! | [`attributes`] | characteristics and attributes handed to NDIS (A9–A12) | everywhere |
//! | [`transport`] | the NIC's iWARP transport: a WSK client and `WskNet` per adapter, torn down at halt | everywhere |
//! | [`config`] | registry keywords: `*NetworkDirect`, RoCE frame size, MAC address (A22–A24), VXLAN peers and VNI | everywhere |
//! | [`ether`] | the virtual Ethernet on the wire: VXLAN over WSK datagram sockets, send slots, receive buffers | everywhere |
//! | [`frames`] | the frame path's NDIS bookkeeping: receive NBLs out, pause / halt with NBLs out, low-pool indications, link, tick | everywhere |
//! | `ndis_sys` | hand-declared `ndis.sys` imports (`raw-dylib`) | Windows |
//! | `netio_sys` | hand-declared `netio.sys` imports (`raw-dylib`) | Windows |
//! | `miniport` | `DriverEntry` and every `extern "system"` handler | Windows |
//! | `rx_ndis` | the receive NBLs, their indication, link and pause completion over `ndis.sys` | Windows |
//!
//! `docs/driver.md` describes the IRQL and ownership rules each handler
//! follows, and which NDIS structure layouts are confirmed from symbols.

/// `$value` narrowed to the integer type `$to`, saturating at `$to::MAX`: a
/// `min` and a cast usable in `const` items, where `TryFrom` is not.
macro_rules! saturate {
    ($value:expr => $to:ty) => {{
        let value = $value;
        // `allow`, not `expect`: for a constant that fits, clippy sees no
        // truncation and an expectation would be unfulfilled.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "the value is at most the target's MAX when it is used"
        )]
        let narrowed = value as $to;
        if value > <$to>::MAX as _ {
            <$to>::MAX
        } else {
            narrowed
        }
    }};
}

pub mod adapter;
// The tracker feeds the NDIS-path provider (`provider::ndis`), which the
// loom build leaves out.
#[cfg(not(loom))]
pub mod addresses;
pub mod attributes;
pub mod config;
// The virtual Ethernet over WSK datagram sockets, which the loom build
// leaves out.
#[cfg(not(loom))]
pub mod ether;
// The frame path's NDIS bookkeeping over the port (same reason).
#[cfg(not(loom))]
pub mod frames;
pub mod ndk;
pub mod oid;
pub mod state;
// The NIC's iWARP transport over WSK, which the loom build leaves out.
#[cfg(not(loom))]
pub mod transport;

#[cfg(all(test, not(loom)))]
mod ether_tests;
#[cfg(all(test, not(loom)))]
mod frames_tests;
#[cfg(all(test, not(loom)))]
mod oid_count_tests;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
#[cfg(all(test, not(loom)))]
mod wsk_tests;

#[cfg(target_os = "windows")]
pub mod miniport;
#[cfg(target_os = "windows")]
mod ndis_sys;
#[cfg(target_os = "windows")]
mod netio_sys;
#[cfg(target_os = "windows")]
mod rx_ndis;
