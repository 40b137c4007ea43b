//! The life of a socket that is set up in two requests on one IRP — create,
//! then bind — and closed with a third on the same IRP: the listening socket
//! ([`super::WskListener`]) and the datagram socket ([`super::WskDatagram`]).
//! Their fields for it ([`Core`]: client, socket, control IRP, local
//! address, phase), their creation request, their close when due and their
//! completion steps are the same logic over two kinds of object, so they are
//! written once here, generic over [`Setup`], and instantiated per kind
//! ([`create`], `completion::<WskListener, CREATE>`...).
//!
//! The object's socket reference (`Arc::into_raw`, given to WSK as the
//! context of every request here) is released by `closed` once
//! `WskCloseSocket` completed, or by a failed setup when there is no socket
//! to close.

use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::net::SocketAddr;
use core::sync::atomic::{AtomicPtr, Ordering};

use super::irp::OwnedIrp;
use super::{
    Completes, Done, WskClient, completion, enable_events, release_reference, socket_reference,
    socket_table, to_sockaddr,
};
use crate::abi::{
    AF_INET, AF_INET6, NtStatus, PfnWskBind, STATUS_INSUFFICIENT_RESOURCES, SockAddrInet,
    WskProviderBasicDispatch, WskSocket,
};
use crate::kernel::sync::SpinLock;

/// Where a socket's setup and close stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// `WskSocket` is in flight.
    Creating,
    /// The socket exists, its events are on; the bind is in flight.
    Binding,
    /// Bound: listening, or receiving and sending.
    Open,
    /// `WskCloseSocket` is issued (or about to be).
    Closing,
    /// Closed, or the setup failed with no socket: WSK calls nothing more.
    Closed,
}

/// The phase, and what the kind keeps under the same lock.
pub(super) struct State<X> {
    /// Where the setup and close stand.
    pub(super) phase: Phase,
    /// `close` was called before the socket could close.
    pub(super) close_wanted: bool,
    /// The kind's own part (the datagram socket's free send slots).
    pub(super) own: X,
}

/// The fields of a socket object that the routines here use, embedded in
/// each kind ([`Setup::core`]).
pub(super) struct Core<X> {
    /// The captured provider the socket was opened on.
    pub(super) client: Arc<WskClient>,
    /// The provider's socket (null until created and after closed).
    socket: AtomicPtr<WskSocket>,
    /// The IRP of the create, bind and close requests, one at a time.
    control_irp: OwnedIrp,
    /// The local address to bind, read by the provider during the bind.
    local: UnsafeCell<SockAddrInet>,
    /// The phase and the kind's part, under one lock.
    pub(super) state: SpinLock<State<X>>,
}

// SAFETY: `local` is written only by `new` and afterwards read by the
// provider during the bind, the one request it is given to; the other
// fields are `Sync` (the IRP is used one request at a time, as the phase
// orders).
unsafe impl<X: Send> Sync for Core<X> {}

impl<X> Core<X> {
    /// The fields of a socket to bind to `local`, before its creation
    /// (`own`: the kind's part of the state).
    ///
    /// # Errors
    /// No memory for the IRP.
    pub(super) fn new(
        client: &Arc<WskClient>,
        local: SocketAddr,
        own: X,
    ) -> Result<Self, NtStatus> {
        let control_irp = OwnedIrp::new().ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
        Ok(Self {
            client: Arc::clone(client),
            socket: AtomicPtr::new(core::ptr::null_mut()),
            control_irp,
            local: UnsafeCell::new(to_sockaddr(local)),
            state: SpinLock::new(State {
                phase: Phase::Creating,
                close_wanted: false,
                own,
            }),
        })
    }

    /// The provider's socket (null until created and after closed).
    pub(super) fn socket(&self) -> *mut WskSocket {
        self.socket.load(Ordering::Acquire)
    }
}

/// A socket object whose setup and close the routines of this module run.
pub(super) trait Setup: Send + Sync + Sized + 'static {
    /// The events enabled as soon as the socket exists.
    const EVENTS: u32;
    /// `WskSocket`'s socket type, protocol and `WSK_FLAG_*` for this kind.
    const KIND: (u16, u32, u32);
    /// The kind's own dispatch table (its event callbacks), for `WskSocket`.
    const EVENT_TABLE: *const c_void;
    /// What the kind keeps under the state's lock.
    type Own: Send;
    /// The fields the routines here use.
    fn core(&self) -> &Core<Self::Own>;
    /// `WskBind` of the live socket's dispatch table.
    fn bind(&self) -> PfnWskBind;
    /// Tells the user how the setup ended.
    fn ready(&self, result: Result<(), NtStatus>);
    /// Whether nothing of the kind's own is busy (`own`), so that an open
    /// socket whose close is wanted closes now.
    fn idle(&self, own: &Self::Own) -> bool;
}

/// The object's context for WSK: the pointer its socket reference was made
/// from (`Arc::into_raw` and `Arc::as_ptr` agree).
fn context_of<S: Setup>(this: &S) -> *mut c_void {
    core::ptr::from_ref(this).cast_mut().cast()
}

/// Takes the socket's reference (the context of every request here) and
/// issues `WskSocket` for an IPv4 or IPv6 (`ipv4`) socket of `S`'s kind;
/// the completion of [`CREATE`] follows, then the bind.
pub(super) fn create<S: Setup>(this: &Arc<S>, ipv4: bool) {
    let core = this.core();
    let client = &core.client;
    let context = socket_reference(client, this);
    // SAFETY: a new, idle IRP; the context is the socket's reference.
    unsafe { core.control_irp.prepare(completion::<S, CREATE>, context) };
    let family = if ipv4 { AF_INET } else { AF_INET6 };
    let (socket_type, protocol, flags) = S::KIND;
    let dispatch = client.dispatch();
    // SAFETY: a captured provider; the kind's table is static; the IRP
    // stays valid until its completion (the socket's reference keeps the
    // object).
    let _ = unsafe {
        (dispatch.wsk_socket)(
            client.npi.client,
            family,
            socket_type,
            protocol,
            flags,
            context,
            S::EVENT_TABLE,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core.control_irp.as_ptr(),
        )
    };
}

/// Changes the state (`change`), then closes the socket if that made its
/// close due: see [`close_due`].
pub(super) fn update<S: Setup>(this: &S, change: impl FnOnce(&mut State<S::Own>)) {
    let close_now = {
        let mut state = this.core().state.lock();
        change(&mut state);
        close_due(this, &mut state)
    };
    if close_now {
        start_close(this);
    }
}

/// Closes the socket once its setup is over and its kind is idle. Idempotent.
pub(super) fn close<S: Setup>(this: &S) {
    update(this, |state| state.close_wanted = true);
}

/// Whether close is wanted, the socket open and its kind idle: moves to
/// `Closing`.
fn close_due<S: Setup>(this: &S, state: &mut State<S::Own>) -> bool {
    if state.close_wanted && state.phase == Phase::Open && this.idle(&state.own) {
        state.phase = Phase::Closing;
        return true;
    }
    false
}

/// Issues `WskCloseSocket`; [`closed`] follows.
fn start_close<S: Setup>(this: &S) {
    let core = this.core();
    let socket = core.socket();
    let routine = completion::<S, CLOSE>;
    // SAFETY: the control IRP is idle: close is issued once the setup's last
    // request completed (from its completion routine, or once the phase says
    // the setup is over), and only once (the phase moves to closing first).
    unsafe { core.control_irp.prepare(routine, context_of(this)) };
    // SAFETY: a live socket (close is its last request); every socket table
    // begins with the basic one.
    let basic = unsafe { socket_table::<WskProviderBasicDispatch>(socket) };
    // SAFETY: a live socket with nothing outstanding; the IRP stays valid
    // until its completion (the socket's reference keeps the object).
    let _ = unsafe { (basic.wsk_close_socket)(socket, core.control_irp.as_ptr()) };
}

/// Records `phase`.
fn enter<S: Setup>(this: &S, phase: Phase) {
    this.core().state.lock().phase = phase;
}

/// The setup failed at `status` with no socket to close: report it and give
/// up the socket's reference.
fn fail<S: Setup>(this: &S, status: NtStatus, context: *mut c_void) {
    enter(this, Phase::Closed);
    this.ready(Err(status));
    // SAFETY: the socket's reference, given up (there is no socket).
    unsafe { release_reference::<S>(&this.core().client, context) };
}

/// The request a [`completion`] instance finishes (its `REQUEST`).
const CREATE: u8 = 0;
/// `WskBind`.
const BIND: u8 = 1;
/// `WskCloseSocket`.
const CLOSE: u8 = 2;

/// The completion step of every request here, one routine per kind of
/// socket and request (`completion::<WskListener, CREATE>`...).
impl<S: Setup> Completes for S {
    fn completed(this: Arc<Self>, request: u8, done: Done) {
        match request {
            CREATE => created(&*this, done.status, done.socket(), done.context),
            BIND => bound(&*this, done.status),
            _ => closed(this, done.context),
        }
    }
}

/// `WskSocket` completed (`socket`: the new socket): enable the events,
/// then bind.
fn created<S: Setup>(this: &S, status: NtStatus, socket: *mut WskSocket, context: *mut c_void) {
    if status < 0 || socket.is_null() {
        let status = if status < 0 {
            status
        } else {
            STATUS_INSUFFICIENT_RESOURCES
        };
        fail(this, status, context);
        return;
    }
    let core = this.core();
    core.socket.store(socket, Ordering::Release);
    // SAFETY: the socket the provider just made.
    let enabled = unsafe { enable_events(socket, S::EVENTS) };
    if enabled < 0 {
        this.ready(Err(enabled));
        enter(this, Phase::Closing);
        start_close(this);
        return;
    }
    enter(this, Phase::Binding);
    // SAFETY: the IRP completed (this routine) and is ours again.
    unsafe { core.control_irp.prepare(completion::<S, BIND>, context) };
    let bind = this.bind();
    // SAFETY: a live socket; the address lives in the object, kept by the
    // socket's reference; the IRP stays valid until its completion.
    let _ = unsafe {
        bind(
            socket,
            core.local.get().cast(),
            0,
            core.control_irp.as_ptr(),
        )
    };
}

/// `WskBind` completed: open, or closed again on failure or when close was
/// asked for meanwhile (and the kind is idle).
fn bound<S: Setup>(this: &S, status: NtStatus) {
    let close_now = {
        let mut state = this.core().state.lock();
        if status < 0 {
            state.phase = Phase::Closing;
            true
        } else {
            state.phase = Phase::Open;
            close_due(this, &mut state)
        }
    };
    this.ready(if status < 0 { Err(status) } else { Ok(()) });
    if close_now {
        start_close(this);
    }
}

/// `WskCloseSocket` completed: the socket's reference goes.
fn closed<S: Setup>(this: Arc<S>, context: *mut c_void) {
    let core = this.core();
    core.socket.store(core::ptr::null_mut(), Ordering::Release);
    enter(&*this, Phase::Closed);
    // SAFETY: the socket's reference, given up now that it is closed.
    unsafe { release_reference::<S>(&core.client, context) };
    // `this` (the routine's own reference) may free the object here, after
    // which nothing touches it (STATUS_MORE_PROCESSING_REQUIRED: the I/O
    // manager leaves the IRP alone).
    drop(this);
}
