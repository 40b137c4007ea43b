//! The life of a socket that is set up in two requests on one IRP — create,
//! then bind — and closed with a third on the same IRP: the listening socket
//! ([`super::WskListener`]) and the datagram socket ([`super::WskDatagram`]).
//! Their creation request and completion routines are the same logic over
//! two kinds of object, so they are written once here, generic over
//! [`Setup`], and instantiated per kind ([`create`],
//! `completed::<WskListener, CREATE>`...).
//!
//! The object's socket reference (`Arc::into_raw`, given to WSK as the
//! context of every request here) is released by `closed` once
//! `WskCloseSocket` completed, or by a failed setup when there is no socket
//! to close.

use alloc::sync::Arc;
use core::ffi::c_void;
use core::sync::atomic::{AtomicPtr, Ordering};

use super::irp::{OwnedIrp, outcome};
use super::{borrow_arc, enable_events};
use crate::abi::{
    AF_INET, AF_INET6, Irp, NtStatus, PfnWskBind, PfnWskCloseSocket, STATUS_INSUFFICIENT_RESOURCES,
    STATUS_MORE_PROCESSING_REQUIRED, SockAddrInet, WskSocket,
};

/// Where a socket's setup and close stand, as far as the shared routines
/// record it (each kind maps them onto its own phases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The socket exists, its events are on; the bind is issued.
    Binding,
    /// `WskCloseSocket` is about to be issued.
    Closing,
    /// Closed, or the setup failed with no socket: WSK calls nothing more.
    Closed,
}

/// A socket object whose setup and close the routines of this module run.
pub(super) trait Setup: Send + Sync + Sized + 'static {
    /// The events enabled as soon as the socket exists.
    const EVENTS: u32;
    /// `WskSocket`'s socket type, protocol and `WSK_FLAG_*` for this kind.
    const KIND: (u16, u32, u32);
    /// The kind's own dispatch table (its event callbacks), for `WskSocket`.
    fn event_table() -> *const c_void;
    /// The captured provider the socket was opened on.
    fn client(&self) -> &super::WskClient;
    /// The provider's socket (null until created and after closed).
    fn socket(&self) -> &AtomicPtr<WskSocket>;
    /// The IRP of the create, bind and close requests, one at a time.
    fn control_irp(&self) -> &OwnedIrp;
    /// The local address to bind, read by the provider during the bind.
    fn local(&self) -> *mut SockAddrInet;
    /// `WskBind` and `WskCloseSocket` of the live socket's dispatch table.
    fn bind_and_close(&self) -> (PfnWskBind, PfnWskCloseSocket);
    /// Tells the user how the setup ended.
    fn ready(&self, result: Result<(), NtStatus>);
    /// Records `step`.
    fn enter(&self, step: Step);
    /// The bind completed (`ok`: with success): records it; whether to close
    /// at once (it failed, or close was asked for meanwhile).
    fn bind_done(&self, ok: bool) -> bool;
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
    let client = this.client();
    client.socket_opened();
    let context = Arc::into_raw(Arc::clone(this)).cast_mut().cast::<c_void>();
    // SAFETY: a new, idle IRP; the context is the socket's reference.
    unsafe { this.control_irp().prepare(completed::<S, CREATE>, context) };
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
            S::event_table(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            this.control_irp().as_ptr(),
        )
    };
}

/// Issues `WskCloseSocket`; [`closed`] follows.
pub(super) fn start_close<S: Setup>(this: &S) {
    let socket = this.socket().load(Ordering::Acquire);
    let routine = completed::<S, CLOSE>;
    // SAFETY: the control IRP is idle: close is issued once the setup's last
    // request completed (from its completion routine, or once the phase says
    // the setup is over), and only once (the phase moves to closing first).
    unsafe { this.control_irp().prepare(routine, context_of(this)) };
    let (_, close) = this.bind_and_close();
    // SAFETY: a live socket with nothing outstanding; the IRP stays valid
    // until its completion (the socket's reference keeps the object).
    let _ = unsafe { close(socket, this.control_irp().as_ptr()) };
}

/// The setup failed at `status` with no socket to close: report it and give
/// up the socket's reference.
fn fail<S: Setup>(this: &S, status: NtStatus, context: *mut c_void) {
    this.enter(Step::Closed);
    this.ready(Err(status));
    this.client().socket_gone();
    // SAFETY: the socket's reference, given up (there is no socket).
    drop(unsafe { Arc::from_raw(context.cast::<S>().cast_const()) });
}

/// The request a [`completed`] instance finishes (its `REQUEST`).
const CREATE: u8 = 0;
/// `WskBind`.
const BIND: u8 = 1;
/// `WskCloseSocket`.
const CLOSE: u8 = 2;

/// The completion routine of every request here, one instance per kind of
/// socket and request (`completed::<WskListener, CREATE>`...): takes the
/// outcome and a reference for the routine's length, then runs the step.
///
/// # Safety
/// An IRP completion routine: `irp` is the object's control IRP, completed,
/// and `context` its socket reference (`Arc::into_raw` of an `S`).
pub(super) unsafe extern "system" fn completed<S: Setup, const REQUEST: u8>(
    _device: *mut c_void,
    irp: *mut Irp,
    context: *mut c_void,
) -> NtStatus {
    // SAFETY: our IRP, completed.
    let (status, information) = unsafe { outcome(irp) };
    // SAFETY: the context is the socket's reference.
    let this = unsafe { borrow_arc::<S>(context) };
    match REQUEST {
        CREATE => created(&*this, status, information as *mut WskSocket, context),
        BIND => bound(&*this, status),
        _ => closed(this, context),
    }
    STATUS_MORE_PROCESSING_REQUIRED
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
    this.socket().store(socket, Ordering::Release);
    // SAFETY: the socket the provider just made.
    let enabled = unsafe { enable_events(socket, S::EVENTS) };
    if enabled < 0 {
        this.ready(Err(enabled));
        this.enter(Step::Closing);
        start_close(this);
        return;
    }
    this.enter(Step::Binding);
    // SAFETY: the IRP completed (this routine) and is ours again.
    unsafe { this.control_irp().prepare(completed::<S, BIND>, context) };
    let (bind, _) = this.bind_and_close();
    // SAFETY: a live socket; the address lives in the object, kept by the
    // socket's reference; the IRP stays valid until its completion.
    let _ = unsafe { bind(socket, this.local().cast(), 0, this.control_irp().as_ptr()) };
}

/// `WskBind` completed: open, or closed again on failure or when close was
/// asked for meanwhile.
fn bound<S: Setup>(this: &S, status: NtStatus) {
    let close_now = this.bind_done(status >= 0);
    this.ready(if status < 0 { Err(status) } else { Ok(()) });
    if close_now {
        start_close(this);
    }
}

/// `WskCloseSocket` completed: the socket's reference goes.
fn closed<S: Setup>(this: Arc<S>, context: *mut c_void) {
    this.socket()
        .store(core::ptr::null_mut(), Ordering::Release);
    this.enter(Step::Closed);
    this.client().socket_gone();
    // SAFETY: the socket's reference, given up now that it is closed.
    drop(unsafe { Arc::from_raw(context.cast::<S>().cast_const()) });
    // `this` (the routine's own reference) may free the object here, after
    // which nothing touches it (STATUS_MORE_PROCESSING_REQUIRED: the I/O
    // manager leaves the IRP alone).
    drop(this);
}
