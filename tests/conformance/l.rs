//! Family L of the rules catalogue (object lifetime: creation, asynchronous
//! completion, close), through the C ABI.
//!
//! Consumer-only rules (L17, L19, L28) are checked as the provider's behaviour
//! when a consumer keeps them, and as its robustness when one breaks them while
//! the object is still alive (a close still pending).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use softndk::abi::*;
use softndk::provider::host::SoftNdkCloseAdapter;

use super::harness::*;

// ---------------------------------------------------------------------------
// One object of every type
// ---------------------------------------------------------------------------

/// A GUID no provider implements.
const UNKNOWN_EXTENSION: Guid = Guid::from_u128(0x12345678_9ABC_DEF0_4C43_4B0001020304);

/// What QueryExtension must leave alone when it does not succeed (L29).
const UNTOUCHED: usize = 0x5EED_0000_0000_5EED;

/// One object of an NDK type, as the generic tests see it.
struct Obj {
    ptr: *mut c_void,
    kind: NdkObjectType,
    slots: usize,
    query_extension: NdkFnQueryExtensionInterface,
    name: &'static str,
}

/// One object of each of the ten NDK types on one adapter (two MRs: one for
/// RegisterMr, one for fast registration; two QPs: one with its own receive
/// queue, one on the SRQ).
struct Zoo {
    addr: Addr,
    adapter: Adapter,
    cq: Cq,
    pd: Pd,
    mr: Mr,
    fast_mr: Mr,
    mw: Mw,
    srq: Srq,
    qp: Qp,
    srq_qp: Qp,
    endpoint: SharedEndpoint,
    connector: Connector,
    listener: Listener,
    incoming: Arc<Incoming>,
}

impl Zoo {
    fn new() -> Self {
        let Near {
            addr,
            adapter,
            cq,
            pd,
            qp,
        } = Near::new();
        let mr = pd.mr(false);
        let fast_mr = pd.mr(true);
        let mw = pd.mw();
        let srq = pd.try_srq(16, 1, 0, None).expect("CreateSrq");
        let srq_qp = pd
            .try_qp(&cq, &cq, RecvQueue::Shared(&srq), 0x201, 16, 1, 0)
            .expect("CreateQpWithSrq");
        let endpoint = adapter
            .try_shared_endpoint(addr)
            .expect("CreateSharedEndpoint");
        let connector = adapter.connector();
        let incoming = Incoming::new();
        let listener = adapter.listener(&incoming);
        Self {
            addr,
            adapter,
            cq,
            pd,
            mr,
            fast_mr,
            mw,
            srq,
            qp,
            srq_qp,
            endpoint,
            connector,
            listener,
            incoming,
        }
    }

    fn objects(&self) -> Vec<Obj> {
        vec![
            Obj {
                ptr: self.adapter.0.cast(),
                kind: NdkObjectType::ADAPTER,
                slots: 9,
                query_extension: self.adapter.d().ndk_query_extension,
                name: "adapter",
            },
            Obj {
                ptr: self.qp.0.cast(),
                kind: NdkObjectType::QP,
                slots: 11,
                query_extension: self.qp.d().ndk_query_extension,
                name: "QP",
            },
            Obj {
                ptr: self.srq_qp.0.cast(),
                kind: NdkObjectType::QP,
                slots: 11,
                query_extension: self.srq_qp.d().ndk_query_extension,
                name: "QP with SRQ",
            },
            Obj {
                ptr: self.cq.0.cast(),
                kind: NdkObjectType::CQ,
                slots: 7,
                query_extension: self.cq.d().ndk_query_extension,
                name: "CQ",
            },
            Obj {
                ptr: self.mr.0.cast(),
                kind: NdkObjectType::MR,
                slots: 7,
                query_extension: self.mr.d().ndk_query_extension,
                name: "MR",
            },
            Obj {
                ptr: self.fast_mr.0.cast(),
                kind: NdkObjectType::MR,
                slots: 7,
                query_extension: self.fast_mr.d().ndk_query_extension,
                name: "fast-register MR",
            },
            Obj {
                ptr: self.mw.0.cast(),
                kind: NdkObjectType::MW,
                slots: 3,
                query_extension: self.mw.d().ndk_query_extension,
                name: "MW",
            },
            Obj {
                ptr: self.pd.0.cast(),
                kind: NdkObjectType::PD,
                slots: 8,
                query_extension: self.pd.d().ndk_query_extension,
                name: "PD",
            },
            Obj {
                ptr: self.endpoint.0.cast(),
                kind: NdkObjectType::SHARED_ENDPOINT,
                slots: 3,
                query_extension: self.endpoint.d().ndk_query_extension,
                name: "shared endpoint",
            },
            Obj {
                ptr: self.connector.0.cast(),
                kind: NdkObjectType::CONNECTOR,
                slots: 11,
                query_extension: self.connector.d().ndk_query_extension,
                name: "connector",
            },
            Obj {
                ptr: self.listener.0.cast(),
                kind: NdkObjectType::LISTENER,
                slots: 5,
                query_extension: self.listener.d().ndk_query_extension,
                name: "listener",
            },
            Obj {
                ptr: self.srq.0.cast(),
                kind: NdkObjectType::SRQ,
                slots: 4,
                query_extension: self.srq.d().ndk_query_extension,
                name: "SRQ",
            },
        ]
    }

    /// Closes every object, successors first, each through its own close
    /// slot (L18 checked), then the adapter.
    fn close(self) {
        for slot in self.successors().into_iter().chain(self.antecedents()) {
            close_and_wait(slot);
        }
        self.adapter.close();
    }

    /// The objects no other object of the zoo depends on, successors
    /// first (connectors before their QPs and listener).
    fn successors(&self) -> [CloseSlot; 8] {
        [
            self.connector.close_slot(),
            self.listener.close_slot(),
            self.endpoint.close_slot(),
            self.qp.close_slot(),
            self.srq_qp.close_slot(),
            self.mw.close_slot(),
            self.mr.close_slot(),
            self.fast_mr.close_slot(),
        ]
    }

    /// The SRQ, the CQ and the PD: antecedents of the others (L24).
    fn antecedents(&self) -> [CloseSlot; 3] {
        [
            self.srq.close_slot(),
            self.cq.close_slot(),
            self.pd.close_slot(),
        ]
    }
}

/// QueryExtension through `query`: the status and what the interface holds
/// afterwards ([`UNTOUCHED`] unless the provider wrote it).
fn query_extension(
    object: *mut c_void,
    query: NdkFnQueryExtensionInterface,
    id: &Guid,
) -> (NtStatus, usize) {
    let mut interface = NdkExtensionInterface {
        dispatch: UNTOUCHED as *const c_void,
    };
    // SAFETY: a live object and its own QueryExtension slot; valid GUID and
    // out-structure.
    let status = unsafe { query(object.cast(), id, NDK_VERSION_1_2, &raw mut interface) };
    (status, interface.dispatch as usize)
}

/// The objects of a pair, with their types.
fn pair_objects(p: &Pair) -> Vec<(*mut c_void, NdkObjectType, &'static str)> {
    vec![
        (p.a.0.cast(), NdkObjectType::ADAPTER, "adapter A"),
        (p.b.0.cast(), NdkObjectType::ADAPTER, "adapter B"),
        (p.a_cq.0.cast(), NdkObjectType::CQ, "CQ A"),
        (p.b_cq.0.cast(), NdkObjectType::CQ, "CQ B"),
        (p.a_pd.0.cast(), NdkObjectType::PD, "PD A"),
        (p.b_pd.0.cast(), NdkObjectType::PD, "PD B"),
        (p.a_qp.0.cast(), NdkObjectType::QP, "QP A"),
        (p.b_qp.0.cast(), NdkObjectType::QP, "QP B"),
        (p.a_conn.0.cast(), NdkObjectType::CONNECTOR, "connector A"),
        (
            p.b_conn.0.cast(),
            NdkObjectType::CONNECTOR,
            "connector B (incoming)",
        ),
        (p.listener.0.cast(), NdkObjectType::LISTENER, "listener"),
    ]
}

/// L2 / L3: the header of `object` holds the negotiated version, its type and
/// an all-zero reserved block.
fn assert_header(object: *const c_void, kind: NdkObjectType, version: NdkVersion, name: &str) {
    let header = header_of(object);
    assert_eq!(header.version, version, "L2: version of the {name}");
    assert_eq!(header.object_type, kind, "L2: type of the {name}");
    assert_ne!(header.object_type, NdkObjectType::UNDEFINED);
    assert!(
        header.ndk_reserved.rf.iter().all(|p| p.is_null()),
        "L2/L3: reserved block of the {name}: {:?}",
        header.ndk_reserved.rf
    );
    assert!(!dispatch_of(object).is_null(), "L2: Dispatch of the {name}");
}

/// NdkConnect with the test's own completion callback and context, no
/// private data.
fn connect_with(
    connector: &Connector,
    qp: &Qp,
    src: Addr,
    dst: Addr,
    callback: NdkFnRequestCompletion,
    context: *mut c_void,
) -> NtStatus {
    // SAFETY: live objects; addresses valid for the call; the context
    // outlives the completion (tests keep it).
    unsafe {
        (connector.d().ndk_connect)(
            connector.0,
            qp.0,
            src.as_ptr(),
            src.len(),
            dst.as_ptr(),
            dst.len(),
            1,
            1,
            b"".as_ptr().cast(),
            0,
            Some(callback),
            context,
        )
    }
}

/// A listening listener on a fresh adapter of its own and the address a
/// connector reaches it at.
struct Far {
    adapter: Adapter,
    listener: Listener,
    incoming: Arc<Incoming>,
    at: Addr,
}

impl Far {
    fn new() -> Self {
        let addr = own_address();
        let adapter = open_adapter(addr);
        let incoming = Incoming::new();
        let listener = adapter.listener(&incoming);
        assert_success!(listener.listen(addr), "Listen");
        let (_, at, _) = listener.local_address();
        Self {
            adapter,
            listener,
            incoming,
            at,
        }
    }

    /// A QP of the far adapter's own, to accept with: with its CQ and PD,
    /// in the order [`close_near_and_far`] takes them.
    fn qp(&self) -> (Qp, Cq, Pd) {
        let cq = self.adapter.cq(16);
        let pd = self.adapter.pd();
        let qp = pd.qp(&cq, &cq, 0xF);
        (qp, cq, pd)
    }

    /// Closes the incoming connectors `n` so far, the listener and the adapter.
    fn close(self, n: usize) {
        for i in 1..=n {
            let connector = self.incoming.wait_nth(i);
            let status = connector.close();
            assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
        }
        let status = self.listener.close();
        assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
        self.adapter.close();
    }
}

/// Closes a connected [`Near`] and [`Far`] once their connectors are
/// closed: each side's QP, CQ and PD (the far ones given; L18 checked, each
/// close waited for), the adapters and the listener.
fn close_near_and_far(near: Near, far: Far, (far_qp, far_cq, far_pd): (Qp, Cq, Pd)) {
    for qp in [near.qp, far_qp] {
        close_and_wait(qp.close_slot());
    }
    for cq in [near.cq, far_cq] {
        close_and_wait(cq.close_slot());
    }
    for pd in [near.pd, far_pd] {
        close_and_wait(pd.close_slot());
    }
    near.adapter.close();
    let status = far.listener.close();
    assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
    far.adapter.close();
}

/// A [`Near`] with a fresh connector of its adapter, and a [`Far`] for it
/// to connect to: the start of the tests that drive one connection attempt
/// by hand.
fn near_connector_far() -> (Near, Connector, Far) {
    let near = Near::new();
    let far = Far::new();
    let connector = near.adapter.connector();
    (near, connector, far)
}

/// An adapter with a CQ, a PD and a QP, unconnected.
struct Near {
    addr: Addr,
    adapter: Adapter,
    cq: Cq,
    pd: Pd,
    qp: Qp,
}

impl Near {
    fn new() -> Self {
        let addr = own_address();
        let adapter = open_adapter(addr);
        let cq = adapter.cq(64);
        let pd = adapter.pd();
        let qp = pd.qp(&cq, &cq, 0x0A);
        Self {
            addr,
            adapter,
            cq,
            pd,
            qp,
        }
    }

    /// Closes the QP, the CQ and the PD, each close succeeding at once
    /// (nothing holds them any more), then the adapter.
    fn close(self) {
        assert_closes_succeed!(self.qp, self.cq, self.pd);
        self.adapter.close();
    }

    /// NdkConnect of the near QP through `connector` to `far`'s listener,
    /// with the test's own completion callback and context
    /// ([`connect_with`]).
    fn connect_to(
        &self,
        connector: &Connector,
        far: &Far,
        callback: NdkFnRequestCompletion,
        context: *mut c_void,
    ) -> NtStatus {
        connect_with(connector, &self.qp, self.addr, far.at, callback, context)
    }
}

// ---------------------------------------------------------------------------
// L1, L2, L3, L4, L29: shapes and tables
// ---------------------------------------------------------------------------

// rule L1, L10, L29
#[test]
fn l1_every_slot_of_every_table_is_a_working_function() {
    let zoo = Zoo::new();
    // No slot is NULL (read as raw words: a NULL fn pointer is not a value
    // Rust can hold).
    for obj in zoo.objects() {
        let raw = raw_slots(obj.ptr, obj.slots);
        assert!(
            raw.iter().all(|&slot| slot != 0),
            "L1: a NULL slot in the {} table: {raw:x?}",
            obj.name
        );
    }
    // QueryExtension, slot 1 of every table (0 of the adapter's): L29.
    for obj in zoo.objects() {
        let (status, _) = query_extension(obj.ptr, obj.query_extension, &UNKNOWN_EXTENSION);
        assert_eq!(status, STATUS_NOT_SUPPORTED, "L29: {}", obj.name);
    }

    // Adapter: QueryAdapterInfo, the five creates (Zoo::new), BuildLam and
    // ReleaseLam.
    let info = zoo.adapter.info();
    assert_eq!(info.version, NDK_VERSION_1_2);
    let mut pages = Buffer::new(2 * PAGE, 0, 0);
    let (status, mut lam, _fbo) = zoo.adapter.build_lam(&mut pages);
    assert_success!(status, "BuildLam");
    let lam_page = lam_pages(&lam)[0];

    // CQ: ResizeCq, ArmCq, GetCqResults, ControlCqInterruptModeration,
    // GetCqResultsEx (close at the end).
    assert_success!(zoo.cq.resize(128), "ResizeCq");
    zoo.cq.arm(NdkCqNotifyType::ANY);
    assert!(zoo.cq.poll(4).is_empty());
    assert!(zoo.cq.poll_ex(4).is_empty());
    // SAFETY: a live CQ.
    let status = unsafe { (zoo.cq.d().ndk_control_cq_interrupt_moderation)(zoo.cq.0, 0, 0) };
    assert_eq!(status, STATUS_NOT_SUPPORTED, "K8: no moderation flag");

    // PD: GetPrivilegedMemoryRegionToken (the creates: Zoo::new).
    let _ = zoo.pd.privileged_token();

    // MR: RegisterMr, the two token getters; InitializeFastRegisterMr.
    let mut region = Buffer::new(PAGE, 0, 0);
    assert_success!(
        zoo.mr
            .register(&mut region, MrFlags::ALLOW_LOCAL_WRITE.bits())
    );
    let local = zoo.mr.local_token();
    let _remote = zoo.mr.remote_token();
    assert_success!(zoo.fast_mr.init_fast(16, true));

    // MW: GetRemoteTokenFromMw (unbound: any value).
    let _ = zoo.mw.remote_token();

    // SRQ: ModifySrq, SrqReceive.
    assert_success!(zoo.srq.modify(0, 0), "ModifySrq");
    assert_success!(zoo.srq.receive(1, &[]), "SrqReceive");

    // QP: Receive; every initiator request on an unconnected QP (P7); Flush.
    assert_success!(zoo.qp.receive(1, &[region.sge(0, 64, local)]));
    let sge = [region.sge(0, 64, local)];
    let initiator = [
        ("Send", zoo.qp.send(2, &sge, 0)),
        (
            "SendAndInvalidate",
            zoo.qp.send_and_invalidate(3, &sge, 0, 1),
        ),
        ("Read", zoo.qp.read(4, &sge, region.va(), 1, 0)),
        ("Write", zoo.qp.write(5, &sge, region.va(), 1, 0)),
        (
            "Bind",
            zoo.qp.bind(
                6,
                &zoo.mr,
                &zoo.mw,
                region.va(),
                64,
                OpFlags::ALLOW_REMOTE_READ.bits(),
            ),
        ),
        (
            "FastRegister",
            zoo.qp
                .fast_register(7, &zoo.fast_mr, &[lam_page], 0, PAGE, lam_page, 0),
        ),
        ("Invalidate", zoo.qp.invalidate(8, zoo.mw.header(), 0)),
    ];
    for (name, status) in initiator {
        assert_eq!(status, STATUS_CONNECTION_INVALID, "P7: {name} unconnected");
    }
    zoo.qp.flush();
    // E1: the QP's receive is cancelled (the SRQ's stays in the SRQ, E4).
    assert_eq!(
        summary(&zoo.cq.wait_results(1)),
        vec![(1, STATUS_CANCELLED)]
    );
    assert_success!(zoo.mr.deregister(), "DeregisterMr");
    zoo.adapter.release_lam(&mut lam);

    // Shared endpoint: GetLocalAddress.
    let mut addr = Addr::empty();
    let mut len = 28_u32;
    // SAFETY: a live endpoint and a 28-byte buffer.
    let status = unsafe {
        (zoo.endpoint.d().ndk_get_local_address)(zoo.endpoint.0, addr.as_mut_ptr(), &raw mut len)
    };
    assert_success!(status, "GetSharedEndpointLocalAddress");

    // Listener: Listen, GetLocalAddress, ControlConnectEvents.
    assert_success!(zoo.listener.listen(zoo.addr));
    let (status, listening, _) = zoo.listener.local_address();
    assert_success!(status);
    assert_ne!(listening.port(), 0, "an ephemeral port was picked");
    zoo.listener.pause(true);
    zoo.listener.pause(false);

    // Connector: Connect and ConnectWithSharedEndpoint (nobody listens on
    // port 9: refused), then every other function on the idle connector.
    let nobody = zoo.addr.with_port(9);
    let signal = Signal::new();
    // (The SRQ QP: the other one was flushed and can no longer connect.)
    let status = connect_with(
        &zoo.connector,
        &zoo.srq_qp,
        zoo.addr,
        nobody,
        on_status,
        signal.ctx(),
    );
    assert_eq!(settle(status, &signal), STATUS_CONNECTION_REFUSED);
    let (status, signal) = connect_shared(
        &zoo.connector,
        &zoo.srq_qp,
        &zoo.endpoint,
        nobody,
        1,
        1,
        b"",
    );
    assert_eq!(settle(status, &signal), STATUS_CONNECTION_REFUSED);
    let indications = Signal::new();
    let signal = Signal::new();
    // SAFETY: a live connector; the signals outlive it.
    let status = unsafe {
        (zoo.connector.d().ndk_complete_connect)(
            zoo.connector.0,
            Some(on_disconnect),
            indications.ctx(),
            Some(on_status),
            signal.ctx(),
        )
    };
    assert_eq!(
        settle(status, &signal),
        STATUS_CONNECTION_INVALID,
        "N14: CompleteConnect while not connecting"
    );
    let (status, signal) = zoo.connector.accept(&zoo.srq_qp, 1, 1, b"", &indications);
    assert!(settle(status, &signal) < 0, "Accept on an active connector");
    assert_ne!(zoo.connector.reject(b""), STATUS_PENDING, "L10: Reject");
    assert_ne!(zoo.connector.connection_data(0).0, STATUS_PENDING, "L10");
    assert_ne!(zoo.connector.local_address().0, STATUS_PENDING, "L10");
    assert_ne!(zoo.connector.peer_address().0, STATUS_PENDING, "L10");
    let (status, signal) = zoo.connector.disconnect();
    assert!(
        settle(status, &signal) < 0,
        "Disconnect of an idle connector"
    );
    assert_eq!(indications.count(), 0);

    // Close, slot 0 of every table but the adapter's: Zoo::close.
    zoo.close();
}

// rule L2
// see also A4
#[test]
fn l2_headers_hold_version_type_zero_reserved_and_the_type_table() {
    let zoo = Zoo::new();
    let version = zoo.adapter.info().version;
    assert_eq!(version, NDK_VERSION_1_2, "A2: the provider's highest minor");
    let objects = zoo.objects();
    for obj in &objects {
        assert_header(obj.ptr, obj.kind, version, obj.name);
    }
    // One table per type: equal within a type, distinct across types.
    for x in &objects {
        for y in &objects {
            let same = dispatch_of(x.ptr) == dispatch_of(y.ptr);
            assert_eq!(
                same,
                x.kind == y.kind,
                "L2: Dispatch of the {} and the {}",
                x.name,
                y.name
            );
        }
    }
    // A connector the provider creates for an incoming request (handed over
    // by the connect event) is set up the same way.
    assert_success!(zoo.listener.listen(zoo.addr));
    let (_, at, _) = zoo.listener.local_address();
    let active = zoo.adapter.connector();
    let (status, connected) = active.connect(&zoo.qp, zoo.addr, at, 1, 1, b"");
    let passive = zoo.incoming.wait_nth(1);
    assert_header(
        passive.0.cast(),
        NdkObjectType::CONNECTOR,
        version,
        "incoming connector",
    );
    assert_eq!(
        dispatch_of(passive.0.cast()),
        dispatch_of(zoo.connector.0.cast()),
        "L2: the incoming connector's table is the connector table"
    );
    assert_success!(passive.reject(b""));
    assert_eq!(connected.outcome(status), STATUS_CONNECTION_REFUSED);
    close_and_wait(passive.close_slot());
    close_and_wait(active.close_slot());
    zoo.close();
}

// rule L3, L2
#[test]
fn l3_reserved_block_stays_zero_through_use_and_a_pending_close() {
    let watch = Watch::new();
    let p = pair_watching_b(&watch);
    let version = p.a.info().version;
    for (object, kind, name) in pair_objects(&p) {
        assert_header(object, kind, version, name);
    }
    // Traffic of every kind of callback and completion.
    let mut sink = Buffer::new(PAGE, 0, 0);
    let mr = p.b_pd.mr(false);
    assert_success!(mr.register(&mut sink, MrFlags::ALLOW_REMOTE_WRITE.bits()));
    let data = *b"reserved";
    let inline = [inline_sge(&data)];
    for i in 0..4 {
        recv0(&p.b_qp, 100 + i);
    }
    p.b_cq.arm(NdkCqNotifyType::ANY);
    send0(&p.a_qp, 1, 0);
    send0(&p.a_qp, 2, SOLICIT);
    assert_success!(p.a_qp.write(
        3,
        &inline,
        sink.va(),
        mr.remote_token(),
        OpFlags::INLINE.bits()
    ));
    assert_eq!(p.a_cq.wait_results(3).len(), 3);
    assert_eq!(p.b_cq.wait_results(2).len(), 2);
    watch.wait_returned(1);
    assert_eq!(&sink.bytes()[..8], b"reserved");
    // The MR's header too, and while its PD's close is pending.
    let closing = Closing::start(p.b_pd.close_slot());
    assert_eq!(
        closing.status, STATUS_PENDING,
        "L24: the PD has an MR and a QP"
    );
    for (object, kind, name) in pair_objects(&p) {
        assert_header(object, kind, version, name);
    }
    assert_header(mr.0.cast(), NdkObjectType::MR, version, "MR");
    assert_header(p.b_pd.0.cast(), NdkObjectType::PD, version, "closing PD");
    assert_success!(mr.close());
    teardown_closings(
        p,
        Closed {
            b_pd: true,
            ..Closed::default()
        },
        [closing],
    );
}

// rule L4
#[test]
fn l4_provider_never_reads_dispatch_after_creation() {
    let p = Pair::new();
    // The consumer keeps copies of the tables and calls through them.
    let ad = *p.a.d();
    let bd = *p.b.d();
    let a_cqd = *p.a_cq.d();
    let b_cqd = *p.b_cq.d();
    let a_pdd = *p.a_pd.d();
    let b_pdd = *p.b_pd.d();
    let a_qpd = *p.a_qp.d();
    let b_qpd = *p.b_qp.d();
    let active_cd = *p.a_conn.d();
    let passive_cd = *p.b_conn.d();
    let ld = *p.listener.d();
    let objects: Vec<*mut c_void> = pair_objects(&p).into_iter().map(|o| o.0).collect();
    // ... and overwrites every Dispatch field (NULL: any read for a call or
    // for a check would show).
    let saved: Vec<*const c_void> = objects
        .iter()
        // SAFETY: live objects; restored below before the harness reads them.
        .map(|&object| unsafe { set_dispatch(object, std::ptr::null()) })
        .collect();

    // Adapter: QueryAdapterInfo, a new PD and MR, CreateCq.
    let mut info = std::mem::MaybeUninit::<NdkAdapterInfo>::zeroed();
    let mut size = u32::try_from(size_of::<NdkAdapterInfo>()).unwrap();
    // SAFETY: a live adapter and a buffer of `size` bytes.
    let status = unsafe { (ad.ndk_query_adapter_info)(p.a.0, info.as_mut_ptr(), &raw mut size) };
    assert_success!(status, "L4: QueryAdapterInfo");
    let mut cq = std::ptr::null_mut();
    let watch = Signal::new();
    // SAFETY: a live adapter; the signal outlives the CQ.
    let status = unsafe {
        (bd.ndk_create_cq)(
            p.b.0,
            8,
            Some(on_status),
            watch.ctx(),
            std::ptr::null(),
            None,
            std::ptr::null_mut(),
            &raw mut cq,
        )
    };
    assert_success!(status, "L4: CreateCq");
    let extra_cq = Cq(cq, watch);
    let mut mr = std::ptr::null_mut();
    // SAFETY: a live PD.
    let status =
        unsafe { (b_pdd.ndk_create_mr)(p.b_pd.0, 0, None, std::ptr::null_mut(), &raw mut mr) };
    assert_success!(status, "L4: CreateMr");
    let mr = Mr(mr);
    let mrd = *mr.d();
    // SAFETY: the new MR is live; its Dispatch is not read again here.
    let _ = unsafe { set_dispatch(mr.0.cast(), std::ptr::null()) };
    let mut sink = Buffer::new(PAGE, 0, 0);
    let signal = Signal::new();
    // SAFETY: the MDL describes the test's locked buffer, kept until closed.
    let status = unsafe {
        (mrd.ndk_register_mr)(
            mr.0,
            sink.mdl(),
            sink.len,
            MrFlags::ALLOW_REMOTE_WRITE.bits(),
            Some(on_status),
            signal.ctx(),
        )
    };
    assert_success!(settle(status, &signal), "L4: RegisterMr");
    // SAFETY: a live MR.
    let token = unsafe { (mrd.ndk_get_remote_token_from_mr)(mr.0) };
    // SAFETY: a live MR.
    let _local = unsafe { (mrd.ndk_get_local_token_from_mr)(mr.0) };
    let mut privileged = 0;
    // SAFETY: a live PD.
    unsafe { (a_pdd.ndk_get_privileged_memory_region_token)(p.a_pd.0, &raw mut privileged) };

    // QPs and CQs: a Receive, an armed CQ, a solicited Send, an inline Write,
    // and the completions through both GetCqResults forms.
    // SAFETY: a live QP; no SGEs.
    let status = unsafe { (b_qpd.ndk_receive)(p.b_qp.0, 7 as *mut c_void, std::ptr::null(), 0) };
    assert_success!(status, "L4: Receive");
    // SAFETY: a live CQ.
    unsafe { (b_cqd.ndk_arm_cq)(p.b_cq.0, NdkCqNotifyType::ANY) };
    // SAFETY: a live QP; no SGEs.
    let status =
        unsafe { (a_qpd.ndk_send)(p.a_qp.0, 8 as *mut c_void, std::ptr::null(), 0, SOLICIT) };
    assert_success!(status, "L4: Send");
    let data = *b"dispatch";
    let inline = inline_sge(&data);
    // SAFETY: a live QP; the inline SGE's buffer lives through the call.
    let status = unsafe {
        (a_qpd.ndk_write)(
            p.a_qp.0,
            9 as *mut c_void,
            &raw const inline,
            1,
            sink.va(),
            token,
            OpFlags::INLINE.bits(),
        )
    };
    assert_success!(status, "L4: Write");
    let mut got: Vec<usize> = Vec::new();
    let mut received = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while got.len() < 2 || received.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "L4: completions missing"
        );
        // SAFETY: NdkResult is plain data.
        let mut results = [unsafe { std::mem::zeroed::<NdkResult>() }; 4];
        // SAFETY: room for 4 results.
        let n = unsafe { (a_cqd.ndk_get_cq_results)(p.a_cq.0, results.as_mut_ptr(), 4) };
        for r in &results[..n as usize] {
            assert_success!(r.status);
            got.push(r.request_context as usize);
        }
        // SAFETY: NdkResultEx is plain data.
        let mut results = [unsafe { std::mem::zeroed::<NdkResultEx>() }; 4];
        // SAFETY: room for 4 results.
        let n = unsafe { (b_cqd.ndk_get_cq_results_ex)(p.b_cq.0, results.as_mut_ptr(), 4) };
        received.extend(
            results[..n as usize]
                .iter()
                .map(|r| r.request_context as usize),
        );
        std::thread::yield_now();
    }
    assert_eq!(got, vec![8, 9], "L4: initiator completions");
    assert_eq!(received, vec![7], "L4: the receive");
    assert_success!(p.b_cq.1.wait(), "L4: the notification");
    assert_eq!(&sink.bytes()[..8], b"dispatch");

    // Connectors and the listener: their address getters.
    for (connector, d) in [(&p.a_conn, active_cd), (&p.b_conn, passive_cd)] {
        let mut addr = Addr::empty();
        let mut len = 28_u32;
        // SAFETY: a live connector and a 28-byte buffer.
        let status =
            unsafe { (d.ndk_get_peer_address)(connector.0, addr.as_mut_ptr(), &raw mut len) };
        assert_success!(status, "L4: GetPeerAddress");
    }
    let mut addr = Addr::empty();
    let mut len = 28_u32;
    // SAFETY: a live listener and a 28-byte buffer.
    let status =
        unsafe { (ld.ndk_get_local_address)(p.listener.0, addr.as_mut_ptr(), &raw mut len) };
    assert_success!(status, "L4: GetListenerLocalAddress");

    // Closes through the saved tables with Dispatch still overwritten.
    close_and_wait((mr.0.cast(), mrd.ndk_close_mr));
    close_and_wait((extra_cq.0.cast(), b_cqd.ndk_close_cq));

    // The harness's closes read Dispatch: give the objects their tables back,
    // except the adapters, whose close (SoftNdkCloseAdapter) takes the
    // pointer alone.
    for (&object, &dispatch) in objects.iter().zip(&saved).skip(2) {
        // SAFETY: live objects; their own table back.
        let _ = unsafe { set_dispatch(object, dispatch) };
    }
    p.teardown();
}

// rule L29, L10
#[test]
fn l29_query_extension_is_not_supported_on_every_object_and_fills_nothing() {
    let zoo = Zoo::new();
    for obj in zoo.objects() {
        for id in [&UNKNOWN_EXTENSION, &NDK_EXTENSION_ID_ADAPTER_RSS_DISPATCH] {
            let (status, interface) = query_extension(obj.ptr, obj.query_extension, id);
            if status == STATUS_SUCCESS {
                assert_ne!(interface, UNTOUCHED, "L29: success must fill the interface");
            } else {
                assert_eq!(status, STATUS_NOT_SUPPORTED, "L29: {}", obj.name);
                assert_eq!(
                    interface, UNTOUCHED,
                    "L29: filled on failure ({})",
                    obj.name
                );
            }
        }
    }
    zoo.close();
}

// ---------------------------------------------------------------------------
// L5–L9: creation and request completions
// ---------------------------------------------------------------------------

/// What one create completion received.
#[derive(Default)]
struct Created {
    calls: Mutex<Vec<(usize, NtStatus, usize)>>,
}

/// `NDK_FN_CREATE_COMPLETION` recording (context, status, object).
unsafe extern "system" fn on_created(
    ctx: *mut c_void,
    status: NtStatus,
    object: *mut NdkObjectHeader,
) {
    // SAFETY: `ctx` is the address of a `Created` the test keeps alive.
    let Created { calls } = unsafe { &*ctx.cast::<Created>() };
    let call = (ctx as usize, status, object as usize);
    calls.lock().unwrap().push(call);
}

/// A sentinel the provider must not write over after `STATUS_PENDING` (L6).
const SENTINEL: usize = 0x00DE_AD00_0000_0CA1;

/// Runs a create with [`on_created`] and an out-pointer preset to
/// [`SENTINEL`], and checks L5–L7 either way: the object and its final
/// status, or the failure status.
fn create<T>(
    what: &str,
    call: impl FnOnce(Option<NdkFnCreateCompletion>, *mut c_void, *mut *mut T) -> NtStatus,
) -> Result<*mut T, NtStatus> {
    let created = Arc::new(Created::default());
    let ctx = Arc::as_ptr(&created).cast_mut().cast::<c_void>();
    let mut out = SENTINEL as *mut T;
    let status = call(Some(on_created), ctx, &raw mut out);
    if status == STATUS_PENDING {
        // L5: exactly once, with the context, the status and the object.
        wait_until(&format!("L5: {what} never completed"), || {
            !created.calls.lock().unwrap().is_empty()
        });
        std::thread::sleep(SETTLE_BRIEF);
        let calls = created.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "L5: {what} completed {} times", calls.len());
        // L6: the out-pointer is not written after STATUS_PENDING.
        assert_eq!(out as usize, SENTINEL, "L6: {what} wrote the out-pointer");
        let (context, status, object) = calls[0];
        assert_eq!(context, ctx as usize, "L5: {what} context");
        if status == STATUS_SUCCESS {
            assert_ne!(object, 0, "L5: {what} object");
            Ok(object as *mut T)
        } else {
            Err(status)
        }
    } else {
        // L7: finished; the completion is never called.
        assert!(
            settled(&created.calls).lock().unwrap().is_empty(),
            "L7: {what} returned {status:#x} and called its completion"
        );
        if status == STATUS_SUCCESS {
            assert!(
                !out.is_null() && out as usize != SENTINEL,
                "L7: {what} succeeded without its object"
            );
            Ok(out)
        } else {
            Err(status)
        }
    }
}

// rule L7, L5, L6, L14
#[test]
fn l7_every_create_finishes_inline_without_its_create_completion() {
    let addr = own_address();
    let adapter = open_adapter(addr);
    let ad = *adapter.d();
    let cq_watch = Signal::new();
    // SAFETY: (here and in each closure below) a live antecedent and the
    // out-pointer `create` passes; the notification contexts outlive the
    // objects.
    let cq = create("CreateCq", |cc, ctx, out| unsafe {
        (ad.ndk_create_cq)(
            adapter.0,
            16,
            Some(on_status),
            cq_watch.ctx(),
            std::ptr::null(),
            cc,
            ctx,
            out,
        )
    })
    .map(|cq| Cq(cq, Signal::new()))
    .expect("CreateCq");
    // SAFETY: as above.
    let pd = create("CreatePd", |cc, ctx, out| unsafe {
        (ad.ndk_create_pd)(adapter.0, cc, ctx, out)
    })
    .map(Pd)
    .expect("CreatePd");
    // SAFETY: as above.
    let connector = create("CreateConnector", |cc, ctx, out| unsafe {
        (ad.ndk_create_connector)(adapter.0, cc, ctx, out)
    })
    .map(Connector)
    .expect("CreateConnector");
    let incoming = Incoming::new();
    // SAFETY: as above.
    let listener = create("CreateListener", |cc, ctx, out| unsafe {
        (ad.ndk_create_listener)(adapter.0, Some(on_connect), incoming.ctx(), cc, ctx, out)
    })
    .map(Listener)
    .expect("CreateListener");
    // SAFETY: as above.
    let endpoint = create("CreateSharedEndpoint", |cc, ctx, out| unsafe {
        (ad.ndk_create_shared_endpoint)(adapter.0, addr.as_ptr(), addr.len(), cc, ctx, out)
    })
    .map(SharedEndpoint)
    .expect("CreateSharedEndpoint");
    let pdd = *pd.d();
    // SAFETY: as above.
    let mr = create("CreateMr", |cc, ctx, out| unsafe {
        (pdd.ndk_create_mr)(pd.0, 0, cc, ctx, out)
    })
    .map(Mr)
    .expect("CreateMr");
    // SAFETY: as above.
    let mw = create("CreateMw", |cc, ctx, out| unsafe {
        (pdd.ndk_create_mw)(pd.0, cc, ctx, out)
    })
    .map(Mw)
    .expect("CreateMw");
    // SAFETY: as above.
    let srq = create("CreateSrq", |cc, ctx, out| unsafe {
        (pdd.ndk_create_srq)(
            pd.0,
            8,
            1,
            0,
            None,
            std::ptr::null_mut(),
            std::ptr::null(),
            cc,
            ctx,
            out,
        )
    })
    .map(Srq)
    .expect("CreateSrq");
    // SAFETY: as above.
    let qp = create("CreateQp", |cc, ctx, out| unsafe {
        (pdd.ndk_create_qp)(
            pd.0,
            cq.0,
            cq.0,
            std::ptr::null_mut(),
            8,
            8,
            1,
            1,
            0,
            cc,
            ctx,
            out,
        )
    })
    .map(Qp)
    .expect("CreateQp");
    // SAFETY: as above.
    let srq_qp = create("CreateQpWithSrq", |cc, ctx, out| unsafe {
        (pdd.ndk_create_qp_with_srq)(
            pd.0,
            cq.0,
            cq.0,
            srq.0,
            std::ptr::null_mut(),
            8,
            1,
            0,
            cc,
            ctx,
            out,
        )
    })
    .map(Qp)
    .expect("CreateQpWithSrq");
    // Failing creates are final too (L7): no completion.
    let info = adapter.info();
    // SAFETY: as above.
    let refused = create("CreateCq over MaxCqDepth", |cc, ctx, out| unsafe {
        (ad.ndk_create_cq)(
            adapter.0,
            info.max_cq_depth + 1,
            Some(on_status),
            std::ptr::null_mut(),
            std::ptr::null(),
            cc,
            ctx,
            out,
        )
    });
    assert_eq!(refused.err(), Some(STATUS_INVALID_PARAMETER));

    for slot in [
        srq_qp.close_slot(),
        qp.close_slot(),
        srq.close_slot(),
        mw.close_slot(),
        mr.close_slot(),
        endpoint.close_slot(),
        listener.close_slot(),
        connector.close_slot(),
        pd.close_slot(),
        cq.close_slot(),
    ] {
        close_and_wait(slot);
    }
    adapter.close();
}

// rule L8, L10
// see also N13, N15
#[test]
fn l8_request_completion_runs_once_and_only_after_pending() {
    let a_addr = own_address();
    let b_addr = own_address();
    let a = open_adapter(a_addr);
    let b = open_adapter(b_addr);
    let a_cq = a.cq(64);
    let b_cq = b.cq(64);
    let a_pd = a.pd();
    let b_pd = b.pd();
    let a_qp = a_pd.qp(&a_cq, &a_cq, 0xA);
    let b_qp = b_pd.qp(&b_cq, &b_cq, 0xB);

    // ResizeCq.
    let signal = Signal::new();
    // SAFETY: a live CQ; the signal outlives the call's completion.
    let status = unsafe { (a_cq.d().ndk_resize_cq)(a_cq.0, 128, Some(on_status), signal.ctx()) };
    assert_success!(settle(status, &signal), "ResizeCq");

    // RegisterMr, DeregisterMr, InitializeFastRegisterMr.
    let mr = a_pd.mr(false);
    let mut buffer = Buffer::new(PAGE, 0, 0);
    let signal = Signal::new();
    // SAFETY: the MDL describes the test's buffer, kept until the MR closes.
    let status = unsafe {
        (mr.d().ndk_register_mr)(
            mr.0,
            buffer.mdl(),
            buffer.len,
            MrFlags::ALLOW_LOCAL_WRITE.bits(),
            Some(on_status),
            signal.ctx(),
        )
    };
    assert_success!(status, "RegisterMr completes inline");
    assert_success!(settle(status, &signal), "RegisterMr");
    let signal = Signal::new();
    // SAFETY: a live, registered MR.
    let status = unsafe { (mr.d().ndk_deregister_mr)(mr.0, Some(on_status), signal.ctx()) };
    assert_success!(settle(status, &signal), "DeregisterMr");
    let fast = a_pd.mr(true);
    let signal = Signal::new();
    // SAFETY: a live fast-register MR.
    let status = unsafe {
        (fast.d().ndk_initialize_fast_register_mr)(fast.0, 16, 0, Some(on_status), signal.ctx())
    };
    assert_success!(settle(status, &signal), "InitializeFastRegisterMr");

    // ModifySrq.
    let srq = a_pd.try_srq(8, 1, 0, None).expect("CreateSrq");
    let signal = Signal::new();
    // SAFETY: a live SRQ.
    let status = unsafe { (srq.d().ndk_modify_srq)(srq.0, 16, 0, Some(on_status), signal.ctx()) };
    assert_success!(settle(status, &signal), "ModifySrq");

    // BuildLam with a completion.
    let mut pages = Buffer::new(PAGE, 0, 0);
    let mut lam = vec![0_u64; 8];
    let mut size = 64_u32;
    let mut fbo = 0_u32;
    let signal = Signal::new();
    // SAFETY: a locked buffer's MDL; a LAM buffer of `size` bytes.
    let status = unsafe {
        (a.d().ndk_build_lam)(
            a.0,
            pages.mdl(),
            pages.len,
            Some(on_status),
            signal.ctx(),
            lam.as_mut_ptr().cast(),
            &raw mut size,
            &raw mut fbo,
        )
    };
    assert_success!(settle(status, &signal), "BuildLam");
    a.release_lam(&mut lam);

    // Listen.
    let incoming = Incoming::new();
    let listener = b.listener(&incoming);
    let signal = Signal::new();
    // SAFETY: a live listener and an address valid for the call.
    let status = unsafe {
        (listener.d().ndk_listen)(
            listener.0,
            b_addr.as_ptr(),
            b_addr.len(),
            Some(on_status),
            signal.ctx(),
        )
    };
    assert_success!(settle(status, &signal), "Listen");
    let (_, at, _) = listener.local_address();

    // Connect refused inline: no completion.
    let refused = a.connector();
    let signal = Signal::new();
    let status = connect_with(
        &refused,
        &a_qp,
        a_addr,
        b_addr.with_port(9),
        on_status,
        signal.ctx(),
    );
    assert_eq!(
        settle(status, &signal),
        STATUS_CONNECTION_REFUSED,
        "Connect"
    );
    close_and_wait(refused.close_slot());

    // Connect, Accept, CompleteConnect: the asynchronous ones pend and
    // complete once.
    let active = a.connector();
    let connected = Signal::new();
    let connect = connect_with(&active, &a_qp, a_addr, at, on_status, connected.ctx());
    assert_eq!(connect, STATUS_PENDING, "Connect waits for the peer");
    let passive = incoming.wait_nth(1);
    let b_indications = Signal::new();
    let (accept, accepted) = passive.accept(&b_qp, 1, 1, b"", &b_indications);
    assert_success!(settle(connect, &connected), "Connect");
    let a_indications = Signal::new();
    let signal = Signal::new();
    // SAFETY: a live connector; the signals outlive it.
    let status = unsafe {
        (active.d().ndk_complete_connect)(
            active.0,
            Some(on_disconnect),
            a_indications.ctx(),
            Some(on_status),
            signal.ctx(),
        )
    };
    assert_success!(settle(status, &signal), "CompleteConnect");
    assert_success!(settle(accept, &accepted), "Accept");

    // Disconnect, both sides.
    let (a_status, a_signal) = active.disconnect();
    let (b_status, b_signal) = passive.disconnect();
    assert_success!(settle(a_status, &a_signal), "Disconnect A");
    let _ = settle(b_status, &b_signal);

    for slot in [
        active.close_slot(),
        passive.close_slot(),
        listener.close_slot(),
        a_qp.close_slot(),
        b_qp.close_slot(),
        srq.close_slot(),
        mr.close_slot(),
        fast.close_slot(),
        a_cq.close_slot(),
        b_cq.close_slot(),
        a_pd.close_slot(),
        b_pd.close_slot(),
    ] {
        close_and_wait(slot);
    }
    a.close();
    b.close();
}

// rule L9, L7
#[test]
fn l9_running_out_of_pds_is_insufficient_resources() {
    let adapter = open_adapter(own_address());
    let d = *adapter.d();
    let created = Arc::new(Created::default());
    let ctx = Arc::as_ptr(&created).cast_mut().cast::<c_void>();
    let mut pds = Vec::new();
    let failure = loop {
        assert!(pds.len() < 100_000, "L9: no limit on PDs");
        let mut pd = std::ptr::null_mut();
        // SAFETY: a live adapter; `created` outlives every completion.
        let status = unsafe { (d.ndk_create_pd)(adapter.0, Some(on_created), ctx, &raw mut pd) };
        match status {
            STATUS_SUCCESS => pds.push(Pd(pd)),
            STATUS_PENDING => {
                // L9: the failure may also come as the completion's status.
                let call = wait_some("L5: no completion", || {
                    created.calls.lock().unwrap().last().copied()
                });
                created.calls.lock().unwrap().clear();
                if call.1 == STATUS_SUCCESS {
                    pds.push(Pd(call.2 as *mut NdkPd));
                } else {
                    break call.1;
                }
            }
            status => break status,
        }
    };
    assert_eq!(failure, STATUS_INSUFFICIENT_RESOURCES, "L9");
    assert!(
        settled(&created.calls).lock().unwrap().is_empty(),
        "L7: completion after an inline return"
    );
    // The limit is the adapter's: one close makes room for one more.
    pds.pop().unwrap().close();
    pds.push(adapter.pd());
    for pd in pds {
        assert_success!(pd.close());
    }
    adapter.close();
}

// rule L10, K8
// see also N5, N16, N18, N22, A7
#[test]
fn l10_calls_without_a_completion_never_pend_and_are_done_on_return() {
    let p = Pair::new();
    let far = Far::new();
    let info_size = u32::try_from(size_of::<NdkAdapterInfo>()).unwrap();

    // QueryAdapterInfo, too small and right.
    let mut size = 4_u32;
    // SAFETY: a live adapter; no buffer, only its size.
    let status =
        unsafe { (p.a.d().ndk_query_adapter_info)(p.a.0, std::ptr::null_mut(), &raw mut size) };
    assert_eq!(status, STATUS_BUFFER_TOO_SMALL, "A7");
    assert_eq!(size, info_size, "A7: the size needed");
    let _ = p.a.info();

    // ControlCqInterruptModeration: K8 without the flag.
    for (interval, count) in [
        (0, 0),
        (100, 8),
        (MAXULONG, 4),
        (10, MAXULONG),
        (MAXULONG, MAXULONG),
    ] {
        // SAFETY: a live CQ.
        let status =
            unsafe { (p.a_cq.d().ndk_control_cq_interrupt_moderation)(p.a_cq.0, interval, count) };
        assert_ne!(status, STATUS_PENDING, "L10: ControlCqInterruptModeration");
    }

    // Address getters on connected connectors and on the listener.
    for (status, _, len) in [
        p.a_conn.local_address(),
        p.a_conn.peer_address(),
        p.b_conn.local_address(),
        p.b_conn.peer_address(),
        p.listener.local_address(),
    ] {
        assert_success!(status, "L10: address getter");
        assert_eq!(len, 16, "N22: a SOCKADDR_IN");
    }

    // GetConnectionData and Reject on an incoming connector: done on return,
    // the peer's Connect fails (N16).
    let connector = p.a.connector();
    let extra_cq = p.a.cq(8);
    let extra_qp = p.a_pd.qp(&extra_cq, &extra_cq, 0xE);
    let a_addr = p.a_conn.local_address().1.with_port(0);
    let (status, connected) = connector.connect(&extra_qp, a_addr, far.at, 1, 1, b"data");
    let passive = far.incoming.wait_nth(1);
    let (data_status, _, _, data, len) = passive.connection_data(64);
    assert_success!(data_status, "L10: GetConnectionData");
    assert!(len >= 4 && data[..4] == *b"data", "N18: the private data");
    assert_success!(passive.reject(b""), "L10: Reject");
    assert_eq!(connected.outcome(status), STATUS_CONNECTION_REFUSED, "N16");

    // ControlConnectEvents: paused when it returns (N5).
    far.listener.pause(true);
    let (status, paused) = connector.connect(&extra_qp, a_addr, far.at, 1, 1, b"");
    assert_eq!(
        paused.outcome(status),
        STATUS_CONNECTION_REFUSED,
        "N5: paused"
    );
    far.listener.pause(false);

    // Flush: the cancellations have started when it returns (E1).
    recv0(&extra_qp, 0xF1);
    extra_qp.flush();
    assert_eq!(
        summary(&extra_cq.wait_results(1)),
        vec![(0xF1, STATUS_CANCELLED)]
    );

    // QueryExtension never pends (L29 has the rest).
    let (status, _) = query_extension(
        p.a_qp.0.cast(),
        p.a_qp.d().ndk_query_extension,
        &UNKNOWN_EXTENSION,
    );
    assert_eq!(status, STATUS_NOT_SUPPORTED);

    close_and_wait(connector.close_slot());
    close_and_wait(extra_qp.close_slot());
    close_and_wait(extra_cq.close_slot());
    far.close(1);
    p.teardown();
}

// rule L11
// see also P6
#[test]
fn l11_work_requests_report_only_through_the_cq() {
    let p = Pair::new();
    let mut sink = Buffer::new(PAGE, 0, 0);
    let b_mr = p.b_pd.mr(false);
    assert_success!(b_mr.register(
        &mut sink,
        (MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_REMOTE_READ).bits()
    ));
    let mut source = Buffer::pattern(PAGE, 0, 7);
    let a_mr = p.a_pd.mr(false);
    assert_success!(a_mr.register(&mut source, MrFlags::ALLOW_LOCAL_WRITE.bits()));
    let mw = p.b_pd.mw();
    let a_sge = [source.sge(0, 64, a_mr.local_token())];
    let b_sge = [sink.sge(0, 64, b_mr.local_token())];
    assert_success!(p.b_qp.receive(1, &b_sge));
    assert_success!(p.a_qp.send(2, &a_sge, 0));
    assert_success!(
        p.a_qp
            .write(3, &a_sge, sink.va() + 64, b_mr.remote_token(), 0)
    );
    assert_success!(p.a_qp.read(4, &a_sge, sink.va(), b_mr.remote_token(), 0));
    // B's receive first: its Bind and Invalidate, local, would otherwise
    // overtake a Send still on the wire (iWARP) and reorder B's CQ.
    let mut b_results = p.b_cq.wait_results(1);
    assert_success!(p.b_qp.bind(
        5,
        &b_mr,
        &mw,
        sink.va(),
        PAGE,
        OpFlags::ALLOW_REMOTE_READ.bits()
    ));
    assert_success!(p.b_qp.invalidate(6, mw.header(), 0));
    let a_results = p.a_cq.wait_results(3);
    b_results.extend(p.b_cq.wait_results(2));
    assert_eq!(
        summary(&a_results),
        vec![(2, 0), (3, 0), (4, 0)],
        "L11: A's requests on A's CQ"
    );
    assert_eq!(
        summary(&b_results),
        vec![(1, 0), (5, 0), (6, 0)],
        "L11: B's requests on B's CQ"
    );
    std::thread::sleep(SETTLE_BRIEF);
    // No callback of any kind: CQs unarmed, no disconnect.
    assert_eq!(p.a_cq.notifications(), vec![]);
    assert_eq!(p.b_cq.notifications(), vec![]);
    assert_eq!(p.a_disconnects.count(), 0);
    assert_eq!(p.b_disconnects.count(), 0);
    assert_closes_succeed!(mw, a_mr, b_mr);
    p.teardown();
}

// ---------------------------------------------------------------------------
// L12, L13: creation limits
// ---------------------------------------------------------------------------

// rule L12
// see also Q1
#[test]
fn l12_cq_and_srq_above_the_adapter_limits_are_invalid_parameter() {
    let adapter = open_adapter(own_address());
    let info = adapter.info();
    let watch = Signal::new();
    assert_eq!(
        adapter.try_cq(info.max_cq_depth + 1, &watch).err(),
        Some(STATUS_INVALID_PARAMETER),
        "L12: CQ depth"
    );
    let at_max = adapter
        .try_cq(info.max_cq_depth, &watch)
        .expect("L12: MaxCqDepth");
    assert_success!(at_max.close());
    let pd = adapter.pd();
    if info.max_srq_depth == 0 {
        assert_eq!(
            pd.try_srq(1, 1, 0, None).err(),
            Some(STATUS_INVALID_PARAMETER),
            "Q1"
        );
    } else {
        assert_eq!(
            pd.try_srq(info.max_srq_depth + 1, 1, 0, None).err(),
            Some(STATUS_INVALID_PARAMETER),
            "L12: SRQ depth"
        );
        assert_eq!(
            pd.try_srq(4, info.max_receive_request_sge + 1, 0, None)
                .err(),
            Some(STATUS_INVALID_PARAMETER),
            "L12: SRQ SGEs"
        );
        let srq = pd
            .try_srq(info.max_srq_depth, info.max_receive_request_sge, 0, None)
            .expect("L12: SRQ at the limits");
        assert_success!(srq.close());
    }
    assert_success!(pd.close());
    adapter.close();
}

// rule L13
#[test]
fn l13_qp_above_the_adapter_limits_is_invalid_parameter() {
    let adapter = open_adapter(own_address());
    let info = adapter.info();
    let cq = adapter.cq(16);
    let pd = adapter.pd();
    let srq = pd.try_srq(8, 1, 0, None).expect("CreateSrq");
    // (receive depth, initiator depth, receive SGEs, initiator SGEs, inline)
    let small = [4, 4, 1, 1, 0];
    let limits = [
        info.max_receive_queue_depth,
        info.max_initiator_queue_depth,
        info.max_receive_request_sge,
        info.max_initiator_request_sge,
        info.max_inline_data_size,
    ];
    let names = [
        "receive depth",
        "initiator depth",
        "receive SGEs",
        "initiator SGEs",
        "inline",
    ];
    for i in 0..5 {
        for (value, ok) in [(limits[i] + 1, false), (limits[i], true)] {
            let mut v = small;
            v[i] = value;
            // Each limit through CreateQp, and through CreateQpWithSrq where
            // it is one of its parameters (it has no receive parameters).
            let own = RecvQueue::Own {
                depth: v[0],
                sge: v[2],
            };
            let kinds = [(own, ""), (RecvQueue::Shared(&srq), " (SRQ)")];
            let with_srq = i != 0 && i != 2;
            for &(receives, kind) in &kinds[..if with_srq { 2 } else { 1 }] {
                let result = pd.try_qp(&cq, &cq, receives, 1, v[1], v[3], v[4]);
                if ok {
                    let qp = result
                        .unwrap_or_else(|s| panic!("L13: {} at the limit{kind}: {s:#x}", names[i]));
                    assert_success!(qp.close());
                } else {
                    assert_eq!(
                        result.err(),
                        Some(STATUS_INVALID_PARAMETER),
                        "L13: {}{kind}",
                        names[i]
                    );
                }
            }
        }
    }
    assert_closes_succeed!(srq, cq, pd);
    adapter.close();
}

// ---------------------------------------------------------------------------
// L14, L24, L25: antecedents and successors
// ---------------------------------------------------------------------------

/// A PD on an adapter of its own with one MR, and the PD's close, started
/// (it pends until the MR closes, L24).
fn pd_closing_over_an_mr() -> (Adapter, Pd, Mr, Closing) {
    let adapter = open_adapter(own_address());
    let pd = adapter.pd();
    let mr = pd.mr(false);
    let closing = Closing::start(pd.close_slot());
    (adapter, pd, mr, closing)
}

// rule L24, L14, L18
#[test]
fn l24_pd_close_pends_until_its_mr_is_closed() {
    let (adapter, _, mr, closing) = pd_closing_over_an_mr();
    assert_eq!(closing.status, STATUS_PENDING, "L24: the PD has an MR");
    assert_eq!(
        settled(&closing.log).count(),
        0,
        "L24: completed before its MR closed"
    );
    assert_success!(mr.close());
    closing.finish();
    adapter.close();
}

// rule L24, L14, L18
#[test]
fn l24_pd_close_pends_until_its_last_successor_of_every_kind_is_closed() {
    let adapter = open_adapter(own_address());
    let cq = adapter.cq(16);
    let pd = adapter.pd();
    let mw = pd.mw();
    let fast = pd.mr(true);
    let srq = pd.try_srq(8, 1, 0, None).expect("CreateSrq");
    let qp = pd
        .try_qp(&cq, &cq, RecvQueue::Shared(&srq), 1, 4, 1, 0)
        .expect("CreateQpWithSrq");
    let pd_close = Closing::start(pd.close_slot());
    assert_eq!(pd_close.status, STATUS_PENDING);
    // The SRQ is an antecedent of the QP: its close pends too.
    let srq_close = Closing::start(srq.close_slot());
    assert_eq!(srq_close.status, STATUS_PENDING, "L24: the SRQ has a QP");
    // So is the CQ.
    let cq_close = Closing::start(cq.close_slot());
    assert_eq!(cq_close.status, STATUS_PENDING, "L24: the CQ has a QP");
    for slot in [mw.close_slot(), fast.close_slot()] {
        close_and_wait(slot);
        assert_eq!(
            settled(&pd_close.log).count(),
            0,
            "L24: the PD still has successors"
        );
    }
    assert_eq!(
        srq_close.log.count() + cq_close.log.count(),
        0,
        "L24: the QP is open"
    );
    close_and_wait(qp.close_slot());
    cq_close.finish();
    srq_close.finish();
    pd_close.finish();
    adapter.close();
}

/// L14: the close of `held` pends while `holder` is open, even once the
/// pair's connectors are disconnected; it completes after `holder`'s close.
fn assert_tied(p: &Pair, held: CloseSlot, holder: CloseSlot, what: &str) {
    let closing = Closing::start(held);
    assert_eq!(closing.status, STATUS_PENDING, "L14: {what}");
    disconnect_both(Some(&p.a_conn), Some(&p.b_conn));
    assert_eq!(
        settled(&closing.log).count(),
        0,
        "L14: tied until the connector closes"
    );
    Closing::start(holder).finish();
    closing.finish();
}

/// One `#[test]` per L14 tie of a connected [`Pair`]: the close of the
/// pair's `held` object pends while its `holder` is open ([`assert_tied`]);
/// the teardown then skips both.
macro_rules! l14_tie_tests {
    ($(
        $(#[$attr:meta])*
        fn $name:ident() { $held:ident held by $holder:ident, $what:literal }
    )*) => {$(
        $(#[$attr])*
        fn $name() {
            let p = Pair::new();
            assert_tied(&p, p.$held.close_slot(), p.$holder.close_slot(), $what);
            let closed = Closed { $held: true, $holder: true, ..Closed::NONE };
            teardown_except(p, closed);
        }
    )*};
}

l14_tie_tests! {
    // rule L14, L24
    #[test]
    fn l14_connect_ties_the_qp_to_the_connector() {
        a_qp held by a_conn, "the connector holds its QP"
    }

    // rule L14, L24
    // see also N7
    #[test]
    fn l14_connect_event_ties_the_connector_to_its_listener() {
        listener held by b_conn, "the incoming connector holds it"
    }
}

// rule L14, L24
// see also N10
#[test]
fn l14_connect_with_shared_endpoint_ties_the_endpoint() {
    let near = Near::new();
    let far = Far::new();
    let endpoint = near
        .adapter
        .try_shared_endpoint(near.addr)
        .expect("CreateSharedEndpoint");
    let connector = near.adapter.connector();
    let (status, signal) = connect_shared(&connector, &near.qp, &endpoint, far.at, 1, 1, b"");
    assert_eq!(status, STATUS_PENDING);
    let passive = far.incoming.wait_nth(1);
    let ep_close = Closing::start(endpoint.close_slot());
    assert_eq!(
        ep_close.status, STATUS_PENDING,
        "L14/N10: the connector holds it"
    );
    assert_success!(passive.reject(b""));
    assert_eq!(signal.wait(), STATUS_CONNECTION_REFUSED);
    std::thread::sleep(SETTLE_BRIEF);
    close_and_wait(connector.close_slot());
    ep_close.finish();
    close_and_wait(passive.close_slot());
    near.close();
    let status = far.listener.close();
    assert!(status == STATUS_SUCCESS || status == STATUS_PENDING);
    far.adapter.close();
}

// rule L14, L19, L25
#[test]
fn l14_creating_on_an_antecedent_whose_close_is_pending_stays_safe() {
    let adapter = open_adapter(own_address());
    let cq = adapter.cq(16);
    let pd = adapter.pd();
    let mr = pd.mr(false);
    let qp = pd.qp(&cq, &cq, 1);
    let pd_close = Closing::start(pd.close_slot());
    assert_eq!(pd_close.status, STATUS_PENDING);
    let cq_close = Closing::start(cq.close_slot());
    assert_eq!(cq_close.status, STATUS_PENDING);
    // A consumer breaking L14 / L19: creates from the closing PD, naming the
    // closing CQ. Refused, or created and then held like any successor.
    let late_mw = create("CreateMw on a closing PD", |cc, ctx, out| {
        // SAFETY: the PD is still alive (its close pends).
        unsafe { (pd.d().ndk_create_mw)(pd.0, cc, ctx, out) }
    });
    let late_qp = pd.try_qp(&cq, &cq, RecvQueue::SMALL, 2, 4, 1, 0);
    if let Err(status) = late_qp {
        assert!(status < 0, "a refusal is a failure status: {status:#x}");
    }
    close_and_wait(mr.close_slot());
    close_and_wait(qp.close_slot());
    if let Ok(late) = late_qp {
        assert_eq!(
            settled(&cq_close.log).count(),
            0,
            "L24: the late QP holds the CQ"
        );
        close_and_wait(late.close_slot());
    }
    if let Ok(late) = late_mw {
        assert_eq!(
            settled(&pd_close.log).count(),
            0,
            "L24: the late MW holds the PD"
        );
        let mw = Mw(late);
        close_and_wait(mw.close_slot());
    }
    cq_close.finish();
    pd_close.finish();
    adapter.close();
}

// rule L25
// see also N6
#[test]
fn l25_successors_keep_working_while_their_antecedents_close_pends() {
    let p = Pair::new();
    let a_pd_close = Closing::start(p.a_pd.close_slot());
    assert_eq!(a_pd_close.status, STATUS_PENDING);
    let b_pd_close = Closing::start(p.b_pd.close_slot());
    assert_eq!(b_pd_close.status, STATUS_PENDING);
    // The QPs of the closing PDs still carry traffic both ways.
    for i in 0..3 {
        recv0(&p.b_qp, 10 + i);
        recv0(&p.a_qp, 20 + i);
        send0(&p.a_qp, 30 + i, 0);
        send0(&p.b_qp, 40 + i, 0);
    }
    let (a, b) = (sorted_summary(&p.a_cq, 6), sorted_summary(&p.b_cq, 6));
    assert_eq!(
        a,
        vec![(20, 0), (21, 0), (22, 0), (30, 0), (31, 0), (32, 0)],
        "L25"
    );
    assert_eq!(
        b,
        vec![(10, 0), (11, 0), (12, 0), (40, 0), (41, 0), (42, 0)],
        "L25"
    );
    // The exception: a closing listener turns requests away at once (N6).
    let listener_close = Closing::start(p.listener.close_slot());
    assert_eq!(
        listener_close.status, STATUS_PENDING,
        "N7: its connector is open"
    );
    let extra_cq = p.a.cq(8);
    let extra_pd = p.a.pd();
    let extra_qp = extra_pd.qp(&extra_cq, &extra_cq, 0xE);
    let connector = p.a.connector();
    let (_, listen_at, _) = p.b_conn.local_address();
    let (_, a_addr, _) = p.a_conn.local_address();
    let (status, signal) = connector.connect(&extra_qp, a_addr.with_port(0), listen_at, 1, 1, b"");
    assert_eq!(signal.outcome(status), STATUS_CONNECTION_REFUSED, "N6");
    close_and_wait(connector.close_slot());
    close_and_wait(extra_qp.close_slot());
    close_and_wait(extra_cq.close_slot());
    close_and_wait(extra_pd.close_slot());
    teardown_closings(
        p,
        Closed {
            a_pd: true,
            b_pd: true,
            listener: true,
            ..Closed::default()
        },
        [a_pd_close, b_pd_close, listener_close],
    );
}

// ---------------------------------------------------------------------------
// L15–L17: closing from inside a completion
// ---------------------------------------------------------------------------

/// A close the consumer makes from inside the first callback a [`Watch`]
/// delivers: its completion is logged in `log`, its return value kept.
struct CloseInside {
    log: Arc<Signal>,
    returned: Arc<Mutex<Option<NtStatus>>>,
}

impl CloseInside {
    /// Hooks the close of `object` through `close` into `watch`'s first
    /// callback.
    fn hook(watch: &Watch, (object, close): CloseSlot) -> Self {
        let object = object as usize;
        let log = Signal::new();
        let returned = Arc::new(Mutex::new(None));
        let (hook_log, hook_returned) = (Arc::clone(&log), Arc::clone(&returned));
        watch.set_hook(move |_| {
            let mut slot = hook_returned.lock().unwrap();
            if slot.is_none() {
                // SAFETY: the object is alive: this callback holds it (L15),
                // and it is closed only here.
                let status = unsafe {
                    close(
                        object as *mut NdkObjectHeader,
                        Some(on_tagged_close),
                        hook_log.ctx(),
                    )
                };
                *slot = Some(status);
            }
        });
        Self { log, returned }
    }

    /// What the close returned (the callback has run).
    fn status(&self) -> NtStatus {
        self.returned.lock().unwrap().expect("closed inside")
    }
}

// rule L15, L16, L17, L18, L20
#[test]
fn l15_connector_closed_inside_its_failed_connect_completion() {
    let (near, connector, far) = near_connector_far();
    let watch = Watch::new();
    let inside = CloseInside::hook(&watch, connector.close_slot());
    let status = near.connect_to(&connector, &far, on_watch, watch.ctx());
    assert_eq!(status, STATUS_PENDING);
    let passive = far.incoming.wait_nth(1);
    // The peer turns it down: the Connect fails in the peer's Reject call, and
    // the consumer closes the connector inside that completion.
    assert_success!(passive.reject(b""));
    watch.wait_returned(1);
    assert_eq!(watch.all(), vec![STATUS_CONNECTION_REFUSED]);
    let close_status = inside.status();
    assert!(
        close_status == STATUS_SUCCESS || close_status == STATUS_PENDING,
        "L18: {close_status:#x}"
    );
    finish_close_logged(close_status, &inside.log);
    // L16: the provider left the closed connector alone; the QP it had tied
    // is free again and everything closes.
    assert_eq!(settled(&watch).entered(), 1, "L22: nothing after the close");
    // The failed Connect untied the QP: it closes at once with the rest.
    near.close();
    far.close(1);
}

// rule L16, L15, L17, L22
#[test]
fn l16_connector_closed_inside_a_disconnect_completion_delivered_during_the_call() {
    let p = Pair::new();
    let (a_status, a_signal) = p.a_conn.disconnect();
    let watch = Watch::new();
    let inside = CloseInside::hook(&watch, p.b_conn.close_slot());
    // SAFETY: a live connector; the watch outlives the completion.
    let status = unsafe { (p.b_conn.d().ndk_disconnect)(p.b_conn.0, Some(on_watch), watch.ctx()) };
    // The connector may be closed by now (L15): it is not touched again.
    assert_eq!(
        status, STATUS_PENDING,
        "this scenario needs a pending Disconnect"
    );
    watch.wait_returned(1);
    let _ = a_signal.outcome(a_status);
    let close_status = inside.status();
    finish_close_logged(close_status, &inside.log);
    assert_eq!(
        settled(&watch).entered(),
        1,
        "L8/L22: one completion, nothing after the close"
    );
    teardown_except(p, Closed::B_CONN);
}

// rule L15, L23, L24
#[test]
fn l15_cq_closed_inside_its_own_notification() {
    let (spout, watch) = watched_spout(16);
    let inside = CloseInside::hook(&watch, spout.cq.close_slot());
    spout.cq.arm(NdkCqNotifyType::ANY);
    spout.emit(1);
    watch.wait_returned(1);
    let close_status = inside.status();
    assert_eq!(
        close_status, STATUS_PENDING,
        "L23/L24: callback running, QP open"
    );
    // More completions: nothing is delivered after the close (L22).
    spout.emit(2);
    assert_eq!(
        settled(&inside.log).count(),
        0,
        "L24: the QP still holds the CQ"
    );
    let Spout {
        adapter, pd, qp, ..
    } = spout;
    assert_success!(qp.close());
    finish_close_logged(close_status, &inside.log);
    assert_eq!(watch.entered(), 1, "L22");
    assert_success!(pd.close());
    adapter.close();
}

// rule L17
// see also P8
#[test]
fn l17_further_calls_before_an_earlier_completion_arrives() {
    let (near, connector, far) = near_connector_far();
    let (status, connected) = connector.connect(&near.qp, near.addr, far.at, 1, 1, b"early");
    assert_eq!(status, STATUS_PENDING);
    // While the Connect is pending: other calls on the connector and its QP.
    let (query, _) = query_extension(
        connector.0.cast(),
        connector.d().ndk_query_extension,
        &UNKNOWN_EXTENSION,
    );
    assert_eq!(query, STATUS_NOT_SUPPORTED);
    assert_ne!(connector.local_address().0, STATUS_PENDING);
    recv0(&near.qp, 0x77);
    assert_eq!(connected.count(), 0);
    // The peer accepts; the calls made meanwhile changed nothing.
    let (far_qp, far_cq, far_pd) = far.qp();
    let passive = far.incoming.wait_nth(1);
    let (_, _, _, data, _) = passive.connection_data(16);
    assert_eq!(&data[..5], b"early");
    let indications = Signal::new();
    let (accept, accepted) = passive.accept(&far_qp, 1, 1, b"", &indications);
    assert_success!(connected.outcome(status));
    let near_indications = Signal::new();
    assert_success!(connector.complete_connect(&near_indications));
    assert_success!(accepted.outcome(accept));
    send0(&far_qp, 1, 0);
    assert_eq!(summary(&near.cq.wait_results(1)), vec![(0x77, 0)]);
    let (x, xs) = connector.disconnect();
    let (y, ys) = passive.disconnect();
    let _ = xs.outcome(x);
    let _ = ys.outcome(y);
    close_and_wait(connector.close_slot());
    close_and_wait(passive.close_slot());
    close_near_and_far(near, far, (far_qp, far_cq, far_pd));
}

// ---------------------------------------------------------------------------
// L18–L23: close
// ---------------------------------------------------------------------------

// rule L18
#[test]
fn l18_close_returns_success_or_pending_on_every_object_type() {
    // Closes with nothing outstanding.
    let zoo = Zoo::new();
    zoo.close();
    // Closes that must wait: antecedents first (L24), then the successors.
    let zoo = Zoo::new();
    let mut pending = Vec::new();
    for slot in zoo.antecedents().into_iter().rev() {
        let closing = Closing::start(slot);
        assert_eq!(closing.status, STATUS_PENDING, "L24");
        pending.push(closing);
    }
    // A second close of a closing object is quiet (L19) and adds no completion.
    for slot in [zoo.pd.close_slot(), zoo.cq.close_slot()] {
        let again = Signal::new();
        let status = close_with(slot, &again);
        assert_eq!(
            settled(&again).count(),
            0,
            "L19: second close called back ({status:#x})"
        );
    }
    for slot in zoo.successors() {
        close_and_wait(slot);
    }
    for closing in pending {
        closing.finish();
    }
    zoo.adapter.close();
}

// rule L19, L18, L25
#[test]
fn l19_calls_on_a_pd_whose_close_is_pending_do_not_crash() {
    let (adapter, pd, mr, closing) = pd_closing_over_an_mr();
    assert_eq!(closing.status, STATUS_PENDING);
    // Breaches while the PD is still alive.
    let _ = pd.privileged_token();
    let (query, _) = query_extension(pd.0.cast(), pd.d().ndk_query_extension, &UNKNOWN_EXTENSION);
    assert_eq!(query, STATUS_NOT_SUPPORTED);
    let again = Signal::new();
    let second = close_with(pd.close_slot(), &again);
    assert_success!(second, "L19: a second close returns quietly");
    assert_eq!(settled(&again).count() + closing.log.count(), 0);
    // The MR still works (L25) and closes; then the PD's one close completion.
    let mut buffer = Buffer::new(PAGE, 0, 0);
    assert_success!(mr.register(&mut buffer, 0));
    assert_success!(mr.close());
    closing.finish();
    assert_eq!(again.count(), 0, "L19: one close completion");
    adapter.close();
}

// rule L19, L22, L25, C3
#[test]
fn l19_calls_on_a_cq_whose_close_is_pending_do_not_crash() {
    let (spout, watch) = watched_spout(16);
    spout.emit(1);
    let closing = Closing::start(spout.cq.close_slot());
    assert_eq!(closing.status, STATUS_PENDING, "L24: its QP is open");
    // Every CQ call while the close pends: no crash, no notification.
    spout.cq.arm(NdkCqNotifyType::ANY);
    let _ = spout.cq.poll(4);
    let _ = spout.cq.poll_ex(4);
    let _ = spout.cq.resize(32);
    // SAFETY: the CQ is alive (its close pends).
    let _ = unsafe { (spout.cq.d().ndk_control_cq_interrupt_moderation)(spout.cq.0, 1, 1) };
    let (query, _) = query_extension(
        spout.cq.0.cast(),
        spout.cq.d().ndk_query_extension,
        &UNKNOWN_EXTENSION,
    );
    assert_eq!(query, STATUS_NOT_SUPPORTED);
    spout.cq.arm(NdkCqNotifyType::SOLICITED);
    // Posts on its QP still answer (their completions have nowhere to go).
    let _ = spout.qp.receive(2, &[]);
    let again = Signal::new();
    assert_success!(
        close_with(spout.cq.close_slot(), &again),
        "L19: a second close returns quietly"
    );
    assert_eq!(settled(&closing.log).count() + again.count(), 0);
    let Spout {
        adapter, pd, qp, ..
    } = spout;
    assert_success!(qp.close());
    closing.finish();
    assert_eq!(again.count(), 0);
    assert_eq!(
        watch.entered(),
        0,
        "L22: no notification after the close started"
    );
    assert_success!(pd.close());
    adapter.close();
}

// rule L20, L21
// see also E1
#[test]
fn l20_qp_close_flushes_its_outstanding_requests() {
    let p = Pair::new();
    // Outstanding: two receives, and a Send that waits for a receive the
    // peer never posts (`Transport::held`).
    recv0(&p.a_qp, 1);
    recv0(&p.a_qp, 2);
    send0(&p.a_qp, 3, Transport::default().held());
    std::thread::sleep(SETTLE_BRIEF);
    assert!(p.a_cq.poll(4).is_empty(), "all three are outstanding");
    let closing = Closing::start(p.a_qp.close_slot());
    // The close itself starts the flush: they complete before the close does
    // (the connector still holds the QP).
    let flushed = sorted_summary(&p.a_cq, 3);
    assert_eq!(
        flushed,
        vec![
            (1, STATUS_CANCELLED),
            (2, STATUS_CANCELLED),
            (3, STATUS_CANCELLED)
        ],
        "L20"
    );
    teardown_closings(
        p,
        Closed {
            a_qp: true,
            ..Closed::default()
        },
        [closing],
    );
}

// rule L20, L21, L22
#[test]
fn l20_connector_close_cancels_its_pending_connect_first() {
    let (near, connector, far) = near_connector_far();
    let log = Signal::new();
    let status = near.connect_to(&connector, &far, on_status, log.ctx());
    assert_eq!(status, STATUS_PENDING);
    let _passive = far.incoming.wait_nth(1);
    // Nobody accepts; the close cancels the Connect, whose completion comes
    // before the close completion (L21, L22), both in the one log.
    let close_status = close_with(connector.close_slot(), &log);
    let first = log.wait_nth(1);
    assert!(first < 0, "L20: the Connect fails: {first:#x}");
    if close_status == STATUS_PENDING {
        assert_eq!(log.wait_nth(2), CLOSED, "L22: the close completion is last");
    }
    assert_eq!(
        settled(&log).count(),
        1 + usize::from(close_status == STATUS_PENDING)
    );
    // Untied: the QP closes at once with the rest.
    near.close();
    far.close(1);
}

// rule L21, L15, L22
#[test]
fn l21_connector_close_waits_for_its_running_connect_completion() {
    let (near, connector, far) = near_connector_far();
    let (far_qp, far_cq, far_pd) = far.qp();
    // The Connect completion and the close completion share one gated watch:
    // its log orders them and it flags overlap.
    let watch = Watch::gated();
    let status = near.connect_to(&connector, &far, on_watch, watch.ctx());
    assert_eq!(status, STATUS_PENDING);
    let passive = far.incoming.wait_nth(1);
    let passive_ptr = passive.0 as usize;
    let far_qp_ptr = far_qp.0 as usize;
    // The Accept delivers the Connect completion; it blocks in there.
    let accepting = std::thread::spawn(move || {
        let passive = Connector(passive_ptr as *mut NdkConnector);
        let far_qp = Qp(far_qp_ptr as *mut NdkQp);
        let indications = Signal::new();
        let (status, signal) = passive.accept(&far_qp, 1, 1, b"", &indications);
        let outcome = signal.outcome(status);
        (outcome, indications.count())
    });
    watch.wait_entered(1);
    let close_status = close_watched(connector.close_slot(), &watch);
    assert_eq!(close_status, STATUS_PENDING, "L21: a completion is running");
    assert_eq!(
        settled(&watch).all(),
        vec![STATUS_SUCCESS],
        "L21: closed under a running callback"
    );
    watch.open();
    watch.wait_returned(2);
    assert_eq!(watch.all(), vec![STATUS_SUCCESS, CLOSED], "L22");
    assert!(
        !watch.overlapped(),
        "C5/L21: close completion inside the Connect completion"
    );
    let (accept, _) = accepting.join().unwrap();
    assert!(accept != STATUS_PENDING, "the Accept finished: {accept:#x}");
    near.close();
    close_and_wait(far_qp.close_slot());
    close_and_wait(far_cq.close_slot());
    close_and_wait(far_pd.close_slot());
    far.close(1);
}

// rule L21, L15, L22
#[test]
fn l21_listener_close_waits_for_its_running_connect_event() {
    let near = Near::new();
    let far_addr = own_address();
    let far = open_adapter(far_addr);
    let watch = Watch::gated();
    // SAFETY: the watch outlives the listener.
    let listener = unsafe { far.listener_with(on_watch_connect, watch.ctx()) };
    assert_success!(listener.listen(far_addr));
    let (_, at, _) = listener.local_address();
    // Inside the connect event the consumer closes the new connector (it is
    // the consumer's from that moment, L15), then the callback blocks.
    let passive_log = Signal::new();
    let passive_close = Arc::new(Mutex::new(None));
    let (hook_watch, hook_log, hook_close) = (
        Arc::clone(&watch),
        Arc::clone(&passive_log),
        Arc::clone(&passive_close),
    );
    watch.set_hook(move |_| {
        // Once: the hook runs on every callback of the watch, the listener's
        // close completion too, and by then the connector is closed (its
        // memory may be gone: reading its table again was a use after free
        // that AddressSanitizer reported).
        let mut closed = hook_close.lock().unwrap();
        if closed.is_some() {
            return;
        }
        let Some(&connector) = hook_watch.connectors().last() else {
            return;
        };
        let connector = Connector(connector as *mut NdkConnector);
        let close = connector.d().ndk_close_connector;
        // SAFETY: the connector handed over by this event, closed only here.
        let status = unsafe { close(connector.0.cast(), Some(on_tagged_close), hook_log.ctx()) };
        *closed = Some(status);
    });
    let connector = near.adapter.connector();
    let (connector_ptr, qp_ptr) = (connector.0 as usize, near.qp.0 as usize);
    let src = near.addr;
    let connecting = std::thread::spawn(move || {
        let connector = Connector(connector_ptr as *mut NdkConnector);
        let qp = Qp(qp_ptr as *mut NdkQp);
        let (status, signal) = connector.connect(&qp, src, at, 1, 1, b"");
        signal.outcome(status)
    });
    watch.wait_entered(1);
    let status = close_watched(listener.close_slot(), &watch);
    assert_eq!(status, STATUS_PENDING, "L21: its connect event is running");
    assert_eq!(
        settled(&watch).all(),
        vec![STATUS_SUCCESS],
        "L21: closed under its event"
    );
    watch.open();
    let connect = connecting.join().unwrap();
    assert!(connect < 0, "the Connect failed: {connect:#x}");
    watch.wait_returned(2);
    assert_eq!(watch.all(), vec![STATUS_SUCCESS, CLOSED], "L22");
    assert!(!watch.overlapped());
    let passive_status = passive_close
        .lock()
        .unwrap()
        .expect("closed inside the event");
    finish_close_logged(passive_status, &passive_log);
    watch.set_hook(|_| {});
    close_and_wait(connector.close_slot());
    near.close();
    far.close();
}

// rule L21, L22
// see also X2, N24
#[test]
fn l21_connector_close_waits_for_its_running_disconnect_event() {
    let (near, connector, far) = near_connector_far();
    let (far_qp, far_cq, far_pd) = far.qp();
    let (status, connected) = connector.connect(&near.qp, near.addr, far.at, 1, 1, b"");
    let passive = far.incoming.wait_nth(1);
    // B's disconnect event and B's close completion share one gated watch.
    let watch = Watch::gated();
    let accepted = Signal::new();
    // SAFETY: live objects; the watch and signal outlive the connector.
    let accept = unsafe {
        (passive.d().ndk_accept)(
            passive.0,
            far_qp.0,
            1,
            1,
            b"".as_ptr().cast(),
            0,
            Some(on_watch_event),
            watch.ctx(),
            Some(on_status),
            accepted.ctx(),
        )
    };
    assert_success!(connected.outcome(status));
    let near_events = Signal::new();
    assert_success!(connector.complete_connect(&near_events));
    assert_success!(accepted.outcome(accept));
    // A disconnects on a thread of its own: B's event comes, and blocks.
    let connector_ptr = connector.0 as usize;
    let disconnecting = std::thread::spawn(move || {
        let connector = Connector(connector_ptr as *mut NdkConnector);
        let (status, signal) = connector.disconnect();
        signal.outcome(status)
    });
    watch.wait_entered(1);
    assert_eq!(watch.all(), vec![EVENT], "X2: B learns of the disconnect");
    let status = close_watched(passive.close_slot(), &watch);
    assert_eq!(
        status, STATUS_PENDING,
        "L21: its disconnect event is running"
    );
    assert_eq!(
        settled(&watch).all(),
        vec![EVENT],
        "L21: closed under its event"
    );
    watch.open();
    let _ = disconnecting.join().unwrap();
    watch.wait_returned(2);
    assert_eq!(
        settled(&watch).all(),
        vec![EVENT, CLOSED],
        "L22: the close completion is last"
    );
    assert!(!watch.overlapped());
    close_and_wait(connector.close_slot());
    close_near_and_far(near, far, (far_qp, far_cq, far_pd));
}

// rule L23, L21, L22, L27
#[test]
fn l23_cq_close_pends_until_its_running_notification_returns() {
    let watch = Watch::gated();
    let spout = Spout::new(|adapter| watched_cq(adapter, 16, &watch));
    spout.emit(1);
    let Spout {
        adapter,
        cq,
        pd,
        qp,
    } = spout;
    // No QP holds the CQ any more: only its callback can keep it open.
    assert_closes_succeed!(qp, pd);
    // The arm finds a fresh completion (C4): the notification runs at once,
    // on the arming thread, and blocks there.
    let cq_ptr = cq.0 as usize;
    let arm = cq.d().ndk_arm_cq;
    let arming = std::thread::spawn(move || {
        // SAFETY: the CQ is alive until its close completes, which waits for
        // this callback (the rule under test).
        unsafe { arm(cq_ptr as *mut NdkCq, NdkCqNotifyType::ANY) };
    });
    watch.wait_entered(1);
    let status = close_watched(cq.close_slot(), &watch);
    assert_eq!(status, STATUS_PENDING, "L23: its notification is running");
    // The adapter's close waits for that callback as well (L27).
    let adapter_ptr = adapter.0 as usize;
    let closing_adapter = std::thread::spawn(move || {
        // SAFETY: an open adapter, not used by the test afterwards.
        unsafe { SoftNdkCloseAdapter(adapter_ptr as *mut NdkAdapter) }
    });
    assert_eq!(
        settled(&watch).all(),
        vec![STATUS_SUCCESS],
        "L23: completed under the callback"
    );
    assert!(
        !closing_adapter.is_finished(),
        "L27: adapter closed under a callback"
    );
    watch.open();
    arming.join().unwrap();
    watch.wait_returned(2);
    assert_success!(closing_adapter.join().unwrap());
    assert_eq!(
        settled(&watch).all(),
        vec![STATUS_SUCCESS, CLOSED],
        "L22/L23: nothing after"
    );
    assert!(!watch.overlapped());
}

// rule L22, L21
#[test]
fn l22_no_notification_after_the_cq_close() {
    let (spout, watch) = watched_spout(16);
    spout.cq.arm(NdkCqNotifyType::ANY);
    let status = close_watched(spout.cq.close_slot(), &watch);
    assert_eq!(status, STATUS_PENDING, "L24: its QP is open");
    // Completions for the armed, closing CQ: no notification.
    spout.emit(1);
    spout.emit(2);
    let Spout {
        adapter, pd, qp, ..
    } = spout;
    assert_success!(qp.close());
    watch.wait_returned(1);
    assert_eq!(
        settled(&watch).all(),
        vec![CLOSED],
        "L22: only the close completion"
    );
    assert_success!(pd.close());
    adapter.close();
}

// rule L22
// see also X2
#[test]
fn l22_no_disconnect_event_after_the_connector_close() {
    let p = Pair::new();
    // B's disconnect events and B's close completion in one log.
    let log = Arc::clone(&p.b_disconnects);
    let status = close_with(p.b_conn.close_slot(), &log);
    if status == STATUS_PENDING {
        wait_until("close never completed", || log.all().contains(&CLOSED));
    }
    // A disconnects after B's close completed.
    let (a, a_signal) = p.a_conn.disconnect();
    let _ = a_signal.outcome(a);
    std::thread::sleep(SETTLE_BRIEF);
    let entries = log.all();
    if status == STATUS_PENDING {
        assert_eq!(entries.last(), Some(&CLOSED), "L22: {entries:x?}");
        assert_eq!(entries.iter().filter(|&&e| e == CLOSED).count(), 1);
    } else {
        assert!(
            entries.is_empty(),
            "L22: after a STATUS_SUCCESS close: {entries:x?}"
        );
    }
    teardown_except(p, Closed::B_CONN);
}

// ---------------------------------------------------------------------------
// L26–L28: the adapter and the order of closes
// ---------------------------------------------------------------------------

// rule L26, L27, L21, L24
#[test]
fn l26_antecedents_wait_for_a_successors_running_close_completion() {
    let (near, connector, far) = near_connector_far();
    let (status, connected) = connector.connect(&near.qp, near.addr, far.at, 1, 1, b"");
    assert_eq!(status, STATUS_PENDING, "the Connect ties the QP");
    let _passive = far.incoming.wait_nth(1);
    let Near {
        adapter,
        cq,
        pd,
        qp,
        ..
    } = near;
    let cq_close = Closing::start(cq.close_slot());
    let pd_close = Closing::start(pd.close_slot());
    assert_eq!(
        (cq_close.status, pd_close.status),
        (STATUS_PENDING, STATUS_PENDING)
    );
    // The QP's close pends (tied); its completion will block.
    let qp_watch = Watch::gated();
    let qp_status = close_watched(qp.close_slot(), &qp_watch);
    assert_eq!(qp_status, STATUS_PENDING, "L14: the connector holds the QP");
    // The adapter's close, from another thread: it must wait for all of it.
    let adapter_ptr = adapter.0 as usize;
    let adapter_closed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&adapter_closed);
    let closing_adapter = std::thread::spawn(move || {
        // SAFETY: an open adapter, not used by the test afterwards.
        let status = unsafe { SoftNdkCloseAdapter(adapter_ptr as *mut NdkAdapter) };
        flag.store(true, Ordering::SeqCst);
        status
    });
    // Closing the connector cancels the Connect and unties the QP, whose close
    // completion then runs, and blocks.
    let connector_ptr = connector.0 as usize;
    let close_connector = connector.d().ndk_close_connector;
    let closing_connector = std::thread::spawn(move || {
        close_and_wait((connector_ptr as *mut NdkObjectHeader, close_connector))
    });
    qp_watch.wait_entered(1);
    assert_eq!(
        settled(&cq_close.log).count(),
        0,
        "L26: the CQ closed under its QP's close completion"
    );
    assert_eq!(
        pd_close.log.count(),
        0,
        "L26: the PD closed under its QP's close completion"
    );
    assert!(
        !adapter_closed.load(Ordering::SeqCst),
        "L26/L27: the adapter closed under a close completion"
    );
    qp_watch.open();
    let _ = closing_connector.join().unwrap();
    cq_close.finish();
    pd_close.finish();
    assert_success!(closing_adapter.join().unwrap());
    assert!(connected.count() <= 1);
    assert!(!qp_watch.overlapped());
    far.close(1);
}

// rule L27, L24, L28
#[test]
fn l27_adapter_close_returns_only_after_its_last_object_closed() {
    let adapter = open_adapter(own_address());
    let cq = adapter.cq(16);
    let pd = adapter.pd();
    let qp = pd.qp(&cq, &cq, 1);
    let mr = pd.mr(false);
    let connector = adapter.connector();
    let adapter_ptr = adapter.0 as usize;
    let last_close_started = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&last_close_started);
    let closing = std::thread::spawn(move || {
        // SAFETY: an open adapter, not used by the test afterwards.
        let status = unsafe { SoftNdkCloseAdapter(adapter_ptr as *mut NdkAdapter) };
        (status, flag.load(Ordering::SeqCst))
    });
    std::thread::sleep(SETTLE_BRIEF);
    assert!(!closing.is_finished(), "L27: returned with objects open");
    assert_closes_succeed!(connector, qp, mr, cq);
    std::thread::sleep(SETTLE_BRIEF);
    assert!(!closing.is_finished(), "L27: returned with the PD open");
    last_close_started.store(true, Ordering::SeqCst);
    assert_success!(pd.close());
    let (status, after_last) = closing.join().unwrap();
    assert_success!(status);
    assert!(after_last, "L27: returned before the last close");
}

// rule L28, L27
#[test]
fn l28_adapter_closes_after_its_callbacks_have_returned() {
    let watch = Watch::new();
    let p = pair_watching_b(&watch);
    recv0(&p.b_qp, 1);
    p.b_cq.arm(NdkCqNotifyType::ANY);
    send0(&p.a_qp, 2, 0);
    watch.wait_returned(1);
    assert_eq!(p.b_cq.wait_results(1).len(), 1);
    // Every callback has returned; the consumer closes the adapters from its
    // own thread (never from a callback), after the objects.
    assert_eq!(watch.entered(), watch.returned());
    p.teardown();
    assert_eq!(watch.entered(), 1, "no callback after the adapter closed");
}

// ---------------------------------------------------------------------------
// L14: antecedents of one NIC (issue: cross-NIC objects). Two adapter objects
// opened on the same address are one NIC and may mix their objects (N32, as
// Microsoft's sample consumer does); objects of two NICs never mix.
// ---------------------------------------------------------------------------
mod cross_nic {
    use super::*;

    /// Shared endpoint create on `adapter` at `addr` with port 0.
    fn endpoint_on(adapter: &Adapter, addr: Addr) -> SharedEndpoint {
        adapter
            .try_shared_endpoint(addr.with_port(0))
            .expect("CreateSharedEndpoint")
    }

    /// L14: CreateQp and CreateQpWithSrq naming a CQ or an SRQ of another NIC
    /// than the PD's fail with STATUS_INVALID_PARAMETER and create nothing.
    #[test]
    fn l14_create_qp_naming_a_cq_or_srq_of_another_nic_is_refused() {
        let (a, b) = Side::two();
        let a_cq = a.adapter.cq(16);
        let b_cq = b.adapter.cq(16);
        let a_srq = a.pd.try_srq(16, 2, 0, None).expect("CreateSrq");
        let b_srq = b.pd.try_srq(16, 2, 0, None).expect("CreateSrq");
        let refused = Err(STATUS_INVALID_PARAMETER);
        let status = |r: Result<Qp, NtStatus>| r.map(|qp| assert_close(qp.close()));
        assert_eq!(
            status(a.pd.try_qp(&b_cq, &a_cq, RecvQueue::SMALL, 1, 4, 1, 0)),
            refused
        );
        assert_eq!(
            status(a.pd.try_qp(&a_cq, &b_cq, RecvQueue::SMALL, 2, 4, 1, 0)),
            refused
        );
        assert_eq!(
            status(a.pd.try_qp(&b_cq, &b_cq, RecvQueue::SMALL, 3, 4, 1, 0)),
            refused
        );
        assert_eq!(
            status(a.pd.try_qp(&a_cq, &a_cq, RecvQueue::Shared(&b_srq), 4, 4, 1, 0)),
            refused
        );
        assert_eq!(
            status(a.pd.try_qp(&b_cq, &a_cq, RecvQueue::Shared(&a_srq), 5, 4, 1, 0)),
            refused
        );
        // The same calls with objects of the PD's own NIC succeed.
        assert_eq!(
            status(a.pd.try_qp(&a_cq, &a_cq, RecvQueue::SMALL, 6, 4, 1, 0)),
            Ok(())
        );
        assert_eq!(
            status(a.pd.try_qp(&a_cq, &a_cq, RecvQueue::Shared(&a_srq), 7, 4, 1, 0)),
            Ok(())
        );
        // Nothing was left holding the foreign objects (L24): they close at once.
        assert_closes_succeed!(b_srq, b_cq);
        assert_closed([a_srq.close(), a_cq.close()]);
        a.close();
        b.close();
    }

    /// L14, N32: objects of two adapter objects opened on the same NIC mix: a QP
    /// on one's PD with CQs and an SRQ of the other, connected with the other's
    /// connector.
    #[test]
    fn l14_objects_of_two_adapters_opened_on_one_nic_mix() {
        let (near, far) = Side::two();
        let twin = open_adapter(near.addr);
        let twin_cq = twin.cq(16);
        let twin_pd = twin.pd();
        let twin_srq = twin_pd.try_srq(16, 2, 0, None).expect("CreateSrq");
        let qp = near
            .pd
            .try_qp(&twin_cq, &twin_cq, RecvQueue::SMALL, 1, 4, 1, 0)
            .expect("CreateQp with the twin adapter's CQ");
        let srq_qp = near
            .pd
            .try_qp(&twin_cq, &twin_cq, RecvQueue::Shared(&twin_srq), 2, 4, 1, 0)
            .expect("CreateQpWithSrq with the twin adapter's SRQ");
        let far_cq = far.adapter.cq(16);
        let far_qp = far.pd.qp(&far_cq, &far_cq, 3);
        // Connect from the twin adapter's connector with the near PD's QP.
        let link = Link::connect((&twin, near.addr, &qp), (&far.adapter, far.addr, &far_qp));
        let src = Region::pattern(&near.pd, 4096, 5, MR_LOCAL_WRITE);
        let dst = Region::new(&far.pd, 4096, 0, MR_LOCAL_WRITE);
        assert_success!(far_qp.receive(9, &[dst.sge(0, 64)]));
        assert_success!(qp.send(8, &[src.sge(0, 64)], 0));
        assert_eq!(summary(&twin_cq.wait_results(1)), [(8, STATUS_SUCCESS)]);
        assert_eq!(summary(&far_cq.wait_results(1)), [(9, STATUS_SUCCESS)]);
        assert_eq!(&dst.bytes()[..64], &src.bytes()[..64]);
        link.close();
        src.close();
        dst.close();
        assert_closed([
            qp.close(),
            srq_qp.close(),
            far_qp.close(),
            twin_srq.close(),
            twin_cq.close(),
            far_cq.close(),
            twin_pd.close(),
        ]);
        twin.close();
        near.close();
        far.close();
    }

    /// L14: Bind, FastRegister and Invalidate naming an MR or MW of another NIC
    /// fail inline with STATUS_INVALID_PARAMETER and leave no CQ entry (P6).
    #[test]
    fn l14_work_requests_naming_an_mr_or_mw_of_another_nic_are_refused() {
        let pair = Pair::new();
        let a_mem = Region::pattern(&pair.a_pd, 4096, 1, MR_REMOTE);
        let b_mem = Region::pattern(&pair.b_pd, 4096, 2, MR_REMOTE);
        let a_mw = pair.a_pd.mw();
        let b_mw = pair.b_pd.mw();
        let b_frmr = Frmr::new(&pair.b, &pair.b_pd, PAGE, 0, 4, true);
        let qp = &pair.a_qp;
        let ops = [
            (
                "Bind of a foreign MR",
                qp.bind(1, &b_mem.mr, &a_mw, b_mem.remote(0), 512, OP_REMOTE_READ),
            ),
            (
                "Bind of a foreign MW",
                qp.bind(2, &a_mem.mr, &b_mw, a_mem.remote(0), 512, OP_REMOTE_READ),
            ),
            (
                "FastRegister of a foreign MR",
                b_frmr.post(qp, 3, OP_REMOTE_READ),
            ),
            (
                "Invalidate of a foreign MW",
                qp.invalidate(4, b_mw.header(), 0),
            ),
            (
                "Invalidate of a foreign MR",
                qp.invalidate(5, b_frmr.mr.header(), 0),
            ),
        ];
        for (name, status) in ops {
            assert_eq!(status, STATUS_INVALID_PARAMETER, "{name}");
        }
        assert_empty(&pair.a_cq);
        // E6: the QP is unharmed.
        assert_success!(qp.bind(6, &a_mem.mr, &a_mw, a_mem.remote(0), 512, OP_REMOTE_READ));
        assert_eq!(summary(&pair.a_cq.wait_results(1)), [(6, STATUS_SUCCESS)]);
        b_frmr.close(&pair.b);
        assert_closed([a_mw.close(), b_mw.close()]);
        teardown_with_regions(pair, [a_mem, b_mem]);
    }

    /// L14: Connect, Accept and ConnectWithSharedEndpoint tie a connector to a
    /// QP (and an endpoint) of the connector's own NIC only; naming one of
    /// another NIC fails with STATUS_INVALID_PARAMETER, and the connector stays
    /// usable.
    #[test]
    fn l14_connector_naming_a_qp_or_endpoint_of_another_nic_is_refused() {
        let (a, b) = Side::two();
        let (a_cq, a_qp) = a.cq_and_qp(16, 1);
        let (b_cq, b_qp) = b.cq_and_qp(16, 2);
        let (listener, incoming, at) = listen_on(&b.adapter, b.addr);
        // Connect from A's connector with B's QP.
        let connector = a.adapter.connector();
        let (status, signal) = connector.connect(&b_qp, a.addr, at, 0, 0, b"");
        assert_eq!(
            status, STATUS_INVALID_PARAMETER,
            "Connect with a foreign QP"
        );
        // ConnectWithSharedEndpoint with B's endpoint.
        let b_endpoint = endpoint_on(&b.adapter, b.addr);
        let (status, shared) = connect_shared(&connector, &a_qp, &b_endpoint, at, 0, 0, b"");
        assert_eq!(status, STATUS_INVALID_PARAMETER, "a foreign endpoint");
        // The connector is unharmed: a proper Connect reaches the listener, and
        // B's side accepting with A's QP is refused, then accepts with its own.
        let (status, connected) = connector.connect(&a_qp, a.addr, at, 0, 0, b"");
        assert_eq!(status, STATUS_PENDING, "Connect with its own QP");
        let passive = incoming.wait_nth(1);
        let b_disconnects = Signal::new();
        let (status, _) = passive.accept(&a_qp, 0, 0, b"", &b_disconnects);
        assert_eq!(status, STATUS_INVALID_PARAMETER, "Accept with a foreign QP");
        let (accept, accepted) = passive.accept(&b_qp, 0, 0, b"", &b_disconnects);
        assert_success!(connected.outcome(STATUS_PENDING));
        let a_disconnects = Signal::new();
        assert_success!(connector.complete_connect(&a_disconnects));
        assert_success!(accepted.outcome(accept));
        assert!(signal.all().is_empty() && shared.all().is_empty(), "L8");
        disconnect_both(Some(&connector), Some(&passive));
        assert_closed([
            connector.close(),
            passive.close(),
            listener.close(),
            b_endpoint.close(),
            a_qp.close(),
            b_qp.close(),
            a_cq.close(),
            b_cq.close(),
        ]);
        a.close();
        b.close();
    }
}

// ---------------------------------------------------------------------------
// L17 broken: the consumer closes an object from another thread while a call
// on it is still inside the provider. The call keeps the object alive until
// it returns (`provider::object::Entered`); before, the close freed it under
// the call (valgrind: invalid reads under the running call). Each case makes
// the close land *inside* the call deterministically: the call completes a
// request inline, the CQ's notification callback runs on the calling thread,
// and there a second thread closes the object and returns before the
// callback does. `.ci/run` runs these under valgrind (memcheck).
// ---------------------------------------------------------------------------

mod close_race {
    use std::sync::mpsc;

    use softndk::provider::object::{Breach, consumer_breaches, reported_breach};

    use super::*;

    /// A raw object pointer and its close slot, sendable to the closer.
    #[derive(Clone, Copy)]
    struct Target {
        object: usize,
        close: NdkFnCloseObject,
    }

    /// Arms `watch` so that inside its next callback another thread closes
    /// `target` and that close call returns; the receiver yields the close
    /// call's status and its completion signal.
    fn close_inside_next_callback(
        watch: &Arc<Signal>,
        target: Target,
    ) -> mpsc::Receiver<(NtStatus, Arc<Signal>)> {
        let (tx, rx) = mpsc::channel();
        watch.on_next(move || {
            let closer = std::thread::spawn(move || {
                let done = Signal::new();
                // SAFETY: the consumer's live object and its own close slot;
                // `done` outlives the close (the test waits for it).
                let status = unsafe {
                    (target.close)(
                        target.object as *mut NdkObjectHeader,
                        Some(on_close),
                        done.ctx(),
                    )
                };
                (status, done)
            });
            let outcome = closer.join().expect("closer thread");
            tx.send(outcome).expect("test waits");
        });
        rx
    }

    /// The close started inside the callback (L18 checked); a pending one
    /// is left to the caller, as the QP's close pends until its connector
    /// lets it go (L14).
    fn closed(rx: &mpsc::Receiver<(NtStatus, Arc<Signal>)>) -> (NtStatus, Arc<Signal>) {
        let (status, done) = rx.recv_timeout(WAIT).expect("the callback ran");
        assert_close(status);
        (status, done)
    }

    /// A never-connected QP on one side, its CQ reporting to the `watch`
    /// returned, and a zeroed region to receive into.
    fn lone_qp() -> (Side, Arc<Signal>, Cq, Qp, Region) {
        let side = Side::two().0;
        let watch = Signal::new();
        let cq = side.adapter.try_cq(16, &watch).expect("CreateCq");
        let qp = side.pd.qp(&cq, &cq, 1);
        let mine = Region::new(&side.pd, 4096, 0, MR_LOCAL_WRITE);
        (side, watch, cq, qp, mine)
    }

    /// A connected pair whose A side CQ reports to `watch`, armed.
    fn armed_pair() -> (Pair, Arc<Signal>) {
        let pair = Pair::new();
        let watch = Arc::clone(&pair.a_cq.1);
        pair.a_cq.arm(NdkCqNotifyType::ANY);
        (pair, watch)
    }

    /// L17 (issue 15): the report names both calls, the close and the one
    /// inside.
    fn assert_reported(object: usize, close: &str, inside: &str) {
        let report = reported_breach(object as *const _).expect("a report on the object");
        let text = report.to_string();
        assert!(
            text.contains(close) && text.contains(inside),
            "{text} names {close} and {inside}"
        );
    }

    fn qp_target(qp: &Qp) -> Target {
        Target {
            object: qp.0 as usize,
            close: qp.d().ndk_close_qp,
        }
    }

    /// Runs `call` on the armed pair's QP with a close landing inside it,
    /// then checks the call's status and tears down.
    fn race_qp(name: &str, call: impl FnOnce(&Pair, &Region, &Region) -> NtStatus) {
        let (pair, watch) = armed_pair();
        let mine = Region::pattern(&pair.a_pd, 4096, 3, MR_LOCAL_WRITE);
        let theirs = Region::new(&pair.b_pd, 4096, 0, MR_REMOTE);
        assert_eq!(pair.b_qp.receive(1, &[theirs.sge(0, 4096)]), STATUS_SUCCESS);
        let rx = close_inside_next_callback(&watch, qp_target(&pair.a_qp));
        let status = call(&pair, &mine, &theirs);
        assert!(
            status == STATUS_SUCCESS || status == STATUS_CONNECTION_INVALID,
            "{name} returned {status:#x}"
        );
        let early = Early {
            a_qp: Some(closed(&rx)),
            a_conn: None,
        };
        assert_reported(pair.a_qp.0 as usize, "NdkCloseQp", &format!("Ndk{name}"));
        mine.close();
        theirs.close();
        teardown_after(pair, early);
    }

    /// L17: NdkFlush on a never-connected QP (nothing holds its close) that
    /// another thread closes while the flush's cancelled receive is being
    /// reported: the close completes inside the flush, and the QP's memory
    /// outlives the flush.
    #[test]
    fn l17_qp_closed_by_another_thread_during_flush_stays_alive_until_it_returns() {
        let (side, watch, cq, qp, mine) = lone_qp();
        assert_eq!(qp.receive(1, &[mine.sge(0, 64)]), STATUS_SUCCESS);
        cq.arm(NdkCqNotifyType::ANY);
        let rx = close_inside_next_callback(&watch, qp_target(&qp));
        let before = consumer_breaches(Breach::L17);
        qp.flush();
        let (status, done) = closed(&rx);
        assert!(
            consumer_breaches(Breach::L17) > before,
            "the breach is reported (L17)"
        );
        assert_reported(qp.0 as usize, "NdkCloseQp", "NdkFlush");
        if status == STATUS_PENDING {
            done.wait();
        }
        assert_eq!(summary(&cq.poll(4)), [(1, STATUS_CANCELLED)]);
        mine.close();
        assert_close(cq.close());
        side.close();
    }

    /// L17: each initiator post on a connected QP that another thread closes
    /// while the post's own completion is being reported inline. The
    /// connector holds the QP's close (L14) until teardown, so here the close
    /// pends rather than frees; the post completes and the close completes
    /// once the connector lets go.
    #[test]
    fn l17_qp_closed_by_another_thread_during_a_post_stays_alive_until_it_returns() {
        if deferred_engine() {
            // The deferred engine reports a post's completion on its worker
            // after the post returned: no close can land inside the post.
            eprintln!("inline engine only: a post's completion is reported on the worker");
            return;
        }
        race_qp("Send", |pair, mine, _| {
            pair.a_qp.send(2, &[mine.sge(0, 64)], 0)
        });
        race_qp("SendAndInvalidate", |pair, mine, _| {
            pair.a_qp.send_and_invalidate(3, &[mine.sge(0, 64)], 0, 0)
        });
        race_qp("Write", |pair, mine, theirs| {
            pair.a_qp
                .write(4, &[mine.sge(0, 64)], theirs.remote(0), theirs.token(), 0)
        });
        // Over iWARP a Read completes when its Read Response has arrived,
        // on the transport's receiving thread after NdkRead returned: its
        // completion cannot place the close inside the post there (the
        // three above complete inside it once the stream took their bytes).
        if Transport::default() == Transport::Local {
            race_qp("Read", |pair, mine, theirs| {
                pair.a_qp
                    .read(5, &[mine.sge(0, 64)], theirs.remote(0), theirs.token(), 0)
            });
        }
    }

    /// L17: NdkArmCq that fires at once (C4) on a CQ that another thread
    /// closes inside the notification the arm delivers.
    #[test]
    fn l17_cq_closed_by_another_thread_during_an_arm_stays_alive_until_it_returns() {
        let (side, watch, cq, qp, mine) = lone_qp();
        assert_eq!(qp.receive(1, &[mine.sge(0, 64)]), STATUS_SUCCESS);
        qp.flush();
        assert_close(qp.close());
        // One cancelled completion waits in the CQ: the arm fires at once.
        let rx = close_inside_next_callback(
            &watch,
            Target {
                object: cq.0 as usize,
                close: cq.d().ndk_close_cq,
            },
        );
        cq.arm(NdkCqNotifyType::ANY);
        let (status, done) = closed(&rx);
        assert_reported(cq.0 as usize, "NdkCloseCq", "NdkArmCq");
        if status == STATUS_PENDING {
            done.wait();
        }
        assert_eq!(watch.count(), 1, "one notification");
        mine.close();
        side.close();
    }
}
