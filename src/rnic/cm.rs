//! The connection manager: addresses, endpoints, listeners and connectors on
//! the *fabric* that joins every emulated NIC of one driver instance (one
//! process in host mode).
//!
//! Plain Rust: no NDK types, no NTSTATUS. The provider turns [`CmError`]s
//! into statuses and the [`ConnectorEvents`] / [`ListenerEvents`] callbacks
//! into request completions and connect / disconnect events.
//!
//! # The fabric
//! A [`Fabric`] knows which device owns which IP addresses (an
//! [`AddressSet`] registers them, rule N1: IPv4 and IPv6 alike), which local
//! endpoints are bound (listeners, shared endpoints and the dedicated
//! endpoints of `Connect`), and every connector and listener. One spin lock
//! serializes every state change of the connection layer: connection
//! management is the control path, each transition is short and bounded, and
//! one lock makes the two sides of a connection change together (the
//! simultaneous-disconnect race X3 is then just two orders of one sequence).
//! The data path never takes it. Callbacks are collected under the lock and
//! made after it is released (rule I4); each record counts the callbacks in
//! flight for it, and a close completes only once they have returned (L21).
//!
//! # Endpoints and ports (N3, N7–N11, N30, N31)
//! A *binding* claims a local (address, port) on one device and is reference
//! counted: a listener holds one reference and each connector created for it
//! one more (N7); a shared endpoint holds one and each connector connected
//! through it one more (N10); a connector connected with `Connect` owns a
//! dedicated binding (N8). At zero the address and port are free again. A
//! wildcard address (0.0.0.0 or ::) binds the port on every address of its
//! family that the device owns, and never on another device (N31). Port 0
//! picks a free port of the ephemeral range 49152–65535
//! ([`CmError::TooManyAddresses`] when none is left). The ND port space is
//! the fabric's own (N30). Connections through one binding must differ in
//! their remote endpoint: the four-tuple is unique (N11).
//!
//! # Connection state machine
//! ```text
//!  active                                passive
//!  Idle ──connect──▶ Connecting ─────request──▶ Requested (connect event, N4)
//!                        │  ◀──refused (reject, close, N16)─┤
//!                        │                                  │ accept
//!                    Replied ◀──────── accepted ────── Accepting
//!   (Connect completed; GetConnectionData)                  │
//!     │ complete_connect: QPs connected (qp::connect)        │
//!  Established ◀────────────────────────────────────▶ Established
//!     │ disconnect ──graceful notice──▶ indication (X2, N24)  │
//!  Disconnecting (waits for the peer, X1a)                  │
//!     │ ◀──────────── its disconnect or close (X3) ─────────┤
//!     │ both QPs disconnected (X6, X7); DMA finished (X1b)   │
//!  Disconnected (no reuse, X5)                          Disconnected
//! ```
//! Any attempt that fails or is abandoned before `Established` leaves the
//! connector `Failed`; an active connector may then `connect` again with the
//! same or another idle QP, which the attempt left untouched (N28).
//!
//! # Disconnect (X1–X7)
//! `disconnect` sends the graceful notice to the peer: the peer's consumer
//! gets its disconnect indication (X2), unless it disconnected already, and
//! nothing else happens to the peer's QP — its outstanding work is not
//! flushed because of the indication (N24). The disconnect then waits for
//! the peer's answer, which is its consumer's own `disconnect` or the close
//! of its connector (X1 a); it does not wait when the peer answered first
//! (X3: of two simultaneous disconnects the second one answers the first)
//! or when the connection had been aborted. Once the exchange is over both
//! QPs leave the connection (`Qp::disconnect`): outstanding work completes
//! cancelled (X7, E3), later posts fail (X5), nothing flows either way (X6).
//! Each side's disconnect completes when the DMA of both QPs has finished
//! (X1 b, checked with [`Qp::is_quiescent`]: at once when possible, else by
//! a deferred poll). The result is success, or
//! [`CmError::ConnectionAborted`] when the connection was aborted (an error
//! completion terminated it, E5, or a QP went away without a disconnect)
//! before or during the wait. The indication is given at most once per
//! connection and never after the side's own disconnect (N24, X2).
//!
//! Closing an established connector is a graceful disconnect towards the
//! peer (its indication, and its later `disconnect` succeeds), but a close
//! never waits for the peer's consumer: it tears the connection down at
//! once and completes when the DMA has finished. A close while the own
//! `disconnect` waits for the peer ends the wait: that disconnect completes
//! [`CmError::Cancelled`] (L20) before the close does.
//!
//! # Timeouts
//! There are none, and no timer. A `connect` waits for the passive
//! consumer's accept or reject and never times out (N29); the passive
//! side's close answers it (refused). An `accept` waits for the active
//! consumer's `complete_connect` or reject; the active side's close answers
//! it (aborted). A `disconnect` waits for the peer consumer's `disconnect`
//! or close, or for an abort. Every wait thus ends by an event of the
//! fabric at the latest when the peer closes its connector — which every
//! consumer does before it can close its adapter (L24, L27) — or when the
//! waiting side closes its own: peers cannot vanish silently, all of them
//! are on this fabric. Nothing waits on a peer consumer for ever unless that
//! consumer never closes (its bug, costing that one connection), and no
//! provider call ever blocks; `STATUS_IO_TIMEOUT` is never produced.

use alloc::vec::Vec;
use core::fmt;

use super::device::Device;
use super::qp::{self, Qp, QpEvents, QpState};
use super::types::Limits;
use crate::kernel::deferred::{Deferred, DeferredRoutine};
use crate::kernel::sync::atomic::{AtomicBool, Ordering};
use crate::kernel::sync::{Arc, SpinLock, Weak};

/// First port of the ephemeral range (N3, N9).
pub const EPHEMERAL_FIRST: u16 = 49152;
/// Last port of the ephemeral range (N3, N9).
pub const EPHEMERAL_LAST: u16 = 65535;
/// Connection requests a listener holds unanswered at most; more are refused
/// (N12: "backlog full"). It also bounds the connect events queued on the
/// listener's callback serializer.
pub const BACKLOG: usize = 32;

// ---------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// An IP address, bytes in network order (N1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpAddr {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddr {
    /// The wildcard address of `family` (0.0.0.0 or ::).
    pub const fn unspecified(family: Family) -> Self {
        match family {
            Family::V4 => Self::V4([0; 4]),
            Family::V6 => Self::V6([0; 16]),
        }
    }

    /// The family.
    pub const fn family(&self) -> Family {
        match self {
            Self::V4(_) => Family::V4,
            Self::V6(_) => Family::V6,
        }
    }

    /// Whether this is the wildcard address of its family.
    pub fn is_unspecified(&self) -> bool {
        match self {
            Self::V4(b) => b.iter().all(|&x| x == 0),
            Self::V6(b) => b.iter().all(|&x| x == 0),
        }
    }
}

impl fmt::Display for IpAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4([b0, b1, b2, b3]) => write!(f, "{b0}.{b1}.{b2}.{b3}"),
            Self::V6(bytes) => {
                for (n, pair) in bytes.chunks_exact(2).enumerate() {
                    if n > 0 {
                        f.write_str(":")?;
                    }
                    if let [hi, lo] = pair {
                        write!(f, "{:x}", u16::from_be_bytes([*hi, *lo]))?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// An address and an ND port (host byte order; the provider converts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The address.
    pub ip: IpAddr,
    /// The port; 0 asks for an ephemeral one where a local endpoint is bound.
    pub port: u16,
}

impl Endpoint {
    /// `ip`:`port`.
    pub const fn new(ip: IpAddr, port: u16) -> Self {
        Self { ip, port }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(_) => write!(f, "{}:{}", self.ip, self.port),
            IpAddr::V6(_) => write!(f, "[{}]:{}", self.ip, self.port),
        }
    }
}

/// Read limits (N20): RDMA Reads in flight, inbound (served for the peer)
/// and outbound (issued by this side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReadLimits {
    /// Inbound (IRD).
    pub inbound: u32,
    /// Outbound (ORD).
    pub outbound: u32,
}

impl ReadLimits {
    /// `inbound`, `outbound`.
    pub const fn new(inbound: u32, outbound: u32) -> Self {
        Self { inbound, outbound }
    }

    /// Lowered to what a device supports (N20).
    fn clamp(self, limits: &Limits) -> Self {
        Self {
            inbound: self.inbound.min(limits.max_inbound_read_limit),
            outbound: self.outbound.min(limits.max_outbound_read_limit),
        }
    }

    /// The effective limits against the peer's offer (N20): inbound =
    /// min(own inbound, peer's outbound), outbound = min(own outbound, peer's
    /// inbound).
    fn effective(self, peer: Self) -> Self {
        Self {
            inbound: self.inbound.min(peer.outbound),
            outbound: self.outbound.min(peer.inbound),
        }
    }

    const fn pair(self) -> (u32, u32) {
        (self.inbound, self.outbound)
    }
}

/// An established connection, as `OID_NDK_CONNECTIONS` reports it (A19).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// This side's endpoint.
    pub local: Endpoint,
    /// The peer's endpoint.
    pub remote: Endpoint,
}

/// A listener's or shared endpoint's address, as `OID_NDK_LOCAL_ENDPOINTS`
/// reports it (A20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalEndpointInfo {
    /// The address (a wildcard for a wildcard listener) and port.
    pub local: Endpoint,
    /// A listener (else a shared endpoint).
    pub listener: bool,
}

/// What `connection_data` reports (N18–N20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionData {
    /// The effective read limits (N20).
    pub limits: ReadLimits,
    /// The size of the peer's private data (RDS, N18).
    pub length: usize,
    /// Bytes copied into the caller's buffer: min(buffer, RDS).
    pub copied: usize,
}

// ---------------------------------------------------------------------------
// Errors and states
// ---------------------------------------------------------------------------

/// Why a connection-management call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmError {
    /// The local address is not one the device owns, or a destination is a
    /// wildcard address or port 0 (N3, N9, N12).
    InvalidAddress,
    /// The local address and port are in use (N3, N7, N9, N10, N12).
    AddressInUse,
    /// Port 0 asked for and no ephemeral port is left (N3, N9).
    TooManyAddresses,
    /// A connection with the same four-tuple exists (N11).
    AddressAlreadyExists,
    /// No listener, a paused or closing one, a full backlog, or the peer
    /// rejected the request (N5, N6, N12, N16).
    ConnectionRefused,
    /// The peer abandoned the connection (N14–N16), or the connection was
    /// aborted before this side disconnected (X1).
    ConnectionAborted,
    /// The connector or its QP is not in a state where the call is valid; a
    /// QP not idle or already tied to another connector (N14, X5).
    ConnectionInvalid,
    /// The listener is not in a state where the call is valid (a second
    /// `listen`).
    InvalidState,
    /// The request was cancelled by the local close (L20).
    Cancelled,
    /// No device of the fabric owns the destination address (N12).
    HostUnreachable,
    /// The source and destination are of different families (N12).
    NetworkUnreachable,
    /// Private data above `max_caller_data` / `max_callee_data` (N17).
    PrivateDataTooLong,
    /// Objects of different devices or fabrics, or a detached address set.
    InvalidParameter,
    /// Memory ran out.
    Resources,
}

impl fmt::Display for CmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The state of a connector (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Created, not connecting.
    Idle,
    /// Active: the request is at the passive side (no timeout, N29).
    Connecting,
    /// Active: the peer accepted and `connect` completed; waiting for
    /// `complete_connect` or `reject` (N13).
    Replied,
    /// Passive: delivered by the connect event; waiting for `accept` or
    /// `reject` (N4, N15).
    Requested,
    /// Passive: `accept` issued; waiting for the active side (N15).
    Accepting,
    /// Both QPs connected.
    Established,
    /// This side disconnected (or closed); waiting for DMA to finish (X1).
    Disconnecting,
    /// The connection is over; connector and QP cannot be reused (X5, X6).
    Disconnected,
    /// The attempt failed or was abandoned before establishment.
    Failed,
}

impl fmt::Display for ConnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "IDLE",
            Self::Connecting => "CONNECTING",
            Self::Replied => "REPLIED",
            Self::Requested => "REQUESTED",
            Self::Accepting => "ACCEPTING",
            Self::Established => "ESTABLISHED",
            Self::Disconnecting => "DISCONNECTING",
            Self::Disconnected => "DISCONNECTED",
            Self::Failed => "FAILED",
        })
    }
}

/// Whether a close finished at once or completes later with a `closed`
/// callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseState {
    /// Closed; no callback follows.
    Done,
    /// Work or callbacks are still in flight; `closed` follows once they
    /// have finished (it may already have run when `close` returns).
    Pending,
}

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

/// What a connector tells its owner. Called with no lock held, possibly
/// from inside the call that caused it; each request's outcome exactly once.
pub trait ConnectorEvents: Send + Sync {
    /// The outcome of `connect`: `Ok` once the peer accepted (N13), else
    /// [`CmError::ConnectionRefused`] (rejected, N16),
    /// [`CmError::Cancelled`] (closed meanwhile).
    fn connect_completed(&self, result: Result<(), CmError>);
    /// The outcome of `accept`: `Ok` once the active side completed the
    /// connection, else [`CmError::ConnectionAborted`] (it gave up, N15),
    /// [`CmError::ConnectionInvalid`] (the QP was no longer idle),
    /// [`CmError::Cancelled`] (closed meanwhile).
    fn accept_completed(&self, result: Result<(), CmError>);
    /// The outcome of `disconnect` (X1).
    fn disconnect_completed(&self, result: Result<(), CmError>);
    /// The disconnect indication (X2, N24): the peer disconnected or closed,
    /// or the connection was aborted. At most once, never after this side's
    /// own `disconnect` or close.
    fn disconnected(&self);
    /// A close that returned [`CloseState::Pending`] has finished: the last
    /// callback of the connector.
    fn closed(&self);
}

/// What a listener tells its owner. Called with no lock held.
pub trait ListenerEvents: Send + Sync {
    /// A connection request arrived (N4): `request` is the new passive
    /// connector, in [`ConnState::Requested`]. Dropping it (or closing it)
    /// without an answer refuses the request.
    fn incoming(&self, request: Connector);
    /// A close that returned [`CloseState::Pending`] has finished: no
    /// `incoming` call is running or will follow.
    fn closed(&self);
}

// ---------------------------------------------------------------------------
// A slab of records with generation-checked keys
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    index: u32,
    generation: u32,
}

struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    /// Free slot indexes; its capacity covers every slot, so that `remove`
    /// never allocates.
    free: Vec<u32>,
}

impl<T> Slab<T> {
    const fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn insert(&mut self, value: T) -> Result<Key, CmError> {
        if let Some(index) = self.free.pop()
            && let Some((generation, slot)) = self.slots.get_mut(index as usize)
        {
            *slot = Some(value);
            return Ok(Key {
                index,
                generation: *generation,
            });
        }
        let index = u32::try_from(self.slots.len()).map_err(|_| CmError::Resources)?;
        self.slots.try_reserve(1).map_err(|_| CmError::Resources)?;
        let wanted = self.slots.len() + 1;
        self.free
            .try_reserve(wanted.saturating_sub(self.free.len()))
            .map_err(|_| CmError::Resources)?;
        self.slots.push((0, Some(value)));
        Ok(Key {
            index,
            generation: 0,
        })
    }

    fn get(&self, key: Key) -> Option<&T> {
        match self.slots.get(key.index as usize) {
            Some((generation, value)) if *generation == key.generation => value.as_ref(),
            _ => None,
        }
    }

    fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.slots.get_mut(key.index as usize) {
            Some((generation, value)) if *generation == key.generation => value.as_mut(),
            _ => None,
        }
    }

    fn remove(&mut self, key: Key) -> Option<T> {
        let (generation, slot) = self.slots.get_mut(key.index as usize)?;
        if *generation != key.generation {
            return None;
        }
        let value = slot.take()?;
        *generation = generation.wrapping_add(1);
        self.free.push(key.index);
        Some(value)
    }

    /// The key of the first record that matches.
    fn find(&self, mut matches: impl FnMut(&T) -> bool) -> Option<Key> {
        self.slots
            .iter()
            .enumerate()
            .find_map(|(index, (generation, value))| {
                let value = value.as_ref()?;
                let index = u32::try_from(index).ok()?;
                matches(value).then_some(Key {
                    index,
                    generation: *generation,
                })
            })
    }

    fn count(&self, mut matches: impl FnMut(&T) -> bool) -> usize {
        self.slots
            .iter()
            .filter(|(_, value)| value.as_ref().is_some_and(&mut matches))
            .count()
    }
}

// ---------------------------------------------------------------------------
// Fabric state
// ---------------------------------------------------------------------------

/// The identity of a device on the fabric: its address. A registration
/// holds the device (and the node entry a `Weak` to it), so the address is
/// not reused while the node exists.
fn node_of_device(device: &Arc<Device>) -> usize {
    Arc::as_ptr(device).addr()
}

struct Node {
    key: usize,
    device: Weak<Device>,
    refs: usize,
}

struct Address {
    ip: IpAddr,
    node: usize,
    refs: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BindingRef {
    port: u16,
    id: u64,
}

/// A bound local endpoint.
struct Binding {
    id: u64,
    node: usize,
    /// A specific address, or the wildcard of a family (N31).
    ip: IpAddr,
    port: u16,
    refs: usize,
    /// The listener that requests to this endpoint reach (N3).
    listener: Option<Key>,
    /// (local address, remote endpoint) of each connection through it (N11).
    conns: Vec<(IpAddr, Endpoint)>,
    /// Claimed by a shared endpoint (reported with the listeners, A20).
    shared: bool,
}

impl Binding {
    /// Whether `ip` on `node` at this binding's port would overlap it.
    fn overlaps(&self, node: usize, ip: IpAddr) -> bool {
        self.node == node
            && self.ip.family() == ip.family()
            && (self.ip == ip || self.ip.is_unspecified() || ip.is_unspecified())
    }
}

struct ListenerRec {
    node: usize,
    limits: Limits,
    events: Arc<dyn ListenerEvents>,
    listening: Option<(BindingRef, Endpoint)>,
    paused: bool,
    /// Requests delivered and not yet answered.
    backlog: usize,
    /// `incoming` calls in flight.
    callouts: usize,
    closing: bool,
    close_pending: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Active,
    Passive,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pending {
    connect: bool,
    accept: bool,
    disconnect: bool,
}

impl Pending {
    const fn any(self) -> bool {
        self.connect || self.accept || self.disconnect
    }
}

/// How the connection ended for a side before its own disconnect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Open,
    /// The peer disconnected or closed gracefully.
    Graceful,
    /// An error ended it (E5), or the peer's QP left without a disconnect.
    Aborted,
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "independent flags of the close and disconnect machinery"
)]
struct ConnectorRec {
    node: usize,
    limits: Limits,
    events: Option<Arc<dyn ConnectorEvents>>,
    state: ConnState,
    role: Role,
    peer: Option<Key>,
    /// Passive: the listener whose backlog the request counts in.
    listener: Option<Key>,
    qp: Option<Arc<Qp>>,
    /// The peer's QP once established: its DMA counts for X1 too.
    peer_qp: Option<Arc<Qp>>,
    /// The binding this connector holds a reference on (N7, N8, N10).
    binding: Option<BindingRef>,
    /// The four-tuple registered for this connection (N11).
    tuple: Option<(BindingRef, IpAddr, Endpoint)>,
    local: Option<Endpoint>,
    remote: Option<Endpoint>,
    /// This side's read limits, lowered to the device's (N20).
    own_limits: Option<ReadLimits>,
    /// The peer's read limits, as it sent them.
    peer_limits: ReadLimits,
    /// The peer's private data (N18).
    peer_data: Vec<u8>,
    pending: Pending,
    /// The disconnect indication was given, or is no longer due (X2, N24).
    indicated: bool,
    ending: Ending,
    /// Disconnecting, waiting for the peer's graceful disconnect (X1 a).
    waiting: bool,
    /// The own close ended the wait for the peer: the Disconnect completes
    /// cancelled (L20).
    cancelled: bool,
    callouts: usize,
    closing: bool,
    close_pending: bool,
    /// Waiting for the QPs' DMA to finish (X1b).
    quiescing: bool,
    /// Counted in `active_connection`.
    counted: bool,
}

impl ConnectorRec {
    fn new(node: usize, limits: Limits) -> Self {
        Self {
            node,
            limits,
            events: None,
            state: ConnState::Idle,
            role: Role::Active,
            peer: None,
            listener: None,
            qp: None,
            peer_qp: None,
            binding: None,
            tuple: None,
            local: None,
            remote: None,
            own_limits: None,
            peer_limits: ReadLimits::default(),
            peer_data: Vec::new(),
            pending: Pending::default(),
            indicated: false,
            ending: Ending::Open,
            waiting: false,
            cancelled: false,
            callouts: 0,
            closing: false,
            close_pending: false,
            quiescing: false,
            counted: false,
        }
    }

    fn set_state(&mut self, key: Key, state: ConnState) {
        if self.state != state {
            crate::klog!(
                crate::kernel::log::Level::Trace,
                "connector {}.{}: {} -> {state}",
                key.index,
                key.generation,
                self.state
            );
            self.state = state;
        }
    }

    /// Whether every QP of the connection has finished its DMA (X1b).
    fn quiescent(&self) -> bool {
        self.qp.as_ref().is_none_or(|qp| qp.is_quiescent())
            && self.peer_qp.as_ref().is_none_or(|qp| qp.is_quiescent())
    }

    /// The limits `connection_data` reports (N20): the effective ones once
    /// this side has chosen its own; before that (a passive connector before
    /// `accept`), the peer's offer seen from this side, lowered to the
    /// device's limits.
    fn reported_limits(&self) -> ReadLimits {
        match self.own_limits {
            Some(own) => own.effective(self.peer_limits),
            None => ReadLimits::new(self.peer_limits.outbound, self.peer_limits.inbound)
                .clamp(&self.limits),
        }
    }
}

/// A callback to make once the lock is released.
enum Callout {
    Connect(Result<(), CmError>),
    Accept(Result<(), CmError>),
    Disconnect(Result<(), CmError>),
    Indicate,
}

enum Action {
    /// A connector callback, counted in the record's `callouts`.
    Connector {
        events: Arc<dyn ConnectorEvents>,
        key: Key,
        callout: Callout,
    },
    /// A connector's record is gone: its last callback when its close was
    /// pending (`notify`), and the release of its events either way.
    ConnectorClosed {
        events: Arc<dyn ConnectorEvents>,
        notify: bool,
    },
    /// A connection request, counted in the listener's `callouts`.
    Incoming {
        events: Arc<dyn ListenerEvents>,
        listener: Key,
        request: Connector,
    },
    /// A listener's record is gone: as `ConnectorClosed`.
    ListenerClosed {
        events: Arc<dyn ListenerEvents>,
        notify: bool,
    },
    /// Take both QPs of a connection out of it (outside the lock: a QP
    /// reports back to its peer's handler), then see whether the DMA of
    /// each side still in the connection has finished (X1 b, X6).
    Teardown {
        qps: [Option<Arc<Qp>>; 2],
        keys: [Option<Key>; 2],
    },
}

/// The longest sequence any single transition pushes is four actions; the
/// capacity leaves room.
const ACTIONS: usize = 8;

/// Work collected under the lock, done after it is released.
struct Actions {
    items: [Option<Action>; ACTIONS],
    len: usize,
}

impl Actions {
    const fn new() -> Self {
        Self {
            items: [const { None }; ACTIONS],
            len: 0,
        }
    }

    fn push(&mut self, action: Action) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = Some(action);
            self.len += 1;
        } else {
            // Unreachable by the bound above. Dropping the action here could
            // run a connector's close under the fabric lock, so it is leaked.
            crate::klog!(crate::kernel::log::Level::Error, "cm: action list full");
            core::mem::forget(action);
        }
    }

    fn drain(&mut self) -> impl Iterator<Item = Action> + '_ {
        self.len = 0;
        self.items.iter_mut().filter_map(Option::take)
    }
}

struct State {
    nodes: Vec<Node>,
    addresses: Vec<Address>,
    /// Sorted by port.
    bindings: Vec<Binding>,
    next_binding: u64,
    /// Offset into the ephemeral range of the next port to try.
    next_port: u32,
    listeners: Slab<ListenerRec>,
    connectors: Slab<ConnectorRec>,
    /// QPs tied to a connector (by address; the connector holds the QP).
    bound_qps: Vec<usize>,
}

const EPHEMERAL_SPAN: u32 = EPHEMERAL_LAST as u32 - EPHEMERAL_FIRST as u32 + 1;

fn qp_key(qp: &Arc<Qp>) -> usize {
    Arc::as_ptr(qp).addr()
}

fn count_failure(qp: Option<&Arc<Qp>>) {
    if let Some(qp) = qp {
        qp.device()
            .counters
            .connect_failure
            .fetch_add(1, Ordering::Relaxed);
    }
}

impl State {
    const fn new() -> Self {
        Self {
            nodes: Vec::new(),
            addresses: Vec::new(),
            bindings: Vec::new(),
            next_binding: 1,
            next_port: 0,
            listeners: Slab::new(),
            connectors: Slab::new(),
            bound_qps: Vec::new(),
        }
    }

    // ----- addresses -------------------------------------------------------

    fn owner(&self, ip: IpAddr) -> Option<usize> {
        self.addresses.iter().find(|a| a.ip == ip).map(|a| a.node)
    }

    fn owns(&self, node: usize, ip: IpAddr) -> bool {
        self.owner(ip) == Some(node)
    }

    fn register(&mut self, device: &Arc<Device>, ips: &[IpAddr]) -> Result<(), CmError> {
        let node = node_of_device(device);
        if ips
            .iter()
            .any(|&ip| self.owner(ip).is_some_and(|owner| owner != node))
        {
            return Err(CmError::AddressInUse);
        }
        self.nodes.try_reserve(1).map_err(|_| CmError::Resources)?;
        self.addresses
            .try_reserve(ips.len())
            .map_err(|_| CmError::Resources)?;
        match self.nodes.iter_mut().find(|n| n.key == node) {
            Some(entry) => entry.refs += 1,
            None => self.nodes.push(Node {
                key: node,
                device: Arc::downgrade(device),
                refs: 1,
            }),
        }
        for &ip in ips {
            match self.addresses.iter_mut().find(|a| a.ip == ip) {
                Some(entry) => entry.refs += 1,
                None => self.addresses.push(Address { ip, node, refs: 1 }),
            }
        }
        Ok(())
    }

    fn retain(&mut self, node: usize, ips: &[IpAddr]) {
        if let Some(entry) = self.nodes.iter_mut().find(|n| n.key == node) {
            entry.refs += 1;
        }
        for &ip in ips {
            if let Some(entry) = self.addresses.iter_mut().find(|a| a.ip == ip) {
                entry.refs += 1;
            }
        }
    }

    fn unregister(&mut self, node: usize, ips: &[IpAddr]) {
        for &ip in ips {
            if let Some(n) = self
                .addresses
                .iter()
                .position(|a| a.ip == ip && a.node == node)
                && let Some(entry) = self.addresses.get_mut(n)
            {
                entry.refs = entry.refs.saturating_sub(1);
                if entry.refs == 0 {
                    // PANIC: `n` was just found by `position`.
                    self.addresses.swap_remove(n);
                }
            }
        }
        if let Some(n) = self.nodes.iter().position(|e| e.key == node)
            && let Some(entry) = self.nodes.get_mut(n)
        {
            entry.refs = entry.refs.saturating_sub(1);
            if entry.refs == 0 {
                // PANIC: `n` was just found by `position`.
                self.nodes.swap_remove(n);
            }
        }
    }

    /// A local address of `node` for a connection to `dst`: `dst` itself
    /// when the node owns it (loopback, N27), else its first address of the
    /// family.
    fn pick_local(&self, node: usize, family: Family, dst: Option<IpAddr>) -> Option<IpAddr> {
        if let Some(dst) = dst
            && self.owns(node, dst)
        {
            return Some(dst);
        }
        self.addresses
            .iter()
            .find(|a| a.node == node && a.ip.family() == family)
            .map(|a| a.ip)
    }

    /// The address a local endpoint names: a wildcard becomes the node's
    /// address of the family (`dst` preferred) when `resolve` is set; a
    /// specific one must be the node's (N3, N9, N12).
    fn local_ip(
        &self,
        node: usize,
        ip: IpAddr,
        resolve: bool,
        dst: Option<IpAddr>,
    ) -> Result<IpAddr, CmError> {
        if ip.is_unspecified() {
            if resolve {
                self.pick_local(node, ip.family(), dst)
                    .ok_or(CmError::InvalidAddress)
            } else {
                Ok(ip)
            }
        } else if self.owns(node, ip) {
            Ok(ip)
        } else {
            Err(CmError::InvalidAddress)
        }
    }

    // ----- bindings --------------------------------------------------------

    fn port_range(&self, port: u16) -> core::ops::Range<usize> {
        let start = self.bindings.partition_point(|b| b.port < port);
        let end = self.bindings.partition_point(|b| b.port <= port);
        start..end
    }

    fn conflicts(&self, node: usize, ip: IpAddr, port: u16) -> bool {
        self.bindings
            .get(self.port_range(port))
            .is_some_and(|found| found.iter().any(|b| b.overlaps(node, ip)))
    }

    fn binding(&self, r: BindingRef) -> Option<&Binding> {
        self.bindings
            .get(self.port_range(r.port))?
            .iter()
            .find(|b| b.id == r.id)
    }

    fn binding_mut(&mut self, r: BindingRef) -> Option<&mut Binding> {
        let range = self.port_range(r.port);
        self.bindings
            .get_mut(range)?
            .iter_mut()
            .find(|b| b.id == r.id)
    }

    fn pick_port(&mut self, node: usize, ip: IpAddr) -> Result<u16, CmError> {
        for n in 0..EPHEMERAL_SPAN {
            let offset = (self.next_port + n) % EPHEMERAL_SPAN;
            let port = u16::try_from(u32::from(EPHEMERAL_FIRST) + offset)
                .map_err(|_| CmError::TooManyAddresses)?;
            if !self.conflicts(node, ip, port) {
                self.next_port = (offset + 1) % EPHEMERAL_SPAN;
                return Ok(port);
            }
        }
        Err(CmError::TooManyAddresses)
    }

    /// Claims `ip`:`port` on `node` (port 0: an ephemeral one) with one
    /// reference.
    fn bind(&mut self, node: usize, ip: IpAddr, port: u16) -> Result<BindingRef, CmError> {
        let port = if port == 0 {
            self.pick_port(node, ip)?
        } else if self.conflicts(node, ip, port) {
            return Err(CmError::AddressInUse);
        } else {
            port
        };
        self.bindings
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        let id = self.next_binding;
        self.next_binding += 1;
        let at = self.bindings.partition_point(|b| b.port <= port);
        // PANIC: `partition_point` returns at most the length.
        self.bindings.insert(
            at,
            Binding {
                id,
                node,
                ip,
                port,
                refs: 1,
                listener: None,
                conns: Vec::new(),
                shared: false,
            },
        );
        Ok(BindingRef { port, id })
    }

    fn add_ref(&mut self, r: BindingRef) -> bool {
        match self.binding_mut(r) {
            Some(b) => {
                b.refs += 1;
                true
            }
            None => false,
        }
    }

    /// Drops one reference; the last frees the address and port (N7, N10).
    fn unbind(&mut self, r: BindingRef) {
        let range = self.port_range(r.port);
        let Some(found) = self.bindings.get_mut(range.clone()) else {
            return;
        };
        let Some(n) = found.iter().position(|b| b.id == r.id) else {
            return;
        };
        let Some(binding) = found.get_mut(n) else {
            return;
        };
        binding.refs = binding.refs.saturating_sub(1);
        if binding.refs == 0 {
            // PANIC: `n` indexes the sub-slice that starts at `range.start`.
            self.bindings.remove(range.start + n);
        }
    }

    /// The listener that a request to `ip`:`port` on `node` reaches: one on
    /// that address or on the family's wildcard (N31).
    fn find_listener(&self, node: usize, ip: IpAddr, port: u16) -> Option<Key> {
        self.bindings
            .get(self.port_range(port))?
            .iter()
            .find(|b| b.listener.is_some() && b.overlaps(node, ip))
            .and_then(|b| b.listener)
    }

    fn has_tuple(&self, r: BindingRef, local: IpAddr, remote: Endpoint) -> bool {
        self.binding(r)
            .is_some_and(|b| b.conns.contains(&(local, remote)))
    }

    fn reserve_tuple(&mut self, r: BindingRef) -> Result<(), CmError> {
        self.binding_mut(r)
            .ok_or(CmError::InvalidParameter)?
            .conns
            .try_reserve(1)
            .map_err(|_| CmError::Resources)
    }

    /// Registers a four-tuple; room was reserved with `reserve_tuple`.
    fn add_tuple(&mut self, r: BindingRef, local: IpAddr, remote: Endpoint) {
        if let Some(b) = self.binding_mut(r) {
            b.conns.push((local, remote));
        }
    }

    fn remove_tuple(&mut self, tuple: Option<(BindingRef, IpAddr, Endpoint)>) {
        if let Some((r, local, remote)) = tuple
            && let Some(b) = self.binding_mut(r)
            && let Some(n) = b.conns.iter().position(|c| *c == (local, remote))
        {
            // PANIC: `n` was just found by `position`.
            b.conns.swap_remove(n);
        }
    }

    // ----- QPs -------------------------------------------------------------

    /// Checks that `qp` may be tied to a connector of `node`: same device,
    /// idle (X5, N14), not tied to another connector.
    fn check_qp(&self, node: usize, qp: &Arc<Qp>) -> Result<(), CmError> {
        if node_of_device(qp.device()) != node {
            return Err(CmError::InvalidParameter);
        }
        if qp.state() != QpState::Idle || self.bound_qps.contains(&qp_key(qp)) {
            return Err(CmError::ConnectionInvalid);
        }
        Ok(())
    }

    fn unbind_qp(&mut self, qp: Option<&Arc<Qp>>) {
        if let Some(qp) = qp
            && let Some(n) = self.bound_qps.iter().position(|&k| k == qp_key(qp))
        {
            // PANIC: `n` was just found by `position`.
            self.bound_qps.swap_remove(n);
        }
    }

    // ----- callouts --------------------------------------------------------

    /// Queues a callback to connector `key` (none when it has no events).
    fn emit(&mut self, actions: &mut Actions, key: Key, callout: Callout) {
        if let Some(rec) = self.connectors.get_mut(key)
            && let Some(events) = rec.events.clone()
        {
            rec.callouts += 1;
            actions.push(Action::Connector {
                events,
                key,
                callout,
            });
        }
    }

    /// The live peer of `key` if it is in `state`.
    fn peer_in(&self, key: Key, state: ConnState) -> Option<Key> {
        let peer = self.connectors.get(key)?.peer?;
        let rec = self.connectors.get(peer)?;
        (rec.state == state && rec.peer == Some(key)).then_some(peer)
    }

    /// The passive request leaves the listener's backlog.
    fn leave_backlog(&mut self, key: Key) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        if let Some(listener) = rec.listener.take()
            && let Some(l) = self.listeners.get_mut(listener)
        {
            l.backlog = l.backlog.saturating_sub(1);
        }
    }

    /// An attempt of `key` failed before establishment: the connector is
    /// `Failed`, unlinked from its peer, and gives back what the attempt
    /// took — the QP (N28), the four-tuple and, for an active connector,
    /// its binding reference (the passive one keeps the listener's until it
    /// closes, N7).
    fn fail(&mut self, key: Key) {
        self.leave_backlog(key);
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        rec.set_state(key, ConnState::Failed);
        rec.peer = None;
        rec.pending.connect = false;
        rec.pending.accept = false;
        let qp = rec.qp.take();
        // An attempt that had a QP failed (either direction).
        count_failure(qp.as_ref());
        let tuple = rec.tuple.take();
        let binding = if rec.role == Role::Active {
            rec.binding.take()
        } else {
            None
        };
        self.unbind_qp(qp.as_ref());
        self.remove_tuple(tuple);
        if let Some(r) = binding {
            self.unbind(r);
        }
    }

    /// Completes the close of `key` if nothing holds it any longer.
    fn settle(&mut self, key: Key, actions: &mut Actions) -> bool {
        let done = self.connectors.get(key).is_some_and(|rec| {
            rec.closing && rec.callouts == 0 && !rec.quiescing && !rec.pending.any()
        });
        if !done {
            return false;
        }
        let Some(mut rec) = self.connectors.remove(key) else {
            return false;
        };
        if rec.state == ConnState::Requested
            && let Some(listener) = rec.listener.take()
            && let Some(l) = self.listeners.get_mut(listener)
        {
            l.backlog = l.backlog.saturating_sub(1);
        }
        self.unbind_qp(rec.qp.as_ref());
        self.remove_tuple(rec.tuple.take());
        if let Some(r) = rec.binding.take() {
            self.unbind(r);
        }
        uncount(&mut rec);
        if let Some(events) = rec.events.take() {
            // Dropped (or called) after the lock is released: the owner's
            // events may hold the last reference to objects whose drop takes
            // this lock again.
            actions.push(Action::ConnectorClosed {
                events,
                notify: rec.close_pending,
            });
        }
        true
    }

    /// The connection's DMA has finished (X1b): the disconnect completes.
    fn finish_disconnect(&mut self, key: Key, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        rec.quiescing = false;
        if rec.state == ConnState::Disconnecting {
            rec.set_state(key, ConnState::Disconnected);
        }
        uncount(rec);
        if rec.pending.disconnect {
            rec.pending.disconnect = false;
            // X1: success once the peer's graceful disconnect arrived;
            // failure when the connection had been aborted, or when the own
            // close cut the wait short.
            let result = if rec.cancelled {
                Err(CmError::Cancelled)
            } else if rec.ending == Ending::Aborted {
                Err(CmError::ConnectionAborted)
            } else {
                Ok(())
            };
            self.emit(actions, key, Callout::Disconnect(result));
        }
        self.settle(key, actions);
    }

    /// The peer of `key` while it still takes part in the connection
    /// (established, or disconnecting itself).
    fn connected_peer(&self, key: Key) -> Option<Key> {
        let peer = self.connectors.get(key)?.peer?;
        let rec = self.connectors.get(peer)?;
        let taking_part = matches!(rec.state, ConnState::Established | ConnState::Disconnecting);
        (taking_part && rec.peer == Some(key)).then_some(peer)
    }

    /// This side leaves an established connection, by `disconnect` or by
    /// its close. The peer gets the graceful notice: its indication unless
    /// it disconnected already (X2, X3); its QP and outstanding work are left
    /// alone (N24). A `disconnect` then waits for the peer's answer — its
    /// consumer's own disconnect or close — unless it has answered already
    /// or the connection was aborted (X1 a); a close never waits for the
    /// peer's consumer and tears the connection down at once.
    fn leave(&mut self, key: Key, by_close: bool, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        rec.set_state(key, ConnState::Disconnecting);
        // X2: no indication after this side's own disconnect.
        rec.indicated = true;
        let own_open = rec.ending == Ending::Open;
        let mut wait = false;
        if let Some(peer) = self.connected_peer(key)
            && let Some(p) = self.connectors.get_mut(peer)
            && p.state == ConnState::Established
        {
            if p.ending == Ending::Open {
                p.ending = Ending::Graceful;
            }
            if !core::mem::replace(&mut p.indicated, true) {
                self.emit(actions, peer, Callout::Indicate);
            }
            wait = !by_close && own_open;
        }
        if wait {
            if let Some(rec) = self.connectors.get_mut(key) {
                rec.waiting = true;
            }
        } else {
            self.teardown(key, actions);
        }
    }

    /// The exchange is over (or cut short): both QPs leave the connection —
    /// outstanding work completes cancelled (X7, E3), later posts fail (X5),
    /// nothing flows either way (X6) — and each side that is disconnecting
    /// waits for the DMA of both QPs (X1 b).
    fn teardown(&mut self, key: Key, actions: &mut Actions) {
        let peer = self.connected_peer(key);
        let qps = self
            .connectors
            .get(key)
            .map(|rec| [rec.qp.clone(), rec.peer_qp.clone()])
            .unwrap_or_default();
        let mut keys = [None, None];
        for (n, k) in [Some(key), peer].into_iter().enumerate() {
            let Some(k) = k else { continue };
            let Some(rec) = self.connectors.get_mut(k) else {
                continue;
            };
            // A peer waiting for this side's answer has it now (X1 a, X3).
            rec.waiting = false;
            if rec.state == ConnState::Disconnecting {
                rec.quiescing = true;
                if let Some(slot) = keys.get_mut(n) {
                    *slot = Some(k);
                }
            }
        }
        if qps.iter().all(Option::is_none) {
            self.finish_disconnect(key, actions);
        } else {
            actions.push(Action::Teardown { qps, keys });
        }
    }
}

/// Takes a connection off the devices' `active_connection` counters.
fn uncount(rec: &mut ConnectorRec) {
    if core::mem::take(&mut rec.counted)
        && let Some(qp) = &rec.qp
    {
        let _ = qp.device().counters.active_connection.fetch_update(
            Ordering::AcqRel,
            Ordering::Acquire,
            |n| Some(n.saturating_sub(1)),
        );
    }
}

/// Where a connection's local endpoint comes from.
#[derive(Clone, Copy)]
enum Source {
    /// `connect`: a dedicated endpoint at this address (N8).
    Address(Endpoint),
    /// `connect_shared`: a reference on a shared endpoint's binding (N10).
    Shared {
        binding: BindingRef,
        local: Endpoint,
        node: usize,
    },
}

impl State {
    // ----- connectors ------------------------------------------------------

    #[expect(clippy::too_many_arguments, reason = "the parameters of NdkConnect")]
    fn connect(
        &mut self,
        fabric: &Arc<Fabric>,
        key: Key,
        qp: &Arc<Qp>,
        source: Source,
        dst: Endpoint,
        limits: ReadLimits,
        payload: Vec<u8>,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || !matches!(rec.state, ConnState::Idle | ConnState::Failed) {
            // X5: a disconnected connector is never reused.
            return Err(CmError::ConnectionInvalid);
        }
        if payload.len() > rec.limits.max_caller_data as usize {
            return Err(CmError::PrivateDataTooLong);
        }
        let node = rec.node;
        let own = limits.clamp(&rec.limits);
        self.check_qp(node, qp)?;
        if dst.ip.is_unspecified() || dst.port == 0 {
            return Err(CmError::InvalidAddress);
        }
        let (binding, local) = match source {
            Source::Address(src) => {
                if src.ip.family() != dst.ip.family() {
                    return Err(CmError::NetworkUnreachable);
                }
                let ip = self.local_ip(node, src.ip, true, Some(dst.ip))?;
                let r = self.bind(node, ip, src.port)?;
                (r, Endpoint::new(ip, r.port))
            }
            Source::Shared {
                binding,
                local,
                node: endpoint_node,
            } => {
                if endpoint_node != node {
                    return Err(CmError::InvalidParameter);
                }
                if local.ip.family() != dst.ip.family() {
                    return Err(CmError::NetworkUnreachable);
                }
                if !self.add_ref(binding) {
                    return Err(CmError::InvalidParameter);
                }
                (binding, local)
            }
        };
        let outcome = self.request(fabric, key, qp, binding, local, dst, own, payload, actions);
        if outcome.is_err() {
            self.unbind(binding);
            count_failure(Some(qp));
        }
        outcome
    }

    /// Sends the request of `key` from `local` to `dst`: finds the listener
    /// and creates the passive connector that its connect event hands over.
    #[expect(clippy::too_many_arguments, reason = "the parts of a request")]
    fn request(
        &mut self,
        fabric: &Arc<Fabric>,
        key: Key,
        qp: &Arc<Qp>,
        binding: BindingRef,
        local: Endpoint,
        dst: Endpoint,
        own: ReadLimits,
        payload: Vec<u8>,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        // N11: one connection per four-tuple.
        if self.has_tuple(binding, local.ip, dst) {
            return Err(CmError::AddressAlreadyExists);
        }
        let dst_node = self.owner(dst.ip).ok_or(CmError::HostUnreachable)?;
        let listener = self
            .find_listener(dst_node, dst.ip, dst.port)
            .ok_or(CmError::ConnectionRefused)?;
        let l = self
            .listeners
            .get(listener)
            .ok_or(CmError::ConnectionRefused)?;
        // N5: a paused listener is as though there were none; N6: a closing
        // one turns every request away; N12: the backlog is bounded.
        if l.paused || l.closing || l.backlog >= BACKLOG {
            return Err(CmError::ConnectionRefused);
        }
        let (l_binding, _) = l.listening.ok_or(CmError::ConnectionRefused)?;
        let l_limits = l.limits;
        let l_events = Arc::clone(&l.events);
        self.bound_qps
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        self.reserve_tuple(binding)?;
        self.reserve_tuple(l_binding)?;
        let mut passive = ConnectorRec::new(dst_node, l_limits);
        passive.state = ConnState::Requested;
        passive.role = Role::Passive;
        passive.peer = Some(key);
        passive.listener = Some(listener);
        passive.binding = Some(l_binding);
        passive.tuple = Some((l_binding, dst.ip, local));
        passive.local = Some(dst);
        passive.remote = Some(local);
        passive.peer_limits = own;
        passive.peer_data = payload;
        let pkey = self.connectors.insert(passive)?;
        // Nothing below fails: the room was reserved above.
        // N7: one reference on the listener's endpoint per connector.
        self.add_ref(l_binding);
        self.add_tuple(binding, local.ip, dst);
        self.add_tuple(l_binding, dst.ip, local);
        self.bound_qps.push(qp_key(qp));
        if let Some(l) = self.listeners.get_mut(listener) {
            l.backlog += 1;
            l.callouts += 1;
        }
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.set_state(key, ConnState::Connecting);
            rec.role = Role::Active;
            rec.peer = Some(pkey);
            rec.listener = None;
            rec.qp = Some(Arc::clone(qp));
            rec.peer_qp = None;
            rec.binding = Some(binding);
            rec.tuple = Some((binding, local.ip, dst));
            rec.local = Some(local);
            rec.remote = Some(dst);
            rec.own_limits = Some(own);
            rec.peer_limits = ReadLimits::default();
            rec.peer_data.clear();
            rec.pending = Pending {
                connect: true,
                ..Pending::default()
            };
            rec.indicated = false;
            rec.ending = Ending::Open;
        }
        actions.push(Action::Incoming {
            events: l_events,
            listener,
            request: Connector {
                fabric: Arc::clone(fabric),
                key: pkey,
            },
        });
        Ok(())
    }

    fn accept(
        &mut self,
        key: Key,
        qp: &Arc<Qp>,
        limits: ReadLimits,
        payload: Vec<u8>,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || rec.state != ConnState::Requested {
            return Err(CmError::ConnectionInvalid);
        }
        if payload.len() > rec.limits.max_callee_data as usize {
            return Err(CmError::PrivateDataTooLong);
        }
        let node = rec.node;
        let own = limits.clamp(&rec.limits);
        self.check_qp(node, qp)?;
        let Some(peer) = self.peer_in(key, ConnState::Connecting) else {
            // N15: the active side gave up.
            self.fail(key);
            return Err(CmError::ConnectionAborted);
        };
        self.bound_qps
            .try_reserve(1)
            .map_err(|_| CmError::Resources)?;
        self.leave_backlog(key);
        self.bound_qps.push(qp_key(qp));
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.set_state(key, ConnState::Accepting);
            rec.qp = Some(Arc::clone(qp));
            rec.own_limits = Some(own);
            rec.pending.accept = true;
        }
        if let Some(p) = self.connectors.get_mut(peer) {
            p.set_state(peer, ConnState::Replied);
            p.peer_limits = own;
            p.peer_data = payload;
            p.pending.connect = false;
        }
        // N13: the active side's Connect completes once the peer accepted.
        self.emit(actions, peer, Callout::Connect(Ok(())));
        Ok(())
    }

    /// The active connector `key` is refused (N16): its Connect fails.
    fn refuse(&mut self, key: Key, data: Vec<u8>, actions: &mut Actions) {
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.peer_data = data;
        }
        self.fail(key);
        self.emit(
            actions,
            key,
            Callout::Connect(Err(CmError::ConnectionRefused)),
        );
    }

    fn reject(&mut self, key: Key, payload: Vec<u8>, actions: &mut Actions) -> Result<(), CmError> {
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing {
            return Err(CmError::ConnectionInvalid);
        }
        let (state, max) = (rec.state, rec.limits.max_callee_data as usize);
        match state {
            ConnState::Requested | ConnState::Replied => {}
            _ => return Err(CmError::ConnectionInvalid),
        }
        if payload.len() > max {
            return Err(CmError::PrivateDataTooLong);
        }
        let peer_state = if state == ConnState::Requested {
            ConnState::Connecting
        } else {
            ConnState::Accepting
        };
        let peer = self.peer_in(key, peer_state);
        self.fail(key);
        // N16: Reject answers CONNECTION_ABORTED when the peer had already
        // abandoned the connection.
        let peer = peer.ok_or(CmError::ConnectionAborted)?;
        if state == ConnState::Requested {
            // N16: the active side's Connect fails as refused.
            self.refuse(peer, payload, actions);
        } else {
            // N16: the passive side's Accept fails as aborted.
            if let Some(p) = self.connectors.get_mut(peer) {
                p.peer_data = payload;
            }
            self.fail(peer);
            self.emit(
                actions,
                peer,
                Callout::Accept(Err(CmError::ConnectionAborted)),
            );
        }
        Ok(())
    }

    fn complete_connect(
        &mut self,
        fabric: &Arc<Fabric>,
        key: Key,
        actions: &mut Actions,
    ) -> Result<(), CmError> {
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || rec.state != ConnState::Replied {
            // N14: not connecting.
            return Err(CmError::ConnectionInvalid);
        }
        let Some(peer) = self.peer_in(key, ConnState::Accepting) else {
            // N14: the accepting peer gave up.
            self.fail(key);
            return Err(CmError::ConnectionAborted);
        };
        let own_qp = rec.qp.clone();
        let own_limits = rec.own_limits.unwrap_or_default();
        let (peer_qp, peer_limits) = self
            .connectors
            .get(peer)
            .map(|p| (p.qp.clone(), p.own_limits.unwrap_or_default()))
            .unwrap_or_default();
        let (Some(own_qp), Some(peer_qp)) = (own_qp, peer_qp) else {
            self.fail(key);
            self.fail(peer);
            self.emit(
                actions,
                peer,
                Callout::Accept(Err(CmError::ConnectionAborted)),
            );
            return Err(CmError::ConnectionInvalid);
        };
        // E5/X2: errors that end the connection come back as indications.
        // Set before the QPs connect, so that none is missed.
        let weak = Arc::downgrade(fabric);
        own_qp.set_events(Some(Arc::new(LostHandler {
            fabric: Weak::clone(&weak),
            key,
        })));
        peer_qp.set_events(Some(Arc::new(LostHandler {
            fabric: weak,
            key: peer,
        })));
        // N14: a QP that is no longer idle (flushed, closed) fails this side
        // with CONNECTION_INVALID and the other with CONNECTION_ABORTED.
        let failure = if own_qp.state() != QpState::Idle {
            Some((CmError::ConnectionInvalid, CmError::ConnectionAborted))
        } else if peer_qp.state() != QpState::Idle {
            Some((CmError::ConnectionAborted, CmError::ConnectionInvalid))
        } else {
            qp::connect(&own_qp, &peer_qp, own_limits.pair(), peer_limits.pair())
                .err()
                .map(|_| (CmError::ConnectionInvalid, CmError::ConnectionAborted))
        };
        if let Some((own_error, peer_error)) = failure {
            self.fail(key);
            self.fail(peer);
            self.emit(actions, peer, Callout::Accept(Err(peer_error)));
            return Err(own_error);
        }
        own_qp
            .device()
            .counters
            .connect
            .fetch_add(1, Ordering::Relaxed);
        peer_qp
            .device()
            .counters
            .accept
            .fetch_add(1, Ordering::Relaxed);
        for qp in [&own_qp, &peer_qp] {
            qp.device()
                .counters
                .active_connection
                .fetch_add(1, Ordering::Relaxed);
        }
        if let Some(rec) = self.connectors.get_mut(key) {
            rec.set_state(key, ConnState::Established);
            rec.peer_qp = Some(Arc::clone(&peer_qp));
            rec.counted = true;
        }
        if let Some(p) = self.connectors.get_mut(peer) {
            p.set_state(peer, ConnState::Established);
            p.peer_qp = Some(own_qp);
            p.counted = true;
            p.pending.accept = false;
        }
        // N15: Accept completes once the active side completed the connection.
        self.emit(actions, peer, Callout::Accept(Ok(())));
        Ok(())
    }

    fn disconnect(&mut self, key: Key, actions: &mut Actions) -> Result<(), CmError> {
        let rec = self
            .connectors
            .get_mut(key)
            .ok_or(CmError::ConnectionInvalid)?;
        if rec.closing || rec.state != ConnState::Established {
            // X5: a second disconnect, or one that was never connected.
            return Err(CmError::ConnectionInvalid);
        }
        rec.pending.disconnect = true;
        self.leave(key, false, actions);
        Ok(())
    }

    fn connection_lost(&mut self, key: Key, actions: &mut Actions) {
        let Some(rec) = self.connectors.get_mut(key) else {
            return;
        };
        // Only while the connection is up, or this side waits for the peer:
        // a teardown in progress makes the QPs report the loss too, which
        // is no abort.
        let waiting = rec.state == ConnState::Disconnecting && rec.waiting;
        if rec.state != ConnState::Established && !waiting {
            return;
        }
        if rec.ending == Ending::Open {
            rec.ending = Ending::Aborted;
        }
        if waiting {
            // X1: an abort ends the wait for the peer, with a failure.
            self.teardown(key, actions);
        } else if !core::mem::replace(&mut rec.indicated, true) {
            // X2: the abort is indicated, once (N24).
            self.emit(actions, key, Callout::Indicate);
        }
    }

    fn close_connector(&mut self, key: Key, actions: &mut Actions) -> CloseState {
        let Some(rec) = self.connectors.get_mut(key) else {
            return CloseState::Done;
        };
        if rec.closing {
            return CloseState::Pending;
        }
        rec.closing = true;
        match rec.state {
            ConnState::Idle | ConnState::Failed | ConnState::Disconnected => {}
            ConnState::Disconnecting => {
                if rec.waiting {
                    // L20: the close stops waiting for the peer's answer;
                    // the Disconnect completes, cancelled, before the close.
                    rec.cancelled = true;
                    self.teardown(key, actions);
                }
            }
            ConnState::Connecting => {
                // L20: the close cancels the pending Connect; the passive
                // side finds the request abandoned (N15, N16).
                self.fail(key);
                self.emit(actions, key, Callout::Connect(Err(CmError::Cancelled)));
            }
            ConnState::Replied => {
                let peer = self.peer_in(key, ConnState::Accepting);
                self.fail(key);
                if let Some(peer) = peer {
                    self.fail(peer);
                    self.emit(
                        actions,
                        peer,
                        Callout::Accept(Err(CmError::ConnectionAborted)),
                    );
                }
            }
            ConnState::Requested => {
                // An unanswered request closed: as a reject (N16).
                let peer = self.peer_in(key, ConnState::Connecting);
                self.fail(key);
                if let Some(peer) = peer {
                    self.refuse(peer, Vec::new(), actions);
                }
            }
            ConnState::Accepting => {
                // L20: the close cancels the pending Accept; the active side
                // finds the connection abandoned (N14, N16).
                self.fail(key);
                self.emit(actions, key, Callout::Accept(Err(CmError::Cancelled)));
            }
            // Closing a connected connector is a graceful disconnect towards
            // the peer (X2), without a completion of its own.
            ConnState::Established => self.leave(key, true, actions),
        }
        if self.settle(key, actions) {
            CloseState::Done
        } else {
            if let Some(rec) = self.connectors.get_mut(key) {
                rec.close_pending = true;
            }
            CloseState::Pending
        }
    }

    fn connection_data(&self, key: Key, out: &mut [u8]) -> Result<ConnectionData, CmError> {
        let rec = self.connectors.get(key).ok_or(CmError::ConnectionInvalid)?;
        if matches!(rec.state, ConnState::Idle | ConnState::Connecting) {
            // N19: only once the peer has spoken.
            return Err(CmError::ConnectionInvalid);
        }
        let length = rec.peer_data.len();
        let copied = out.len().min(length);
        if let (Some(dst), Some(src)) = (out.get_mut(..copied), rec.peer_data.get(..copied)) {
            dst.copy_from_slice(src);
        }
        Ok(ConnectionData {
            limits: rec.reported_limits(),
            length,
            copied,
        })
    }

    // ----- listeners -------------------------------------------------------

    fn listen(&mut self, key: Key, local: Endpoint) -> Result<Endpoint, CmError> {
        let rec = self.listeners.get(key).ok_or(CmError::InvalidState)?;
        if rec.closing || rec.listening.is_some() {
            return Err(CmError::InvalidState);
        }
        let node = rec.node;
        // N31: a wildcard listener stays a wildcard.
        let ip = self.local_ip(node, local.ip, false, None)?;
        let r = self.bind(node, ip, local.port)?;
        if let Some(b) = self.binding_mut(r) {
            b.listener = Some(key);
        }
        let endpoint = Endpoint::new(ip, r.port);
        if let Some(rec) = self.listeners.get_mut(key) {
            rec.listening = Some((r, endpoint));
        }
        Ok(endpoint)
    }

    fn settle_listener(&mut self, key: Key, actions: &mut Actions) -> bool {
        let done = self
            .listeners
            .get(key)
            .is_some_and(|l| l.closing && l.callouts == 0);
        if !done {
            return false;
        }
        if let Some(rec) = self.listeners.remove(key) {
            // As for connectors: dropped or called after the lock.
            actions.push(Action::ListenerClosed {
                events: rec.events,
                notify: rec.close_pending,
            });
        }
        true
    }

    fn close_listener(&mut self, key: Key, actions: &mut Actions) -> CloseState {
        let Some(rec) = self.listeners.get_mut(key) else {
            return CloseState::Done;
        };
        if rec.closing {
            return CloseState::Pending;
        }
        rec.closing = true;
        // N6: from now on every request is turned away. N7: the listener's
        // reference on its endpoint goes; accepted connectors keep theirs.
        if let Some((r, _)) = rec.listening.take() {
            if let Some(b) = self.binding_mut(r) {
                b.listener = None;
            }
            self.unbind(r);
        }
        if self.settle_listener(key, actions) {
            CloseState::Done
        } else {
            if let Some(rec) = self.listeners.get_mut(key) {
                rec.close_pending = true;
            }
            CloseState::Pending
        }
    }
}

// ---------------------------------------------------------------------------
// The fabric
// ---------------------------------------------------------------------------

/// The connection fabric of one driver instance (host mode: one process):
/// every device, address, endpoint, listener and connector.
pub struct Fabric {
    state: SpinLock<State>,
    /// Polls connections whose DMA has not finished yet (X1b).
    poller: Deferred<Poller>,
}

impl fmt::Debug for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fabric { .. }")
    }
}

struct Poller(Weak<Fabric>);

impl DeferredRoutine for Poller {
    fn run(&self) {
        if let Some(fabric) = self.0.upgrade() {
            fabric.poll();
        }
    }
}

/// Turns a QP's lost connection into a disconnect indication (E5, X2).
struct LostHandler {
    fabric: Weak<Fabric>,
    key: Key,
}

impl QpEvents for LostHandler {
    fn connection_lost(&self) {
        if let Some(fabric) = self.fabric.upgrade() {
            fabric.run(|state, _, actions| state.connection_lost(self.key, actions));
        }
    }
}

fn copy_data(data: &[u8]) -> Result<Vec<u8>, CmError> {
    let mut v = Vec::new();
    v.try_reserve_exact(data.len())
        .map_err(|_| CmError::Resources)?;
    v.extend_from_slice(data);
    Ok(v)
}

impl Fabric {
    /// An empty fabric.
    pub fn new() -> Arc<Self> {
        Arc::new_cyclic(|weak| Self {
            state: SpinLock::new(State::new()),
            poller: Deferred::new(Poller(Weak::clone(weak))),
        })
    }

    /// The device that owns `ip`, if any.
    pub fn device_of(&self, ip: IpAddr) -> Option<Arc<Device>> {
        let state = self.state.lock();
        let node = state.owner(ip)?;
        state
            .nodes
            .iter()
            .find(|n| n.key == node)
            .and_then(|n| n.device.upgrade())
    }

    /// Whether `ip`:`port` is bound (by a listener, a shared endpoint or a
    /// connection), directly or through a wildcard.
    pub fn is_bound(&self, ip: IpAddr, port: u16) -> bool {
        let state = self.state.lock();
        let owner = state.owner(ip);
        state
            .bindings
            .get(state.port_range(port))
            .is_some_and(|found| {
                found.iter().any(|b| {
                    b.ip == ip
                        || (b.ip.is_unspecified()
                            && b.ip.family() == ip.family()
                            && owner == Some(b.node))
                })
            })
    }

    /// The established connections of `device` (for `OID_NDK_CONNECTIONS`,
    /// A19): fills `out` with as many as fit and returns how many there are.
    pub fn connections(&self, device: &Arc<Device>, out: &mut [ConnectionInfo]) -> usize {
        let node = node_of_device(device);
        let state = self.state.lock();
        let mut n = 0_usize;
        for (_, rec) in &state.connectors.slots {
            let Some(rec) = rec else { continue };
            // An aborted connection (E5, A15) is no longer active, though its
            // connector waits for the consumer's Disconnect or close.
            if rec.node != node
                || rec.state != ConnState::Established
                || rec.ending == Ending::Aborted
            {
                continue;
            }
            if let (Some(local), Some(remote)) = (rec.local, rec.remote) {
                if let Some(slot) = out.get_mut(n) {
                    *slot = ConnectionInfo { local, remote };
                }
                n += 1;
            }
        }
        n
    }

    /// Aborts every established connection of `device` (NDK disabled, or
    /// the adapter halting: A15): both sides' QPs enter the error state, their
    /// outstanding work completes cancelled (E5), and both consumers get their
    /// disconnect indication (X2), so that they close what they own. Returns
    /// how many connections were aborted. Control path: allocates.
    pub fn abort_all(&self, device: &Arc<Device>) -> usize {
        let node = node_of_device(device);
        let mut qps: Vec<Arc<Qp>> = Vec::new();
        {
            let state = self.state.lock();
            for (_, rec) in &state.connectors.slots {
                let Some(rec) = rec else { continue };
                if rec.node != node
                    || rec.state != ConnState::Established
                    || rec.ending == Ending::Aborted
                {
                    continue;
                }
                if let Some(qp) = &rec.qp {
                    if qps.try_reserve(1).is_err() {
                        break;
                    }
                    qps.push(Arc::clone(qp));
                }
            }
        }
        // Outside the fabric's lock: terminating reports the loss back here.
        let aborted = qps.len();
        for qp in qps {
            qp.terminate();
        }
        aborted
    }

    /// The listeners and shared endpoints of `device` (for
    /// `OID_NDK_LOCAL_ENDPOINTS`, A20): fills `out` with as many as fit and
    /// returns how many there are.
    pub fn local_endpoints(&self, device: &Arc<Device>, out: &mut [LocalEndpointInfo]) -> usize {
        let node = node_of_device(device);
        let state = self.state.lock();
        let mut n = 0_usize;
        for b in &state.bindings {
            let listener = b.listener.is_some();
            if b.node != node || !(listener || b.shared) {
                continue;
            }
            if let Some(slot) = out.get_mut(n) {
                *slot = LocalEndpointInfo {
                    local: Endpoint::new(b.ip, b.port),
                    listener,
                };
            }
            n += 1;
        }
        n
    }

    /// Connectors that exist (open, or closing with work in flight).
    pub fn connector_count(&self) -> usize {
        self.state.lock().connectors.count(|_| true)
    }

    /// Listeners that exist (open, or closing with callbacks in flight).
    pub fn listener_count(&self) -> usize {
        self.state.lock().listeners.count(|_| true)
    }

    /// Runs `f` under the lock, then makes the callbacks it queued.
    fn run<R>(self: &Arc<Self>, f: impl FnOnce(&mut State, &Arc<Self>, &mut Actions) -> R) -> R {
        let mut actions = Actions::new();
        let result = {
            let mut state = self.state.lock();
            f(&mut state, self, &mut actions)
        };
        self.execute(actions);
        result
    }

    /// Makes the queued callbacks, with no lock held (I4), then the
    /// bookkeeping each one needs.
    fn execute(self: &Arc<Self>, mut actions: Actions) {
        for action in actions.drain() {
            match action {
                Action::Connector {
                    events,
                    key,
                    callout,
                } => {
                    match callout {
                        Callout::Connect(result) => events.connect_completed(result),
                        Callout::Accept(result) => events.accept_completed(result),
                        Callout::Disconnect(result) => events.disconnect_completed(result),
                        Callout::Indicate => events.disconnected(),
                    }
                    drop(events);
                    self.run(|state, _, more| {
                        if let Some(rec) = state.connectors.get_mut(key) {
                            rec.callouts = rec.callouts.saturating_sub(1);
                        }
                        state.settle(key, more);
                    });
                }
                Action::ConnectorClosed { events, notify } => {
                    if notify {
                        events.closed();
                    }
                }
                Action::Incoming {
                    events,
                    listener,
                    request,
                } => {
                    events.incoming(request);
                    drop(events);
                    self.run(|state, _, more| {
                        if let Some(rec) = state.listeners.get_mut(listener) {
                            rec.callouts = rec.callouts.saturating_sub(1);
                        }
                        state.settle_listener(listener, more);
                    });
                }
                Action::ListenerClosed { events, notify } => {
                    if notify {
                        events.closed();
                    }
                }
                Action::Teardown { qps, keys } => {
                    for qp in qps.into_iter().flatten() {
                        qp.disconnect();
                    }
                    for key in keys.into_iter().flatten() {
                        self.check_quiescence(key);
                    }
                }
            }
        }
    }

    /// Completes the disconnect of `key` if its DMA has finished, else
    /// leaves it to the poller (X1b).
    fn check_quiescence(self: &Arc<Self>, key: Key) {
        let wait = self.run(|state, _, actions| match state.connectors.get(key) {
            Some(rec) if rec.quiescing => {
                if rec.quiescent() {
                    state.finish_disconnect(key, actions);
                    false
                } else {
                    true
                }
            }
            _ => false,
        });
        if wait {
            let _ = self.poller.schedule();
        }
    }

    /// The poller: completes every disconnect whose DMA has finished, and
    /// comes back while some still wait. DMA of one request is bounded (a
    /// copy of at most `MaxTransferLength` bytes), so the polling is short.
    fn poll(self: &Arc<Self>) {
        loop {
            let (progress, waiting) = self.run(|state, _, actions| {
                match state.connectors.find(|r| r.quiescing && r.quiescent()) {
                    Some(key) => {
                        state.finish_disconnect(key, actions);
                        (true, true)
                    }
                    None => (false, state.connectors.count(|r| r.quiescing) > 0),
                }
            });
            if !progress {
                if waiting {
                    let _ = self.poller.schedule();
                }
                return;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Address sets
// ---------------------------------------------------------------------------

struct Registration {
    fabric: Arc<Fabric>,
    device: Arc<Device>,
    addresses: Vec<IpAddr>,
}

/// The local addresses of an adapter, registered on the fabric as owned by
/// its device (N1). Every opening of one device shares its addresses (N32).
/// Dropping the set gives the registration back; an address is free for
/// another device once no set of its device holds it.
#[derive(Default)]
pub struct AddressSet {
    registration: Option<Registration>,
}

impl fmt::Debug for AddressSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.addresses()).finish()
    }
}

impl AddressSet {
    /// Registers `addresses` as owned by `device` on `fabric`. An address
    /// the device already owns is shared.
    ///
    /// # Errors
    /// [`CmError::InvalidAddress`] for a wildcard address,
    /// [`CmError::AddressInUse`] for an address another device owns,
    /// [`CmError::Resources`].
    pub fn register(
        fabric: &Arc<Fabric>,
        device: &Arc<Device>,
        addresses: &[IpAddr],
    ) -> Result<Self, CmError> {
        let mut list = Vec::new();
        list.try_reserve_exact(addresses.len())
            .map_err(|_| CmError::Resources)?;
        for &ip in addresses {
            if ip.is_unspecified() {
                return Err(CmError::InvalidAddress);
            }
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
        fabric.state.lock().register(device, &list)?;
        Ok(Self {
            registration: Some(Registration {
                fabric: Arc::clone(fabric),
                device: Arc::clone(device),
                addresses: list,
            }),
        })
    }

    /// Another set with the same registration.
    ///
    /// # Errors
    /// [`CmError::Resources`].
    pub fn try_clone(&self) -> Result<Self, CmError> {
        let Some(reg) = &self.registration else {
            return Ok(Self::default());
        };
        let mut list = Vec::new();
        list.try_reserve_exact(reg.addresses.len())
            .map_err(|_| CmError::Resources)?;
        list.extend_from_slice(&reg.addresses);
        reg.fabric
            .state
            .lock()
            .retain(node_of_device(&reg.device), &list);
        Ok(Self {
            registration: Some(Registration {
                fabric: Arc::clone(&reg.fabric),
                device: Arc::clone(&reg.device),
                addresses: list,
            }),
        })
    }

    /// The addresses.
    pub fn addresses(&self) -> &[IpAddr] {
        self.registration
            .as_ref()
            .map_or(&[], |r| r.addresses.as_slice())
    }

    /// Whether `ip` is one of them.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.addresses().contains(&ip)
    }

    /// The device that owns them (`None` for an empty, detached set).
    pub fn device(&self) -> Option<&Arc<Device>> {
        self.registration.as_ref().map(|r| &r.device)
    }

    /// The fabric they are registered on.
    pub fn fabric(&self) -> Option<&Arc<Fabric>> {
        self.registration.as_ref().map(|r| &r.fabric)
    }

    fn parts(&self) -> Result<(&Arc<Fabric>, usize, Limits), CmError> {
        let reg = self
            .registration
            .as_ref()
            .ok_or(CmError::InvalidParameter)?;
        Ok((
            &reg.fabric,
            node_of_device(&reg.device),
            *reg.device.limits(),
        ))
    }
}

impl Drop for AddressSet {
    fn drop(&mut self) {
        if let Some(reg) = self.registration.take() {
            reg.fabric
                .state
                .lock()
                .unregister(node_of_device(&reg.device), &reg.addresses);
        }
    }
}

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------

/// A shared endpoint (N9–N11): a local address and port that many
/// connections may share as long as their destinations differ. Dropping it
/// closes it.
#[derive(Debug)]
pub struct SharedEndpoint {
    fabric: Arc<Fabric>,
    node: usize,
    binding: BindingRef,
    local: Endpoint,
    open: AtomicBool,
}

impl SharedEndpoint {
    /// Claims `local` on the device of `set` (port 0: an ephemeral one; a
    /// wildcard address: the device's first address of the family).
    ///
    /// # Errors
    /// As `listen` (N9): [`CmError::InvalidAddress`],
    /// [`CmError::AddressInUse`], [`CmError::TooManyAddresses`],
    /// [`CmError::Resources`]; [`CmError::InvalidParameter`] for a detached
    /// set.
    pub fn new(set: &AddressSet, local: Endpoint) -> Result<Self, CmError> {
        let (fabric, node, _) = set.parts()?;
        let mut state = fabric.state.lock();
        let ip = state.local_ip(node, local.ip, true, None)?;
        let binding = state.bind(node, ip, local.port)?;
        if let Some(b) = state.binding_mut(binding) {
            b.shared = true;
        }
        drop(state);
        Ok(Self {
            fabric: Arc::clone(fabric),
            node,
            binding,
            local: Endpoint::new(ip, binding.port),
            open: AtomicBool::new(true),
        })
    }

    /// The claimed address and port (N9).
    pub const fn local(&self) -> Endpoint {
        self.local
    }

    /// Drops the endpoint's own reference (N10): the address and port stay
    /// in use while connectors connected through it remain.
    pub fn close(&self) {
        if self.open.swap(false, Ordering::AcqRel) {
            self.fabric.state.lock().unbind(self.binding);
        }
    }
}

impl Drop for SharedEndpoint {
    fn drop(&mut self) {
        self.close();
    }
}

/// A listener (N3–N7, N31). Dropping it closes it.
pub struct Listener {
    fabric: Arc<Fabric>,
    key: Key,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Listener {
    /// A listener on the device of `set`, reporting to `events`.
    ///
    /// # Errors
    /// [`CmError::InvalidParameter`] for a detached set,
    /// [`CmError::Resources`].
    pub fn new(set: &AddressSet, events: Arc<dyn ListenerEvents>) -> Result<Self, CmError> {
        let (fabric, node, limits) = set.parts()?;
        let key = fabric.state.lock().listeners.insert(ListenerRec {
            node,
            limits,
            events,
            listening: None,
            paused: false,
            backlog: 0,
            callouts: 0,
            closing: false,
            close_pending: false,
        })?;
        Ok(Self {
            fabric: Arc::clone(fabric),
            key,
        })
    }

    /// Starts listening on `local` (N3): an address of the device or the
    /// family's wildcard (N31), port 0 for an ephemeral port. Returns the
    /// endpoint bound.
    ///
    /// # Errors
    /// [`CmError::AddressInUse`], [`CmError::InvalidAddress`],
    /// [`CmError::TooManyAddresses`], [`CmError::Resources`] (N3);
    /// [`CmError::InvalidState`] when already listening or closed.
    pub fn listen(&self, local: Endpoint) -> Result<Endpoint, CmError> {
        self.fabric.state.lock().listen(self.key, local)
    }

    /// The endpoint listened on.
    pub fn local(&self) -> Option<Endpoint> {
        let state = self.fabric.state.lock();
        state
            .listeners
            .get(self.key)
            .and_then(|l| l.listening)
            .map(|(_, endpoint)| endpoint)
    }

    /// Pauses (`true`) or resumes the delivery of requests (N5): while
    /// paused, requests are refused as though no listener existed.
    pub fn pause(&self, pause: bool) {
        if let Some(rec) = self.fabric.state.lock().listeners.get_mut(self.key) {
            rec.paused = pause;
        }
    }

    /// Closes the listener: requests are refused from now on (N6), its
    /// reference on the endpoint goes (N7). Pending while `incoming` calls
    /// are in flight; then `closed` follows.
    pub fn close(&self) -> CloseState {
        self.fabric
            .run(|state, _, actions| state.close_listener(self.key, actions))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// A connector: one end of a connection. Dropping it closes it.
pub struct Connector {
    fabric: Arc<Fabric>,
    key: Key,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("key", &self.key)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// An idle connector on the device of `set`.
    ///
    /// # Errors
    /// [`CmError::InvalidParameter`] for a detached set,
    /// [`CmError::Resources`].
    pub fn new(set: &AddressSet) -> Result<Self, CmError> {
        let (fabric, node, limits) = set.parts()?;
        let key = fabric
            .state
            .lock()
            .connectors
            .insert(ConnectorRec::new(node, limits))?;
        Ok(Self {
            fabric: Arc::clone(fabric),
            key,
        })
    }

    /// Sets who hears of this connector's events.
    pub fn set_events(&self, events: Arc<dyn ConnectorEvents>) {
        let old = self
            .fabric
            .state
            .lock()
            .connectors
            .get_mut(self.key)
            .and_then(|rec| rec.events.replace(events));
        drop(old);
    }

    /// The state (`None` once closed).
    pub fn state(&self) -> Option<ConnState> {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .map(|r| r.state)
    }

    /// The local endpoint, once connecting or connected (N22, N23).
    pub fn local(&self) -> Option<Endpoint> {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .and_then(|r| r.local)
    }

    /// The peer's endpoint, once connecting or connected (N22, N23).
    pub fn peer(&self) -> Option<Endpoint> {
        self.fabric
            .state
            .lock()
            .connectors
            .get(self.key)
            .and_then(|r| r.remote)
    }

    /// Asks `dst` for a connection with `qp` from a dedicated endpoint at
    /// `src` (N8, N12): `Ok` means pending, `connect_completed` follows.
    /// `src` may be a wildcard (the device's address of the family) and its
    /// port 0 (ephemeral). Read limits are lowered to the device's (N20).
    ///
    /// # Errors
    /// Inline, with nothing started: [`CmError::ConnectionInvalid`] (not
    /// idle, X5; QP not idle or tied to another connector),
    /// [`CmError::InvalidParameter`] (QP of another device),
    /// [`CmError::PrivateDataTooLong`] (N17), [`CmError::InvalidAddress`],
    /// [`CmError::AddressInUse`], [`CmError::TooManyAddresses`],
    /// [`CmError::HostUnreachable`], [`CmError::NetworkUnreachable`],
    /// [`CmError::ConnectionRefused`] (no, paused or closing listener, full
    /// backlog: N5, N6, N12), [`CmError::Resources`].
    pub fn connect(
        &self,
        qp: &Arc<Qp>,
        src: Endpoint,
        dst: Endpoint,
        limits: ReadLimits,
        data: &[u8],
    ) -> Result<(), CmError> {
        let payload = copy_data(data)?;
        let key = self.key;
        self.fabric.run(|state, fabric, actions| {
            state.connect(
                fabric,
                key,
                qp,
                Source::Address(src),
                dst,
                limits,
                payload,
                actions,
            )
        })
    }

    /// As [`connect`](Self::connect), from `endpoint` (N10, N11).
    ///
    /// # Errors
    /// As `connect`, and [`CmError::AddressAlreadyExists`] when a connection
    /// from `endpoint` to `dst` exists (N11); [`CmError::InvalidParameter`]
    /// for an endpoint of another device or a closed one.
    pub fn connect_shared(
        &self,
        qp: &Arc<Qp>,
        endpoint: &SharedEndpoint,
        dst: Endpoint,
        limits: ReadLimits,
        data: &[u8],
    ) -> Result<(), CmError> {
        if !Arc::ptr_eq(&self.fabric, &endpoint.fabric) || !endpoint.open.load(Ordering::Acquire) {
            return Err(CmError::InvalidParameter);
        }
        let payload = copy_data(data)?;
        let key = self.key;
        let source = Source::Shared {
            binding: endpoint.binding,
            local: endpoint.local,
            node: endpoint.node,
        };
        self.fabric.run(|state, fabric, actions| {
            state.connect(fabric, key, qp, source, dst, limits, payload, actions)
        })
    }

    /// Accepts the request with `qp` (N15): `Ok` means pending,
    /// `accept_completed` follows once the active side completes the
    /// connection; the active side's `connect` completes now.
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] (not a request, or the QP is not idle
    /// or tied elsewhere), [`CmError::InvalidParameter`] (QP of another
    /// device), [`CmError::PrivateDataTooLong`] (N17),
    /// [`CmError::ConnectionAborted`] (the active side gave up, N15),
    /// [`CmError::Resources`].
    pub fn accept(&self, qp: &Arc<Qp>, limits: ReadLimits, data: &[u8]) -> Result<(), CmError> {
        let payload = copy_data(data)?;
        let key = self.key;
        self.fabric
            .run(|state, _, actions| state.accept(key, qp, limits, payload, actions))
    }

    /// Rejects (N16), synchronously: a request (the active side's `connect`
    /// fails refused) or, on the active side after `connect` completed, the
    /// accepted connection (the peer's `accept` fails aborted).
    ///
    /// # Errors
    /// [`CmError::ConnectionAborted`] when the peer had already abandoned,
    /// [`CmError::ConnectionInvalid`] in another state,
    /// [`CmError::PrivateDataTooLong`] (N17), [`CmError::Resources`].
    pub fn reject(&self, data: &[u8]) -> Result<(), CmError> {
        let payload = copy_data(data)?;
        let key = self.key;
        self.fabric
            .run(|state, _, actions| state.reject(key, payload, actions))
    }

    /// Completes an accepted connection (N13), synchronously: both QPs are
    /// connected with the negotiated read limits (N20) and the peer's
    /// `accept` completes.
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] when not connecting or this side's QP
    /// is no longer idle, [`CmError::ConnectionAborted`] when the peer gave
    /// up or its QP is no longer idle (N14).
    pub fn complete_connect(&self) -> Result<(), CmError> {
        let key = self.key;
        self.fabric
            .run(|state, fabric, actions| state.complete_connect(fabric, key, actions))
    }

    /// Copies the peer's private data into `out` (as much as fits) and
    /// reports its size and the read limits (N18–N20).
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] before the peer has sent anything.
    pub fn connection_data(&self, out: &mut [u8]) -> Result<ConnectionData, CmError> {
        self.fabric.state.lock().connection_data(self.key, out)
    }

    /// Disconnects gracefully (X1): `Ok` means pending,
    /// `disconnect_completed` follows once both QPs' DMA has finished.
    ///
    /// # Errors
    /// [`CmError::ConnectionInvalid`] when not established (X5).
    pub fn disconnect(&self) -> Result<(), CmError> {
        let key = self.key;
        self.fabric
            .run(|state, _, actions| state.disconnect(key, actions))
    }

    /// Closes the connector: cancels what is pending (L20), disconnects an
    /// established connection gracefully towards the peer, gives back the
    /// endpoint reference (N7, N8, N10). Pending while DMA or callbacks are
    /// in flight; then `closed` follows.
    pub fn close(&self) -> CloseState {
        let key = self.key;
        self.fabric
            .run(|state, _, actions| state.close_connector(key, actions))
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use alloc::vec;
    use std::sync::Mutex;

    use super::*;
    use crate::rnic::device::EngineMode;
    use crate::rnic::qp::Payload;
    use crate::rnic::testing::{CONFIG, Side};
    use crate::rnic::types::{Access, WcStatus, WrFlags};

    const A: IpAddr = IpAddr::V4([10, 0, 0, 1]);
    const A2: IpAddr = IpAddr::V4([10, 0, 0, 3]);
    const B: IpAddr = IpAddr::V4([10, 0, 0, 2]);
    const ANY: IpAddr = IpAddr::V4([0; 4]);

    fn ep(ip: IpAddr, port: u16) -> Endpoint {
        Endpoint::new(ip, port)
    }

    // ----- recorders -------------------------------------------------------

    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Ev {
        Connect(Result<(), CmError>),
        Accept(Result<(), CmError>),
        Disconnect(Result<(), CmError>),
        Indicated,
        Closed,
    }

    #[derive(Default)]
    struct Events(Mutex<Vec<Ev>>);

    impl Events {
        fn take(&self) -> Vec<Ev> {
            core::mem::take(&mut *self.0.lock().unwrap())
        }
        fn push(&self, ev: Ev) {
            self.0.lock().unwrap().push(ev);
        }
    }

    impl ConnectorEvents for Events {
        fn connect_completed(&self, result: Result<(), CmError>) {
            self.push(Ev::Connect(result));
        }
        fn accept_completed(&self, result: Result<(), CmError>) {
            self.push(Ev::Accept(result));
        }
        fn disconnect_completed(&self, result: Result<(), CmError>) {
            self.push(Ev::Disconnect(result));
        }
        fn disconnected(&self) {
            self.push(Ev::Indicated);
        }
        fn closed(&self) {
            self.push(Ev::Closed);
        }
    }

    #[derive(Default)]
    struct Requests {
        queue: Mutex<Vec<Connector>>,
        closed: Mutex<usize>,
    }

    impl ListenerEvents for Requests {
        fn incoming(&self, request: Connector) {
            self.queue.lock().unwrap().push(request);
        }
        fn closed(&self) {
            *self.closed.lock().unwrap() += 1;
        }
    }

    // ----- fixtures --------------------------------------------------------

    struct Host {
        device: Arc<Device>,
        set: AddressSet,
    }

    fn host(fabric: &Arc<Fabric>, ips: &[IpAddr], mode: EngineMode) -> Host {
        let device = Device::new(Limits::DEFAULT, mode).unwrap();
        let set = AddressSet::register(fabric, &device, ips).unwrap();
        Host { device, set }
    }

    struct Net {
        fabric: Arc<Fabric>,
        a: Host,
        b: Host,
    }

    fn net_with(mode: EngineMode) -> Net {
        let fabric = Fabric::new();
        let a = host(&fabric, &[A, A2], mode);
        let b = host(&fabric, &[B], mode);
        Net { fabric, a, b }
    }

    fn net() -> Net {
        net_with(EngineMode::Inline)
    }

    fn side(host: &Host, context: usize) -> Side {
        Side::new(&host.device, context, CONFIG)
    }

    struct Server {
        listener: Listener,
        requests: Arc<Requests>,
    }

    impl Server {
        fn next(&self) -> Option<Connector> {
            let mut queue = self.requests.queue.lock().unwrap();
            (!queue.is_empty()).then(|| queue.remove(0))
        }
    }

    fn server(host: &Host) -> Server {
        let requests = Arc::new(Requests::default());
        let listener = Listener::new(&host.set, Arc::clone(&requests) as _).unwrap();
        Server { listener, requests }
    }

    fn listening(host: &Host, local: Endpoint) -> Server {
        let s = server(host);
        s.listener.listen(local).unwrap();
        s
    }

    struct Client {
        conn: Connector,
        events: Arc<Events>,
    }

    fn wrap(conn: Connector) -> Client {
        let events = Arc::new(Events::default());
        conn.set_events(Arc::clone(&events) as _);
        Client { conn, events }
    }

    fn client(host: &Host) -> Client {
        wrap(Connector::new(&host.set).unwrap())
    }

    const LIMITS: ReadLimits = ReadLimits::new(16, 16);

    /// A request from `net.a` (QP `a`) to `dst`, delivered to `server`.
    fn request(
        net: &Net,
        server: &Server,
        a: &Side,
        dst: Endpoint,
        data: &[u8],
    ) -> (Client, Client) {
        let active = client(&net.a);
        active
            .conn
            .connect(&a.qp, ep(A, 0), dst, LIMITS, data)
            .unwrap();
        assert_eq!(active.conn.state(), Some(ConnState::Connecting));
        let passive = wrap(server.next().expect("connect event"));
        assert_eq!(passive.conn.state(), Some(ConnState::Requested));
        (active, passive)
    }

    /// An established connection between `net.a` and a listener on `net.b`.
    struct Conn {
        active: Client,
        passive: Client,
        a: Side,
        b: Side,
        server: Server,
    }

    fn established(net: &Net) -> Conn {
        let server = listening(&net.b, ep(B, 4000));
        let a = side(&net.a, 0xA);
        let b = side(&net.b, 0xB);
        let (active, passive) = request(net, &server, &a, ep(B, 4000), b"hello");
        passive.conn.accept(&b.qp, LIMITS, b"welcome").unwrap();
        assert_eq!(active.events.take(), vec![Ev::Connect(Ok(()))]);
        active.conn.complete_connect().unwrap();
        assert_eq!(passive.events.take(), vec![Ev::Accept(Ok(()))]);
        assert_eq!(active.conn.state(), Some(ConnState::Established));
        assert_eq!(passive.conn.state(), Some(ConnState::Established));
        Conn {
            active,
            passive,
            a,
            b,
            server,
        }
    }

    fn data_of(conn: &Connector) -> (ConnectionData, Vec<u8>) {
        let mut buf = [0_u8; 256];
        let data = conn.connection_data(&mut buf).unwrap();
        (data, buf[..data.copied].to_vec())
    }

    // ----- addresses -------------------------------------------------------

    mod addresses {
        use super::*;

        #[test]
        fn test_register_address_of_other_device_fails() {
            let net = net();
            let other = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
            assert_eq!(
                AddressSet::register(&net.fabric, &other, &[A]).err(),
                Some(CmError::AddressInUse)
            );
            assert_eq!(
                AddressSet::register(&net.fabric, &other, &[ANY]).err(),
                Some(CmError::InvalidAddress)
            );
        }

        #[test]
        fn test_register_same_device_shares_rule_n32() {
            let net = net();
            let again = AddressSet::register(&net.fabric, &net.a.device, &[A]).unwrap();
            let clone = again.try_clone().unwrap();
            drop(again);
            assert!(Arc::ptr_eq(
                &net.fabric.device_of(A).unwrap(),
                &net.a.device
            ));
            drop(clone);
            assert!(Arc::ptr_eq(
                &net.fabric.device_of(A).unwrap(),
                &net.a.device
            ));
        }

        #[test]
        fn test_address_free_after_last_set_dropped() {
            let net = net();
            let Net { fabric, a, b } = net;
            drop(a);
            assert!(fabric.device_of(A).is_none());
            let other = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
            let _set = AddressSet::register(&fabric, &other, &[A]).unwrap();
            assert!(Arc::ptr_eq(&fabric.device_of(A).unwrap(), &other));
            drop(b);
        }

        #[test]
        fn test_detached_set_creates_nothing() {
            let set = AddressSet::default();
            assert_eq!(Connector::new(&set).err(), Some(CmError::InvalidParameter));
            assert!(set.addresses().is_empty());
        }

        #[test]
        fn test_addresses_display() {
            assert_eq!(ep(A, 80).to_string(), "10.0.0.1:80");
            let mut v6 = [0_u8; 16];
            v6[15] = 1;
            assert_eq!(ep(IpAddr::V6(v6), 1).to_string(), "[0:0:0:0:0:0:0:1]:1");
        }
    }

    // ----- listeners -------------------------------------------------------

    mod listener {
        use super::*;

        #[test]
        fn test_listen_port_zero_picks_ephemeral_rule_n3() {
            let net = net();
            let s = server(&net.a);
            let local = s.listener.listen(ep(A, 0)).unwrap();
            assert!((EPHEMERAL_FIRST..=EPHEMERAL_LAST).contains(&local.port));
            assert_eq!(s.listener.local(), Some(local));
            assert!(net.fabric.is_bound(A, local.port));
        }

        #[test]
        fn test_listen_twice_same_port_fails_rule_n7() {
            let net = net();
            let _first = listening(&net.a, ep(A, 5000));
            let second = server(&net.a);
            assert_eq!(
                second.listener.listen(ep(A, 5000)),
                Err(CmError::AddressInUse)
            );
            // The same port on another address of the device is free.
            assert!(second.listener.listen(ep(A2, 5000)).is_ok());
        }

        #[test]
        fn test_listen_on_foreign_address_fails_rule_n3() {
            let net = net();
            let s = server(&net.a);
            assert_eq!(s.listener.listen(ep(B, 5000)), Err(CmError::InvalidAddress));
        }

        #[test]
        fn test_listening_listen_again_is_invalid_state() {
            let net = net();
            let s = listening(&net.a, ep(A, 5000));
            assert_eq!(s.listener.listen(ep(A, 5001)), Err(CmError::InvalidState));
        }

        #[test]
        fn test_wildcard_listener_covers_adapter_addresses_only_rule_n31() {
            let net = net();
            let wild_a = listening(&net.a, ep(ANY, 5000));
            // Another device may listen on the same port: the wildcard does
            // not span devices.
            let wild_b = listening(&net.b, ep(ANY, 5000));
            assert_eq!(
                wild_a.listener.local(),
                Some(ep(ANY, 5000)),
                "the listener reports the wildcard"
            );
            // Covers both of A's addresses, and conflicts with them.
            assert_eq!(
                server(&net.a).listener.listen(ep(A2, 5000)),
                Err(CmError::AddressInUse)
            );
            let qb = side(&net.b, 1);
            let c = client(&net.b);
            c.conn
                .connect(&qb.qp, ep(B, 0), ep(A2, 5000), LIMITS, b"")
                .unwrap();
            let passive = wild_a.next().expect("request on A2");
            assert_eq!(passive.local(), Some(ep(A2, 5000)));
            assert!(wild_b.next().is_none());
            // A request to B reaches B's listener only.
            let qa = side(&net.a, 2);
            let c2 = client(&net.a);
            c2.conn
                .connect(&qa.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                .unwrap();
            assert!(wild_b.next().is_some());
            assert!(wild_a.next().is_none());
        }

        #[test]
        fn test_specific_listener_blocks_wildcard_rule_n31() {
            let net = net();
            let _specific = listening(&net.a, ep(A2, 5000));
            assert_eq!(
                server(&net.a).listener.listen(ep(ANY, 5000)),
                Err(CmError::AddressInUse)
            );
            // IPv6 wildcard is another family.
            let _v6 = server(&net.a)
                .listener
                .listen(ep(IpAddr::unspecified(Family::V6), 5000));
        }

        #[test]
        fn test_ephemeral_ports_exhausted_rule_n3() {
            let net = net();
            let mut endpoints = Vec::new();
            for _ in EPHEMERAL_FIRST..=EPHEMERAL_LAST {
                let e = SharedEndpoint::new(&net.a.set, ep(A, 0)).unwrap();
                assert!(e.local().port >= EPHEMERAL_FIRST);
                endpoints.push(e);
            }
            let s = server(&net.a);
            assert_eq!(s.listener.listen(ep(A, 0)), Err(CmError::TooManyAddresses));
            // Another address of the device still has its own ports.
            assert!(s.listener.listen(ep(A2, 0)).is_ok());
            endpoints.pop();
            let again = server(&net.a);
            assert_eq!(
                again.listener.listen(ep(A, 0)).unwrap().port,
                EPHEMERAL_LAST
            );
        }

        #[test]
        fn test_paused_listener_refuses_rule_n5() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            s.listener.pause(true);
            let a = side(&net.a, 1);
            let c = client(&net.a);
            assert_eq!(
                c.conn.connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::ConnectionRefused)
            );
            assert!(s.next().is_none());
            // The refused attempt left nothing behind: the same connector and
            // QP connect once the listener resumes (N28).
            assert_eq!(c.conn.state(), Some(ConnState::Idle));
            s.listener.pause(false);
            c.conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                .unwrap();
            assert!(s.next().is_some());
        }

        #[test]
        fn test_closing_listener_refuses_and_keeps_endpoint_rule_n6_n7() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (_active, passive) = request(&net, &s, &a, ep(B, 5000), b"");
            assert_eq!(s.listener.close(), CloseState::Done);
            // N6: refused at once.
            let a2 = side(&net.a, 2);
            let c = client(&net.a);
            assert_eq!(
                c.conn.connect(&a2.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::ConnectionRefused)
            );
            // N7: the accepted connector still holds the endpoint.
            assert!(net.fabric.is_bound(B, 5000));
            assert_eq!(
                server(&net.b).listener.listen(ep(B, 5000)),
                Err(CmError::AddressInUse)
            );
            drop(passive);
            assert!(!net.fabric.is_bound(B, 5000));
            assert!(server(&net.b).listener.listen(ep(B, 5000)).is_ok());
        }

        #[test]
        fn test_backlog_full_refused_rule_n12() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let mut keep = Vec::new();
            for n in 0..BACKLOG {
                let a = side(&net.a, n);
                let c = client(&net.a);
                c.conn
                    .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                    .unwrap();
                keep.push((a, c));
            }
            let a = side(&net.a, 99);
            let c = client(&net.a);
            assert_eq!(
                c.conn.connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::ConnectionRefused)
            );
            // Answering one makes room.
            let first = s.next().unwrap();
            first.reject(b"").unwrap();
            c.conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                .unwrap();
        }

        #[test]
        fn test_listener_close_pends_while_incoming_runs() {
            struct Closer {
                listener: Mutex<Option<Arc<Listener>>>,
                seen: Mutex<Vec<CloseState>>,
                closed: Mutex<usize>,
            }
            impl ListenerEvents for Closer {
                fn incoming(&self, request: Connector) {
                    let listener = self.listener.lock().unwrap().clone().unwrap();
                    self.seen.lock().unwrap().push(listener.close());
                    drop(request);
                }
                fn closed(&self) {
                    *self.closed.lock().unwrap() += 1;
                }
            }
            let net = net();
            let closer = Arc::new(Closer {
                listener: Mutex::new(None),
                seen: Mutex::new(Vec::new()),
                closed: Mutex::new(0),
            });
            let listener = Arc::new(Listener::new(&net.b.set, Arc::clone(&closer) as _).unwrap());
            listener.listen(ep(B, 5000)).unwrap();
            *closer.listener.lock().unwrap() = Some(Arc::clone(&listener));
            let a = side(&net.a, 1);
            let c = client(&net.a);
            c.conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                .unwrap();
            assert_eq!(*closer.seen.lock().unwrap(), vec![CloseState::Pending]);
            assert_eq!(*closer.closed.lock().unwrap(), 1);
            assert_eq!(
                c.events.take(),
                vec![Ev::Connect(Err(CmError::ConnectionRefused))]
            );
            *closer.listener.lock().unwrap() = None;
            assert_eq!(net.fabric.listener_count(), 0);
        }
    }

    // ----- active Connecting / passive Requested -----------------------------

    mod requested {
        use super::*;

        #[test]
        fn test_connect_without_listener_refused_rule_n12() {
            let net = net();
            let a = side(&net.a, 1);
            let c = client(&net.a);
            assert_eq!(
                c.conn.connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::ConnectionRefused)
            );
            assert_eq!(
                net.a
                    .device
                    .counters
                    .connect_failure
                    .load(Ordering::Relaxed),
                1
            );
            // The dedicated endpoint went back (N8).
            assert!(!net.fabric.is_bound(A, 49152));
        }

        #[test]
        fn test_connect_bad_destinations_rule_n12() {
            let net = net();
            let a = side(&net.a, 1);
            let c = client(&net.a);
            let nobody = IpAddr::V4([10, 9, 9, 9]);
            let v6 = IpAddr::V6([0xfe; 16]);
            for (src, dst, error) in [
                (ep(A, 0), ep(nobody, 1), CmError::HostUnreachable),
                (ep(A, 0), ep(v6, 1), CmError::NetworkUnreachable),
                (ep(A, 0), ep(ANY, 1), CmError::InvalidAddress),
                (ep(A, 0), ep(B, 0), CmError::InvalidAddress),
                (ep(B, 0), ep(B, 1), CmError::InvalidAddress),
            ] {
                assert_eq!(c.conn.connect(&a.qp, src, dst, LIMITS, b""), Err(error));
            }
        }

        #[test]
        fn test_connect_delivers_request_with_private_data_rule_n4_n18() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (active, passive) = request(&net, &s, &a, ep(B, 5000), b"caller data");
            let (data, bytes) = data_of(&passive.conn);
            assert_eq!(bytes, b"caller data");
            assert_eq!(data.length, 11);
            // The passive side sees the active side's view mirrored (N20).
            assert_eq!(data.limits, ReadLimits::new(16, 16));
            assert_eq!(passive.conn.peer(), active.conn.local());
            assert_eq!(passive.conn.local(), Some(ep(B, 5000)));
            assert_eq!(active.conn.peer(), Some(ep(B, 5000)));
            // N19: nothing to read on the active side before the answer.
            assert_eq!(
                active.conn.connection_data(&mut []),
                Err(CmError::ConnectionInvalid)
            );
        }

        #[test]
        fn test_connection_data_short_buffer_reports_size_rule_n18() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (_active, passive) = request(&net, &s, &a, ep(B, 5000), b"0123456789");
            let mut small = [0_u8; 4];
            let data = passive.conn.connection_data(&mut small).unwrap();
            assert_eq!((data.length, data.copied), (10, 4));
            assert_eq!(&small, b"0123");
        }

        #[test]
        fn test_connect_private_data_too_long_rule_n17() {
            let net = net();
            let _s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let c = client(&net.a);
            let max = Limits::DEFAULT.max_caller_data as usize;
            assert_eq!(
                c.conn
                    .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, &vec![0; max + 1]),
                Err(CmError::PrivateDataTooLong)
            );
            c.conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, &vec![0; max])
                .unwrap();
        }

        #[test]
        fn test_connect_qp_checks() {
            let net = net();
            let _s = listening(&net.b, ep(B, 5000));
            let foreign = side(&net.b, 1);
            let c = client(&net.a);
            assert_eq!(
                c.conn
                    .connect(&foreign.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::InvalidParameter)
            );
            let a = side(&net.a, 1);
            c.conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                .unwrap();
            // The QP is tied to `c` now.
            let d = client(&net.a);
            assert_eq!(
                d.conn.connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::ConnectionInvalid)
            );
            // And `c` is busy.
            let a2 = side(&net.a, 2);
            assert_eq!(
                c.conn.connect(&a2.qp, ep(A, 0), ep(B, 5000), LIMITS, b""),
                Err(CmError::ConnectionInvalid)
            );
        }

        #[test]
        fn test_connect_dedicated_endpoint_in_use_rule_n8() {
            let net = net();
            let _local = listening(&net.a, ep(A, 6000));
            let _s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let c = client(&net.a);
            assert_eq!(
                c.conn.connect(&a.qp, ep(A, 6000), ep(B, 5000), LIMITS, b""),
                Err(CmError::AddressInUse)
            );
            c.conn
                .connect(&a.qp, ep(A, 6001), ep(B, 5000), LIMITS, b"")
                .unwrap();
            assert_eq!(c.conn.local(), Some(ep(A, 6001)));
            // N8: the dedicated endpoint is the connector's until it closes.
            assert!(net.fabric.is_bound(A, 6001));
            drop(c);
            assert!(!net.fabric.is_bound(A, 6001));
        }

        #[test]
        fn test_reject_refuses_connect_rule_n16() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (active, passive) = request(&net, &s, &a, ep(B, 5000), b"");
            passive.conn.reject(b"no thanks").unwrap();
            assert_eq!(
                active.events.take(),
                vec![Ev::Connect(Err(CmError::ConnectionRefused))]
            );
            assert_eq!(active.conn.state(), Some(ConnState::Failed));
            assert_eq!(data_of(&active.conn).1, b"no thanks");
            // N28: the QP is untouched and free again.
            assert_eq!(a.qp.state(), QpState::Idle);
            let again = client(&net.a);
            again
                .conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), LIMITS, b"")
                .unwrap();
            // Reject is over: a second answer is invalid.
            assert_eq!(passive.conn.reject(b""), Err(CmError::ConnectionInvalid));
            assert_eq!(
                passive.conn.accept(&side(&net.b, 2).qp, LIMITS, b""),
                Err(CmError::ConnectionInvalid)
            );
        }

        #[test]
        fn test_reject_private_data_too_long_rule_n17() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let b = side(&net.b, 2);
            let (_active, passive) = request(&net, &s, &a, ep(B, 5000), b"");
            let too_long = vec![0; Limits::DEFAULT.max_callee_data as usize + 1];
            assert_eq!(
                passive.conn.reject(&too_long),
                Err(CmError::PrivateDataTooLong)
            );
            assert_eq!(
                passive.conn.accept(&b.qp, LIMITS, &too_long),
                Err(CmError::PrivateDataTooLong)
            );
            assert_eq!(passive.conn.state(), Some(ConnState::Requested));
        }

        #[test]
        fn test_requested_close_refuses_connect_rule_n16() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (active, passive) = request(&net, &s, &a, ep(B, 5000), b"");
            drop(passive);
            assert_eq!(
                active.events.take(),
                vec![Ev::Connect(Err(CmError::ConnectionRefused))]
            );
        }

        #[test]
        fn test_connecting_close_cancels_and_peer_sees_abort_rule_n15_n16() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let b = side(&net.b, 2);
            let (active, passive) = request(&net, &s, &a, ep(B, 5000), b"");
            let events = Arc::clone(&active.events);
            assert_eq!(active.conn.close(), CloseState::Pending);
            assert_eq!(
                events.take(),
                vec![Ev::Connect(Err(CmError::Cancelled)), Ev::Closed]
            );
            drop(active);
            assert_eq!(
                passive.conn.accept(&b.qp, LIMITS, b""),
                Err(CmError::ConnectionAborted)
            );
            assert_eq!(passive.conn.reject(b""), Err(CmError::ConnectionInvalid));
            assert_eq!(b.qp.state(), QpState::Idle);
        }

        #[test]
        fn test_reject_after_abandon_returns_aborted_rule_n16() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (active, passive) = request(&net, &s, &a, ep(B, 5000), b"");
            drop(active);
            assert_eq!(passive.conn.reject(b""), Err(CmError::ConnectionAborted));
        }

        #[test]
        fn test_connecting_waits_for_the_passive_side_rule_n29() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let (active, _passive) = request(&net, &s, &a, ep(B, 5000), b"");
            crate::kernel::deferred::flush();
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(active.conn.state(), Some(ConnState::Connecting));
            assert!(active.events.take().is_empty());
        }
    }

    // ----- active Replied / passive Accepting ---------------------------------

    mod replied {
        use super::*;

        fn replied(net: &Net) -> (Server, Side, Side, Client, Client) {
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let b = side(&net.b, 2);
            let (active, passive) = request(net, &s, &a, ep(B, 5000), b"ping");
            passive.conn.accept(&b.qp, LIMITS, b"pong").unwrap();
            assert_eq!(active.events.take(), vec![Ev::Connect(Ok(()))]);
            assert_eq!(active.conn.state(), Some(ConnState::Replied));
            assert_eq!(passive.conn.state(), Some(ConnState::Accepting));
            (s, a, b, active, passive)
        }

        #[test]
        fn test_accept_completes_connect_with_callee_data_rule_n13_n18() {
            let net = net();
            let (_s, _a, _b, active, passive) = replied(&net);
            let (data, bytes) = data_of(&active.conn);
            assert_eq!(bytes, b"pong");
            assert_eq!(data.length, 4);
            assert!(passive.events.take().is_empty(), "Accept still pending");
        }

        #[test]
        fn test_read_limits_negotiated_rule_n20() {
            let net = net();
            let s = listening(&net.b, ep(B, 5000));
            let a = side(&net.a, 1);
            let b = side(&net.b, 2);
            let active = client(&net.a);
            // Outbound 500 is lowered to the adapter's 128.
            active
                .conn
                .connect(&a.qp, ep(A, 0), ep(B, 5000), ReadLimits::new(4, 500), b"")
                .unwrap();
            let passive = wrap(s.next().unwrap());
            // Before Accept: the active side's offer, mirrored and clamped.
            assert_eq!(data_of(&passive.conn).0.limits, ReadLimits::new(128, 4));
            passive
                .conn
                .accept(&b.qp, ReadLimits::new(8, 2), b"")
                .unwrap();
            // Effective: inbound = min(4, 2), outbound = min(128, 8).
            assert_eq!(data_of(&active.conn).0.limits, ReadLimits::new(2, 8));
            active.conn.complete_connect().unwrap();
            assert_eq!(a.qp.read_limits(), (2, 8));
            assert_eq!(b.qp.read_limits(), (8, 2));
        }

        #[test]
        fn test_complete_connect_establishes_rule_n13() {
            let net = net();
            let (_s, a, b, active, passive) = replied(&net);
            active.conn.complete_connect().unwrap();
            assert_eq!(passive.events.take(), vec![Ev::Accept(Ok(()))]);
            assert_eq!(a.qp.state(), QpState::Connected);
            assert_eq!(b.qp.state(), QpState::Connected);
            let c = &net.a.device.counters;
            assert_eq!(c.connect.load(Ordering::Relaxed), 1);
            assert_eq!(c.active_connection.load(Ordering::Relaxed), 1);
            assert_eq!(net.b.device.counters.accept.load(Ordering::Relaxed), 1);
            // N14: only once.
            assert_eq!(
                active.conn.complete_connect(),
                Err(CmError::ConnectionInvalid)
            );
        }

        #[test]
        fn test_active_reject_aborts_accept_rule_n16() {
            let net = net();
            let (_s, a, b, active, passive) = replied(&net);
            active.conn.reject(b"").unwrap();
            assert_eq!(
                passive.events.take(),
                vec![Ev::Accept(Err(CmError::ConnectionAborted))]
            );
            assert_eq!((a.qp.state(), b.qp.state()), (QpState::Idle, QpState::Idle));
        }

        #[test]
        fn test_complete_connect_after_passive_closed_aborted_rule_n14() {
            let net = net();
            let (_s, _a, _b, active, passive) = replied(&net);
            let events = Arc::clone(&passive.events);
            drop(passive);
            assert_eq!(
                events.take(),
                vec![Ev::Accept(Err(CmError::Cancelled)), Ev::Closed]
            );
            assert_eq!(
                active.conn.complete_connect(),
                Err(CmError::ConnectionAborted)
            );
            assert_eq!(active.conn.reject(b""), Err(CmError::ConnectionInvalid));
        }

        #[test]
        fn test_reject_after_passive_closed_aborted_rule_n16() {
            let net = net();
            let (_s, _a, _b, active, passive) = replied(&net);
            drop(passive);
            assert_eq!(active.conn.reject(b""), Err(CmError::ConnectionAborted));
        }

        #[test]
        fn test_complete_connect_with_flushed_qp_rule_n14() {
            let net = net();
            let (_s, a, _b, active, passive) = replied(&net);
            a.qp.flush();
            assert_eq!(
                active.conn.complete_connect(),
                Err(CmError::ConnectionInvalid)
            );
            assert_eq!(
                passive.events.take(),
                vec![Ev::Accept(Err(CmError::ConnectionAborted))]
            );
            // The other way round.
            let (_s2, _a2, b2, active2, passive2) = {
                let s = listening(&net.b, ep(B, 5001));
                let a = side(&net.a, 3);
                let b = side(&net.b, 4);
                let (active, passive) = request(&net, &s, &a, ep(B, 5001), b"");
                passive.conn.accept(&b.qp, LIMITS, b"").unwrap();
                (s, a, b, active, passive)
            };
            b2.qp.flush();
            assert_eq!(
                active2.conn.complete_connect(),
                Err(CmError::ConnectionAborted)
            );
            assert_eq!(
                passive2.events.take(),
                vec![Ev::Accept(Err(CmError::ConnectionInvalid))]
            );
        }
    }

    // ----- Established ---------------------------------------------------------

    mod established {
        use super::*;

        #[test]
        fn test_connections_and_endpoints_reported_rule_a19_a20() {
            let net = net();
            let c = established(&net);
            let _e = SharedEndpoint::new(&net.a.set, ep(A, 9000)).unwrap();
            let mut conns = [ConnectionInfo {
                local: ep(ANY, 0),
                remote: ep(ANY, 0),
            }; 4];
            assert_eq!(net.fabric.connections(&net.b.device, &mut conns), 1);
            assert_eq!(conns[0].local, ep(B, 4000));
            assert_eq!(Some(conns[0].remote), c.active.conn.local());
            assert_eq!(net.fabric.connections(&net.a.device, &mut []), 1);
            let mut ends = [LocalEndpointInfo {
                local: ep(ANY, 0),
                listener: false,
            }; 4];
            assert_eq!(net.fabric.local_endpoints(&net.b.device, &mut ends), 1);
            assert_eq!(
                ends[0],
                LocalEndpointInfo {
                    local: ep(B, 4000),
                    listener: true
                }
            );
            // The active side's dedicated endpoint is not listed, its shared one is.
            assert_eq!(net.fabric.local_endpoints(&net.a.device, &mut ends), 1);
            assert_eq!(
                ends[0],
                LocalEndpointInfo {
                    local: ep(A, 9000),
                    listener: false
                }
            );
        }

        #[test]
        fn test_established_addresses_rule_n22() {
            let net = net();
            let c = established(&net);
            assert_eq!(c.active.conn.peer(), Some(ep(B, 4000)));
            assert_eq!(c.passive.conn.local(), Some(ep(B, 4000)));
            assert_eq!(c.passive.conn.peer(), c.active.conn.local());
        }

        #[test]
        fn test_disconnect_waits_for_peer_rule_x1_x2_n24() {
            let net = net();
            let c = established(&net);
            let buf = c.b.buffer(64, 0, Access::LOCAL_WRITE);
            c.b.qp.post_receive(9, &[buf.sge(0, 64)]).unwrap();
            c.active.conn.disconnect().unwrap();
            // X1 (a): pending until the peer's graceful disconnect arrives.
            assert!(c.active.events.take().is_empty());
            assert_eq!(c.active.conn.state(), Some(ConnState::Disconnecting));
            // X2: the peer is told; N24: its work is not flushed for that.
            assert_eq!(c.passive.events.take(), vec![Ev::Indicated]);
            assert_eq!(c.b.qp.state(), QpState::Connected);
            assert!(c.b.rcq.drain().is_empty());
            // The peer answers: both complete successfully.
            c.passive.conn.disconnect().unwrap();
            assert_eq!(c.passive.events.take(), vec![Ev::Disconnect(Ok(()))]);
            assert_eq!(c.active.events.take(), vec![Ev::Disconnect(Ok(()))]);
            // X6: both QPs are out of the connection, the receive flushed.
            assert_eq!(c.a.qp.state(), QpState::Disconnected);
            assert_eq!(c.b.qp.state(), QpState::Disconnected);
            assert_eq!(c.b.rcq.drain()[0].status, WcStatus::Cancelled);
            assert_eq!(c.active.conn.state(), Some(ConnState::Disconnected));
            assert_eq!(
                net.a
                    .device
                    .counters
                    .active_connection
                    .load(Ordering::Relaxed),
                0
            );
        }

        #[test]
        fn test_disconnect_after_peer_disconnected_rule_x1_x2() {
            let net = net();
            let c = established(&net);
            c.passive.conn.disconnect().unwrap();
            assert_eq!(c.active.events.take(), vec![Ev::Indicated]);
            assert!(
                c.passive.events.take().is_empty(),
                "waits for the active side"
            );
            // The peer's graceful disconnect arrived already: no wait.
            c.active.conn.disconnect().unwrap();
            assert_eq!(c.active.events.take(), vec![Ev::Disconnect(Ok(()))]);
            assert_eq!(c.passive.events.take(), vec![Ev::Disconnect(Ok(()))]);
        }

        #[test]
        fn test_peer_close_answers_the_wait_rule_x1() {
            let net = net();
            let c = established(&net);
            c.active.conn.disconnect().unwrap();
            let Conn {
                active, passive, ..
            } = c;
            drop(passive);
            assert_eq!(active.events.take(), vec![Ev::Disconnect(Ok(()))]);
        }

        #[test]
        fn test_simultaneous_disconnect_rule_x3() {
            for _ in 0..50 {
                let net = net();
                let c = established(&net);
                let barrier = std::sync::Barrier::new(2);
                std::thread::scope(|scope| {
                    scope.spawn(|| {
                        barrier.wait();
                        c.active.conn.disconnect().unwrap();
                    });
                    barrier.wait();
                    c.passive.conn.disconnect().unwrap();
                });
                crate::kernel::deferred::flush();
                for side in [&c.active, &c.passive] {
                    let events = side.events.take();
                    let completions = events
                        .iter()
                        .filter(|e| **e == Ev::Disconnect(Ok(())))
                        .count();
                    assert_eq!(completions, 1, "{events:?}");
                    assert!(events.iter().filter(|e| **e == Ev::Indicated).count() <= 1);
                    assert_eq!(
                        events.len() - completions,
                        events.iter().filter(|e| **e == Ev::Indicated).count()
                    );
                }
            }
        }

        #[test]
        fn test_close_is_graceful_disconnect_towards_peer() {
            let net = net();
            let c = established(&net);
            let Conn {
                active,
                passive,
                a,
                b,
                server,
            } = c;
            let events = Arc::clone(&active.events);
            // Pending until the QPs are out of the connection; no request
            // completes, only the close.
            assert_eq!(active.conn.close(), CloseState::Pending);
            assert_eq!(events.take(), vec![Ev::Closed]);
            assert_eq!(passive.events.take(), vec![Ev::Indicated]);
            passive.conn.disconnect().unwrap();
            assert_eq!(passive.events.take(), vec![Ev::Disconnect(Ok(()))]);
            drop((active, passive, a, b, server));
            assert_eq!(net.fabric.connector_count(), 0);
        }

        #[test]
        fn test_error_terminated_connection_indicates_abort_rule_e5_x2() {
            let net = net();
            let c = established(&net);
            let local = c.a.buffer(64, 1, Access::LOCAL_WRITE);
            // A Write with a token the peer does not know: remote access
            // error, and the connection ends (E5).
            c.a.qp
                .post_write(
                    1,
                    Payload::Sges(&[local.sge(0, 8)]),
                    0x1000,
                    0xdead,
                    WrFlags::empty(),
                )
                .unwrap();
            crate::kernel::deferred::flush();
            let completions = c.a.scq.drain();
            assert_eq!(completions.len(), 1);
            assert_ne!(completions[0].status, WcStatus::Success);
            assert_eq!(c.active.events.take(), vec![Ev::Indicated]);
            assert_eq!(c.passive.events.take(), vec![Ev::Indicated]);
            // X1: the disconnect of an aborted connection fails.
            c.active.conn.disconnect().unwrap();
            assert_eq!(
                c.active.events.take(),
                vec![Ev::Disconnect(Err(CmError::ConnectionAborted))]
            );
            c.passive.conn.disconnect().unwrap();
            assert_eq!(
                c.passive.events.take(),
                vec![Ev::Disconnect(Err(CmError::ConnectionAborted))]
            );
        }

        #[test]
        fn test_abort_all_ends_the_devices_connections_rule_a15_x2() {
            let net = net();
            let c = established(&net);
            let local = c.b.buffer(64, 1, Access::LOCAL_WRITE);
            c.b.qp.post_receive(7, &[local.sge(0, 64)]).unwrap();
            // NDK disabled on B's adapter: its connection is aborted.
            assert_eq!(net.fabric.abort_all(&net.b.device), 1);
            crate::kernel::deferred::flush();
            // Both consumers are told (X2); B's outstanding receive is
            // cancelled (E5); the connection is no longer reported (A19).
            assert_eq!(c.active.events.take(), vec![Ev::Indicated]);
            assert_eq!(c.passive.events.take(), vec![Ev::Indicated]);
            let cancelled = c.b.rcq.drain();
            assert_eq!(cancelled.len(), 1);
            assert_eq!(cancelled[0].status, WcStatus::Cancelled);
            assert_eq!(net.fabric.connections(&net.b.device, &mut []), 0);
            assert_eq!(
                net.fabric.abort_all(&net.b.device),
                0,
                "nothing left to abort"
            );
        }

        #[test]
        fn test_peer_qp_closed_indicates_once_rule_n24() {
            let net = net();
            let c = established(&net);
            // The passive consumer closes its QP without disconnecting: an
            // abort for the active side.
            c.b.qp.close();
            assert_eq!(c.active.events.take(), vec![Ev::Indicated]);
            // The passive consumer disconnects: it waits for the active side,
            // which gets no second indication.
            c.passive.conn.disconnect().unwrap();
            assert_eq!(c.active.events.take(), vec![]);
            assert_eq!(c.passive.events.take(), vec![]);
            c.active.conn.disconnect().unwrap();
            assert_eq!(
                c.active.events.take(),
                vec![Ev::Disconnect(Err(CmError::ConnectionAborted))]
            );
            assert_eq!(c.passive.events.take(), vec![Ev::Disconnect(Ok(()))]);
        }

        #[test]
        fn test_abort_ends_the_wait_rule_x1() {
            let net = net();
            let c = established(&net);
            c.active.conn.disconnect().unwrap();
            assert_eq!(c.passive.events.take(), vec![Ev::Indicated]);
            // The peer's QP goes away without its disconnect: an abort.
            c.b.qp.close();
            assert_eq!(
                c.active.events.take(),
                vec![Ev::Disconnect(Err(CmError::ConnectionAborted))]
            );
        }

        #[test]
        fn test_no_reuse_after_disconnect_rule_x5() {
            let net = net();
            let c = established(&net);
            c.active.conn.disconnect().unwrap();
            assert_eq!(c.active.conn.disconnect(), Err(CmError::ConnectionInvalid));
            assert_eq!(
                c.active
                    .conn
                    .connect(&c.a.qp, ep(A, 0), ep(B, 4000), LIMITS, b""),
                Err(CmError::ConnectionInvalid)
            );
            let fresh = client(&net.a);
            assert_eq!(
                fresh
                    .conn
                    .connect(&c.a.qp, ep(A, 0), ep(B, 4000), LIMITS, b""),
                Err(CmError::ConnectionInvalid),
                "the disconnected QP cannot be reused"
            );
        }

        #[test]
        fn test_disconnect_with_outstanding_work_flushes_rule_x7() {
            let net = net();
            let c = established(&net);
            let buf = c.a.buffer(64, 1, Access::LOCAL_WRITE);
            // A receive, and a Send the peer has no receive for (it waits).
            c.a.qp.post_receive(7, &[buf.sge(0, 32)]).unwrap();
            c.a.qp
                .post_send(8, Payload::Sges(&[buf.sge(32, 8)]), WrFlags::empty(), None)
                .unwrap();
            assert!(c.a.scq.drain().is_empty());
            c.active.conn.disconnect().unwrap();
            c.passive.conn.disconnect().unwrap();
            assert_eq!(c.active.events.take(), vec![Ev::Disconnect(Ok(()))]);
            let sends = c.a.scq.drain();
            let receives = c.a.rcq.drain();
            assert_eq!(sends.len(), 1);
            assert_eq!(sends[0].status, WcStatus::Cancelled);
            assert_eq!(receives.len(), 1);
            assert_eq!(receives[0].status, WcStatus::Cancelled);
            assert!(c.a.qp.is_quiescent());
        }

        #[test]
        fn test_disconnect_deferred_engine_waits_for_dma_rule_x1() {
            let net = net_with(EngineMode::Deferred);
            let c = established(&net);
            let src = c.a.pattern(1 << 20, 3, Access::LOCAL_WRITE);
            let dst =
                c.b.buffer(1 << 20, 0, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
            for n in 0..16 {
                c.a.qp
                    .post_write(
                        n,
                        Payload::Sges(&[src.sge(0, 1 << 20)]),
                        dst.raddr(0),
                        dst.rkey(),
                        WrFlags::empty(),
                    )
                    .unwrap();
            }
            c.active.conn.disconnect().unwrap();
            c.passive.conn.disconnect().unwrap();
            crate::kernel::deferred::flush();
            assert_eq!(c.active.events.take(), vec![Ev::Disconnect(Ok(()))]);
            assert_eq!(
                c.passive.events.take(),
                vec![Ev::Indicated, Ev::Disconnect(Ok(()))]
            );
            assert!(c.a.qp.is_quiescent() && c.b.qp.is_quiescent());
            // Every request completed, successfully or cancelled (X7).
            assert_eq!(c.a.scq.drain().len(), 16);
        }

        #[test]
        fn test_close_during_disconnect_finishes_disconnect_first_rule_l20_l21() {
            let net = net();
            let c = established(&net);
            let Conn {
                active, passive, b, ..
            } = c;
            active.conn.disconnect().unwrap();
            let events = Arc::clone(&active.events);
            // L20: the close stops the wait for the peer; the Disconnect
            // completes (cancelled) before the close does.
            drop(active);
            assert_eq!(
                events.take(),
                vec![Ev::Disconnect(Err(CmError::Cancelled)), Ev::Closed]
            );
            assert_eq!(b.qp.state(), QpState::Disconnected);
            // The peer had its indication; its own disconnect succeeds.
            assert_eq!(passive.events.take(), vec![Ev::Indicated]);
            passive.conn.disconnect().unwrap();
            assert_eq!(passive.events.take(), vec![Ev::Disconnect(Ok(()))]);
        }
    }

    // ----- shared endpoints ------------------------------------------------------

    mod shared {
        use super::*;

        #[test]
        fn test_shared_endpoint_four_tuple_rule_n11() {
            let net = net();
            let _s1 = listening(&net.b, ep(B, 5000));
            let _s2 = listening(&net.b, ep(B, 5001));
            let e = SharedEndpoint::new(&net.a.set, ep(A, 7000)).unwrap();
            let (a1, a2, a3) = (side(&net.a, 1), side(&net.a, 2), side(&net.a, 3));
            let (c1, c2, c3) = (client(&net.a), client(&net.a), client(&net.a));
            c1.conn
                .connect_shared(&a1.qp, &e, ep(B, 5000), LIMITS, b"")
                .unwrap();
            assert_eq!(
                c2.conn.connect_shared(&a2.qp, &e, ep(B, 5000), LIMITS, b""),
                Err(CmError::AddressAlreadyExists)
            );
            c3.conn
                .connect_shared(&a3.qp, &e, ep(B, 5001), LIMITS, b"")
                .unwrap();
            assert_eq!(c1.conn.local(), Some(ep(A, 7000)));
            assert_eq!(c3.conn.local(), Some(ep(A, 7000)));
            // Once the first connection is gone its tuple is free again.
            drop(c1);
            c2.conn
                .connect_shared(&a2.qp, &e, ep(B, 5000), LIMITS, b"")
                .unwrap();
        }

        #[test]
        fn test_shared_endpoint_reference_counted_rule_n10() {
            let net = net();
            let _s = listening(&net.b, ep(B, 5000));
            let e = SharedEndpoint::new(&net.a.set, ep(A, 0)).unwrap();
            let local = e.local();
            assert!(local.port >= EPHEMERAL_FIRST, "N9: port 0 picks one");
            assert_eq!(
                SharedEndpoint::new(&net.a.set, local).err(),
                Some(CmError::AddressInUse)
            );
            let a = side(&net.a, 1);
            let c = client(&net.a);
            c.conn
                .connect_shared(&a.qp, &e, ep(B, 5000), LIMITS, b"")
                .unwrap();
            drop(e);
            assert!(net.fabric.is_bound(A, local.port));
            drop(c);
            assert!(!net.fabric.is_bound(A, local.port));
        }

        #[test]
        fn test_shared_endpoint_foreign_address_rule_n9() {
            let net = net();
            assert_eq!(
                SharedEndpoint::new(&net.a.set, ep(B, 1)).err(),
                Some(CmError::InvalidAddress)
            );
            let e = SharedEndpoint::new(&net.b.set, ep(B, 1)).unwrap();
            let a = side(&net.a, 1);
            assert_eq!(
                client(&net.a)
                    .conn
                    .connect_shared(&a.qp, &e, ep(B, 2), LIMITS, b""),
                Err(CmError::InvalidParameter)
            );
        }
    }

    // ----- loopback and IPv6 -------------------------------------------------------

    mod loopback {
        use super::*;

        #[test]
        fn test_loopback_on_one_device_rule_n27() {
            let net = net();
            let s = listening(&net.a, ep(A, 5000));
            let a1 = side(&net.a, 1);
            let a2 = side(&net.a, 2);
            let active = client(&net.a);
            active
                .conn
                .connect(&a1.qp, ep(ANY, 0), ep(A, 5000), LIMITS, b"")
                .unwrap();
            assert_eq!(
                active.conn.local().unwrap().ip,
                A,
                "wildcard source resolved"
            );
            let passive = wrap(s.next().unwrap());
            passive.conn.accept(&a2.qp, LIMITS, b"").unwrap();
            active.conn.complete_connect().unwrap();
            assert_eq!(a1.qp.state(), QpState::Connected);
            active.conn.disconnect().unwrap();
            assert_eq!(
                passive.events.take(),
                vec![Ev::Accept(Ok(())), Ev::Indicated]
            );
        }

        #[test]
        fn test_ipv6_connection_rule_n1() {
            let fabric = Fabric::new();
            let mut x = [0_u8; 16];
            x[0] = 0xfd;
            x[15] = 1;
            let mut y = x;
            y[15] = 2;
            let (x, y) = (IpAddr::V6(x), IpAddr::V6(y));
            let hx = host(&fabric, &[x], EngineMode::Inline);
            let hy = host(&fabric, &[y], EngineMode::Inline);
            let s = listening(&hy, ep(IpAddr::unspecified(Family::V6), 5000));
            let qx = side(&hx, 1);
            let qy = side(&hy, 2);
            let active = client(&hx);
            active
                .conn
                .connect(&qx.qp, ep(x, 0), ep(y, 5000), LIMITS, b"v6")
                .unwrap();
            let passive = wrap(s.next().unwrap());
            assert_eq!(data_of(&passive.conn).1, b"v6");
            passive.conn.accept(&qy.qp, LIMITS, b"").unwrap();
            active.conn.complete_connect().unwrap();
            assert_eq!(passive.conn.local(), Some(ep(y, 5000)));
            assert_eq!(qx.qp.state(), QpState::Connected);
        }
    }
}
