//! One miniport adapter, platform-neutral: its configuration, its emulated
//! NIC and NDK provider, the NDK state, the open-adapter and close-adapter
//! handler bodies, and the Ethernet-side state the OIDs report.
//!
//! The Windows glue (`miniport.rs`) owns an [`Adapter`] per
//! `MiniportInitializeEx` and forwards every NDIS call to it; the host tests
//! drive the same object directly.

use alloc::boxed::Box;
use core::ptr::NonNull;

use crate::abi::{NDIS_STATUS_FAILURE, NDIS_STATUS_PAUSED, NDIS_STATUS_SUCCESS};
use crate::abi::{NdisStatus, NdkAdapter, NdkVersion};
use crate::kernel::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::kernel::sync::{Arc, SpinLock};
use crate::rnic::device::Device;

use super::config::{AdapterConfig, MAC_LEN};
use super::ndk::{NdkProvider, negotiate_version};
use super::oid::MAX_MULTICAST_LIST;
use super::state::NdkState;

/// The kind of an Ethernet frame, from its destination address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A single station.
    Unicast,
    /// A group address other than broadcast.
    Multicast,
    /// `ff:ff:ff:ff:ff:ff`.
    Broadcast,
}

impl FrameKind {
    /// The kind of a frame sent to `destination`.
    #[must_use]
    pub fn of(destination: &[u8; MAC_LEN]) -> Self {
        if destination.iter().all(|&b| b == 0xFF) {
            Self::Broadcast
        } else if destination[0] & 0x01 != 0 {
            Self::Multicast
        } else {
            Self::Unicast
        }
    }
}

#[derive(Debug, Default)]
struct FrameCounter {
    frames: AtomicU64,
    octets: AtomicU64,
}

impl FrameCounter {
    fn add(&self, octets: u64) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.octets.fetch_add(octets, Ordering::Relaxed);
    }

    fn read(&self) -> FrameCount {
        FrameCount {
            frames: self.frames.load(Ordering::Relaxed),
            octets: self.octets.load(Ordering::Relaxed),
        }
    }
}

/// Frames and bytes of one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCount {
    /// Frames.
    pub frames: u64,
    /// Bytes, Ethernet header included.
    pub octets: u64,
}

/// What the adapter has sent, by kind (for the general statistics OIDs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxSnapshot {
    /// Unicast frames.
    pub unicast: FrameCount,
    /// Multicast frames.
    pub multicast: FrameCount,
    /// Broadcast frames.
    pub broadcast: FrameCount,
}

impl FrameCount {
    /// Both counts added, each saturating.
    #[must_use]
    pub const fn saturating_add(self, other: Self) -> Self {
        Self {
            frames: self.frames.saturating_add(other.frames),
            octets: self.octets.saturating_add(other.octets),
        }
    }
}

impl TxSnapshot {
    /// Every kind together.
    #[must_use]
    pub const fn total(&self) -> FrameCount {
        self.unicast
            .saturating_add(self.multicast)
            .saturating_add(self.broadcast)
    }

    /// All frames.
    #[must_use]
    pub const fn frames(&self) -> u64 {
        self.total().frames
    }

    /// All bytes.
    #[must_use]
    pub const fn octets(&self) -> u64 {
        self.total().octets
    }
}

/// The multicast addresses set with `OID_802_3_MULTICAST_LIST`.
#[derive(Clone, Copy, Debug)]
pub struct MulticastList {
    bytes: [u8; MAX_MULTICAST_LIST * MAC_LEN],
    len: usize,
}

impl MulticastList {
    const EMPTY: Self = Self {
        bytes: [0; MAX_MULTICAST_LIST * MAC_LEN],
        len: 0,
    };

    /// The addresses, six bytes each.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

/// One miniport adapter (see the module documentation).
pub struct Adapter {
    config: AdapterConfig,
    permanent_mac: [u8; MAC_LEN],
    device: Arc<Device>,
    provider: Box<dyn NdkProvider>,
    ndk: NdkState,
    packet_filter: AtomicU32,
    lookahead: AtomicU32,
    multicast: SpinLock<MulticastList>,
    paused: AtomicBool,
    unicast: FrameCounter,
    multicast_tx: FrameCounter,
    broadcast: FrameCounter,
    /// Frames the wire refused or had no room for.
    xmit_errors: AtomicU64,
    /// The virtual Ethernet's port on the wire (`None`: no far end; every
    /// frame is consumed as before, `docs/ether.md`).
    #[cfg(not(loom))]
    ether: SpinLock<Option<Arc<super::ether::EtherPort>>>,
}

crate::kernel::log::debug_fields!(Adapter { config, ndk });

impl Adapter {
    /// A new adapter: NDK enabled exactly when `*NetworkDirect` permits it,
    /// paused (NDIS restarts it after initialisation).
    #[must_use]
    pub fn new(
        config: AdapterConfig,
        permanent_mac: [u8; MAC_LEN],
        device: Arc<Device>,
        provider: Box<dyn NdkProvider>,
    ) -> Self {
        Self {
            ndk: NdkState::new(config.network_direct),
            lookahead: AtomicU32::new(config.mtu()),
            config,
            permanent_mac,
            device,
            provider,
            packet_filter: AtomicU32::new(0),
            multicast: SpinLock::new(MulticastList::EMPTY),
            paused: AtomicBool::new(true),
            unicast: FrameCounter::default(),
            multicast_tx: FrameCounter::default(),
            broadcast: FrameCounter::default(),
            xmit_errors: AtomicU64::new(0),
            #[cfg(not(loom))]
            ether: SpinLock::new(None),
        }
    }

    /// The configuration read at initialisation.
    #[must_use]
    pub const fn config(&self) -> &AdapterConfig {
        &self.config
    }

    /// The generated, "burned-in" MAC address.
    #[must_use]
    pub const fn permanent_mac(&self) -> [u8; MAC_LEN] {
        self.permanent_mac
    }

    /// The emulated NIC.
    #[must_use]
    pub const fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The NDK provider.
    #[must_use]
    pub fn provider(&self) -> &dyn NdkProvider {
        self.provider.as_ref()
    }

    /// The NDK state.
    #[must_use]
    pub const fn ndk(&self) -> &NdkState {
        &self.ndk
    }

    /// The body of `OPEN_NDK_ADAPTER_HANDLER` (PASSIVE_LEVEL): version
    /// negotiation (rules A1–A3), refusal while NDK is disabled (A5), then the
    /// provider's open, whose adapter must carry the negotiated version (A4).
    /// Several adapters may be open at once (A6).
    ///
    /// # Errors
    /// `NDIS_STATUS_BAD_VERSION`, `NDIS_STATUS_ADAPTER_NOT_READY`, the
    /// provider's status (`NDIS_STATUS_RESOURCES` when out of memory), or
    /// `NDIS_STATUS_FAILURE` when the provider's adapter carries another
    /// version (a provider bug, never shown to the consumer).
    pub fn open_ndk_adapter(
        &self,
        requested: NdkVersion,
    ) -> Result<NonNull<NdkAdapter>, NdisStatus> {
        let version = negotiate_version(requested)?;
        self.ndk.begin_open()?;
        let adapter = match self.provider.open_adapter(version) {
            Ok(adapter) => adapter,
            Err(status) => {
                self.ndk.end_open(false);
                return Err(status);
            }
        };
        // SAFETY: `NdkProvider` is an unsafe trait whose implementations
        // promise that a returned adapter points to a valid, initialised
        // `NDK_ADAPTER` until it is closed; it has just been opened and nobody
        // else has it yet. The header is read through the raw pointer.
        let stamped = unsafe { (*adapter.as_ptr()).header.version };
        if stamped != version {
            crate::klog!(
                crate::kernel::log::Level::Error,
                "provider opened an adapter with version {}.{}, negotiated {}.{}",
                stamped.major,
                stamped.minor,
                version.major,
                version.minor
            );
            self.provider.close_adapter(adapter);
            self.ndk.end_open(false);
            return Err(NDIS_STATUS_FAILURE);
        }
        self.ndk.end_open(true);
        Ok(adapter)
    }

    /// The body of `CLOSE_NDK_ADAPTER_HANDLER` (PASSIVE_LEVEL): the provider
    /// closes the adapter and returns once no callback of its objects runs
    /// (L27). It takes no lock the NDK work item holds, so NDIS may close
    /// adapters while `NetEventNDKDisable` is pending (rule A15).
    pub fn close_ndk_adapter(&self, adapter: NonNull<NdkAdapter>) {
        self.provider.close_adapter(adapter);
        self.ndk.closed();
    }

    /// `MiniportPauseEx`: sends are refused from now on. Every send completes
    /// before the send handler returns, so nothing is outstanding and the
    /// pause is complete at once.
    pub fn pause(&self) {
        self.paused.store(true, Ordering::Release);
    }

    /// `MiniportRestartEx`.
    pub fn restart(&self) {
        self.paused.store(false, Ordering::Release);
    }

    /// The status sends complete with: `NDIS_STATUS_PAUSED` while paused,
    /// otherwise success (the frame is consumed by the virtual wire).
    #[must_use]
    pub fn send_status(&self) -> NdisStatus {
        if self.paused.load(Ordering::Acquire) {
            NDIS_STATUS_PAUSED
        } else {
            NDIS_STATUS_SUCCESS
        }
    }

    /// Counts one sent frame of `octets` bytes.
    pub fn account_sent(&self, kind: FrameKind, octets: u64) {
        match kind {
            FrameKind::Unicast => self.unicast.add(octets),
            FrameKind::Multicast => self.multicast_tx.add(octets),
            FrameKind::Broadcast => self.broadcast.add(octets),
        }
    }

    /// Attaches the virtual Ethernet's port (initialise): from now on sends
    /// go out through it and the statistics and link state are its.
    #[cfg(not(loom))]
    pub fn attach_ether(&self, port: Arc<super::ether::EtherPort>) {
        *self.ether.lock() = Some(port);
    }

    /// The virtual Ethernet's port, if attached.
    #[cfg(not(loom))]
    #[must_use]
    pub fn ether(&self) -> Option<Arc<super::ether::EtherPort>> {
        self.ether.lock().clone()
    }

    /// Sends one frame of `octets` bytes to `destination` (≤
    /// DISPATCH_LEVEL): `copy` writes the frame into the buffer it is given
    /// (see `EtherPort::transmit`). The status to complete its NBL with:
    /// `NDIS_STATUS_PAUSED` while paused; with no port, success (consumed);
    /// otherwise success when sent, `NDIS_STATUS_RESOURCES` when no send
    /// slot was free, `NDIS_STATUS_FAILURE` when the switch refused it or it
    /// could not be read (those two counted as transmit errors).
    #[cfg(not(loom))]
    pub fn transmit_frame(
        &self,
        destination: Option<[u8; MAC_LEN]>,
        octets: u64,
        copy: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> NdisStatus {
        use super::ether::TxOutcome;
        use crate::abi::NDIS_STATUS_RESOURCES;
        let status = self.send_status();
        if status < 0 {
            return status;
        }
        let kind = destination.map_or(FrameKind::Unicast, |d| FrameKind::of(&d));
        let Some(port) = self.ether() else {
            self.account_sent(kind, octets);
            return NDIS_STATUS_SUCCESS;
        };
        match port.transmit(copy) {
            TxOutcome::Sent => {
                self.account_sent(kind, octets);
                NDIS_STATUS_SUCCESS
            }
            TxOutcome::NoResources => {
                self.xmit_errors.fetch_add(1, Ordering::Relaxed);
                NDIS_STATUS_RESOURCES
            }
            TxOutcome::Refused | TxOutcome::Unreadable => {
                self.xmit_errors.fetch_add(1, Ordering::Relaxed);
                NDIS_STATUS_FAILURE
            }
        }
    }

    /// Frames not sent for an error (`OID_GEN_XMIT_ERROR`).
    #[must_use]
    pub fn xmit_errors(&self) -> u64 {
        self.xmit_errors.load(Ordering::Relaxed)
    }

    /// What has been received and indicated, by kind (zero with no port).
    #[must_use]
    pub fn rx_counters(&self) -> TxSnapshot {
        #[cfg(not(loom))]
        if let Some(port) = self.ether() {
            return port.stats().rx;
        }
        TxSnapshot::default()
    }

    /// Received datagrams dropped as malformed or from a stranger
    /// (`OID_GEN_RCV_ERROR`), and for want of a receive buffer
    /// (`OID_GEN_RCV_NO_BUFFER`).
    #[must_use]
    pub fn rx_errors(&self) -> (u64, u64) {
        #[cfg(not(loom))]
        if let Some(port) = self.ether() {
            return (port.switch_stats().rx_dropped(), port.stats().rx_no_buffer);
        }
        (0, 0)
    }

    /// Whether the medium is connected: with a port, once its socket is
    /// bound; without, always (the wire has no far end to lose).
    #[must_use]
    pub fn media_connected(&self) -> bool {
        #[cfg(not(loom))]
        if let Some(port) = self.ether() {
            return port.link_up();
        }
        true
    }

    /// What has been sent.
    #[must_use]
    pub fn tx_counters(&self) -> TxSnapshot {
        TxSnapshot {
            unicast: self.unicast.read(),
            multicast: self.multicast_tx.read(),
            broadcast: self.broadcast.read(),
        }
    }

    /// `OID_GEN_CURRENT_PACKET_FILTER`.
    #[must_use]
    pub fn packet_filter(&self) -> u32 {
        self.packet_filter.load(Ordering::Relaxed)
    }

    /// Sets `OID_GEN_CURRENT_PACKET_FILTER` (no receive path to filter; kept
    /// to answer queries).
    pub fn set_packet_filter(&self, filter: u32) {
        self.packet_filter.store(filter, Ordering::Relaxed);
    }

    /// `OID_GEN_CURRENT_LOOKAHEAD`.
    #[must_use]
    pub fn lookahead(&self) -> u32 {
        self.lookahead.load(Ordering::Relaxed)
    }

    /// Sets `OID_GEN_CURRENT_LOOKAHEAD`.
    pub fn set_lookahead(&self, lookahead: u32) {
        self.lookahead.store(lookahead, Ordering::Relaxed);
    }

    /// `OID_802_3_MULTICAST_LIST`.
    #[must_use]
    pub fn multicast_list(&self) -> MulticastList {
        *self.multicast.lock()
    }

    /// Sets `OID_802_3_MULTICAST_LIST`; `bytes` holds whole addresses and at
    /// most [`MAX_MULTICAST_LIST`] of them (checked by the OID handler; a
    /// longer list is cut).
    pub fn set_multicast_list(&self, bytes: &[u8]) {
        let mut list = self.multicast.lock();
        let len = bytes.len().min(list.bytes.len());
        if let (Some(dst), Some(src)) = (list.bytes.get_mut(..len), bytes.get(..len)) {
            dst.copy_from_slice(src);
            list.len = len;
        }
    }

    /// `MiniportHaltEx`, first half: NDK is disabled and nothing more is
    /// announced. Returns whether the NDK work item is idle; the caller waits
    /// until [`NdkState::worker_idle`] and then calls
    /// [`finish_halt`](Self::finish_halt).
    pub fn begin_halt(&self) -> bool {
        self.pause();
        self.ndk.halt()
    }

    /// `MiniportHaltEx`, second half, once the work item is idle: the provider
    /// tears down every NDK object left. Dropping the adapter then frees the
    /// provider and the emulated NIC.
    pub fn finish_halt(&self) {
        self.provider.close_all();
    }
}
