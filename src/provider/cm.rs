//! Connections: `NDK_CONNECTOR`, `NDK_LISTENER` and `NDK_SHARED_ENDPOINT`
//! over the RNIC's connection manager ([`crate::rnic::cm`], rules N1–N32 and
//! X1–X7).
//!
//! The state machines live in the RNIC; this module parses the consumer's
//! `SOCKADDR`s (N2), keeps the request completions and the disconnect
//! callback of each connector, maps [`CmError`] to the statuses the NDK pages
//! name ([`status`]) and delivers every callback through the object's
//! serializer with no lock held (I4).
//!
//! What completes how (L8):
//! * `Connect`, `ConnectWithSharedEndpoint`, `Accept` and `Disconnect`
//!   return `STATUS_PENDING` once started and complete through their request
//!   completion (possibly before they return, L15); a failure found before
//!   anything started is returned inline and no completion follows.
//! * `Listen` finishes inline unless the platform binds its TCP sockets
//!   asynchronously (WSK): then it returns `STATUS_PENDING` and completes
//!   once they are bound, or failed, or the listener was closed (L20).
//! * `CompleteConnect` finishes inline (`STATUS_SUCCESS` or an error), and
//!   never calls its completion.
//!
//! Object ties (L14, L24): a connector is a successor of its adapter; one
//! created for an incoming request (N4) also of its listener, so that the
//! listener's close stays pending until the connectors it produced are
//! closed (N7). `Connect`, `ConnectWithSharedEndpoint` and `Accept` tie the
//! connector to its QP — and to the shared endpoint (N10) — which then stay
//! open until the connector closes, or until the attempt fails (N28).
//!
//! Disconnect waits for the peer's graceful disconnect, as X1 (a) says: the
//! peer's consumer gets its indication and answers with its own Disconnect
//! or by closing its connector (see [`crate::rnic::cm`] for the scheme and
//! why no wait needs a timer). Closing a connected connector is a graceful
//! disconnect towards the peer (the peer gets its disconnect indication, X2,
//! and its Disconnect then succeeds) that does not wait for the peer; the
//! close completes once the connection's DMA has finished (X1, L21).

use core::ffi::c_void;

use super::adapter::Adapter;
use super::dispatch::ndk_table;
use super::object::{Entered, Event, Holder, Kind, Object, Parents, Slot};
use super::qp::{self, Qp};
use crate::abi::{
    AF_INET, AF_INET6, Boolean, In6Addr, InAddr, NdkConnector, NdkConnectorDispatch,
    NdkFnConnectEventCallback, NdkFnDisconnectEventCallback, NdkFnRequestCompletion, NdkListener,
    NdkListenerDispatch, NdkObjectType, NdkQp, NdkSharedEndpoint, NdkSharedEndpointDispatch,
    NtStatus, STATUS_ADDRESS_ALREADY_EXISTS, STATUS_BUFFER_TOO_SMALL, STATUS_CANCELLED,
    STATUS_CONNECTION_ABORTED, STATUS_CONNECTION_INVALID, STATUS_CONNECTION_REFUSED,
    STATUS_HOST_UNREACHABLE, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_ADDRESS,
    STATUS_INVALID_BUFFER_SIZE, STATUS_INVALID_DEVICE_REQUEST, STATUS_INVALID_PARAMETER,
    STATUS_IO_TIMEOUT, STATUS_NETWORK_UNREACHABLE, STATUS_PENDING, STATUS_SHARING_VIOLATION,
    STATUS_SUCCESS, STATUS_TOO_MANY_ADDRESSES, SockAddr, SockAddrIn, SockAddrIn6,
};
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::cm::{
    self as rcm, CloseState, CmError, ConnState, ConnectorEvents, Endpoint, IpAddr, ListenerEvents,
    ReadLimits,
};

/// The local IP addresses of an adapter, registered on the fabric (N1): the
/// RNIC's [`rcm::AddressSet`]. Host mode builds one per opening
/// ([`super::host`]); the driver registers its miniport's addresses.
pub use crate::rnic::cm::AddressSet;

// ---------------------------------------------------------------------------
// Statuses
// ---------------------------------------------------------------------------

/// The status of a failed connection-management call (§5.12).
pub const fn status(error: CmError) -> NtStatus {
    match error {
        // N3, N9, N12.
        CmError::InvalidAddress => STATUS_INVALID_ADDRESS,
        CmError::AddressInUse => STATUS_SHARING_VIOLATION,
        CmError::TooManyAddresses => STATUS_TOO_MANY_ADDRESSES,
        // N11.
        CmError::AddressAlreadyExists => STATUS_ADDRESS_ALREADY_EXISTS,
        // N5, N6, N12, N16.
        CmError::ConnectionRefused => STATUS_CONNECTION_REFUSED,
        // N14–N16, X1.
        CmError::ConnectionAborted => STATUS_CONNECTION_ABORTED,
        // N14, X5.
        CmError::ConnectionInvalid => STATUS_CONNECTION_INVALID,
        CmError::InvalidState => STATUS_INVALID_DEVICE_REQUEST,
        // L20: a request cancelled by the object's close.
        CmError::Cancelled => STATUS_CANCELLED,
        // N12, N14, N15, N26: a wait on a wire peer timed out.
        CmError::TimedOut => STATUS_IO_TIMEOUT,
        CmError::HostUnreachable => STATUS_HOST_UNREACHABLE,
        CmError::NetworkUnreachable => STATUS_NETWORK_UNREACHABLE,
        // N17 (NDSPI v2: ND_INVALID_BUFFER_SIZE).
        CmError::PrivateDataTooLong => STATUS_INVALID_BUFFER_SIZE,
        CmError::InvalidParameter => STATUS_INVALID_PARAMETER,
        CmError::Resources => STATUS_INSUFFICIENT_RESOURCES,
    }
}

const fn outcome(result: Result<(), CmError>) -> NtStatus {
    match result {
        Ok(()) => STATUS_SUCCESS,
        Err(error) => status(error),
    }
}

// ---------------------------------------------------------------------------
// SOCKADDR
// ---------------------------------------------------------------------------

/// Bytes of a `SOCKADDR_IN` (§3.14).
pub(super) const SOCKADDR_IN_LEN: u32 = 0x10;
/// Bytes of a `SOCKADDR_IN6` (§3.14).
pub(super) const SOCKADDR_IN6_LEN: u32 = 0x1C;
const _: () = assert!(
    size_of::<SockAddrIn>() == SOCKADDR_IN_LEN as usize
        && size_of::<SockAddrIn6>() == SOCKADDR_IN6_LEN as usize
);

/// The bytes a `SOCKADDR` of `family` needs, if the family is supported.
pub(super) const fn sockaddr_len(family: u16) -> Option<u32> {
    match family {
        AF_INET => Some(SOCKADDR_IN_LEN),
        AF_INET6 => Some(SOCKADDR_IN6_LEN),
        _ => None,
    }
}

/// Reads a consumer `SOCKADDR_IN` or `SOCKADDR_IN6` (N2): the family picks
/// the structure, `length` must cover it, the port is in network order.
///
/// # Errors
/// `STATUS_INVALID_PARAMETER` for a null pointer, an unknown family or a
/// length short of the structure.
///
/// # Safety
/// `address` is null or readable for `length` bytes.
pub(super) unsafe fn read_address(
    address: *const SockAddr,
    length: u32,
) -> Result<Endpoint, NtStatus> {
    if address.is_null() || (length as usize) < size_of::<u16>() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    // SAFETY: at least the two family bytes are readable (checked above).
    let family = unsafe { address.cast::<u16>().read_unaligned() };
    let needed = sockaddr_len(family).ok_or(STATUS_INVALID_PARAMETER)?;
    if length < needed {
        return Err(STATUS_INVALID_PARAMETER);
    }
    if family == AF_INET {
        // SAFETY: `length` covers a SOCKADDR_IN (checked above).
        let sin = unsafe { address.cast::<SockAddrIn>().read_unaligned() };
        Ok(Endpoint::new(
            IpAddr::V4(sin.sin_addr.bytes),
            u16::from_be(sin.sin_port),
        ))
    } else {
        // SAFETY: `length` covers a SOCKADDR_IN6 (checked above).
        let sin6 = unsafe { address.cast::<SockAddrIn6>().read_unaligned() };
        Ok(Endpoint::new(
            IpAddr::V6(sin6.sin6_addr.bytes),
            u16::from_be(sin6.sin6_port),
        ))
    }
}

/// Writes `endpoint` for an address getter (N22): `*length` holds the
/// buffer's size and receives the bytes written, or the bytes needed with
/// `STATUS_BUFFER_TOO_SMALL`.
///
/// # Safety
/// `length` is null or a valid in/out `ULONG`; `address` is null or writable
/// for `*length` bytes.
unsafe fn write_address(endpoint: Endpoint, address: *mut SockAddr, length: *mut u32) -> NtStatus {
    if length.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the caller's contract; checked non-null.
    let have = unsafe { length.read_unaligned() };
    let needed = match endpoint.ip {
        IpAddr::V4(_) => SOCKADDR_IN_LEN,
        IpAddr::V6(_) => SOCKADDR_IN6_LEN,
    };
    // SAFETY: as above.
    unsafe { length.write_unaligned(needed) };
    if address.is_null() || have < needed {
        return STATUS_BUFFER_TOO_SMALL;
    }
    match endpoint.ip {
        IpAddr::V4(bytes) => {
            let sin = SockAddrIn {
                sin_family: AF_INET,
                sin_port: endpoint.port.to_be(),
                sin_addr: InAddr { bytes },
                sin_zero: [0; 8],
            };
            // SAFETY: the buffer holds at least `needed` bytes (checked).
            unsafe { address.cast::<SockAddrIn>().write_unaligned(sin) };
        }
        IpAddr::V6(bytes) => {
            let sin6 = SockAddrIn6 {
                sin6_family: AF_INET6,
                sin6_port: endpoint.port.to_be(),
                sin6_flowinfo: 0,
                sin6_addr: In6Addr { bytes },
                sin6_scope_id: 0,
            };
            // SAFETY: the buffer holds at least `needed` bytes (checked).
            unsafe { address.cast::<SockAddrIn6>().write_unaligned(sin6) };
        }
    }
    STATUS_SUCCESS
}

/// The consumer's private data as a slice, of at most `most` + 1 bytes:
/// longer data is refused by the connection layer (N17, after its state
/// checks), which sees it is too long from one byte past the limit, and
/// the provider reads no further. (It used to read, and copy, all of
/// `length`: a length far past the consumer's buffer read past it, a page
/// fault in the kernel, and asked the pool for up to 4 GiB first.)
///
/// # Safety
/// `data` is null or readable for `length` bytes for the duration of the
/// call.
unsafe fn private_data<'a>(
    data: *const c_void,
    length: u32,
    most: usize,
) -> Result<&'a [u8], NtStatus> {
    if length == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    let len = (length as usize).min(most.saturating_add(1));
    // SAFETY: the caller's contract; non-null, `length >= len` bytes
    // readable.
    Ok(unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len) })
}

// ---------------------------------------------------------------------------
// NDK_CONNECTOR
// ---------------------------------------------------------------------------

/// A request completion the consumer gave: callback and context.
type Completion = (NdkFnRequestCompletion, usize);

/// What a connector keeps of its consumer between calls.
#[derive(Default)]
struct Requests {
    connect: Option<Completion>,
    accept: Option<Completion>,
    disconnect: Option<Completion>,
    /// The disconnect callback of CompleteConnect or Accept (N24).
    indication: Option<(NdkFnDisconnectEventCallback, usize)>,
    /// The QP tied by Connect or Accept (L14, L24).
    qp: Option<Arc<dyn Holder>>,
    /// The shared endpoint tied by ConnectWithSharedEndpoint (N10).
    endpoint: Option<Arc<dyn Holder>>,
}

/// Bridges the RNIC connector's events to the consumer's callbacks.
#[derive(Default)]
struct Bridge {
    object: SpinLock<Weak<Object<Connector>>>,
    requests: SpinLock<Requests>,
    /// The QP of the last Connect or Accept, for checked mode's D5 watch at
    /// Disconnect (which flushes that QP).
    qp: SpinLock<Weak<Object<Qp>>>,
}

impl Bridge {
    fn object(&self) -> Option<Arc<Object<Connector>>> {
        self.object.lock().upgrade()
    }

    fn complete(&self, completion: Option<Completion>, result: Result<(), CmError>) {
        if let (Some((callback, context)), Some(object)) = (completion, self.object()) {
            object.deliver(Event::Request {
                callback,
                context,
                status: outcome(result),
            });
        }
    }

    /// Gives back the QP and shared endpoint an attempt had tied (N28).
    fn untie(&self) {
        let (qp, endpoint) = {
            let mut r = self.requests.lock();
            (r.qp.take(), r.endpoint.take())
        };
        for holder in [qp, endpoint].into_iter().flatten() {
            holder.release();
        }
    }
}

impl ConnectorEvents for Bridge {
    fn connect_completed(&self, result: Result<(), CmError>) {
        let completion = self.requests.lock().connect.take();
        if result.is_err() {
            // Before the completion: the consumer may retry from inside it.
            self.untie();
        }
        self.complete(completion, result);
    }

    fn accept_completed(&self, result: Result<(), CmError>) {
        let completion = self.requests.lock().accept.take();
        if result.is_err() {
            self.untie();
        }
        self.complete(completion, result);
    }

    fn disconnect_completed(&self, result: Result<(), CmError>) {
        let completion = self.requests.lock().disconnect.take();
        self.complete(completion, result);
    }

    fn disconnected(&self) {
        // N24: optional; the RNIC indicates at most once per connection. It
        // only signals (X4): the QP's requests complete, or not, on their
        // own. A 1.2 provider calls the plain callback, with no reason code
        // (N25: the Ex callback's reason is NDKPI 2.1's).
        let indication = self.requests.lock().indication;
        if let (Some((callback, context)), Some(object)) = (indication, self.object()) {
            object.deliver(Event::Disconnect { callback, context });
        }
    }

    fn closed(&self) {
        // The hold taken by `begin_close`: DMA and callbacks are over (L21).
        if let Some(object) = self.object() {
            object.release();
        }
    }
}

/// The provider state of an `NDK_CONNECTOR`.
pub struct Connector {
    rnic: rcm::Connector,
    bridge: Arc<Bridge>,
}

impl Connector {
    /// The RNIC connector.
    pub const fn rnic(&self) -> &rcm::Connector {
        &self.rnic
    }

    /// Gives back the ties of an attempt that is over (failed, rejected).
    fn untie_if_failed(&self) {
        if matches!(self.rnic.state(), Some(ConnState::Failed | ConnState::Idle)) {
            self.bridge.untie();
        }
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static CONNECTOR_DISPATCH: NdkConnectorDispatch for Connector (CONNECTOR) at NdkConnector,
        close ndk_close_connector = "NdkCloseConnector";
    ndk_connect = "NdkConnect" => connect(Connect { qp: *mut NdkQp, src: *const SockAddr,
        src_length: u32, dst: *const SockAddr, dst_length: u32, inbound_read_limit: u32,
        outbound_read_limit: u32, data: *const c_void, data_length: u32,
        completion: Option<NdkFnRequestCompletion>, context: *mut c_void }) -> NtStatus,
        then watched();
    ndk_connect_with_shared_endpoint = "NdkConnectWithSharedEndpoint" => connect_with_shared_endpoint(
        ConnectShared { qp: *mut NdkQp, endpoint: *mut NdkSharedEndpoint, dst: *const SockAddr,
        dst_length: u32, inbound_read_limit: u32, outbound_read_limit: u32, data: *const c_void,
        data_length: u32, completion: Option<NdkFnRequestCompletion>, context: *mut c_void })
        -> NtStatus;
    ndk_complete_connect = "NdkCompleteConnect" => complete_connect(CompleteConnect {
        disconnect_event: Option<NdkFnDisconnectEventCallback>, disconnect_context: *mut c_void,
        _completion: Option<NdkFnRequestCompletion>, _context: *mut c_void }) -> NtStatus;
    ndk_accept = "NdkAccept" => accept(Accept { qp: *mut NdkQp, inbound_read_limit: u32,
        outbound_read_limit: u32, data: *const c_void, data_length: u32,
        disconnect_event: Option<NdkFnDisconnectEventCallback>, disconnect_context: *mut c_void,
        completion: Option<NdkFnRequestCompletion>, context: *mut c_void }) -> NtStatus;
    ndk_reject = "NdkReject" => reject(data: *const c_void, data_length: u32) -> NtStatus;
    ndk_get_connection_data = "NdkGetConnectionData" => get_connection_data(ConnectionData {
        inbound_read_limit: *mut u32, outbound_read_limit: *mut u32, data: *mut c_void,
        data_length: *mut u32 }) -> NtStatus;
    ndk_get_local_address = "NdkGetLocalAddress" => get_local_address(address: *mut SockAddr,
        length: *mut u32) -> NtStatus;
    ndk_get_peer_address = "NdkGetPeerAddress" => get_peer_address(address: *mut SockAddr,
        length: *mut u32) -> NtStatus;
    ndk_disconnect = "NdkDisconnect" => disconnect(completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void) -> NtStatus;
}

impl Kind for Connector {
    fn begin_close(object: &Object<Self>) {
        // L20/L21: cancels what is pending and, when connected, disconnects
        // gracefully; held until that work and its callbacks are over.
        object.hold_through(|| object.inner.rnic.close() == CloseState::Done);
    }
    fn finish_close(object: &Object<Self>) {
        object.inner.bridge.untie();
    }
}

/// Wraps `rnic` in a connector object on `adapter`, a successor of
/// `listener` when it was created for an incoming request (N4, N7).
fn new_connector(
    adapter: &Object<Adapter>,
    listener: Option<&Object<Listener>>,
    rnic: rcm::Connector,
) -> Result<*mut NdkConnector, NtStatus> {
    let bridge = Arc::new(Bridge::default());
    rnic.set_events(Arc::clone(&bridge) as Arc<dyn ConnectorEvents>);
    let parents: Parents = [
        Some(adapter.arc() as Arc<dyn Holder>),
        listener.map(|l| l.arc() as Arc<dyn Holder>),
        None,
        None,
    ];
    let inner = Connector {
        rnic,
        bridge: Arc::clone(&bridge),
    };
    // On failure `inner` is dropped, which closes the RNIC connector: an
    // incoming request is then refused.
    let object = Object::create(adapter.header().version, inner, parents)
        .ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
    *bridge.object.lock() = Arc::downgrade(&object);
    Ok(object.as_ptr().cast())
}

/// `NdkCreateConnector` (L7: inline).
pub(super) fn create_connector(adapter: &Object<Adapter>) -> Result<*mut NdkConnector, NtStatus> {
    let rnic = rcm::Connector::new(adapter.inner.addresses()).map_err(status)?;
    new_connector(adapter, None, rnic)
}

/// Starts a Connect or ConnectWithSharedEndpoint: records the completion,
/// ties the QP (and endpoint), then runs `start`; undoes all of it when
/// `start` fails inline.
fn start_connect(
    connector: &Object<Connector>,
    qp: &Object<Qp>,
    endpoint: Option<&Object<SharedEndpoint>>,
    completion: Completion,
    start: impl FnOnce(&rcm::Connector) -> Result<(), CmError>,
) -> NtStatus {
    let bridge = &connector.inner.bridge;
    {
        let mut r = bridge.requests.lock();
        if r.connect.is_some() || r.qp.is_some() {
            // A Connect is pending, or the connector is (being) connected.
            return STATUS_CONNECTION_INVALID;
        }
        r.connect = Some(completion);
        let tie: Arc<dyn Holder> = qp.arc();
        tie.hold();
        r.qp = Some(tie);
        *bridge.qp.lock() = Arc::downgrade(&qp.arc());
        if let Some(endpoint) = endpoint {
            let tie: Arc<dyn Holder> = endpoint.arc();
            tie.hold();
            r.endpoint = Some(tie);
        }
    }
    match start(&connector.inner.rnic) {
        Ok(()) => STATUS_PENDING,
        Err(error) => {
            bridge.requests.lock().connect = None;
            bridge.untie();
            status(error)
        }
    }
}

/// `NdkConnect`'s status as the table passes it on: in checked mode a
/// connector whose connection has ended, connected again, is reported (X5).
fn watched(connector: &Object<Connector>, slot: &'static Slot, status: NtStatus) -> NtStatus {
    if status == STATUS_CONNECTION_INVALID && super::checked::checked() {
        super::checked::report(
            super::checked::Breach::X5,
            NdkObjectType::CONNECTOR,
            connector.as_ptr() as usize,
            slot,
            super::checked::slot_ptr(&Slot("a connector already used")),
        );
    }
    status
}

/// `NdkConnect` (N2, N8, N12, N17, N20): pending until the peer accepts
/// (then `STATUS_SUCCESS`) or refuses (`STATUS_CONNECTION_REFUSED`); never
/// times out (N29).
unsafe fn connect(connector: &Object<Connector>, args: Connect) -> NtStatus {
    let (src, dst) = ((args.src, args.src_length), (args.dst, args.dst_length));
    // N17: at most `MaxCallerData` bytes are taken.
    let most = connector.inner.rnic.private_data_limits().0;
    let data = (args.data, args.data_length, most);
    let slot = &Slot("NdkConnect");
    // SAFETY: the consumer's arguments, as `ConnectArgs::read` takes them.
    let read = unsafe { ConnectArgs::read(args.qp, Some(src), dst, data, args.completion, slot) };
    let (qp, src, dst, data, completion) = match read {
        Ok(read) => (read.qp, read.src, read.dst, read.data, read.completion),
        Err(status) => return status,
    };
    let limits = ReadLimits::new(args.inbound_read_limit, args.outbound_read_limit);
    let Some(src) = src else {
        return STATUS_INVALID_PARAMETER;
    };
    start_connect(
        &connector.arc(),
        &qp,
        None,
        (completion, args.context as usize),
        |rnic| rnic.connect(qp::rnic_qp(&qp), src, dst, limits, data),
    )
}

/// The arguments Connect and ConnectWithSharedEndpoint share, read and
/// checked in the order the consumer passes them.
struct ConnectArgs<'a> {
    qp: Entered<'a, Qp>,
    src: Option<Endpoint>,
    dst: Endpoint,
    data: &'a [u8],
    completion: NdkFnRequestCompletion,
}

impl ConnectArgs<'_> {
    /// Enters the QP (for `slot`) and reads the addresses and private data;
    /// `STATUS_INVALID_PARAMETER` for a QP that is not one or a missing
    /// completion, else the address's or data's refusal.
    ///
    /// # Safety
    /// `qp` as [`Object::from_ptr`]; each address and the data cover their
    /// lengths (N2), readable for `'a`.
    unsafe fn read(
        qp: *mut NdkQp,
        src: Option<(*const SockAddr, u32)>,
        dst: (*const SockAddr, u32),
        data: (*const c_void, u32, usize),
        completion: Option<NdkFnRequestCompletion>,
        slot: &'static Slot,
    ) -> Result<Self, NtStatus> {
        // SAFETY: the caller's contract.
        let qp =
            unsafe { Object::<Qp>::from_ptr(qp.cast(), slot) }.ok_or(STATUS_INVALID_PARAMETER)?;
        let completion = completion.ok_or(STATUS_INVALID_PARAMETER)?;
        let src = match src {
            // SAFETY: the caller's contract.
            Some((address, length)) => Some(unsafe { read_address(address, length) }?),
            None => None,
        };
        // SAFETY: the caller's contract.
        let dst = unsafe { read_address(dst.0, dst.1) }?;
        // SAFETY: the caller's contract.
        let data = unsafe { private_data(data.0, data.1, data.2) }?;
        Ok(Self {
            qp,
            src,
            dst,
            data,
            completion,
        })
    }
}

/// `NdkConnectWithSharedEndpoint` (N10, N11): as [`connect`], from the shared
/// endpoint's address and port; `STATUS_ADDRESS_ALREADY_EXISTS` when that
/// four-tuple exists.
unsafe fn connect_with_shared_endpoint(
    connector: &Object<Connector>,
    args: ConnectShared,
) -> NtStatus {
    const SLOT: &Slot = &Slot("NdkConnectWithSharedEndpoint");
    // SAFETY: the consumer passes its shared endpoint.
    let endpoint = unsafe { Object::<SharedEndpoint>::from_ptr(args.endpoint.cast(), SLOT) };
    let Some(endpoint) = endpoint else {
        return STATUS_INVALID_PARAMETER;
    };
    let most = connector.inner.rnic.private_data_limits().0;
    let (dst, data) = (
        (args.dst, args.dst_length),
        (args.data, args.data_length, most),
    );
    // SAFETY: the consumer's arguments, as `ConnectArgs::read` takes them.
    let read = unsafe { ConnectArgs::read(args.qp, None, dst, data, args.completion, SLOT) };
    let (qp, dst, data, completion) = match read {
        Ok(read) => (read.qp, read.dst, read.data, read.completion),
        Err(status) => return status,
    };
    let limits = ReadLimits::new(args.inbound_read_limit, args.outbound_read_limit);
    start_connect(
        &connector.arc(),
        &qp,
        Some(&endpoint),
        (completion, args.context as usize),
        |rnic| rnic.connect_shared(qp::rnic_qp(&qp), &endpoint.inner.rnic, dst, limits, data),
    )
}

/// `NdkCompleteConnect` (N13, N14): inline. Connects both QPs and completes
/// the peer's Accept; `STATUS_CONNECTION_INVALID` when not connecting or the
/// QP is no longer idle, `STATUS_CONNECTION_ABORTED` when the peer gave up.
unsafe fn complete_connect(connector: &Object<Connector>, args: CompleteConnect) -> NtStatus {
    let connector = connector.arc();
    let bridge = &connector.inner.bridge;
    let context = args.disconnect_context as usize;
    let indication = args.disconnect_event.map(|callback| (callback, context));
    // Registered first: an indication may follow establishment at once.
    let previous = core::mem::replace(&mut bridge.requests.lock().indication, indication);
    match connector.inner.rnic.complete_connect() {
        Ok(()) => STATUS_SUCCESS,
        Err(error) => {
            bridge.requests.lock().indication = previous;
            connector.inner.untie_if_failed();
            status(error)
        }
    }
}

/// `NdkAccept` (N15, N17, N20): pending until the active side completes the
/// connection; `STATUS_CONNECTION_ABORTED` when it gave up.
unsafe fn accept(connector: &Object<Connector>, args: Accept) -> NtStatus {
    // SAFETY: the consumer passes its QP.
    let Some(qp) = (unsafe { Object::<Qp>::from_ptr(args.qp.cast(), &Slot("NdkAccept")) }) else {
        return STATUS_INVALID_PARAMETER;
    };
    let Some(completion) = args.completion else {
        return STATUS_INVALID_PARAMETER;
    };
    let (context, disconnect_context) = (args.context, args.disconnect_context);
    let most = connector.inner.rnic.private_data_limits().1;
    // SAFETY: the consumer's private data covers its length.
    let data = match unsafe { private_data(args.data, args.data_length, most) } {
        Ok(data) => data,
        Err(status) => return status,
    };
    let connector = connector.arc();
    let bridge = &connector.inner.bridge;
    {
        let mut r = bridge.requests.lock();
        if r.accept.is_some() || r.qp.is_some() {
            return STATUS_CONNECTION_INVALID;
        }
        r.accept = Some((completion, context as usize));
        r.indication = (args.disconnect_event).map(|c| (c, disconnect_context as usize));
        let tie: Arc<dyn Holder> = qp.arc();
        tie.hold();
        r.qp = Some(tie);
        *bridge.qp.lock() = Arc::downgrade(&qp.arc());
    }
    let limits = ReadLimits::new(args.inbound_read_limit, args.outbound_read_limit);
    match connector.inner.rnic.accept(qp::rnic_qp(&qp), limits, data) {
        Ok(()) => STATUS_PENDING,
        Err(error) => {
            {
                let mut r = bridge.requests.lock();
                r.accept = None;
                r.indication = None;
            }
            bridge.untie();
            status(error)
        }
    }
}

/// `NdkReject` (N16, N17): synchronous.
unsafe fn reject(connector: &Object<Connector>, data: *const c_void, data_length: u32) -> NtStatus {
    let most = connector.inner.rnic.private_data_limits().1;
    // SAFETY: the consumer's private data covers its length.
    let data = match unsafe { private_data(data, data_length, most) } {
        Ok(data) => data,
        Err(status) => return status,
    };
    let result = connector.inner.rnic.reject(data);
    connector.inner.untie_if_failed();
    outcome(result)
}

/// `NdkGetConnectionData` (N18–N20).
unsafe fn get_connection_data(connector: &Object<Connector>, args: ConnectionData) -> NtStatus {
    let (data, data_length) = (args.data, args.data_length);
    let (inbound_read_limit, outbound_read_limit) =
        (args.inbound_read_limit, args.outbound_read_limit);
    if data_length.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: a valid in/out ULONG (checked non-null).
    let have = unsafe { data_length.read_unaligned() };
    let buffer: &mut [u8] = if data.is_null() {
        // N18: a query of the size (a NULL buffer comes with length 0).
        &mut []
    } else {
        // SAFETY: the consumer's buffer holds `*pPrivateDataLength` bytes.
        unsafe { core::slice::from_raw_parts_mut(data.cast::<u8>(), have as usize) }
    };
    let found = match connector.inner.rnic.connection_data(buffer) {
        Ok(found) => found,
        Err(error) => return status(error),
    };
    // N19: the read-limit outputs are optional.
    if !inbound_read_limit.is_null() {
        // SAFETY: the consumer's out ULONG (checked non-null).
        unsafe { inbound_read_limit.write_unaligned(found.limits.inbound) };
    }
    if !outbound_read_limit.is_null() {
        // SAFETY: as above.
        unsafe { outbound_read_limit.write_unaligned(found.limits.outbound) };
    }
    let rds = u32::try_from(found.length).unwrap_or(u32::MAX);
    // SAFETY: as above (checked non-null).
    unsafe { data_length.write_unaligned(rds) };
    // N18: with a buffer, success only if it held all RDS bytes.
    if data.is_null() || have >= rds {
        STATUS_SUCCESS
    } else {
        STATUS_BUFFER_TOO_SMALL
    }
}

/// Writes `endpoint` as a get-address slot answers, `missing` when there is
/// none yet.
///
/// # Safety
/// As [`write_address`].
unsafe fn answer_address(
    endpoint: Option<Endpoint>,
    missing: NtStatus,
    address: *mut SockAddr,
    length: *mut u32,
) -> NtStatus {
    match endpoint {
        // SAFETY: the caller's contract.
        Some(endpoint) => unsafe { write_address(endpoint, address, length) },
        None => missing,
    }
}

/// `NdkGetLocalAddress` of a connector (N22, N23): available once connecting.
unsafe fn get_local_address(c: &Object<Connector>, at: *mut SockAddr, len: *mut u32) -> NtStatus {
    // SAFETY: the consumer's buffer and in/out length.
    unsafe { answer_address(c.inner.rnic.local(), STATUS_CONNECTION_INVALID, at, len) }
}

/// `NdkGetPeerAddress` (N22, N23): available once connecting.
unsafe fn get_peer_address(c: &Object<Connector>, at: *mut SockAddr, len: *mut u32) -> NtStatus {
    // SAFETY: the consumer's buffer and in/out length.
    unsafe { answer_address(c.inner.rnic.peer(), STATUS_CONNECTION_INVALID, at, len) }
}

/// `NdkDisconnect` (X1–X7, N26): pending until the peer's graceful
/// disconnect (its Disconnect or close) has arrived and the connection's DMA
/// has finished; `STATUS_SUCCESS` after a graceful exchange,
/// `STATUS_CONNECTION_ABORTED` when the connection was aborted,
/// `STATUS_CANCELLED` when the connector is closed while it waits;
/// `STATUS_CONNECTION_INVALID` inline when not connected (X5).
unsafe fn disconnect(
    connector: &Object<Connector>,
    completion: Option<NdkFnRequestCompletion>,
    context: *mut c_void,
) -> NtStatus {
    let Some(completion) = completion else {
        return STATUS_INVALID_PARAMETER;
    };
    let connector = connector.arc();
    let bridge = &connector.inner.bridge;
    if super::checked::checked() {
        // D5: Disconnect flushes the QP; a DEFER chain still open is the
        // consumer's breach (reported with no lock held).
        let qp = bridge.qp.lock().upgrade();
        if let Some(qp) = qp {
            qp::watch_chain(&qp, &Slot("NdkDisconnect"));
            // X7: requests still outstanding.
            qp::watch_outstanding(&qp, connector.as_ptr() as usize, &Slot("NdkDisconnect"));
        }
    }
    {
        let mut r = bridge.requests.lock();
        if r.disconnect.is_some() {
            return STATUS_CONNECTION_INVALID;
        }
        r.disconnect = Some((completion, context as usize));
    }
    match connector.inner.rnic.disconnect() {
        Ok(()) => STATUS_PENDING,
        Err(error) => {
            bridge.requests.lock().disconnect = None;
            status(error)
        }
    }
}

// ---------------------------------------------------------------------------
// NDK_LISTENER
// ---------------------------------------------------------------------------

/// Bridges the RNIC listener's events to the consumer's connect event and
/// to a pending Listen's completion.
struct ListenerBridge {
    object: SpinLock<Weak<Object<Listener>>>,
    /// The adapter the listener was created on: its connectors' too (N4).
    adapter: Arc<Object<Adapter>>,
    callback: NdkFnConnectEventCallback,
    context: usize,
    /// The completion of a Listen whose sockets may still be binding (L8).
    listen: SpinLock<Option<Completion>>,
}

impl ListenerEvents for ListenerBridge {
    fn incoming(&self, request: rcm::Connector) {
        let Some(listener) = self.object.lock().upgrade() else {
            // Dropping the request refuses it.
            return;
        };
        // N4: a new connector on the listener's adapter, handed over by one
        // connect event through the listener's serializer. If it cannot be
        // created the request is refused.
        if let Ok(connector) = new_connector(&self.adapter, Some(&listener), request) {
            listener.deliver(Event::Connect {
                callback: self.callback,
                context: self.context,
                connector: connector as usize,
            });
        }
    }

    fn listen_completed(&self, result: Result<(), CmError>) {
        // N3, L8: the Listen that returned STATUS_PENDING; through the
        // serializer, no lock held (I4). A close before the bind finished
        // completes it STATUS_CANCELLED first (L20, L21).
        let completion = self.listen.lock().take();
        let listener = self.object.lock().upgrade();
        if let (Some((callback, context)), Some(listener)) = (completion, listener) {
            listener.deliver(Event::Request {
                callback,
                context,
                status: outcome(result),
            });
        }
    }

    fn closed(&self) {
        // Upgrade under the lock, release outside it: the release may
        // complete the close and call the consumer (I4).
        let listener = self.object.lock().upgrade();
        if let Some(listener) = listener {
            listener.release();
        }
    }
}

/// The provider state of an `NDK_LISTENER`.
pub struct Listener {
    rnic: rcm::Listener,
    bridge: Arc<ListenerBridge>,
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static LISTENER_DISPATCH: NdkListenerDispatch for Listener (LISTENER) at NdkListener,
        close ndk_close_listener = "NdkCloseListener";
    ndk_listen = "NdkListen" => listen(Listen { address: *const SockAddr, length: u32,
        completion: Option<NdkFnRequestCompletion>, context: *mut c_void }) -> NtStatus;
    ndk_get_local_address = "NdkGetLocalAddress" => get_listener_address(address: *mut SockAddr,
        length: *mut u32) -> NtStatus;
    ndk_control_connect_events = "NdkControlConnectEvents" => control_connect_events(pause: Boolean
    );
}

impl Kind for Listener {
    fn begin_close(object: &Object<Self>) {
        // N6: requests are turned away from now on; the close stays pending
        // while a connect event is being delivered (L21) and, through the
        // object ties, until the connectors it produced are closed (N7, L24).
        object.hold_through(|| object.inner.rnic.close() == CloseState::Done);
    }
}

/// `NdkCreateListener` (L7: inline): a listener tied to its bridge. The
/// connect-event callback is required.
pub(super) fn create_listener(
    adapter: &Object<Adapter>,
    event: Option<NdkFnConnectEventCallback>,
    event_context: *mut c_void,
) -> Result<*mut NdkListener, NtStatus> {
    let callback = event.ok_or(STATUS_INVALID_PARAMETER)?;
    let bridge = Arc::new(ListenerBridge {
        object: SpinLock::new(Weak::new()),
        adapter: adapter.arc(),
        callback,
        context: event_context as usize,
        listen: SpinLock::new(None),
    });
    let events = Arc::clone(&bridge) as Arc<dyn ListenerEvents>;
    let made = rcm::Listener::new(adapter.inner.addresses(), events)
        .map_err(status)
        .and_then(|rnic| {
            Object::create_under(
                adapter,
                Listener {
                    rnic,
                    bridge: Arc::clone(&bridge),
                },
            )
        });
    let object = made?;
    *bridge.object.lock() = Arc::downgrade(&object);
    Ok(object.as_ptr().cast())
}

/// `NdkListen` (N3, N31, L8). Inline (`STATUS_SUCCESS` or the failure)
/// when the listener is listening before the call returns: always on the
/// fabric, and over the wire when the platform bound its TCP sockets within
/// the call (host mode's std sockets). Over WSK the bind is asynchronous:
/// then `STATUS_PENDING`, and the completion follows once WSK has bound the
/// sockets (`STATUS_SUCCESS`), or with the failure (`STATUS_SHARING_VIOLATION`
/// for a TCP port another program holds, N3), or `STATUS_CANCELLED` when the
/// listener is closed first (L20). Without a completion routine a Listen
/// still binding returns `STATUS_SUCCESS` and its outcome is not reported.
/// Failures: `STATUS_SHARING_VIOLATION`, `STATUS_INVALID_ADDRESS`,
/// `STATUS_TOO_MANY_ADDRESSES`, `STATUS_INSUFFICIENT_RESOURCES`;
/// `STATUS_INVALID_DEVICE_REQUEST` when already listening.
unsafe fn listen(listener: &Object<Listener>, args: Listen) -> NtStatus {
    let (completion, context) = (args.completion, args.context);
    // SAFETY: the consumer's address covers its length (N2).
    let local = match unsafe { read_address(args.address, args.length) } {
        Ok(local) => local,
        Err(status) => return status,
    };
    let bridge = &listener.inner.bridge;
    if let Some(callback) = completion {
        let mut pending = bridge.listen.lock();
        if pending.is_some() {
            // A Listen is still binding: already listening.
            return STATUS_INVALID_DEVICE_REQUEST;
        }
        // Before the start: the completion may run before it returns (L15).
        *pending = Some((callback, context as usize));
    }
    match listener.inner.rnic.start_listen(local) {
        Ok(rcm::Listen::Binding(_)) if completion.is_some() => STATUS_PENDING,
        Ok(rcm::Listen::Binding(_)) => STATUS_SUCCESS,
        Ok(rcm::Listen::Bound(_)) => {
            // L8: finished inline, so no completion follows.
            bridge.listen.lock().take();
            STATUS_SUCCESS
        }
        Err(error) => {
            bridge.listen.lock().take();
            status(error)
        }
    }
}

/// `NdkGetListenerLocalAddress` (N3, N22): the port chosen for port 0.
unsafe fn get_listener_address(
    listener: &Object<Listener>,
    address: *mut SockAddr,
    length: *mut u32,
) -> NtStatus {
    let local = listener.inner.rnic.local();
    // SAFETY: the consumer's buffer and in/out length.
    unsafe { answer_address(local, STATUS_INVALID_DEVICE_REQUEST, address, length) }
}

/// `NdkControlConnectEvents` (N5): TRUE pauses, FALSE resumes.
fn control_connect_events(listener: &Object<Listener>, pause: Boolean) {
    listener.inner.rnic.pause(pause != 0);
}

// ---------------------------------------------------------------------------
// NDK_SHARED_ENDPOINT
// ---------------------------------------------------------------------------

/// The provider state of an `NDK_SHARED_ENDPOINT`.
pub struct SharedEndpoint {
    rnic: rcm::SharedEndpoint,
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static ENDPOINT_DISPATCH: NdkSharedEndpointDispatch
        for SharedEndpoint (SHARED_ENDPOINT) at NdkSharedEndpoint,
        close ndk_close_shared_endpoint = "NdkCloseSharedEndpoint";
    ndk_get_local_address = "NdkGetLocalAddress" => get_endpoint_address(address: *mut SockAddr,
        length: *mut u32) -> NtStatus;
}

impl Kind for SharedEndpoint {
    fn begin_close(object: &Object<Self>) {
        // N10: the endpoint's own reference goes; connectors connected
        // through it keep the address in use, and (as successors) the close
        // pending, until they close.
        object.inner.rnic.close();
    }
}

/// `NdkCreateSharedEndpoint` (N9, L7: inline): fails like Listen (N3).
///
/// # Safety
/// The consumer's address covers its length (N2).
pub(super) unsafe fn create_shared_endpoint(
    adapter: &Object<Adapter>,
    address: *const SockAddr,
    address_length: u32,
) -> Result<*mut NdkSharedEndpoint, NtStatus> {
    // SAFETY: the caller's contract.
    let local = unsafe { read_address(address, address_length) }?;
    let rnic = rcm::SharedEndpoint::new(adapter.inner.addresses(), local).map_err(status)?;
    let object = Object::create_under(adapter, SharedEndpoint { rnic })?;
    Ok(object.as_ptr().cast())
}

/// `NdkGetSharedEndpointLocalAddress` (N9, N22).
unsafe fn get_endpoint_address(
    endpoint: &Object<SharedEndpoint>,
    address: *mut SockAddr,
    length: *mut u32,
) -> NtStatus {
    // SAFETY: the consumer's buffer and in/out length.
    unsafe { write_address(endpoint.inner.rnic.local(), address, length) }
}

#[cfg(test)]
#[cfg(all(not(loom), not(target_os = "windows")))]
mod tests;
