//! Protection domains, memory regions and memory windows, and the resolution
//! of tokens to memory.
//!
//! * A [`Pd`] owns a privileged token (rule M27): local access by logical
//!   address, inside a live LAM, never remote.
//! * An [`Mr`] is either a *registered* region (`RegisterMr` over memory the
//!   provider vouched for, rules M1–M6, M10–M12) or a *fast-register* region
//!   (`InitializeFastRegisterMr`, then `FastRegister` / `Invalidate` work
//!   requests, rules M13–M17, M22, M35), never both (M1).
//! * An [`Mw`] is opened over a registered region by `Bind` (M18–M21) and
//!   closed by `Invalidate`.
//!
//! Tokens: a registered region gets a fresh local / remote token pair at each
//! registration; a fast-register region keeps one pair for its whole life
//! (M35) and what it names is whatever the latest FastRegister mapped; a
//! window gets a fresh remote token at every Bind, so a token of an earlier
//! binding is refused for ever (M23, M34).
//!
//! DMA safety: a resolved [`Segment`] is covered by a use of its region (its
//! own, or that of the runner's `TokenCache` it was resolved through), and
//! a deregistration that finds the region in use completes only when the last
//! use ends (rule M11: DeregisterMr may pend), so the consumer never frees
//! memory under an in-flight copy.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::device::{Device, KeyTarget, ObjectKind, ResourceError, Slot};
use super::keys::{self, REMOTE_BIT};
use super::memory::{Span, SpanList, SpanListError};
use super::types::{Access, PAGE_SIZE, Sge, WcStatus};
use crate::kernel::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::kernel::sync::{Arc, SpinLock};
#[cfg(all(test, not(loom)))]
use cache::CACHE_ENTRIES;
pub(crate) use cache::TokenCache;

mod cache;

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    slot: Slot,
    id: u32,
    privileged_key: u32,
}

impl Pd {
    /// Creates a PD with its privileged token.
    ///
    /// # Errors
    /// [`ResourceError`] when the PD limit or the token table is exhausted.
    pub fn new(device: &Arc<Device>) -> Result<Arc<Self>, ResourceError> {
        let slot = device.reserve(ObjectKind::Pd)?;
        let id = device.next_id();
        let privileged_key = device.keys.lock().insert(KeyTarget::Privileged)?;
        Ok(Arc::new(Self {
            slot,
            id,
            privileged_key,
        }))
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        self.slot.device()
    }

    /// The PD's id.
    pub const fn id(&self) -> u32 {
        self.id
    }

    /// The privileged token (rule M27): SGEs with it name logical addresses.
    pub const fn privileged_key(&self) -> u32 {
        self.privileged_key
    }

    /// Takes a token naming `target` from the device's table (M12, M17).
    fn insert_key(&self, target: KeyTarget) -> Result<u32, MrError> {
        Ok(self.device().keys.lock().insert(target)?)
    }

    /// Returns `key` to the device's table: from now on it names nothing.
    fn remove_key(&self, key: u32) {
        self.device().keys.lock().remove(key);
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        self.remove_key(self.privileged_key);
    }
}

/// Why a memory-region call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrError {
    /// Longer than the device allows (M10), zero-length, or otherwise malformed.
    InvalidParameter,
    /// The call does not fit the region's kind or state (M1; register twice;
    /// deregister an unregistered region).
    InvalidState,
    /// Requested rights the region cannot grant (M15, M19).
    AccessViolation,
    /// The fast-register page count is above the device's (M13).
    ImplementationLimit,
    /// Out of tokens or memory.
    Resources,
    /// Too many FastRegisters of the region are outstanding.
    Busy,
}

impl From<ResourceError> for MrError {
    fn from(_: ResourceError) -> Self {
        Self::Resources
    }
}

impl From<SpanListError> for MrError {
    /// A chain of more than `MAX_SPANS` mapped-apart MDLs is a limit of this
    /// device's resources (`STATUS_INSUFFICIENT_RESOURCES`), not a malformed
    /// request; a length past `u64::MAX` is malformed (M10).
    fn from(e: SpanListError) -> Self {
        match e {
            SpanListError::TooMany | SpanListError::NoMemory => Self::Resources,
            SpanListError::TooLong => Self::InvalidParameter,
        }
    }
}

impl From<keys::KeyError> for MrError {
    fn from(_: keys::KeyError) -> Self {
        Self::Resources
    }
}

/// Outcome of a call that may pend.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Done before returning.
    Done,
    /// Finishes later; the callback given with the call runs then.
    Pending,
}

/// A callback run once when a pending operation finishes (no lock held).
pub type Finish = Box<dyn FnOnce() + Send>;

/// A page list and what it maps: the active mapping of a fast-registered
/// region, or the one staged by a posted FastRegister.
struct PageMap {
    /// Logical addresses of the pages, `count` of them used.
    pages: Box<[u64]>,
    count: usize,
    /// First byte's offset into the first page.
    fbo: u64,
    /// Virtual-address index of the first byte.
    base: u64,
    len: u64,
    access: Access,
}

impl PageMap {
    fn with_capacity(pages: u32) -> Result<Self, MrError> {
        let mut list = Vec::new();
        list.try_reserve_exact(pages as usize)
            .map_err(|_| MrError::Resources)?;
        list.resize(pages as usize, 0_u64);
        Ok(Self {
            pages: list.into_boxed_slice(),
            count: 0,
            fbo: 0,
            base: 0,
            len: 0,
            access: Access::empty(),
        })
    }
}

/// Staged page lists a fast-register region starts with: room for two
/// FastRegisters outstanding at once (the current mapping's successor, and
/// the one after the next Invalidate). A consumer that queues more (a
/// chain FastRegister → Invalidate → FastRegister → …, or a deferred
/// engine behind the poster, rules D2, P18) makes the region grow one list
/// per FastRegister past its high-water mark; the lists are kept for the
/// region's life, so a steady workload allocates nothing per request.
pub const STAGE_SLOTS: usize = 2;

/// What one attempt to stage a FastRegister's page list found.
enum Staged {
    /// The list is staged in this slot.
    Slot(usize),
    /// Every slot is taken: one more list of this many pages is needed.
    Full(u32),
}

/// A FastRegister as posted, checked and staged by
/// [`Mr::stage_fast_register`]: page list, first-byte offset, length, base
/// index and rights (rules M15, M16).
#[derive(Clone, Copy)]
struct FrRequest<'a> {
    pages: &'a [u64],
    fbo: u64,
    len: u64,
    base: u64,
    access: Access,
}

/// The state of an initialized fast-register region.
struct Fast {
    key: u32,
    max_pages: u32,
    remote_ok: bool,
    /// Whether `active` is mapped (between FastRegister and Invalidate).
    mapped: bool,
    active: PageMap,
    /// Page lists captured at post time: the consumer's page array is only
    /// valid during the FastRegister call, and the work request executes
    /// later (rule D2). Each posted FastRegister owns one slot until it
    /// executes or is cancelled, so a chain FastRegister → Invalidate →
    /// FastRegister on one region maps each list in turn (M16).
    /// [`STAGE_SLOTS`] at first, more as needed (never more than the
    /// device's initiator queue depth).
    staged: Vec<PageMap>,
    /// Which staged slots a posted FastRegister owns (as long as `staged`).
    staged_busy: Vec<bool>,
    /// Bumped at every FastRegister and Invalidate, so a segment resolved
    /// under one mapping never reads another.
    generation: u64,
    /// Bumped at every initialization: a staged FastRegister's token
    /// ([`Mr::stage_fast_register`]) carries the epoch it was staged in,
    /// so one posted before the region was initialized again neither maps
    /// the new slots' pages nor frees a slot of them (M13, M16).
    epoch: u32,
}

/// A staged FastRegister's token: its slot in the low half, the region's
/// epoch at staging in the high half.
fn stage_token(epoch: u32, slot: usize) -> usize {
    (usize::try_from(epoch).unwrap_or(0) << 32) | (slot & 0xFFFF_FFFF)
}

/// The slot a token names, if it was staged in `epoch`.
fn token_slot(token: usize, epoch: u32) -> Option<usize> {
    (usize::try_from(epoch).ok()? == token >> 32).then_some(token & 0xFFFF_FFFF)
}

/// The memory of a registered region (rule M2).
#[derive(Clone)]
enum Memory {
    /// One span: a single MDL, or a chain whose mappings continue one
    /// another. Segments over it are plain spans (the fast path).
    One(Span),
    /// Several spans: an MDL chain whose MDLs are mapped apart. Segments
    /// share the list, so it outlives a deregistration while DMA is in
    /// flight (M11).
    Many(Arc<SpanList>),
}

impl Memory {
    fn len(&self) -> u64 {
        match self {
            Self::One(span) => span.len() as u64,
            Self::Many(list) => list.len(),
        }
    }

    /// The `len` bytes at byte `offset`, which the caller checked lie inside
    /// (rule P11).
    fn segment(&self, offset: u64, len: u64) -> Result<SegmentKind, Denied> {
        Ok(match self {
            Self::One(span) => SegmentKind::Contiguous(
                span.sub(
                    usize::try_from(offset).map_err(|_| Denied::Range)?,
                    usize::try_from(len).map_err(|_| Denied::Range)?,
                )
                .ok_or(Denied::Range)?,
            ),
            Self::Many(list) => SegmentKind::Spans {
                list: Arc::clone(list),
                offset,
            },
        })
    }
}

/// The rights and range checks of every resolution (rules P11, M34): `len`
/// bytes at index `addr` for `need`, in a region or mapping of `region_len`
/// bytes indexed from `base` granting `access`. Returns the byte offset.
fn check(
    (base, region_len, access): (u64, u64, Access),
    addr: u64,
    len: u64,
    need: Access,
) -> Result<u64, Denied> {
    if !access.contains(need) {
        return Err(Denied::Rights);
    }
    let offset = addr.checked_sub(base).ok_or(Denied::Range)?;
    let end = offset.checked_add(len).ok_or(Denied::Range)?;
    if end > region_len {
        return Err(Denied::Range);
    }
    Ok(offset)
}

enum MrState {
    /// A normal region with nothing registered.
    Unregistered,
    /// A normal region registered over `memory`, indexed from `base`.
    Registered {
        key: u32,
        memory: Memory,
        base: u64,
        access: Access,
    },
    /// Deregistered or closed while in use: the token is gone; when the last
    /// use ends `finish` (the deregistration's callback) runs, then `close`
    /// (a close issued meanwhile completes last, rules L21, L22).
    Deregistering {
        finish: Option<Finish>,
        close: Option<Finish>,
    },
    /// A fast-register region, not yet initialized.
    FastUninitialized,
    /// A fast-register region, initialized: tokens fixed for life (M35).
    Fast(Box<Fast>),
}

/// The bit of `Mr::users` that says a deregistration or close waits for
/// the uses to end; the other bits count them.
const PENDING: usize = 1 << (usize::BITS - 1);

/// A memory region.
pub struct Mr {
    pd: Arc<Pd>,
    _slot: Slot,
    fast: bool,
    state: SpinLock<MrState>,
    /// Uses of the region (in-flight DMA: segments, runner caches), plus
    /// [`PENDING`] (set under the state lock) while the state is
    /// `Deregistering`: only then must the use that ends last take the state
    /// lock to finish it (without it every request took that lock once per
    /// segment, docs/performance.md). One atomic for both, so that of a use
    /// ending last and a deregistration starting, the later read-modify-write
    /// sees the other (see `Use::drop`); two (`SeqCst`) flags did the same
    /// but loom cannot check that pattern.
    users: AtomicUsize,
    /// Set (under the state lock) while the state is `Registered`, cleared
    /// (under the state lock, before the token leaves the device's table)
    /// when it leaves that state: what a [`TokenCache`] hit checks instead
    /// of taking the lock.
    registered: AtomicBool,
}

impl core::fmt::Debug for Mr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mr")
            .field("fast", &self.fast)
            .finish_non_exhaustive()
    }
}

impl Mr {
    /// Creates a region for `RegisterMr` (`fast == false`) or for fast
    /// registration (`fast == true`), rule M1.
    ///
    /// # Errors
    /// [`ResourceError::LimitReached`] at the device's MR limit.
    pub fn new(pd: &Arc<Pd>, fast: bool) -> Result<Arc<Self>, ResourceError> {
        let slot = pd.device().reserve(ObjectKind::Mr)?;
        let state = if fast {
            MrState::FastUninitialized
        } else {
            MrState::Unregistered
        };
        Ok(Arc::new(Self {
            pd: Arc::clone(pd),
            _slot: slot,
            fast,
            state: SpinLock::new(state),
            users: AtomicUsize::new(0),
            registered: AtomicBool::new(false),
        }))
    }

    /// The region's PD.
    pub const fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// Whether this is a fast-register region.
    pub const fn is_fast(&self) -> bool {
        self.fast
    }

    /// Registers `span` (memory the provider vouched for) as `span.len()`
    /// bytes indexed from `base` (the MDL's virtual address, rules M4, M5).
    ///
    /// # Errors
    /// `InvalidState` for a fast region or one already registered,
    /// `InvalidParameter` for zero or too-long lengths (M10) or an index
    /// range that wraps, `Resources` when no token is left.
    pub fn register(
        self: &Arc<Self>,
        span: Span,
        base: u64,
        access: Access,
    ) -> Result<(), MrError> {
        self.register_memory(Memory::One(span), base, access)
    }

    /// Registers the spans of `list`, in order, as one region of
    /// `list.len()` bytes indexed from `base` (rule M2: an MDL chain whose
    /// MDLs are mapped apart). A list of one span registers as
    /// [`register`](Self::register) does.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    pub fn register_spans(
        self: &Arc<Self>,
        list: SpanList,
        base: u64,
        access: Access,
    ) -> Result<(), MrError> {
        let memory = match list.single() {
            Some(span) => Memory::One(span),
            None => Memory::Many(Arc::new(list)),
        };
        self.register_memory(memory, base, access)
    }

    fn register_memory(
        self: &Arc<Self>,
        memory: Memory,
        base: u64,
        access: Access,
    ) -> Result<(), MrError> {
        let len = memory.len();
        if len == 0
            || len > self.pd.device().limits().max_registration_size
            || base.checked_add(len).is_none()
        {
            return Err(MrError::InvalidParameter);
        }
        let mut state = self.state.lock();
        if !matches!(*state, MrState::Unregistered) {
            return Err(MrError::InvalidState);
        }
        let key = self.pd.insert_key(KeyTarget::Mr(Arc::clone(self)))?;
        *state = MrState::Registered {
            key,
            memory,
            base,
            access: access.normalized(),
        };
        self.registered.store(true, Ordering::Release);
        Ok(())
    }

    /// Deregisters (rule M11). When DMA is in flight on the region the
    /// deregistration pends and `finish` runs once the last use ends; the
    /// tokens are refused from the moment this returns.
    ///
    /// # Errors
    /// `InvalidState` when nothing is registered (or a fast region).
    pub fn deregister(&self, finish: Finish) -> Result<Progress, MrError> {
        let key = {
            let mut state = self.state.lock();
            let MrState::Registered { key, .. } = *state else {
                return Err(MrError::InvalidState);
            };
            // Cached resolutions stop here (see `CacheEntry::resolve`).
            self.registered.store(false, Ordering::Release);
            if self.users.load(Ordering::Acquire) == 0 {
                *state = MrState::Unregistered;
            } else {
                *state = MrState::Deregistering {
                    finish: Some(finish),
                    close: None,
                };
                self.users.fetch_or(PENDING, Ordering::AcqRel);
                drop(state);
                self.pd.remove_key(key);
                // The last use may have ended between the check and now, and
                // its thread may already have run `finish`: either way the
                // callback runs exactly once, so the call has pended (L8).
                self.finish_if_idle();
                return Ok(Progress::Pending);
            }
            key
        };
        self.pd.remove_key(key);
        drop(finish);
        Ok(Progress::Done)
    }

    /// Runs a pending deregistration's and close's callbacks, in that
    /// order, if no use is left.
    fn finish_if_idle(&self) {
        let (finish, close) = {
            let mut state = self.state.lock();
            // Uses left, or nothing pending (finished already).
            if self.users.load(Ordering::Acquire) != PENDING {
                return;
            }
            match &mut *state {
                MrState::Deregistering { finish, close } => {
                    let callbacks = (finish.take(), close.take());
                    // No use can start: the state is not `Registered`.
                    self.users.fetch_and(!PENDING, Ordering::AcqRel);
                    *state = if self.fast {
                        MrState::FastUninitialized
                    } else {
                        MrState::Unregistered
                    };
                    callbacks
                }
                _ => (None, None),
            }
        };
        if let Some(f) = finish {
            f();
        }
        if let Some(f) = close {
            f();
        }
    }

    /// Prepares a fast-register region for up to `pages` pages (rule M13);
    /// may be called again. Tokens are assigned at the first call and kept.
    ///
    /// # Errors
    /// `InvalidState` for a registered (non-fast) region, `InvalidParameter`
    /// for 0 pages, `ImplementationLimit` above the device's page count,
    /// `Resources` when memory or tokens run out.
    pub fn init_fast(self: &Arc<Self>, pages: u32, remote_ok: bool) -> Result<(), MrError> {
        if !self.fast {
            return Err(MrError::InvalidState);
        }
        if pages == 0 {
            return Err(MrError::InvalidParameter);
        }
        if pages > self.pd.device().limits().max_fr_pages {
            return Err(MrError::ImplementationLimit);
        }
        // Allocate the page lists before taking the lock (control path).
        let active = PageMap::with_capacity(pages)?;
        let mut staged = Vec::new();
        staged
            .try_reserve_exact(STAGE_SLOTS)
            .map_err(|_| MrError::Resources)?;
        for _ in 0..STAGE_SLOTS {
            staged.push(PageMap::with_capacity(pages)?);
        }
        let mut staged_busy = Vec::new();
        staged_busy
            .try_reserve_exact(STAGE_SLOTS)
            .map_err(|_| MrError::Resources)?;
        staged_busy.resize(STAGE_SLOTS, false);
        let mut fast = Box::new(Fast {
            key: 0,
            max_pages: pages,
            remote_ok,
            mapped: false,
            active,
            staged,
            staged_busy,
            generation: 0,
            epoch: 0,
        });
        let mut state = self.state.lock();
        match &*state {
            MrState::FastUninitialized => {
                fast.key = self.pd.insert_key(KeyTarget::Mr(Arc::clone(self)))?;
            }
            MrState::Fast(old) if !old.mapped => {
                fast.key = old.key;
                fast.generation = old.generation.wrapping_add(1);
                fast.epoch = old.epoch.wrapping_add(1);
            }
            _ => return Err(MrError::InvalidState),
        }
        *state = MrState::Fast(fast);
        Ok(())
    }

    /// The local token, once registered or initialized (rule M12).
    pub fn local_key(&self) -> Option<u32> {
        match &*self.state.lock() {
            MrState::Registered { key, .. } => Some(*key),
            MrState::Fast(fast) => Some(fast.key),
            _ => None,
        }
    }

    /// The remote token, once registered or initialized (rules M12, M17).
    pub fn remote_key(&self) -> Option<u32> {
        self.local_key().map(|k| k | REMOTE_BIT)
    }

    /// Checks a FastRegister at post time (rules M15, M16), so that a bad one
    /// is refused inline, and captures its page list for execution in a
    /// staged slot; the work request carries the token it returns (its slot
    /// and the region's initialization epoch).
    ///
    /// # Errors
    /// `InvalidState` for a region that is not an initialized fast region,
    /// `InvalidParameter` for a malformed page list, `AccessViolation` for
    /// remote rights on a region initialized without remote access,
    /// `Resources` when no memory is left for one more staged list (more
    /// than [`STAGE_SLOTS`] outstanding), `Busy` when as many FastRegisters
    /// of the region are outstanding as the device's initiator queue depth.
    pub fn stage_fast_register(
        &self,
        pages: &[u64],
        fbo: u64,
        len: u64,
        base: u64,
        access: Access,
    ) -> Result<usize, MrError> {
        let request = FrRequest {
            pages,
            fbo,
            len,
            base,
            access,
        };
        let mut spare = None;
        // Every list owned by a queued FastRegister: allocate one more
        // outside the lock, then try again (a third try only when the
        // region was initialized again meanwhile with another page count).
        for _ in 0..3 {
            match self.try_stage(request, &mut spare)? {
                Staged::Slot(slot) => return Ok(slot),
                Staged::Full(max_pages) => {
                    if spare
                        .as_ref()
                        .is_some_and(|p: &PageMap| p.pages.len() == max_pages as usize)
                    {
                        return Err(MrError::Busy);
                    }
                    spare = Some(PageMap::with_capacity(max_pages)?);
                }
            }
        }
        Err(MrError::Busy)
    }

    /// One attempt of [`stage_fast_register`](Self::stage_fast_register):
    /// takes a free staged list, or adds `spare` (when it fits the region's
    /// page count) as a new one.
    fn try_stage(
        &self,
        request: FrRequest<'_>,
        spare: &mut Option<PageMap>,
    ) -> Result<Staged, MrError> {
        let FrRequest {
            pages,
            fbo,
            len,
            base,
            access,
        } = request;
        let mut state = self.state.lock();
        let MrState::Fast(fast) = &mut *state else {
            return Err(MrError::InvalidState);
        };
        if access.is_remote() && !fast.remote_ok {
            return Err(MrError::AccessViolation);
        }
        let count = pages.len();
        let span = (count as u64)
            .checked_mul(PAGE_SIZE)
            .and_then(|s| s.checked_sub(fbo));
        // M10: a fast registration is a registration too.
        let fits = count != 0
            && count <= fast.max_pages as usize
            && fbo < PAGE_SIZE
            && span.is_some_and(|s| len <= s)
            && len <= self.pd.device().limits().max_registration_size;
        // M16: the base index is the FBO plus a whole number of pages.
        if !fits || base % PAGE_SIZE != fbo || base.checked_add(len).is_none() {
            return Err(MrError::InvalidParameter);
        }
        let free = fast.staged_busy.iter().position(|busy| !busy);
        let slot = if let Some(slot) = free {
            slot
        } else {
            {
                let cap = self.pd.device().limits().max_initiator_queue_depth as usize;
                let fits = spare
                    .as_ref()
                    .is_some_and(|p| p.pages.len() == fast.max_pages as usize);
                if fast.staged.len() >= cap.max(STAGE_SLOTS) {
                    return Err(MrError::Busy);
                }
                if !fits
                    || fast.staged.try_reserve(1).is_err()
                    || fast.staged_busy.try_reserve(1).is_err()
                {
                    return Ok(Staged::Full(fast.max_pages));
                }
                let Some(list) = spare.take() else {
                    return Ok(Staged::Full(fast.max_pages));
                };
                let slot = fast.staged.len();
                fast.staged.push(list);
                fast.staged_busy.push(false);
                slot
            }
        };
        let Fast {
            staged,
            staged_busy,
            ..
        } = &mut **fast;
        let (Some(staged), Some(busy)) = (staged.get_mut(slot), staged_busy.get_mut(slot)) else {
            return Err(MrError::Busy);
        };
        staged
            .pages
            .get_mut(..count)
            .ok_or(MrError::InvalidParameter)?
            .copy_from_slice(pages);
        staged.count = count;
        staged.fbo = fbo;
        staged.base = base;
        staged.len = len;
        staged.access = access.normalized();
        *busy = true;
        Ok(Staged::Slot(stage_token(fast.epoch, slot)))
    }

    /// Frees the staged slot of `token`: its FastRegister executed, failed
    /// or was cancelled. Idempotent; nothing for a token of an earlier
    /// initialization (its slots went with it).
    pub fn unstage(&self, token: usize) {
        if let MrState::Fast(fast) = &mut *self.state.lock()
            && let Some(slot) = token_slot(token, fast.epoch)
            && let Some(busy) = fast.staged_busy.get_mut(slot)
        {
            *busy = false;
        }
    }

    /// Executes the FastRegister staged as `token` (rule M16). Every page must
    /// lie in a live LAM of the device (M33). The slot is freed when the
    /// request retires ([`unstage`](Self::unstage)), whatever the outcome.
    ///
    /// # Errors
    /// `InvalidRequest` when the region is already mapped, not initialized
    /// (or initialized again since the post), or a page is not a live
    /// logical address.
    pub fn fast_register(&self, token: usize) -> Result<(), WcStatus> {
        let device = self.pd.device();
        let mut state = self.state.lock();
        let MrState::Fast(fast) = &mut *state else {
            return Err(WcStatus::InvalidRequest);
        };
        // Initialized again since the post: the slot is not this request's.
        let slot = token_slot(token, fast.epoch).ok_or(WcStatus::InvalidRequest)?;
        // The slot stays owned until the request retires (`unstage`): freed
        // here, a FastRegister posted meanwhile could stage into it, and the
        // retirement of this one would then free that one's list.
        if !fast.staged_busy.get(slot).is_some_and(|&busy| busy) || fast.mapped {
            return Err(WcStatus::InvalidRequest);
        }
        let staged = fast.staged.get(slot).ok_or(WcStatus::InvalidRequest)?;
        let pages = staged
            .pages
            .get(..staged.count)
            .ok_or(WcStatus::InvalidRequest)?;
        // LAM lookups under the region's lock: the lock order is always
        // region, then LAM table.
        if !pages
            .iter()
            .all(|&p| p % PAGE_SIZE == 0 && device.resolve_logical(p, PAGE_SIZE).is_some())
        {
            return Err(WcStatus::InvalidRequest);
        }
        let Fast { active, staged, .. } = &mut **fast;
        if let Some(staged) = staged.get_mut(slot) {
            core::mem::swap(active, staged);
        }
        fast.mapped = true;
        fast.generation = fast.generation.wrapping_add(1);
        Ok(())
    }

    /// Invalidates a fast-registered mapping (rules M22, M26, C2). Tokens stay
    /// assigned (M35) but grant nothing until the next FastRegister.
    ///
    /// # Errors
    /// `InvalidRequest` for a region that is not a mapped fast region.
    pub fn invalidate(&self) -> Result<(), WcStatus> {
        let mut state = self.state.lock();
        let MrState::Fast(fast) = &mut *state else {
            return Err(WcStatus::InvalidRequest);
        };
        if !fast.mapped {
            return Err(WcStatus::InvalidRequest);
        }
        fast.mapped = false;
        fast.generation = fast.generation.wrapping_add(1);
        Ok(())
    }

    /// Whether a region may be closed now; otherwise close must wait for the
    /// in-flight uses (the provider pends the close).
    pub fn in_use(&self) -> bool {
        self.users.load(Ordering::Acquire) & !PENDING != 0
    }

    /// Releases the region's tokens at close. Returns `Pending` when DMA is
    /// still in flight; `finish` then runs when it ends, after a pending
    /// deregistration's callback. `Done` when no use is left: a pending
    /// deregistration's callback has then run here, or is being run by the
    /// thread whose use just ended (its `finish_if_idle` took it first), so
    /// a caller that must complete the close after the deregistration (L21)
    /// holds the object open until that callback ran, as the provider's MR
    /// does (model: `loom_tests`, the close racing the last use).
    pub fn close(&self, finish: Finish) -> Progress {
        let key = {
            let mut state = self.state.lock();
            // A deregistration still pending keeps its callback: it runs
            // before the close completes (rules L8, L21, L22).
            let (key, deregistration) = match &mut *state {
                MrState::Registered { key, .. } => (Some(*key), None),
                MrState::Fast(fast) => (Some(fast.key), None),
                MrState::Deregistering { finish, .. } => (None, finish.take()),
                _ => (None, None),
            };
            // Cached resolutions stop here (see `CacheEntry::resolve`).
            self.registered.store(false, Ordering::Release);
            if self.users.load(Ordering::Acquire) & !PENDING == 0 {
                // A deregistration pending meanwhile: its last use ended
                // just now; that use's `finish_if_idle`, if it comes, finds
                // nothing pending.
                self.users.fetch_and(!PENDING, Ordering::AcqRel);
                *state = if self.fast {
                    MrState::FastUninitialized
                } else {
                    MrState::Unregistered
                };
                drop(state);
                if let Some(key) = key {
                    self.pd.remove_key(key);
                }
                // The last use ended just now, before it could finish the
                // deregistration itself.
                if let Some(f) = deregistration {
                    f();
                }
                drop(finish);
                return Progress::Done;
            }
            *state = MrState::Deregistering {
                finish: deregistration,
                close: Some(finish),
            };
            self.users.fetch_or(PENDING, Ordering::AcqRel);
            key
        };
        if let Some(key) = key {
            self.pd.remove_key(key);
        }
        // As in `deregister`: the callback runs exactly once, here or when
        // the last use ends, so the close has pended.
        self.finish_if_idle();
        Progress::Pending
    }

    /// Resolves `len` bytes at index `addr` against this region for `need`;
    /// with `registration`, only while registered under that token. The
    /// segment holds a use of its own.
    fn resolve(
        self: &Arc<Self>,
        addr: u64,
        len: u64,
        need: Access,
        registration: Option<u32>,
    ) -> Result<Segment, Denied> {
        let state = self.state.lock();
        if let Some(expected) = registration
            && !matches!(&*state, MrState::Registered { key, .. } if *key == expected)
        {
            return Err(Denied::Token);
        }
        let kind = match &*state {
            MrState::Registered {
                memory,
                base,
                access,
                ..
            } => {
                let offset = check((*base, memory.len(), *access), addr, len, need)?;
                memory.segment(offset, len)?
            }
            MrState::Fast(fast) if fast.mapped => {
                let map = &fast.active;
                let offset = check((map.base, map.len, map.access), addr, len, need)?;
                SegmentKind::Fast {
                    mr: Arc::clone(self),
                    offset,
                    generation: fast.generation,
                }
            }
            _ => return Err(Denied::Token),
        };
        let holder = Some(self.new_use(&state));
        drop(state);
        Ok(Segment {
            kind,
            len,
            _holder: holder,
        })
    }

    /// A use of the region, taken under its state lock (`_state` is the
    /// guard), so that a concurrent deregistration either sees it or ran
    /// before (and then the caller saw no registration).
    fn new_use(self: &Arc<Self>, state: &MrState) -> Use {
        self.count_use(state);
        Use(Arc::clone(self))
    }

    /// Counts a use, under the state lock (see [`new_use`](Self::new_use));
    /// the caller wraps the count in a [`Use`].
    fn count_use(&self, _state: &MrState) {
        self.users.fetch_add(1, Ordering::AcqRel);
    }

    /// The memory of one run of a fast mapping: up to `max` bytes at byte
    /// `offset` of the mapping, within one page.
    fn fast_run(&self, offset: u64, max: u64, generation: u64) -> Option<Span> {
        let (logical, run) = {
            let state = self.state.lock();
            let MrState::Fast(fast) = &*state else {
                return None;
            };
            let map = &fast.active;
            if !fast.mapped || fast.generation != generation || offset >= map.len {
                return None;
            }
            let absolute = map.fbo.checked_add(offset)?;
            let page = usize::try_from(absolute / PAGE_SIZE).ok()?;
            if page >= map.count {
                return None;
            }
            let in_page = absolute % PAGE_SIZE;
            let run = max.min(PAGE_SIZE - in_page).min(map.len - offset);
            (map.pages.get(page)?.checked_add(in_page)?, run)
        };
        self.pd.device().resolve_logical(logical, run)
    }
}

/// A memory window.
pub struct Mw {
    pd: Arc<Pd>,
    _slot: Slot,
    state: SpinLock<MwInner>,
}

impl core::fmt::Debug for Mw {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mw").finish_non_exhaustive()
    }
}

/// A window's state under its lock.
///
/// Only executed requests change `binding`; a posted Bind only takes its
/// token (M20), which its work request carries until it runs. Whether the
/// window is bound is therefore looked at when a Bind *executes*, in post
/// order after every Invalidate posted before it (rules M21, D2, P18): a
/// post never fails because of requests still queued ahead of it.
struct MwInner {
    binding: MwState,
    /// The token of the newest Bind posted and not yet retired, which
    /// `remote_key` reports from the moment the Bind returns (M20).
    newest: Option<u32>,
    /// Closed: Binds still queued fail when they run.
    closed: bool,
}

#[derive(Clone)]
enum MwState {
    /// No binding (M21: windows start unbound).
    Unbound { last_key: u32 },
    /// Bound over `[base, base + len)` of `mr` for QP `qp` (M21), while
    /// `mr` stays registered under `mr_key`, under token `key`.
    Bound {
        key: u32,
        mr: Arc<Mr>,
        mr_key: u32,
        base: u64,
        len: u64,
        access: Access,
        qp: u32,
    },
}

impl Mw {
    /// Creates an unbound window.
    ///
    /// # Errors
    /// [`ResourceError::LimitReached`] at the device's MW limit.
    pub fn new(pd: &Arc<Pd>) -> Result<Arc<Self>, ResourceError> {
        let slot = pd.device().reserve(ObjectKind::Mw)?;
        Ok(Arc::new(Self {
            pd: Arc::clone(pd),
            _slot: slot,
            state: SpinLock::new(MwInner {
                binding: MwState::Unbound { last_key: 0 },
                newest: None,
                closed: false,
            }),
        }))
    }

    /// The window's PD.
    pub const fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The remote token of the newest Bind posted and not yet retired (rule
    /// M20), else of the current (or last) binding; 0 before the first Bind
    /// and after close.
    pub fn remote_key(&self) -> u32 {
        let inner = self.state.lock();
        if inner.closed {
            return 0;
        }
        inner.newest.unwrap_or(match &inner.binding {
            MwState::Unbound { last_key } => *last_key,
            MwState::Bound { key, .. } => *key,
        })
    }

    /// Checks a Bind at post time and assigns its fresh token (rules M18–M20),
    /// which the work request carries to [`bind`](Self::bind) or
    /// [`cancel_bind`](Self::cancel_bind).
    ///
    /// Whether the window is bound is not looked at here: an Invalidate
    /// queued ahead of this Bind may unbind it first (D2, P18), so that is
    /// checked when the Bind runs.
    ///
    /// # Errors
    /// `InvalidParameter` for a window of another PD, a zero or too-long
    /// length (M10), or a range outside the region (M18); `InvalidState` for a
    /// region that is not registered or a closed window; `AccessViolation` for
    /// remote write on a region without local write (M19); `Resources` when
    /// no token is left.
    pub fn prepare_bind(
        self: &Arc<Self>,
        mr: &Mr,
        base: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, MrError> {
        if !Arc::ptr_eq(&self.pd, mr.pd())
            || len == 0
            || len > self.pd.device().limits().max_window_size
        {
            return Err(MrError::InvalidParameter);
        }
        {
            let state = mr.state.lock();
            let MrState::Registered {
                base: mr_base,
                memory,
                access: mr_access,
                ..
            } = &*state
            else {
                return Err(MrError::InvalidState);
            };
            if access.contains(Access::REMOTE_WRITE) && !mr_access.contains(Access::LOCAL_WRITE) {
                return Err(MrError::AccessViolation);
            }
            let inside = base
                .checked_sub(*mr_base)
                .and_then(|o| o.checked_add(len))
                .is_some_and(|end| end <= memory.len());
            if !inside {
                return Err(MrError::InvalidParameter);
            }
        }
        let mut inner = self.state.lock();
        if inner.closed {
            return Err(MrError::InvalidState);
        }
        let key = self.pd.insert_key(KeyTarget::Mw(Arc::clone(self)))? | REMOTE_BIT;
        inner.newest = Some(key);
        Ok(key)
    }

    /// Executes the Bind prepared by [`prepare_bind`](Self::prepare_bind)
    /// that returned `key`: the window now answers to `key` alone.
    ///
    /// # Errors
    /// `InvalidRequest` when the region is no longer registered, or the
    /// window is closed or still bound — no Invalidate posted before this
    /// Bind unbound it (M21). The caller then retires the request with that
    /// status, which releases `key` ([`cancel_bind`](Self::cancel_bind)).
    pub fn bind(
        &self,
        key: u32,
        mr: &Arc<Mr>,
        base: u64,
        len: u64,
        access: Access,
        qp: u32,
    ) -> Result<(), WcStatus> {
        let mr_key = match &*mr.state.lock() {
            MrState::Registered { key, .. } => *key,
            _ => return Err(WcStatus::InvalidRequest),
        };
        let mut inner = self.state.lock();
        if inner.closed || matches!(inner.binding, MwState::Bound { .. }) {
            return Err(WcStatus::InvalidRequest);
        }
        inner.binding = MwState::Bound {
            key,
            mr: Arc::clone(mr),
            mr_key,
            base,
            len,
            access: access.normalized(),
            qp,
        };
        if inner.newest == Some(key) {
            inner.newest = None;
        }
        Ok(())
    }

    /// Undoes the prepared Bind of `key`, which never took effect (flushed,
    /// refused when it ran, or refused at post after its token was taken):
    /// its token is released, and no longer reported as the newest.
    pub fn cancel_bind(&self, key: u32) {
        {
            let mut inner = self.state.lock();
            if inner.newest == Some(key) {
                inner.newest = None;
            }
        }
        self.pd.remove_key(key);
    }

    /// Invalidates the binding (rule M22): the token grants nothing from now.
    ///
    /// # Errors
    /// `InvalidRequest` when the window is not bound.
    pub fn invalidate(&self) -> Result<(), WcStatus> {
        self.invalidate_if(None)
    }

    /// Invalidates the binding if `key` is its token (SendAndInvalidate at
    /// the receiver, M24): the token of a Bind that has not run yet, or of an
    /// earlier binding, names nothing.
    fn invalidate_if(&self, key: Option<u32>) -> Result<(), WcStatus> {
        let key = {
            let mut inner = self.state.lock();
            let MwState::Bound { key: bound, .. } = &inner.binding else {
                return Err(WcStatus::InvalidRequest);
            };
            let bound = *bound;
            if key.is_some_and(|k| keys::local_form(k) != keys::local_form(bound)) {
                return Err(WcStatus::InvalidRequest);
            }
            inner.binding = MwState::Unbound { last_key: bound };
            bound
        };
        self.pd.remove_key(key);
        Ok(())
    }

    /// Releases the window's token at close; Binds still queued fail when
    /// they run and release theirs then.
    pub fn close(&self) {
        let key = {
            let mut inner = self.state.lock();
            let key = match &inner.binding {
                MwState::Bound { key, .. } => Some(*key),
                MwState::Unbound { .. } => None,
            };
            inner.binding = MwState::Unbound { last_key: 0 };
            inner.newest = None;
            inner.closed = true;
            key
        };
        if let Some(key) = key {
            self.pd.remove_key(key);
        }
    }

    fn resolve(
        &self,
        token: u32,
        addr: u64,
        len: u64,
        need: Access,
        qp: u32,
    ) -> Result<Segment, Denied> {
        let (mr, mr_key, base, window_len, access, bound_qp) = match &self.state.lock().binding {
            // Only the token of the binding in force: not that of a Bind
            // still queued (M20 hands it out before it runs), M34.
            MwState::Bound {
                key,
                mr,
                mr_key,
                base,
                len,
                access,
                qp,
            } if keys::local_form(*key) == keys::local_form(token) => {
                (Arc::clone(mr), *mr_key, *base, *len, *access, *qp)
            }
            _ => return Err(Denied::Token),
        };
        // Remote access through the window only (M34), by the QP it is bound to.
        if bound_qp != qp {
            return Err(Denied::Token);
        }
        if !access.contains(need) {
            return Err(Denied::Rights);
        }
        let end = addr
            .checked_sub(base)
            .and_then(|o| o.checked_add(len))
            .ok_or(Denied::Range)?;
        if end > window_len {
            return Err(Denied::Range);
        }
        // The window's rights were checked; the region only has to cover it,
        // under the registration the window was bound over (M11, M34: a
        // deregistered region registered again is not reachable through it).
        mr.resolve(addr, len, Access::empty(), Some(mr_key))
    }
}

/// Why a token did not resolve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// Unknown, stale, invalidated, of another PD, or of the wrong kind.
    Token,
    /// The range leaves the region or window.
    Range,
    /// The region or window lacks the right.
    Rights,
}

impl Denied {
    /// The completion status for a local SGE that was denied.
    pub const fn local_status(self) -> WcStatus {
        WcStatus::LocalAccessError
    }

    /// The completion status for a remote access that was denied (M34, P20).
    pub const fn remote_status(self) -> WcStatus {
        match self {
            Self::Range => WcStatus::RemoteOperationError,
            Self::Token | Self::Rights => WcStatus::RemoteAccessError,
        }
    }
}

enum SegmentKind {
    /// A contiguous range (registered region, LAM, inline source).
    Contiguous(Span),
    /// A range of a registered region of several spans, from byte `offset`
    /// of the list (rule M2); a run never crosses a span's end.
    Spans { list: Arc<SpanList>, offset: u64 },
    /// A range of a fast-registered mapping, read page by page.
    Fast {
        mr: Arc<Mr>,
        offset: u64,
        generation: u64,
    },
}

/// A use of a region: while one lives, a deregistration or close of the
/// region waits (rules M11, L8, L21, L22). Made by `Mr::new_use`.
struct Use(Arc<Mr>);

impl Drop for Use {
    fn drop(&mut self) {
        // The last use ended with a deregistration or close waiting for it:
        // it is finished here. If `PENDING` was set after this decrement,
        // the deregistering thread's `fetch_or` saw no use left, and its
        // `finish_if_idle` finishes.
        if self.0.users.fetch_sub(1, Ordering::AcqRel) == PENDING | 1 {
            self.0.finish_if_idle();
        }
    }
}

/// A resolved piece of memory a request reads or writes. Its region's memory
/// stays registered until it drops: it holds a use of its own, or (resolved
/// through a `TokenCache`) the cache's use covers it.
pub struct Segment {
    kind: SegmentKind,
    len: u64,
    /// Its own use, dropped with it; `None` when a cache's use covers it.
    _holder: Option<Use>,
}

impl core::fmt::Debug for Segment {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Segment")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Segment {
    /// A segment over memory that is not a region (privileged-token LAM
    /// memory, or a buffer the caller vouches for).
    pub const fn from_span(span: Span) -> Self {
        Self {
            kind: SegmentKind::Contiguous(span),
            len: span.len() as u64,
            _holder: None,
        }
    }

    /// Bytes.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the segment is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory at byte `offset` of the segment, up to `max` bytes, as one
    /// contiguous span; `None` when the mapping changed under the segment.
    pub fn run(&self, offset: u64, max: u64) -> Option<Span> {
        let max = max.min(self.len.checked_sub(offset)?);
        match &self.kind {
            SegmentKind::Contiguous(span) => {
                span.sub(usize::try_from(offset).ok()?, usize::try_from(max).ok()?)
            }
            SegmentKind::Spans { list, offset: base } => list.run(base.checked_add(offset)?, max),
            SegmentKind::Fast {
                mr,
                offset: base,
                generation,
            } => mr.fast_run(base.checked_add(offset)?, max, *generation),
        }
    }
}

impl Device {
    /// Resolves a local SGE of a request on a QP of `pd` (rule P11) for `need`.
    ///
    /// # Errors
    /// [`Denied`] when the token is not one of `pd`'s, the range leaves the
    /// region, or the right is missing.
    pub fn resolve_local(&self, pd: &Pd, sge: &Sge, need: Access) -> Result<Segment, Denied> {
        match self.local_region(pd, sge)? {
            Some(mr) => mr.resolve(sge.addr, u64::from(sge.len), need, None),
            None => self.resolve_logical_sge(sge),
        }
    }

    /// The region a local SGE's token names on a QP of `pd`, or `None` for
    /// `pd`'s privileged token.
    fn local_region(&self, pd: &Pd, sge: &Sge) -> Result<Option<Arc<Mr>>, Denied> {
        if keys::is_remote(sge.key) {
            return Err(Denied::Token);
        }
        if sge.key == pd.privileged_key() {
            return Ok(None);
        }
        match self.key_target(sge.key) {
            Some(KeyTarget::Mr(mr)) if mr.pd().id() == pd.id() => Ok(Some(mr)),
            _ => Err(Denied::Token),
        }
    }

    /// M27: a privileged-token SGE reads and writes by logical address,
    /// inside a live LAM.
    fn resolve_logical_sge(&self, sge: &Sge) -> Result<Segment, Denied> {
        self.resolve_logical(sge.addr, u64::from(sge.len))
            .map(Segment::from_span)
            .ok_or(Denied::Range)
    }

    /// Resolves a remote access arriving on QP `qp` of `pd` (rules P19, M34).
    ///
    /// # Errors
    /// [`Denied`] for a token that is not a remote token of `pd`, a range
    /// outside the region or window, or a missing right.
    pub fn resolve_remote(
        &self,
        pd: &Pd,
        qp: u32,
        key: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<Segment, Denied> {
        if !keys::is_remote(key) {
            return Err(Denied::Token);
        }
        match self.key_target(keys::local_form(key)) {
            Some(KeyTarget::Mr(mr)) if mr.pd().id() == pd.id() => mr.resolve(addr, len, need, None),
            Some(KeyTarget::Mw(mw)) if mw.pd().id() == pd.id() => {
                mw.resolve(key, addr, len, need, qp)
            }
            _ => Err(Denied::Token),
        }
    }

    /// Invalidates the region or window a token names (SendAndInvalidate at
    /// the receiver, rule M24 / C2; Invalidate work requests, M22).
    ///
    /// # Errors
    /// `InvalidRequest` when the token names nothing invalidatable of `pd`.
    pub fn invalidate_key(&self, pd: &Pd, key: u32) -> Result<(), WcStatus> {
        match self.key_target(keys::local_form(key)) {
            Some(KeyTarget::Mr(mr)) if mr.pd().id() == pd.id() && mr.is_fast() => mr.invalidate(),
            Some(KeyTarget::Mw(mw)) if mw.pd().id() == pd.id() => mw.invalidate_if(Some(key)),
            _ => Err(WcStatus::InvalidRequest),
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests;

#[cfg(test)]
#[cfg(not(loom))]
mod cache_tests;

#[cfg(all(test, loom))]
mod loom_tests;
