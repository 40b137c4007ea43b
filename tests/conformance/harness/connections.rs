//! Connections: the one connection fixture ([`Fixture`], with its
//! [`Transport`]) and what it builds (a connected [`Pair`], [`End`]s,
//! [`Side`]s), connections a test drives step by step, the connection calls
//! the object wrappers have only in one form, and the teardowns.

use super::*;

// ---------------------------------------------------------------------------
// The connection fixture
// ---------------------------------------------------------------------------

/// How the fixture's two adapters are opened and reach each other. This is
/// the one place that decides it: every family and the scenario get their
/// adapters from [`Fixture`] (or [`Transport::open`]), so a later change
/// runs them all over another transport by adding a variant here and
/// choosing it in [`Transport::default`].
///
/// Connecting is done with NDK calls alone (a listener on B, a connector on
/// A: [`Conn::establish`]), the same on any transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Host mode's in-memory fabric: both adapters live in this process,
    /// each opened on a loopback address no other fixture uses, so tests
    /// running in parallel never share a device.
    Local,
    /// iWARP over TCP (`SoftNdkOpenAdapterEx`, transport 1): the same
    /// loopback addresses, but every connection goes through the kernel's
    /// TCP, MPA and the iWARP link.
    Iwarp,
}

impl Default for Transport {
    /// The transport of the test binary: `TRANSPORT` of its crate root
    /// (`tests/conformance/main.rs`: the fabric; `tests/conformance_iwarp.rs`:
    /// iWARP).
    fn default() -> Self {
        crate::TRANSPORT
    }
}

/// The address family of a fixture's adapters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Family {
    #[default]
    V4,
    V6,
}

impl Transport {
    /// Fresh addresses (port 0) for adapters A and B.
    pub fn addresses(self, family: Family) -> (Addr, Addr) {
        match (self, family) {
            (_, Family::V4) => fresh_addresses(),
            (Self::Local, Family::V6) => fresh_v6(),
            // The only IPv6 address a test machine surely has.
            (Self::Iwarp, Family::V6) => (Addr::v6(V6_LOOPBACK, 0), Addr::v6(V6_LOOPBACK, 0)),
        }
    }

    /// The flags that keep a Send outstanding at its initiator while the
    /// peer posts no receive. On the fabric a Send waits for the peer's
    /// receive (none: 0). Over iWARP a Send goes at once and, with no
    /// receive posted, the peer terminates the connection (RFC 5040 §7), so
    /// the Send is held by DEFER instead: posted and never rung (D2), it is
    /// as outstanding as a Send waiting for a receive.
    pub fn held(self) -> u32 {
        match self {
            Self::Local => 0,
            Self::Iwarp => DEFER,
        }
    }

    /// The status, at its initiator, of a Send or Write that the *peer*
    /// refuses (a bad token, a receive too small), given the fabric's: on
    /// the fabric the request waits for the target and completes with the
    /// target's verdict; over iWARP it completes successfully once sent,
    /// and the verdict returns as the peer's Terminate, which aborts the
    /// connection (RFC 5040 §7; [`await_abort`] waits for it).
    pub fn peer_refused(self, fabric: NtStatus) -> NtStatus {
        match self {
            Self::Local => fabric,
            Self::Iwarp => STATUS_SUCCESS,
        }
    }

    /// A port a test may name explicitly on `addr` (Listen, a shared
    /// endpoint, a Connect's source), with the [`EXPLICIT_SPAN`]` - 1` ports
    /// after it. On the fabric always `4000`: each test has addresses of
    /// its own. Over iWARP ND ports are the host's TCP ports, on addresses
    /// shared with the tests running beside it (every IPv6 one is on
    /// `::1`) and with other processes: a block this process has not handed
    /// out yet, below the host's and the provider's ephemeral ranges, that
    /// no socket holds on `addr` when asked (bounded tries).
    pub fn explicit_port(self, addr: Addr) -> u16 {
        const FIXED: u16 = 4_000;
        const FIRST: u32 = 10_000;
        const BLOCKS: u32 = 2_500;
        static NEXT: AtomicU16 = AtomicU16::new(0);
        if self == Self::Local {
            return FIXED;
        }
        let ip: std::net::IpAddr = match <[u8; 4]>::try_from(addr.ip_bytes()) {
            Ok(v4) => v4.into(),
            Err(_) => <[u8; 16]>::try_from(addr.ip_bytes())
                .expect("an IPv4 or IPv6 address")
                .into(),
        };
        // Processes start at different blocks, so that two copies of this
        // binary seldom even try the same one.
        let start = std::process::id() % BLOCKS;
        for _ in 0..64 {
            let block = (start + u32::from(NEXT.fetch_add(1, Ordering::Relaxed))) % BLOCKS;
            let port =
                u16::try_from(FIRST + block * u32::from(EXPLICIT_SPAN)).expect("below 30 000");
            let free =
                (port..port + EXPLICIT_SPAN).all(|p| std::net::TcpListener::bind((ip, p)).is_ok());
            if free {
                return port;
            }
        }
        panic!("no free block of ports on {ip}");
    }

    /// Opens an adapter on `addr`.
    pub fn open(self, addr: Addr) -> Adapter {
        match self {
            Self::Local => Adapter::open(addr),
            Self::Iwarp => Adapter::open_on(addr, 1),
        }
    }
}

/// How many consecutive ports [`Transport::explicit_port`] hands out.
pub const EXPLICIT_SPAN: u16 = 8;

const V6_LOOPBACK: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// Opens an adapter on `addr` over [`Transport::default`]: how every test
/// that needs an adapter of its own, outside a [`Fixture`], opens one.
pub fn open_adapter(addr: Addr) -> Adapter {
    Transport::default().open(addr)
}

/// Makes a side's CQ on its adapter.
type MakeCq<'a> = Box<dyn FnOnce(&Adapter) -> Cq + 'a>;

/// The connection fixture: two adapters (A and B) with a PD each, a CQ
/// each, a QP each and, when asked, an SRQ each, connected through a
/// listener on B. Options are set builder-style and default to what most
/// tests want (IPv4, the [`Transport::default`], CQs of depth 1024, no
/// SRQ); [`Fixture::pair`] builds the connected pair, [`Fixture::ends`] and
/// [`Fixture::sides`] stop earlier for tests that connect step by step.
pub struct Fixture<'a> {
    transport: Transport,
    family: Family,
    a_cq: MakeCq<'a>,
    b_cq: MakeCq<'a>,
    srq: Option<(u32, u32)>,
}

impl Default for Fixture<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Fixture<'a> {
    /// The defaults: IPv4 on [`Transport::default`], CQs of depth 1024.
    pub fn new() -> Self {
        Self {
            transport: Transport::default(),
            family: Family::default(),
            a_cq: Box::new(|adapter| adapter.cq(1024)),
            b_cq: Box::new(|adapter| adapter.cq(1024)),
            srq: None,
        }
    }

    /// Over `transport` instead of the default.
    #[must_use]
    pub fn over(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// IPv6 addresses instead of IPv4.
    #[must_use]
    pub fn v6(self) -> Self {
        self.family(Family::V6)
    }

    /// Addresses of `family` ([`Transport::addresses`]).
    #[must_use]
    pub fn family(mut self, family: Family) -> Self {
        self.family = family;
        self
    }

    /// A's CQ made by `make` (e.g. with a callback of the test's own).
    #[must_use]
    pub fn a_cq(mut self, make: impl FnOnce(&Adapter) -> Cq + 'a) -> Self {
        self.a_cq = Box::new(make);
        self
    }

    /// B's CQ made by `make`.
    #[must_use]
    pub fn b_cq(mut self, make: impl FnOnce(&Adapter) -> Cq + 'a) -> Self {
        self.b_cq = Box::new(make);
        self
    }

    /// Each side's QP receives through an SRQ of `depth` entries of at most
    /// `sges` SGEs ([`Pair::a_srq`], [`Pair::b_srq`]).
    #[must_use]
    pub fn srq(mut self, depth: u32, sges: u32) -> Self {
        self.srq = Some((depth, sges));
        self
    }

    /// Two unconnected sides: adapter, CQ and PD each.
    pub fn ends(self) -> (End, End) {
        let (addr_a, addr_b) = self.transport.addresses(self.family);
        let a = End::made(self.transport.open(addr_a), addr_a, self.a_cq);
        let b = End::made(self.transport.open(addr_b), addr_b, self.b_cq);
        (a, b)
    }

    /// Two unconnected sides with no CQ: adapter and PD each.
    pub fn sides(self) -> (Side, Side) {
        let (addr_a, addr_b) = self.transport.addresses(self.family);
        let side = |addr: Addr| {
            let adapter = self.transport.open(addr);
            let pd = adapter.pd();
            Side { adapter, addr, pd }
        };
        (side(addr_a), side(addr_b))
    }

    /// The connected pair: QP contexts `0xA` and `0xB`, read limits 16 / 16,
    /// private data `hello` / `welcome`.
    pub fn pair(self) -> Pair {
        let srq = self.srq;
        let (a, b) = self.ends();
        let (a_srq, a_qp) = a.qp_maybe_srq(0xA, srq);
        let (b_srq, b_qp) = b.qp_maybe_srq(0xB, srq);
        let (listener, incoming, listen_addr) = b.listen(0);
        let conn = Conn::establish(&a.adapter, a.addr, &a_qp, listen_addr, &incoming, 1, &b_qp);
        Pair {
            a: a.adapter,
            b: b.adapter,
            a_cq: a.cq,
            b_cq: b.cq,
            a_pd: a.pd,
            b_pd: b.pd,
            a_qp,
            b_qp,
            a_srq,
            b_srq,
            a_conn: conn.active,
            b_conn: conn.passive,
            listener,
            incoming,
            a_disconnects: conn.a_disconnects,
            b_disconnects: conn.b_disconnects,
        }
    }
}

/// Two adapters, each with a CQ, a PD and a QP (and an SRQ if the fixture
/// asked for one), connected through a listener on B.
pub struct Pair {
    pub a: Adapter,
    pub b: Adapter,
    pub a_cq: Cq,
    pub b_cq: Cq,
    pub a_pd: Pd,
    pub b_pd: Pd,
    pub a_qp: Qp,
    pub b_qp: Qp,
    pub a_srq: Option<Srq>,
    pub b_srq: Option<Srq>,
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
    static NEXT: AtomicU16 = AtomicU16::new(10);
    NEXT.fetch_add(1, Ordering::Relaxed)
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

impl Pair {
    /// The default connected pair: [`Fixture::new`]`.pair()`.
    pub fn new() -> Self {
        Fixture::new().pair()
    }

    /// Asserts that neither CQ holds anything more ([`assert_empty`]).
    pub fn assert_cqs_empty(&self) {
        assert_empty(&self.a_cq);
        assert_empty(&self.b_cq);
    }

    /// Graceful disconnect of both sides, then close of everything; asserts
    /// every close completes.
    pub fn teardown(self) {
        // X1: A's disconnect completes once B's arrives, so start both.
        let (a_status, a_signal) = self.a_conn.disconnect();
        let (b_status, b_signal) = self.b_conn.disconnect();
        assert_success!(a_signal.outcome(a_status), "Disconnect A");
        let _ = b_signal.outcome(b_status);
        self.a_conn.close();
        self.b_conn.close();
        self.listener.close();
        self.a_qp.close();
        self.b_qp.close();
        close_srqs(self.a_srq, self.b_srq);
        self.a_cq.close();
        self.b_cq.close();
        self.a_pd.close();
        self.b_pd.close();
        self.a.close();
        self.b.close();
    }
}

/// Closes a pair's SRQs, if it has any (after its QPs), L18 checked.
fn close_srqs(a: Option<Srq>, b: Option<Srq>) {
    for srq in [a, b].into_iter().flatten() {
        assert_close(srq.close());
    }
}

/// Posts a Write of `len` bytes of `src` to `remote` / `bad_token` (a
/// token the peer never issued) that fails *at its initiator* with
/// `STATUS_ACCESS_VIOLATION`, terminating the connection (E5). On the
/// fabric the target refuses the token. Over iWARP that refusal would
/// return as the peer's Terminate after the Write completed successfully
/// (RFC 5040 §7), so the Write gathers from a token `src`'s MR never issued
/// instead: a local error, the initiator's own. Returns the post's status.
pub fn failing_write(
    qp: &Qp,
    context: usize,
    src: &Region,
    len: usize,
    remote: u64,
    bad_token: u32,
) -> NtStatus {
    let sge = match Transport::default() {
        Transport::Local => src.sge(0, len),
        Transport::Iwarp => src.bad_sge(0, len),
    };
    qp.write(context, &[sge], remote, bad_token, 0)
}

/// Over iWARP, waits for the bytes in flight on this process's streams to
/// land (`provider::host::wire_settle`, bounded): an RDMA Write completes
/// at its initiator once sent and reaches the target a moment later. On
/// the fabric it has landed when it completes.
pub fn wait_landed() {
    if Transport::default() == Transport::Iwarp {
        softndk::provider::host::wire_settle();
    }
}

/// Waits (bounded, [`WAIT`]) until the abort of a connection that an
/// error completion terminated (E5) is indicated on this side (X2): on any
/// transport, what follows is then flushed. Over iWARP the indication is
/// the peer's Terminate (or RST) arriving, which is what a test must wait
/// for before it expects this side's next request to be cancelled.
pub fn await_abort(disconnects: &Signal) {
    assert_success!(disconnects.wait(), "the abort is indicated (X2)");
}

/// Waits (bounded, [`wait_until`]) until the peer's give-up of
/// `connector`'s attempt — its close or Reject before establishment — has
/// reached `connector` (N14, N15, N16), so that the call the test makes
/// next meets it. On the fabric it has at once; over iWARP it travels as
/// the stream's RST or MPA reject (`softndk::provider::host::
/// connector_peer_gone` observes it).
pub fn await_peer_gone(connector: &Connector) {
    wait_until("the peer's give-up reaches this connector", || {
        // SAFETY: the connector is open (the test holds it).
        unsafe { softndk::provider::host::connector_peer_gone(connector.0) }
    });
}

/// A listener on `adapter` listening on `addr`: it, its connect events and
/// the address it reports.
pub fn listen_on(adapter: &Adapter, addr: Addr) -> (Listener, Arc<Incoming>, Addr) {
    let incoming = Incoming::new();
    let listener = adapter.listener(&incoming);
    assert_success!(listener.listen(addr), "Listen");
    let (status, local, _) = listener.local_address();
    assert_success!(status, "GetListenerLocalAddress");
    (listener, incoming, local)
}

/// The connection of two QPs a test created itself (as [`Fixture::pair`]
/// connects its own): the listener on B and the established connection.
pub struct Link {
    pub listener: Listener,
    pub incoming: Arc<Incoming>,
    pub a_conn: Connector,
    pub b_conn: Connector,
    pub a_disconnects: Arc<Signal>,
    pub b_disconnects: Arc<Signal>,
}

impl Link {
    /// Connects A's QP (of an adapter opened on the address given) to B's
    /// through a listener on B's adapter.
    pub fn connect(a: (&Adapter, Addr, &Qp), b: (&Adapter, Addr, &Qp)) -> Self {
        let (listener, incoming, listen_addr) = listen_on(b.0, b.1);
        let conn = Conn::establish(a.0, a.1, a.2, listen_addr, &incoming, 1, b.2);
        Self {
            listener,
            incoming,
            a_conn: conn.active,
            b_conn: conn.passive,
            a_disconnects: conn.a_disconnects,
            b_disconnects: conn.b_disconnects,
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

    /// [`close`](Self::close), then the QPs the link connected and their
    /// CQs (A's and B's of each), every close L18 checked.
    pub fn close_with(self, (a_qp, b_qp): (Qp, Qp), (a_cq, b_cq): (Cq, Cq)) {
        self.close();
        assert_closed([a_qp.close(), b_qp.close(), a_cq.close(), b_cq.close()]);
    }
}

/// One side of a connection a test builds itself: an adapter and a PD
/// (see [`Fixture::sides`]).
pub struct Side {
    pub adapter: Adapter,
    pub addr: Addr,
    pub pd: Pd,
}

impl Side {
    /// Two sides of the default fixture.
    pub fn two() -> (Self, Self) {
        Fixture::new().sides()
    }

    /// Connects `qp` of this side to `peer_qp` of `peer` (a listener on
    /// `peer`).
    pub fn connect(&self, qp: &Qp, peer: &Self, peer_qp: &Qp) -> Link {
        Link::connect(
            (&self.adapter, self.addr, qp),
            (&peer.adapter, peer.addr, peer_qp),
        )
    }

    /// A CQ of `depth` and a default QP on it (both queues) with `context`.
    pub fn cq_and_qp(&self, depth: u32, context: usize) -> (Cq, Qp) {
        let cq = self.adapter.cq(depth);
        let qp = self.pd.qp(&cq, &cq, context);
        (cq, qp)
    }

    /// Closes the PD and the adapter (after everything on them).
    pub fn close(self) {
        assert_close(self.pd.close());
        self.adapter.close();
    }

    /// Closes `qp`, then `cq` (L18 checked), then the side itself: for a
    /// side whose QP and CQ the test made (after its regions and link).
    pub fn close_with(self, qp: Qp, cq: Cq) {
        assert_close(qp.close());
        assert_close(cq.close());
        self.close();
    }
}

/// A connected pair of the default fixture whose CQs are made by `a_cq`
/// and `b_cq` on adapters A and B.
pub fn pair_with<'a>(
    a_cq: impl FnOnce(&Adapter) -> Cq + 'a,
    b_cq: impl FnOnce(&Adapter) -> Cq + 'a,
) -> Pair {
    Fixture::new().a_cq(a_cq).b_cq(b_cq).pair()
}

/// A pair whose B-side CQ (depth 1024) notifies `watch`.
pub fn pair_watching_b(watch: &Arc<Watch>) -> Pair {
    Fixture::new().b_cq(|b| watched_cq(b, 1024, watch)).pair()
}

/// One side of a connection: an adapter, a CQ and a PD (see
/// [`Fixture::ends`]).
pub struct End {
    pub addr: Addr,
    pub adapter: Adapter,
    pub cq: Cq,
    pub pd: Pd,
}

impl End {
    /// An adapter of the default transport opened on `addr`, a CQ (depth
    /// 1024) and a PD.
    pub fn open(addr: Addr) -> Self {
        Self::made(
            Transport::default().open(addr),
            addr,
            Box::new(|a| a.cq(1024)),
        )
    }

    /// A port a test may name explicitly on this end's address
    /// ([`Transport::explicit_port`]).
    pub fn explicit_port(&self) -> u16 {
        Transport::default().explicit_port(self.addr)
    }

    /// This end's address with an [`explicit_port`](Self::explicit_port).
    pub fn explicit_addr(&self) -> Addr {
        self.addr.with_port(self.explicit_port())
    }

    fn made(adapter: Adapter, addr: Addr, make_cq: MakeCq<'_>) -> Self {
        let cq = make_cq(&adapter);
        let pd = adapter.pd();
        Self {
            addr,
            adapter,
            cq,
            pd,
        }
    }

    /// Two sides of the default fixture.
    pub fn two() -> (Self, Self) {
        Fixture::new().ends()
    }

    /// One side on a fresh IPv4 address, one on a fresh IPv6 address.
    pub fn one_per_family() -> [Self; 2] {
        [Family::V4, Family::V6].map(|family| Self::open(Transport::default().addresses(family).0))
    }

    /// A QP (depth 64, 4 SGEs, 256 inline bytes) on the side's CQ.
    pub fn qp(&self, context: usize) -> Qp {
        self.pd.qp(&self.cq, &self.cq, context)
    }

    /// A QP as [`End::qp`], receiving through a new SRQ of `depth` entries
    /// of `sges` SGEs when `srq` asks for one.
    fn qp_maybe_srq(&self, context: usize, srq: Option<(u32, u32)>) -> (Option<Srq>, Qp) {
        let Some((depth, sges)) = srq else {
            return (None, self.qp(context));
        };
        let srq = self.pd.try_srq(depth, sges, 0, None).expect("CreateSrq");
        let shared = RecvQueue::Shared(&srq);
        let qp = self
            .pd
            .try_qp(&self.cq, &self.cq, shared, context, 64, 4, 256)
            .expect("CreateQpWithSrq");
        (Some(srq), qp)
    }

    /// A listener on this side's adapter listening on `addr`:`port`
    /// (port 0: ephemeral); returns it with its events and the address
    /// it reports.
    pub fn listen(&self, port: u16) -> (Listener, Arc<Incoming>, Addr) {
        listen_on(&self.adapter, self.addr.with_port(port))
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
    let closed = Closed {
        a_conn: early.a_conn.is_some(),
        a_qp: early.a_qp.is_some(),
        ..Closed::default()
    };
    reap_pair(pair, closed, early, true);
}

/// The default pair with the memory most data-path tests move bytes
/// through: A's region of `len` bytes filled with pattern `seed` (local
/// write), to send or write from, and B's zeroed region of `len` bytes,
/// open to remote reads and writes. Closed with [`teardown_with_regions`]
/// or [`teardown_closing`].
pub fn pair_with_memory(len: usize, seed: u8) -> (Pair, Region, Region) {
    let pair = Pair::new();
    let a_mem = Region::pattern(&pair.a_pd, len, seed, MR_LOCAL_WRITE);
    let b_mem = Region::new(&pair.b_pd, len, 0, MR_REMOTE);
    (pair, a_mem, b_mem)
}

/// Closes the test's regions, then [`Pair::teardown`].
pub fn teardown_with_regions<const N: usize>(pair: Pair, regions: [Region; N]) {
    for region in regions {
        region.close();
    }
    pair.teardown();
}

/// Closes the test's regions, then [`teardown_lenient`].
pub fn teardown_closing<const N: usize>(pair: Pair, regions: [Region; N]) {
    teardown_closing_after(pair, regions, Early::default());
}

/// Closes the test's regions, then [`teardown_after`] with `early`.
pub fn teardown_closing_after<const N: usize>(pair: Pair, regions: [Region; N], early: Early) {
    for region in regions {
        region.close();
    }
    teardown_after(pair, early);
}

/// `Pair::teardown` for a pair whose connection an error may have ended.
pub fn teardown_lenient(pair: Pair) {
    teardown_after(pair, Early::default());
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

impl Closed {
    /// Nothing closed.
    pub const NONE: Self = Self {
        a_conn: false,
        b_conn: false,
        listener: false,
        a_qp: false,
        b_qp: false,
        a_cq: false,
        b_cq: false,
        a_pd: false,
        b_pd: false,
    };
    /// Only A's connector.
    pub const A_CONN: Self = Self {
        a_conn: true,
        ..Self::NONE
    };
    /// Only B's connector.
    pub const B_CONN: Self = Self {
        b_conn: true,
        ..Self::NONE
    };
}

/// `Pair::teardown` that skips what the test closed and accepts any
/// Disconnect outcome (an error may have ended the connection); every
/// close it makes is checked (L18) and waited for; the adapters' closes
/// return only once every close started by the test has completed (L27).
pub fn teardown_except(pair: Pair, closed: Closed) {
    reap_pair(pair, closed, Early::default(), true);
}

/// Closes an object unless the test already did (L18 checked).
fn close_unless(done: bool, close: impl FnOnce() -> NtStatus) {
    if !done {
        assert_close(close());
    }
}

/// Closes every object of a pair whose connectors were already
/// disconnected (or never need to be): connectors, listener, QPs, CQs, PDs,
/// adapters; every close is checked (L18) and waited for.
pub fn close_pair(pair: Pair) {
    reap_pair(pair, Closed::default(), Early::default(), false);
}

/// Closes the test's regions, then [`close_pair`].
pub fn close_pair_with_regions<const N: usize>(pair: Pair, regions: [Region; N]) {
    for region in regions {
        region.close();
    }
    close_pair(pair);
}

/// [`close_pair`] but for what the test closed itself.
pub fn close_pair_except(pair: Pair, closed: Closed) {
    reap_pair(pair, closed, Early::default(), false);
}

/// The one lenient teardown: disconnects what is still open (any outcome)
/// if `disconnect`, closes what the test has not (L18 checked), waits for
/// the early closes the test started, and closes the adapters last.
fn reap_pair(pair: Pair, closed: Closed, early: Early, disconnect: bool) {
    let Pair {
        a,
        b,
        a_cq,
        b_cq,
        a_pd,
        b_pd,
        a_qp,
        b_qp,
        a_srq,
        b_srq,
        a_conn,
        b_conn,
        listener,
        ..
    } = pair;
    if disconnect {
        disconnect_both(
            (!closed.a_conn).then_some(&a_conn),
            (!closed.b_conn).then_some(&b_conn),
        );
    }
    close_unless(closed.a_conn, || a_conn.close());
    close_unless(closed.b_conn, || b_conn.close());
    finish_early(early.a_conn);
    close_unless(closed.listener, || listener.close());
    finish_early(early.a_qp);
    close_unless(closed.a_qp, || a_qp.close());
    close_unless(closed.b_qp, || b_qp.close());
    close_srqs(a_srq, b_srq);
    close_unless(closed.a_cq, || a_cq.close());
    close_unless(closed.b_cq, || b_cq.close());
    close_unless(closed.a_pd, || a_pd.close());
    close_unless(closed.b_pd, || b_pd.close());
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

/// An established connection: the active connector, the passive one (from
/// the connect event) and each side's disconnect indications.
pub struct Conn {
    pub active: Connector,
    pub passive: Connector,
    pub a_disconnects: Arc<Signal>,
    pub b_disconnects: Arc<Signal>,
}

impl Conn {
    /// The connection of a test that connected step by step: its two
    /// connectors and each side's disconnect indications.
    pub fn of(
        active: Connector,
        passive: Connector,
        a_disconnects: Arc<Signal>,
        b_disconnects: Arc<Signal>,
    ) -> Self {
        Self {
            active,
            passive,
            a_disconnects,
            b_disconnects,
        }
    }

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
        let connecting = active.connect(qp, src, dst, 16, 16, b"hello");
        let status = connecting.0;
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Connect returned {status:#x}"
        );
        let passive = incoming.wait_nth(nth);
        Self::expect_accepted(active, connecting, passive, peer_qp, b"welcome")
    }

    /// Accepts, with `qp`, read limits 16 / 16 and `data`, the request
    /// `passive` that `active`'s Connect (`connecting`: its return value and
    /// signal) delivered; the Connect, the CompleteConnect and the Accept
    /// must all succeed (N13). The connection.
    pub fn expect_accepted(
        active: Connector,
        (status, connected): (NtStatus, Arc<Signal>),
        passive: Connector,
        qp: &Qp,
        data: &[u8],
    ) -> Self {
        let b_disconnects = Signal::new();
        let (accept, accepted) = passive.accept(qp, 16, 16, data, &b_disconnects);
        assert!(
            accept == STATUS_PENDING || accept == STATUS_SUCCESS,
            "Accept returned {accept:#x}"
        );
        assert_success!(connected.outcome(status), "Connect completion");
        Self::expect_completed(active, passive, (accept, accepted), b_disconnects)
    }

    /// The last step of an accepted request once the Connect completed:
    /// CompleteConnect, then the Accept's outcome (`accepted`: its return
    /// value and signal), must succeed (N13). The connection, whose passive
    /// side reports its disconnects to `b_disconnects`.
    pub fn expect_completed(
        active: Connector,
        passive: Connector,
        (accept, accepted): (NtStatus, Arc<Signal>),
        b_disconnects: Arc<Signal>,
    ) -> Self {
        let a_disconnects = Signal::new();
        assert_success!(active.complete_connect(&a_disconnects), "CompleteConnect");
        assert_success!(accepted.outcome(accept), "Accept completion");
        Self::of(active, passive, a_disconnects, b_disconnects)
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

/// Starts a Connect that must be accepted later (returned STATUS_PENDING).
pub fn start_connect(
    connector: &Connector,
    qp: &Qp,
    src: Addr,
    dst: Addr,
    data: &[u8],
) -> (NtStatus, Arc<Signal>) {
    let started = connector.connect(qp, src, dst, 16, 16, data);
    assert_eq!(started.0, STATUS_PENDING, "Connect starts and pends");
    started
}

/// A Connect of `a`'s QP to the listener at `dst` (with `data`), pending,
/// and the request it delivered, the `nth` connect event of `incoming`:
/// the active connector, its Connect and the passive connector.
pub fn connect_request(
    (a, qp): (&End, &Qp),
    dst: Addr,
    incoming: &Incoming,
    nth: usize,
    data: &[u8],
) -> (Connector, (NtStatus, Arc<Signal>), Connector) {
    let active = a.adapter.connector();
    let connecting = start_connect(&active, qp, a.addr, dst, data);
    let passive = incoming.wait_nth(nth);
    (active, connecting, passive)
}

/// `NdkCompleteConnect` with an optional disconnect callback: its return
/// value and completion signal.
pub fn complete_connect_with(
    connector: &Connector,
    event: Option<NdkFnDisconnectEventCallback>,
    event_context: *mut c_void,
) -> (NtStatus, Arc<Signal>) {
    // SAFETY: a live connector; the caller keeps the event context alive.
    requested(|done, ctx| unsafe {
        (connector.d().ndk_complete_connect)(connector.0, event, event_context, done, ctx)
    })
}

/// `NdkAccept` with read limits `(ird, ord)` and an optional disconnect
/// callback with its context: its return value and completion signal.
pub fn accept_with(
    connector: &Connector,
    qp: &Qp,
    (ird, ord): (u32, u32),
    data: &[u8],
    (event, event_context): (Option<NdkFnDisconnectEventCallback>, *mut c_void),
) -> (NtStatus, Arc<Signal>) {
    let (data, len) = c_array(data);
    // SAFETY: live objects; data valid for the call; the caller keeps the
    // event context alive.
    requested(|done, ctx| unsafe {
        (connector.d().ndk_accept)(
            connector.0,
            qp.0,
            ird,
            ord,
            data.cast(),
            len,
            event,
            event_context,
            done,
            ctx,
        )
    })
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
    let from = Source::Endpoint(endpoint);
    connector.connect_from(qp, from, (dst, dst.len()), (ird, ord), data)
}

/// `NdkConnect` with explicit address lengths (N2) and read limits 16 / 16:
/// its return value and completion signal.
pub fn connect_with_lengths(
    connector: &Connector,
    qp: &Qp,
    src: Addr,
    src_len: u32,
    dst: Addr,
    dst_len: u32,
    data: &[u8],
) -> (NtStatus, Arc<Signal>) {
    connector.connect_from(
        qp,
        Source::Addr(src, src_len),
        (dst, dst_len),
        (16, 16),
        data,
    )
}

/// `NdkListen` with an explicit address length (N2): the outcome (L8).
pub fn listen_with_length(listener: &Listener, addr: Addr, len: u32) -> NtStatus {
    // SAFETY: a live listener; the address is a 28-byte buffer.
    request_outcome(|done, ctx| unsafe {
        (listener.d().ndk_listen)(listener.0, addr.as_ptr(), len.min(28), done, ctx)
    })
}

/// `NdkCreateSharedEndpoint` with an explicit address length (N2).
pub fn shared_endpoint_with_length(
    adapter: &Adapter,
    addr: Addr,
    len: u32,
) -> Result<SharedEndpoint, NtStatus> {
    // SAFETY: a live adapter; the address is a 28-byte buffer.
    create(|done, ctx, out| unsafe {
        (adapter.d().ndk_create_shared_endpoint)(
            adapter.0,
            addr.as_ptr(),
            len.min(28),
            done,
            ctx,
            out,
        )
    })
    .map(SharedEndpoint)
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
    let status =
        unsafe { (connector.d().ndk_get_connection_data)(connector.0, pi, po, ptr, &raw mut len) };
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
        Getter::ConnectorLocal(c) => unsafe { (c.d().ndk_get_local_address)(c.0, ptr, len_ptr) },
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

/// What a test that connects step by step starts from: two ends of the
/// fixture, a QP on each (contexts `0xA`, `0xB`) and a listener on B at an
/// ephemeral port, with its connect events and the address it reports.
pub type Stage = ((End, End), (Qp, Qp), (Listener, Arc<Incoming>, Addr));

impl Fixture<'_> {
    /// The fixture's two ends, QPs and a listener on B: a [`Stage`].
    pub fn stage(self) -> Stage {
        let (a, b) = self.ends();
        let qps = (a.qp(0xA), b.qp(0xB));
        let listening = b.listen(0);
        ((a, b), qps, listening)
    }
}

/// A [`Stage`] owned as one value, for the tests of family N that connect
/// step by step: [`Staged::request`] starts a connection to its listener,
/// [`Staged::close`] closes all it opened in one call.
pub struct Staged {
    pub a: End,
    pub b: End,
    pub a_qp: Qp,
    pub b_qp: Qp,
    pub listener: Listener,
    pub incoming: Arc<Incoming>,
    pub listen_addr: Addr,
}

impl Fixture<'_> {
    /// The fixture's two ends, QPs and a listener on B, as a [`Staged`].
    pub fn staged(self) -> Staged {
        let ((a, b), (a_qp, b_qp), (listener, incoming, listen_addr)) = self.stage();
        Staged {
            a,
            b,
            a_qp,
            b_qp,
            listener,
            incoming,
            listen_addr,
        }
    }
}

impl Staged {
    /// A Connect of A's QP to the listener, with `data`, and the request it
    /// delivered, the `nth` connect event ([`connect_request`]).
    pub fn request(
        &self,
        nth: usize,
        data: &[u8],
    ) -> (Connector, (NtStatus, Arc<Signal>), Connector) {
        connect_request(
            (&self.a, &self.a_qp),
            self.listen_addr,
            &self.incoming,
            nth,
            data,
        )
    }

    /// A connection of A's QP to B's through the listener, the request the
    /// `nth` connect event ([`Conn::establish`]).
    pub fn establish(&self, nth: usize) -> Conn {
        let a = &self.a;
        Conn::establish(
            &a.adapter,
            a.addr,
            &self.a_qp,
            self.listen_addr,
            &self.incoming,
            nth,
            &self.b_qp,
        )
    }

    /// Closes all the stage opened ([`close_stage`]).
    pub fn close(self) {
        close_stage(self.listener, [self.a_qp, self.b_qp], (self.a, self.b));
    }

    /// Closes all the stage opened and the memory given
    /// ([`close_stage_with_memory`]).
    pub fn close_with_memory<const M: usize>(self, mems: [Mem; M]) {
        let qps = [self.a_qp, self.b_qp];
        close_stage_with_memory(self.listener, mems, qps, (self.a, self.b));
    }
}

/// Two ends of the fixture with a QP on each (contexts `0xA`, `0xB`), not
/// yet connected: for a test that posts before the connection exists or
/// makes its CQs itself ([`Fixture::a_cq`]), then connects with
/// [`Unconnected::connect`].
pub struct Unconnected {
    pub a: End,
    pub b: End,
    pub a_qp: Qp,
    pub b_qp: Qp,
}

impl Fixture<'_> {
    /// The fixture's two ends and a QP on each, unconnected.
    pub fn unconnected(self) -> Unconnected {
        let (a, b) = self.ends();
        let (a_qp, b_qp) = (a.qp(0xA), b.qp(0xB));
        Unconnected { a, b, a_qp, b_qp }
    }
}

impl Unconnected {
    /// Connects A's QP to B's through a listener on B ([`Link::connect`]).
    pub fn connect(&self) -> Link {
        Link::connect(
            (&self.a.adapter, self.a.addr, &self.a_qp),
            (&self.b.adapter, self.b.addr, &self.b_qp),
        )
    }

    /// Closes both QPs, then both ends (every close L18 checked).
    pub fn close(self) {
        assert_close(self.a_qp.close());
        assert_close(self.b_qp.close());
        self.a.close();
        self.b.close();
    }
}

/// Closes the QPs given (any outcome), then both ends.
pub fn close_ends<const N: usize>(qps: [Qp; N], (a, b): (End, End)) {
    for qp in qps {
        qp.close();
    }
    a.close();
    b.close();
}

/// Closes what a [`Stage`] opened once the test is done: the QPs given
/// (close any outcome), the listener (it must succeed) and both ends.
pub fn close_stage<const N: usize>(listener: Listener, qps: [Qp; N], (a, b): (End, End)) {
    for qp in qps {
        qp.close();
    }
    assert_success!(listener.close());
    a.close();
    b.close();
}

/// Closes what a connection test opened, in this order: the listener, the
/// registered memory, the QPs and the two ends.
pub fn close_stage_with_memory<const M: usize, const N: usize>(
    listener: Listener,
    mems: [Mem; M],
    qps: [Qp; N],
    (a, b): (End, End),
) {
    assert_success!(listener.close());
    for mem in mems {
        mem.close();
    }
    for qp in qps {
        qp.close();
    }
    a.close();
    b.close();
}

/// Closes pairs of QPs, then the two ends.
pub fn close_qp_pairs(qps: Vec<(Qp, Qp)>, (a, b): (End, End)) {
    for (a_qp, b_qp) in qps {
        a_qp.close();
        b_qp.close();
    }
    a.close();
    b.close();
}

/// One connection per pair of `qps` from `a` to the listener at
/// `listen_addr`, the `i`-th pair's request the `i + 1`-th connect event of
/// `incoming`.
pub fn establish_each(
    a: &End,
    qps: &[(Qp, Qp)],
    listen_addr: Addr,
    incoming: &Incoming,
) -> Vec<Conn> {
    qps.iter()
        .enumerate()
        .map(|(i, (a_qp, b_qp))| {
            Conn::establish(&a.adapter, a.addr, a_qp, listen_addr, incoming, i + 1, b_qp)
        })
        .collect()
}
