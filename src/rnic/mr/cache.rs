//! The runner's per-pass token cache: the local tokens a pass resolved,
//! each with one use of its region, resolved again with no lock and no count
//! (docs/performance.md, "Region resolution without a lock"; rules M11, L8,
//! L21, L22, P11). A child of `mr` for the region's private state (`users`,
//! `registered`, [`PENDING`](super::PENDING)).

use super::{Denied, Memory, Mr, MrState, PENDING, Pd, Segment, Use, check};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::Ordering;
use crate::rnic::device::Device;
use crate::rnic::types::{Access, Sge};

/// Entries of a [`TokenCache`]: a pass over more regions than this resolves
/// the others through the device's token table, as without a cache.
pub(crate) const CACHE_ENTRIES: usize = 2;

/// A region a runner pass resolved a local token to: the pass's one use of
/// it, and what a resolution needs, read under the region's lock when the
/// entry was made. While the region stays registered under `key` none of
/// this changes: it cannot leave `Deregistering` (hence be registered again)
/// while the entry's use lives.
struct CacheEntry {
    key: u32,
    /// The PD the token was checked against (P11).
    pd: u32,
    base: u64,
    len: u64,
    access: Access,
    memory: Memory,
    /// Resolved for the request in progress: segments it covers may be
    /// alive, so the entry is neither replaced nor released before the
    /// request ends.
    busy: bool,
    region: Use,
}

impl Mr {
    /// A cache entry for `key` of PD `pd` (a runner pass's use of the
    /// region, and what resolutions need), while registered under `key`.
    /// Takes the caller's reference to the region: a miss costs no more
    /// reference counting than the table lookup's.
    fn cache_entry(self: Arc<Self>, key: u32, pd: u32) -> Result<CacheEntry, Denied> {
        let (base, len, access, memory) = {
            let state = self.state.lock();
            let MrState::Registered {
                key: current,
                memory,
                base,
                access,
            } = &*state
            else {
                return Err(Denied::Token);
            };
            if *current != key {
                return Err(Denied::Token);
            }
            self.count_use(&state);
            (*base, memory.len(), *access, memory.clone())
        };
        Ok(CacheEntry {
            key,
            pd,
            base,
            len,
            access,
            memory,
            busy: false,
            region: Use(self),
        })
    }
}

impl CacheEntry {
    /// Resolves through the entry: one load and the range and rights
    /// checks, no lock, no count; the segment holds no use of its own.
    ///
    /// Why this is as safe as the table (M11, L8, L21, L22): `registered`
    /// is cleared under the region's lock before its token leaves the
    /// table, so a request that sees it set could have resolved the token
    /// through the table at that moment too; one posted after the
    /// deregistration returned sees it clear (the post orders after the
    /// clearing) and fails as through the table (`Denied::Token`). If the
    /// deregistration starts just after the load, the request executed
    /// before it; the deregistration then finds the entry's use, pends,
    /// and completes (once, by the last `Use::drop`) when the cache
    /// releases the use: between requests, so after this request's
    /// segments are gone, or at the end of the pass.
    fn resolve(&mut self, addr: u64, len: u64, need: Access) -> Result<Segment, Denied> {
        if !self.region.0.registered.load(Ordering::Acquire) {
            return Err(Denied::Token);
        }
        let offset = check((self.base, self.len, self.access), addr, len, need)?;
        let kind = self.memory.segment(offset, len)?;
        self.busy = true;
        Ok(Segment {
            kind,
            len,
            _holder: None,
        })
    }
}

/// The regions a QP's runner resolved local tokens to during one pass, so
/// that the next requests of the pass over the same tokens take no lock and
/// no count (docs/performance.md, "Region resolution without a lock"). Only
/// regions registered by `Register` are kept: a fast-register region's
/// mapping changes under its token, and windows are remote-only.
///
/// Each entry holds a use of its region, released at the end of the pass
/// (drop), or between requests once a deregistration or close of the region
/// is pending, so that a runner finding new requests for ever never makes
/// one wait for ever. Segments resolved through the cache must not outlive
/// the request they were resolved for (the engine drops them before
/// `execute` returns), and [`between_requests`](Self::between_requests) is
/// called only when no such segment is alive.
#[derive(Default)]
pub(crate) struct TokenCache([Option<CacheEntry>; CACHE_ENTRIES]);

impl TokenCache {
    /// Releases every entry's use, when no segment resolved through the
    /// cache is alive (between requests).
    pub(crate) fn clear(&mut self) {
        for slot in &mut self.0 {
            *slot = None;
        }
    }

    /// Marks the start of a request: no segment resolved through the cache
    /// is alive. Releases the entries of regions whose deregistration or
    /// close is pending (they wait for this use).
    pub(crate) fn between_requests(&mut self) {
        for slot in &mut self.0 {
            if let Some(entry) = slot {
                entry.busy = false;
                if entry.region.0.users.load(Ordering::Acquire) & PENDING != 0 {
                    *slot = None;
                }
            }
        }
    }

    /// [`Device::resolve_local`], through the cache: same checks, same
    /// refusals. A miss makes an entry when one is free or not used by the
    /// request in progress; otherwise it resolves through the table, into
    /// a segment holding a use of its own.
    pub(crate) fn resolve_local(
        &mut self,
        device: &Device,
        pd: &Pd,
        sge: &Sge,
        need: Access,
    ) -> Result<Segment, Denied> {
        let len = u64::from(sge.len);
        let pd_id = pd.id();
        if let Some(entry) = self
            .0
            .iter_mut()
            .flatten()
            .find(|e| e.key == sge.key && e.pd == pd_id)
        {
            return entry.resolve(sge.addr, len, need);
        }
        let Some(mr) = device.local_region(pd, sge)? else {
            return device.resolve_logical_sge(sge);
        };
        let free = self
            .0
            .iter_mut()
            .find(|slot| slot.as_ref().is_none_or(|e| !e.busy));
        match free {
            Some(slot) if !mr.is_fast() => {
                // The entry replaced, if any, covers no live segment.
                let entry = slot.insert(mr.cache_entry(sge.key, pd_id)?);
                entry.resolve(sge.addr, len, need)
            }
            _ => mr.resolve(sge.addr, len, need, None),
        }
    }
}
