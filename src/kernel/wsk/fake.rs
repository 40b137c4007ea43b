//! A WSK provider the tests implement: the provider dispatch tables of
//! `abi::wsk`, filled with Rust functions over in-memory connections, so
//! that the exact client code the driver runs (IRPs, completion routines,
//! event callbacks, MDL walking) runs in the host tests (these, the
//! `WskNet` ones and the driver's).
//!
//! The provider queues every request and carries it out when the test says
//! ([`Provider::run`]), or on its own thread ([`Provider::serve`]), one at
//! a time and with no lock held while it calls
//! the client back, as WSK does; sends can be held (back-pressure) or
//! carried out inline, inside `WskSend` (the inline completion path).
//! Received data is indicated as MDL chains cut into small pieces, the first
//! with an `Offset`, over two `WSK_DATA_INDICATION` elements.

use super::*;
use crate::abi::{
    MDL_SOURCE_IS_NONPAGED_POOL, Mdl, STATUS_ADDRESS_ALREADY_EXISTS, STATUS_CANCELLED,
    STATUS_CONNECTION_RESET, STATUS_NOT_SUPPORTED, STATUS_PENDING, WskClientHandle,
    WskControlSocketType, WskProviderDispatch,
};
use crate::abi::{SockAddr, WskClientConnectionDispatch, WskClientListenDispatch};
use crate::kernel::mdl::copy_from_chain;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex};

// --- The provider --------------------------------------------------------------

/// A provider socket: `WSK_SOCKET` first, so that the client's pointer is
/// this.
#[repr(C)]
struct FakeSocket {
    base: WskSocket,
    id: usize,
    provider: *const Provider,
}

impl FakeSocket {
    fn split(self) -> (*const Provider, usize) {
        (self.provider, self.id)
    }
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "a socket's independent facts"
)]
pub(crate) struct SockState {
    ptr: *mut FakeSocket,
    listen: bool,
    context: *mut c_void,
    conn_dispatch: *const WskClientConnectionDispatch,
    listen_dispatch: *const WskClientListenDispatch,
    events: u32,
    local: Option<SocketAddr>,
    peer: Option<usize>,
    /// This side sent its FIN or RST.
    disconnected: bool,
    /// `WskCloseSocket` was carried out.
    pub(crate) closed: bool,
    /// The peer reset the connection.
    reset: bool,
}

pub(crate) enum Op {
    Create {
        irp: *mut Irp,
        context: *mut c_void,
        dispatch: *const c_void,
    },
    Bind {
        sock: usize,
        addr: Option<SocketAddr>,
        irp: *mut Irp,
    },
    Connect {
        irp: *mut Irp,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
        context: *mut c_void,
        dispatch: *const WskClientConnectionDispatch,
    },
    Send {
        sock: usize,
        buf: WskBuf,
        irp: *mut Irp,
    },
    Disconnect {
        sock: usize,
        abortive: bool,
        irp: *mut Irp,
    },
    Close {
        sock: usize,
        irp: *mut Irp,
    },
}

#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) sockets: Vec<SockState>,
    pub(crate) ops: VecDeque<Op>,
    pub(crate) held: VecDeque<Op>,
    hold_sends: bool,
    listeners: Vec<(SocketAddr, usize)>,
    next_port: u16,
    /// Requests issued, by kind, for the tests' checks.
    pub(crate) sends: usize,
    pub(crate) disconnects: Vec<bool>,
    pub(crate) closes: usize,
}

// SAFETY: the raw pointers are the client's contexts, tables and IRPs and
// the provider's leaked sockets, all valid from any thread (WSK calls the
// client from arbitrary threads too); the state is only touched under the
// provider's mutex.
unsafe impl Send for Inner {}

/// The tests' WSK provider (leaked: it outlives every socket).
pub(crate) struct Provider {
    inner: Mutex<Inner>,
    /// Woken when a request is queued (the serving thread waits on it).
    wake: Condvar,
    /// The serving thread is to stop.
    stop: AtomicBool,
    /// Sends complete inside `WskSend`.
    pub(crate) inline_sends: AtomicBool,
    /// Bytes per MDL of an indication.
    piece: usize,
}

/// A [`super::WskSource`] that gives this provider at once ("WSK is up").
pub(crate) struct Source(pub(crate) &'static Provider);

impl super::WskSource for Source {
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus> {
        Ok(self.0.client())
    }
}

/// The provider's serving thread; stops it when dropped.
pub(crate) struct Serving {
    provider: &'static Provider,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.provider.stop.store(true, Ordering::Release);
        self.provider.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Provider {
    pub(crate) fn new(piece: usize) -> &'static Self {
        Box::leak(Box::new(Self {
            inner: Mutex::new(Inner {
                next_port: 40_000,
                ..Inner::default()
            }),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            inline_sends: AtomicBool::new(false),
            piece,
        }))
    }

    pub(crate) fn client(&'static self) -> Arc<WskClient> {
        let npi = WskProviderNpi {
            client: core::ptr::from_ref(self).cast_mut().cast(),
            dispatch: &raw const PROVIDER_DISPATCH,
        };
        // SAFETY: the table is static and the provider leaked (lives forever).
        unsafe { WskClient::from_npi(npi) }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }

    fn new_socket(&'static self, inner: &mut Inner, listen: bool) -> usize {
        let id = inner.sockets.len();
        let socket = Box::leak(Box::new(FakeSocket {
            base: WskSocket {
                dispatch: if listen {
                    (&raw const LISTEN_TABLE).cast()
                } else {
                    (&raw const CONNECTION_TABLE).cast()
                },
            },
            id,
            provider: self,
        }));
        inner.sockets.push(SockState {
            ptr: socket,
            listen,
            context: core::ptr::null_mut(),
            conn_dispatch: core::ptr::null(),
            listen_dispatch: core::ptr::null(),
            events: 0,
            local: None,
            peer: None,
            disconnected: false,
            closed: false,
            reset: false,
        });
        id
    }

    fn push(&self, op: Op) {
        let mut inner = self.lock();
        if inner.hold_sends && matches!(op, Op::Send { .. }) {
            inner.held.push_back(op);
        } else {
            inner.ops.push_back(op);
        }
        self.wake.notify_all();
    }

    /// Carries out requests on a thread of its own, as they come, until the
    /// returned guard is dropped (or two minutes have passed: a bound).
    pub(crate) fn serve(&'static self) -> Serving {
        self.stop.store(false, Ordering::Release);
        let thread = std::thread::Builder::new()
            .name("wsk-test-provider".into())
            .spawn(move || {
                let start = std::time::Instant::now();
                while !self.stop.load(Ordering::Acquire)
                    && start.elapsed() < std::time::Duration::from_mins(2)
                {
                    let op = {
                        let mut inner = self.lock();
                        if let Some(op) = inner.ops.pop_front() {
                            Some(op)
                        } else {
                            let (mut inner, _) = self
                                .wake
                                .wait_timeout(inner, std::time::Duration::from_millis(20))
                                .unwrap();
                            inner.ops.pop_front()
                        }
                    };
                    if let Some(op) = op {
                        self.execute(op);
                    }
                }
            })
            .unwrap();
        Serving {
            provider: self,
            thread: Some(thread),
        }
    }

    /// Whether no request waits (none queued, none held).
    pub(crate) fn idle(&self) -> bool {
        let inner = self.lock();
        inner.ops.is_empty() && inner.held.is_empty()
    }

    pub(crate) fn hold_sends(&self, hold: bool) {
        let mut inner = self.lock();
        inner.hold_sends = hold;
        if !hold {
            let released: Vec<Op> = inner.held.drain(..).collect();
            inner.ops.extend(released);
        }
    }

    /// Carries out queued requests until none is left (bounded).
    pub(crate) fn run(&'static self) {
        for _ in 0..100_000 {
            let op = self.lock().ops.pop_front();
            let Some(op) = op else { return };
            self.execute(op);
        }
        panic!("the provider's queue never drained");
    }

    #[expect(
        clippy::needless_pass_by_value,
        reason = "each request is carried out once"
    )]
    fn execute(&'static self, op: Op) {
        match op {
            Op::Create {
                irp,
                context,
                dispatch,
            } => {
                let ptr = {
                    let mut inner = self.lock();
                    let id = self.new_socket(&mut inner, true);
                    let sock = &mut inner.sockets[id];
                    sock.context = context;
                    sock.listen_dispatch = dispatch.cast();
                    sock.ptr
                };
                complete(irp, STATUS_SUCCESS, ptr as usize);
            }
            Op::Bind { sock, addr, irp } => {
                let status = {
                    let mut inner = self.lock();
                    let addr = addr.unwrap();
                    if inner.listeners.iter().any(|(a, _)| *a == addr) {
                        STATUS_ADDRESS_ALREADY_EXISTS
                    } else {
                        inner.sockets[sock].local = Some(addr);
                        if inner.sockets[sock].listen {
                            inner.listeners.push((addr, sock));
                        }
                        STATUS_SUCCESS
                    }
                };
                complete(irp, status, 0);
            }
            Op::Connect {
                irp,
                local,
                remote,
                context,
                dispatch,
            } => self.connect(irp, local, remote.unwrap(), context, dispatch),
            Op::Send { sock, buf, irp } => self.send(sock, buf, irp),
            Op::Disconnect {
                sock,
                abortive,
                irp,
            } => {
                let peer = {
                    let mut inner = self.lock();
                    inner.sockets[sock].disconnected = true;
                    let peer = inner.sockets[sock].peer;
                    if let Some(peer) = peer.filter(|_| abortive) {
                        inner.sockets[peer].reset = true;
                    }
                    peer
                };
                if let Some(peer) = peer {
                    self.indicate_disconnect(peer, abortive);
                }
                complete(irp, STATUS_SUCCESS, 0);
            }
            Op::Close { sock, irp } => {
                let reset_peer = {
                    let mut inner = self.lock();
                    inner.listeners.retain(|(_, id)| *id != sock);
                    let state = &mut inner.sockets[sock];
                    state.closed = true;
                    let reset = !state.disconnected;
                    state.disconnected = true;
                    let peer = state.peer.filter(|_| reset);
                    if let Some(peer) = peer {
                        inner.sockets[peer].reset = true;
                    }
                    peer
                };
                if let Some(peer) = reset_peer {
                    self.indicate_disconnect(peer, true);
                }
                complete(irp, STATUS_SUCCESS, 0);
            }
        }
    }

    fn connect(
        &'static self,
        irp: *mut Irp,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        context: *mut c_void,
        dispatch: *const WskClientConnectionDispatch,
    ) {
        let found = {
            let mut inner = self.lock();
            let listener = inner
                .listeners
                .iter()
                .find(|(a, _)| {
                    a.port() == remote.port() && (a.ip() == remote.ip() || a.ip().is_unspecified())
                })
                .map(|(_, id)| *id);
            listener.map(|listener| {
                let c = self.new_socket(&mut inner, false);
                let s = self.new_socket(&mut inner, false);
                inner.next_port += 1;
                let port = inner.next_port;
                let local = match local {
                    Some(a) if a.port() != 0 && !a.ip().is_unspecified() => a,
                    _ => SocketAddr::new(remote.ip(), port),
                };
                let client = &mut inner.sockets[c];
                client.context = context;
                client.conn_dispatch = dispatch;
                client.local = Some(local);
                client.peer = Some(s);
                let server = &mut inner.sockets[s];
                server.local = Some(remote);
                server.peer = Some(c);
                let l = &inner.sockets[listener];
                (
                    c,
                    s,
                    local,
                    l.context,
                    l.listen_dispatch,
                    l.events,
                    inner.sockets[s].ptr,
                )
            })
        };
        let Some((c, s, local, lctx, ldispatch, levents, sptr)) = found else {
            complete(irp, STATUS_CONNECTION_REFUSED, 0);
            return;
        };
        let mut accepted = false;
        if levents & WSK_EVENT_ACCEPT != 0 {
            let mut local_sa = to_sockaddr(remote);
            let mut remote_sa = to_sockaddr(local);
            let mut out_context = core::ptr::null_mut();
            let mut out_dispatch = core::ptr::null();
            // SAFETY: the listener's client table (static in the glue).
            let accept = unsafe { (*ldispatch).wsk_accept_event }.unwrap();
            // SAFETY: the client's accept event with valid addresses, socket
            // and out-parameters.
            let status = unsafe {
                accept(
                    lctx,
                    0,
                    (&raw mut local_sa).cast(),
                    (&raw mut remote_sa).cast(),
                    sptr.cast(),
                    &raw mut out_context,
                    &raw mut out_dispatch,
                )
            };
            if status == STATUS_SUCCESS {
                accepted = true;
                let mut inner = self.lock();
                let server = &mut inner.sockets[s];
                server.context = out_context;
                server.conn_dispatch = out_dispatch;
                server.events = levents & (WSK_EVENT_RECEIVE | WSK_EVENT_DISCONNECT);
            }
        }
        if !accepted {
            let mut inner = self.lock();
            inner.sockets[s].closed = true;
            inner.sockets[s].disconnected = true;
            inner.sockets[c].reset = true;
        }
        let cptr = self.lock().sockets[c].ptr;
        complete(irp, STATUS_SUCCESS, cptr as usize);
        if !accepted {
            self.indicate_disconnect(c, true);
        }
    }

    fn send(&'static self, sock: usize, buf: WskBuf, irp: *mut Irp) {
        let bytes = sent(&buf);
        let peer = {
            let inner = self.lock();
            let me = &inner.sockets[sock];
            me.peer.filter(|p| !me.reset && !inner.sockets[*p].closed)
        };
        let Some(peer) = peer else {
            complete(irp, STATUS_CONNECTION_RESET, 0);
            return;
        };
        self.indicate(peer, &bytes);
        complete(irp, STATUS_SUCCESS, bytes.len());
    }

    /// Indicates `data` to socket `sock` as two elements of MDL chains cut
    /// into `piece`-byte MDLs, the first starting 2 bytes into its MDL.
    fn indicate(&self, sock: usize, data: &[u8]) {
        let (context, dispatch, events, closed) = {
            let inner = self.lock();
            let s = &inner.sockets[sock];
            (s.context, s.conn_dispatch, s.events, s.closed)
        };
        if closed || events & WSK_EVENT_RECEIVE == 0 || data.is_empty() {
            return;
        }
        let half = data.len() / 2;
        let parts = [&data[..half], &data[half..]];
        let mut storage: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut chains: Vec<Vec<Mdl>> = Vec::new();
        let mut elements: Vec<WskDataIndication> = Vec::new();
        for part in parts {
            storage.push(pieces(part, self.piece, 0xEE));
            chains.push(chain_of(storage.last_mut().unwrap()));
            elements.push(WskDataIndication {
                next: core::ptr::null_mut(),
                buffer: buf_over(chains.last_mut().unwrap(), part.len()),
            });
        }
        let base = elements.as_mut_ptr();
        elements[0].next = base.wrapping_add(1);
        let mut accepted = 0;
        // SAFETY: the client's connection table (static in the glue).
        let receive = unsafe { (*dispatch).wsk_receive_event }.unwrap();
        // SAFETY: the client's receive event with a valid list and chains,
        // alive for the call.
        let status = unsafe { receive(context, 0, base, data.len(), &raw mut accepted) };
        assert_eq!(status, STATUS_SUCCESS, "the glue takes every byte");
    }

    fn indicate_disconnect(&self, sock: usize, abortive: bool) {
        let (context, dispatch, events, closed) = {
            let inner = self.lock();
            let s = &inner.sockets[sock];
            (s.context, s.conn_dispatch, s.events, s.closed)
        };
        if closed || events & WSK_EVENT_DISCONNECT == 0 {
            return;
        }
        // SAFETY: the client's connection table (static in the glue).
        let disconnect = unsafe { (*dispatch).wsk_disconnect_event }.unwrap();
        let flags = if abortive { WSK_FLAG_ABORTIVE } else { 0 };
        // SAFETY: the client's disconnect event for a live socket.
        let status = unsafe { disconnect(context, flags) };
        assert_eq!(status, STATUS_SUCCESS);
    }
}

pub(crate) fn complete(irp: *mut Irp, status: NtStatus, information: usize) {
    // SAFETY: an IRP the client passed with a request still in flight.
    unsafe { irp::complete(irp, status, information) };
}

/// The provider and socket id of a socket pointer from the client.
fn socket_of(socket: *mut WskSocket) -> (&'static Provider, usize) {
    let fake = socket.cast::<FakeSocket>();
    // SAFETY: every socket the client has is a leaked `FakeSocket`.
    let (provider, id) = unsafe { core::ptr::read(fake) }.split();
    // SAFETY: the provider is leaked.
    (unsafe { &*provider }, id)
}

fn provider_of(client: WskClientHandle) -> &'static Provider {
    // SAFETY: the client handle is the leaked provider (`Provider::client`).
    unsafe { &*client.cast::<Provider>() }
}

fn addr_of(addr: *mut SockAddr) -> Option<SocketAddr> {
    // SAFETY: the client passes valid SOCKADDR_IN / _IN6 or null.
    unsafe { from_sockaddr(addr) }
}

// --- Provider dispatch functions -------------------------------------------------

unsafe extern "system" fn p_socket(
    client: WskClientHandle,
    _family: u16,
    socket_type: u16,
    protocol: u32,
    flags: u32,
    context: *mut c_void,
    dispatch: *const c_void,
    _process: *mut c_void,
    _thread: *mut c_void,
    _sd: *mut c_void,
    irp: *mut Irp,
) -> NtStatus {
    if flags == crate::abi::WSK_FLAG_DATAGRAM_SOCKET {
        assert_eq!(
            (socket_type, protocol),
            (crate::abi::SOCK_DGRAM, crate::abi::IPPROTO_UDP)
        );
        return dgram_create(provider_of(client), context, dispatch, irp);
    }
    assert_eq!(
        (socket_type, protocol, flags),
        (SOCK_STREAM, IPPROTO_TCP, WSK_FLAG_LISTEN_SOCKET)
    );
    provider_of(client).push(Op::Create {
        irp,
        context,
        dispatch,
    });
    STATUS_PENDING
}

unsafe extern "system" fn p_socket_connect(
    client: WskClientHandle,
    socket_type: u16,
    protocol: u32,
    local: *mut SockAddr,
    remote: *mut SockAddr,
    _flags: u32,
    context: *mut c_void,
    dispatch: *const WskClientConnectionDispatch,
    _process: *mut c_void,
    _thread: *mut c_void,
    _sd: *mut c_void,
    irp: *mut Irp,
) -> NtStatus {
    assert_eq!((socket_type, protocol), (SOCK_STREAM, IPPROTO_TCP));
    provider_of(client).push(Op::Connect {
        irp,
        local: addr_of(local),
        remote: addr_of(remote),
        context,
        dispatch,
    });
    STATUS_PENDING
}

unsafe extern "system" fn p_control_client(
    _client: WskClientHandle,
    _code: u32,
    _in_size: usize,
    _input: *mut c_void,
    _out_size: usize,
    _output: *mut c_void,
    _returned: *mut usize,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_unused() {}

unsafe extern "system" fn p_control_socket(
    socket: *mut WskSocket,
    request: WskControlSocketType,
    code: u32,
    level: u32,
    in_size: usize,
    input: *mut c_void,
    _out_size: usize,
    _output: *mut c_void,
    _returned: *mut usize,
    irp: *mut Irp,
) -> NtStatus {
    assert!(irp.is_null(), "event callbacks are enabled without an IRP");
    assert_eq!(
        (request, code, level),
        (WSK_SET_OPTION, SO_WSK_EVENT_CALLBACK, SOL_SOCKET)
    );
    assert_eq!(in_size, core::mem::size_of::<WskEventCallbackControl>());
    let control = input.cast::<WskEventCallbackControl>();
    // SAFETY: the client's input of the size checked above.
    let control = unsafe { control.read() };
    // SAFETY: the NPI id the client points to (a static).
    let (npi, mask) = (unsafe { control.npi_id.read() }, control.event_mask);
    assert_eq!(npi, NPI_WSK_INTERFACE_ID);
    // SAFETY: a socket of this fake, which starts with its dispatch pointer.
    if unsafe { (*socket).dispatch } == (&raw const DGRAM_TABLE).cast() {
        assert_eq!(mask, crate::abi::WSK_EVENT_RECEIVE_FROM);
        dgram_of(socket).events.fetch_or(mask, Ordering::AcqRel);
    } else {
        let (provider, id) = socket_of(socket);
        provider.lock().sockets[id].events |= mask;
    }
    STATUS_SUCCESS
}

/// The bytes a client's `WSK_BUF` describes, copied out at once.
fn sent(buf: &WskBuf) -> Vec<u8> {
    let mut bytes = alloc::vec![0_u8; buf.length];
    // SAFETY: the client's WSK_BUF describes its locked memory (the ring or
    // the datagram's slot), valid until this send completes.
    let n = unsafe {
        copy_from_chain(
            NonNull::new(buf.mdl).unwrap(),
            buf.offset as usize,
            &mut bytes,
        )
    }
    .unwrap();
    assert_eq!(n, buf.length, "the WSK_BUF covers its length");
    bytes
}

/// `data` cut into `piece`-byte buffers, the first starting with two `pad`
/// bytes (so that an indication's data starts 2 bytes into its first MDL).
fn pieces(data: &[u8], piece: usize, pad: u8) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = data.chunks(piece).map(<[u8]>::to_vec).collect();
    if let Some(first) = pieces.first_mut() {
        first.splice(0..0, [pad, pad]);
    }
    pieces
}

/// One nonpaged MDL over each of `storage`'s buffers, linked in order.
fn chain_of(storage: &mut [Vec<u8>]) -> Vec<Mdl> {
    let mut chain: Vec<Mdl> = storage
        .iter_mut()
        .map(|stored| {
            let len = u32::try_from(stored.len()).unwrap();
            Mdl {
                mdl_flags: MDL_SOURCE_IS_NONPAGED_POOL,
                mapped_system_va: stored.as_mut_ptr().cast(),
                ..Mdl::over(stored.as_mut_ptr().cast(), 0, len)
            }
        })
        .collect();
    let base = chain.as_mut_ptr();
    for i in 1..chain.len() {
        chain[i - 1].next = base.wrapping_add(i);
    }
    chain
}

/// The `WSK_BUF` of `length` bytes over a chain from [`chain_of`] of
/// [`pieces`] (2 bytes into its first MDL; no MDL when empty).
fn buf_over(chain: &mut [Mdl], length: usize) -> WskBuf {
    WskBuf {
        mdl: if chain.is_empty() {
            core::ptr::null_mut()
        } else {
            chain.as_mut_ptr()
        },
        offset: 2,
        padding_0c: 0,
        length,
    }
}

unsafe extern "system" fn p_close(socket: *mut WskSocket, irp: *mut Irp) -> NtStatus {
    let (provider, sock) = socket_of(socket);
    provider.lock().closes += 1;
    provider.push(Op::Close { sock, irp });
    STATUS_PENDING
}

unsafe extern "system" fn p_bind(
    socket: *mut WskSocket,
    local: *mut SockAddr,
    _flags: u32,
    irp: *mut Irp,
) -> NtStatus {
    let (provider, sock) = socket_of(socket);
    provider.push(Op::Bind {
        sock,
        addr: addr_of(local),
        irp,
    });
    STATUS_PENDING
}

unsafe extern "system" fn p_connect(
    _socket: *mut WskSocket,
    _remote: *mut SockAddr,
    _flags: u32,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_connect_ex(
    _socket: *mut WskSocket,
    _remote: *mut SockAddr,
    _buffer: *mut WskBuf,
    _flags: u32,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_accept(
    _socket: *mut WskSocket,
    _flags: u32,
    _context: *mut c_void,
    _dispatch: *const WskClientConnectionDispatch,
    _local: *mut SockAddr,
    _remote: *mut SockAddr,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_inspect_complete(
    _socket: *mut WskSocket,
    _id: *mut c_void,
    _action: u32,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_get_address(
    _socket: *mut WskSocket,
    _address: *mut SockAddr,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_send(
    socket: *mut WskSocket,
    buffer: *mut WskBuf,
    _flags: u32,
    irp: *mut Irp,
) -> NtStatus {
    let (provider, sock) = socket_of(socket);
    // SAFETY: the client's WSK_BUF, valid for the call.
    let buf = unsafe { *buffer };
    {
        let mut inner = provider.lock();
        inner.sends += 1;
        assert!(!inner.sockets[sock].closed, "no send after close");
    }
    if provider.inline_sends.load(Ordering::Relaxed) {
        // Completes inside the call, as WSK may.
        provider.send(sock, buf, irp);
        return STATUS_SUCCESS;
    }
    provider.push(Op::Send { sock, buf, irp });
    STATUS_PENDING
}

unsafe extern "system" fn p_receive(
    _socket: *mut WskSocket,
    _buffer: *mut WskBuf,
    _flags: u32,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn p_disconnect(
    socket: *mut WskSocket,
    buffer: *mut WskBuf,
    flags: u32,
    irp: *mut Irp,
) -> NtStatus {
    assert!(buffer.is_null());
    let (provider, sock) = socket_of(socket);
    let abortive = flags & WSK_FLAG_ABORTIVE != 0;
    provider.lock().disconnects.push(abortive);
    // An abortive disconnect cancels the sends still held.
    if abortive {
        let cancelled: Vec<*mut Irp> = {
            let mut inner = provider.lock();
            let mut keep = VecDeque::new();
            let mut cancelled = Vec::new();
            for op in inner.held.drain(..) {
                match op {
                    Op::Send { sock: s, irp, .. } if s == sock => cancelled.push(irp),
                    other => keep.push_back(other),
                }
            }
            inner.held = keep;
            cancelled
        };
        for irp in cancelled {
            complete(irp, STATUS_CANCELLED, 0);
        }
    }
    provider.push(Op::Disconnect {
        sock,
        abortive,
        irp,
    });
    STATUS_PENDING
}

unsafe extern "system" fn p_release(
    _socket: *mut WskSocket,
    _indication: *mut WskDataIndication,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

static PROVIDER_DISPATCH: WskProviderDispatch = WskProviderDispatch {
    version: crate::abi::WSK_VERSION_1_0,
    reserved: 0,
    padding_04: 0,
    wsk_socket: p_socket,
    wsk_socket_connect: p_socket_connect,
    wsk_control_client: p_control_client,
    wsk_get_address_info: p_unused,
    wsk_free_address_info: p_unused,
    wsk_get_name_info: p_unused,
};

static LISTEN_TABLE: WskProviderListenDispatch = WskProviderListenDispatch {
    basic: WskProviderBasicDispatch {
        wsk_control_socket: p_control_socket,
        wsk_close_socket: p_close,
    },
    wsk_bind: p_bind,
    wsk_accept: p_accept,
    wsk_inspect_complete: p_inspect_complete,
    wsk_get_local_address: p_get_address,
};

static CONNECTION_TABLE: WskProviderConnectionDispatch = WskProviderConnectionDispatch {
    basic: WskProviderBasicDispatch {
        wsk_control_socket: p_control_socket,
        wsk_close_socket: p_close,
    },
    wsk_bind: p_bind,
    wsk_connect: p_connect,
    wsk_get_local_address: p_get_address,
    wsk_get_remote_address: p_get_address,
    wsk_send: p_send,
    wsk_receive: p_receive,
    wsk_disconnect: p_disconnect,
    wsk_release: p_release,
    wsk_connect_ex: p_connect_ex,
};

// --- Datagram sockets ------------------------------------------------------------
//
// Datagram sockets (`WSK_FLAG_DATAGRAM_SOCKET`) over `std::net::UdpSocket`s
// bound on 127.0.0.1. Each provider plays one machine with the "virtual"
// addresses the test gives it ([`Provider::set_dgram_addrs`]); a socket
// bound to a virtual address (the wildcard: the machine's address of that
// family) gets a real loopback socket, and the table `WORLD.net` maps one to
// the other, so several machines can each bind port 4789 and nothing leaves
// 127.0.0.1. Create, bind and close complete inside the call (the inline
// path); sends complete inside the call too unless the provider holds them
// ([`Provider::hold_dgram_sends`]). A thread per bound socket receives and
// indicates each datagram as a chain of `piece`-byte MDLs whose first
// starts 2 bytes in; closing waits for it, cancels the held sends and then
// completes the close, after which no event is called.

/// A datagram socket: `WSK_SOCKET` first, so that the client's pointer is
/// this.
#[repr(C)]
struct DgramSocket {
    base: WskSocket,
    shared: Arc<DgramShared>,
}

struct DgramState {
    udp: Option<Arc<std::net::UdpSocket>>,
    virt: Option<SocketAddr>,
    thread_running: bool,
    close_irp: Option<usize>,
    closed: bool,
}

struct DgramShared {
    provider: &'static Provider,
    context: usize,
    dispatch: usize,
    events: core::sync::atomic::AtomicU32,
    closing: AtomicBool,
    state: Mutex<DgramState>,
}

struct Held {
    shared: Arc<DgramShared>,
    bytes: Vec<u8>,
    to: Option<SocketAddr>,
    irp: usize,
}

#[derive(Default)]
struct World {
    /// Provider address → its machine's virtual addresses.
    machines: Vec<(usize, Vec<core::net::IpAddr>)>,
    /// Virtual address → real loopback address of a socket, and whether
    /// it is still bound (a closed socket's entry stays, so that datagrams
    /// it sent before closing still name it as their source, until its
    /// loopback port is reused).
    net: Vec<(SocketAddr, SocketAddr, bool)>,
    /// Providers whose sends are held.
    holding: Vec<usize>,
    held: Vec<Held>,
    next_port: u16,
}

static WORLD: Mutex<World> = Mutex::new(World {
    machines: Vec::new(),
    net: Vec::new(),
    holding: Vec::new(),
    held: Vec::new(),
    next_port: 0,
});

fn world() -> std::sync::MutexGuard<'static, World> {
    WORLD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn provider_key(provider: &Provider) -> usize {
    core::ptr::from_ref(provider) as usize
}

impl Provider {
    /// The virtual addresses of this provider's machine (one per family).
    pub(crate) fn set_dgram_addrs(&'static self, ips: &[core::net::IpAddr]) {
        let key = provider_key(self);
        let mut world = world();
        world.machines.retain(|(k, _)| *k != key);
        world.machines.push((key, ips.to_vec()));
    }

    /// Holds this provider's datagram sends (`true`), or carries out those
    /// held and stops holding (`false`).
    pub(crate) fn hold_dgram_sends(&'static self, hold: bool) {
        let key = provider_key(self);
        let released: Vec<Held> = {
            let mut world = world();
            world.holding.retain(|k| *k != key);
            if hold {
                world.holding.push(key);
                Vec::new()
            } else {
                let (mine, rest): (Vec<Held>, Vec<Held>) = world
                    .held
                    .drain(..)
                    .partition(|h| provider_key(h.shared.provider) == key);
                world.held = rest;
                mine
            }
        };
        for held in released {
            dgram_transmit(&held.shared, &held.bytes, held.to);
            complete(held.irp as *mut Irp, STATUS_SUCCESS, held.bytes.len());
        }
    }

    /// Datagram sends held now.
    pub(crate) fn held_dgram_sends(&'static self) -> usize {
        let key = provider_key(self);
        world()
            .held
            .iter()
            .filter(|h| provider_key(h.shared.provider) == key)
            .count()
    }

    /// The real loopback address behind a bound virtual address.
    pub(crate) fn dgram_real(virt: SocketAddr) -> Option<SocketAddr> {
        world()
            .net
            .iter()
            .rev()
            .find(|(v, _, live)| *v == virt && *live)
            .map(|(_, r, _)| *r)
    }

    /// Binds a plain std socket as virtual address `virt` (a test's own
    /// sender or receiver on the fake network).
    pub(crate) fn dgram_plain(virt: SocketAddr) -> std::net::UdpSocket {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        register(virt, udp.local_addr().unwrap());
        udp
    }

    /// The virtual address of a real one, if bound.
    pub(crate) fn dgram_virtual(real: SocketAddr) -> Option<SocketAddr> {
        world()
            .net
            .iter()
            .rev()
            .find(|(_, r, _)| *r == real)
            .map(|(v, _, _)| *v)
    }
}

/// Maps `virt` to `real`. A loopback port is reused once its socket is
/// gone (a test's plain socket is not unregistered): an older mapping of
/// the same real address is dropped, so it cannot name a later socket.
fn register(virt: SocketAddr, real: SocketAddr) {
    let mut world = world();
    world.net.retain(|(_, r, _)| *r != real);
    world.net.push((virt, real, true));
}

/// Sends `bytes` from `shared`'s socket to virtual address `to` (dropped, as
/// UDP drops, when nothing is bound there).
fn dgram_transmit(shared: &DgramShared, bytes: &[u8], to: Option<SocketAddr>) {
    let udp = shared.state.lock().unwrap().udp.clone();
    let real = to.and_then(Provider::dgram_real);
    if let (Some(udp), Some(real)) = (udp, real) {
        let _ = udp.send_to(bytes, real);
    }
}

fn dgram_of(socket: *mut WskSocket) -> Arc<DgramShared> {
    // SAFETY: every datagram socket the client has is a leaked `DgramSocket`.
    Arc::clone(unsafe { &(*socket.cast::<DgramSocket>()).shared })
}

fn dgram_create(
    provider: &'static Provider,
    context: *mut c_void,
    dispatch: *const c_void,
    irp: *mut Irp,
) -> NtStatus {
    let shared = Arc::new(DgramShared {
        provider,
        context: context as usize,
        dispatch: dispatch as usize,
        events: core::sync::atomic::AtomicU32::new(0),
        closing: AtomicBool::new(false),
        state: Mutex::new(DgramState {
            udp: None,
            virt: None,
            thread_running: false,
            close_irp: None,
            closed: false,
        }),
    });
    let socket = Box::leak(Box::new(DgramSocket {
        base: WskSocket {
            dispatch: (&raw const DGRAM_TABLE).cast(),
        },
        shared,
    }));
    complete(irp, STATUS_SUCCESS, core::ptr::from_mut(socket) as usize);
    STATUS_SUCCESS
}

unsafe extern "system" fn d_bind(
    socket: *mut WskSocket,
    local: *mut SockAddr,
    _flags: u32,
    irp: *mut Irp,
) -> NtStatus {
    let shared = dgram_of(socket);
    let status = dgram_bind(&shared, addr_of(local).unwrap());
    complete(irp, status, 0);
    status
}

fn dgram_bind(shared: &Arc<DgramShared>, asked: SocketAddr) -> NtStatus {
    let key = provider_key(shared.provider);
    let virt = {
        let mut world = world();
        let ip = if asked.ip().is_unspecified() {
            let ips = world
                .machines
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, ips)| ips.clone())
                .unwrap_or_default();
            let Some(ip) = ips.into_iter().find(|ip| ip.is_ipv4() == asked.is_ipv4()) else {
                return crate::abi::STATUS_INVALID_PARAMETER;
            };
            ip
        } else {
            asked.ip()
        };
        let port = if asked.port() == 0 {
            world.next_port = world.next_port.wrapping_add(1);
            50_000 + world.next_port % 10_000
        } else {
            asked.port()
        };
        let virt = SocketAddr::new(ip, port);
        if world.net.iter().any(|(v, _, live)| *v == virt && *live) {
            return STATUS_ADDRESS_ALREADY_EXISTS;
        }
        virt
    };
    let udp = Arc::new(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    udp.set_read_timeout(Some(std::time::Duration::from_millis(20)))
        .unwrap();
    register(virt, udp.local_addr().unwrap());
    {
        let mut state = shared.state.lock().unwrap();
        state.udp = Some(Arc::clone(&udp));
        state.virt = Some(virt);
        state.thread_running = true;
    }
    let receiver = Arc::clone(shared);
    std::thread::Builder::new()
        .name("wsk-test-dgram".into())
        .spawn(move || dgram_receive_loop(&receiver, &udp))
        .unwrap();
    STATUS_SUCCESS
}

/// Receives and indicates until the socket closes (or two minutes pass: a
/// bound), then completes a pending close.
fn dgram_receive_loop(shared: &Arc<DgramShared>, udp: &std::net::UdpSocket) {
    let start = std::time::Instant::now();
    let mut buf = alloc::vec![0_u8; 65_536];
    while !shared.closing.load(Ordering::Acquire)
        && start.elapsed() < std::time::Duration::from_mins(2)
    {
        let Ok((n, real)) = udp.recv_from(&mut buf) else {
            continue;
        };
        let Some(from) = Provider::dgram_virtual(real) else {
            continue;
        };
        if shared.events.load(Ordering::Acquire) & crate::abi::WSK_EVENT_RECEIVE_FROM != 0
            && !shared.closing.load(Ordering::Acquire)
        {
            dgram_indicate(shared, from, &buf[..n]);
        }
    }
    let close_irp = {
        let mut state = shared.state.lock().unwrap();
        state.thread_running = false;
        state.close_irp.take()
    };
    if let Some(irp) = close_irp {
        dgram_finish_close(shared, irp);
    }
}

/// Indicates one datagram as one `WSK_DATAGRAM_INDICATION` whose chain is
/// cut into `piece`-byte MDLs, the first starting 2 bytes in.
fn dgram_indicate(shared: &DgramShared, from: SocketAddr, data: &[u8]) {
    let mut storage = pieces(data, shared.provider.piece.max(1), 0xDD);
    let mut chain = chain_of(&mut storage);
    let mut remote = to_sockaddr(from);
    let mut indication = crate::abi::WskDatagramIndication {
        next: core::ptr::null_mut(),
        buffer: buf_over(&mut chain, data.len()),
        control_info: core::ptr::null_mut(),
        control_info_length: 0,
        padding_2c: 0,
        remote_address: (&raw mut remote).cast(),
    };
    let dispatch = shared.dispatch as *const crate::abi::WskClientDatagramDispatch;
    // SAFETY: the client's datagram table (static in the glue).
    let event = unsafe { (*dispatch).wsk_receive_from_event }.unwrap();
    // SAFETY: the client's event with a valid one-element list, alive for
    // the call.
    let status = unsafe { event(shared.context as *mut c_void, 0, &raw mut indication) };
    assert_eq!(status, STATUS_SUCCESS, "the glue never retains a datagram");
}

fn dgram_finish_close(shared: &Arc<DgramShared>, irp: usize) {
    let cancelled: Vec<Held> = {
        let mut world = world();
        let (mine, rest): (Vec<Held>, Vec<Held>) = world
            .held
            .drain(..)
            .partition(|h| Arc::ptr_eq(&h.shared, shared));
        world.held = rest;
        let virt = shared.state.lock().unwrap().virt;
        for entry in &mut world.net {
            if Some(entry.0) == virt {
                entry.2 = false;
            }
        }
        mine
    };
    for held in cancelled {
        complete(held.irp as *mut Irp, STATUS_CANCELLED, 0);
    }
    shared.state.lock().unwrap().closed = true;
    complete(irp as *mut Irp, STATUS_SUCCESS, 0);
}

unsafe extern "system" fn d_close(socket: *mut WskSocket, irp: *mut Irp) -> NtStatus {
    let shared = dgram_of(socket);
    shared.closing.store(true, Ordering::Release);
    let now = {
        let mut state = shared.state.lock().unwrap();
        assert!(state.close_irp.is_none() && !state.closed, "closed twice");
        if state.thread_running {
            state.close_irp = Some(irp as usize);
            false
        } else {
            true
        }
    };
    if now {
        dgram_finish_close(&shared, irp as usize);
        return STATUS_SUCCESS;
    }
    STATUS_PENDING
}

unsafe extern "system" fn d_send_to(
    socket: *mut WskSocket,
    buffer: *mut WskBuf,
    _flags: u32,
    remote: *mut SockAddr,
    _control_length: u32,
    _control: *mut c_void,
    irp: *mut Irp,
) -> NtStatus {
    let shared = dgram_of(socket);
    {
        let state = shared.state.lock().unwrap();
        assert!(
            state.udp.is_some() && state.close_irp.is_none() && !state.closed,
            "a send on a bound, open socket"
        );
    }
    // SAFETY: the client's WSK_BUF, valid for the call.
    let buf = unsafe { *buffer };
    let bytes = sent(&buf);
    let to = addr_of(remote);
    let key = provider_key(shared.provider);
    {
        let mut world = world();
        if world.holding.contains(&key) {
            world.held.push(Held {
                shared: Arc::clone(&shared),
                bytes,
                to,
                irp: irp as usize,
            });
            return STATUS_PENDING;
        }
    }
    dgram_transmit(&shared, &bytes, to);
    complete(irp, STATUS_SUCCESS, bytes.len());
    STATUS_SUCCESS
}

unsafe extern "system" fn d_receive_from(
    _socket: *mut WskSocket,
    _buffer: *mut WskBuf,
    _flags: u32,
    _remote: *mut SockAddr,
    _control_length: *mut u32,
    _control: *mut c_void,
    _control_flags: *mut u32,
    _irp: *mut Irp,
) -> NtStatus {
    STATUS_NOT_SUPPORTED
}

unsafe extern "system" fn d_release(
    _socket: *mut WskSocket,
    _indication: *mut crate::abi::WskDatagramIndication,
) -> NtStatus {
    panic!("the glue never retains a datagram, so never releases one");
}

static DGRAM_TABLE: crate::abi::WskProviderDatagramDispatch =
    crate::abi::WskProviderDatagramDispatch {
        basic: WskProviderBasicDispatch {
            wsk_control_socket: p_control_socket,
            wsk_close_socket: d_close,
        },
        wsk_bind: d_bind,
        wsk_send_to: d_send_to,
        wsk_receive_from: d_receive_from,
        wsk_release: d_release,
        wsk_get_local_address: p_get_address,
        wsk_send_messages: p_unused,
    };
