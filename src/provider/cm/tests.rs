//! A consumer driving the C dispatch tables, adapters opened through
//! `SoftNdkOpenAdapter`. Every test uses its own addresses (127.1.T.x),
//! since all tests share the process's fabric.

use alloc::vec;
use alloc::vec::Vec;
use core::ptr::{null, null_mut};
use std::sync::Mutex;

use super::*;
use crate::abi::{
    NdkAdapter, NdkAdapterDispatch, NdkCq, NdkFnCloseObject, NdkPd, NdkQpDispatch, NdkSge,
    STATUS_CANCELLED,
};
use crate::kernel::testing::wait_until;
use crate::provider::host::{SoftNdkCloseAdapter, SoftNdkOpenAdapter};
use crate::provider::testing;

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
    /// A request completion logging here, and its context.
    fn completion(&self) -> (Option<NdkFnRequestCompletion>, *mut c_void) {
        (Some(on_request), self.ctx())
    }
    /// A disconnect indication logging here, and its context.
    fn indication(&self) -> (Option<NdkFnDisconnectEventCallback>, *mut c_void) {
        (Some(on_indication), self.ctx())
    }
    fn take(&self) -> Vec<NtStatus> {
        core::mem::take(
            &mut *self
                .0
                .lock()
                .expect("no test thread panicked holding the log"),
        )
    }
    fn push(ctx: *mut c_void, status: NtStatus) {
        // SAFETY: every context the tests pass is a `Log` that outlives
        // the objects whose callbacks use it.
        let log = unsafe { &*ctx.cast::<Self>() };
        log.0
            .lock()
            .expect("no test thread panicked holding the log")
            .push(status);
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

/// Connectors handed over by connect events.
#[derive(Default)]
struct Requests(Mutex<Vec<usize>>);

impl Requests {
    fn ctx(&self) -> *mut c_void {
        core::ptr::from_ref(self).cast_mut().cast()
    }
    fn next(&self) -> Option<Conn> {
        let mut queue = self
            .0
            .lock()
            .expect("no test thread panicked holding the queue");
        (!queue.is_empty()).then(|| Conn(queue.remove(0) as *mut NdkConnector))
    }
}

unsafe extern "system" fn on_connect(ctx: *mut c_void, connector: *mut NdkConnector) {
    // SAFETY: the context is a `Requests` that outlives its listener.
    let requests = unsafe { &*ctx.cast::<Requests>() };
    requests
        .0
        .lock()
        .expect("no test thread panicked holding the queue")
        .push(connector as usize);
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

/// Private data as a slot takes it: pointer and length.
fn bytes(data: &[u8]) -> (*const c_void, u32) {
    (
        data.as_ptr().cast(),
        u32::try_from(data.len()).expect("test private data is short"),
    )
}

/// Test `t`'s address number `n`.
const fn ip(t: u8, n: u8) -> [u8; 4] {
    [127, 1, t, n]
}

/// Reads an address a getter wrote.
fn parse(buffer: &[u8; 28]) -> Endpoint {
    // SAFETY: a 28-byte buffer holds either structure.
    unsafe { read_address(buffer.as_ptr().cast(), 28) }.expect("the getter wrote a valid address")
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
        wait_until("the pending close completes", || {
            crate::kernel::deferred::flush();
            log.take() == vec![CLOSED]
        });
    } else {
        assert_eq!(status, STATUS_SUCCESS);
    }
}

/// Two adapters on 127.1.`t`.1 and 127.1.`t`.2 (one test's addresses).
fn two(t: u8) -> (Adapter, Adapter) {
    (
        Adapter::open(v4(ip(t, 1), 0)),
        Adapter::open(v4(ip(t, 2), 0)),
    )
}

/// Closes both adapters of [`two`].
fn close_two(a: Adapter, b: Adapter) {
    a.close();
    b.close();
}

/// Two adapters and the connect requests a listener of theirs records.
fn two_requests(t: u8) -> (Adapter, Adapter, Requests) {
    let (a, b) = two(t);
    (a, b, Requests::default())
}

/// A listener of `b` on 127.1.`t`.2 port 1, listening.
fn listening(b: &Adapter, requests: &Requests, t: u8) -> Listen {
    let listener = b.listener(requests);
    assert_eq!(listener.listen(v4(ip(t, 2), 1)), STATUS_SUCCESS);
    listener
}

/// The arrange step of the handshake tests: test `t`'s two adapters with
/// a QP side each, `b` listening on 127.1.`t`.2 port `port`, and the logs of
/// one handshake.
struct Rig {
    t: u8,
    port: u16,
    a: Adapter,
    b: Adapter,
    requests: Box<Requests>,
    listener: Listen,
    sa: Side,
    sb: Side,
    /// Request completions of the active and the passive side.
    la: Box<Log>,
    lb: Box<Log>,
    /// Disconnect indications of the active and the passive side.
    ia: Box<Log>,
    ib: Box<Log>,
}

impl Rig {
    fn new(t: u8, port: u16) -> Self {
        let (a, b) = two(t);
        let requests = Box::new(Requests::default());
        let listener = b.listener(&requests);
        assert_eq!(listener.listen(v4(ip(t, 2), port)), STATUS_SUCCESS);
        let (sa, sb) = (Side::new(&a), Side::new(&b));
        let log = || Box::new(Log::default());
        let (la, lb, ia, ib) = (log(), log(), log(), log());
        Self {
            t,
            port,
            a,
            b,
            requests,
            listener,
            sa,
            sb,
            la,
            lb,
            ia,
            ib,
        }
    }

    /// `c` connects side `a` to the listener with these read limits.
    fn connect(&self, c: Conn, inbound: u32, outbound: u32, data: &[u8]) -> NtStatus {
        let (src, dst) = (v4(ip(self.t, 1), 0), v4(ip(self.t, 2), self.port));
        c.connect(&self.sa, src, dst, inbound, outbound, data, &self.la)
    }

    /// Closes the listener, the sides and the adapters (the test closed
    /// its connectors).
    fn close(self) {
        close(self.listener.0.cast());
        self.sa.close();
        self.sb.close();
        self.a.close();
        self.b.close();
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
        testing::new_cq(self.0, 64)
    }

    fn pd(&self) -> *mut NdkPd {
        testing::new_pd(self.0)
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
        let qp = testing::new_qp(pd, cq);
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
        testing::cq_results(self.cq)
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
            (self.d().ndk_get_local_address)(self.0, buffer.as_mut_ptr().cast(), &raw mut length)
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
        let ((s, sn), (d, dn), (p, pn)) = (src.raw(), dst.raw(), bytes(data));
        let (c, qp, (done, cx)) = (self.0, side.qp, log.completion());
        // SAFETY: valid arguments; `log` outlives the request.
        unsafe { (self.d().ndk_connect)(c, qp, s, sn, d, dn, ird, ord, p, pn, done, cx) }
    }

    fn connect_shared(
        &self,
        side: &Side,
        endpoint: *mut NdkSharedEndpoint,
        dst: Addr,
        log: &Log,
    ) -> NtStatus {
        let ((d, dn), (p, pn)) = (dst.raw(), bytes(&[]));
        let (c, qp, (done, cx)) = (self.0, side.qp, log.completion());
        let connect = self.d().ndk_connect_with_shared_endpoint;
        // SAFETY: valid arguments; `log` outlives the request.
        unsafe { connect(c, qp, endpoint, d, dn, 8, 8, p, pn, done, cx) }
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
        let (p, pn) = bytes(data);
        let (event, ecx) = indications.indication();
        let (c, qp, (done, cx)) = (self.0, side.qp, log.completion());
        // SAFETY: valid arguments; the logs outlive the request.
        unsafe { (self.d().ndk_accept)(c, qp, ird, ord, p, pn, event, ecx, done, cx) }
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
        let (p, pn) = bytes(data);
        // SAFETY: valid arguments.
        unsafe { (self.d().ndk_reject)(self.0, p, pn) }
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
        let (limits, at) = ((&raw mut ird, &raw mut ord), &raw mut length);
        // SAFETY: the buffer holds `length` bytes.
        let status =
            unsafe { (self.d().ndk_get_connection_data)(self.0, limits.0, limits.1, ptr, at) };
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
        if log
            .0
            .lock()
            .expect("no test thread panicked holding it")
            .len()
            >= n
        {
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

/// Two adapters ([`two`]) and a connection between them, 127.1.`t`.1 to
/// 127.1.`t`.2 port 1.
fn two_established(t: u8) -> (Adapter, Adapter, Established) {
    let (a, b) = two(t);
    let e = establish(&a, &b, v4(ip(t, 1), 0), v4(ip(t, 2), 1));
    (a, b, e)
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
    let r = Rig::new(1, 445);
    let (requests, sa, sb, la, lb, ia, ib) =
        (&r.requests, &r.sa, &r.sb, &r.la, &r.lb, &r.ia, &r.ib);
    let active = r.a.connector();
    assert_eq!(r.connect(active, 4, 4, b"caller"), STATUS_PENDING);
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
    assert_eq!(passive.accept(sb, 4, 4, b"callee!", ib, lb), STATUS_PENDING);
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
    assert_eq!(active.complete(ia), STATUS_SUCCESS);
    assert_eq!(lb.take(), vec![STATUS_SUCCESS]);
    // The connection carries traffic.
    assert_eq!(sb.receive(1), STATUS_SUCCESS);
    assert_eq!(sa.send(2), STATUS_SUCCESS);
    assert_eq!(sa.results(), vec![(2, STATUS_SUCCESS)]);
    assert_eq!(sb.results(), vec![(1, STATUS_SUCCESS)]);
    // N14: CompleteConnect again: not connecting.
    assert_eq!(active.complete(ia), STATUS_CONNECTION_INVALID);
    active.close();
    passive.close();
    r.close();
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
    auto.connectors
        .lock()
        .expect("no test thread panicked holding it")
        .push(connector as usize);
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
    let (a, b) = two(16);
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
    for p in auto
        .connectors
        .lock()
        .expect("no test thread panicked holding it")
        .drain(..)
    {
        Conn(p as *mut NdkConnector).close();
    }
    close(listener.0.cast());
    sa.close();
    sb.close();
    close_two(a, b);
}

#[test]
fn test_addresses_rule_n22() {
    let (a, b, requests) = two_requests(2);
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
    let passive = requests.next().expect("the connect request was indicated");
    let (_, _, buffer) = passive.address(true, 28);
    assert_eq!(parse(&buffer), Endpoint::new(IpAddr::V4(ip(2, 1)), 7777));
    // Shared endpoint, port 0 (N9).
    let e = a
        .endpoint(v4(ip(2, 1), 0))
        .expect("the shared endpoint is created");
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
    close_two(a, b);
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
    let r = Rig::new(4, 1);
    let (requests, la, lb) = (&r.requests, &r.la, &r.lb);
    // Passive side rejects: Connect fails refused.
    let c1 = r.a.connector();
    assert_eq!(r.connect(c1, 1, 1, b""), STATUS_PENDING);
    let p1 = requests.next().expect("the connect request was indicated");
    assert_eq!(p1.reject(b"busy"), STATUS_SUCCESS);
    assert_eq!(la.take(), vec![STATUS_CONNECTION_REFUSED]);
    // Active side rejects after Connect completed: Accept fails aborted.
    let c2 = r.a.connector();
    assert_eq!(r.connect(c2, 1, 1, b""), STATUS_PENDING);
    let p2 = requests.next().expect("the connect request was indicated");
    assert_eq!(p2.accept(&r.sb, 1, 1, b"", &r.ib, lb), STATUS_PENDING);
    assert_eq!(la.take(), vec![STATUS_SUCCESS]);
    assert_eq!(c2.reject(b""), STATUS_SUCCESS);
    assert_eq!(lb.take(), vec![STATUS_CONNECTION_ABORTED]);
    // N28: both QPs untouched, reusable: connect them now.
    let c3 = r.a.connector();
    assert_eq!(r.connect(c3, 1, 1, b""), STATUS_PENDING);
    let p3 = requests.next().expect("the connect request was indicated");
    // The active side abandons (closes): Reject answers aborted (N16).
    c3.close();
    assert_eq!(la.take(), vec![STATUS_CANCELLED]);
    assert_eq!(p3.reject(b""), STATUS_CONNECTION_ABORTED);
    for c in [c1, c2, p1, p2, p3] {
        c.close();
    }
    r.close();
}

#[test]
fn test_refused_without_paused_or_closing_listener_rule_n5_n6_n12() {
    let (a, b) = two(5);
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
    let passive = requests.next().expect("the connect request was indicated");
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
    close_two(a, b);
}

#[test]
fn test_duplicate_listen_and_private_data_limits_rule_n7_n17() {
    let (a, b) = two(6);
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
    let passive = requests.next().expect("the connect request was indicated");
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
    close_two(a, b);
}

#[test]
fn test_shared_endpoint_four_tuple_rule_n10_n11() {
    let (a, b, requests) = two_requests(7);
    let listener = listening(&b, &requests, 7);
    let e = a
        .endpoint(v4(ip(7, 1), 3000))
        .expect("the shared endpoint is created");
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
    let status = unsafe { (d.ndk_close_shared_endpoint)(e.cast(), Some(on_close), closing.ctx()) };
    assert_eq!(status, STATUS_PENDING);
    assert_eq!(
        a.endpoint(v4(ip(7, 1), 3000)).err(),
        Some(STATUS_SHARING_VIOLATION)
    );
    c1.close();
    assert_eq!(closing.take(), vec![CLOSED]);
    let again = a
        .endpoint(v4(ip(7, 1), 3000))
        .expect("the shared endpoint is created");
    close(again.cast());
    c2.close();
    while let Some(p) = requests.next() {
        p.close();
    }
    close(listener.0.cast());
    s1.close();
    s2.close();
    close_two(a, b);
}

#[test]
fn test_read_limits_rule_n20() {
    let r = Rig::new(8, 1);
    let c = r.a.connector();
    // 1000 is above the adapter's MaxOutboundReadLimit (128).
    assert_eq!(r.connect(c, 3, 1000, b""), STATUS_PENDING);
    let p = r
        .requests
        .next()
        .expect("the connect request was indicated");
    assert_eq!(p.data(None).2, (128, 3));
    assert_eq!(p.accept(&r.sb, 100, 2, b"", &r.ib, &r.lb), STATUS_PENDING);
    // Effective: inbound min(3, 2), outbound min(128, 100).
    assert_eq!(c.data(None).2, (2, 100));
    c.close();
    p.close();
    r.close();
}

// ----- disconnect --------------------------------------------------------

#[test]
fn test_graceful_disconnect_both_orders_rule_x1_x2_x6() {
    let (a, b) = two(9);
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
    close_two(a, b);
}

#[test]
fn test_simultaneous_disconnect_rule_x3() {
    let (a, b) = two(10);
    for _ in 0..20 {
        let e = establish(&a, &b, v4(ip(10, 1), 0), v4(ip(10, 2), 1));
        let (l1, l2) = (Log::default(), Log::default());
        let (active, passive) = (e.active.0 as usize, e.passive.0 as usize);
        let (c1, c2) = (l1.ctx() as usize, l2.ctx() as usize);
        let barrier = crate::kernel::testing::Barrier::new(2);
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
    close_two(a, b);
}

#[test]
fn test_disconnect_with_outstanding_work_rule_x7() {
    let (a, b, e) = two_established(11);
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
    close_two(a, b);
}

#[test]
fn test_close_connected_connector_is_graceful_disconnect() {
    let (a, b, e) = two_established(12);
    e.active.close();
    assert_eq!(e.ind_b.take(), vec![INDICATED]);
    let log = Log::default();
    assert_eq!(e.passive.disconnect(&log), STATUS_PENDING);
    assert_eq!(wait(&log, 1), vec![STATUS_SUCCESS]);
    e.passive.close();
    close(e.listener.0.cast());
    e.a.close();
    e.b.close();
    close_two(a, b);
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
    close_two(a, b);
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
    let p = requests.next().expect("the connect request was indicated");
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

/// N17 with a consumer's private data length far beyond its limit: the
/// provider reads no more than `MaxCallerData` + 1 bytes to see it is too
/// long and refuses it with `STATUS_INVALID_BUFFER_SIZE`. It used to take
/// the whole length as a slice and copy it (asking the pool for it first):
/// a length of 0xFFFF_FFF0 read past the consumer's buffer, a fault in the
/// kernel (here the data's last readable byte is followed by a page that
/// cannot be read; the test died with SIGSEGV).
#[test]
fn test_private_data_is_read_no_further_than_its_limit_rule_n17() {
    let max = 56; // MaxCallerData of the fabric's adapters.
    let (near, far) = two(231);
    let (side, log) = (Side::new(&near), Log::default());
    let conn = near.connector();
    // SAFETY: two fresh anonymous pages, the second made unreadable.
    let page = unsafe {
        libc::mmap(
            null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED);
    let guard = page.cast::<u8>().wrapping_add(4096);
    // SAFETY: the second page of the mapping.
    let protected = unsafe { libc::mprotect(guard.cast(), 4096, libc::PROT_NONE) };
    assert_eq!(protected, 0);
    // The last `max + 1` readable bytes of the first page.
    let data: *const c_void = guard.wrapping_sub(max + 1).cast();
    let (from, to) = (v4(ip(231, 1), 0), v4(ip(231, 2), 9));
    let ((src, src_len), (dst, dst_len)) = (from.raw(), to.raw());
    let (done, context) = log.completion();
    // SAFETY: valid objects; `max + 1` bytes of the data are readable (the
    // length claims more: what is under test).
    let status = unsafe {
        (conn.d().ndk_connect)(
            conn.0,
            side.qp,
            src,
            src_len,
            dst,
            dst_len,
            1,
            1,
            data,
            0xFFFF_FFF0,
            done,
            context,
        )
    };
    assert_eq!(status, STATUS_INVALID_BUFFER_SIZE);
    assert!(log.take().is_empty(), "no completion for a refused Connect");
    // SAFETY: the mapping made above, no longer used.
    let unmapped = unsafe { libc::munmap(page, 8192) };
    assert_eq!(unmapped, 0);
    conn.close();
    side.close();
    close_two(near, far);
}
