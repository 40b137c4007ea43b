//! Connections: the one connection fixture ([`Fixture`], with its
//! [`Transport`]) and what it builds (a connected [`Pair`], [`End`]s,
//! [`Side`]s), connections a test drives step by step, the connection calls
//! the object wrappers have only in one form, and the teardowns.

use super::*;

// ---------------------------------------------------------------------------
// A connected pair
// ---------------------------------------------------------------------------

/// Two adapters, each with a CQ, a PD and a QP, connected through a listener.
pub struct Pair {
    pub a: Adapter,
    pub b: Adapter,
    pub a_cq: Cq,
    pub b_cq: Cq,
    pub a_pd: Pd,
    pub b_pd: Pd,
    pub a_qp: Qp,
    pub b_qp: Qp,
    pub a_conn: Connector,
    pub b_conn: Connector,
    pub listener: Listener,
    pub incoming: Arc<Incoming>,
    pub a_disconnects: Arc<Signal>,
    pub b_disconnects: Arc<Signal>,
}

/// Next host address for a pair: every pair gets its own two addresses so
/// tests running in parallel never share a device.
fn next_host() -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(10);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A fresh pair of loopback addresses, `127.1.<n>.1` and `127.1.<n>.2`
/// (65 000 pairs before any repeats).
pub fn fresh_addresses() -> (Addr, Addr) {
    let [low, high] = next_host().to_le_bytes();
    (
        Addr::v4([127, 1 + high, low, 1], 0),
        Addr::v4([127, 1 + high, low, 2], 0),
    )
}

impl Pair {
    /// A connected pair with one shared CQ per side.
    pub fn new() -> Self {
        let (addr_a, addr_b) = fresh_addresses();
        let a = Adapter::open(addr_a);
        let b = Adapter::open(addr_b);
        let a_cq = a.cq(1024);
        let b_cq = b.cq(1024);
        let a_pd = a.pd();
        let b_pd = b.pd();
        let a_qp = a_pd.qp(&a_cq, &a_cq, 0xA);
        let b_qp = b_pd.qp(&b_cq, &b_cq, 0xB);
        let incoming = Incoming::new();
        let listener = b.listener(&incoming);
        assert_eq!(listener.listen(addr_b), STATUS_SUCCESS, "Listen");
        let (_, listen_addr, _) = listener.local_address();
        let a_conn = a.connector();
        let (status, connected) = a_conn.connect(&a_qp, addr_a, listen_addr, 16, 16, b"hello");
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Connect returned {status:#x}"
        );
        let b_conn = incoming.wait_nth(1);
        let b_disconnects = Signal::new();
        let (accept, accepted) = b_conn.accept(&b_qp, 16, 16, b"welcome", &b_disconnects);
        assert!(
            accept == STATUS_PENDING || accept == STATUS_SUCCESS,
            "Accept returned {accept:#x}"
        );
        assert_eq!(
            connected.outcome(status),
            STATUS_SUCCESS,
            "Connect completion"
        );
        let a_disconnects = Signal::new();
        assert_eq!(
            a_conn.complete_connect(&a_disconnects),
            STATUS_SUCCESS,
            "CompleteConnect"
        );
        assert_eq!(
            accepted.outcome(accept),
            STATUS_SUCCESS,
            "Accept completion"
        );
        Self {
            a,
            b,
            a_cq,
            b_cq,
            a_pd,
            b_pd,
            a_qp,
            b_qp,
            a_conn,
            b_conn,
            listener,
            incoming,
            a_disconnects,
            b_disconnects,
        }
    }

    /// Graceful disconnect of both sides, then close of everything; asserts
    /// every close completes.
    pub fn teardown(self) {
        // X1: A's disconnect completes once B's arrives, so start both.
        let (a_status, a_signal) = self.a_conn.disconnect();
        let (b_status, b_signal) = self.b_conn.disconnect();
        assert_eq!(a_signal.outcome(a_status), STATUS_SUCCESS, "Disconnect A");
        let _ = b_signal.outcome(b_status);
        self.a_conn.close();
        self.b_conn.close();
        self.listener.close();
        self.a_qp.close();
        self.b_qp.close();
        self.a_cq.close();
        self.b_cq.close();
        self.a_pd.close();
        self.b_pd.close();
        self.a.close();
        self.b.close();
    }
}

/// The connection of two QPs a test created itself (as `Pair::new`
/// connects its own).
pub struct Link {
    pub a_conn: Connector,
    pub b_conn: Connector,
    pub listener: Listener,
    pub incoming: Arc<Incoming>,
    pub a_disconnects: Arc<Signal>,
    pub b_disconnects: Arc<Signal>,
}

impl Link {
    /// Connects `a_qp` (of adapter `a`, opened on `addr_a`) to `b_qp` (of
    /// `b`, opened on `addr_b`) through a listener on `b`.
    pub fn connect(
        a: &Adapter,
        addr_a: Addr,
        a_qp: &Qp,
        b: &Adapter,
        addr_b: Addr,
        b_qp: &Qp,
    ) -> Self {
        let incoming = Incoming::new();
        let listener = b.listener(&incoming);
        assert_eq!(listener.listen(addr_b), STATUS_SUCCESS, "Listen");
        let (_, listen_addr, _) = listener.local_address();
        let a_conn = a.connector();
        let (status, connected) = a_conn.connect(a_qp, addr_a, listen_addr, 16, 16, b"hello");
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Connect returned {status:#x}"
        );
        let b_conn = incoming.wait_nth(1);
        let b_disconnects = Signal::new();
        let (accept, accepted) = b_conn.accept(b_qp, 16, 16, b"welcome", &b_disconnects);
        assert!(
            accept == STATUS_PENDING || accept == STATUS_SUCCESS,
            "Accept returned {accept:#x}"
        );
        assert_eq!(
            connected.outcome(status),
            STATUS_SUCCESS,
            "Connect completion"
        );
        let a_disconnects = Signal::new();
        assert_eq!(
            a_conn.complete_connect(&a_disconnects),
            STATUS_SUCCESS,
            "CompleteConnect"
        );
        assert_eq!(
            accepted.outcome(accept),
            STATUS_SUCCESS,
            "Accept completion"
        );
        Self {
            a_conn,
            b_conn,
            listener,
            incoming,
            a_disconnects,
            b_disconnects,
        }
    }

    /// Disconnects both sides (whatever the outcome: an error may have
    /// ended the connection already) and closes the connectors and the
    /// listener.
    pub fn close(self) {
        disconnect_both(Some(&self.a_conn), Some(&self.b_conn));
        assert_close(self.a_conn.close());
        assert_close(self.b_conn.close());
        assert_close(self.listener.close());
    }
}

/// Starts a Disconnect on each connector given and waits for every one
/// that pends, accepting any final status.
pub fn disconnect_both(a: Option<&Connector>, b: Option<&Connector>) {
    let started: Vec<_> = [a, b]
        .into_iter()
        .flatten()
        .map(Connector::disconnect)
        .collect();
    for (status, signal) in started {
        let _ = signal.outcome(status);
    }
}

/// Closes the test started early with [`close_qp_async`] /
/// [`close_connector_async`] on side A of a pair.
#[derive(Default)]
pub struct Early {
    pub a_qp: Option<(NtStatus, Arc<Signal>)>,
    pub a_conn: Option<(NtStatus, Arc<Signal>)>,
}

/// Waits for an early close: L18 status, and its completion if it pended.
fn finish_early(close: Option<(NtStatus, Arc<Signal>)>) {
    if let Some((status, signal)) = close {
        assert_close(status);
        if status == STATUS_PENDING {
            signal.wait();
        }
    }
}

/// `Pair::teardown` that accepts any Disconnect outcome (an error may have
/// terminated the connection) and skips what the test closed early.
pub fn teardown_after(pair: Pair, early: Early) {
    let Pair {
        a,
        b,
        a_cq,
        b_cq,
        a_pd,
        b_pd,
        a_qp,
        b_qp,
        a_conn,
        b_conn,
        listener,
        ..
    } = pair;
    let a_conn_open = early.a_conn.is_none();
    disconnect_both(a_conn_open.then_some(&a_conn), Some(&b_conn));
    if a_conn_open {
        assert_close(a_conn.close());
    }
    assert_close(b_conn.close());
    finish_early(early.a_conn);
    assert_close(listener.close());
    if early.a_qp.is_some() {
        finish_early(early.a_qp);
    } else {
        assert_close(a_qp.close());
    }
    assert_close(b_qp.close());
    assert_close(a_cq.close());
    assert_close(b_cq.close());
    assert_close(a_pd.close());
    assert_close(b_pd.close());
    a.close();
    b.close();
}

/// `Pair::teardown` for a pair whose connection an error may have ended.
pub fn teardown_lenient(pair: Pair) {
    teardown_after(pair, Early::default());
}

/// One side of a connection a test builds itself: an adapter opened on a
/// fresh address, and a PD.
pub struct Side {
    pub adapter: Adapter,
    pub addr: Addr,
    pub pd: Pd,
}

impl Side {
    /// Two sides on a fresh pair of addresses.
    pub fn two() -> (Self, Self) {
        let (addr_a, addr_b) = fresh_addresses();
        let open = |addr: Addr| {
            let adapter = Adapter::open(addr);
            let pd = adapter.pd();
            Self { adapter, addr, pd }
        };
        (open(addr_a), open(addr_b))
    }

    /// Connects `qp` of this side to `peer_qp` of `peer` (a listener on
    /// `peer`).
    pub fn connect(&self, qp: &Qp, peer: &Self, peer_qp: &Qp) -> Link {
        Link::connect(
            &self.adapter,
            self.addr,
            qp,
            &peer.adapter,
            peer.addr,
            peer_qp,
        )
    }

    /// Closes the PD and the adapter (after everything on them).
    pub fn close(self) {
        assert_close(self.pd.close());
        self.adapter.close();
    }
}

/// A connected pair (as [`Pair::new`]) whose CQs are made by `a_cq` and
/// `b_cq` on adapters A and B.
pub fn pair_with(a_cq: impl FnOnce(&Adapter) -> Cq, b_cq: impl FnOnce(&Adapter) -> Cq) -> Pair {
    let (addr_a, addr_b) = fresh_addresses();
    let a = Adapter::open(addr_a);
    let b = Adapter::open(addr_b);
    let a_cq = a_cq(&a);
    let b_cq = b_cq(&b);
    let a_pd = a.pd();
    let b_pd = b.pd();
    let a_qp = a_pd.qp(&a_cq, &a_cq, 0xA);
    let b_qp = b_pd.qp(&b_cq, &b_cq, 0xB);
    let incoming = Incoming::new();
    let listener = b.listener(&incoming);
    assert_eq!(listener.listen(addr_b), STATUS_SUCCESS, "Listen");
    let (_, listen_addr, _) = listener.local_address();
    let a_conn = a.connector();
    let (status, connected) = a_conn.connect(&a_qp, addr_a, listen_addr, 16, 16, b"hello");
    assert!(
        status == STATUS_PENDING || status == STATUS_SUCCESS,
        "Connect returned {status:#x}"
    );
    let b_conn = incoming.wait_nth(1);
    let b_disconnects = Signal::new();
    let (accept, accepted) = b_conn.accept(&b_qp, 16, 16, b"welcome", &b_disconnects);
    assert!(
        accept == STATUS_PENDING || accept == STATUS_SUCCESS,
        "Accept returned {accept:#x}"
    );
    assert_eq!(
        connected.outcome(status),
        STATUS_SUCCESS,
        "Connect completion"
    );
    let a_disconnects = Signal::new();
    assert_eq!(
        a_conn.complete_connect(&a_disconnects),
        STATUS_SUCCESS,
        "CompleteConnect"
    );
    assert_eq!(
        accepted.outcome(accept),
        STATUS_SUCCESS,
        "Accept completion"
    );
    Pair {
        a,
        b,
        a_cq,
        b_cq,
        a_pd,
        b_pd,
        a_qp,
        b_qp,
        a_conn,
        b_conn,
        listener,
        incoming,
        a_disconnects,
        b_disconnects,
    }
}

/// A pair whose B-side CQ (depth 1024) notifies `watch`.
pub fn pair_watching_b(watch: &Arc<Watch>) -> Pair {
    pair_with(|a| a.cq(1024), |b| watched_cq(b, 1024, watch))
}

/// A fresh IPv4 address of its own, `127.76.x.y` (outside the range of
/// [`fresh_addresses`]), so that an adapter opened on it has a device of its
/// own.
pub fn own_address() -> Addr {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let (hi, lo) = (n / 250, n % 250 + 1);
    Addr::v4(
        [
            127,
            76,
            u8::try_from(hi).unwrap(),
            u8::try_from(lo).unwrap(),
        ],
        0,
    )
}

/// Which objects of a [`Pair`] a test has closed itself (or started to
/// close: [`teardown_except`] then relies on those closes completing).
#[derive(Default, Clone, Copy)]
#[allow(clippy::struct_excessive_bools, reason = "one flag per object")]
pub struct Closed {
    pub a_conn: bool,
    pub b_conn: bool,
    pub listener: bool,
    pub a_qp: bool,
    pub b_qp: bool,
    pub a_cq: bool,
    pub b_cq: bool,
    pub a_pd: bool,
    pub b_pd: bool,
}

/// `Pair::teardown` that skips what the test closed and accepts any
/// Disconnect outcome (an error may have ended the connection); every
/// close it makes is checked (L18) and waited for; the adapters' closes
/// return only once every close started by the test has completed (L27).
pub fn teardown_except(pair: Pair, closed: Closed) {
    let Pair {
        a,
        b,
        a_cq,
        b_cq,
        a_pd,
        b_pd,
        a_qp,
        b_qp,
        a_conn,
        b_conn,
        listener,
        ..
    } = pair;
    let started: Vec<_> = [(&a_conn, closed.a_conn), (&b_conn, closed.b_conn)]
        .into_iter()
        .filter(|(_, done)| !done)
        .map(|(conn, _)| conn.disconnect())
        .collect();
    for (status, signal) in started {
        let _ = signal.outcome(status);
    }
    let check = |status: NtStatus| {
        assert!(
            status == STATUS_SUCCESS || status == STATUS_PENDING,
            "L18: close returned {status:#x}"
        );
    };
    if !closed.a_conn {
        check(a_conn.close());
    }
    if !closed.b_conn {
        check(b_conn.close());
    }
    if !closed.listener {
        check(listener.close());
    }
    if !closed.a_qp {
        check(a_qp.close());
    }
    if !closed.b_qp {
        check(b_qp.close());
    }
    if !closed.a_cq {
        check(a_cq.close());
    }
    if !closed.b_cq {
        check(b_cq.close());
    }
    if !closed.a_pd {
        check(a_pd.close());
    }
    if !closed.b_pd {
        check(b_pd.close());
    }
    a.close();
    b.close();
}

/// A fresh IPv4 address nobody else uses, `127.78.x.y` (outside the
/// ranges of [`fresh_addresses`] and of the other families' helpers).
pub fn own_v4() -> Addr {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let [low, high] = (n % 250 + 1 + (n / 250) * 256).to_le_bytes();
    Addr::v4([127, 78, high, low], 0)
}

/// A fresh pair of IPv6 addresses nobody else uses, `fd00:4e58::<n>:1`
/// and `fd00:4e58::<n>:2`.
pub fn fresh_v6() -> (Addr, Addr) {
    static NEXT: AtomicU16 = AtomicU16::new(1);
    let [hi, lo] = NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes();
    let ip = |last: u8| {
        let mut ip = [0_u8; 16];
        ip[..4].copy_from_slice(&[0xFD, 0x00, 0x4E, 0x58]);
        ip[12] = hi;
        ip[13] = lo;
        ip[15] = last;
        ip
    };
    (Addr::v6(ip(1), 0), Addr::v6(ip(2), 0))
}

/// One side of a connection: an adapter opened on `addr`, a CQ (depth
/// 1024) and a PD.
pub struct End {
    pub addr: Addr,
    pub adapter: Adapter,
    pub cq: Cq,
    pub pd: Pd,
}

impl End {
    pub fn open(addr: Addr) -> Self {
        let adapter = Adapter::open(addr);
        let cq = adapter.cq(1024);
        let pd = adapter.pd();
        Self {
            addr,
            adapter,
            cq,
            pd,
        }
    }

    /// Two sides on [`fresh_addresses`].
    pub fn two() -> (Self, Self) {
        let (a, b) = fresh_addresses();
        (Self::open(a), Self::open(b))
    }

    /// A QP (depth 64, 4 SGEs, 256 inline bytes) on the side's CQ.
    pub fn qp(&self, context: usize) -> Qp {
        self.pd.qp(&self.cq, &self.cq, context)
    }

    /// A listener on this side's adapter listening on `addr`:`port`
    /// (port 0: ephemeral); returns it with its events and the address
    /// it reports.
    pub fn listen(&self, port: u16) -> (Listener, Arc<Incoming>, Addr) {
        let incoming = Incoming::new();
        let listener = self.adapter.listener(&incoming);
        assert_eq!(
            listener.listen(self.addr.with_port(port)),
            STATUS_SUCCESS,
            "Listen"
        );
        let (status, local, _) = listener.local_address();
        assert_eq!(status, STATUS_SUCCESS, "GetListenerLocalAddress");
        (listener, incoming, local)
    }

    /// Closes the CQ, the PD and the adapter (L18 checked).
    pub fn close(self) {
        for status in [self.cq.close(), self.pd.close()] {
            assert!(
                status == STATUS_SUCCESS || status == STATUS_PENDING,
                "L18: close returned {status:#x}"
            );
        }
        self.adapter.close();
    }
}

/// An established connection: the active connector, the passive one (from
/// the connect event) and each side's disconnect indications.
pub struct Conn {
    pub active: Connector,
    pub passive: Connector,
    pub a_disconnects: Arc<Signal>,
    pub b_disconnects: Arc<Signal>,
}

impl Conn {
    /// Connects `qp` (of `adapter`, from `src`) to `dst`, whose listener
    /// reports to `incoming`; accepts the `nth` connect event with
    /// `peer_qp`; read limits 16 / 16.
    pub fn establish(
        adapter: &Adapter,
        src: Addr,
        qp: &Qp,
        dst: Addr,
        incoming: &Incoming,
        nth: usize,
        peer_qp: &Qp,
    ) -> Self {
        let active = adapter.connector();
        let (status, connected) = active.connect(qp, src, dst, 16, 16, b"hello");
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Connect returned {status:#x}"
        );
        let passive = incoming.wait_nth(nth);
        let b_disconnects = Signal::new();
        let (accept, accepted) = passive.accept(peer_qp, 16, 16, b"welcome", &b_disconnects);
        assert!(
            accept == STATUS_PENDING || accept == STATUS_SUCCESS,
            "Accept returned {accept:#x}"
        );
        assert_eq!(
            connected.outcome(status),
            STATUS_SUCCESS,
            "Connect completion"
        );
        let a_disconnects = Signal::new();
        assert_eq!(
            active.complete_connect(&a_disconnects),
            STATUS_SUCCESS,
            "CompleteConnect"
        );
        assert_eq!(
            accepted.outcome(accept),
            STATUS_SUCCESS,
            "Accept completion"
        );
        Self {
            active,
            passive,
            a_disconnects,
            b_disconnects,
        }
    }

    /// Disconnects both sides (any outcome) and closes both connectors.
    pub fn close(self) {
        let started = [self.active.disconnect(), self.passive.disconnect()];
        for (status, signal) in started {
            let _ = signal.outcome(status);
        }
        for status in [self.active.close(), self.passive.close()] {
            assert!(
                status == STATUS_SUCCESS || status == STATUS_PENDING,
                "L18: close returned {status:#x}"
            );
        }
    }
}

/// `NdkCompleteConnect` with an optional disconnect callback: its return
/// value and completion signal.
pub fn complete_connect_with(
    connector: &Connector,
    event: Option<NdkFnDisconnectEventCallback>,
    event_context: *mut c_void,
) -> (NtStatus, Arc<Signal>) {
    let signal = Signal::new();
    // SAFETY: a live connector; the caller keeps the event context alive.
    let status = unsafe {
        (connector.d().ndk_complete_connect)(
            connector.0,
            event,
            event_context,
            Some(on_status),
            signal.ctx(),
        )
    };
    (status, signal)
}

/// `NdkAccept` with an optional disconnect callback: its return value
/// and completion signal.
#[allow(clippy::too_many_arguments, reason = "mirrors NdkAccept")]
pub fn accept_with(
    connector: &Connector,
    qp: &Qp,
    ird: u32,
    ord: u32,
    data: &[u8],
    event: Option<NdkFnDisconnectEventCallback>,
    event_context: *mut c_void,
) -> (NtStatus, Arc<Signal>) {
    let signal = Signal::new();
    // SAFETY: live objects; data valid for the call; the caller keeps the
    // event context alive.
    let status = unsafe {
        (connector.d().ndk_accept)(
            connector.0,
            qp.0,
            ird,
            ord,
            data.as_ptr().cast(),
            u32::try_from(data.len()).unwrap(),
            event,
            event_context,
            Some(on_status),
            signal.ctx(),
        )
    };
    (status, signal)
}

/// `NdkConnectWithSharedEndpoint`: its return value and completion signal.
pub fn connect_shared(
    connector: &Connector,
    qp: &Qp,
    endpoint: &SharedEndpoint,
    dst: Addr,
    ird: u32,
    ord: u32,
    data: &[u8],
) -> (NtStatus, Arc<Signal>) {
    let signal = Signal::new();
    // SAFETY: live objects; address and data valid for the call.
    let status = unsafe {
        (connector.d().ndk_connect_with_shared_endpoint)(
            connector.0,
            qp.0,
            endpoint.0,
            dst.as_ptr(),
            dst.len(),
            ird,
            ord,
            data.as_ptr().cast(),
            u32::try_from(data.len()).unwrap(),
            Some(on_status),
            signal.ctx(),
        )
    };
    (status, signal)
}

/// `NdkConnect` with explicit address lengths (N2): its return value and
/// completion signal.
#[allow(clippy::too_many_arguments, reason = "mirrors NdkConnect")]
pub fn connect_with_lengths(
    connector: &Connector,
    qp: &Qp,
    src: Addr,
    src_len: u32,
    dst: Addr,
    dst_len: u32,
    data: &[u8],
) -> (NtStatus, Arc<Signal>) {
    let signal = Signal::new();
    // SAFETY: live objects; both addresses are 28-byte buffers, at least
    // the lengths given (at most 28).
    let status = unsafe {
        (connector.d().ndk_connect)(
            connector.0,
            qp.0,
            src.as_ptr(),
            src_len.min(28),
            dst.as_ptr(),
            dst_len.min(28),
            16,
            16,
            data.as_ptr().cast(),
            u32::try_from(data.len()).unwrap(),
            Some(on_status),
            signal.ctx(),
        )
    };
    (status, signal)
}

/// `NdkListen` with an explicit address length (N2): the outcome (L8).
pub fn listen_with_length(listener: &Listener, addr: Addr, len: u32) -> NtStatus {
    let signal = Signal::new();
    // SAFETY: a live listener; the address is a 28-byte buffer.
    let status = unsafe {
        (listener.d().ndk_listen)(
            listener.0,
            addr.as_ptr(),
            len.min(28),
            Some(on_status),
            signal.ctx(),
        )
    };
    signal.outcome(status)
}

/// `NdkCreateSharedEndpoint` with an explicit address length (N2).
pub fn shared_endpoint_with_length(
    adapter: &Adapter,
    addr: Addr,
    len: u32,
) -> Result<SharedEndpoint, NtStatus> {
    let mut e = std::ptr::null_mut();
    // SAFETY: a live adapter; the address is a 28-byte buffer.
    let status = unsafe {
        (adapter.d().ndk_create_shared_endpoint)(
            adapter.0,
            addr.as_ptr(),
            len.min(28),
            None,
            std::ptr::null_mut(),
            &raw mut e,
        )
    };
    if status == STATUS_SUCCESS {
        Ok(SharedEndpoint(e))
    } else {
        Err(status)
    }
}

/// What GetConnectionData reported: status, `*pPrivateDataLength` after
/// the call, and the read limits (when asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data {
    pub status: NtStatus,
    pub length: u32,
    pub limits: Option<(u32, u32)>,
}

/// `NdkGetConnectionData` into `buffer` (None: a NULL buffer) with
/// `*pPrivateDataLength` = `length` on entry (at most the buffer's
/// size); `limits`: whether to pass the read-limit outputs (else NULL).
pub fn connection_data_into(
    connector: &Connector,
    buffer: Option<&mut [u8]>,
    length: u32,
    limits: bool,
) -> Data {
    let (mut ird, mut ord) = (0xDEAD_u32, 0xBEEF_u32);
    let mut len = length;
    let ptr: *mut c_void = match buffer {
        Some(b) => {
            assert!(length as usize <= b.len());
            b.as_mut_ptr().cast()
        }
        None => std::ptr::null_mut(),
    };
    let (pi, po): (*mut u32, *mut u32) = if limits {
        (&raw mut ird, &raw mut ord)
    } else {
        (std::ptr::null_mut(), std::ptr::null_mut())
    };
    // SAFETY: a live connector; the buffer holds `length` bytes.
    let status = unsafe {
        (connector.d().ndk_get_connection_data)(connector.0, pi, po, ptr, &raw mut len)
    };
    Data {
        status,
        length: len,
        limits: limits.then_some((ird, ord)),
    }
}

/// Which address getter.
#[derive(Clone, Copy)]
pub enum Getter<'a> {
    ConnectorLocal(&'a Connector),
    ConnectorPeer(&'a Connector),
    Listener(&'a Listener),
    Endpoint(&'a SharedEndpoint),
}

impl Getter<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Self::ConnectorLocal(_) => "connector GetLocalAddress",
            Self::ConnectorPeer(_) => "GetPeerAddress",
            Self::Listener(_) => "GetListenerLocalAddress",
            Self::Endpoint(_) => "GetSharedEndpointLocalAddress",
        }
    }
}

/// Calls an address getter with `*pAddressLength` = `room` on entry (a
/// NULL buffer when `room` is 0): status, the address buffer (filled
/// with 0xEE beforehand) and `*pAddressLength` after the call.
pub fn get_address(getter: Getter<'_>, room: u32) -> (NtStatus, [u8; 28], u32) {
    assert!(room <= 28);
    let mut buf = [0xEE_u8; 28];
    let mut len = room;
    let ptr: *mut SockAddr = if room == 0 {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    let len_ptr = &raw mut len;
    let status = match getter {
        // SAFETY: a live object; a buffer of `room` bytes (at most 28)
        // and an in/out length.
        Getter::ConnectorLocal(c) => unsafe {
            (c.d().ndk_get_local_address)(c.0, ptr, len_ptr)
        },
        // SAFETY: as above.
        Getter::ConnectorPeer(c) => unsafe { (c.d().ndk_get_peer_address)(c.0, ptr, len_ptr) },
        // SAFETY: as above.
        Getter::Listener(l) => unsafe { (l.d().ndk_get_local_address)(l.0, ptr, len_ptr) },
        // SAFETY: as above.
        Getter::Endpoint(e) => unsafe { (e.d().ndk_get_local_address)(e.0, ptr, len_ptr) },
    };
    (status, buf, len)
}

/// The address a getter reports into a 28-byte buffer; asserts success.
pub fn address_of(getter: Getter<'_>) -> Addr {
    let (status, bytes, _) = get_address(getter, 28);
    assert_eq!(status, STATUS_SUCCESS, "{}", getter.name());
    let mut addr = Addr::empty();
    // SAFETY: `Addr` is a 28-byte plain buffer.
    unsafe { addr.as_mut_ptr().cast::<[u8; 28]>().write(bytes) };
    addr
}
