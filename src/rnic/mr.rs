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
//! DMA safety: a resolved [`Segment`] holds a use count on its region, and a
//! deregistration that finds the region in use completes only when the last
//! use ends (rule M11: DeregisterMr may pend), so the consumer never frees
//! memory under an in-flight copy.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::device::{Device, KeyTarget, ObjectKind, ResourceError, Slot};
use super::keys::{self, REMOTE_BIT};
use super::memory::Span;
use super::types::{Access, PAGE_SIZE, Sge, WcStatus};
use crate::kernel::sync::atomic::{AtomicUsize, Ordering};
use crate::kernel::sync::{Arc, SpinLock};

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
}

impl Drop for Pd {
    fn drop(&mut self) {
        self.slot.device().keys.lock().remove(self.privileged_key);
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

/// FastRegisters of one region that may be outstanding at once. A region
/// maps one list at a time, so a consumer has at most two in flight (the
/// current mapping's successor, and the one after the next Invalidate).
pub const STAGE_SLOTS: usize = 2;

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
    staged: [PageMap; STAGE_SLOTS],
    /// Which staged slots a posted FastRegister owns.
    staged_busy: [bool; STAGE_SLOTS],
    /// Bumped at every FastRegister and Invalidate, so a segment resolved
    /// under one mapping never reads another.
    generation: u64,
}

enum MrState {
    /// A normal region with nothing registered.
    Unregistered,
    /// A normal region registered over `span`, indexed from `base`.
    Registered {
        key: u32,
        span: Span,
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

/// A memory region.
pub struct Mr {
    pd: Arc<Pd>,
    _slot: Slot,
    fast: bool,
    state: SpinLock<MrState>,
    /// Segments currently resolved against the region (in-flight DMA).
    users: AtomicUsize,
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
        let len = span.len() as u64;
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
        let key = self
            .pd
            .device()
            .keys
            .lock()
            .insert(KeyTarget::Mr(Arc::clone(self)))?;
        *state = MrState::Registered {
            key,
            span,
            base,
            access: access.normalized(),
        };
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
            if self.users.load(Ordering::Acquire) == 0 {
                *state = MrState::Unregistered;
            } else {
                *state = MrState::Deregistering {
                    finish: Some(finish),
                    close: None,
                };
                drop(state);
                self.pd.device().keys.lock().remove(key);
                // The last use may have ended between the check and now, and
                // its thread may already have run `finish`: either way the
                // callback runs exactly once, so the call has pended (L8).
                self.finish_if_idle();
                return Ok(Progress::Pending);
            }
            key
        };
        self.pd.device().keys.lock().remove(key);
        drop(finish);
        Ok(Progress::Done)
    }

    /// Runs a pending deregistration's and close's callbacks, in that
    /// order, if no use is left.
    fn finish_if_idle(&self) {
        let (finish, close) = {
            let mut state = self.state.lock();
            if self.users.load(Ordering::Acquire) != 0 {
                return;
            }
            match &mut *state {
                MrState::Deregistering { finish, close } => {
                    let callbacks = (finish.take(), close.take());
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
        let staged = [
            PageMap::with_capacity(pages)?,
            PageMap::with_capacity(pages)?,
        ];
        let mut fast = Box::new(Fast {
            key: 0,
            max_pages: pages,
            remote_ok,
            mapped: false,
            active,
            staged,
            staged_busy: [false; STAGE_SLOTS],
            generation: 0,
        });
        let mut state = self.state.lock();
        match &*state {
            MrState::FastUninitialized => {
                fast.key = self
                    .pd
                    .device()
                    .keys
                    .lock()
                    .insert(KeyTarget::Mr(Arc::clone(self)))?;
            }
            MrState::Fast(old) if !old.mapped => {
                fast.key = old.key;
                fast.generation = old.generation.wrapping_add(1);
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
    /// staged slot, whose index the work request carries.
    ///
    /// # Errors
    /// `InvalidState` for a region that is not an initialized fast region,
    /// `InvalidParameter` for a malformed page list, `AccessViolation` for
    /// remote rights on a region initialized without remote access, `Busy`
    /// when [`STAGE_SLOTS`] FastRegisters of the region are outstanding.
    pub fn stage_fast_register(
        &self,
        pages: &[u64],
        fbo: u64,
        len: u64,
        base: u64,
        access: Access,
    ) -> Result<usize, MrError> {
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
        let slot = fast
            .staged_busy
            .iter()
            .position(|busy| !busy)
            .ok_or(MrError::Busy)?;
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
        Ok(slot)
    }

    /// Frees a staged slot: its FastRegister executed, failed or was
    /// cancelled. Idempotent.
    pub fn unstage(&self, slot: usize) {
        if let MrState::Fast(fast) = &mut *self.state.lock()
            && let Some(busy) = fast.staged_busy.get_mut(slot)
        {
            *busy = false;
        }
    }

    /// Executes the FastRegister staged in `slot` (rule M16). Every page must
    /// lie in a live LAM of the device (M33). The slot is freed either way.
    ///
    /// # Errors
    /// `InvalidRequest` when the region is already mapped, not initialized
    /// (or initialized again since the post), or a page is not a live
    /// logical address.
    pub fn fast_register(&self, slot: usize) -> Result<(), WcStatus> {
        let device = self.pd.device();
        let mut state = self.state.lock();
        let MrState::Fast(fast) = &mut *state else {
            return Err(WcStatus::InvalidRequest);
        };
        let Some(busy) = fast.staged_busy.get_mut(slot) else {
            return Err(WcStatus::InvalidRequest);
        };
        if !core::mem::replace(busy, false) || fast.mapped {
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
        self.users.load(Ordering::Acquire) != 0
    }

    /// Releases the region's tokens at close. Returns `Pending` when DMA is
    /// still in flight; `finish` then runs when it ends.
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
            if self.users.load(Ordering::Acquire) == 0 {
                *state = if self.fast {
                    MrState::FastUninitialized
                } else {
                    MrState::Unregistered
                };
                drop(state);
                if let Some(key) = key {
                    self.pd.device().keys.lock().remove(key);
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
            key
        };
        if let Some(key) = key {
            self.pd.device().keys.lock().remove(key);
        }
        // As in `deregister`: the callback runs exactly once, here or when
        // the last use ends, so the close has pended.
        self.finish_if_idle();
        Progress::Pending
    }

    /// Resolves `len` bytes at index `addr` against this region for `need`;
    /// with `registration`, only while registered under that token.
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
        let (base, region_len, access, source) = match &*state {
            MrState::Registered {
                span, base, access, ..
            } => (*base, span.len() as u64, *access, None),
            MrState::Fast(fast) if fast.mapped => (
                fast.active.base,
                fast.active.len,
                fast.active.access,
                Some(fast.generation),
            ),
            _ => return Err(Denied::Token),
        };
        if !access.contains(need) {
            return Err(Denied::Rights);
        }
        // Rule P11 / M34: the range must lie within the region's span.
        let offset = addr.checked_sub(base).ok_or(Denied::Range)?;
        let end = offset.checked_add(len).ok_or(Denied::Range)?;
        if end > region_len {
            return Err(Denied::Range);
        }
        let kind = match (source, &*state) {
            (None, MrState::Registered { span, .. }) => {
                let sub = span
                    .sub(
                        usize::try_from(offset).map_err(|_| Denied::Range)?,
                        usize::try_from(len).map_err(|_| Denied::Range)?,
                    )
                    .ok_or(Denied::Range)?;
                SegmentKind::Contiguous(sub)
            }
            (Some(generation), _) => SegmentKind::Fast {
                mr: Arc::clone(self),
                offset,
                generation,
            },
            _ => return Err(Denied::Token),
        };
        // INVARIANT: the use count covers the segment until it drops, and is
        // taken under the state lock, so a concurrent deregistration either
        // sees it or ran before (and then `resolve` saw no registration).
        self.users.fetch_add(1, Ordering::AcqRel);
        drop(state);
        Ok(Segment {
            kind,
            len,
            holder: Some(Arc::clone(self)),
        })
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
    state: SpinLock<MwState>,
}

impl core::fmt::Debug for Mw {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Mw").finish_non_exhaustive()
    }
}

#[derive(Clone)]
enum MwState {
    /// No binding (M21: windows start unbound).
    Unbound { last_key: u32 },
    /// Bind posted, token assigned (M20), not yet executed.
    Binding { key: u32, next: Option<u32> },
    /// Bound over `[base, base + len)` of `mr` for QP `qp` (M21), while
    /// `mr` stays registered under `mr_key`.
    Bound {
        key: u32,
        mr: Arc<Mr>,
        mr_key: u32,
        base: u64,
        len: u64,
        access: Access,
        qp: u32,
        next: Option<u32>,
    },
    // In `Binding` and `Bound`, `next` is the token of a later Bind posted
    // before an Invalidate of this window executed (Bind, Invalidate, Bind
    // in one deferred chain, or simply ahead of a deferred engine): the
    // Invalidate hands the window to it (rules M21, D2, P18).
}

impl MwState {
    /// The state once the binding (or Bind) under `key` ends: the Bind
    /// posted after it (`next`) is the one outstanding, else the window is
    /// unbound (M21, D2).
    const fn ended(key: u32, next: Option<u32>) -> Self {
        match next {
            Some(next) => Self::Binding {
                key: next,
                next: None,
            },
            None => Self::Unbound { last_key: key },
        }
    }
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
            state: SpinLock::new(MwState::Unbound { last_key: 0 }),
        }))
    }

    /// The window's PD.
    pub const fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The remote token of the current (or last) binding (rule M20); 0 before
    /// the first Bind.
    pub fn remote_key(&self) -> u32 {
        match &*self.state.lock() {
            MwState::Unbound { last_key } => *last_key,
            MwState::Binding { key, next } | MwState::Bound { key, next, .. } => {
                next.unwrap_or(*key)
            }
        }
    }

    /// Checks a Bind at post time and assigns its fresh token (rules M18–M20).
    ///
    /// # Errors
    /// `InvalidParameter` for a window of another PD, a zero or too-long
    /// length (M10), or a range outside the region (M18); `InvalidState` when
    /// two Binds of the window are already outstanding; `AccessViolation` for
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
                span,
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
                .is_some_and(|end| end <= span.len() as u64);
            if !inside {
                return Err(MrError::InvalidParameter);
            }
        }
        let mut state = self.state.lock();
        // A Bind posted while the window is bound, or still binding, waits
        // for an Invalidate posted between the two (checked when it runs).
        let behind = match &*state {
            MwState::Unbound { .. } => false,
            MwState::Binding { next: None, .. } | MwState::Bound { next: None, .. } => true,
            _ => return Err(MrError::InvalidState),
        };
        let key = self
            .pd
            .device()
            .keys
            .lock()
            .insert(KeyTarget::Mw(Arc::clone(self)))?
            | REMOTE_BIT;
        if !behind {
            *state = MwState::Binding { key, next: None };
        } else if let MwState::Binding { next, .. } | MwState::Bound { next, .. } = &mut *state {
            *next = Some(key);
        }
        Ok(key)
    }

    /// Executes a Bind prepared by [`prepare_bind`](Self::prepare_bind).
    ///
    /// # Errors
    /// `InvalidRequest` when the region is no longer registered or the window
    /// was invalidated meanwhile.
    pub fn bind(
        &self,
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
        let mut state = self.state.lock();
        let MwState::Binding { key, next } = &*state else {
            return Err(WcStatus::InvalidRequest);
        };
        let (key, next) = (*key, *next);
        *state = MwState::Bound {
            key,
            mr: Arc::clone(mr),
            mr_key,
            base,
            len,
            access: access.normalized(),
            qp,
            next,
        };
        Ok(())
    }

    /// Undoes a prepared Bind that was never executed (flushed or failed):
    /// the oldest one outstanding, as Binds execute in post order.
    pub fn cancel_bind(&self) {
        let key = {
            let mut state = self.state.lock();
            match &mut *state {
                MwState::Binding { key, next } => {
                    let key = *key;
                    *state = MwState::ended(key, *next);
                    key
                }
                MwState::Bound { next, .. } => match next.take() {
                    Some(key) => key,
                    None => return,
                },
                MwState::Unbound { .. } => return,
            }
        };
        self.pd.device().keys.lock().remove(key);
    }

    /// Invalidates the binding (rule M22): the token grants nothing from now.
    ///
    /// # Errors
    /// `InvalidRequest` when the window is not bound.
    pub fn invalidate(&self) -> Result<(), WcStatus> {
        let key = {
            let mut state = self.state.lock();
            let MwState::Bound { key, next, .. } = &*state else {
                return Err(WcStatus::InvalidRequest);
            };
            let key = *key;
            *state = MwState::ended(key, *next);
            key
        };
        self.pd.device().keys.lock().remove(key);
        Ok(())
    }

    /// Releases the window's token at close.
    pub fn close(&self) {
        let (key, next) = {
            let mut state = self.state.lock();
            let keys = match &*state {
                MwState::Binding { key, next } | MwState::Bound { key, next, .. } => {
                    (Some(*key), *next)
                }
                MwState::Unbound { .. } => (None, None),
            };
            *state = MwState::Unbound { last_key: 0 };
            keys
        };
        let mut table = self.pd.device().keys.lock();
        for key in [key, next].into_iter().flatten() {
            table.remove(key);
        }
    }

    fn resolve(&self, addr: u64, len: u64, need: Access, qp: u32) -> Result<Segment, Denied> {
        let (mr, mr_key, base, window_len, access, bound_qp) = match &*self.state.lock() {
            MwState::Bound {
                mr,
                mr_key,
                base,
                len,
                access,
                qp,
                ..
            } => (Arc::clone(mr), *mr_key, *base, *len, *access, *qp),
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
    /// A range of a fast-registered mapping, read page by page.
    Fast {
        mr: Arc<Mr>,
        offset: u64,
        generation: u64,
    },
}

/// A resolved piece of memory a request reads or writes, holding a use of its
/// region until dropped.
pub struct Segment {
    kind: SegmentKind,
    len: u64,
    holder: Option<Arc<Mr>>,
}

impl core::fmt::Debug for Segment {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Segment")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if let Some(mr) = self.holder.take()
            && mr.users.fetch_sub(1, Ordering::AcqRel) == 1
        {
            mr.finish_if_idle();
        }
    }
}

impl Segment {
    /// A segment over memory that is not a region (privileged-token LAM
    /// memory, or a buffer the caller vouches for).
    pub const fn from_span(span: Span) -> Self {
        Self {
            kind: SegmentKind::Contiguous(span),
            len: span.len() as u64,
            holder: None,
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
        if keys::is_remote(sge.key) {
            return Err(Denied::Token);
        }
        let len = u64::from(sge.len);
        if sge.key == pd.privileged_key() {
            // M27: local read and write by logical address inside a live LAM.
            return self
                .resolve_logical(sge.addr, len)
                .map(Segment::from_span)
                .ok_or(Denied::Range);
        }
        match self.key_target(sge.key) {
            Some(KeyTarget::Mr(mr)) if mr.pd().id() == pd.id() => {
                mr.resolve(sge.addr, len, need, None)
            }
            _ => Err(Denied::Token),
        }
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
            Some(KeyTarget::Mw(mw)) if mw.pd().id() == pd.id() => mw.resolve(addr, len, need, qp),
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
            Some(KeyTarget::Mw(mw)) if mw.pd().id() == pd.id() => mw.invalidate(),
            _ => Err(WcStatus::InvalidRequest),
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests;
