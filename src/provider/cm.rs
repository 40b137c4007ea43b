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
//! * `Listen` and `CompleteConnect` finish inline (`STATUS_SUCCESS` or an
//!   error), and never call their completion.
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

#![expect(
    clippy::too_many_arguments,
    reason = "a slot's method takes the C slot's parameters (dispatch::ndk_table)"
)]

use core::ffi::c_void;

use super::adapter::Adapter;
use super::dispatch::ndk_table;
use super::object::{Event, Holder, Kind, Object, Parents, Slot};
use super::qp::{self, Qp};
use super::write_out;
use crate::abi::{
    AF_INET, AF_INET6, Boolean, In6Addr, InAddr, NdkConnector, NdkConnectorDispatch,
    NdkFnConnectEventCallback, NdkFnCreateCompletion, NdkFnDisconnectEventCallback,
    NdkFnRequestCompletion, NdkListener, NdkListenerDispatch, NdkObjectType, NdkQp,
    NdkSharedEndpoint, NdkSharedEndpointDispatch, NtStatus, STATUS_ADDRESS_ALREADY_EXISTS,
    STATUS_BUFFER_TOO_SMALL, STATUS_CANCELLED, STATUS_CONNECTION_ABORTED,
    STATUS_CONNECTION_INVALID, STATUS_CONNECTION_REFUSED, STATUS_HOST_UNREACHABLE,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_ADDRESS, STATUS_INVALID_BUFFER_SIZE,
    STATUS_INVALID_DEVICE_REQUEST, STATUS_INVALID_PARAMETER, STATUS_NETWORK_UNREACHABLE,
    STATUS_PENDING, STATUS_SHARING_VIOLATION, STATUS_SUCCESS, STATUS_TOO_MANY_ADDRESSES, SockAddr,
    SockAddrIn, SockAddrIn6,
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

/// The consumer's private data as a slice.
///
/// # Safety
/// `data` is null or readable for `length` bytes for the duration of the
/// call.
unsafe fn private_data<'a>(data: *const c_void, length: u32) -> Result<&'a [u8], NtStatus> {
    if length == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(STATUS_INVALID_PARAMETER);
    }
    // SAFETY: the caller's contract; non-null, `length` bytes readable.
    Ok(unsafe { core::slice::from_raw_parts(data.cast::<u8>(), length as usize) })
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
        // N24: optional; the RNIC indicates at most once per connection.
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

impl Kind for Connector {
    const TYPE: NdkObjectType = NdkObjectType::CONNECTOR;
    fn begin_close(object: &Object<Self>) {
        // L20/L21: cancels what is pending and, when connected, disconnects
        // gracefully; held until that work and its callbacks are over.
        object.hold();
        if object.inner.rnic.close() == CloseState::Done {
            object.release();
        }
    }
    fn finish_close(object: &Object<Self>) {
        object.inner.bridge.untie();
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static CONNECTOR_DISPATCH: NdkConnectorDispatch for Connector at NdkConnector,
        close ndk_close_connector = "NdkCloseConnector";
    ndk_connect = "NdkConnect" => connect(
        qp: *mut NdkQp,
        src: *const SockAddr,
        src_length: u32,
        dst: *const SockAddr,
        dst_length: u32,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        data: *const c_void,
        data_length: u32,
        completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void,
    ) -> NtStatus;
    ndk_connect_with_shared_endpoint = "NdkConnectWithSharedEndpoint" => connect_with_shared_endpoint(
        qp: *mut NdkQp,
        endpoint: *mut NdkSharedEndpoint,
        dst: *const SockAddr,
        dst_length: u32,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        data: *const c_void,
        data_length: u32,
        completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void,
    ) -> NtStatus;
    ndk_complete_connect = "NdkCompleteConnect" => complete_connect(
        disconnect_event: Option<NdkFnDisconnectEventCallback>,
        disconnect_context: *mut c_void,
        completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void,
    ) -> NtStatus;
    ndk_accept = "NdkAccept" => accept(
        qp: *mut NdkQp,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        data: *const c_void,
        data_length: u32,
        disconnect_event: Option<NdkFnDisconnectEventCallback>,
        disconnect_context: *mut c_void,
        completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void,
    ) -> NtStatus;
    ndk_reject = "NdkReject" => reject(data: *const c_void, data_length: u32) -> NtStatus;
    ndk_get_connection_data = "NdkGetConnectionData" => get_connection_data(
        inbound_read_limit: *mut u32,
        outbound_read_limit: *mut u32,
        data: *mut c_void,
        data_length: *mut u32,
    ) -> NtStatus;
    ndk_get_local_address = "NdkGetLocalAddress" => get_local_address(
        address: *mut SockAddr,
        length: *mut u32,
    ) -> NtStatus;
    ndk_get_peer_address = "NdkGetPeerAddress" => get_peer_address(
        address: *mut SockAddr,
        length: *mut u32,
    ) -> NtStatus;
    ndk_disconnect = "NdkDisconnect" => disconnect(
        completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void,
    ) -> NtStatus;
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
pub(super) unsafe fn create_connector(
    adapter: &Object<Adapter>,
    _completion: Option<NdkFnCreateCompletion>,
    _context: *mut c_void,
    out: *mut *mut NdkConnector,
) -> NtStatus {
    if out.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    let rnic = match rcm::Connector::new(adapter.inner.addresses()) {
        Ok(rnic) => rnic,
        Err(error) => return status(error),
    };
    match new_connector(adapter, None, rnic) {
        // SAFETY: `out` is the consumer's out-pointer (checked non-null).
        Ok(ptr) => unsafe { write_out(out.cast(), ptr.cast()) },
        Err(status) => status,
    }
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

/// `NdkConnect` (N2, N8, N12, N17, N20): pending until the peer accepts
/// (then `STATUS_SUCCESS`) or refuses (`STATUS_CONNECTION_REFUSED`); never
/// times out (N29).
unsafe fn connect(
    connector: &Object<Connector>,
    qp: *mut NdkQp,
    src: *const SockAddr,
    src_length: u32,
    dst: *const SockAddr,
    dst_length: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    data: *const c_void,
    data_length: u32,
    completion: Option<NdkFnRequestCompletion>,
    context: *mut c_void,
) -> NtStatus {
    // SAFETY: the consumer passes its QP.
    let Some(qp) = (unsafe { Object::<Qp>::from_ptr(qp.cast(), &Slot("NdkConnect")) }) else {
        return STATUS_INVALID_PARAMETER;
    };
    let Some(completion) = completion else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the consumer's source address covers its length (N2).
    let src = match unsafe { read_address(src, src_length) } {
        Ok(src) => src,
        Err(status) => return status,
    };
    // SAFETY: the consumer's destination address covers its length (N2).
    let dst = match unsafe { read_address(dst, dst_length) } {
        Ok(dst) => dst,
        Err(status) => return status,
    };
    // SAFETY: the consumer's private data covers its length.
    let data = match unsafe { private_data(data, data_length) } {
        Ok(data) => data,
        Err(status) => return status,
    };
    let limits = ReadLimits::new(inbound_read_limit, outbound_read_limit);
    let connector = connector.arc();
    start_connect(
        &connector,
        &qp,
        None,
        (completion, context as usize),
        |rnic| rnic.connect(qp::rnic_qp(&qp), src, dst, limits, data),
    )
}

/// `NdkConnectWithSharedEndpoint` (N10, N11): as [`connect`], from the shared
/// endpoint's address and port; `STATUS_ADDRESS_ALREADY_EXISTS` when that
/// four-tuple exists.
unsafe fn connect_with_shared_endpoint(
    connector: &Object<Connector>,
    qp: *mut NdkQp,
    endpoint: *mut NdkSharedEndpoint,
    dst: *const SockAddr,
    dst_length: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    data: *const c_void,
    data_length: u32,
    completion: Option<NdkFnRequestCompletion>,
    context: *mut c_void,
) -> NtStatus {
    const SLOT: &Slot = &Slot("NdkConnectWithSharedEndpoint");
    // SAFETY: the consumer passes its QP.
    let Some(qp) = (unsafe { Object::<Qp>::from_ptr(qp.cast(), SLOT) }) else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the consumer passes its shared endpoint.
    let Some(endpoint) = (unsafe { Object::<SharedEndpoint>::from_ptr(endpoint.cast(), SLOT) })
    else {
        return STATUS_INVALID_PARAMETER;
    };
    let Some(completion) = completion else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the consumer's address covers its length (N2).
    let dst = match unsafe { read_address(dst, dst_length) } {
        Ok(dst) => dst,
        Err(status) => return status,
    };
    // SAFETY: the consumer's private data covers its length.
    let data = match unsafe { private_data(data, data_length) } {
        Ok(data) => data,
        Err(status) => return status,
    };
    let limits = ReadLimits::new(inbound_read_limit, outbound_read_limit);
    let connector = connector.arc();
    start_connect(
        &connector,
        &qp,
        Some(&endpoint),
        (completion, context as usize),
        |rnic| rnic.connect_shared(qp::rnic_qp(&qp), &endpoint.inner.rnic, dst, limits, data),
    )
}

/// `NdkCompleteConnect` (N13, N14): inline. Connects both QPs and completes
/// the peer's Accept; `STATUS_CONNECTION_INVALID` when not connecting or the
/// QP is no longer idle, `STATUS_CONNECTION_ABORTED` when the peer gave up.
unsafe fn complete_connect(
    connector: &Object<Connector>,
    disconnect_event: Option<NdkFnDisconnectEventCallback>,
    disconnect_context: *mut c_void,
    _completion: Option<NdkFnRequestCompletion>,
    _context: *mut c_void,
) -> NtStatus {
    let connector = connector.arc();
    let bridge = &connector.inner.bridge;
    // Registered first: an indication may follow establishment at once.
    let previous = core::mem::replace(
        &mut bridge.requests.lock().indication,
        disconnect_event.map(|callback| (callback, disconnect_context as usize)),
    );
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
unsafe fn accept(
    connector: &Object<Connector>,
    qp: *mut NdkQp,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    data: *const c_void,
    data_length: u32,
    disconnect_event: Option<NdkFnDisconnectEventCallback>,
    disconnect_context: *mut c_void,
    completion: Option<NdkFnRequestCompletion>,
    context: *mut c_void,
) -> NtStatus {
    // SAFETY: the consumer passes its QP.
    let Some(qp) = (unsafe { Object::<Qp>::from_ptr(qp.cast(), &Slot("NdkAccept")) }) else {
        return STATUS_INVALID_PARAMETER;
    };
    let Some(completion) = completion else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: the consumer's private data covers its length.
    let data = match unsafe { private_data(data, data_length) } {
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
        r.indication = disconnect_event.map(|callback| (callback, disconnect_context as usize));
        let tie: Arc<dyn Holder> = qp.arc();
        tie.hold();
        r.qp = Some(tie);
    }
    let limits = ReadLimits::new(inbound_read_limit, outbound_read_limit);
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
    // SAFETY: the consumer's private data covers its length.
    let data = match unsafe { private_data(data, data_length) } {
        Ok(data) => data,
        Err(status) => return status,
    };
    let result = connector.inner.rnic.reject(data);
    connector.inner.untie_if_failed();
    outcome(result)
}

/// `NdkGetConnectionData` (N18–N20).
unsafe fn get_connection_data(
    connector: &Object<Connector>,
    inbound_read_limit: *mut u32,
    outbound_read_limit: *mut u32,
    data: *mut c_void,
    data_length: *mut u32,
) -> NtStatus {
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

/// `NdkGetLocalAddress` of a connector (N22, N23): available once connecting.
unsafe fn get_local_address(
    connector: &Object<Connector>,
    address: *mut SockAddr,
    length: *mut u32,
) -> NtStatus {
    match connector.inner.rnic.local() {
        // SAFETY: the consumer's buffer and in/out length.
        Some(endpoint) => unsafe { write_address(endpoint, address, length) },
        None => STATUS_CONNECTION_INVALID,
    }
}

/// `NdkGetPeerAddress` (N22, N23): available once connecting.
unsafe fn get_peer_address(
    connector: &Object<Connector>,
    address: *mut SockAddr,
    length: *mut u32,
) -> NtStatus {
    match connector.inner.rnic.peer() {
        // SAFETY: the consumer's buffer and in/out length.
        Some(endpoint) => unsafe { write_address(endpoint, address, length) },
        None => STATUS_CONNECTION_INVALID,
    }
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

/// Bridges the RNIC listener's events to the consumer's connect event.
struct ListenerBridge {
    object: SpinLock<Weak<Object<Listener>>>,
    /// The adapter the listener was created on: its connectors' too (N4).
    adapter: Arc<Object<Adapter>>,
    callback: NdkFnConnectEventCallback,
    context: usize,
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
}

impl Kind for Listener {
    const TYPE: NdkObjectType = NdkObjectType::LISTENER;
    fn begin_close(object: &Object<Self>) {
        // N6: requests are turned away from now on; the close stays pending
        // while a connect event is being delivered (L21) and, through the
        // object ties, until the connectors it produced are closed (N7, L24).
        object.hold();
        if object.inner.rnic.close() == CloseState::Done {
            object.release();
        }
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static LISTENER_DISPATCH: NdkListenerDispatch for Listener at NdkListener,
        close ndk_close_listener = "NdkCloseListener";
    ndk_listen = "NdkListen" => listen(
        address: *const SockAddr,
        length: u32,
        completion: Option<NdkFnRequestCompletion>,
        context: *mut c_void,
    ) -> NtStatus;
    ndk_get_local_address = "NdkGetLocalAddress" => get_listener_address(
        address: *mut SockAddr,
        length: *mut u32,
    ) -> NtStatus;
    ndk_control_connect_events = "NdkControlConnectEvents" => control_connect_events(
        pause: Boolean,
    );
}

/// `NdkCreateListener` (L7: inline). The connect-event callback is required.
pub(super) unsafe fn create_listener(
    adapter: &Object<Adapter>,
    event: Option<NdkFnConnectEventCallback>,
    event_context: *mut c_void,
    _completion: Option<NdkFnCreateCompletion>,
    _context: *mut c_void,
    out: *mut *mut NdkListener,
) -> NtStatus {
    let Some(callback) = event else {
        return STATUS_INVALID_PARAMETER;
    };
    if out.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    let bridge = Arc::new(ListenerBridge {
        object: SpinLock::new(Weak::new()),
        adapter: adapter.arc(),
        callback,
        context: event_context as usize,
    });
    let rnic = match rcm::Listener::new(
        adapter.inner.addresses(),
        Arc::clone(&bridge) as Arc<dyn ListenerEvents>,
    ) {
        Ok(rnic) => rnic,
        Err(error) => return status(error),
    };
    let parents: Parents = [Some(adapter.arc() as Arc<dyn Holder>), None, None, None];
    let Some(object) = Object::create(adapter.header().version, Listener { rnic }, parents) else {
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    *bridge.object.lock() = Arc::downgrade(&object);
    // SAFETY: `out` is the consumer's out-pointer (checked non-null).
    unsafe { write_out(out.cast(), object.as_ptr()) }
}

/// `NdkListen` (N3, N31): inline. `STATUS_SHARING_VIOLATION`,
/// `STATUS_INVALID_ADDRESS`, `STATUS_TOO_MANY_ADDRESSES`,
/// `STATUS_INSUFFICIENT_RESOURCES`; `STATUS_INVALID_DEVICE_REQUEST` when
/// already listening.
unsafe fn listen(
    listener: &Object<Listener>,
    address: *const SockAddr,
    length: u32,
    _completion: Option<NdkFnRequestCompletion>,
    _context: *mut c_void,
) -> NtStatus {
    // SAFETY: the consumer's address covers its length (N2).
    let local = match unsafe { read_address(address, length) } {
        Ok(local) => local,
        Err(status) => return status,
    };
    match listener.inner.rnic.listen(local) {
        Ok(_) => STATUS_SUCCESS,
        Err(error) => status(error),
    }
}

/// `NdkGetListenerLocalAddress` (N3, N22): the port chosen for port 0.
unsafe fn get_listener_address(
    listener: &Object<Listener>,
    address: *mut SockAddr,
    length: *mut u32,
) -> NtStatus {
    match listener.inner.rnic.local() {
        // SAFETY: the consumer's buffer and in/out length.
        Some(endpoint) => unsafe { write_address(endpoint, address, length) },
        None => STATUS_INVALID_DEVICE_REQUEST,
    }
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

impl Kind for SharedEndpoint {
    const TYPE: NdkObjectType = NdkObjectType::SHARED_ENDPOINT;
    fn begin_close(object: &Object<Self>) {
        // N10: the endpoint's own reference goes; connectors connected
        // through it keep the address in use, and (as successors) the close
        // pending, until they close.
        object.inner.rnic.close();
    }
}

ndk_table! {
    /// The dispatch table of every object of this type.
    static ENDPOINT_DISPATCH: NdkSharedEndpointDispatch for SharedEndpoint at NdkSharedEndpoint,
        close ndk_close_shared_endpoint = "NdkCloseSharedEndpoint";
    ndk_get_local_address = "NdkGetLocalAddress" => get_endpoint_address(
        address: *mut SockAddr,
        length: *mut u32,
    ) -> NtStatus;
}

/// `NdkCreateSharedEndpoint` (N9, L7: inline): fails like Listen (N3).
pub(super) unsafe fn create_shared_endpoint(
    adapter: &Object<Adapter>,
    address: *const SockAddr,
    address_length: u32,
    _completion: Option<NdkFnCreateCompletion>,
    _context: *mut c_void,
    out: *mut *mut NdkSharedEndpoint,
) -> NtStatus {
    if out.is_null() {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the consumer's address covers its length (N2).
    let local = match unsafe { read_address(address, address_length) } {
        Ok(local) => local,
        Err(status) => return status,
    };
    let rnic = match rcm::SharedEndpoint::new(adapter.inner.addresses(), local) {
        Ok(rnic) => rnic,
        Err(error) => return status(error),
    };
    let parents: Parents = [Some(adapter.arc() as Arc<dyn Holder>), None, None, None];
    let Some(object) = Object::create(adapter.header().version, SharedEndpoint { rnic }, parents)
    else {
        return STATUS_INSUFFICIENT_RESOURCES;
    };
    // SAFETY: `out` is the consumer's out-pointer (checked non-null).
    unsafe { write_out(out.cast(), object.as_ptr()) }
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
mod tests {
    //! A consumer driving the C dispatch tables, adapters opened through
    //! `SoftNdkOpenAdapter`. Every test uses its own addresses (127.1.T.x),
    //! since all tests share the process's fabric.

    use alloc::vec;
    use alloc::vec::Vec;
    use core::ptr::{null, null_mut};
    use std::sync::Mutex;

    use super::*;
    use crate::abi::{
        NdkAdapter, NdkAdapterDispatch, NdkCq, NdkCqDispatch, NdkFnCloseObject, NdkPd,
        NdkPdDispatch, NdkQpDispatch, NdkResult, NdkSge, STATUS_CANCELLED,
    };
    use crate::provider::host::{SoftNdkCloseAdapter, SoftNdkOpenAdapter};

    // ----- callbacks -------------------------------------------------------

    /// What a callback context saw: statuses of request completions, and
    /// markers for close completions and disconnect indications.
    #[derive(Default)]
    struct Log(Mutex<Vec<NtStatus>>);

    const CLOSED: NtStatus = 0x0C10_5ED0;
    const INDICATED: NtStatus = 0x0D15_C000;

    impl Log {
        fn ctx(&self) -> *mut c_void {
            core::ptr::from_ref(self).cast_mut().cast()
        }
        fn take(&self) -> Vec<NtStatus> {
            core::mem::take(&mut *self.0.lock().unwrap())
        }
        fn push(ctx: *mut c_void, status: NtStatus) {
            // SAFETY: every context the tests pass is a `Log` that outlives
            // the objects whose callbacks use it.
            let log = unsafe { &*ctx.cast::<Self>() };
            log.0.lock().unwrap().push(status);
        }
    }

    unsafe extern "system" fn on_request(ctx: *mut c_void, status: NtStatus) {
        Log::push(ctx, status);
    }

    unsafe extern "system" fn on_close(ctx: *mut c_void) {
        Log::push(ctx, CLOSED);
    }

    unsafe extern "system" fn on_indication(ctx: *mut c_void) {
        Log::push(ctx, INDICATED);
    }

    unsafe extern "system" fn on_cq(_ctx: *mut c_void, _status: NtStatus) {}

    /// Connectors handed over by connect events.
    #[derive(Default)]
    struct Requests(Mutex<Vec<usize>>);

    impl Requests {
        fn ctx(&self) -> *mut c_void {
            core::ptr::from_ref(self).cast_mut().cast()
        }
        fn next(&self) -> Option<Conn> {
            let mut queue = self.0.lock().unwrap();
            (!queue.is_empty()).then(|| Conn(queue.remove(0) as *mut NdkConnector))
        }
    }

    unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
        // SAFETY: the context is a `Requests` that outlives its listener.
        let requests = unsafe { &*ctx.cast::<Requests>() };
        requests.0.lock().unwrap().push(connector as usize);
    }

    // ----- addresses -------------------------------------------------------

    #[derive(Clone, Copy)]
    enum Addr {
        V4(SockAddrIn),
        V6(SockAddrIn6),
    }

    fn v4(ip: [u8; 4], port: u16) -> Addr {
        Addr::V4(SockAddrIn {
            sin_family: AF_INET,
            sin_port: port.to_be(),
            sin_addr: InAddr { bytes: ip },
            sin_zero: [0; 8],
        })
    }

    fn v6(ip: [u8; 16], port: u16) -> Addr {
        Addr::V6(SockAddrIn6 {
            sin6_family: AF_INET6,
            sin6_port: port.to_be(),
            sin6_flowinfo: 0,
            sin6_addr: In6Addr { bytes: ip },
            sin6_scope_id: 0,
        })
    }

    impl Addr {
        fn raw(&self) -> (*const SockAddr, u32) {
            match self {
                Self::V4(a) => (core::ptr::from_ref(a).cast(), SOCKADDR_IN_LEN),
                Self::V6(a) => (core::ptr::from_ref(a).cast(), SOCKADDR_IN6_LEN),
            }
        }
    }

    /// Test `t`'s address number `n`.
    const fn ip(t: u8, n: u8) -> [u8; 4] {
        [127, 1, t, n]
    }

    /// Reads an address a getter wrote.
    fn parse(buffer: &[u8; 28]) -> Endpoint {
        // SAFETY: a 28-byte buffer holds either structure.
        unsafe { read_address(buffer.as_ptr().cast(), 28) }.unwrap()
    }

    // ----- objects ---------------------------------------------------------

    /// The dispatch table of any NDK object: its pointer is at 0x28 (§3.8).
    #[expect(clippy::cast_ptr_alignment, reason = "read with read_unaligned")]
    fn table<T>(object: *const c_void) -> &'static T {
        let slot = object.cast::<u8>().wrapping_add(0x28).cast::<*const T>();
        // SAFETY: a live NDK object of the test; its Dispatch field is at 0x28.
        let table = unsafe { slot.read_unaligned() };
        // SAFETY: the provider's dispatch tables are statics.
        unsafe { &*table }
    }

    /// Closes any object through slot 0 of its table; waits for a pending
    /// close to complete.
    fn close(object: *mut c_void) {
        let log = Log::default();
        // Slot 0 of every table but the adapter's is the close function.
        let close = *table::<NdkFnCloseObject>(object);
        // SAFETY: a live object of the test, closed once.
        let status = unsafe { close(object.cast(), Some(on_close), log.ctx()) };
        if status == STATUS_PENDING {
            while log.take() != vec![CLOSED] {
                crate::kernel::deferred::flush();
                std::thread::yield_now();
            }
        } else {
            assert_eq!(status, STATUS_SUCCESS);
        }
    }

    struct Adapter(*mut NdkAdapter);

    impl Adapter {
        fn open(address: Addr) -> Self {
            let mut adapter = null_mut();
            // SAFETY: a valid address and out-pointer.
            let status = unsafe { SoftNdkOpenAdapter(address.raw().0, &raw mut adapter) };
            assert_eq!(status, STATUS_SUCCESS);
            Self(adapter)
        }

        fn d(&self) -> &NdkAdapterDispatch {
            table(self.0.cast())
        }

        fn cq(&self) -> *mut NdkCq {
            let mut cq = null_mut();
            // SAFETY: valid arguments; the out-pointer is ours.
            let status = unsafe {
                (self.d().ndk_create_cq)(
                    self.0,
                    64,
                    Some(on_cq),
                    null_mut(),
                    null(),
                    None,
                    null_mut(),
                    &raw mut cq,
                )
            };
            assert_eq!(status, STATUS_SUCCESS);
            cq
        }

        fn pd(&self) -> *mut NdkPd {
            let mut pd = null_mut();
            // SAFETY: valid arguments.
            let status = unsafe { (self.d().ndk_create_pd)(self.0, None, null_mut(), &raw mut pd) };
            assert_eq!(status, STATUS_SUCCESS);
            pd
        }

        fn connector(&self) -> Conn {
            let mut c = null_mut();
            // SAFETY: valid arguments.
            let status =
                unsafe { (self.d().ndk_create_connector)(self.0, None, null_mut(), &raw mut c) };
            assert_eq!(status, STATUS_SUCCESS);
            Conn(c)
        }

        fn listener(&self, requests: &Requests) -> Listen {
            let mut l = null_mut();
            // SAFETY: valid arguments; `requests` outlives the listener.
            let status = unsafe {
                (self.d().ndk_create_listener)(
                    self.0,
                    Some(on_connect),
                    requests.ctx(),
                    None,
                    null_mut(),
                    &raw mut l,
                )
            };
            assert_eq!(status, STATUS_SUCCESS);
            Listen(l)
        }

        fn endpoint(&self, address: Addr) -> Result<*mut NdkSharedEndpoint, NtStatus> {
            let (a, n) = address.raw();
            let mut e = null_mut();
            // SAFETY: valid arguments.
            let status = unsafe {
                (self.d().ndk_create_shared_endpoint)(self.0, a, n, None, null_mut(), &raw mut e)
            };
            if status == STATUS_SUCCESS {
                Ok(e)
            } else {
                Err(status)
            }
        }

        fn close(self) {
            // SAFETY: an adapter of ours, every object closed.
            assert_eq!(unsafe { SoftNdkCloseAdapter(self.0) }, STATUS_SUCCESS);
        }
    }

    /// A QP with its CQ and PD.
    struct Side {
        cq: *mut NdkCq,
        pd: *mut NdkPd,
        qp: *mut NdkQp,
    }

    impl Side {
        fn new(adapter: &Adapter) -> Self {
            let cq = adapter.cq();
            let pd = adapter.pd();
            let mut qp = null_mut();
            let d: &NdkPdDispatch = table(pd.cast());
            // SAFETY: valid arguments.
            let status = unsafe {
                (d.ndk_create_qp)(
                    pd,
                    cq,
                    cq,
                    null_mut(),
                    16,
                    16,
                    2,
                    2,
                    64,
                    None,
                    null_mut(),
                    &raw mut qp,
                )
            };
            assert_eq!(status, STATUS_SUCCESS);
            Self { cq, pd, qp }
        }

        fn qd(&self) -> &NdkQpDispatch {
            table(self.qp.cast())
        }

        fn receive(&self, context: usize) -> NtStatus {
            // SAFETY: no SGEs.
            unsafe { (self.qd().ndk_receive)(self.qp, context as *mut c_void, null::<NdkSge>(), 0) }
        }

        fn send(&self, context: usize) -> NtStatus {
            // SAFETY: no SGEs.
            unsafe { (self.qd().ndk_send)(self.qp, context as *mut c_void, null::<NdkSge>(), 0, 0) }
        }

        /// Statuses of the completions in the CQ, with their contexts.
        fn results(&self) -> Vec<(usize, NtStatus)> {
            let mut out = [NdkResult {
                status: 0,
                bytes_transferred: 0,
                qp_context: null_mut(),
                request_context: null_mut(),
            }; 16];
            let d: &NdkCqDispatch = table(self.cq.cast());
            // SAFETY: room for 16 results.
            let n = unsafe { (d.ndk_get_cq_results)(self.cq, out.as_mut_ptr(), 16) };
            out[..n as usize]
                .iter()
                .map(|r| (r.request_context as usize, r.status))
                .collect()
        }

        fn close(self) {
            close(self.qp.cast());
            close(self.pd.cast());
            close(self.cq.cast());
        }
    }

    struct Listen(*mut NdkListener);

    impl Listen {
        fn d(&self) -> &NdkListenerDispatch {
            table(self.0.cast())
        }
        fn listen(&self, address: Addr) -> NtStatus {
            let (a, n) = address.raw();
            // SAFETY: valid arguments.
            unsafe { (self.d().ndk_listen)(self.0, a, n, None, null_mut()) }
        }
        fn pause(&self, pause: bool) {
            // SAFETY: a listener of ours.
            unsafe { (self.d().ndk_control_connect_events)(self.0, u8::from(pause)) };
        }
        fn local(&self) -> (NtStatus, u32, [u8; 28]) {
            let mut buffer = [0_u8; 28];
            let mut length = 28_u32;
            // SAFETY: a 28-byte buffer.
            let status = unsafe {
                (self.d().ndk_get_local_address)(
                    self.0,
                    buffer.as_mut_ptr().cast(),
                    &raw mut length,
                )
            };
            (status, length, buffer)
        }
        fn close_pending(&self, log: &Log) -> NtStatus {
            // SAFETY: a listener of ours, closed once.
            unsafe { (self.d().ndk_close_listener)(self.0.cast(), Some(on_close), log.ctx()) }
        }
    }

    #[derive(Clone, Copy)]
    struct Conn(*mut NdkConnector);

    impl Conn {
        fn d(&self) -> &NdkConnectorDispatch {
            table(self.0.cast())
        }

        #[expect(clippy::too_many_arguments, reason = "NdkConnect's")]
        fn connect(
            &self,
            side: &Side,
            src: Addr,
            dst: Addr,
            ird: u32,
            ord: u32,
            data: &[u8],
            log: &Log,
        ) -> NtStatus {
            let (s, sn) = src.raw();
            let (d, dn) = dst.raw();
            // SAFETY: valid arguments; `log` outlives the request.
            unsafe {
                (self.d().ndk_connect)(
                    self.0,
                    side.qp,
                    s,
                    sn,
                    d,
                    dn,
                    ird,
                    ord,
                    data.as_ptr().cast(),
                    u32::try_from(data.len()).unwrap(),
                    Some(on_request),
                    log.ctx(),
                )
            }
        }

        fn connect_shared(
            &self,
            side: &Side,
            endpoint: *mut NdkSharedEndpoint,
            dst: Addr,
            log: &Log,
        ) -> NtStatus {
            let (d, dn) = dst.raw();
            // SAFETY: valid arguments.
            unsafe {
                (self.d().ndk_connect_with_shared_endpoint)(
                    self.0,
                    side.qp,
                    endpoint,
                    d,
                    dn,
                    8,
                    8,
                    null(),
                    0,
                    Some(on_request),
                    log.ctx(),
                )
            }
        }

        fn accept(
            &self,
            side: &Side,
            ird: u32,
            ord: u32,
            data: &[u8],
            indications: &Log,
            log: &Log,
        ) -> NtStatus {
            // SAFETY: valid arguments.
            unsafe {
                (self.d().ndk_accept)(
                    self.0,
                    side.qp,
                    ird,
                    ord,
                    data.as_ptr().cast(),
                    u32::try_from(data.len()).unwrap(),
                    Some(on_indication),
                    indications.ctx(),
                    Some(on_request),
                    log.ctx(),
                )
            }
        }

        fn complete(&self, indications: &Log) -> NtStatus {
            // SAFETY: valid arguments; the completion is never called.
            unsafe {
                (self.d().ndk_complete_connect)(
                    self.0,
                    Some(on_indication),
                    indications.ctx(),
                    Some(on_request),
                    null_mut(),
                )
            }
        }

        fn reject(&self, data: &[u8]) -> NtStatus {
            // SAFETY: valid arguments.
            unsafe {
                (self.d().ndk_reject)(
                    self.0,
                    data.as_ptr().cast(),
                    u32::try_from(data.len()).unwrap(),
                )
            }
        }

        /// GetConnectionData with a buffer of `capacity` bytes (`None`: NULL).
        fn data(&self, capacity: Option<u32>) -> (NtStatus, u32, (u32, u32), Vec<u8>) {
            let mut buffer = vec![0_u8; capacity.unwrap_or(0) as usize];
            let mut length = capacity.unwrap_or(0);
            let (mut ird, mut ord) = (0, 0);
            let ptr = if capacity.is_some() {
                buffer.as_mut_ptr().cast()
            } else {
                null_mut()
            };
            // SAFETY: the buffer holds `length` bytes.
            let status = unsafe {
                (self.d().ndk_get_connection_data)(
                    self.0,
                    &raw mut ird,
                    &raw mut ord,
                    ptr,
                    &raw mut length,
                )
            };
            let kept = (length as usize).min(buffer.len());
            buffer.truncate(kept);
            (status, length, (ird, ord), buffer)
        }

        fn address(&self, peer: bool, capacity: u32) -> (NtStatus, u32, [u8; 28]) {
            let mut buffer = [0_u8; 28];
            let mut length = capacity;
            let f = if peer {
                self.d().ndk_get_peer_address
            } else {
                self.d().ndk_get_local_address
            };
            // SAFETY: the buffer holds 28 >= `capacity` bytes.
            let status = unsafe { f(self.0, buffer.as_mut_ptr().cast(), &raw mut length) };
            (status, length, buffer)
        }

        fn disconnect(&self, log: &Log) -> NtStatus {
            // SAFETY: valid arguments.
            unsafe { (self.d().ndk_disconnect)(self.0, Some(on_request), log.ctx()) }
        }

        fn close(self) {
            close(self.0.cast());
        }
    }

    /// Waits until `log` holds `n` entries (deferred work may produce them).
    fn wait(log: &Log, n: usize) -> Vec<NtStatus> {
        for _ in 0..10_000 {
            if log.0.lock().unwrap().len() >= n {
                break;
            }
            crate::kernel::deferred::flush();
            std::thread::yield_now();
        }
        log.take()
    }

    /// An established connection from `a` to a listener of `b` on `port`.
    struct Established {
        listener: Listen,
        active: Conn,
        passive: Conn,
        a: Side,
        b: Side,
        /// Disconnect indications of the active and the passive side.
        ind_a: Box<Log>,
        ind_b: Box<Log>,
        _requests: Box<Requests>,
    }

    fn establish(a: &Adapter, b: &Adapter, src: Addr, dst: Addr) -> Established {
        let requests = Box::new(Requests::default());
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(dst), STATUS_SUCCESS);
        let (sa, sb) = (Side::new(a), Side::new(b));
        let (ind_a, ind_b) = (Box::new(Log::default()), Box::new(Log::default()));
        let (la, lb) = (Log::default(), Log::default());
        let active = a.connector();
        assert_eq!(
            active.connect(&sa, src, dst, 8, 8, b"", &la),
            STATUS_PENDING
        );
        let passive = requests.next().expect("connect event");
        assert_eq!(passive.accept(&sb, 8, 8, b"", &ind_b, &lb), STATUS_PENDING);
        assert_eq!(la.take(), vec![STATUS_SUCCESS]);
        assert_eq!(active.complete(&ind_a), STATUS_SUCCESS);
        assert_eq!(lb.take(), vec![STATUS_SUCCESS]);
        Established {
            listener,
            active,
            passive,
            a: sa,
            b: sb,
            ind_a,
            ind_b,
            _requests: requests,
        }
    }

    impl Established {
        fn close(self) {
            self.active.close();
            self.passive.close();
            close(self.listener.0.cast());
            self.a.close();
            self.b.close();
        }
    }

    // ----- establishment -----------------------------------------------------

    #[test]
    fn test_connect_accept_complete_with_private_data_rule_n13_n15_n18() {
        let (a, b) = (
            Adapter::open(v4(ip(1, 1), 0)),
            Adapter::open(v4(ip(1, 2), 0)),
        );
        let requests = Requests::default();
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(v4(ip(1, 2), 445)), STATUS_SUCCESS);
        let (sa, sb) = (Side::new(&a), Side::new(&b));
        let (la, lb, ia, ib) = (
            Log::default(),
            Log::default(),
            Log::default(),
            Log::default(),
        );
        let active = a.connector();
        assert_eq!(
            active.connect(
                &sa,
                v4(ip(1, 1), 0),
                v4(ip(1, 2), 445),
                4,
                4,
                b"caller",
                &la
            ),
            STATUS_PENDING
        );
        let passive = requests.next().expect("N4: one connect event");
        assert!(requests.next().is_none());
        // N18: the size query, then a short buffer, then a large one.
        assert_eq!(passive.data(None), (STATUS_SUCCESS, 6, (4, 4), vec![]));
        assert_eq!(
            passive.data(Some(3)),
            (STATUS_BUFFER_TOO_SMALL, 6, (4, 4), b"cal".to_vec())
        );
        assert_eq!(passive.data(Some(64)).3, b"caller");
        assert_eq!(passive.data(Some(64)).0, STATUS_SUCCESS);
        assert_eq!(
            passive.accept(&sb, 4, 4, b"callee!", &ib, &lb),
            STATUS_PENDING
        );
        // N13: the active Connect completes once accepted.
        assert_eq!(la.take(), vec![STATUS_SUCCESS]);
        assert!(
            lb.take().is_empty(),
            "N15: Accept waits for CompleteConnect"
        );
        assert_eq!(
            active.data(Some(7)),
            (STATUS_SUCCESS, 7, (4, 4), b"callee!".to_vec())
        );
        assert_eq!(active.complete(&ia), STATUS_SUCCESS);
        assert_eq!(lb.take(), vec![STATUS_SUCCESS]);
        // The connection carries traffic.
        assert_eq!(sb.receive(1), STATUS_SUCCESS);
        assert_eq!(sa.send(2), STATUS_SUCCESS);
        assert_eq!(sa.results(), vec![(2, STATUS_SUCCESS)]);
        assert_eq!(sb.results(), vec![(1, STATUS_SUCCESS)]);
        // N14: CompleteConnect again: not connecting.
        assert_eq!(active.complete(&ia), STATUS_CONNECTION_INVALID);
        active.close();
        passive.close();
        close(listener.0.cast());
        sa.close();
        sb.close();
        a.close();
        b.close();
    }

    /// What the accepting connect-event callback needs.
    struct AutoAccept {
        qp: usize,
        accepted: Log,
        indications: Log,
        connectors: Mutex<Vec<usize>>,
    }

    unsafe extern "system" fn accept_at_once(ctx: *mut c_void, connector: *mut NdkConnector) {
        // SAFETY: the context is an `AutoAccept` that outlives the listener.
        let auto = unsafe { &*ctx.cast::<AutoAccept>() };
        auto.connectors.lock().unwrap().push(connector as usize);
        let conn = Conn(connector);
        let side = Side {
            cq: null_mut(),
            pd: null_mut(),
            qp: auto.qp as *mut NdkQp,
        };
        let status = conn.accept(&side, 1, 1, b"at once", &auto.indications, &auto.accepted);
        assert_eq!(status, STATUS_PENDING);
    }

    #[test]
    fn test_accept_inside_connect_event_rule_l15_i3() {
        let (a, b) = (
            Adapter::open(v4(ip(16, 1), 0)),
            Adapter::open(v4(ip(16, 2), 0)),
        );
        let (sa, sb) = (Side::new(&a), Side::new(&b));
        let auto = AutoAccept {
            qp: sb.qp as usize,
            accepted: Log::default(),
            indications: Log::default(),
            connectors: Mutex::new(Vec::new()),
        };
        let mut l = null_mut();
        // SAFETY: valid arguments; `auto` outlives the listener.
        let status = unsafe {
            (b.d().ndk_create_listener)(
                b.0,
                Some(accept_at_once),
                core::ptr::from_ref(&auto).cast_mut().cast(),
                None,
                null_mut(),
                &raw mut l,
            )
        };
        assert_eq!(status, STATUS_SUCCESS);
        let listener = Listen(l);
        assert_eq!(listener.listen(v4(ip(16, 2), 1)), STATUS_SUCCESS);
        let (la, ia) = (Log::default(), Log::default());
        let c = a.connector();
        // The request is accepted inside the connect event, inside Connect:
        // the completion has run before Connect returns, which still says
        // STATUS_PENDING (L8, L15).
        assert_eq!(
            c.connect(&sa, v4(ip(16, 1), 0), v4(ip(16, 2), 1), 1, 1, b"", &la),
            STATUS_PENDING
        );
        assert_eq!(la.take(), vec![STATUS_SUCCESS]);
        assert_eq!(c.data(Some(16)).3, b"at once");
        assert_eq!(c.complete(&ia), STATUS_SUCCESS);
        assert_eq!(auto.accepted.take(), vec![STATUS_SUCCESS]);
        c.close();
        assert_eq!(auto.indications.take(), vec![INDICATED]);
        for p in auto.connectors.lock().unwrap().drain(..) {
            Conn(p as *mut NdkConnector).close();
        }
        close(listener.0.cast());
        sa.close();
        sb.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_addresses_rule_n22() {
        let (a, b) = (
            Adapter::open(v4(ip(2, 1), 0)),
            Adapter::open(v4(ip(2, 2), 0)),
        );
        let requests = Requests::default();
        let listener = b.listener(&requests);
        assert_eq!(
            listener.local().0,
            STATUS_INVALID_DEVICE_REQUEST,
            "not listening"
        );
        // N3: port 0 picks an ephemeral port, which the getter reports.
        assert_eq!(listener.listen(v4(ip(2, 2), 0)), STATUS_SUCCESS);
        let (status, length, buffer) = listener.local();
        assert_eq!((status, length), (STATUS_SUCCESS, 16));
        let port = parse(&buffer).port;
        assert!(port >= 49152);
        let sa = Side::new(&a);
        let log = Log::default();
        let active = a.connector();
        assert_eq!(active.address(false, 28).0, STATUS_CONNECTION_INVALID);
        assert_eq!(
            active.connect(&sa, v4(ip(2, 1), 7777), v4(ip(2, 2), port), 1, 1, b"", &log),
            STATUS_PENDING
        );
        let (status, length, buffer) = active.address(false, 28);
        assert_eq!((status, length), (STATUS_SUCCESS, 16));
        assert_eq!(parse(&buffer), Endpoint::new(IpAddr::V4(ip(2, 1)), 7777));
        let (status, _, buffer) = active.address(true, 16);
        assert_eq!(status, STATUS_SUCCESS);
        assert_eq!(parse(&buffer), Endpoint::new(IpAddr::V4(ip(2, 2)), port));
        // N22: too small gives the size needed.
        assert_eq!(active.address(true, 15).0, STATUS_BUFFER_TOO_SMALL);
        assert_eq!(active.address(true, 15).1, 16);
        let passive = requests.next().unwrap();
        let (_, _, buffer) = passive.address(true, 28);
        assert_eq!(parse(&buffer), Endpoint::new(IpAddr::V4(ip(2, 1)), 7777));
        // Shared endpoint, port 0 (N9).
        let e = a.endpoint(v4(ip(2, 1), 0)).unwrap();
        let mut buffer = [0_u8; 28];
        let mut length = 28;
        let d: &NdkSharedEndpointDispatch = table(e.cast());
        // SAFETY: an endpoint of ours; a 28-byte buffer.
        let status =
            unsafe { (d.ndk_get_local_address)(e, buffer.as_mut_ptr().cast(), &raw mut length) };
        assert_eq!((status, length), (STATUS_SUCCESS, 16));
        assert!(parse(&buffer).port >= 49152);
        close(e.cast());
        active.close();
        passive.close();
        close(listener.0.cast());
        sa.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_bad_sockaddrs_rule_n2() {
        let a = Adapter::open(v4(ip(3, 1), 0));
        let requests = Requests::default();
        let listener = a.listener(&requests);
        let address = v4(ip(3, 1), 1);
        let (p, _) = address.raw();
        // SAFETY: a 16-byte address, announced shorter.
        let status = unsafe { (listener.d().ndk_listen)(listener.0, p, 15, None, null_mut()) };
        assert_eq!(status, STATUS_INVALID_PARAMETER);
        // N3: not an address of this adapter.
        assert_eq!(listener.listen(v4(ip(3, 9), 1)), STATUS_INVALID_ADDRESS);
        let mut unknown = v4(ip(3, 1), 1);
        if let Addr::V4(a) = &mut unknown {
            a.sin_family = 99;
        }
        assert_eq!(listener.listen(unknown), STATUS_INVALID_PARAMETER);
        close(listener.0.cast());
        a.close();
    }

    // ----- refusals ----------------------------------------------------------

    #[test]
    fn test_reject_both_directions_rule_n16() {
        let (a, b) = (
            Adapter::open(v4(ip(4, 1), 0)),
            Adapter::open(v4(ip(4, 2), 0)),
        );
        let requests = Requests::default();
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(v4(ip(4, 2), 1)), STATUS_SUCCESS);
        let (sa, sb) = (Side::new(&a), Side::new(&b));
        let (la, lb, ib) = (Log::default(), Log::default(), Log::default());
        // Passive side rejects: Connect fails refused.
        let c1 = a.connector();
        assert_eq!(
            c1.connect(&sa, v4(ip(4, 1), 0), v4(ip(4, 2), 1), 1, 1, b"", &la),
            STATUS_PENDING
        );
        let p1 = requests.next().unwrap();
        assert_eq!(p1.reject(b"busy"), STATUS_SUCCESS);
        assert_eq!(la.take(), vec![STATUS_CONNECTION_REFUSED]);
        // Active side rejects after Connect completed: Accept fails aborted.
        let c2 = a.connector();
        assert_eq!(
            c2.connect(&sa, v4(ip(4, 1), 0), v4(ip(4, 2), 1), 1, 1, b"", &la),
            STATUS_PENDING
        );
        let p2 = requests.next().unwrap();
        assert_eq!(p2.accept(&sb, 1, 1, b"", &ib, &lb), STATUS_PENDING);
        assert_eq!(la.take(), vec![STATUS_SUCCESS]);
        assert_eq!(c2.reject(b""), STATUS_SUCCESS);
        assert_eq!(lb.take(), vec![STATUS_CONNECTION_ABORTED]);
        // N28: both QPs untouched, reusable: connect them now.
        let c3 = a.connector();
        assert_eq!(
            c3.connect(&sa, v4(ip(4, 1), 0), v4(ip(4, 2), 1), 1, 1, b"", &la),
            STATUS_PENDING
        );
        let p3 = requests.next().unwrap();
        // The active side abandons (closes): Reject answers aborted (N16).
        c3.close();
        assert_eq!(la.take(), vec![STATUS_CANCELLED]);
        assert_eq!(p3.reject(b""), STATUS_CONNECTION_ABORTED);
        for c in [c1, c2, p1, p2, p3] {
            c.close();
        }
        close(listener.0.cast());
        sa.close();
        sb.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_refused_without_paused_or_closing_listener_rule_n5_n6_n12() {
        let (a, b) = (
            Adapter::open(v4(ip(5, 1), 0)),
            Adapter::open(v4(ip(5, 2), 0)),
        );
        let sa = Side::new(&a);
        let la = Log::default();
        let c = a.connector();
        let (src, dst) = (v4(ip(5, 1), 0), v4(ip(5, 2), 80));
        assert_eq!(
            c.connect(&sa, src, dst, 1, 1, b"", &la),
            STATUS_CONNECTION_REFUSED
        );
        let requests = Requests::default();
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(dst), STATUS_SUCCESS);
        // N5: paused is as though no listener existed.
        listener.pause(true);
        assert_eq!(
            c.connect(&sa, src, dst, 1, 1, b"", &la),
            STATUS_CONNECTION_REFUSED
        );
        listener.pause(false);
        assert_eq!(c.connect(&sa, src, dst, 1, 1, b"", &la), STATUS_PENDING);
        let passive = requests.next().unwrap();
        // N6/N7: the close pends while the connector it produced lives, and
        // turns every request away at once.
        let closing = Log::default();
        assert_eq!(listener.close_pending(&closing), STATUS_PENDING);
        let sa2 = Side::new(&a);
        let c2 = a.connector();
        assert_eq!(
            c2.connect(&sa2, src, dst, 1, 1, b"", &la),
            STATUS_CONNECTION_REFUSED
        );
        assert!(closing.take().is_empty());
        // A connector from a listener still being closed is still usable.
        assert_eq!(passive.reject(b""), STATUS_SUCCESS);
        assert_eq!(la.take(), vec![STATUS_CONNECTION_REFUSED]);
        passive.close();
        assert_eq!(
            closing.take(),
            vec![CLOSED],
            "L24: completes after its connectors"
        );
        c.close();
        c2.close();
        sa.close();
        sa2.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_duplicate_listen_and_private_data_limits_rule_n7_n17() {
        let (a, b) = (
            Adapter::open(v4(ip(6, 1), 0)),
            Adapter::open(v4(ip(6, 2), 0)),
        );
        let requests = Requests::default();
        let first = b.listener(&requests);
        let second = b.listener(&requests);
        assert_eq!(first.listen(v4(ip(6, 2), 9)), STATUS_SUCCESS);
        assert_eq!(second.listen(v4(ip(6, 2), 9)), STATUS_SHARING_VIOLATION);
        assert_eq!(
            first.listen(v4(ip(6, 2), 10)),
            STATUS_INVALID_DEVICE_REQUEST
        );
        // N17: private data above MaxCallerData / MaxCalleeData.
        let sa = Side::new(&a);
        let sb = Side::new(&b);
        let (la, lb, ib) = (Log::default(), Log::default(), Log::default());
        let c = a.connector();
        let (src, dst) = (v4(ip(6, 1), 0), v4(ip(6, 2), 9));
        assert_eq!(
            c.connect(&sa, src, dst, 1, 1, &[0; 57], &la),
            STATUS_INVALID_BUFFER_SIZE
        );
        assert_eq!(
            c.connect(&sa, src, dst, 1, 1, &[0; 56], &la),
            STATUS_PENDING
        );
        let passive = requests.next().unwrap();
        assert_eq!(
            passive.accept(&sb, 1, 1, &[0; 149], &ib, &lb),
            STATUS_INVALID_BUFFER_SIZE
        );
        assert_eq!(passive.reject(&[0; 149]), STATUS_INVALID_BUFFER_SIZE);
        assert_eq!(
            passive.accept(&sb, 1, 1, &[0; 148], &ib, &lb),
            STATUS_PENDING
        );
        assert_eq!(la.take(), vec![STATUS_SUCCESS]);
        assert_eq!(c.data(Some(200)).1, 148);
        assert_eq!(c.reject(b""), STATUS_SUCCESS);
        for x in [c, passive] {
            x.close();
        }
        close(first.0.cast());
        close(second.0.cast());
        sa.close();
        sb.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_shared_endpoint_four_tuple_rule_n10_n11() {
        let (a, b) = (
            Adapter::open(v4(ip(7, 1), 0)),
            Adapter::open(v4(ip(7, 2), 0)),
        );
        let requests = Requests::default();
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(v4(ip(7, 2), 1)), STATUS_SUCCESS);
        let e = a.endpoint(v4(ip(7, 1), 3000)).unwrap();
        assert_eq!(
            a.endpoint(v4(ip(7, 1), 3000)).err(),
            Some(STATUS_SHARING_VIOLATION)
        );
        assert_eq!(
            a.endpoint(v4(ip(7, 2), 3000)).err(),
            Some(STATUS_INVALID_ADDRESS)
        );
        let (s1, s2) = (Side::new(&a), Side::new(&a));
        let la = Log::default();
        let (c1, c2) = (a.connector(), a.connector());
        assert_eq!(
            c1.connect_shared(&s1, e, v4(ip(7, 2), 1), &la),
            STATUS_PENDING
        );
        assert_eq!(
            c2.connect_shared(&s2, e, v4(ip(7, 2), 1), &la),
            STATUS_ADDRESS_ALREADY_EXISTS
        );
        // N10: the endpoint's close pends while a connector uses it.
        let closing = Log::default();
        let d: &NdkSharedEndpointDispatch = table(e.cast());
        // SAFETY: closed once.
        let status =
            unsafe { (d.ndk_close_shared_endpoint)(e.cast(), Some(on_close), closing.ctx()) };
        assert_eq!(status, STATUS_PENDING);
        assert_eq!(
            a.endpoint(v4(ip(7, 1), 3000)).err(),
            Some(STATUS_SHARING_VIOLATION)
        );
        c1.close();
        assert_eq!(closing.take(), vec![CLOSED]);
        let again = a.endpoint(v4(ip(7, 1), 3000)).unwrap();
        close(again.cast());
        c2.close();
        while let Some(p) = requests.next() {
            p.close();
        }
        close(listener.0.cast());
        s1.close();
        s2.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_read_limits_rule_n20() {
        let (a, b) = (
            Adapter::open(v4(ip(8, 1), 0)),
            Adapter::open(v4(ip(8, 2), 0)),
        );
        let requests = Requests::default();
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(v4(ip(8, 2), 1)), STATUS_SUCCESS);
        let (sa, sb) = (Side::new(&a), Side::new(&b));
        let (la, lb, ib) = (Log::default(), Log::default(), Log::default());
        let c = a.connector();
        // 1000 is above the adapter's MaxOutboundReadLimit (128).
        assert_eq!(
            c.connect(&sa, v4(ip(8, 1), 0), v4(ip(8, 2), 1), 3, 1000, b"", &la),
            STATUS_PENDING
        );
        let p = requests.next().unwrap();
        assert_eq!(p.data(None).2, (128, 3));
        assert_eq!(p.accept(&sb, 100, 2, b"", &ib, &lb), STATUS_PENDING);
        // Effective: inbound min(3, 2), outbound min(128, 100).
        assert_eq!(c.data(None).2, (2, 100));
        c.close();
        p.close();
        close(listener.0.cast());
        sa.close();
        sb.close();
        a.close();
        b.close();
    }

    // ----- disconnect --------------------------------------------------------

    #[test]
    fn test_graceful_disconnect_both_orders_rule_x1_x2_x6() {
        let (a, b) = (
            Adapter::open(v4(ip(9, 1), 0)),
            Adapter::open(v4(ip(9, 2), 0)),
        );
        for active_first in [true, false] {
            let e = establish(&a, &b, v4(ip(9, 1), 0), v4(ip(9, 2), 1));
            let (first, second, ind_first, ind_second, side_second) = if active_first {
                (e.active, e.passive, &e.ind_a, &e.ind_b, &e.b)
            } else {
                (e.passive, e.active, &e.ind_b, &e.ind_a, &e.a)
            };
            let (l1, l2) = (Log::default(), Log::default());
            assert_eq!(side_second.receive(7), STATUS_SUCCESS);
            assert_eq!(first.disconnect(&l1), STATUS_PENDING);
            assert_eq!(ind_second.take(), vec![INDICATED], "X2");
            // X1 (a): pending until the peer's graceful disconnect arrives;
            // N24: the indication flushed nothing on the other side.
            std::thread::sleep(std::time::Duration::from_millis(10));
            assert!(l1.take().is_empty());
            assert!(side_second.results().is_empty());
            assert_eq!(second.disconnect(&l2), STATUS_PENDING);
            assert_eq!(wait(&l2, 1), vec![STATUS_SUCCESS]);
            assert_eq!(wait(&l1, 1), vec![STATUS_SUCCESS]);
            // X6: the connection is gone for both sides, the receive flushed.
            assert_eq!(side_second.results(), vec![(7, STATUS_CANCELLED)]);
            assert_eq!(side_second.send(1), STATUS_CONNECTION_INVALID);
            assert!(
                ind_first.take().is_empty(),
                "X2: not after its own Disconnect"
            );
            // X5: no second disconnect, no reuse.
            assert_eq!(first.disconnect(&l1), STATUS_CONNECTION_INVALID);
            let dst = v4(ip(9, 2), 1);
            assert_eq!(
                first.connect(&e.a, v4(ip(9, 1), 0), dst, 1, 1, b"", &l1),
                STATUS_CONNECTION_INVALID
            );
            let fresh = a.connector();
            assert_eq!(
                fresh.connect(&e.a, v4(ip(9, 1), 0), dst, 1, 1, b"", &l1),
                STATUS_CONNECTION_INVALID
            );
            fresh.close();
            Established {
                active: first,
                passive: second,
                ..e
            }
            .close();
        }
        a.close();
        b.close();
    }

    #[test]
    fn test_simultaneous_disconnect_rule_x3() {
        let (a, b) = (
            Adapter::open(v4(ip(10, 1), 0)),
            Adapter::open(v4(ip(10, 2), 0)),
        );
        for _ in 0..20 {
            let e = establish(&a, &b, v4(ip(10, 1), 0), v4(ip(10, 2), 1));
            let (l1, l2) = (Log::default(), Log::default());
            let (active, passive) = (e.active.0 as usize, e.passive.0 as usize);
            let (c1, c2) = (l1.ctx() as usize, l2.ctx() as usize);
            let barrier = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    let conn = Conn(active as *mut NdkConnector);
                    // SAFETY: the Log behind `c1` lives until the scope ends.
                    let log = unsafe { &*(c1 as *const Log) };
                    assert_eq!(conn.disconnect(log), STATUS_PENDING);
                });
                barrier.wait();
                let conn = Conn(passive as *mut NdkConnector);
                // SAFETY: as above.
                let log = unsafe { &*(c2 as *const Log) };
                assert_eq!(conn.disconnect(log), STATUS_PENDING);
            });
            assert_eq!(wait(&l1, 1), vec![STATUS_SUCCESS]);
            assert_eq!(wait(&l2, 1), vec![STATUS_SUCCESS]);
            assert!(e.ind_a.take().len() <= 1);
            assert!(e.ind_b.take().len() <= 1);
            e.close();
        }
        a.close();
        b.close();
    }

    #[test]
    fn test_disconnect_with_outstanding_work_rule_x7() {
        let (a, b) = (
            Adapter::open(v4(ip(11, 1), 0)),
            Adapter::open(v4(ip(11, 2), 0)),
        );
        let e = establish(&a, &b, v4(ip(11, 1), 0), v4(ip(11, 2), 1));
        // A receive, and a Send the peer has no receive for: both wait.
        assert_eq!(e.a.receive(5), STATUS_SUCCESS);
        assert_eq!(e.a.send(6), STATUS_SUCCESS);
        assert!(e.a.results().is_empty());
        let (la, lb) = (Log::default(), Log::default());
        assert_eq!(e.active.disconnect(&la), STATUS_PENDING);
        assert_eq!(e.ind_b.take(), vec![INDICATED]);
        assert_eq!(e.passive.disconnect(&lb), STATUS_PENDING);
        assert_eq!(wait(&la, 1), vec![STATUS_SUCCESS]);
        assert_eq!(wait(&lb, 1), vec![STATUS_SUCCESS]);
        let mut results = e.a.results();
        results.sort_unstable();
        assert_eq!(results, vec![(5, STATUS_CANCELLED), (6, STATUS_CANCELLED)]);
        assert!(e.b.results().is_empty(), "the Send never reached B");
        e.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_close_connected_connector_is_graceful_disconnect() {
        let (a, b) = (
            Adapter::open(v4(ip(12, 1), 0)),
            Adapter::open(v4(ip(12, 2), 0)),
        );
        let e = establish(&a, &b, v4(ip(12, 1), 0), v4(ip(12, 2), 1));
        e.active.close();
        assert_eq!(e.ind_b.take(), vec![INDICATED]);
        let log = Log::default();
        assert_eq!(e.passive.disconnect(&log), STATUS_PENDING);
        assert_eq!(wait(&log, 1), vec![STATUS_SUCCESS]);
        e.passive.close();
        close(e.listener.0.cast());
        e.a.close();
        e.b.close();
        a.close();
        b.close();
    }

    // ----- addresses, loopback, openings ---------------------------------------

    #[test]
    fn test_ipv6_connection_rule_n1() {
        let mut first = [0_u8; 16];
        first[0] = 0xfd;
        first[14] = 13;
        let mut second = first;
        first[15] = 1;
        second[15] = 2;
        let (a, b) = (Adapter::open(v6(first, 0)), Adapter::open(v6(second, 0)));
        let e = establish(&a, &b, v6(first, 0), v6(second, 4791));
        let (status, length, buffer) = e.active.address(true, 28);
        assert_eq!((status, length), (STATUS_SUCCESS, 28));
        assert_eq!(parse(&buffer), Endpoint::new(IpAddr::V6(second), 4791));
        assert_eq!(e.active.address(true, 16).0, STATUS_BUFFER_TOO_SMALL);
        e.close();
        a.close();
        b.close();
    }

    #[test]
    fn test_loopback_on_one_adapter_rule_n27() {
        let a = Adapter::open(v4(ip(14, 1), 0));
        let e = establish(&a, &a, v4(ip(14, 1), 0), v4(ip(14, 1), 1));
        assert_eq!(e.b.receive(1), STATUS_SUCCESS);
        assert_eq!(e.a.send(2), STATUS_SUCCESS);
        assert_eq!(e.b.results(), vec![(1, STATUS_SUCCESS)]);
        e.close();
        a.close();
    }

    #[test]
    fn test_two_opens_of_one_address_work_together_rule_n32() {
        let first = Adapter::open(v4(ip(15, 1), 0));
        let second = Adapter::open(v4(ip(15, 1), 0));
        let peer = Adapter::open(v4(ip(15, 2), 0));
        // Listener on the first opening, the accepting QP on the second.
        let requests = Requests::default();
        let listener = first.listener(&requests);
        assert_eq!(listener.listen(v4(ip(15, 1), 1)), STATUS_SUCCESS);
        let (sp, s2) = (Side::new(&peer), Side::new(&second));
        let (lp, l2, i2) = (Log::default(), Log::default(), Log::default());
        let c = peer.connector();
        assert_eq!(
            c.connect(&sp, v4(ip(15, 2), 0), v4(ip(15, 1), 1), 1, 1, b"", &lp),
            STATUS_PENDING
        );
        let p = requests.next().unwrap();
        assert_eq!(p.accept(&s2, 1, 1, b"", &i2, &l2), STATUS_PENDING);
        assert_eq!(c.complete(&i2), STATUS_SUCCESS);
        assert_eq!(l2.take(), vec![STATUS_SUCCESS]);
        // The second opening cannot listen on the port the first holds.
        let other = second.listener(&requests);
        assert_eq!(other.listen(v4(ip(15, 1), 1)), STATUS_SHARING_VIOLATION);
        close(other.0.cast());
        c.close();
        p.close();
        close(listener.0.cast());
        sp.close();
        s2.close();
        first.close();
        // The device lives on with the second opening.
        let third = Adapter::open(v4(ip(15, 1), 0));
        third.close();
        second.close();
        peer.close();
    }

    #[test]
    fn test_open_rejects_bad_addresses() {
        let mut adapter = null_mut();
        let wildcard = v4([0; 4], 0);
        let (p, _) = wildcard.raw();
        // SAFETY: valid pointers.
        let status = unsafe { SoftNdkOpenAdapter(p, &raw mut adapter) };
        assert_eq!(status, STATUS_INVALID_ADDRESS);
        // SAFETY: a null address is refused before any use.
        let status = unsafe { SoftNdkOpenAdapter(null(), &raw mut adapter) };
        assert_eq!(status, STATUS_INVALID_PARAMETER);
        // SAFETY: a null adapter is refused before any use.
        let status = unsafe { SoftNdkCloseAdapter(null_mut()) };
        assert_eq!(status, STATUS_INVALID_PARAMETER);
    }
}
