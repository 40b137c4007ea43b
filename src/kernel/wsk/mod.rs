//! Kernel TCP byte streams over Winsock Kernel (WSK), for the iWARP data
//! path in the driver (issue 9, item 2). The host's equivalent is
//! `kernel::net` (std sockets).
//!
//! * [`WskClient`]: the captured provider NPI. In the kernel,
//!   `Registration::register` (PASSIVE_LEVEL) registers the client and
//!   `Registration::capture` captures the provider; with `WSK_NO_WAIT`
//!   it answers `STATUS_DEVICE_NOT_READY` at once while WSK is not up (boot),
//!   so `DriverEntry` never blocks on it. On the host the tests build a
//!   client over their own provider dispatch table ([`WskClient::from_npi`]).
//! * [`listen`]: a listening socket on a local address, created, given its
//!   events (`WSK_EVENT_ACCEPT`, plus receive and disconnect, which the
//!   accepted sockets inherit) and bound; each accepted connection is handed
//!   to [`ListenEvents::accepted`], which gives the events the new stream
//!   reports to (or refuses it).
//! * [`connect`]: `WskSocketConnect` (create, bind the local address and
//!   connect in one request); the outcome goes to [`ConnectEvents`], a
//!   failure mapped to [`ConnectError`].
//! * [`WskStream`]: a connected socket with the methods of the iWARP link's
//!   `ByteStream` (`rnic::iwarp::link`; the impl belongs to the layer that
//!   joins the two, `kernel` naming no layer above it). `send` copies into
//!   a ring buffer allocated with the stream and described by one MDL, and
//!   one `WskSend` at a time carries the oldest contiguous bytes; when the
//!   ring is full `send` takes what fits and [`StreamEvents::writable`]
//!   follows the next completion that makes room. `close(false)` disconnects
//!   gracefully once the ring has drained; `close(true)` drops what is queued
//!   and disconnects with `WSK_FLAG_ABORTIVE` (a reset). Either way
//!   `WskCloseSocket` follows the disconnect, and the stream's last
//!   reference held by the socket goes when that completes. Received data
//!   arrives by `WskReceiveEvent`: every indication's MDL chain is walked in
//!   order and each mapped span handed to [`StreamEvents::received`]; the
//!   peer's disconnect (`WskDisconnectEvent`) becomes
//!   [`StreamEvents::closed`] (`abortive` for a reset), reported once.
//!
//! # IRQL (what runs where)
//! * `Registration::register`, `Registration::capture` with a wait, and
//!   dropping the last `Registration` (`WskDeregister`, which waits for every
//!   socket to be closed): PASSIVE_LEVEL.
//! * [`listen`], [`connect`], `send`, `close`, [`WskListener::close`]:
//!   ≤ DISPATCH_LEVEL (they allocate nothing but at creation, from non-paged
//!   pool, and call WSK routines that allow DISPATCH_LEVEL).
//! * Every WSK event callback and IRP completion routine runs at
//!   ≤ DISPATCH_LEVEL, in an arbitrary thread: so do the [`StreamEvents`],
//!   [`ListenEvents`] and [`ConnectEvents`] callbacks, which are called with
//!   no lock of this module held and must not block.
//!
//! # Lifetime
//! A socket holds one strong reference to its object (stream or listener),
//! given to WSK as the socket context and released when `WskCloseSocket`
//! completes, after which WSK calls nothing more on it. So the owner must
//! `close` every stream and listener (halt does) — an object never closed
//! keeps its socket, and `WskDeregister` waits for it.
//!
//! `unsafe` here is the FFI with the provider; each block says why it holds.

pub mod dgram;
#[cfg(test)]
mod dgram_tests;
#[cfg(test)]
pub(crate) mod fake;
mod irp;
mod net;
#[cfg(test)]
mod net_tests;
mod setup;
#[cfg(target_os = "windows")]
mod sys;
#[cfg(test)]
mod tests;

use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::abi::{
    AF_INET, AF_INET6, Guid, IPPROTO_TCP, In6Addr, InAddr, Irp, NPI_WSK_INTERFACE_ID, NtStatus,
    PfnWskBind, SO_WSK_EVENT_CALLBACK, SOCK_STREAM, SOL_SOCKET, STATUS_CONNECTION_REFUSED,
    STATUS_HOST_UNREACHABLE, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_PARAMETER,
    STATUS_IO_TIMEOUT, STATUS_MORE_PROCESSING_REQUIRED, STATUS_NETWORK_UNREACHABLE,
    STATUS_REQUEST_NOT_ACCEPTED, STATUS_SUCCESS, SockAddr, SockAddrIn, SockAddrIn6, SockAddrInet,
    WSK_EVENT_ACCEPT, WSK_EVENT_DISCONNECT, WSK_EVENT_RECEIVE, WSK_FLAG_ABORTIVE,
    WSK_FLAG_LISTEN_SOCKET, WSK_SET_OPTION, WskBuf, WskClientConnectionDispatch,
    WskClientListenDispatch, WskDataIndication, WskEventCallbackControl, WskProviderBasicDispatch,
    WskProviderConnectionDispatch, WskProviderDispatch, WskProviderListenDispatch, WskProviderNpi,
    WskSocket,
};
use crate::kernel::mdl::{MAX_CHAIN, system_span};
use crate::kernel::sync::SpinLock;
pub use dgram::{Datagram, DatagramEvents, SendSlot, WskDatagram};
use irp::{BufferMdl, OwnedIrp, PoolBytes, outcome};
#[cfg(target_os = "windows")]
pub use net::RegistrationSource;
pub use net::{WskNet, WskSource};

/// What a stream reports to its user: the platform-neutral events of
/// [`super::tcp`], as the host's streams report them.
pub use super::tcp::StreamEvents;

/// What a listener reports.
pub trait ListenEvents: Send + Sync {
    /// A connection was accepted on `local` from `remote`: the events the new
    /// stream reports to, or `None` to refuse it (the provider closes it).
    /// Data may be reported as soon as this returns.
    fn accepted(
        &self,
        stream: &Arc<WskStream>,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<Arc<dyn StreamEvents>>;
    /// The listener is bound and accepting (`Ok`), or could not be set up.
    /// Called once, before any `accepted`.
    fn ready(&self, result: Result<(), NtStatus>);
}

/// The outcome of [`connect`].
pub trait ConnectEvents: Send + Sync {
    /// Connected, or not. Called once. On success the returned events are
    /// what the stream reports to from then on (its receive and disconnect
    /// events are enabled after this returns, so nothing is missed); `None`
    /// resets it.
    fn connected(
        &self,
        result: Result<Arc<WskStream>, ConnectError>,
    ) -> Option<Arc<dyn StreamEvents>>;
}

/// Why a connection could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// The peer answered with a reset (`STATUS_CONNECTION_REFUSED`).
    Refused,
    /// No route to the host or network (`STATUS_HOST_UNREACHABLE`,
    /// `STATUS_NETWORK_UNREACHABLE`).
    Unreachable,
    /// No answer (`STATUS_IO_TIMEOUT`).
    TimedOut,
    /// Anything else, with the provider's status.
    Other(NtStatus),
}

impl ConnectError {
    /// The error a failed connect's status means.
    pub fn from_status(status: NtStatus) -> Self {
        match status {
            STATUS_CONNECTION_REFUSED => Self::Refused,
            STATUS_HOST_UNREACHABLE | STATUS_NETWORK_UNREACHABLE => Self::Unreachable,
            STATUS_IO_TIMEOUT => Self::TimedOut,
            other => Self::Other(other),
        }
    }
}

// --- Addresses -----------------------------------------------------------------

/// `addr` as a `SOCKADDR_IN` / `SOCKADDR_IN6` (in a `SOCKADDR_INET`).
pub fn to_sockaddr(addr: SocketAddr) -> SockAddrInet {
    match addr {
        SocketAddr::V4(v4) => SockAddrInet {
            ipv4: SockAddrIn {
                sin_family: AF_INET,
                sin_port: v4.port().to_be(),
                sin_addr: InAddr {
                    bytes: v4.ip().octets(),
                },
                sin_zero: [0; 8],
            },
        },
        SocketAddr::V6(v6) => SockAddrInet {
            ipv6: SockAddrIn6 {
                sin6_family: AF_INET6,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo().to_be(),
                sin6_addr: In6Addr {
                    bytes: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            },
        },
    }
}

/// The address a `SOCKADDR` of family `AF_INET` or `AF_INET6` holds.
///
/// # Safety
/// `addr` is null or points to a `SOCKADDR_IN` or `SOCKADDR_IN6` as its
/// family says.
pub unsafe fn from_sockaddr(addr: *const SockAddr) -> Option<SocketAddr> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: non-null and valid (caller contract); the family is the first
    // field of every socket address.
    let family = unsafe { (*addr).sa_family };
    match family {
        AF_INET => {
            // SAFETY: the family says it is a SOCKADDR_IN (caller contract).
            let v4 = unsafe { addr.cast::<SockAddrIn>().read_unaligned() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(v4.sin_addr.bytes),
                u16::from_be(v4.sin_port),
            )))
        }
        AF_INET6 => {
            // SAFETY: the family says it is a SOCKADDR_IN6 (caller contract).
            let v6 = unsafe { addr.cast::<SockAddrIn6>().read_unaligned() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(v6.sin6_addr.bytes),
                u16::from_be(v6.sin6_port),
                u32::from_be(v6.sin6_flowinfo),
                v6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The wildcard address of `addr`'s family, port 0.
fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

// --- The client --------------------------------------------------------------

/// A captured WSK provider: what every socket is created through.
pub struct WskClient {
    npi: WskProviderNpi,
    /// Sockets made through this client whose close has not completed.
    sockets: AtomicUsize,
    #[cfg(target_os = "windows")]
    registration: Arc<Registration>,
}

// SAFETY: the NPI is the provider's client handle and a pointer to its
// constant dispatch table, both usable from any thread at ≤ DISPATCH_LEVEL.
unsafe impl Send for WskClient {}
// SAFETY: as above; nothing in the client is mutated after capture.
unsafe impl Sync for WskClient {}

impl WskClient {
    /// A client over a provider the caller has captured (the host tests'
    /// provider).
    ///
    /// # Safety
    /// `npi.dispatch` points to a provider dispatch table, and the table and
    /// `npi.client` stay valid as long as the client and every socket
    /// created through it.
    #[cfg(not(target_os = "windows"))]
    pub unsafe fn from_npi(npi: WskProviderNpi) -> Arc<Self> {
        Arc::new(Self {
            npi,
            sockets: AtomicUsize::new(0),
        })
    }

    /// Sockets made through this client (or being made) whose close has
    /// not completed: 0 once every socket is gone, as `WskDeregister`
    /// requires.
    pub fn sockets(&self) -> usize {
        self.sockets.load(Ordering::Acquire)
    }

    fn socket_opened(&self) {
        self.sockets.fetch_add(1, Ordering::AcqRel);
    }

    fn socket_gone(&self) {
        self.sockets.fetch_sub(1, Ordering::AcqRel);
    }

    fn dispatch(&self) -> &WskProviderDispatch {
        // SAFETY: the NPI was captured (kernel) or given valid (`from_npi`)
        // and stays so while the client lives.
        unsafe { &*self.npi.dispatch }
    }
}

#[cfg(target_os = "windows")]
pub use registration::Registration;

#[cfg(target_os = "windows")]
mod registration {
    use super::{WskClient, sys};
    use crate::abi::{
        NtStatus, STATUS_INSUFFICIENT_RESOURCES, STATUS_SUCCESS, WSK_VERSION_1_0,
        WskClientDispatch, WskClientNpi, WskProviderNpi, WskRegistration,
    };
    use crate::kernel::mem::try_box;
    use alloc::boxed::Box;
    use alloc::sync::Arc;
    use core::cell::UnsafeCell;
    use core::ffi::c_void;

    /// The client-level events: none are defined.
    unsafe extern "system" fn client_event(
        _client_context: *mut c_void,
        _event_type: u32,
        _information: *mut c_void,
        _information_length: usize,
    ) -> NtStatus {
        STATUS_SUCCESS
    }

    static CLIENT_DISPATCH: WskClientDispatch = WskClientDispatch {
        version: WSK_VERSION_1_0,
        reserved: 0,
        padding_04: 0,
        wsk_client_event: Some(client_event),
    };

    struct Block {
        registration: UnsafeCell<WskRegistration>,
    }

    /// A WSK client registration (`WskRegister`); deregistered when the
    /// last reference goes (PASSIVE_LEVEL: it waits for every capture and
    /// socket to be gone, which the clients' references guarantee).
    pub struct Registration {
        block: Box<Block>,
    }

    // SAFETY: the registration block is only handed to the WSK routines,
    // which synchronise on it themselves.
    unsafe impl Send for Registration {}
    // SAFETY: as above.
    unsafe impl Sync for Registration {}

    impl Registration {
        /// Registers the client (PASSIVE_LEVEL; does not wait for WSK).
        ///
        /// # Errors
        /// `WskRegister`'s status, or no memory.
        pub fn register() -> Result<Arc<Self>, NtStatus> {
            let block = try_box(Block {
                registration: UnsafeCell::new(WskRegistration {
                    reserved_registration_state: 0,
                    reserved_registration_context: core::ptr::null_mut(),
                    reserved_registration_lock: 0,
                }),
            })
            .ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
            let mut npi = WskClientNpi {
                client_context: core::ptr::null_mut(),
                dispatch: &raw const CLIENT_DISPATCH,
            };
            // SAFETY: PASSIVE_LEVEL (documented contract); the NPI is read
            // during the call and the registration block is boxed, so it
            // stays in place until `WskDeregister` in `Drop`.
            let status = unsafe { sys::WskRegister(&raw mut npi, block.registration.get()) };
            if status < 0 {
                return Err(status);
            }
            Ok(Arc::new(Self { block }))
        }

        /// Captures the provider, waiting up to `wait_ms` milliseconds
        /// (`WSK_NO_WAIT`: not at all, any IRQL ≤ DISPATCH_LEVEL; otherwise
        /// PASSIVE_LEVEL).
        ///
        /// # Errors
        /// `STATUS_DEVICE_NOT_READY` while WSK is not up; `STATUS_NOINTERFACE`
        /// when it lacks version 1.0.
        pub fn capture(self: &Arc<Self>, wait_ms: u32) -> Result<Arc<WskClient>, NtStatus> {
            let mut npi = WskProviderNpi {
                client: core::ptr::null_mut(),
                dispatch: core::ptr::null(),
            };
            // SAFETY: the block was registered and stays until `Drop`.
            let status = unsafe {
                sys::WskCaptureProviderNPI(self.block.registration.get(), wait_ms, &raw mut npi)
            };
            if status < 0 {
                return Err(status);
            }
            Ok(Arc::new(WskClient {
                npi,
                sockets: core::sync::atomic::AtomicUsize::new(0),
                registration: Arc::clone(self),
            }))
        }
    }

    impl Drop for Registration {
        fn drop(&mut self) {
            // SAFETY: registered in `register`; every client (capture) holds a
            // reference, so none is left; PASSIVE_LEVEL (documented).
            unsafe { sys::WskDeregister(self.block.registration.get()) };
        }
    }

    impl Drop for WskClient {
        fn drop(&mut self) {
            // SAFETY: this client is one successful capture of the
            // registration it holds.
            unsafe { sys::WskReleaseProviderNPI(self.registration.block.registration.get()) };
        }
    }
}

/// The WSK NPI id, in memory: `SO_WSK_EVENT_CALLBACK` takes its address.
static NPI_ID: Guid = NPI_WSK_INTERFACE_ID;

/// The `SO_WSK_EVENT_CALLBACK` input enabling `mask`.
fn event_control(mask: u32) -> WskEventCallbackControl {
    WskEventCallbackControl {
        npi_id: &raw const NPI_ID,
        event_mask: mask,
        padding_0c: 0,
    }
}

/// Enables the events of `mask` on `socket` (no IRP: completes inline).
///
/// # Safety
/// `socket` is a live socket of the provider.
unsafe fn enable_events(socket: *mut WskSocket, mask: u32) -> NtStatus {
    let mut control = event_control(mask);
    // SAFETY: a live socket (caller contract); every socket table begins
    // with the basic one.
    let basic = unsafe { socket_table::<WskProviderBasicDispatch>(socket) };
    let control_socket = basic.wsk_control_socket;
    // SAFETY: a live socket; the input buffer lives across the call, which
    // completes inline without an IRP.
    unsafe {
        control_socket(
            socket,
            WSK_SET_OPTION,
            SO_WSK_EVENT_CALLBACK,
            SOL_SOCKET,
            core::mem::size_of::<WskEventCallbackControl>(),
            (&raw mut control).cast(),
            0,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    }
}

/// The provider's dispatch table of `socket`, seen as a `T`.
///
/// # Safety
/// `socket` is a live socket whose table begins with a `T` (every table
/// begins with the basic one; a connection socket's is the connection one,
/// a listening socket's the listen one). The table is constant and outlives
/// the socket.
unsafe fn socket_table<'a, T>(socket: *mut WskSocket) -> &'a T {
    // SAFETY: a live socket (caller contract); plain field read.
    let table = unsafe { (*socket).dispatch };
    // SAFETY: the table is a `T` and constant (caller contract).
    unsafe { &*table.cast::<T>() }
}

/// A strong reference for the length of a callback, from the socket's
/// reference behind `context`.
///
/// # Safety
/// `context` is `Arc::into_raw` of a `T` whose reference is still held.
unsafe fn borrow_arc<T>(context: *mut c_void) -> Arc<T> {
    let ptr = context.cast::<T>().cast_const();
    // SAFETY: the socket's reference keeps the object alive (caller
    // contract), so the count may be raised.
    unsafe { Arc::increment_strong_count(ptr) };
    // SAFETY: the reference just added is the one this Arc owns.
    unsafe { Arc::from_raw(ptr) }
}

/// The object behind an event's socket context, for the event's length;
/// `None` when the event came without its indication (`indication` null:
/// the socket is going away and its close completes separately, so the
/// event answers `STATUS_SUCCESS` and does nothing).
///
/// # Safety
/// `socket_context` is a socket's reference to a `T` (`Arc::into_raw`),
/// held while WSK calls events on the socket.
unsafe fn event_object<T, I>(socket_context: *mut c_void, indication: *mut I) -> Option<Arc<T>> {
    if indication.is_null() {
        return None;
    }
    // SAFETY: the socket's reference keeps the object (caller contract).
    Some(unsafe { borrow_arc::<T>(socket_context) })
}

/// The elements of a list the provider indicated (`first`, each linked to
/// the next by `next`), at most [`MAX_CHAIN`] of them (a longer list is
/// corrupt: a cycle).
///
/// # Safety
/// `first` is null or the head of the provider's list, whose elements stay
/// valid and unchanged for `'a` (the event).
unsafe fn indicated<'a, T: 'a>(
    first: *mut T,
    next: fn(&T) -> *mut T,
) -> impl Iterator<Item = &'a T> {
    let mut current = first;
    core::iter::from_fn(move || {
        // SAFETY: null, or an element of the provider's list, valid during
        // the event (caller contract).
        let element = unsafe { current.as_ref() }?;
        current = next(element);
        Some(element)
    })
    .take(MAX_CHAIN)
}

/// Counts a socket on `client` and makes its reference to `this`: the
/// context given to WSK with the socket's requests and events, released by
/// [`release_reference`] once WSK calls nothing more on the socket.
fn socket_reference<T>(client: &WskClient, this: &Arc<T>) -> *mut c_void {
    client.socket_opened();
    Arc::into_raw(Arc::clone(this)).cast_mut().cast()
}

/// Gives up a socket's reference (`context`, from [`socket_reference`]) and
/// its count on `client`.
///
/// # Safety
/// `context` is a socket's reference to a `T`, and WSK calls nothing more
/// with it (the socket is closed, or was never made).
unsafe fn release_reference<T>(client: &WskClient, context: *mut c_void) {
    client.socket_gone();
    // SAFETY: the reference `socket_reference` made (caller contract).
    drop(unsafe { Arc::from_raw(context.cast::<T>().cast_const()) });
}

/// How a request on a socket's object completed.
struct Done {
    /// The IRP's status.
    status: NtStatus,
    /// The IRP's `Information` (the new socket, or the bytes sent).
    information: usize,
    /// The socket's reference to the object, the IRP's context.
    context: *mut c_void,
}

impl Done {
    /// `Information` as the socket a creating request made.
    const fn socket(&self) -> *mut WskSocket {
        self.information as *mut WskSocket
    }
}

/// An object whose socket reference is the context of its requests' IRPs,
/// with one step per request that completes.
trait Completes: Sized {
    /// Request `request` completed as `done` says; `this` is a reference
    /// for the step's length.
    fn completed(this: Arc<Self>, request: u8, done: Done);
}

/// The completion routine of a request on a socket's object, one instance
/// per kind of object and request (`completion::<WskStream, SEND>`...):
/// takes the outcome and a reference for the routine's length, then runs
/// the step. The I/O manager leaves the IRP alone afterwards, and the step
/// may have let the object go.
///
/// # Safety
/// An IRP completion routine: `irp` is one of the object's IRPs, completed,
/// and `context` its socket reference (`Arc::into_raw` of a `T`, still held).
unsafe extern "system" fn completion<T: Completes, const REQUEST: u8>(
    _device: *mut c_void,
    irp: *mut Irp,
    context: *mut c_void,
) -> NtStatus {
    // SAFETY: our IRP, completed.
    let (status, information) = unsafe { outcome(irp) };
    // SAFETY: the context is the socket's reference to the object.
    let this = unsafe { borrow_arc::<T>(context) };
    let done = Done {
        status,
        information,
        context,
    };
    T::completed(this, REQUEST, done);
    STATUS_MORE_PROCESSING_REQUIRED
}

// --- Streams -----------------------------------------------------------------

/// The send side's state, under the stream's lock.
#[derive(Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of one request sequence, each read on its own"
)]
struct SendState {
    /// Oldest queued byte's index in the ring.
    head: usize,
    /// Bytes queued (including those of the send in flight).
    len: usize,
    /// Bytes of the `WskSend` in flight (0: none).
    in_flight: usize,
    /// A disconnect, connect or close request is on the control IRP.
    control_busy: bool,
    /// Some thread is issuing requests (see `WskStream::pump`).
    pumping: bool,
    /// A `send` took less than offered: report `writable` on room.
    want_writable: bool,
    /// `close` was called: `Some(abortive)`.
    closing: Option<bool>,
    /// A send failed: nothing more is sent; the disconnect is abortive.
    failed: bool,
    disconnect_issued: bool,
    disconnect_done: bool,
    close_issued: bool,
    /// `closed` was reported (or the user closed abortively first).
    closed_reported: bool,
    /// The peer closed or reset its end (or a send failed): after this
    /// side's orderly close the socket closes only then, or at an abortive
    /// close (the drain time-out's), so that the peer's last bytes and its
    /// FIN still reach the user (X1 a waits for that FIN).
    peer_closed: bool,
}

/// What `pump` does next.
enum Step {
    Idle,
    Send { offset: usize, len: usize },
    Disconnect { abortive: bool },
    Close,
}

impl SendState {
    fn next(&mut self, capacity: usize) -> Step {
        if self.close_issued || self.control_busy {
            return Step::Idle;
        }
        let sending = !self.failed && self.closing != Some(true) && self.len > 0;
        if sending {
            if self.in_flight > 0 {
                return Step::Idle;
            }
            let len = self.len.min(capacity - self.head);
            self.in_flight = len;
            return Step::Send {
                offset: self.head,
                len,
            };
        }
        let Some(abortive) = self.closing else {
            return Step::Idle;
        };
        if !self.disconnect_issued {
            self.disconnect_issued = true;
            self.control_busy = true;
            return Step::Disconnect {
                abortive: abortive || self.failed,
            };
        }
        // After an orderly disconnect the socket stays until the peer's end
        // (its bytes and its FIN are still reported) or an abortive close.
        let done_both_ways = abortive || self.failed || self.peer_closed;
        if self.disconnect_done && self.in_flight == 0 && done_both_ways {
            self.close_issued = true;
            self.control_busy = true;
            return Step::Close;
        }
        Step::Idle
    }
}

/// A connected WSK TCP socket, with `ByteStream`'s `send` and `close`.
pub struct WskStream {
    /// Keeps the provider captured while the socket lives.
    client: Arc<WskClient>,
    socket: AtomicPtr<WskSocket>,
    events: SpinLock<Option<Arc<dyn StreamEvents>>>,
    state: SpinLock<SendState>,
    capacity: usize,
    /// The send ring's MDL.
    mdl: BufferMdl,
    /// The send ring, `capacity` bytes; written under `state` in the free
    /// part, read by the provider in the part in flight. After `mdl`: freed
    /// after it.
    ring: PoolBytes,
    /// The `WSK_BUF` of the send in flight (stays valid until it completes).
    send_buf: UnsafeCell<WskBuf>,
    send_irp: OwnedIrp,
    /// Connect, disconnect and close, one at a time.
    control_irp: OwnedIrp,
    /// The addresses of `WskSocketConnect` (valid until it completes).
    connect_addrs: UnsafeCell<[SockAddrInet; 2]>,
    connect_events: SpinLock<Option<Arc<dyn ConnectEvents>>>,
}

// SAFETY: the ring and `send_buf` are only touched as the state under the
// lock orders (free part by `send`, in-flight part by the provider, one send
// in flight); `connect_addrs` only before the connect request is issued; the
// IRPs and the MDL are owned handles used one request at a time.
unsafe impl Send for WskStream {}
// SAFETY: as above.
unsafe impl Sync for WskStream {}

/// The largest send ring: an MDL's `ByteCount` is a `ULONG`.
const MAX_CAPACITY: usize = 1 << 30;

impl WskStream {
    fn new(client: &Arc<WskClient>, capacity: usize) -> Result<Arc<Self>, NtStatus> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let ring = PoolBytes::new(capacity).ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
        let len = u32::try_from(capacity).unwrap_or(u32::MAX);
        // SAFETY: the ring is `capacity` bytes of pool memory (non-paged in
        // the kernel) that the stream frees only after the MDL (field order;
        // here, the MDL is declared after it and dropped first).
        let mdl =
            unsafe { BufferMdl::new(ring.start(), len) }.ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
        let (Some(send_irp), Some(control_irp)) = (OwnedIrp::new(), OwnedIrp::new()) else {
            return Err(STATUS_INSUFFICIENT_RESOURCES);
        };
        let stream = Self {
            client: Arc::clone(client),
            socket: AtomicPtr::new(core::ptr::null_mut()),
            events: SpinLock::new(None),
            state: SpinLock::new(SendState::default()),
            capacity,
            mdl,
            ring,
            send_buf: UnsafeCell::new(WskBuf {
                mdl: core::ptr::null_mut(),
                offset: 0,
                padding_0c: 0,
                length: 0,
            }),
            send_irp,
            control_irp,
            connect_addrs: UnsafeCell::new([SockAddrInet::default(); 2]),
            connect_events: SpinLock::new(None),
        };
        Ok(Arc::new(stream))
    }

    fn connection_dispatch<'a>(socket: *mut WskSocket) -> &'a WskProviderConnectionDispatch {
        // SAFETY: the stream's socket is live while requests are issued on it
        // (close is the last one) and is a connection socket.
        unsafe { socket_table(socket) }
    }

    /// This object as an IRP or socket context (kept alive by the
    /// socket's reference).
    fn context(&self) -> *mut c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }

    fn events(&self) -> Option<Arc<dyn StreamEvents>> {
        self.events.lock().clone()
    }

    /// Issues whatever requests the state calls for. One thread at a time
    /// issues (`pumping`); a completion that finds another thread issuing
    /// leaves the work to it, so an inline completion never recurses more
    /// than once.
    fn pump(&self) {
        {
            let mut state = self.state.lock();
            if state.pumping {
                return;
            }
            state.pumping = true;
        }
        loop {
            let step = {
                let mut state = self.state.lock();
                let step = state.next(self.capacity);
                if matches!(step, Step::Idle | Step::Close) {
                    state.pumping = false;
                }
                step
            };
            match step {
                Step::Idle => return,
                Step::Send { offset, len } => self.start_send(offset, len),
                Step::Disconnect { abortive } => self.start_disconnect(abortive),
                Step::Close => {
                    self.start_close();
                    return;
                }
            }
        }
    }

    fn start_send(&self, offset: usize, len: usize) {
        let socket = self.socket.load(Ordering::Acquire);
        let buf = self.send_buf.get();
        // SAFETY: only the send in flight uses `send_buf`, and none is (the
        // state just marked this one).
        unsafe {
            buf.write(WskBuf {
                mdl: self.mdl.as_ptr(),
                offset: u32::try_from(offset).unwrap_or(0),
                padding_0c: 0,
                length: len,
            });
        };
        let routine = completion::<Self, SEND>;
        // SAFETY: no send is in flight on the send IRP; the context is this
        // stream, kept alive by the socket's reference until close, which
        // waits for this send.
        unsafe { self.send_irp.prepare(routine, self.context()) };
        let dispatch = Self::connection_dispatch(socket);
        // SAFETY: the socket is connected and not closed (close waits for
        // this send); the buffer, its MDL and the IRP stay valid until the
        // completion routine runs.
        let _ = unsafe { (dispatch.wsk_send)(socket, buf, 0, self.send_irp.as_ptr()) };
    }

    fn start_disconnect(&self, abortive: bool) {
        let socket = self.socket.load(Ordering::Acquire);
        let routine = completion::<Self, DISCONNECT>;
        // SAFETY: the control IRP is idle (`control_busy` was just set).
        unsafe { self.control_irp.prepare(routine, self.context()) };
        let dispatch = Self::connection_dispatch(socket);
        let flags = if abortive { WSK_FLAG_ABORTIVE } else { 0 };
        // SAFETY: a live socket; no buffer; the IRP stays valid until its
        // completion.
        let _ = unsafe {
            (dispatch.wsk_disconnect)(
                socket,
                core::ptr::null_mut(),
                flags,
                self.control_irp.as_ptr(),
            )
        };
    }

    fn start_close(&self) {
        let socket = self.socket.load(Ordering::Acquire);
        let routine = completion::<Self, CLOSE>;
        // SAFETY: the control IRP is idle (`control_busy` was just set).
        unsafe { self.control_irp.prepare(routine, self.context()) };
        let dispatch = Self::connection_dispatch(socket);
        // SAFETY: a live socket with no other call outstanding (no send in
        // flight, the disconnect completed); the IRP stays valid until its
        // completion, which releases the socket's reference.
        let _ = unsafe { (dispatch.basic.wsk_close_socket)(socket, self.control_irp.as_ptr()) };
    }

    /// Takes as much of `bytes` as the ring has room for (0 after `close`).
    pub fn send(&self, bytes: &[u8]) -> usize {
        let taken = {
            let mut state = self.state.lock();
            if state.closing.is_some() || state.failed {
                return 0;
            }
            let room = self.capacity - state.len;
            let n = bytes.len().min(room);
            let mut tail = (state.head + state.len) % self.capacity;
            let mut copied = 0;
            while copied < n {
                let chunk = (n - copied).min(self.capacity - tail);
                let Some(src) = bytes.get(copied..copied + chunk) else {
                    break;
                };
                let dst = self.ring.start().as_ptr().wrapping_add(tail);
                // SAFETY: `dst..dst + chunk` lies in the ring's free part
                // (`chunk <= capacity - tail` and within the room), which
                // only this locked section writes and no send reads.
                unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, chunk) };
                copied += chunk;
                tail = (tail + chunk) % self.capacity;
            }
            state.len += copied;
            if copied < bytes.len() {
                state.want_writable = true;
            }
            copied
        };
        if taken > 0 {
            self.pump();
        }
        taken
    }

    /// Closes the stream: gracefully once the queued bytes are sent, or
    /// (`abortive`) at once with a reset, dropping them. After an orderly
    /// close receiving goes on until the peer closes too, and `closed`
    /// reports that (`kernel::tcp::Stream::close`); an abortive close after
    /// an orderly one still resets: the socket closes as soon as no request
    /// of it is in progress. Other later calls do nothing.
    pub fn close(&self, abortive: bool) {
        {
            let mut state = self.state.lock();
            match state.closing {
                Some(true) => return,
                Some(false) if !abortive => return,
                _ => {}
            }
            state.closing = Some(abortive);
            if abortive {
                // The closer is not told of its own reset.
                state.closed_reported = true;
                let in_flight = state.in_flight;
                state.len = in_flight;
            }
        }
        self.pump();
    }

    /// Bytes queued and not yet completed by the provider.
    pub fn queued(&self) -> usize {
        self.state.lock().len
    }

    /// Reports `closed` once, unless the user closed abortively first;
    /// then lets an orderly close finish (the socket closes, `next`).
    fn report_closed(&self, abortive: bool) {
        let report = {
            let mut state = self.state.lock();
            state.peer_closed = true;
            !core::mem::replace(&mut state.closed_reported, true)
        };
        if report && let Some(events) = self.events() {
            events.closed(abortive);
        }
        self.pump();
    }
}

impl super::tcp::Stream for WskStream {
    fn send(&self, bytes: &[u8]) -> usize {
        Self::send(self, bytes)
    }

    fn close(&self, abortive: bool) {
        Self::close(self, abortive);
    }
}

/// The requests of a stream a [`completion`] instance finishes (its
/// `REQUEST`): `WskSocketConnect`.
const CONNECT: u8 = 0;
/// `WskSend`.
const SEND: u8 = 1;
/// `WskDisconnect`.
const DISCONNECT: u8 = 2;
/// `WskCloseSocket`.
const CLOSE: u8 = 3;

impl Completes for WskStream {
    fn completed(this: Arc<Self>, request: u8, done: Done) {
        match request {
            CONNECT => connected(&this, done.status, done.socket(), done.context),
            SEND => sent(&this, done.status, done.information),
            DISCONNECT => disconnected(&this),
            _ => closed(this, done.context),
        }
    }
}

/// `WskSend` completed (`sent`: the bytes it took).
fn sent(this: &WskStream, status: NtStatus, sent: usize) {
    let (writable, failed_now) = {
        let mut state = this.state.lock();
        let in_flight = core::mem::take(&mut state.in_flight);
        if status >= 0 {
            let sent = sent.min(in_flight);
            state.head = (state.head + sent) % this.capacity;
            state.len -= sent;
            // A short completion (not seen from TCP) sends the rest next.
        } else {
            state.failed = true;
            state.len = 0;
        }
        let writable = state.len < this.capacity
            && state.closing.is_none()
            && !state.failed
            && core::mem::take(&mut state.want_writable);
        (writable, status < 0)
    };
    if writable && let Some(events) = this.events() {
        events.writable();
    }
    if failed_now {
        this.report_closed(true);
    }
    this.pump();
}

/// `WskDisconnect` completed (whatever its status, the socket is closed
/// next).
fn disconnected(this: &WskStream) {
    {
        let mut state = this.state.lock();
        state.control_busy = false;
        state.disconnect_done = true;
    }
    this.pump();
}

/// `WskCloseSocket` completed: WSK calls nothing more on this socket, so
/// its reference goes.
fn closed(this: Arc<WskStream>, context: *mut c_void) {
    this.socket.store(core::ptr::null_mut(), Ordering::Release);
    this.state.lock().control_busy = false;
    drop(this.events.lock().take());
    // SAFETY: the socket's reference, given up now that the socket is gone.
    unsafe { release_reference::<WskStream>(&this.client, context) };
    // `this` (the routine's own reference) may free the stream when dropped
    // here, after which nothing touches it: the IRP is not touched again by
    // the I/O manager (STATUS_MORE_PROCESSING_REQUIRED).
    drop(this);
}

/// `WskReceiveEvent`: hands every indicated byte to `received`, in order.
unsafe extern "system" fn receive_event(
    socket_context: *mut c_void,
    _flags: u32,
    data_indication: *mut WskDataIndication,
    _bytes_indicated: usize,
    _bytes_accepted: *mut usize,
) -> NtStatus {
    // SAFETY: the context is the stream, kept by its socket's reference
    // while WSK calls events on it.
    let Some(this) = (unsafe { event_object::<WskStream, _>(socket_context, data_indication) })
    else {
        return STATUS_SUCCESS;
    };
    let Some(events) = this.events() else {
        return STATUS_SUCCESS;
    };
    // SAFETY: the provider's list, valid during the event.
    for indication in unsafe { indicated(data_indication, |element| element.next) } {
        // SAFETY: the WSK_BUF describes a locked chain valid during the event.
        unsafe { deliver(indication.buffer, events.as_ref()) };
    }
    STATUS_SUCCESS
}

/// Hands `buffer`'s bytes (from `Offset` in its first MDL, `Length` in
/// all) to `received`, one mapped span at a time.
///
/// # Safety
/// `buffer` describes a valid, locked MDL chain for the call's duration.
unsafe fn deliver(buffer: WskBuf, events: &dyn StreamEvents) {
    let mut skip = buffer.offset as usize;
    let mut left = buffer.length;
    let mut mdl = NonNull::new(buffer.mdl);
    // Every MDL but a few empty ones carries at least one byte: a chain
    // longer than this is corrupt (a cycle).
    let limit = MAX_CHAIN.saturating_add(buffer.length);
    let mut walked = 0;
    while let Some(current) = mdl {
        if left == 0 || walked >= limit {
            break;
        }
        walked += 1;
        // SAFETY: an MDL of the indicated chain (caller contract).
        let Ok(span) = (unsafe { system_span(current) }) else {
            return;
        };
        if skip < span.len {
            let n = (span.len - skip).min(left);
            // SAFETY: `skip + n <= span.len` bytes of the mapped MDL, valid
            // and unchanged during the event.
            let bytes =
                unsafe { core::slice::from_raw_parts(span.addr.as_ptr().wrapping_add(skip), n) };
            events.received(bytes);
            left -= n;
            skip = 0;
        } else {
            skip -= span.len;
        }
        // SAFETY: a valid MDL header; `Next` is a plain field.
        mdl = NonNull::new(unsafe { (*current.as_ptr()).next });
    }
}

/// `WskDisconnectEvent`: the peer closed (or reset) the connection.
unsafe extern "system" fn disconnect_event(socket_context: *mut c_void, flags: u32) -> NtStatus {
    // SAFETY: the context is the stream, kept by its socket's reference.
    let this = unsafe { borrow_arc::<WskStream>(socket_context) };
    this.report_closed(flags & WSK_FLAG_ABORTIVE != 0);
    STATUS_SUCCESS
}

/// The events of every connection socket.
static CONNECTION_DISPATCH: WskClientConnectionDispatch = WskClientConnectionDispatch {
    wsk_receive_event: Some(receive_event),
    wsk_disconnect_event: Some(disconnect_event),
    wsk_send_backlog_event: None,
};

// --- Connect -------------------------------------------------------------------

/// Connects from `local` (port 0 / wildcard: any; `None`: the wildcard of
/// `remote`'s family) to `remote`; the outcome goes to `done`, and the stream
/// then reports to the events `done` returns. The send ring holds
/// `send_capacity` bytes.
///
/// # Errors
/// No memory or a bad capacity (nothing was started, `done` is not called).
pub fn connect(
    client: &Arc<WskClient>,
    local: Option<SocketAddr>,
    remote: SocketAddr,
    send_capacity: usize,
    done: Arc<dyn ConnectEvents>,
) -> Result<(), NtStatus> {
    let stream = WskStream::new(client, send_capacity)?;
    *stream.connect_events.lock() = Some(done);
    let addrs = stream.connect_addrs.get();
    let local = local.unwrap_or_else(|| unspecified_like(remote));
    // SAFETY: no request uses the addresses yet.
    unsafe { addrs.write([to_sockaddr(local), to_sockaddr(remote)]) };
    stream.state.lock().control_busy = true;
    // The socket's reference: given to WSK as the socket context and to the
    // completion routine.
    let context = socket_reference(client, &stream);
    let routine = completion::<WskStream, CONNECT>;
    // SAFETY: the control IRP is idle (a new stream).
    unsafe { stream.control_irp.prepare(routine, context) };
    let addrs = addrs.cast::<SockAddrInet>();
    let dispatch = client.dispatch();
    // SAFETY: a captured provider; the addresses and the IRP stay valid until
    // the completion routine runs (the stream holds them and the socket's
    // reference keeps the stream); the dispatch table is static.
    let _ = unsafe {
        (dispatch.wsk_socket_connect)(
            client.npi.client,
            SOCK_STREAM,
            IPPROTO_TCP,
            addrs.cast(),
            addrs.wrapping_add(1).cast(),
            0,
            context,
            &raw const CONNECTION_DISPATCH,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            stream.control_irp.as_ptr(),
        )
    };
    Ok(())
}

/// `WskSocketConnect` completed (`socket`: the new socket).
fn connected(
    this: &Arc<WskStream>,
    status: NtStatus,
    socket: *mut WskSocket,
    context: *mut c_void,
) {
    this.state.lock().control_busy = false;
    let done = this.connect_events.lock().take();
    if status < 0 || socket.is_null() {
        // SAFETY: no socket was made: the reference given for it goes.
        unsafe { release_reference::<WskStream>(&this.client, context) };
        if let Some(done) = done {
            let _ = done.connected(Err(ConnectError::from_status(if status < 0 {
                status
            } else {
                STATUS_INSUFFICIENT_RESOURCES
            })));
        }
        return;
    }
    this.socket.store(socket, Ordering::Release);
    let events = done.and_then(|done| done.connected(Ok(Arc::clone(this))));
    let Some(events) = events else {
        this.close(true);
        return;
    };
    *this.events.lock() = Some(events);
    // SAFETY: the socket the provider just made.
    let enabled = unsafe { enable_events(socket, WSK_EVENT_RECEIVE | WSK_EVENT_DISCONNECT) };
    if enabled < 0 {
        this.report_closed(true);
        this.close(true);
    }
}

// --- Listen --------------------------------------------------------------------

/// A listening WSK socket; accepted connections go to its [`ListenEvents`].
pub struct WskListener {
    /// Its client, socket, control IRP, local address and phase.
    core: setup::Core<()>,
    events: Arc<dyn ListenEvents>,
    send_capacity: usize,
}

/// Listens on `local`; `events` hears `ready` once set up, then every
/// accepted connection, whose stream gets a send ring of `send_capacity`
/// bytes.
///
/// # Errors
/// No memory (nothing was started, `ready` is not called).
pub fn listen(
    client: &Arc<WskClient>,
    local: SocketAddr,
    send_capacity: usize,
    events: Arc<dyn ListenEvents>,
) -> Result<Arc<WskListener>, NtStatus> {
    let listener = Arc::new(WskListener {
        core: setup::Core::new(client, local, ())?,
        events,
        send_capacity,
    });
    setup::create(&listener, local.is_ipv4());
    Ok(listener)
}

impl WskListener {
    fn listen_dispatch(&self) -> &WskProviderListenDispatch {
        let socket = self.core.socket();
        // SAFETY: the listener's socket is live while requests are issued on
        // it (close is the last one) and is a listening socket.
        unsafe { socket_table(socket) }
    }

    /// Stops listening and closes the socket (once its setup is over).
    /// Connections already accepted are not affected.
    pub fn close(&self) {
        setup::close(self);
    }
}

impl setup::Setup for WskListener {
    // The accepted sockets inherit receive and disconnect.
    const EVENTS: u32 = WSK_EVENT_ACCEPT | WSK_EVENT_RECEIVE | WSK_EVENT_DISCONNECT;
    const KIND: (u16, u32, u32) = (SOCK_STREAM, IPPROTO_TCP, WSK_FLAG_LISTEN_SOCKET);
    const EVENT_TABLE: *const c_void = (&raw const LISTEN_DISPATCH).cast();
    type Own = ();

    fn core(&self) -> &setup::Core<()> {
        &self.core
    }

    fn bind(&self) -> PfnWskBind {
        self.listen_dispatch().wsk_bind
    }

    fn ready(&self, result: Result<(), NtStatus>) {
        self.events.ready(result);
    }

    /// A listener has nothing of its own in flight: it closes once open.
    fn idle(&self, (): &()) -> bool {
        true
    }
}

/// `WskAcceptEvent`: a connection arrived on the listening socket.
unsafe extern "system" fn accept_event(
    socket_context: *mut c_void,
    _flags: u32,
    local_address: *mut SockAddr,
    remote_address: *mut SockAddr,
    accept_socket: *mut WskSocket,
    accept_socket_context: *mut *mut c_void,
    accept_socket_dispatch: *mut *const WskClientConnectionDispatch,
) -> NtStatus {
    // SAFETY: the context is the listener, kept by its socket's reference.
    let Some(this) = (unsafe { event_object::<WskListener, _>(socket_context, accept_socket) })
    else {
        return STATUS_SUCCESS;
    };
    let Ok(stream) = WskStream::new(&this.core.client, this.send_capacity) else {
        return STATUS_REQUEST_NOT_ACCEPTED;
    };
    stream.socket.store(accept_socket, Ordering::Release);
    // SAFETY: the provider's addresses, valid during the event.
    let local = unsafe { from_sockaddr(local_address) };
    // SAFETY: as above.
    let remote = unsafe { from_sockaddr(remote_address) };
    let Some(events) = this.events.accepted(&stream, local, remote) else {
        return STATUS_REQUEST_NOT_ACCEPTED;
    };
    *stream.events.lock() = Some(events);
    let context = socket_reference(&this.core.client, &stream);
    // SAFETY: out-parameters the provider gives for this purpose.
    unsafe { accept_socket_context.write(context) };
    // SAFETY: as above.
    unsafe { accept_socket_dispatch.write(&raw const CONNECTION_DISPATCH) };
    STATUS_SUCCESS
}

/// The events of every listening socket.
static LISTEN_DISPATCH: WskClientListenDispatch = WskClientListenDispatch {
    wsk_accept_event: Some(accept_event),
    wsk_inspect_event: None,
    wsk_abort_event: None,
};
