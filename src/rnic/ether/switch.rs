//! The switch: for an outgoing frame, which peers get it; for a received
//! datagram, whether it is delivered and what is learned from it.
//!
//! * Transmit: a frame to a group address (broadcast, multicast) or to an
//!   address not in the learning table is flooded to every configured peer;
//!   a frame to a learned address goes to that peer only. The VXLAN payload
//!   is built once into the caller's buffer: the same bytes go to each peer.
//! * Receive: the datagram must come from a configured peer (by IP address;
//!   the UDP source port is free, as RFC 7348 §5 lets senders hash flows to
//!   it), pass [`vxlan::parse`], and carry a valid inner source address. Only
//!   then is the source address learned behind that peer and the frame
//!   delivered. A frame received from a peer is never sent on to another:
//!   every machine is an end, not a bridge, so no loops can form.
//! * Every frame in or out is counted, and every drop is counted by reason
//!   ([`Stats`]).

use alloc::collections::TryReserveError;
use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use super::learn::{LearnTable, Learned, PeerIndex};
use super::mac::MacAddr;
use super::vxlan::{self, FrameBounds, FrameLenError, ParseError, ReservedBits, Vni};

/// The most peers a switch accepts.
pub const MAX_PEERS: usize = 256;

/// The switch's settings.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The VXLAN Network Identifier sent and required.
    pub vni: Vni,
    /// The UDP destination port of the peers ([`vxlan::UDP_PORT`]).
    pub port: u16,
    /// The IP MTU of the virtual interface: bounds inner frames both ways.
    pub mtu: u16,
    /// The most MAC addresses learned at once.
    pub table_capacity: usize,
    /// How long a learned address stays valid, in the caller's clock units.
    pub max_age: u64,
    /// What to do with reserved header bits on receipt.
    pub reserved_bits: ReservedBits,
}

/// Why a switch could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// More than [`MAX_PEERS`] peers.
    TooManyPeers,
    /// The same address twice (IPv4 and IPv4-mapped IPv6 count as one).
    DuplicatePeer,
    /// A peer address that names no machine: unspecified, multicast or
    /// broadcast.
    BadPeer,
    /// The learning table or the peer list could not be allocated.
    NoMemory,
}

impl From<TryReserveError> for ConfigError {
    fn from(_: TryReserveError) -> Self {
        Self::NoMemory
    }
}

/// Why an outgoing frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxDrop {
    /// Shorter than an Ethernet header.
    TooShort,
    /// Longer than the MTU allows.
    TooLong,
    /// The caller's buffer cannot hold the VXLAN payload.
    BufferTooSmall,
    /// No peer is configured.
    NoPeers,
}

/// Why a received datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxDrop {
    /// Not from a configured peer.
    UnknownPeer,
    /// Refused by [`vxlan::parse`].
    Malformed(ParseError),
    /// The inner source address is a group address or zero.
    BadSourceMac,
}

/// Counters of frames, bytes and drops. Bytes are inner Ethernet frame bytes
/// (header included, no FCS), as the virtual interface reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames sent (each counted once however many peers got it).
    pub tx_frames: u64,
    /// Bytes of the frames sent.
    pub tx_bytes: u64,
    /// Frames sent to one learned peer.
    pub tx_unicast: u64,
    /// Frames flooded to every peer.
    pub tx_flooded: u64,
    /// Frames delivered up.
    pub rx_frames: u64,
    /// Bytes of the frames delivered.
    pub rx_bytes: u64,
    /// Addresses newly learned.
    pub learned: u64,
    /// Addresses that moved from one peer to another.
    pub moved: u64,
    /// Addresses not learned because the table was full.
    pub learn_table_full: u64,
    /// Outgoing frames dropped: too short.
    pub tx_drop_too_short: u64,
    /// Outgoing frames dropped: too long.
    pub tx_drop_too_long: u64,
    /// Outgoing frames dropped: the buffer was too small.
    pub tx_drop_buffer: u64,
    /// Outgoing frames dropped: no peer.
    pub tx_drop_no_peers: u64,
    /// Datagrams dropped: not from a configured peer.
    pub rx_drop_unknown_peer: u64,
    /// Datagrams dropped: shorter than the VXLAN header.
    pub rx_drop_truncated: u64,
    /// Datagrams dropped: I flag clear.
    pub rx_drop_flag_i: u64,
    /// Datagrams dropped: a reserved bit set.
    pub rx_drop_reserved: u64,
    /// Datagrams dropped: another VNI.
    pub rx_drop_vni: u64,
    /// Datagrams dropped: inner frame too short.
    pub rx_drop_inner_short: u64,
    /// Datagrams dropped: inner frame too long.
    pub rx_drop_inner_long: u64,
    /// Datagrams dropped: invalid inner source address.
    pub rx_drop_source_mac: u64,
}

impl Stats {
    /// All outgoing frames dropped, whatever the reason.
    pub const fn tx_dropped(&self) -> u64 {
        self.tx_drop_too_short
            .saturating_add(self.tx_drop_too_long)
            .saturating_add(self.tx_drop_buffer)
            .saturating_add(self.tx_drop_no_peers)
    }

    /// All received datagrams dropped, whatever the reason.
    pub const fn rx_dropped(&self) -> u64 {
        self.rx_drop_unknown_peer
            .saturating_add(self.rx_drop_truncated)
            .saturating_add(self.rx_drop_flag_i)
            .saturating_add(self.rx_drop_reserved)
            .saturating_add(self.rx_drop_vni)
            .saturating_add(self.rx_drop_inner_short)
            .saturating_add(self.rx_drop_inner_long)
            .saturating_add(self.rx_drop_source_mac)
    }

    fn count_tx_drop(&mut self, drop: TxDrop) {
        let counter = match drop {
            TxDrop::TooShort => &mut self.tx_drop_too_short,
            TxDrop::TooLong => &mut self.tx_drop_too_long,
            TxDrop::BufferTooSmall => &mut self.tx_drop_buffer,
            TxDrop::NoPeers => &mut self.tx_drop_no_peers,
        };
        *counter = counter.saturating_add(1);
    }

    fn count_rx_drop(&mut self, drop: RxDrop) {
        let counter = match drop {
            RxDrop::UnknownPeer => &mut self.rx_drop_unknown_peer,
            RxDrop::BadSourceMac => &mut self.rx_drop_source_mac,
            RxDrop::Malformed(e) => match e {
                ParseError::Truncated => &mut self.rx_drop_truncated,
                ParseError::FlagIClear => &mut self.rx_drop_flag_i,
                ParseError::ReservedBits => &mut self.rx_drop_reserved,
                ParseError::WrongVni { .. } => &mut self.rx_drop_vni,
                ParseError::InnerTooShort => &mut self.rx_drop_inner_short,
                ParseError::InnerTooLong => &mut self.rx_drop_inner_long,
            },
        };
        *counter = counter.saturating_add(1);
    }
}

fn bump(counter: &mut u64, by: usize) {
    *counter = counter.saturating_add(u64::try_from(by).unwrap_or(u64::MAX));
}

/// Where an outgoing datagram goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Targets<'s> {
    /// To the one peer the destination was learned behind.
    Unicast(SocketAddr),
    /// To every configured peer, at `port`.
    Flood {
        /// The peers' addresses.
        peers: &'s [IpAddr],
        /// Their UDP port.
        port: u16,
    },
}

impl<'s> Targets<'s> {
    /// The one destination of a unicast; `None` for a flood, which goes to
    /// every configured peer ([`Switch::peers`], at [`Config::port`]). The
    /// peer list does not change after configuration, so a caller may keep
    /// its own copy and send after releasing the switch's lock.
    pub fn unicast(&self) -> Option<SocketAddr> {
        match *self {
            Self::Unicast(addr) => Some(addr),
            Self::Flood { .. } => None,
        }
    }

    /// The UDP destinations, one per datagram to send.
    pub fn addrs(&self) -> TargetIter<'s> {
        match *self {
            Self::Unicast(addr) => TargetIter {
                one: Some(addr),
                rest: [].iter(),
                port: 0,
            },
            Self::Flood { peers, port } => TargetIter {
                one: None,
                rest: peers.iter(),
                port,
            },
        }
    }
}

/// Iterator over [`Targets`].
#[derive(Clone, Debug)]
pub struct TargetIter<'s> {
    one: Option<SocketAddr>,
    rest: core::slice::Iter<'s, IpAddr>,
    port: u16,
}

impl Iterator for TargetIter<'_> {
    type Item = SocketAddr;

    fn next(&mut self) -> Option<SocketAddr> {
        if let Some(addr) = self.one.take() {
            return Some(addr);
        }
        self.rest.next().map(|ip| SocketAddr::new(*ip, self.port))
    }
}

/// An outgoing frame, encapsulated: send `out[..len]` to each target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit<'s> {
    /// Length of the VXLAN payload written into the caller's buffer.
    pub len: usize,
    /// Where to send it.
    pub targets: Targets<'s>,
}

/// The VXLAN switch of one virtual interface.
#[derive(Debug)]
pub struct Switch {
    config: Config,
    bounds: FrameBounds,
    peers: Vec<IpAddr>,
    table: LearnTable,
    stats: Stats,
}

impl Switch {
    /// A switch with `config` and these peer addresses (IPv4 or IPv6; an
    /// IPv4-mapped IPv6 address is stored as IPv4). Allocates the peer list
    /// and the learning table now, once.
    ///
    /// # Errors
    ///
    /// [`ConfigError`]: a bad, repeated or excess peer, or no memory.
    pub fn new(config: Config, peers: &[IpAddr]) -> Result<Self, ConfigError> {
        if peers.len() > MAX_PEERS {
            return Err(ConfigError::TooManyPeers);
        }
        let mut list = Vec::new();
        list.try_reserve_exact(peers.len())?;
        for peer in peers {
            let peer = peer.to_canonical();
            let bad = peer.is_unspecified()
                || peer.is_multicast()
                || matches!(peer, IpAddr::V4(v4) if v4.is_broadcast());
            if bad {
                return Err(ConfigError::BadPeer);
            }
            if list.contains(&peer) {
                return Err(ConfigError::DuplicatePeer);
            }
            list.push(peer);
        }
        Ok(Self {
            config,
            bounds: FrameBounds::for_mtu(config.mtu),
            peers: list,
            table: LearnTable::new(config.table_capacity, config.max_age)?,
            stats: Stats::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The inner frame lengths accepted both ways.
    pub fn bounds(&self) -> FrameBounds {
        self.bounds
    }

    /// The peers, in configuration order (IPv4-mapped addresses as IPv4).
    pub fn peers(&self) -> &[IpAddr] {
        &self.peers
    }

    /// The learning table.
    pub fn table(&self) -> &LearnTable {
        &self.table
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Removes the learned addresses aged at `now`; returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        self.table.expire(now)
    }

    /// The peer learned for `mac` at `now`, if any.
    pub fn lookup(&self, mac: MacAddr, now: u64) -> Option<IpAddr> {
        let index = self.table.lookup(mac, now)?;
        self.peers.get(usize::from(index)).copied()
    }

    fn peer_index(&self, from: IpAddr) -> Option<PeerIndex> {
        let from = from.to_canonical();
        let at = self.peers.iter().position(|p| *p == from)?;
        PeerIndex::try_from(at).ok()
    }

    /// Encapsulates the outgoing Ethernet `frame` into `out` and says where
    /// to send it: to the peer its destination was learned behind, or to
    /// every peer.
    ///
    /// # Errors
    ///
    /// The frame is dropped (and counted): its length is outside the
    /// bounds, `out` is too small, or there is no peer.
    pub fn transmit(
        &mut self,
        frame: &[u8],
        now: u64,
        out: &mut [u8],
    ) -> Result<Transmit<'_>, TxDrop> {
        match self.encapsulate(frame, now, out) {
            Ok((len, unicast)) => {
                self.stats.tx_frames = self.stats.tx_frames.saturating_add(1);
                bump(&mut self.stats.tx_bytes, frame.len());
                let targets = if let Some(addr) = unicast {
                    self.stats.tx_unicast = self.stats.tx_unicast.saturating_add(1);
                    Targets::Unicast(addr)
                } else {
                    self.stats.tx_flooded = self.stats.tx_flooded.saturating_add(1);
                    Targets::Flood {
                        peers: &self.peers,
                        port: self.config.port,
                    }
                };
                Ok(Transmit { len, targets })
            }
            Err(drop) => {
                self.stats.count_tx_drop(drop);
                Err(drop)
            }
        }
    }

    /// Checks and builds; the unicast target, or `None` to flood.
    fn encapsulate(
        &self,
        frame: &[u8],
        now: u64,
        out: &mut [u8],
    ) -> Result<(usize, Option<SocketAddr>), TxDrop> {
        self.bounds.check(frame.len()).map_err(|e| match e {
            FrameLenError::TooShort => TxDrop::TooShort,
            FrameLenError::TooLong => TxDrop::TooLong,
        })?;
        if self.peers.is_empty() {
            return Err(TxDrop::NoPeers);
        }
        let destination = MacAddr::destination(frame).ok_or(TxDrop::TooShort)?;
        let unicast = if destination.is_multicast() {
            None
        } else {
            self.lookup(destination, now)
                .map(|ip| SocketAddr::new(ip, self.config.port))
        };
        let len = vxlan::build(self.config.vni, frame, out).map_err(|_| TxDrop::BufferTooSmall)?;
        Ok((len, unicast))
    }

    /// Takes a VXLAN `datagram` received from IP address `from` at `now`:
    /// checks it, learns its inner source address behind that peer, and
    /// returns the inner Ethernet frame to deliver up.
    ///
    /// # Errors
    ///
    /// The datagram is dropped (and counted): not from a peer, malformed, or
    /// with an invalid inner source address. Nothing is learned from it.
    pub fn receive<'d>(
        &mut self,
        from: IpAddr,
        datagram: &'d [u8],
        now: u64,
    ) -> Result<&'d [u8], RxDrop> {
        match self.accept(from, datagram) {
            Ok((peer, source, frame)) => {
                match self.table.learn(source, peer, now) {
                    Learned::New => self.stats.learned = self.stats.learned.saturating_add(1),
                    Learned::Moved => self.stats.moved = self.stats.moved.saturating_add(1),
                    Learned::TableFull => {
                        self.stats.learn_table_full = self.stats.learn_table_full.saturating_add(1);
                    }
                    Learned::Refreshed => {}
                }
                self.stats.rx_frames = self.stats.rx_frames.saturating_add(1);
                bump(&mut self.stats.rx_bytes, frame.len());
                Ok(frame)
            }
            Err(drop) => {
                self.stats.count_rx_drop(drop);
                Err(drop)
            }
        }
    }

    fn accept<'d>(
        &self,
        from: IpAddr,
        datagram: &'d [u8],
    ) -> Result<(PeerIndex, MacAddr, &'d [u8]), RxDrop> {
        let peer = self.peer_index(from).ok_or(RxDrop::UnknownPeer)?;
        let frame = vxlan::parse(
            datagram,
            self.config.vni,
            self.bounds,
            self.config.reserved_bits,
        )
        .map_err(RxDrop::Malformed)?;
        let source = MacAddr::source(frame).ok_or(RxDrop::Malformed(ParseError::InnerTooShort))?;
        if !source.is_valid_source() {
            return Err(RxDrop::BadSourceMac);
        }
        Ok((peer, source, frame))
    }
}
