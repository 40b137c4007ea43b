//! Kernel UDP over WSK datagram sockets, for the virtual Ethernet's VXLAN
//! underlay (issue 9, item 3; `docs/ether.md`).
//!
//! * [`WskDatagram::open`]: `WskSocket` with `WSK_FLAG_DATAGRAM_SOCKET`
//!   (`SOCK_DGRAM`, `IPPROTO_UDP`), then `WSK_EVENT_RECEIVE_FROM` enabled,
//!   then `WskBind` to the local address; the outcome goes to
//!   [`DatagramEvents::ready`], once.
//! * Receive: `WskReceiveFromEvent` walks the indicated list; each datagram
//!   is handed to [`DatagramEvents::received`] as a [`Datagram`] the callee
//!   copies out of (its MDL chain is valid only during the call). The event
//!   returns `STATUS_SUCCESS`, which gives the whole list back to WSK at
//!   once: the glue never retains indicated data, so it never needs
//!   `WskRelease` (that is for a client that returned `STATUS_PENDING`).
//! * Send: a fixed pool of send slots made with the socket — each a buffer
//!   of `slot_len` bytes, its MDL, an IRP and the remote address. A caller
//!   takes a free slot ([`WskDatagram::slot`]), fills its buffer and sends
//!   it ([`SendSlot::send`], `WskSendTo`); the slot is free again when the
//!   send completes. When every slot is busy `slot` answers `None`: the
//!   caller drops its datagram (and counts it); nothing queues without
//!   bound and nothing allocates per datagram.
//! * [`WskDatagram::close`]: no new slot is handed out; once every slot is
//!   free (sends completed, slots taken but not sent given back)
//!   `WskCloseSocket` is issued; [`WskDatagram::is_closed`] once it
//!   completed, after which WSK calls nothing more on the socket.
//!
//! # IRQL
//! `open`, `slot`, `send` and `close` run at ≤ DISPATCH_LEVEL (`open`
//! allocates the pool, from non-paged pool). The events and completion
//! routines run at ≤ DISPATCH_LEVEL in arbitrary threads and call
//! [`DatagramEvents`] with no lock of this module held.
//!
//! # Lifetime
//! As the other sockets of this module: the socket holds one strong
//! reference to the [`WskDatagram`] (its WSK context), released when
//! `WskCloseSocket` completes (or the creation fails). A slot's IRP context
//! is the slot, valid because close waits for every send.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::net::SocketAddr;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use super::irp::{BufferMdl, OwnedIrp, PoolBytes, outcome};
use super::setup::{self, Core, Phase, Setup};
use super::{
    WskClient, borrow_arc, event_object, from_sockaddr, indicated, socket_table, to_sockaddr,
};
use crate::abi::{
    IPPROTO_UDP, Irp, NtStatus, PfnWskBind, SOCK_DGRAM, STATUS_INSUFFICIENT_RESOURCES,
    STATUS_INVALID_PARAMETER, STATUS_MORE_PROCESSING_REQUIRED, STATUS_SUCCESS, SockAddrInet,
    WSK_EVENT_RECEIVE_FROM, WSK_FLAG_DATAGRAM_SOCKET, WskBuf, WskClientDatagramDispatch,
    WskDatagramIndication, WskProviderDatagramDispatch,
};
use crate::kernel::mdl::copy_from_chain;

/// The most send slots a socket has (one bit each in a `u64`).
pub const MAX_SLOTS: usize = 64;

/// The largest slot: one UDP datagram.
pub const MAX_SLOT_LEN: usize = 65_507;

/// What a datagram socket reports.
pub trait DatagramEvents: Send + Sync {
    /// Bound and receiving (`Ok`), or the setup failed. Called once,
    /// before any `received`.
    fn ready(&self, result: Result<(), NtStatus>);
    /// One datagram from `from`; its bytes can be read during the call.
    fn received(&self, from: SocketAddr, datagram: &Datagram<'_>);
}

/// A received datagram, readable during [`DatagramEvents::received`].
pub struct Datagram<'a> {
    buffer: WskBuf,
    _indication: core::marker::PhantomData<&'a WskDatagramIndication>,
}

impl Datagram<'_> {
    /// Its length in bytes.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.buffer.length
    }

    /// Whether it is empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.buffer.length == 0
    }

    /// Copies the datagram into `out`; returns how many bytes were copied:
    /// the datagram's length, or `None` when it does not fit in `out` or its
    /// chain cannot be read (the datagram is then to be dropped).
    pub fn copy_to(&self, out: &mut [u8]) -> Option<usize> {
        let len = self.buffer.length;
        let dst = out.get_mut(..len)?;
        let first = NonNull::new(self.buffer.mdl)?;
        // SAFETY: the WSK_BUF of an indication being delivered describes a
        // locked chain, valid and unchanged while the event runs (this
        // value cannot outlive it).
        let copied = unsafe { copy_from_chain(first, self.buffer.offset as usize, dst) }.ok()?;
        (copied == len).then_some(len)
    }
}

/// One preallocated send: buffer, MDL, IRP, destination.
struct Slot {
    buf: NonNull<u8>,
    mdl: BufferMdl,
    irp: OwnedIrp,
    wsk_buf: UnsafeCell<WskBuf>,
    remote: UnsafeCell<SockAddrInet>,
    index: usize,
    owner: AtomicPtr<WskDatagram>,
}

/// Counters of the send side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Sends completed with success.
    pub sent: u64,
    /// Sends completed with an error.
    pub failed: u64,
    /// `slot` found every slot busy (the caller dropped a datagram).
    pub busy: u64,
}

/// A WSK datagram (UDP) socket with a fixed pool of send slots.
pub struct WskDatagram {
    /// Its client, socket, control IRP, local address and phase; the
    /// kind's part of the state is the free slots (bit `i` set: slot `i`
    /// is free).
    core: Core<u64>,
    events: Arc<dyn DatagramEvents>,
    slots: Box<[Slot]>,
    slot_len: usize,
    /// The slots' buffers (held, read through the slots). After `slots`:
    /// freed after their MDLs.
    _storage: PoolBytes,
    sent: AtomicU64,
    failed: AtomicU64,
    busy: AtomicU64,
}

// SAFETY: a slot's buffer, `WskBuf` and address are written only by the one
// holder of the free slot (its bit taken under the lock) and read by the
// provider while its send is in flight; the IRPs and MDLs are owned handles
// used one request at a time.
unsafe impl Send for WskDatagram {}
// SAFETY: as above.
unsafe impl Sync for WskDatagram {}

/// A slot taken from the pool: fill [`buffer`](Self::buffer), then
/// [`send`](Self::send). Dropped unsent, it is free again.
pub struct SendSlot<'a> {
    owner: &'a WskDatagram,
    index: usize,
    sent: bool,
}

impl SendSlot<'_> {
    /// The slot's buffer, `slot_len` bytes.
    pub fn buffer(&mut self) -> &mut [u8] {
        let Some(slot) = self.owner.slots.get(self.index) else {
            return &mut [];
        };
        // SAFETY: this holder has the slot to itself (its free bit was taken
        // and no send is in flight); the buffer is `slot_len` bytes of the
        // socket's storage, alive as long as the socket.
        unsafe { core::slice::from_raw_parts_mut(slot.buf.as_ptr(), self.owner.slot_len) }
    }

    /// Sends the first `len` bytes of the buffer to `to` (`WskSendTo`); the
    /// slot is free again when the send completes.
    pub fn send(mut self, to: SocketAddr, len: usize) {
        self.sent = true;
        self.owner
            .start_send(self.index, to, len.min(self.owner.slot_len));
    }
}

impl Drop for SendSlot<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.owner.release_slot(self.index);
        }
    }
}

impl WskDatagram {
    /// Creates a datagram socket bound to `local` with `slots` send slots
    /// of `slot_len` bytes each; the outcome goes to `events.ready`.
    ///
    /// # Errors
    /// No memory, or a bad slot count or length (nothing was started,
    /// `ready` is not called).
    pub fn open(
        client: &Arc<WskClient>,
        local: SocketAddr,
        slots: usize,
        slot_len: usize,
        events: Arc<dyn DatagramEvents>,
    ) -> Result<Arc<Self>, NtStatus> {
        if slots == 0 || slots > MAX_SLOTS || slot_len == 0 || slot_len > MAX_SLOT_LEN {
            return Err(STATUS_INVALID_PARAMETER);
        }
        let storage = PoolBytes::new(slots * slot_len).ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
        // Declared after the storage, so dropped first on an error below.
        let slot_list = Self::make_slots(storage.start(), slots, slot_len)
            .ok_or(STATUS_INSUFFICIENT_RESOURCES)?;
        let free = if slots == MAX_SLOTS {
            u64::MAX
        } else {
            (1_u64 << slots) - 1
        };
        let core = Core::new(client, local, free)?;
        let this = Arc::new(Self {
            core,
            events,
            slots: slot_list,
            slot_len,
            _storage: storage,
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            busy: AtomicU64::new(0),
        });
        let owner = Arc::as_ptr(&this).cast_mut();
        for slot in &this.slots {
            slot.owner.store(owner, Ordering::Release);
        }
        setup::create(&this, local.is_ipv4());
        Ok(this)
    }

    fn make_slots(base: NonNull<u8>, slots: usize, slot_len: usize) -> Option<Box<[Slot]>> {
        let mut list = Vec::new();
        list.try_reserve_exact(slots).ok()?;
        let len = u32::try_from(slot_len).ok()?;
        for index in 0..slots {
            let buf = NonNull::new(base.as_ptr().wrapping_add(index * slot_len))?;
            // SAFETY: `slot_len` bytes of the pool storage, which the socket
            // frees only after its slots (field order; in `open`, the slots
            // are declared after the storage and dropped first).
            let mdl = unsafe { BufferMdl::new(buf, len) }?;
            let irp = OwnedIrp::new()?;
            list.push(Slot {
                buf,
                mdl,
                irp,
                wsk_buf: UnsafeCell::new(WskBuf {
                    mdl: core::ptr::null_mut(),
                    offset: 0,
                    padding_0c: 0,
                    length: 0,
                }),
                remote: UnsafeCell::new(SockAddrInet::default()),
                index,
                owner: AtomicPtr::new(core::ptr::null_mut()),
            });
        }
        Some(list.into_boxed_slice())
    }

    fn dispatch(&self) -> &WskProviderDatagramDispatch {
        let socket = self.core.socket();
        // SAFETY: the socket is live while requests are issued on it (close
        // is the last) and is a datagram socket.
        unsafe { socket_table(socket) }
    }

    /// Whether the socket is bound and sending.
    pub fn is_open(&self) -> bool {
        let state = self.core.state.lock();
        state.phase == Phase::Open && !state.close_wanted
    }

    /// Whether the socket is gone: its close completed, or its setup
    /// failed. WSK calls nothing more on it.
    pub fn is_closed(&self) -> bool {
        self.core.state.lock().phase == Phase::Closed
    }

    /// Send slots busy (taken or in flight).
    pub fn busy_slots(&self) -> usize {
        let free = self.core.state.lock().own.count_ones() as usize;
        self.slots.len().saturating_sub(free)
    }

    /// The send counters.
    pub fn stats(&self) -> SendStats {
        SendStats {
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
        }
    }

    /// A free send slot, or `None` when every slot is busy (counted) or the
    /// socket is not open.
    pub fn slot(&self) -> Option<SendSlot<'_>> {
        let index = {
            let mut state = self.core.state.lock();
            if state.phase != Phase::Open || state.close_wanted {
                return None;
            }
            if state.own == 0 {
                drop(state);
                self.busy.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            let index = state.own.trailing_zeros() as usize;
            state.own &= !(1_u64 << index);
            index
        };
        Some(SendSlot {
            owner: self,
            index,
            sent: false,
        })
    }

    /// Frees slot `index`, then closes the socket if that was the last busy
    /// one and close is wanted.
    fn release_slot(&self, index: usize) {
        setup::update(self, |state| state.own |= 1_u64 << index);
    }

    fn start_send(&self, index: usize, to: SocketAddr, len: usize) {
        let Some(slot) = self.slots.get(index) else {
            return;
        };
        // SAFETY: the slot is this sender's (free bit taken, nothing in
        // flight on it), so its WSK_BUF and address are not shared yet.
        unsafe {
            slot.wsk_buf.get().write(WskBuf {
                mdl: slot.mdl.as_ptr(),
                offset: 0,
                padding_0c: 0,
                length: len,
            });
        };
        // SAFETY: as above.
        unsafe { slot.remote.get().write(to_sockaddr(to)) };
        let context = core::ptr::from_ref(slot).cast_mut().cast::<c_void>();
        // SAFETY: the slot's IRP is idle; the context is the slot, which
        // lives as long as the socket, and close waits for this send.
        unsafe { slot.irp.prepare(send_done, context) };
        let socket = self.core.socket();
        let dispatch = self.dispatch();
        // SAFETY: the socket is open (a slot is handed out only then, and
        // close waits for it); the buffer, its MDL, the address and the IRP
        // stay valid until the completion routine runs.
        let _ = unsafe {
            (dispatch.wsk_send_to)(
                socket,
                slot.wsk_buf.get(),
                0,
                slot.remote.get().cast(),
                0,
                core::ptr::null_mut(),
                slot.irp.as_ptr(),
            )
        };
    }

    /// Closes the socket once every slot is free; see the module
    /// documentation. Idempotent.
    pub fn close(&self) {
        setup::close(self);
    }
}

impl Setup for WskDatagram {
    const EVENTS: u32 = WSK_EVENT_RECEIVE_FROM;
    const KIND: (u16, u32, u32) = (SOCK_DGRAM, IPPROTO_UDP, WSK_FLAG_DATAGRAM_SOCKET);
    const EVENT_TABLE: *const c_void = (&raw const DATAGRAM_DISPATCH).cast();
    type Own = u64;

    fn core(&self) -> &Core<u64> {
        &self.core
    }

    fn bind(&self) -> PfnWskBind {
        self.dispatch().wsk_bind
    }

    fn ready(&self, result: Result<(), NtStatus>) {
        self.events.ready(result);
    }

    /// Every slot free: no send in flight, none taken.
    fn idle(&self, free: &u64) -> bool {
        free.count_ones() as usize == self.slots.len()
    }
}

/// `WskSendTo` completed: the slot is free again.
unsafe extern "system" fn send_done(
    _device: *mut c_void,
    irp: *mut Irp,
    context: *mut c_void,
) -> NtStatus {
    // SAFETY: the context is a slot of a socket that is not closed (close
    // waits for this send), so the slot and its owner are alive.
    let slot = unsafe { &*context.cast::<Slot>().cast_const() };
    let owner = slot.owner.load(Ordering::Acquire);
    if owner.is_null() {
        return STATUS_MORE_PROCESSING_REQUIRED;
    }
    // SAFETY: the owner is `Arc::as_ptr` of the socket's object, whose
    // reference the socket holds until close, which waits for this send;
    // the reference taken here keeps it for this routine even if the close
    // issued below completes at once.
    let owner = unsafe { borrow_arc::<WskDatagram>(owner.cast()) };
    // SAFETY: our IRP, completed.
    let (status, _) = unsafe { outcome(irp) };
    if status < 0 {
        owner.failed.fetch_add(1, Ordering::Relaxed);
    } else {
        owner.sent.fetch_add(1, Ordering::Relaxed);
    }
    owner.release_slot(slot.index);
    drop(owner);
    STATUS_MORE_PROCESSING_REQUIRED
}

/// `WskReceiveFromEvent`: each datagram of the list to `received`; the list
/// is given back at once (`STATUS_SUCCESS`).
unsafe extern "system" fn receive_from_event(
    socket_context: *mut c_void,
    _flags: u32,
    indication: *mut WskDatagramIndication,
) -> NtStatus {
    // SAFETY: the context is the socket's reference, held while WSK calls
    // events on it.
    let Some(this) = (unsafe { event_object::<WskDatagram, _>(socket_context, indication) }) else {
        return STATUS_SUCCESS;
    };
    // SAFETY: the provider's list, valid during the event.
    for element in unsafe { indicated(indication, |element| element.next) } {
        // SAFETY: the provider's sender address (SOCKADDR_IN / _IN6) or null.
        if let Some(from) = unsafe { from_sockaddr(element.remote_address) } {
            let datagram = Datagram {
                buffer: element.buffer,
                _indication: core::marker::PhantomData,
            };
            this.events.received(from, &datagram);
        }
    }
    STATUS_SUCCESS
}

/// The events of every datagram socket.
static DATAGRAM_DISPATCH: WskClientDatagramDispatch = WskClientDatagramDispatch {
    wsk_receive_from_event: Some(receive_from_event),
};
