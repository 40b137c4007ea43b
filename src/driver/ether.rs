//! The miniport's virtual Ethernet on the wire: frames go out as VXLAN
//! (RFC 7348) over WSK datagram sockets to the peers of `SoftNdkPeers`, and
//! datagrams from them come back up as frames (`docs/ether.md`, "The
//! driver glue").
//!
//! Platform-neutral: the miniport (`miniport.rs`) feeds it the frames of
//! `MiniportSendNetBufferLists` and hands it a [`FrameSink`] that indicates
//! received frames with `NdisMIndicateReceiveNetBufferLists`; the host tests
//! drive the same object over the tests' WSK provider.
//!
//! * [`EtherPort::new`] (initialise, PASSIVE_LEVEL) makes everything it will
//!   ever use: the [`Switch`] (peer list, learning table), the transmit
//!   scratch buffers and the receive pool of [`RX_BUFFERS`] buffers. Nothing
//!   allocates per frame.
//! * [`EtherPort::start`] opens one datagram socket per underlay family the
//!   peers use, bound to the wildcard address, port 4789, each with
//!   [`TX_SLOTS`] send slots ([`WskDatagram`]). The link is up
//!   ([`FrameSink::link`]) once a socket is bound.
//! * Send ([`EtherPort::transmit`]): under the port's lock the frame is
//!   copied from its MDL chain (by the caller's closure) into the scratch
//!   buffer, `Switch::transmit` encapsulates it, and the payload is copied
//!   into one free send slot per destination (one for a unicast, one per
//!   peer for a flood); after the lock is released each slot is sent. The
//!   NBL can be completed at once: its bytes were copied. A destination with
//!   no free slot is dropped and counted (`tx_busy`), never queued.
//! * Receive (the socket's `WskReceiveFromEvent`): the datagram is copied
//!   into a free receive buffer, `Switch::receive` checks it and learns
//!   under the lock, and after the lock is released the inner frame is
//!   indicated ([`FrameSink::indicate`]); the buffer is in the sink's hands
//!   until [`EtherPort::return_buffer`] (`MiniportReturnNetBufferLists`). No
//!   free buffer: dropped and counted (`rx_no_buffer`).
//! * [`EtherPort::tick`] (a periodic timer) ages the learning table;
//!   [`EtherPort::halt`] closes the sockets, each once its sends completed;
//!   [`EtherPort::is_closed`] says when nothing is left.
//!
//! Lock order: the port's lock, then a socket's (taking a send slot); the
//! socket never calls back into the port with its lock held, and the sink
//! is never called with any lock held (rule I4).

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use super::adapter::FrameKind;
use crate::abi::NtStatus;
use crate::kernel::sync::SpinLock;
use crate::kernel::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::kernel::wsk::{Datagram, DatagramEvents, SendSlot, WskClient, WskDatagram};
use crate::rnic::ether::vxlan::{HEADER_LEN, UDP_PORT};
use crate::rnic::ether::{Config, ConfigError, ReservedBits, Stats, Switch, Vni};

/// Receive buffers (at most 64: one bit each).
pub const RX_BUFFERS: usize = 32;

/// Send slots per socket.
pub const TX_SLOTS: usize = 32;

/// Learned addresses kept at once.
pub const TABLE_CAPACITY: usize = 1024;

/// How long a learned address lives, in ms (Linux's bridge default, 300 s).
pub const MAX_AGE_MS: u64 = 300_000;

/// Where received frames go, and the link state.
pub trait FrameSink: Send + Sync {
    /// A received frame: `len` bytes at `offset` in receive buffer `index`
    /// ([`EtherPort::rx_buffer_ptr`]). The buffer is the sink's until it
    /// calls [`EtherPort::return_buffer`]. ≤ DISPATCH_LEVEL, no lock held.
    fn indicate(&self, index: usize, offset: usize, len: usize);
    /// The link went up (a socket is bound) or down.
    fn link(&self, up: bool);
}

/// Why a frame was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOutcome {
    /// Sent to every destination (or at least one of a flood).
    Sent,
    /// The frame could not be read from its buffers.
    Unreadable,
    /// The switch refused it (length, no peer); counted in its stats.
    Refused,
    /// No socket open, or no free send slot for any destination.
    NoResources,
}

/// The port's own counters, beside the switch's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Datagrams not sent: every send slot was busy, or no socket of the
    /// destination's family was open.
    pub tx_busy: u64,
    /// Frames that could not be read from their buffers.
    pub tx_unreadable: u64,
    /// Datagrams dropped for want of a free receive buffer, or too long
    /// for one.
    pub rx_no_buffer: u64,
    /// Frames indicated up.
    pub rx_indicated: u64,
    /// Of those, by kind (frames and bytes, Ethernet header included).
    pub rx: super::adapter::TxSnapshot,
}

/// What the lock guards: the switch and the transmit scratch buffers.
struct Inner {
    switch: Switch,
    frame: Box<[u8]>,
    payload: Box<[u8]>,
}

/// One socket per underlay family, and whether it is up.
struct Sockets {
    v4: Option<Arc<WskDatagram>>,
    v6: Option<Arc<WskDatagram>>,
}

/// The clock the switch ages entries with, in ms.
pub type Clock = Box<dyn Fn() -> u64 + Send + Sync>;

/// The adapter's virtual Ethernet port (see the module documentation).
pub struct EtherPort {
    inner: SpinLock<Inner>,
    sockets: SpinLock<Sockets>,
    peers: Box<[IpAddr]>,
    port: u16,
    datagram_len: usize,
    rx: Box<[SpinLock<Box<[u8]>>]>,
    rx_free: SpinLock<u64>,
    sink: Arc<dyn FrameSink>,
    clock: Clock,
    link_up: AtomicBool,
    tx_busy: AtomicU64,
    tx_unreadable: AtomicU64,
    rx_no_buffer: AtomicU64,
    rx_indicated: AtomicU64,
    rx_kinds: [[AtomicU64; 2]; 3],
}

crate::kernel::log::debug_fields!(EtherPort { peers, port });

/// A zeroed buffer of `len` bytes, or `None` when memory runs out.
fn zeroed(len: usize) -> Option<Box<[u8]>> {
    crate::kernel::mem::try_filled(len, 0_u8)
}

/// Why the port could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortError {
    /// The switch refused the configuration.
    Switch(ConfigError),
    /// The VNI is out of range.
    BadVni,
    /// No memory.
    NoMemory,
}

impl EtherPort {
    /// A port for an interface of IP `mtu`, VXLAN `vni`, sending to `peers`
    /// at UDP `port` (4789 in the driver; the tests may choose). Allocates
    /// everything now (PASSIVE_LEVEL).
    ///
    /// # Errors
    /// [`PortError`].
    pub fn new(
        mtu: u16,
        vni: u32,
        peers: &[IpAddr],
        port: u16,
        sink: Arc<dyn FrameSink>,
        clock: Clock,
    ) -> Result<Arc<Self>, PortError> {
        let vni = Vni::new(vni).ok_or(PortError::BadVni)?;
        if peers.len() > crate::driver::config::MAX_PEERS {
            return Err(PortError::Switch(ConfigError::TooManyPeers));
        }
        let config = Config {
            vni,
            port,
            mtu,
            table_capacity: TABLE_CAPACITY,
            max_age: MAX_AGE_MS,
            reserved_bits: ReservedBits::Refuse,
        };
        let switch = Switch::new(config, peers).map_err(PortError::Switch)?;
        let frame_len = switch.bounds().max;
        let datagram_len = frame_len + HEADER_LEN;
        let frame = zeroed(frame_len).ok_or(PortError::NoMemory)?;
        let payload = zeroed(datagram_len).ok_or(PortError::NoMemory)?;
        let mut rx = Vec::new();
        rx.try_reserve_exact(RX_BUFFERS)
            .map_err(|_| PortError::NoMemory)?;
        for _ in 0..RX_BUFFERS {
            rx.push(SpinLock::new(
                zeroed(datagram_len).ok_or(PortError::NoMemory)?,
            ));
        }
        let mut peer_list = Vec::new();
        peer_list
            .try_reserve_exact(switch.peers().len())
            .map_err(|_| PortError::NoMemory)?;
        peer_list.extend_from_slice(switch.peers());
        let port = Self {
            inner: SpinLock::new(Inner {
                switch,
                frame,
                payload,
            }),
            sockets: SpinLock::new(Sockets { v4: None, v6: None }),
            peers: peer_list.into_boxed_slice(),
            port,
            datagram_len,
            rx: rx.into_boxed_slice(),
            rx_free: SpinLock::new(all_free(RX_BUFFERS)),
            sink,
            clock,
            link_up: AtomicBool::new(false),
            tx_busy: AtomicU64::new(0),
            tx_unreadable: AtomicU64::new(0),
            rx_no_buffer: AtomicU64::new(0),
            rx_indicated: AtomicU64::new(0),
            rx_kinds: Default::default(),
        };
        Ok(Arc::new(port))
    }

    /// The peers, as the switch keeps them (IPv4-mapped as IPv4).
    #[must_use]
    pub fn peers(&self) -> &[IpAddr] {
        &self.peers
    }

    /// Opens the sockets (one per underlay family of the peers; IPv4 when
    /// there is none), bound to the wildcard at the port's UDP port
    /// (≤ DISPATCH_LEVEL). The link comes up when one is bound.
    ///
    /// # Errors
    /// No memory for a socket (those opened stay open; halt closes them).
    pub fn start(self: &Arc<Self>, client: &Arc<WskClient>) -> Result<(), NtStatus> {
        let want_v6 = self.peers.iter().any(IpAddr::is_ipv6);
        let want_v4 = self.peers.iter().any(IpAddr::is_ipv4) || !want_v6;
        let slot_len = self.datagram_len;
        if want_v4 {
            let events = Arc::new(PortEvents(Arc::downgrade(self)));
            let local = SocketAddr::new(IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED), self.port);
            let socket = WskDatagram::open(client, local, TX_SLOTS, slot_len, events)?;
            self.sockets.lock().v4 = Some(socket);
        }
        if want_v6 {
            let events = Arc::new(PortEvents(Arc::downgrade(self)));
            let local = SocketAddr::new(IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED), self.port);
            let socket = WskDatagram::open(client, local, TX_SLOTS, slot_len, events)?;
            self.sockets.lock().v6 = Some(socket);
        }
        Ok(())
    }

    /// Whether the link is up (a socket is bound).
    #[must_use]
    pub fn link_up(&self) -> bool {
        self.link_up.load(Ordering::Acquire)
    }

    /// Sends one outgoing frame: `copy` writes the frame into the buffer it
    /// is given and returns its length (`None`: unreadable). ≤
    /// DISPATCH_LEVEL; see the module documentation.
    pub fn transmit(&self, copy: impl FnOnce(&mut [u8]) -> Option<usize>) -> TxOutcome {
        let (v4, v6) = {
            let sockets = self.sockets.lock();
            (sockets.v4.clone(), sockets.v6.clone())
        };
        let mut ready: [Option<(SendSlot<'_>, SocketAddr)>; crate::driver::config::MAX_PEERS] =
            [const { None }; crate::driver::config::MAX_PEERS];
        let mut count = 0_usize;
        let mut busy = 0_u64;
        let payload_len;
        {
            let mut guard = self.inner.lock();
            let Inner {
                switch,
                frame,
                payload,
            } = &mut *guard;
            let Some(len) = copy(frame) else {
                self.tx_unreadable.fetch_add(1, Ordering::Relaxed);
                return TxOutcome::Unreadable;
            };
            let Some(bytes) = frame.get(..len) else {
                self.tx_unreadable.fetch_add(1, Ordering::Relaxed);
                return TxOutcome::Unreadable;
            };
            let now = (self.clock)();
            let Ok(out) = switch.transmit(bytes, now, payload) else {
                return TxOutcome::Refused;
            };
            payload_len = out.len;
            let Some(datagram) = payload.get(..out.len) else {
                return TxOutcome::Refused;
            };
            for to in out.targets.addrs() {
                let socket = if to.is_ipv4() {
                    v4.as_ref()
                } else {
                    v6.as_ref()
                };
                let slot = socket.and_then(|s| s.slot());
                match (slot, ready.get_mut(count)) {
                    (Some(mut slot), Some(entry)) => {
                        if let Some(dst) = slot.buffer().get_mut(..datagram.len()) {
                            dst.copy_from_slice(datagram);
                            *entry = Some((slot, to));
                            count += 1;
                        } else {
                            busy += 1;
                        }
                    }
                    _ => busy += 1,
                }
            }
        }
        if busy > 0 {
            self.tx_busy.fetch_add(busy, Ordering::Relaxed);
        }
        for entry in &mut ready {
            if let Some((slot, to)) = entry.take() {
                slot.send(to, payload_len);
            }
        }
        if count == 0 {
            TxOutcome::NoResources
        } else {
            TxOutcome::Sent
        }
    }

    /// A datagram arrived (the socket's receive event).
    fn received(&self, from: SocketAddr, datagram: &Datagram<'_>) {
        let Some(index) = self.take_rx() else {
            self.rx_no_buffer.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Some(buffer) = self.rx.get(index) else {
            return;
        };
        let delivered = {
            let mut bytes = buffer.lock();
            match datagram.copy_to(&mut bytes) {
                None => {
                    self.rx_no_buffer.fetch_add(1, Ordering::Relaxed);
                    None
                }
                Some(n) => {
                    let now = (self.clock)();
                    let mut inner = self.inner.lock();
                    bytes
                        .get(..n)
                        .and_then(|d| inner.switch.receive(from.ip(), d, now).ok())
                        .map(|frame| {
                            let kind = frame
                                .first_chunk::<6>()
                                .map_or(FrameKind::Unicast, FrameKind::of);
                            (n.saturating_sub(frame.len()), frame.len(), kind)
                        })
                }
            }
        };
        match delivered {
            Some((offset, len, kind)) => {
                self.rx_indicated.fetch_add(1, Ordering::Relaxed);
                let [unicast, multicast, broadcast] = &self.rx_kinds;
                let [frames, octets] = match kind {
                    FrameKind::Unicast => unicast,
                    FrameKind::Multicast => multicast,
                    FrameKind::Broadcast => broadcast,
                };
                frames.fetch_add(1, Ordering::Relaxed);
                octets.fetch_add(len as u64, Ordering::Relaxed);
                self.sink.indicate(index, offset, len);
            }
            None => self.return_buffer(index),
        }
    }

    fn take_rx(&self) -> Option<usize> {
        let mut free = self.rx_free.lock();
        if *free == 0 {
            return None;
        }
        let index = free.trailing_zeros() as usize;
        *free &= !(1_u64 << index);
        Some(index)
    }

    /// Gives receive buffer `index` back (`MiniportReturnNetBufferLists`).
    pub fn return_buffer(&self, index: usize) {
        if index < self.rx.len() {
            *self.rx_free.lock() |= 1_u64 << index;
        }
    }

    /// Receive buffers in the sink's hands (or being filled).
    #[must_use]
    pub fn rx_outstanding(&self) -> usize {
        RX_BUFFERS - self.rx_free.lock().count_ones() as usize
    }

    /// The address of receive buffer `index` and its length, for the
    /// miniport's NBL and MDL over it (made once, at initialise). The
    /// buffer never moves while the port lives.
    #[must_use]
    pub fn rx_buffer_ptr(&self, index: usize) -> Option<(*mut u8, usize)> {
        let mut bytes = self.rx.get(index)?.lock();
        Some((bytes.as_mut_ptr(), bytes.len()))
    }

    /// Reads receive buffer `index` (the sink's, between `indicate` and
    /// `return_buffer`).
    pub fn with_rx_buffer<R>(&self, index: usize, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let bytes = self.rx.get(index)?.lock();
        Some(read(&bytes))
    }

    /// Ages the learning table (a periodic timer); returns how many
    /// addresses went.
    pub fn tick(&self) -> usize {
        let now = (self.clock)();
        self.inner.lock().switch.expire(now)
    }

    /// The switch's counters.
    #[must_use]
    pub fn switch_stats(&self) -> Stats {
        *self.inner.lock().switch.stats()
    }

    /// The port's own counters.
    #[must_use]
    pub fn stats(&self) -> PortStats {
        PortStats {
            tx_busy: self.tx_busy.load(Ordering::Relaxed),
            tx_unreadable: self.tx_unreadable.load(Ordering::Relaxed),
            rx_no_buffer: self.rx_no_buffer.load(Ordering::Relaxed),
            rx_indicated: self.rx_indicated.load(Ordering::Relaxed),
            rx: super::adapter::TxSnapshot {
                unicast: self.kind_count(0),
                multicast: self.kind_count(1),
                broadcast: self.kind_count(2),
            },
        }
    }

    fn kind_count(&self, kind: usize) -> super::adapter::FrameCount {
        let Some([frames, octets]) = self.rx_kinds.get(kind) else {
            return super::adapter::FrameCount::default();
        };
        super::adapter::FrameCount {
            frames: frames.load(Ordering::Relaxed),
            octets: octets.load(Ordering::Relaxed),
        }
    }

    /// Halt: the link goes down and every socket closes once its sends
    /// have completed.
    pub fn halt(&self) {
        let (v4, v6) = {
            let sockets = self.sockets.lock();
            (sockets.v4.clone(), sockets.v6.clone())
        };
        for socket in [v4, v6].into_iter().flatten() {
            socket.close();
        }
        if self.link_up.swap(false, Ordering::AcqRel) {
            self.sink.link(false);
        }
    }

    /// Whether every socket is closed (after [`halt`](Self::halt)).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        let sockets = self.sockets.lock();
        [&sockets.v4, &sockets.v6]
            .into_iter()
            .flatten()
            .all(|s| s.is_closed())
    }

    fn ready(&self, result: Result<(), NtStatus>) {
        if result.is_ok() && !self.link_up.swap(true, Ordering::AcqRel) {
            self.sink.link(true);
        }
        if let Err(status) = result {
            crate::klog!(
                crate::kernel::log::Level::Error,
                "VXLAN socket setup failed: {:#x}",
                status
            );
        }
    }
}

const fn all_free(count: usize) -> u64 {
    if count >= 64 {
        u64::MAX
    } else {
        (1_u64 << count) - 1
    }
}

/// The events of the port's sockets (a weak reference: the port owns the
/// sockets).
struct PortEvents(Weak<EtherPort>);

impl DatagramEvents for PortEvents {
    fn ready(&self, result: Result<(), NtStatus>) {
        if let Some(port) = self.0.upgrade() {
            port.ready(result);
        }
    }

    fn received(&self, from: SocketAddr, datagram: &Datagram<'_>) {
        if let Some(port) = self.0.upgrade() {
            port.received(from, datagram);
        }
    }
}

/// The UDP port VXLAN uses.
pub const VXLAN_PORT: u16 = UDP_PORT;
