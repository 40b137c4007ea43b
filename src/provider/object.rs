//! NDK objects as the consumer sees them, and their life cycle.
//!
//! Every object handed to a consumer is an [`Object<T>`]: the NDK shape
//! (header and dispatch pointer, so a pointer to the object is a pointer to
//! its `NDK_OBJECT_HEADER`), a type tag, the close machinery, a callback
//! serializer, then the provider's private state `T`. Objects live in an
//! `Arc`; the consumer's pointer *is* one strong reference, taken with
//! `Arc::into_raw` when the object is handed out and given back when its
//! close completes, so provider paths that still hold their own `Arc` never
//! touch freed memory (rule L16).
//!
//! # Close
//! An object stays open until `NdkCloseObject`; then it waits for its
//! *holds* — one per live successor (L24: a CQ is held by its QPs, a PD by its
//! regions, windows, QPs and SRQs, the adapter by everything it created), one
//! per request or callback in flight (L21, L23) — and completes when the last
//! is released: at once with `STATUS_SUCCESS` when nothing holds it, else with
//! `STATUS_PENDING` and the close completion later (L18). The close completion
//! is the object's last callback (L22); only after it returns are the
//! antecedents' holds released (L26). While it waits, a close is no more than
//! that dereference: the successors holding the object keep working through
//! it (L25), except where a rule wants an effect at once (a listener turns
//! requests away from its close on, N6).
//!
//! # Callbacks
//! Request completions and events of one object go through its serializer:
//! delivered one at a time, in order, with no provider lock held (I4); a
//! callback due while another runs is queued and delivered by the thread that
//! runs the first, after it returns. The serializer holds the object while
//! it delivers, so a consumer may close the object from inside the callback
//! (L15) and the close completes after the callback returns (L21).
//!
//! The provider never reads `Dispatch` after creation (L4) and never writes
//! the reserved block (L3): the private state is reached through the object
//! pointer itself.
//!
//! # Entering an object
//! Every entry point reaches its object through [`Object::from_ptr`], which
//! *enters* it: the returned [`Entered`] guard keeps the memory alive until
//! the call returns, even when the consumer closes the object on another
//! thread meanwhile (a breach of L17). The consumer's reference is given back
//! by whichever comes last, the close or the last call inside ([`Entries`]):
//! one atomic add and one subtract per call, no lock, no allocation. Each
//! entry also leaves its slot's name ([`Slot`]) in the object, one pointer
//! store, so that a close that finds another call inside reports the breach
//! naming both calls (L17, see [`consumer_breaches`] and [`reported_breach`]). A call made *after* the close completed (L19) finds
//! freed memory; nothing in the object can guard against that.

use core::ffi::c_void;
use core::mem::offset_of;
use core::sync::atomic::AtomicPtr;

pub use super::dispatch::Slot;

use crate::abi::{
    NdkFnCloseCompletion, NdkFnConnectEventCallback, NdkFnDisconnectEventCallback,
    NdkFnRequestCompletion, NdkObjectHeader, NdkObjectHeaderReservedBlock, NdkObjectType,
    NdkVersion, NtStatus, STATUS_INSUFFICIENT_RESOURCES, STATUS_PENDING, STATUS_SUCCESS,
};
use crate::kernel::sync::atomic::{AtomicBool, Ordering};
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::ring::Ring;

/// What the provider knows of every object type, beyond its dispatch table
/// (which gives its `NDK_OBJECT_TYPE`, `Table::TYPE`).
pub trait Kind: super::dispatch::Table + Send + Sync + Sized + 'static {
    /// Starts the close: flushes, cancels and stops what the object owns
    /// (L20). May take holds that are released when that work finishes.
    fn begin_close(object: &Object<Self>) {
        let _ = object;
    }
    /// Runs once when the close has completed, before the antecedents are
    /// released (breaks reference cycles with the RNIC).
    fn finish_close(object: &Object<Self>) {
        let _ = object;
    }
}

/// A consumer callback deferred by the serializer. The fields are the
/// callback and the arguments it is called with.
#[derive(Clone, Copy)]
#[expect(missing_docs, reason = "the fields are the C callback's arguments")]
pub enum Event {
    /// `NDK_FN_REQUEST_COMPLETION`, or an SRQ notification (same signature).
    Request {
        callback: NdkFnRequestCompletion,
        context: usize,
        status: NtStatus,
    },
    /// `NDK_FN_DISCONNECT_EVENT_CALLBACK`.
    Disconnect {
        callback: NdkFnDisconnectEventCallback,
        context: usize,
    },
    /// `NDK_FN_CONNECT_EVENT_CALLBACK` with the new connector.
    Connect {
        callback: NdkFnConnectEventCallback,
        context: usize,
        connector: usize,
    },
}

impl Event {
    /// Calls the consumer.
    ///
    /// Every variant holds a callback and context the consumer gave for
    /// exactly this call; the NDK contract makes them callable at up to
    /// DISPATCH_LEVEL from any thread (I3), and the caller holds no provider
    /// lock (I4).
    fn call(self, object_type: crate::abi::NdkObjectType, object: usize) {
        let started = super::checked::callback_starts();
        let callback = match self {
            Self::Request {
                callback,
                context,
                status,
            } => {
                // SAFETY: see above.
                unsafe { callback(context as *mut c_void, status) };
                &Slot("the request completion (or SRQ notification)")
            }
            Self::Disconnect { callback, context } => {
                // SAFETY: see above.
                unsafe { callback(context as *mut c_void) };
                &Slot("the disconnect event callback")
            }
            Self::Connect {
                callback,
                context,
                connector,
            } => {
                let connector = connector as *mut crate::abi::NdkConnector;
                // SAFETY: see above; `connector` is a live object handed out
                // with this event.
                unsafe { callback(context as *mut c_void, connector) };
                &Slot("the connect event callback")
            }
        };
        // I3, in checked mode: reported after the callback returned.
        super::checked::callback_returned(started, callback, object_type, object);
    }
}

/// Room for callbacks queued behind a running one. An object has a bounded
/// number of requests that can complete asynchronously (a connector: its
/// connect, accept, disconnect, the disconnect indication), and a listener
/// hands over at most `rnic::cm::BACKLOG` requests not yet answered, so this
/// holds every callback that can be due at once. (Were it ever full, `deliver`
/// would call the consumer at once on the calling thread rather than lose a
/// completion; the bound keeps that from happening.)
const SERIAL_CAPACITY: usize = crate::rnic::cm::BACKLOG * 2;

struct Serial {
    running: bool,
    queue: Ring<Event>,
}

struct Life {
    open: bool,
    holds: usize,
    close: Option<(NdkFnCloseCompletion, usize)>,
    pending: bool,
}

/// Something that can be held open by a successor (rule L24).
pub trait Holder: Send + Sync {
    /// Adds a hold.
    fn hold(&self);
    /// Drops a hold; the last one after close completes the close.
    fn release(&self);
}

/// Antecedents of one object (adapter, PD, CQs, SRQ, listener, endpoint).
pub type Parents = [Option<Arc<dyn Holder>>; 4];

/// An NDK object: the C shape first, then the provider's state.
///
/// # Invariants
/// * Every `Object` lives in an `Arc` created by [`Object::create`].
/// * While the consumer may use the object (from hand-out until the close
///   completes), one strong count belongs to the consumer's pointer.
#[repr(C)]
pub struct Object<T: Kind> {
    header: NdkObjectHeader,
    dispatch: *const c_void,
    tag: u64,
    entries: Entries,
    /// The slot of the last call that entered (not the close's): named by a
    /// breach report (L17). A plain core atomic, as it is no part of the
    /// enter / close protocol: a diagnostic, read when a close finds another
    /// call inside.
    inside: AtomicPtr<Slot>,
    life: SpinLock<Life>,
    finished: AtomicBool,
    serial: SpinLock<Serial>,
    parents: Parents,
    /// The object's own allocation, as a pointer with the whole `Arc`'s
    /// provenance: new strong references and the consumer's pointer are made
    /// from it, never from a `&self` (whose provenance covers only the
    /// object, not the `Arc`'s counts in front of it — Miri's Stacked Borrows
    /// check, `scripts/miri.sh`).
    me: Weak<Self>,
    /// The provider's state of the object.
    pub inner: T,
}

// The NDK shape is the first 0x30 bytes, as every NDK object struct (§3.8).
const _: () = assert!(offset_of!(Object<crate::provider::cq::Cq>, tag) == 0x30);

/// A tag no other memory is likely to hold at offset 0x30, per type.
const fn tag_of(kind: NdkObjectType) -> u64 {
    0x5346_4E44_4B00_0000 | kind.0 as u64
}

// SAFETY:
// - `dispatch` points to an immutable `static` table and the header holds
//   plain values the provider never writes after creation (L3), so sharing
//   them across threads is sound;
// - everything mutable is behind a `SpinLock`, and `T` itself is `Send + Sync`.
unsafe impl<T: Kind> Send for Object<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Kind> Sync for Object<T> {}

impl<T: Kind> Object<T> {
    /// Builds an object with `inner` whose one antecedent is `parent` (L24),
    /// at the parent's negotiated version.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES` when memory runs out.
    pub fn create_under<P: Kind>(parent: &Object<P>, inner: T) -> Result<Arc<Self>, NtStatus> {
        let hold: Arc<dyn Holder> = parent.arc();
        Self::create(
            parent.header().version,
            inner,
            [Some(hold), None, None, None],
        )
        .ok_or(STATUS_INSUFFICIENT_RESOURCES)
    }

    /// Builds an object with `inner`, held open by `parents` (each gets a
    /// hold now, released when this object's close completes).
    ///
    /// # Errors
    /// `None` when memory runs out.
    pub fn create(version: NdkVersion, inner: T, parents: Parents) -> Option<Arc<Self>> {
        if crate::rnic::fault::hit(crate::rnic::fault::Kind::Create) {
            return None; // fault injection: as out of memory (L9)
        }
        if crate::kernel::pool::low() {
            // L9: the pool refused and the emergency reserve is filling;
            // refuse before allocating (`kernel::reserve`).
            return None;
        }
        for parent in parents.iter().flatten() {
            parent.hold();
        }
        let queue = Ring::new(SERIAL_CAPACITY);
        let Some(queue) = queue else {
            for parent in parents.iter().flatten() {
                parent.release();
            }
            return None;
        };
        LIVE.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let object = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            header: NdkObjectHeader {
                version,
                object_type: T::TYPE,
                // L2: all-zero reserved block; never written afterwards (L3).
                ndk_reserved: NdkObjectHeaderReservedBlock {
                    rf: [core::ptr::null_mut(); 4],
                },
            },
            dispatch: T::dispatch(),
            tag: tag_of(T::TYPE),
            entries: Entries::new(),
            inside: AtomicPtr::new(core::ptr::null_mut()),
            life: SpinLock::new(Life {
                open: true,
                holds: 0,
                close: None,
                pending: false,
            }),
            finished: AtomicBool::new(false),
            serial: SpinLock::new(Serial {
                running: false,
                queue,
            }),
            parents,
            inner,
        });
        // INVARIANT: the consumer's strong reference, from birth; given back
        // by `finish` when the close completes. Objects the consumer never
        // sees (a refused passive connector) are closed silently, which gives
        // it back the same way.
        let _ = Arc::into_raw(Arc::clone(&object));
        Some(object)
    }

    /// Enters the object behind a consumer's pointer, if it is one of ours
    /// of type `T`, for the call of `slot` (which a breach report names): the
    /// guard keeps it alive until dropped, whatever closes it meanwhile.
    ///
    /// # Safety
    /// `ptr` is null or the [`as_ptr`](Self::as_ptr) of an object (of any
    /// type) and its close has not completed (the consumer's contract, L19).
    pub unsafe fn from_ptr<'a>(ptr: *const c_void, slot: &'static Slot) -> Option<Entered<'a, T>> {
        // SAFETY: the caller's contract.
        let entered = unsafe { Self::enter(ptr) }?;
        let slot: *const Slot = slot;
        entered
            .inside
            .store(slot.cast_mut(), core::sync::atomic::Ordering::Relaxed);
        Some(entered)
    }

    /// Enters without leaving a slot's name (the close, which names itself).
    ///
    /// # Safety
    /// As [`from_ptr`](Self::from_ptr).
    unsafe fn enter<'a>(ptr: *const c_void) -> Option<Entered<'a, T>> {
        // SAFETY: the caller's contract.
        let object = unsafe { Self::peek(ptr) }?;
        object.entries.enter();
        Some(Entered { object })
    }

    /// The object behind a consumer's pointer, not entered.
    ///
    /// # Safety
    /// As [`from_ptr`](Self::from_ptr).
    unsafe fn peek<'a>(ptr: *const c_void) -> Option<&'a Self> {
        if ptr.is_null() || !ptr.cast::<u64>().is_aligned() {
            return None;
        }
        // SAFETY: by the caller's contract `ptr` starts a live `Object` of some
        // type; every `Object` starts with the same 0x38 bytes (header,
        // dispatch, tag), so reading the header and tag through `Object<T>`'s
        // prefix is reading initialized memory of that prefix.
        let shell = unsafe { &*ptr.cast::<Shell>() };
        if shell.header.object_type != T::TYPE || shell.tag != tag_of(T::TYPE) {
            return None;
        }
        // SAFETY: header type and tag say it is an `Object<T>` (the invariant
        // of `create`), live per the caller's contract.
        Some(unsafe { &*ptr.cast::<Self>() })
    }

    /// Starts a close the RNIC object may finish later (a `Kind::begin_close`
    /// of L20/L21): holds this object, runs `close` (`true` when the RNIC's
    /// close finished inline) and then gives the hold back; otherwise the
    /// RNIC's end of the close gives it back, and the close completes then.
    pub fn hold_through(&self, close: impl FnOnce() -> bool) {
        self.hold();
        if close() {
            self.release();
        }
    }

    /// A new strong reference to this object.
    pub fn arc(&self) -> Arc<Self> {
        let ptr = self.origin();
        // SAFETY: every `Object` lives in an `Arc` (type invariant) and `self`
        // borrows it, so the allocation is live and has a strong count >= 1.
        unsafe { Arc::increment_strong_count(ptr) };
        // SAFETY: the count was incremented just above for this new `Arc`.
        unsafe { Arc::from_raw(ptr) }
    }

    /// The header (negotiated version, type).
    pub const fn header(&self) -> &NdkObjectHeader {
        &self.header
    }

    /// The object's pointer as the consumer knows it.
    pub fn as_ptr(&self) -> *mut c_void {
        self.origin().cast_mut().cast()
    }

    /// This object's address with the provenance of its whole allocation
    /// (see `me`).
    fn origin(&self) -> *const Self {
        self.me.as_ptr()
    }

    /// Whether the close has completed.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Whether the consumer has not started closing the object.
    pub fn is_open(&self) -> bool {
        self.life.lock().open
    }

    /// Closes the object (NdkCloseObject): `STATUS_SUCCESS` when done now,
    /// `STATUS_PENDING` when `callback` will run once it is done (L18). A
    /// second close of the same object is ignored (L19).
    pub fn close(&self, callback: Option<NdkFnCloseCompletion>, context: usize) -> NtStatus {
        if !self.is_open() {
            return STATUS_SUCCESS;
        }

        // Keep the object alive through the close, whatever the callbacks do.
        let this = self.arc();
        T::begin_close(&this);
        let done_now = {
            let mut life = this.life.lock();
            if !life.open {
                return STATUS_SUCCESS;
            }
            life.open = false;
            if life.holds == 0 {
                true
            } else {
                life.close = callback.map(|cb| (cb, context));
                life.pending = true;
                false
            }
        };
        if done_now {
            this.finish(None);
            STATUS_SUCCESS
        } else {
            STATUS_PENDING
        }
    }

    /// The consumer's NdkCloseObject (entered by [`close_object`]): as
    /// [`close`](Self::close), and a close while another call of the
    /// consumer's is inside the object is reported (L17) — unless it may come
    /// from inside a completion that call initiated, which L15 allows: the
    /// object's callbacks are being delivered.
    fn consumer_close(
        &self,
        callback: Option<NdkFnCloseCompletion>,
        context: usize,
        close: &'static Slot,
    ) -> NtStatus {
        if self.entries.calls() > 1 && !self.serial.lock().running {
            let inside = self.inside.load(core::sync::atomic::Ordering::Relaxed);
            super::checked::report(Breach::L17, T::TYPE, self.as_ptr() as usize, close, inside);
        }
        super::fault::close(self, callback, context)
    }

    /// Closes without a consumer close call: the adapter's teardown and
    /// provider-owned objects (a refused passive connector). Never calls back.
    pub fn close_silently(&self) {
        let _ = self.close(None, 0);
    }

    /// Completes the close: the close completion (if pending), then the
    /// antecedents' holds, then the consumer's reference.
    fn finish(&self, completion: Option<(NdkFnCloseCompletion, usize)>) {
        T::finish_close(self);
        if let Some((callback, context)) = completion {
            // SAFETY: the consumer's close completion and its context, given
            // for this one call; no provider lock is held (I4); the object's
            // last callback (L22).
            let started = super::checked::callback_starts();
            // SAFETY: as above.
            unsafe { callback(context as *mut c_void) };
            let at = self.as_ptr() as usize;
            super::checked::callback_returned(started, &Slot("the close completion"), T::TYPE, at);
        }
        for parent in self.parents.iter().flatten() {
            parent.release();
        }
        self.finished.store(true, Ordering::Release);
        if self.entries.release_owner() {
            // SAFETY: no call is inside and the close is done, so this is the
            // last user of the consumer's reference (see `give_back`).
            unsafe { Self::give_back(self.origin()) };
        }
    }

    /// Drops the consumer's strong reference.
    ///
    /// # Safety
    /// Called exactly once per object: by whichever of the close (`finish`)
    /// and the last entered call ([`Entered`]'s drop) ends the object's
    /// [`Entries`] — `release_owner` and `exit` return `true` to exactly one
    /// of them. `create` took that reference for every object.
    ///
    /// A raw pointer (from [`origin`](Self::origin)), not `&self`: when this
    /// is the last strong reference the object is freed here, and no
    /// reference to it may be live as this function's argument then.
    unsafe fn give_back(ptr: *const Self) {
        // SAFETY: the caller's contract: the consumer's reference, given back
        // once.
        drop(unsafe { Arc::from_raw(ptr) });
    }

    /// Delivers a callback, serialized with the object's other callbacks.
    pub fn deliver(&self, event: Event) {
        let this = self.arc();
        let at = (T::TYPE, self.as_ptr() as usize);
        {
            let mut serial = this.serial.lock();
            if serial.running {
                if serial.queue.push(event).is_ok() {
                    return;
                }
                // Full: waiting for the running deliverer is not possible at
                // DISPATCH_LEVEL, and dropping the callback would lose a
                // completion; deliver it here. The queue is sized above what
                // an object can have outstanding, so this does not happen.
                drop(serial);
                event.call(at.0, at.1);
                return;
            }
            serial.running = true;
            if super::fault::hit_delay() && serial.queue.push(event).is_ok() {
                drop(serial);
                this.hold();
                super::fault::later(DrainLater(this)); // fault injection: I3
                return;
            }
        }
        this.hold();
        event.call(at.0, at.1);
        this.drain();
    }

    /// Calls the callbacks queued behind a running one, then stops running
    /// and gives back the deliverer's hold.
    fn drain(&self) {
        let at = (T::TYPE, self.as_ptr() as usize);
        loop {
            let next = {
                let mut serial = self.serial.lock();
                let next = serial.queue.pop();
                if next.is_none() {
                    serial.running = false;
                }
                next
            };
            match next {
                Some(event) => event.call(at.0, at.1),
                None => break,
            }
        }
        self.release();
    }
}

/// Callbacks of an object delivered later (fault injection, `Delay`).
struct DrainLater<T: Kind>(Arc<Object<T>>);

impl<T: Kind> crate::kernel::deferred::DeferredRoutine for DrainLater<T> {
    fn run(&self) {
        self.0.drain();
    }
}

impl<T: Kind> Drop for Object<T> {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
    }
}

/// `NdkCloseObject`, the first slot of every table but the adapter's, for
/// objects of type `T` (L18, L19; L17 breaches reported, naming `slot`): the
/// body of every table's close thunk (`dispatch::ndk_table!`).
///
/// # Safety
/// Called by the consumer through `T`'s dispatch table: `object` is its
/// object of type `T` whose close it has not started (L19); anything else
/// that is not one of ours of type `T` is ignored.
pub unsafe fn close_object<T: Kind>(
    object: *mut crate::abi::NdkObjectHeader,
    callback: Option<NdkFnCloseCompletion>,
    context: *mut c_void,
    slot: &'static Slot,
) -> NtStatus {
    // SAFETY: the caller's contract.
    match unsafe { Object::<T>::enter(object.cast()) } {
        Some(entered) => entered.consumer_close(callback, context as usize, slot),
        None => STATUS_SUCCESS,
    }
}

/// The consumer's close of an object whose type has no close slot (the
/// adapter, closed by NDIS's `CloseNdkAdapterHandler` or host mode's
/// `SoftNdkCloseAdapter`, named by `slot`): as [`close_object`], a call of
/// the consumer's still inside is reported (L17); the object, kept alive, is
/// returned for the caller to wait on. `None` for anything that is not one
/// of ours of type `T`.
///
/// # Safety
/// As [`close_object`].
pub unsafe fn close_slotless<T: Kind>(
    object: *const c_void,
    slot: &'static Slot,
) -> Option<Arc<Object<T>>> {
    // SAFETY: the caller's contract.
    let entered = unsafe { Object::<T>::enter(object) }?;
    let _ = entered.consumer_close(None, 0, slot);
    Some(entered.arc())
}

/// A call inside an object: keeps the object's memory alive until dropped
/// (see the module docs, "Entering an object").
#[must_use = "the object may be freed as soon as the guard is dropped"]
pub struct Entered<'a, T: Kind> {
    object: &'a Object<T>,
}

impl<T: Kind> core::ops::Deref for Entered<'_, T> {
    type Target = Object<T>;
    fn deref(&self) -> &Object<T> {
        self.object
    }
}

impl<T: Kind> Drop for Entered<'_, T> {
    fn drop(&mut self) {
        if self.object.entries.exit() {
            // SAFETY: the close completed while this call was inside, and
            // this was the last call: it gives the reference back (the
            // contract of `give_back`).
            unsafe { Object::give_back(self.object.origin()) };
        }
    }
}

/// The enter / close protocol of an object, in one word: bit 0 says the
/// consumer's reference is still held (the close has not completed), the top
/// bit that it has been given back, the rest counts calls inside. The
/// reference is given back by the party that brings the word to zero and
/// then marks it given back: the close when no call is inside, else the last
/// call to leave. A call that enters after that (a consumer's call after the
/// close completed, L19, on memory the provider still holds) never gives it
/// back a second time. Checked by the loom model in `provider::entries_loom`.
pub struct Entries(crate::kernel::sync::atomic::AtomicUsize);

impl Entries {
    const OWNER: usize = 1;
    const CALL: usize = 2;
    const GIVEN_BACK: usize = 1 << (usize::BITS - 1);

    /// The consumer's reference held, no call inside.
    pub fn new() -> Self {
        Self(crate::kernel::sync::atomic::AtomicUsize::new(Self::OWNER))
    }

    /// A call enters.
    pub fn enter(&self) {
        self.0.fetch_add(Self::CALL, Ordering::Acquire);
    }

    /// A call leaves: `true` when it must give the consumer's reference back
    /// (it was the last call, after the close completed).
    pub fn exit(&self) -> bool {
        self.0.fetch_sub(Self::CALL, Ordering::AcqRel) == Self::CALL && self.claim()
    }

    /// The close completed: `true` when no call is inside, so the closer
    /// gives the reference back; otherwise the last call to leave does.
    pub fn release_owner(&self) -> bool {
        self.0.fetch_sub(Self::OWNER, Ordering::AcqRel) == Self::OWNER && self.claim()
    }

    /// The word reached zero: marks the reference given back, unless a call
    /// entered meanwhile (then its exit claims it).
    fn claim(&self) -> bool {
        self.0
            .compare_exchange(0, Self::GIVEN_BACK, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// How many calls are inside now (a snapshot, for breach reports).
    pub fn calls(&self) -> usize {
        (self.0.load(Ordering::Relaxed) & !Self::GIVEN_BACK) / Self::CALL
    }
}

impl Default for Entries {
    fn default() -> Self {
        Self::new()
    }
}

pub use super::checked::{Breach, Report};

/// The newest L17 report kept about the object at `object` (the consumer's
/// pointer), if one of the last few is about it.
pub fn reported_breach(object: *const c_void) -> Option<Report> {
    super::checked::reported(object, Breach::L17)
}

/// How many times the consumer broke `breach` so far (every adapter).
pub fn consumer_breaches(breach: Breach) -> usize {
    super::checked::breaches(breach)
}

/// Provider objects whose memory is still allocated, in this driver instance
/// (or host process): a leak detector for tests and diagnostics.
/// (A plain core atomic: a static, and not part of any modelled protocol.)
static LIVE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many provider objects exist right now (every type, every adapter).
pub fn live_objects() -> usize {
    LIVE.load(core::sync::atomic::Ordering::Relaxed)
}

impl<T: Kind> Holder for Object<T> {
    fn hold(&self) {
        self.life.lock().holds += 1;
    }

    fn release(&self) {
        let completion = {
            let mut life = self.life.lock();
            life.holds = life.holds.saturating_sub(1);
            if life.open || life.holds != 0 || !life.pending {
                return;
            }
            life.pending = false;
            life.close.take()
        };
        // Keep the memory alive until `finish` is done with it.
        let this = self.arc();
        this.finish(completion);
    }
}

/// The common prefix of every `Object<T>`, for the type check.
#[repr(C)]
struct Shell {
    header: NdkObjectHeader,
    dispatch: *const c_void,
    tag: u64,
}

const _: () = assert!(offset_of!(Shell, tag) == 0x30);

/// Loom models of the enter / close protocol ([`Entries`]): the consumer's
/// reference is given back exactly once, and never while a call that entered
/// before the close is still inside.
#[cfg(test)]
#[cfg(loom)]
mod entries_loom {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use loom::thread;

    use super::Entries;

    /// The object's memory: `freed` once the reference is given back.
    struct Model {
        entries: Entries,
        freed: AtomicBool,
        gives: AtomicUsize,
    }

    impl Model {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                entries: Entries::new(),
                freed: AtomicBool::new(false),
                gives: AtomicUsize::new(0),
            })
        }

        fn give_back(&self) {
            self.gives.fetch_add(1, Ordering::Relaxed);
            self.freed.store(true, Ordering::Release);
        }

        /// A call already inside uses the object, then leaves.
        fn leave(&self) {
            assert!(!self.freed.load(Ordering::Acquire), "freed under a call");
            if self.entries.exit() {
                self.give_back();
            }
        }

        fn close(&self) {
            if self.entries.release_owner() {
                self.give_back();
            }
        }
    }

    /// L17: the close races `calls` calls already inside the object; the
    /// object is given back once, after the last call left.
    fn close_racing_calls_inside(calls: usize) {
        loom::model(move || {
            let m = Model::new();
            for _ in 0..calls {
                m.entries.enter();
            }
            let calls: Vec<_> = (0..calls)
                .map(|_| {
                    let m = Arc::clone(&m);
                    thread::spawn(move || m.leave())
                })
                .collect();
            m.close();
            for call in calls {
                call.join().unwrap();
            }
            assert_eq!(m.gives.load(Ordering::Relaxed), 1);
        });
    }

    #[test]
    fn loom_close_racing_a_call_inside_frees_once_after_it_leaves_rule_l17() {
        close_racing_calls_inside(1);
    }

    #[test]
    fn loom_close_racing_two_calls_inside_frees_once_rule_l17() {
        close_racing_calls_inside(2);
    }

    #[test]
    fn loom_call_entering_during_the_close_never_frees_twice_rule_l19() {
        loom::model(|| {
            let m = Model::new();
            let call = {
                let m = Arc::clone(&m);
                thread::spawn(move || {
                    m.entries.enter();
                    if m.entries.exit() {
                        m.give_back();
                    }
                })
            };
            m.close();
            call.join().unwrap();
            assert_eq!(m.gives.load(Ordering::Relaxed), 1);
            assert_eq!(m.entries.calls(), 0);
        });
    }
}
