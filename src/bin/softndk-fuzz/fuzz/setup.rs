//! Set-up: a link's objects (CQ, PD, QP, MR, MW on each side) and its
//! connection through a listener.

use std::ptr;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use softndk::abi::{
    MrFlags, NdkListener, NtStatus, PAGE_SIZE, STATUS_PENDING, STATUS_SUCCESS, SockAddr, SockAddrIn,
};

use super::WAIT;
use super::fuzzer::{Fuzzer, SetupFailed};
use super::objects::{Adapter, Buffer, Link, SOCKADDR_IN_LEN, Side, sockaddr, table};
use super::signal::{Signal, keep, on_connect, on_create, on_event, on_status};

impl Fuzzer<'_> {
    /// A set-up step's status: `Ok` on success, else the failure (a finding
    /// unless faults are injected).
    pub(super) fn expect(&mut self, what: &str, status: NtStatus) -> Result<(), SetupFailed> {
        if status == STATUS_SUCCESS {
            Ok(())
        } else {
            Err(SetupFailed(format!(
                "{what} failed with {:#010x}",
                status.cast_unsigned()
            )))
        }
    }

    /// A create's outcome (L5: a create may pend and hand its object to the
    /// completion instead of the out-pointer): the object, or why it failed.
    pub(super) fn made<T>(
        &mut self,
        what: &str,
        status: NtStatus,
        created: &Arc<Signal>,
        out: *mut T,
    ) -> Result<*mut T, SetupFailed> {
        self.call(what, status);
        let (status, object) = self
            .finish(what, status, created)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect(what, status)?;
        Ok(if object == 0 {
            out
        } else {
            ptr::with_exposed_provenance_mut(object)
        })
    }

    /// Creates a side's CQ, PD, QP, MR (registered) and MW.
    pub(super) fn open_side(&mut self, side: &mut Side) -> Result<(), SetupFailed> {
        let adapter = self.adapters[side.adapter].ptr();
        let d = table(adapter);
        let receive_depth = self.rng.range(1, 16);
        let initiator_depth = self.rng.range(1, 16);
        side.receive_sge = self.rng.range(1, 4);
        side.initiator_sge = self.rng.range(1, 4);
        side.inline = if self.rng.chance(50) { 0 } else { 64 };
        // Room for every entry both queues can have outstanding, so that the
        // CQ never overflows.
        let depth = receive_depth + initiator_depth + self.rng.range(0, 8);
        side.cq_depth = depth;

        let created = Signal::new();
        let mut cq = ptr::null_mut();
        // SAFETY: a live adapter; the notification context and the create
        // completion's live as long as the CQ.
        let status = unsafe {
            (d.ndk_create_cq)(
                adapter,
                depth,
                Some(on_status),
                side.notes.ctx(),
                ptr::null(),
                Some(on_create),
                created.ctx(),
                &raw mut cq,
            )
        };
        side.cq = ptr::null_mut();
        side.cq = self.made("NdkCreateCq", status, &created, cq)?;

        let created = Signal::new();
        let mut pd = ptr::null_mut();
        // SAFETY: a live adapter and an out-pointer.
        let status =
            unsafe { (d.ndk_create_pd)(adapter, Some(on_create), created.ctx(), &raw mut pd) };
        side.pd = ptr::null_mut();
        side.pd = self.made("NdkCreatePd", status, &created, pd)?;

        let pdd = table(side.pd);
        side.qp_ctx = self.context();
        let created = Signal::new();
        let mut qp = ptr::null_mut();
        // SAFETY: a live PD and CQ, an out-pointer.
        let status = unsafe {
            (pdd.ndk_create_qp)(
                side.pd,
                side.cq,
                side.cq,
                ptr::without_provenance_mut(side.qp_ctx),
                receive_depth,
                initiator_depth,
                side.receive_sge,
                side.initiator_sge,
                side.inline,
                Some(on_create),
                created.ctx(),
                &raw mut qp,
            )
        };
        side.qp = ptr::null_mut();
        side.qp = self.made("NdkCreateQp", status, &created, qp)?;

        let created = Signal::new();
        let mut mr = ptr::null_mut();
        // SAFETY: a live PD and an out-pointer.
        let status =
            unsafe { (pdd.ndk_create_mr)(side.pd, 0, Some(on_create), created.ctx(), &raw mut mr) };
        side.mr = ptr::null_mut();
        side.mr = self.made("NdkCreateMr", status, &created, mr)?;

        let len = usize::try_from(self.rng.range(1, 3)).unwrap_or(1) * PAGE_SIZE;
        let mut buffer = Buffer::new(len);
        let mdl = &raw mut *buffer.mdl;
        side.buffer = Some(buffer);
        let flags =
            (MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_READ | MrFlags::ALLOW_REMOTE_WRITE)
                .bits();
        let done = Signal::new();
        // SAFETY: a live MR; the MDL describes `len` bytes of the side's
        // buffer, which is kept until the MR's close has completed.
        let status = unsafe {
            (table(side.mr).ndk_register_mr)(side.mr, mdl, len, flags, Some(on_status), done.ctx())
        };
        self.call("NdkRegisterMr", status);
        let (status, _) = self
            .finish("NdkRegisterMr", status, &done)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkRegisterMr", status)?;
        side.registered = true;
        // SAFETY: a live, registered MR.
        side.local_token = unsafe { (table(side.mr).ndk_get_local_token_from_mr)(side.mr) };
        self.call("NdkGetLocalTokenFromMr", STATUS_SUCCESS);
        // SAFETY: as above.
        side.remote_token = unsafe { (table(side.mr).ndk_get_remote_token_from_mr)(side.mr) };
        self.call("NdkGetRemoteTokenFromMr", STATUS_SUCCESS);

        let created = Signal::new();
        let mut mw = ptr::null_mut();
        // SAFETY: a live PD and an out-pointer.
        let status =
            unsafe { (pdd.ndk_create_mw)(side.pd, Some(on_create), created.ctx(), &raw mut mw) };
        side.mw = ptr::null_mut();
        side.mw = self.made("NdkCreateMw", status, &created, mw)?;
        Ok(())
    }

    /// Connects side 0 (connector, `NdkConnect`) to side 1 (listener,
    /// `NdkAccept`); the listener is closed once the connection is up.
    pub(super) fn connect(&mut self, link: &mut Link) -> Result<(), SetupFailed> {
        let [a, b] = &mut link.sides;
        let a_adapter = self.adapters[a.adapter];
        let b_adapter = self.adapters[b.adapter];

        let created = Signal::new();
        let mut connector = ptr::null_mut();
        // SAFETY: a live adapter and an out-pointer.
        let status = unsafe {
            (table(a_adapter.ptr()).ndk_create_connector)(
                a_adapter.ptr(),
                Some(on_create),
                created.ctx(),
                &raw mut connector,
            )
        };
        a.connector = ptr::null_mut();
        a.connector = self.made("NdkCreateConnector", status, &created, connector)?;

        let incoming = Signal::new();
        let created = Signal::new();
        let mut listener: *mut NdkListener = ptr::null_mut();
        // SAFETY: a live adapter; `incoming` outlives the listener (it is
        // kept until the listener's close completed).
        let status = unsafe {
            (table(b_adapter.ptr()).ndk_create_listener)(
                b_adapter.ptr(),
                Some(on_connect),
                incoming.ctx(),
                Some(on_create),
                created.ctx(),
                &raw mut listener,
            )
        };
        self.call("NdkCreateListener", status);
        let (status, object) = self
            .finish("NdkCreateListener", status, &created)
            .unwrap_or((STATUS_PENDING, 0));
        if object != 0 {
            listener = ptr::with_exposed_provenance_mut(object);
        }
        self.expect("NdkCreateListener", status)?;
        // The listener's close stays pending until the connector its
        // connect event brought is closed (L24): it closes with the link.
        link.listener = listener;
        link.incoming = Arc::clone(&incoming);
        let [a, b] = &mut link.sides;
        self.listen_and_connect(a_adapter, listener, &incoming, a, b)
    }

    pub(super) fn listen_and_connect(
        &mut self,
        a_adapter: Adapter,
        listener: *mut NdkListener,
        incoming: &Arc<Signal>,
        a: &mut Side,
        b: &mut Side,
    ) -> Result<(), SetupFailed> {
        let b_ip = self.adapters[b.adapter].ip;
        let ld = table(listener);
        let address = sockaddr(b_ip, 0);
        let done = Signal::new();
        // SAFETY: a live listener; the address is valid for the call.
        let status = unsafe {
            (ld.ndk_listen)(
                listener,
                (&raw const address).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                Some(on_status),
                done.ctx(),
            )
        };
        self.call("NdkListen", status);
        let (status, _) = self
            .finish("NdkListen", status, &done)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkListen", status)?;
        let mut bound = SockAddrIn::default();
        let mut len = SOCKADDR_IN_LEN;
        // SAFETY: a live listener and a SOCKADDR_IN-sized buffer.
        let status = unsafe {
            (ld.ndk_get_local_address)(listener, (&raw mut bound).cast::<SockAddr>(), &raw mut len)
        };
        self.call("NdkGetListenerLocalAddress", status);
        self.expect("NdkGetListenerLocalAddress", status)?;
        let port = u16::from_be(bound.sin_port);

        let read_limit = self.rng.range(0, 16);
        let src = sockaddr(a_adapter.ip, 0);
        let dst = sockaddr(b_ip, port);
        let connected = Signal::new();
        // SAFETY: live objects; addresses valid for the call; `connected`
        // kept until the completion.
        let status = unsafe {
            (table(a.connector).ndk_connect)(
                a.connector,
                a.qp,
                (&raw const src).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                (&raw const dst).cast::<SockAddr>(),
                SOCKADDR_IN_LEN,
                read_limit,
                read_limit,
                ptr::null(),
                0,
                Some(on_status),
                connected.ctx(),
            )
        };
        self.call("NdkConnect", status);
        if status != STATUS_PENDING {
            self.expect("NdkConnect", status)?;
        }
        // The connect event, unless the connect fails first (an injected
        // fault): then its completion explains the missing event at once.
        let failed = |connected: &Signal| {
            connected
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .first()
                .is_some_and(|&(status, _)| status != STATUS_SUCCESS)
        };
        let deadline = Instant::now() + WAIT;
        let mut event = None;
        while event.is_none() && Instant::now() < deadline {
            if status == STATUS_PENDING && failed(&connected) {
                break;
            }
            event = incoming.wait_up_to(Duration::from_millis(10));
        }
        let Some((_, connector)) = event else {
            keep(incoming);
            // The connect's own completion explains it, or it is a hang.
            if let Some((status, _)) = self.finish("NdkConnect", status, &connected) {
                self.expect("NdkConnect", status)?;
            }
            self.finding(&format!(
                "NdkConnect: no connect event at the listener within {WAIT:?}"
            ));
            return Err(SetupFailed("no connect event".into()));
        };
        b.connector = ptr::with_exposed_provenance_mut(connector);
        let accepted = Signal::new();
        // SAFETY: live objects; the disconnect signal and `accepted` are kept
        // as long as the provider may call them.
        let accept = unsafe {
            (table(b.connector).ndk_accept)(
                b.connector,
                b.qp,
                read_limit,
                read_limit,
                ptr::null(),
                0,
                Some(on_event),
                b.disconnects.ctx(),
                Some(on_status),
                accepted.ctx(),
            )
        };
        self.call("NdkAccept", accept);
        if accept != STATUS_PENDING {
            self.expect("NdkAccept", accept)?;
        }
        // From here a failure leaves the accept pending: its completion
        // comes when the connector closes, so its context must outlive that.
        let (status, _) = self
            .finish("NdkConnect", status, &connected)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkConnect", status)
            .inspect_err(|_| keep(&accepted))?;
        let completed = Signal::new();
        // SAFETY: live objects; the signals are kept as above.
        let status = unsafe {
            (table(a.connector).ndk_complete_connect)(
                a.connector,
                Some(on_event),
                a.disconnects.ctx(),
                Some(on_status),
                completed.ctx(),
            )
        };
        self.call("NdkCompleteConnect", status);
        let (status, _) = self
            .finish("NdkCompleteConnect", status, &completed)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkCompleteConnect", status)
            .inspect_err(|_| keep(&accepted))?;
        let (status, _) = self
            .finish("NdkAccept", accept, &accepted)
            .unwrap_or((STATUS_PENDING, 0));
        self.expect("NdkAccept", status)
    }

    /// Opens a link between two random adapters; `None` when set-up failed
    /// (a finding, unless faults are injected).
    pub(super) fn open_link(&mut self) -> Option<Link> {
        let a = self.rng.index(self.adapters.len());
        let b = self.rng.index(self.adapters.len());
        let mut link = Link {
            id: self.out.links + self.out.setup_failed,
            disconnected: false,
            noise: if self.rng.chance(60) {
                0
            } else {
                self.rng.below(10) + 1
            },
            sides: [Side::new(a), Side::new(b)],
            listener: ptr::null_mut(),
            incoming: Signal::new(),
        };
        let mut result = Ok(());
        for i in 0..2 {
            let mut side = std::mem::replace(&mut link.sides[i], Side::new(0));
            result = self.open_side(&mut side);
            link.sides[i] = side;
            if result.is_err() {
                break;
            }
        }
        self.noise = link.noise;
        if result.is_ok() {
            // Receives before the connection (P8): over iWARP a Send that
            // finds none ends the connection.
            for i in 0..2 {
                for _ in 0..self.rng.below(4) {
                    self.receive(&mut link, i);
                }
            }
            result = self.connect(&mut link);
        }
        match result {
            Ok(()) => {
                self.out.links += 1;
                Some(link)
            }
            Err(SetupFailed(text)) => {
                if self.config.faults.is_none() {
                    self.finding(&format!("link set-up: {text}"));
                }
                self.out.setup_failed += 1;
                self.close_link(link);
                None
            }
        }
    }
}
