//! The completion queue (CQ): a ring of [`Completion`]s of fixed depth and the
//! notification state machine of rules C3–C6, E9–E13 and L21–L23.
//!
//! # Shape
//! The completions live in a ring of slots made of atomics, between two
//! position counters: pushers (the engine's runners, a flush) write a slot
//! and then publish it by moving `tail`, pollers read slots and then free
//! them by moving `head` (`Release` stores, `Acquire` loads). Pushers
//! serialize on the `state` lock, which also holds the arm, the error, and
//! the state that serializes the consumer's callbacks; pollers serialize on
//! their own `reader` lock. So a push takes no lock a poll takes: a
//! busy-polling consumer never delays the runner that completes its requests
//! (docs/performance.md), and a poll of an empty CQ takes no lock at all.
//! `resize` takes both (`state`, then `reader`).
//! No operation allocates except [`Cq::new`] and [`Cq::resize`], and `resize`
//! allocates its new ring before it takes a lock (rule I2: the locks are held
//! only for short, bounded work). An atomic mirrors, under `state`, whether
//! the CQ is in error (`is_error`, asked by every post).
//!
//! # Notification
//! A notification becomes *due* when an arm is satisfied: a matching completion
//! is queued while armed (rule C3), `arm` finds a fresh matching completion
//! (rule C4), or a CQ error meets an arm (rule E12). The provider clears the arm
//! and, in the same critical section, either
//! * becomes the *notifying* thread (no callback is running): it drops the lock
//!   and calls [`CqNotify::notify`]; or
//! * defers the notification (a callback is running, on this thread or another):
//!   the notifying thread calls the callback again when the current one returns
//!   (rule C5).
//!
//! The notifying thread loops until nothing is deferred, then goes back to
//! idle; if the CQ was closed meanwhile it calls [`CqNotify::close_complete`]
//! instead (rule L23). No callback is ever made with the lock held (rule I4),
//! so the consumer may arm, poll, post (and so push) and close from inside it.
//!
//! # Choices where the rules leave room
//! * Rule C4, second branch: `arm` does **not** fire when every completion in
//!   the CQ was already there when the last callback was initiated. A consumer
//!   that leaves a backlog on purpose and re-arms is therefore not woken in a
//!   loop; it is woken by the next matching completion. "Fresh" is tracked
//!   precisely: a fresh completion the consumer has already polled does not
//!   count, and for a solicited arm only a fresh *matching* completion counts.
//! * Rule E10: after an overflow or fatal error, [`Cq::poll`] still returns the
//!   completions queued before the error, so that the consumer can account for
//!   the requests that did complete while it tears down (rule E13). Nothing is
//!   queued, and nothing but the error is reported, after it.
//! * A callback counts as running from the moment it is initiated (the
//!   callback state leaves idle under the lock), not from the moment the
//!   consumer's code starts. So a `close` that returns [`CloseState::Pending`] may see that
//!   one callback begin just after it returned; no further callback follows, and
//!   none at all after `close_complete` or after a close that returned
//!   [`CloseState::Done`] (rules L22, L23).
//! * Calls the consumer must not make (rule L19: anything after close, a second
//!   close) stay safe: `arm` after close does nothing, `push` fails with
//!   [`CqError::Closed`], a second `close` returns [`CloseState::Done`] and never
//!   causes a second `close_complete`.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::mem;

use super::types::{Completion, Opcode, WcStatus};
use crate::kernel::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::kernel::sync::{Arc, SpinLock, SpinLockGuard};

/// What satisfies an arm (`NDK_CQ_NOTIFY_ERRORS`, `_ANY`, `_SOLICITED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArmType {
    /// Only a CQ error (overflow, fatal error) satisfies the arm (rule E12).
    Errors,
    /// Every completion, successful or not, satisfies the arm.
    Any,
    /// A solicited completion or one with an error status (rule E9).
    Solicited,
}

impl ArmType {
    /// The arm in force after a second `arm` call made before the first arm was
    /// satisfied (rule C6 table: ANY wins over everything, SOLICITED over
    /// ERRORS).
    #[must_use]
    pub const fn merge(self, second: Self) -> Self {
        match (self, second) {
            (Self::Any, _) | (_, Self::Any) => Self::Any,
            (Self::Errors, Self::Errors) => Self::Errors,
            (Self::Solicited, _) | (_, Self::Solicited) => Self::Solicited,
        }
    }

    /// Whether queuing `completion` satisfies this arm. A CQ error satisfies
    /// every arm (rule E12); that is not a completion and is handled apart.
    #[must_use]
    pub const fn matches(self, completion: &Completion) -> bool {
        match self {
            Self::Any => true,
            // Rule E9: an error completion always satisfies a SOLICITED arm.
            Self::Solicited => completion.solicited || !completion.status.is_success(),
            // Rule E12: an ERRORS arm waits for a CQ error, never a completion.
            Self::Errors => false,
        }
    }
}

/// What one notification reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CqEvent {
    /// A completion that satisfied the arm was queued (`STATUS_SUCCESS`).
    Completion,
    /// The CQ overflowed (rule E10, `STATUS_BUFFER_OVERFLOW`).
    Overflow,
    /// The CQ hit a fatal device error (rule E11, `STATUS_INTERNAL_ERROR`).
    Fatal,
}

/// The consumer's side of a CQ: where notifications go.
pub trait CqNotify: Send + Sync {
    /// The consumer's notification callback. Called with no CQ lock held.
    ///
    /// Never called twice at once, nor from inside itself, for one CQ
    /// (rule C5); may be called on any thread, including from inside a CQ
    /// call (rule I3).
    fn notify(&self, event: CqEvent);

    /// Called once, after `close` returned `CloseState::Pending`, when the
    /// callback that was running has returned.
    fn close_complete(&self);
}

/// Why [`Cq::push`] did not queue a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqError {
    /// The CQ was full: this completion overflowed it and the CQ is now in
    /// error (rule E10). Returned once, by the push that overflowed.
    Overflowed,
    /// The CQ is in error (rules E10, E11): nothing more is queued.
    InError,
    /// The CQ is closed.
    Closed,
}

/// Why [`Cq::resize`] left the CQ unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeError {
    /// The new depth is below the number of completions held (rule K4).
    BelowCount,
    /// The CQ is in error (rule E13).
    InError,
    /// The new ring could not be allocated.
    NoMemory,
    /// The new depth is 0: a CQ holds at least one completion.
    ZeroDepth,
}

/// Why [`Cq::new`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateError {
    /// The depth is 0.
    ZeroDepth,
    /// The ring could not be allocated.
    NoMemory,
}

/// The outcome of [`Cq::close`] (rules L18, L21).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a pending close completes later through `CqNotify::close_complete`"]
pub enum CloseState {
    /// Closed: no callback runs or will run (`STATUS_SUCCESS`).
    Done,
    /// A callback is running; `close_complete` follows once it has returned
    /// (`STATUS_PENDING`, rule L23).
    Pending,
}

/// A CQ error: what put the CQ in its error state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Rule E10.
    Overflow,
    /// Rule E11.
    Fatal,
}

impl Fault {
    const fn event(self) -> CqEvent {
        match self {
            Self::Overflow => CqEvent::Overflow,
            Self::Fatal => CqEvent::Fatal,
        }
    }
}

/// Whether the CQ is in its error state, and whether the error was reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Health {
    /// No error.
    Healthy,
    /// In error (rules E10, E11); not yet reported, because no arm was set.
    Unreported(Fault),
    /// In error and reported through an arm (rule E12: once).
    Reported,
}

/// Who calls the consumer back (rules C5, L23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Callbacks {
    /// No callback is running: the next due notification is called at once.
    Idle,
    /// A thread runs the callback loop ([`Cq::run_callbacks`]); due
    /// notifications are deferred to it.
    Running,
    /// As `Running`, and `close` returned `Pending`: that thread owes
    /// `close_complete` once the callback returns.
    RunningCloseOwed,
}

/// The content of a free slot; never read as a completion.
const FREE_SLOT: Completion = Completion::new(WcStatus::Success, Opcode::Send, 0, 0);

/// Every [`WcStatus`], in declaration order: a slot stores a status as its
/// index here (its discriminant).
const STATUSES: [WcStatus; 9] = [
    WcStatus::Success,
    WcStatus::Cancelled,
    WcStatus::ReceiveTooSmall,
    WcStatus::LengthError,
    WcStatus::LocalAccessError,
    WcStatus::RemoteAccessError,
    WcStatus::RemoteOperationError,
    WcStatus::InvalidRequest,
    WcStatus::InternalError,
];

/// Every [`Opcode`], in declaration order, as [`STATUSES`].
const OPCODES: [Opcode; 8] = [
    Opcode::Receive,
    Opcode::ReceiveAndInvalidate,
    Opcode::Send,
    Opcode::FastRegister,
    Opcode::Bind,
    Opcode::Invalidate,
    Opcode::Read,
    Opcode::Write,
];

/// One place of the ring: a completion held in atomics, so that the pusher
/// writes it and the poller reads it without sharing a lock. The fields are
/// accessed `Relaxed`; what orders them is the position counters (see
/// [`Cq`]): a slot is written only while it is free (`tail - head <
/// capacity`, the poller's `head` store is `Release` after reading it) and
/// read only once published (the pusher's `tail` store is `Release` after
/// writing it).
struct Slot {
    /// Status (bits 0–7), opcode (8–15), solicited (16), bytes (32–63).
    meta: AtomicU64,
    invalidated_key: AtomicU32,
    qp_context: AtomicUsize,
    request_context: AtomicUsize,
}

impl Slot {
    fn free() -> Self {
        let slot = Self {
            meta: AtomicU64::new(0),
            invalidated_key: AtomicU32::new(0),
            qp_context: AtomicUsize::new(0),
            request_context: AtomicUsize::new(0),
        };
        slot.store(&FREE_SLOT);
        slot
    }

    fn store(&self, c: &Completion) {
        let meta = (c.status as u64)
            | ((c.opcode as u64) << 8)
            | (u64::from(c.solicited) << 16)
            | (u64::from(c.bytes) << 32);
        self.meta.store(meta, Ordering::Relaxed);
        self.invalidated_key
            .store(c.invalidated_key, Ordering::Relaxed);
        self.qp_context.store(c.qp_context, Ordering::Relaxed);
        self.request_context
            .store(c.request_context, Ordering::Relaxed);
    }

    fn load(&self) -> Completion {
        let meta = self.meta.load(Ordering::Relaxed);
        let status = STATUSES
            .get(usize::from(meta.to_le_bytes()[0]))
            .copied()
            .unwrap_or(WcStatus::InternalError);
        let opcode = OPCODES
            .get(usize::from(meta.to_le_bytes()[1]))
            .copied()
            .unwrap_or(Opcode::Receive);
        let mut c = Completion::new(
            status,
            opcode,
            self.qp_context.load(Ordering::Relaxed),
            self.request_context.load(Ordering::Relaxed),
        );
        c.solicited = meta & (1 << 16) != 0;
        c.bytes = u32::try_from(meta >> 32).unwrap_or(u32::MAX);
        c.invalidated_key = self.invalidated_key.load(Ordering::Relaxed);
        c
    }
}

/// The fixed places of a CQ's completions. Position `p` (a count of pushes
/// since creation, wrapping) lives in slot `p mod capacity`.
///
/// # Invariants
/// `slots` is never empty and never changes length: no method allocates.
struct Ring {
    slots: Box<[Slot]>,
}

impl Ring {
    /// A ring of `depth` free slots, or `None` if they cannot be allocated.
    fn try_new(depth: u32) -> Option<Arc<Self>> {
        let capacity = usize::try_from(depth).ok().filter(|&c| c > 0)?;
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).ok()?;
        // PANIC: none. This fills the capacity reserved just above, so it
        // neither grows nor allocates.
        slots.resize_with(capacity, Slot::free);
        Some(Arc::new(Self {
            slots: slots.into_boxed_slice(),
        }))
    }

    const fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The slot of position `pos`.
    fn slot(&self, pos: usize) -> Option<&Slot> {
        self.slots.get(pos.checked_rem(self.slots.len())?)
    }
}

/// Everything mutable about a CQ but the positions, guarded by
/// [`Cq::state`]: pushers, `arm`, `close`, `fail` and `resize` take it; a
/// poll never does.
///
/// # Invariants
/// * `fresh_from` and `solicited_at` are positions at most `tail`, and
///   `solicited_at >= fresh_from` (wrapping order).
/// * `arm.is_none()` once `closed`, and unless `health` is `Healthy`.
/// * `deferred_completions == 0 && deferred_fault.is_none()` while `callbacks`
///   is `Idle`, and once `closed`.
/// * `callbacks == RunningCloseOwed` implies `closed`.
struct State {
    /// The pushers' handle on the ring (the poller's is [`Cq::reader`]).
    ring: Arc<Ring>,
    depth: u32,
    /// The arm in force (rules C3, C6); cleared when satisfied.
    arm: Option<ArmType>,
    /// The position of the first entry queued since the last callback was
    /// initiated (rule C4): entries from here on are *fresh*.
    fresh_from: usize,
    /// The position of the newest fresh entry that satisfies a SOLICITED arm
    /// (rules C4, E9).
    solicited_at: Option<usize>,
    /// The CQ error, once one happened (rules E10–E12).
    health: Health,
    /// Whether a thread runs the callback loop (rule C5).
    callbacks: Callbacks,
    /// Satisfied arms whose callback waits for the running one (rule C5).
    deferred_completions: u32,
    /// An error notification waiting for the running callback (rule C5).
    deferred_fault: Option<CqEvent>,
    /// `close` was called (rules L21–L23).
    closed: bool,
}

impl State {
    /// Clears the arm because it was satisfied, and starts a new "since the last
    /// callback" period for rule C4 at position `tail`: the callback now due
    /// is initiated.
    const fn satisfy_arm(&mut self, tail: usize) {
        self.arm = None;
        self.fresh_from = tail;
        self.solicited_at = None;
    }

    /// Records that `completion` was just queued at position `pos`, for rule
    /// C4.
    const fn note_queued(&mut self, completion: &Completion, pos: usize) {
        if ArmType::Solicited.matches(completion) {
            self.solicited_at = Some(pos);
        }
    }

    /// Rule C4: whether a completion queued since the last callback was
    /// initiated, and still in the CQ (not polled: at or after `head`),
    /// satisfies `arm`. Positions are compared by their distance back from
    /// `tail`, which no wrap disturbs.
    fn has_fresh_match(&self, arm: ArmType, head: usize, tail: usize) -> bool {
        // Entries still queued and fresh: those at distance 1..=this from tail.
        let back = tail
            .wrapping_sub(head)
            .min(tail.wrapping_sub(self.fresh_from));
        match arm {
            ArmType::Any => back > 0,
            ArmType::Solicited => self
                .solicited_at
                .is_some_and(|pos| tail.wrapping_sub(pos) <= back),
            ArmType::Errors => false,
        }
    }

    /// Queues a notification behind the running callback (rule C5).
    fn defer(&mut self, event: CqEvent) {
        match event {
            CqEvent::Completion => {
                // One callback per satisfied arm (rule C3); saturation would need
                // four billion arms inside one callback.
                self.deferred_completions = self.deferred_completions.saturating_add(1);
            }
            CqEvent::Overflow | CqEvent::Fatal => self.deferred_fault = Some(event),
        }
    }

    /// The next deferred notification, in the order they became due: every
    /// completion notification precedes the error, after which no completion
    /// is reported (rule E10).
    fn take_deferred(&mut self) -> Option<CqEvent> {
        if let Some(left) = self.deferred_completions.checked_sub(1) {
            self.deferred_completions = left;
            return Some(CqEvent::Completion);
        }
        self.deferred_fault.take()
    }
}

/// A completion queue.
///
/// Shared as `Arc<Cq>` between the posting threads, the engine that pushes
/// completions and the consumer that polls and arms it.
pub struct Cq {
    state: SpinLock<State>,
    /// The pollers' handle on the ring: the lock only serializes pollers
    /// (and `resize`, which takes it after `state`); no pusher takes it.
    reader: SpinLock<Arc<Ring>>,
    notify: Arc<dyn CqNotify>,
    /// The position of the oldest queued entry: written only by a poller
    /// holding `reader` (`Release`, after reading the entries it passes), read
    /// by pushers (`Acquire`) to see which slots are free.
    head: AtomicUsize,
    /// The position after the newest queued entry: written only by a pusher
    /// holding `state` (`Release`, after writing the entry), read by pollers
    /// (`Acquire`) to see which entries are published. `tail - head` is the
    /// number queued, at most the capacity.
    tail: AtomicUsize,
    /// Set, under the lock, when `health` leaves `Healthy` (it never comes
    /// back): [`Cq::is_error`], asked on every post (E13), reads it without
    /// the lock.
    failed: AtomicBool,
}

// The CQ is shared between threads (rule I6).
const _: fn() = || {
    const fn shared<T: Send + Sync>() {}
    shared::<Cq>();
};

impl fmt::Debug for Cq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cq").finish_non_exhaustive()
    }
}

impl Cq {
    /// Creates an empty, unarmed CQ of `depth` entries whose notifications go
    /// to `notify`. The whole ring is allocated here.
    ///
    /// # Errors
    /// * [`CreateError::ZeroDepth`] when `depth` is 0.
    /// * [`CreateError::NoMemory`] when the ring cannot be allocated.
    pub fn new(depth: u32, notify: Arc<dyn CqNotify>) -> Result<Self, CreateError> {
        if depth == 0 {
            return Err(CreateError::ZeroDepth);
        }
        let ring = Ring::try_new(depth).ok_or(CreateError::NoMemory)?;
        Ok(Self {
            reader: SpinLock::new(Arc::clone(&ring)),
            state: SpinLock::new(State {
                ring,
                depth,
                arm: None,
                fresh_from: 0,
                solicited_at: None,
                health: Health::Healthy,
                callbacks: Callbacks::Idle,
                deferred_completions: 0,
                deferred_fault: None,
                closed: false,
            }),
            notify,
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        })
    }

    /// Queues `completion`. If it satisfies the arm, the consumer's callback
    /// runs before this returns, on this thread, unless a callback is running
    /// already (rules C3, C5, I3).
    ///
    /// # Errors
    /// * [`CqError::Overflowed`] when the CQ was full: the completion is dropped
    ///   and the CQ enters its error state (rule E10); the overflow is reported
    ///   through the arm, now or at the next `arm` (rule E12).
    /// * [`CqError::InError`] once the CQ is in error (rules E10, E11).
    /// * [`CqError::Closed`] after [`Cq::close`].
    pub fn push(&self, completion: Completion) -> Result<(), CqError> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(CqError::Closed);
        }
        if state.health != Health::Healthy {
            // Rule E10: no further completions are queued or reported.
            return Err(CqError::InError);
        }
        // Only pushers, under `state`, move `tail`.
        let tail = self.tail.load(Ordering::Relaxed);
        // The poller's `Release` store of `head` follows its reads of the
        // slots it freed: once seen here, those slots may be overwritten.
        let head = self.head.load(Ordering::Acquire);
        // Fault injection (`fault::Kind::CqOverflow`): an overflow now.
        let injected = super::fault::hit(super::fault::Kind::CqOverflow);
        let free = !injected && tail.wrapping_sub(head) < state.ring.capacity();
        let slot = state.ring.slot(tail).filter(|_| free);
        let Some(slot) = slot else {
            // Rule E10: more completions than the depth overflow the CQ.
            self.raise(state, Fault::Overflow);
            return Err(CqError::Overflowed);
        };
        slot.store(&completion);
        let tail_after = tail.wrapping_add(1);
        // Publishes the entry: a poller that sees the new `tail` sees it.
        self.tail.store(tail_after, Ordering::Release);
        state.note_queued(&completion, tail);
        // Rule C3: clear the arm, then call the callback.
        if state.arm.is_some_and(|arm| arm.matches(&completion)) {
            state.satisfy_arm(tail_after);
            self.dispatch(state, CqEvent::Completion);
        }
        Ok(())
    }

    /// Removes up to `out.len()` completions, oldest first, into the front of
    /// `out` and returns how many; 0 means the CQ was empty (rule K1).
    ///
    /// In the error state it still returns the completions queued before the
    /// error (see the module documentation).
    ///
    /// A poll never takes the lock a pusher takes: pollers serialize among
    /// themselves on `reader`, and an empty CQ returns without any lock.
    pub fn poll(&self, out: &mut [Completion]) -> usize {
        // Empty as of this read: nothing to take (a push racing with it is
        // ordered after the poll, as if it came later).
        if self.is_empty() {
            return 0;
        }
        let ring = self.reader.lock();
        // Only pollers, under `reader`, move `head`.
        let head = self.head.load(Ordering::Relaxed);
        // Pairs with the pusher's `Release`: the entries before `tail` are
        // written.
        let tail = self.tail.load(Ordering::Acquire);
        let mut taken = 0_usize;
        for (pos, place) in (0..tail.wrapping_sub(head)).zip(out.iter_mut()) {
            let Some(slot) = ring.slot(head.wrapping_add(pos)) else {
                break;
            };
            *place = slot.load();
            taken += 1;
        }
        // Frees the slots read: a pusher that sees the new `head` may reuse
        // them.
        self.head.store(head.wrapping_add(taken), Ordering::Release);
        taken
    }

    /// Arms the CQ: the callback runs once when a completion matching `arm`
    /// is queued or a CQ error happens (rules C3, E9, E12). Arming again before
    /// that merges the two arms (rule C6).
    ///
    /// If a matching completion arrived since the last callback was initiated
    /// and is still in the CQ, or an error has not been reported yet, the arm
    /// is satisfied at once: the callback runs before this returns, or after
    /// the running callback returns when called from inside it (rules C4, C5).
    /// Completions that were all there at the last callback do not satisfy it
    /// (see the module documentation).
    pub fn arm(&self, arm: ArmType) {
        let mut state = self.state.lock();
        if state.closed {
            // Rule L19 binds the consumer; an arm after close has no effect.
            return;
        }
        match state.health {
            Health::Healthy => {}
            Health::Unreported(fault) => {
                // Rule E12: an error not yet reported satisfies any arm, once.
                state.health = Health::Reported;
                state.satisfy_arm(self.tail.load(Ordering::Relaxed));
                self.dispatch(state, fault.event());
                return;
            }
            // Rule E10: once the error is reported, nothing more ever is.
            Health::Reported => return,
        }
        // Rule C6: merge with an arm not yet satisfied.
        let merged = state.arm.map_or(arm, |first| first.merge(arm));
        // Rule C4: a fresh matching completion satisfies the arm at once.
        // `tail` is stable under `state`; `head` may move on (a poll), which
        // only removes entries: one polled before this read does not count.
        let tail = self.tail.load(Ordering::Relaxed);
        let head = self.head.load(Ordering::Acquire);
        if state.has_fresh_match(merged, head, tail) {
            state.satisfy_arm(tail);
            self.dispatch(state, CqEvent::Completion);
        } else {
            state.arm = Some(merged);
        }
    }

    /// Changes the depth, keeping every completion in order (rule K4). The new
    /// ring is allocated before the lock is taken.
    ///
    /// # Errors
    /// * [`ResizeError::ZeroDepth`] when `depth` is 0.
    /// * [`ResizeError::NoMemory`] when the new ring cannot be allocated.
    /// * [`ResizeError::InError`] when the CQ is in error (rule E13).
    /// * [`ResizeError::BelowCount`] when `depth` is below the number of
    ///   completions the CQ holds (rule K4).
    ///
    /// On error the CQ is unchanged.
    pub fn resize(&self, depth: u32) -> Result<(), ResizeError> {
        if depth == 0 {
            return Err(ResizeError::ZeroDepth);
        }
        let ring = Ring::try_new(depth).ok_or(ResizeError::NoMemory)?;
        let mut state = self.state.lock();
        if state.health != Health::Healthy {
            return Err(ResizeError::InError);
        }
        // No poll runs while `reader` is held, no push while `state` is: the
        // positions stand still.
        let mut reader = self.reader.lock();
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        let len = tail.wrapping_sub(head);
        if len > ring.capacity() {
            // Rule K4: below the count fails and leaves the CQ unchanged.
            return Err(ResizeError::BelowCount);
        }
        // Rule K4: no completion is lost and the order is kept. Each entry
        // keeps its position, now in a slot of the new ring (which holds at
        // least `len` entries), so the fresh-entry positions stay valid.
        for pos in (0..len).map(|i| head.wrapping_add(i)) {
            if let (Some(from), Some(to)) = (state.ring.slot(pos), ring.slot(pos)) {
                to.store(&from.load());
            }
        }
        let old_reader = mem::replace(&mut *reader, Arc::clone(&ring));
        drop(reader);
        let old = mem::replace(&mut state.ring, ring);
        state.depth = depth;
        drop(state);
        // The old ring is freed outside the locks.
        drop(old_reader);
        drop(old);
        Ok(())
    }

    /// Puts the CQ in its error state after a fatal device error (rule E11):
    /// like an overflow, reported as [`CqEvent::Fatal`] through the arm, now or
    /// at the next `arm` (rule E12). No effect if the CQ is already in error
    /// (the first error is the one reported) or closed.
    pub fn fail(&self) {
        let state = self.state.lock();
        if state.closed || state.health != Health::Healthy {
            return;
        }
        self.raise(state, Fault::Fatal);
    }

    /// Closes the CQ: drops the arm and any deferred notification, and makes
    /// every later `push` fail with [`CqError::Closed`] (rules L21–L23).
    ///
    /// Returns [`CloseState::Done`] when no callback is running: none will
    /// run. Returns [`CloseState::Pending`] when one is running (also when
    /// `close` is called from inside it): the thread running it calls
    /// [`CqNotify::close_complete`] once it has returned, and no notification
    /// follows. A second `close` returns `Done` and has no effect.
    pub fn close(&self) -> CloseState {
        let mut state = self.state.lock();
        if state.closed {
            // Rule L19 binds the consumer; never a second `close_complete`.
            return CloseState::Done;
        }
        state.closed = true;
        state.arm = None;
        // Rule L22: no notification after the close completes.
        state.deferred_completions = 0;
        state.deferred_fault = None;
        if state.callbacks == Callbacks::Idle {
            CloseState::Done
        } else {
            // Rule L23: pending until the running callback returns.
            state.callbacks = Callbacks::RunningCloseOwed;
            CloseState::Pending
        }
    }

    /// Whether the CQ is in its error state (rules E10, E11).
    #[must_use]
    pub fn is_error(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The number of completions the CQ holds at most.
    #[must_use]
    pub fn depth(&self) -> u32 {
        self.state.lock().depth
    }

    /// The number of completions queued now.
    #[must_use]
    pub fn len(&self) -> usize {
        let head = self.head.load(Ordering::Acquire);
        self.tail.load(Ordering::Acquire).wrapping_sub(head)
    }

    /// Whether no completion is queued now (read without a lock: as of
    /// the last push or poll that finished).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Enters the error state `fault`; reports it if the CQ is armed, else
    /// leaves it for the next `arm` (rule E12).
    fn raise(&self, mut state: SpinLockGuard<'_, State>, fault: Fault) {
        self.failed.store(true, Ordering::Release);
        if state.arm.is_some() {
            state.health = Health::Reported;
            state.satisfy_arm(self.tail.load(Ordering::Relaxed));
            self.dispatch(state, fault.event());
        } else {
            state.health = Health::Unreported(fault);
        }
    }

    /// Delivers `event`, whose arm the caller has just cleared under `state`:
    /// calls the callback now, or defers it behind the running one (rule C5).
    fn dispatch(&self, mut state: SpinLockGuard<'_, State>, event: CqEvent) {
        if state.callbacks != Callbacks::Idle {
            // Rule C5: never overlap, never nest; the thread running the
            // callback calls it again after the current one returns.
            state.defer(event);
            return;
        }
        state.callbacks = Callbacks::Running;
        drop(state);
        self.run_callbacks(event);
    }

    /// The callback loop of the notifying thread: calls the callback for
    /// `event`, then for every notification deferred meanwhile (rule C5), then
    /// `close_complete` if the CQ was closed meanwhile (rule L23).
    ///
    /// The caller has set `callbacks` to `Running` and holds no lock.
    fn run_callbacks(&self, mut event: CqEvent) {
        loop {
            // Rule I4: no lock is held while the consumer's code runs.
            self.notify.notify(event);
            let mut state = self.state.lock();
            if state.callbacks == Callbacks::RunningCloseOwed {
                state.callbacks = Callbacks::Idle;
                drop(state);
                // Rules L21, L23: the close completes after the callback has
                // returned; it is the last callback (rule L22).
                self.notify.close_complete();
                return;
            }
            let Some(next) = state.take_deferred() else {
                state.callbacks = Callbacks::Idle;
                return;
            };
            event = next;
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(test)]
mod hint_tests;

#[cfg(test)]
mod ring_tests;
