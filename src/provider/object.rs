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
//! antecedents' holds released (L26).
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

use core::ffi::c_void;
use core::mem::offset_of;

use crate::abi::{
    NdkFnCloseCompletion, NdkFnConnectEventCallback, NdkFnDisconnectEventCallback,
    NdkFnRequestCompletion, NdkObjectHeader, NdkObjectHeaderReservedBlock, NdkObjectType,
    NdkVersion, NtStatus, STATUS_PENDING, STATUS_SUCCESS,
};
use crate::kernel::sync::atomic::{AtomicBool, Ordering};
use crate::kernel::sync::{Arc, SpinLock};
use crate::rnic::ring::Ring;

/// What the provider knows of every object type.
pub trait Kind: Send + Sync + Sized + 'static {
    /// `NDK_OBJECT_TYPE` of the header.
    const TYPE: NdkObjectType;
    /// The dispatch table (a `static`).
    fn dispatch() -> *const c_void;
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
    fn call(self) {
        match self {
            Self::Request {
                callback,
                context,
                status,
            } => {
                // SAFETY: see above.
                unsafe { callback(context as *mut c_void, status) };
            }
            Self::Disconnect { callback, context } => {
                // SAFETY: see above.
                unsafe { callback(context as *mut c_void) };
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
            }
        }
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
    life: SpinLock<Life>,
    finished: AtomicBool,
    serial: SpinLock<Serial>,
    parents: Parents,
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
    /// Builds an object with `inner`, held open by `parents` (each gets a
    /// hold now, released when this object's close completes).
    ///
    /// # Errors
    /// `None` when memory runs out.
    pub fn create(version: NdkVersion, inner: T, parents: Parents) -> Option<Arc<Self>> {
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
        let object = Arc::new(Self {
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

    /// The object behind a consumer's pointer, if it is one of ours of type `T`.
    ///
    /// # Safety
    /// `ptr` is null or the [`as_ptr`](Self::as_ptr) of an object (of any
    /// type) and its close has not completed (the consumer's contract, L19).
    pub unsafe fn from_ptr<'a>(ptr: *const c_void) -> Option<&'a Self> {
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

    /// A new strong reference to this object.
    pub fn arc(&self) -> Arc<Self> {
        let ptr: *const Self = self;
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
        let ptr: *const Self = self;
        ptr.cast_mut().cast()
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
            unsafe { callback(context as *mut c_void) };
        }
        for parent in self.parents.iter().flatten() {
            parent.release();
        }
        self.finished.store(true, Ordering::Release);
        let ptr: *const Self = self;
        // SAFETY: the consumer's strong reference taken by `hand_out`, given
        // back exactly once: `finish` runs once, when `open` went false and
        // the holds reached zero; `create` took that reference for every object.
        drop(unsafe { Arc::from_raw(ptr) });
    }

    /// Delivers a callback, serialized with the object's other callbacks.
    pub fn deliver(&self, event: Event) {
        let this = self.arc();
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
                event.call();
                return;
            }
            serial.running = true;
        }
        this.hold();
        event.call();
        loop {
            let next = {
                let mut serial = this.serial.lock();
                let next = serial.queue.pop();
                if next.is_none() {
                    serial.running = false;
                }
                next
            };
            match next {
                Some(event) => event.call(),
                None => break,
            }
        }
        this.release();
    }
}

impl<T: Kind> Drop for Object<T> {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
    }
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
