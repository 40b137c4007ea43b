//! Posts: receives, sends, RDMA, binds and invalidates, valid or not, and
//! the accounting of their inline answers.

use std::ptr;

use softndk::abi::{
    NdkFnRead, NdkLogicalAddress, NdkObjectHeader, NdkQp, NdkSge, NdkSrq, NtStatus, OpFlags,
    PAGE_SIZE, STATUS_PENDING, STATUS_SUCCESS,
};

use super::OracleCheck;
use super::fuzzer::Fuzzer;
use super::objects::{
    FAST_REGISTER, Incoming, Landing, Link, Mapping, Post, RDMA_SGE, RECEIVE_SGE, SEND_SGE, SLOT,
    SOURCE, SRQ_RECEIVE, STRAY, Side, Slot, SlotUse, UNPLACED, Via, cut, queue_of, table,
};

impl Fuzzer<'_> {
    /// Accounts for a post's inline answer.
    pub(super) fn posted(
        &mut self,
        link: &mut Link,
        i: usize,
        what: &'static str,
        context: usize,
        silent: bool,
        status: NtStatus,
    ) {
        self.call(what, status);
        if let Some(recent) = self.recent.back_mut() {
            recent.context = context;
        }
        if self.config.trace {
            eprintln!(
                "fuzz t{}   link {} side {i} context {context:#x}",
                self.thread, link.id
            );
        }
        if status == STATUS_SUCCESS {
            self.out.posted += 1;
            let call = self.out.calls;
            let judged = link.judged();
            let side = &mut link.sides[i];
            if judged {
                side.order[queue_of(what)].push_back((context, silent));
            }
            let post = Post {
                what,
                call,
                silent,
                via: Via::Mr,
                into_region: false,
                slot: None,
                doomed: None,
            };
            let reused = match &side.pool {
                Some(pool) if what == SRQ_RECEIVE => {
                    pool.borrow_mut().hold(context, post, (link.id, i))
                }
                _ => side.outstanding.insert(context, post).is_some(),
            };
            if reused {
                self.finding(&format!(
                    "{what}: request context {context:#x} reused by the fuzzer"
                ));
            }
        } else {
            if link.judged() && !link.sides[i].queue_full(what) {
                self.finding(&format!(
                    "{what} on a strict link (every request valid, nothing ended by the fuzzer) was refused with {:#010x}, its queue not full (P24)",
                    status.cast_unsigned()
                ));
            }
            if status == STATUS_PENDING {
                self.finding(&format!(
                    "{what} returned STATUS_PENDING (a work request completes through the CQ, L11)"
                ));
            }
            self.out.refused += 1;
        }
    }

    /// SGEs over `zone` (start, length) of side `i`'s buffer: mostly valid,
    /// sometimes with a wrong token, an address outside the buffer, a zero
    /// length or too many.
    pub(super) fn sges(
        &mut self,
        side: &Side,
        max: u32,
        (lo, hi): (u64, u64),
        zone: (u64, u64),
    ) -> Vec<NdkSge> {
        // A receive without SGEs takes only empty messages (E7): noisy
        // links only.
        let least = u32::from((lo, hi) == RECEIVE_SGE && self.noise == 0);
        let n = if self.invalid() {
            max + 1
        } else {
            self.rng.range(least, max)
        };
        let len = side.buffer_len();
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let length = lo + self.rng.below(hi - lo + 1);
            let offset = zone.0 + self.rng.below(zone.1.saturating_sub(length) + 1);
            let mut length = length;
            let mut address = side.buffer.as_ref().map_or(0, |b| b.address(0)) + offset;
            let mut token = side.local_token;
            // A side that is not strict's: now and then through its
            // fast-registered region, or a LAM page under the PD's
            // privileged token (M27).
            if side.zones.is_none()
                && let Some(fast) = &side.fast
            {
                if let Some(region) = fast.region
                    && self.rng.chance(15)
                {
                    let (base, region) = (region.base, region.length);
                    let at = self.rng.below(region);
                    (address, length, token) =
                        (base + at, length.min(region - at).max(1), fast.local_token);
                    self.out.fast_named += 1;
                } else if let Some(lam) = &fast.lam
                    && self.rng.chance(10)
                {
                    let page = PAGE_SIZE as u64;
                    let at = self.rng.below(page);
                    let logical = lam.pages()[self.rng.index(lam.count())];
                    (address, length, token) =
                        (logical + at, length.min(page - at).max(1), fast.privileged);
                    self.out.fast_named += 1;
                }
            }
            if self.invalid() {
                match self.rng.below(4) {
                    0 => token = u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
                    1 => address = address.wrapping_sub(offset + 1 + self.rng.below(STRAY - 1)),
                    2 => length += len - offset + self.rng.below(STRAY - 1),
                    _ => length = 0,
                }
            }
            out.push(NdkSge {
                address,
                length: u32::try_from(length).unwrap_or(u32::MAX),
                memory_region_token: token,
            });
        }
        out
    }

    /// SGEs over a free slot of side `i` for `use_` (a strict link's): its
    /// first `len` bytes cut into one to `max` pieces, given in a shuffled
    /// order (a scatter that is not the memory's order), the slot first
    /// filled with [`UNPLACED`]; `None` when every slot of that use is held
    /// (its queue is then full).
    fn slot_sges(
        &mut self,
        side: &Side,
        use_: SlotUse,
        len: u64,
        max: u32,
    ) -> Option<(Slot, Vec<NdkSge>)> {
        let zones = side.zones.as_ref()?;
        let count = self.rng.range(1, max) as usize;
        let mut slot = zones.free(use_, len, count, |len| 1 + self.rng.below(len - 1))?;
        let count = slot.count;
        self.shuffle(&mut slot.pieces[..count]);
        side.buffer
            .as_ref()?
            .fill(slot.start, SLOT as usize, UNPLACED);
        Some((slot, side.sges_over(slot.pieces())))
    }

    pub(super) fn trace_flags(&self, flags: u32, sges: &[NdkSge]) {
        if self.config.trace {
            eprintln!("fuzz t{}   flags {flags:#x} sges {sges:x?}", self.thread);
        }
    }

    /// Whether to make this parameter invalid: with the current link's
    /// noise, in percent (0 for a clean link).
    pub(super) fn invalid(&mut self) -> bool {
        self.noise != 0 && self.rng.chance(self.noise)
    }

    /// Flags for an initiator request: never SILENT_SUCCESS unless `silent`.
    /// `solicit`: the operation takes SEND_AND_SOLICIT_EVENT (a Send); on
    /// a noisy link a flag the operation does not take is sometimes added.
    pub(super) fn flags(&mut self, silent: bool, solicit: bool) -> u32 {
        let mut flags = OpFlags::empty();
        if self.rng.chance(10) {
            flags |= OpFlags::DEFER;
        }
        if solicit && self.rng.chance(15) {
            flags |= OpFlags::SEND_AND_SOLICIT_EVENT;
        }
        if self.rng.chance(5) {
            flags |= OpFlags::READ_FENCE;
        }
        if silent {
            flags |= OpFlags::SILENT_SUCCESS;
        }
        if self.invalid() {
            flags |= OpFlags::from_bits_retain(1 << self.rng.below(12));
        }
        flags.bits()
    }

    pub(super) fn receive(&mut self, link: &mut Link, i: usize) {
        if let Some(receive) = self.prepare_receive(link, i) {
            let status = receive.post();
            self.record_receive(link, i, &receive, status);
        }
    }

    /// A receive for side `i`, ready to post: over a free slot of a strict
    /// link's (`None` when every slot is held), over the pool's memory on a
    /// pooled side, else over the side's buffer.
    pub(super) fn prepare_receive(&mut self, link: &Link, i: usize) -> Option<Receive> {
        let side = &link.sides[i];
        let mut into_region = false;
        let (slot, sges) = if side.zones.is_some() {
            let (slot, mut sges) =
                self.slot_sges(side, SlotUse::Receive, SLOT, side.receive_sge)?;
            into_region = self.remap(side, 0, true, &mut sges);
            (Some(slot), sges)
        } else if let Some(pool) = &side.pool {
            // A pool's receive names the pool's memory: the QP of another
            // link may take it after this one closed.
            let pool = pool.borrow();
            if pool.cq_full() {
                return None;
            }
            let zone = (0, pool.side.buffer_len());
            (
                None,
                self.sges(&pool.side, pool.side.receive_sge, RECEIVE_SGE, zone),
            )
        } else {
            let zone = (0, side.buffer_len());
            (None, self.sges(side, side.receive_sge, RECEIVE_SGE, zone))
        };
        self.trace_flags(0, &sges);
        let (queue, srq) = if side.srq.is_null() {
            (side.qp.expose_provenance(), false)
        } else {
            (side.srq.expose_provenance(), true)
        };
        Some(Receive {
            context: self.context(),
            queue,
            srq,
            sges,
            slot,
            into_region,
        })
    }

    /// Accounts for a receive of side `i` posted with `status`.
    pub(super) fn record_receive(
        &mut self,
        link: &mut Link,
        i: usize,
        receive: &Receive,
        status: NtStatus,
    ) {
        let (context, slot, into_region) = (receive.context, receive.slot, receive.into_region);
        self.posted(link, i, receive.what(), context, false, status);
        if status == STATUS_SUCCESS {
            let side = &mut link.sides[i];
            // A pool counts its own (`Pool::hold`).
            side.credits += u64::from(side.pool.is_none());
            if let Some(slot) = slot {
                if self.config.oracle_check == OracleCheck::Scribble
                    && let Some(buffer) = &side.buffer
                {
                    buffer.fill(slot.start + SLOT - 1, 1, !UNPLACED);
                }
                side.hold(context, slot);
            }
            if let Some(post) = side.outstanding.get_mut(&context) {
                post.into_region = into_region;
            }
        }
    }

    pub(super) fn send(&mut self, link: &mut Link, i: usize, invalidate: bool) {
        if link.credits_for(i) == 0 && !self.invalid() {
            return;
        }
        // Invalidating no window fails at the peer and ends the connection:
        // on a clean link, a plain Send then.
        // A strict link invalidates only a window no Read of its own goes
        // through (the Read could find it gone).
        // A link that is not strict may also invalidate the peer's
        // fast-registered region (M24).
        let fast_token = link.sides[1 - i]
            .fast
            .as_ref()
            .filter(|fast| fast.region.is_some() && !link.strict)
            .map(|fast| fast.remote_token);
        let invalidate = invalidate
            && (link.sides[1 - i].window.is_some() || fast_token.is_some() || self.invalid())
            && !(link.strict && link.sides[i].outstanding_via(Via::Window));
        let side = &link.sides[i];
        let silent = self.rng.chance(5);
        let mut flags = self.flags(silent, true);
        let mut sges = self.sges(side, side.initiator_sge, SEND_SGE, side.source_zone());
        // INLINE copies from the SGEs' addresses without a token check: only
        // with addresses inside the buffer.
        if side.inline > 0 && self.rng.chance(20) {
            let base = side.buffer.as_ref().map_or(0, |b| b.address(0));
            let len = side.buffer_len();
            let mut total = 0;
            sges.retain(|s| s.address >= base && s.address + u64::from(s.length) <= base + len);
            for s in &mut sges {
                s.length = s.length.min(32);
                total += s.length;
            }
            if total <= side.inline {
                flags |= OpFlags::INLINE.bits();
            }
        }
        inline_readable(side, flags, &mut sges);
        // The bytes the Send carries: from the sources, which nothing
        // writes on a strict link.
        let carried = side.zones.as_ref().map_or_else(Vec::new, |zones| {
            let base = side.buffer.as_ref().map_or(0, |b| b.address(0));
            sges.iter()
                .flat_map(|s| {
                    let from = usize::try_from(s.address.wrapping_sub(base)).unwrap_or(usize::MAX);
                    zones
                        .source
                        .get(from..from + s.length as usize)
                        .unwrap_or_default()
                })
                .copied()
                .collect()
        });
        self.remap(side, flags, false, &mut sges);
        let qp = side.qp;
        let context = self.context();
        let (request, sgl, n_sge) = (
            ptr::without_provenance_mut(context),
            sges.as_ptr(),
            sges.len() as u32,
        );
        let mut fast_target = false;
        let (what, status) = if invalidate {
            let window = link.sides[1 - i].window.map(|(token, ..)| token);
            let token = match (fast_token, window) {
                _ if self.invalid() => u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
                (Some(fast), None) => {
                    fast_target = true;
                    fast
                }
                (Some(fast), Some(_)) if self.rng.chance(50) => {
                    fast_target = true;
                    fast
                }
                (_, Some(window)) => window,
                (_, None) => u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
            };
            let post = table(qp).ndk_send_and_invalidate;
            // SAFETY: as in `receive`.
            let status = unsafe { post(qp, request, sgl, n_sge, flags, token) };
            ("NdkSendAndInvalidate", status)
        } else {
            // SAFETY: as in `receive`.
            let status = unsafe { (table(qp).ndk_send)(qp, request, sgl, n_sge, flags) };
            ("NdkSend", status)
        };
        self.trace_flags(flags, &sges);
        // SILENT_SUCCESS may also come from a noisy link's stray flag.
        let silent = flags & OpFlags::SILENT_SUCCESS.bits() != 0;
        self.posted(link, i, what, context, silent, status);
        if status == STATUS_SUCCESS {
            let noisy = self.noise != 0;
            let judged = link.judged();
            link.take_credit(i);
            let peer = &mut link.sides[1 - i];
            if judged {
                // The Writes posted before this Send land before it.
                let writes = std::mem::take(&mut peer.writes_in);
                peer.incoming.push_back(Incoming {
                    bytes: carried,
                    writes,
                });
            }
            if fast_target {
                // The region is gone once the Send arrives, which its owner
                // learns only then: it is not mapped again.
                if let Some(fast) = &mut peer.fast {
                    // A FastRegister not yet reaped maps nothing usable
                    // either: the invalidation may come after it.
                    (fast.mapped, fast.region, fast.registering, fast.retired) =
                        (false, None, None, true);
                }
                self.out.fast_named += 1;
            } else if invalidate && !noisy {
                peer.window = None;
                peer.window_retired = link.strict;
            }
        }
    }

    /// A strict side's SGEs (a Send's sources, a receive's slot), some of
    /// them named another way than through its MR: through its
    /// fast-registered region, whose pages come in the order its
    /// FastRegister gave them (M16), or through the LAM page that holds
    /// them under the PD's privileged token (M27, which grants local read
    /// and write). The bytes are checked as for any request: the provider
    /// must translate these addresses to the same memory. Not with INLINE,
    /// which copies from the addresses themselves. `write`: the request
    /// writes there (a receive: the region must grant local write).
    /// Whether an SGE now names the region.
    fn remap(&mut self, side: &Side, flags: u32, write: bool, sges: &mut [NdkSge]) -> bool {
        let (Some(_), Some(fast), Some(buffer)) = (&side.zones, &side.fast, &side.buffer) else {
            return false;
        };
        if flags & OpFlags::INLINE.bits() != 0 {
            return false;
        }
        let (base, page) = (buffer.address(0), PAGE_SIZE as u64);
        let region = fast.region.filter(|region| region.local_write || !write);
        let mut through_region = false;
        for sge in sges {
            let (at, len) = (sge.address.wrapping_sub(base), u64::from(sge.length));
            let lam_page = fast.lam.as_ref().and_then(|lam| {
                let index = usize::try_from(at / page).ok()?;
                lam.pages().get(index).filter(|_| at % page + len <= page)
            });
            if let Some(address) = region.and_then(|region| region.address_of(at, len))
                && self.rng.chance(30)
            {
                (sge.address, sge.memory_region_token) = (address, fast.local_token);
                self.out.sources_remapped += 1;
                through_region = true;
            } else if let Some(&logical) = lam_page
                && self.rng.chance(15)
            {
                (sge.address, sge.memory_region_token) = (logical + at % page, fast.privileged);
                self.out.sources_remapped += 1;
            }
        }
        through_region
    }

    /// A remote address and token on the peer: its MR, its window, its
    /// fast-registered region, or a stray one; the room there, and what
    /// it goes through. A strict link goes through the window only for a
    /// Read the window allows (`read`: the request is a Read).
    pub(super) fn remote(&mut self, peer: &Side, strict: bool, read: bool) -> (u64, u32, u64, Via) {
        let base = peer.buffer.as_ref().map_or(0, |b| b.address(0));
        let len = peer.buffer_len();
        let zone = peer.rdma_zone();
        let offset = zone.0 + self.rng.below(zone.1);
        let mut room = len - offset;
        let mut token = peer.remote_token;
        let mut address = base + offset;
        let mut via = Via::Mr;
        if let Some((window_token, start, window_len)) = peer.window
            && (!strict || (read && peer.window_reads))
            && self.rng.chance(30)
        {
            via = Via::Window;
            token = window_token;
            let within = self.rng.below(window_len.max(1));
            address = base + start + within;
            room = window_len.saturating_sub(within).max(1);
        } else if let Some(fast) = &peer.fast
            && let Some(Mapping {
                base: fast_base,
                length: region,
                ..
            }) = fast.region
            && !strict
            && self.rng.chance(30)
        {
            // Through the peer's fast-registered region (M16, M34).
            let within = self.rng.below(region);
            (token, address, room) = (fast.remote_token, fast_base + within, region - within);
            via = Via::Fast;
            self.out.fast_named += 1;
        }
        if self.invalid() {
            match self.rng.below(3) {
                0 => token = u32::try_from(self.rng.next() & 0xFFFF_FFFF).unwrap_or(0),
                1 => address = base.wrapping_sub(1 + self.rng.below(STRAY - 1)),
                _ => room += self.rng.below(STRAY - 1) + 1,
            }
        }
        (address, token, room, via)
    }

    pub(super) fn rdma(&mut self, link: &mut Link, i: usize, read: bool) {
        // N21: with a read limit of 0 a Read fails; a strict link writes.
        let read = read && !(link.strict && link.read_limit == 0);
        if link.strict && self.rng.chance(50) {
            let checked = if read {
                self.checked_read(link, i)
            } else {
                self.checked_write(link, i)
            };
            if checked {
                return;
            }
        }
        let silent = self.rng.chance(5);
        let flags = self.flags(silent, false);
        let (remote, token, room, via) = {
            let peer = &link.sides[1 - i];
            self.remote(peer, link.strict, read)
        };
        let side = &link.sides[i];
        let mut sges = self.sges(side, side.initiator_sge, RDMA_SGE, side.rdma_zone());
        // Mostly keep the total within the remote room, so that most are
        // valid; else the provider must refuse or fail it.
        if !self.invalid() {
            let mut left = room;
            for s in &mut sges {
                let take = u64::from(s.length).min(left);
                s.length = u32::try_from(take).unwrap_or(0);
                left -= take;
            }
        }
        inline_readable(side, flags, &mut sges);
        let qp = side.qp;
        let context = self.context();
        let d = table(qp);
        let (what, post) = if read {
            ("NdkRead", d.ndk_read)
        } else {
            ("NdkWrite", d.ndk_write)
        };
        let status = self.post_rdma(qp, post, context, &sges, (remote, token), flags);
        // SILENT_SUCCESS may also come from a noisy link's stray flag.
        let silent = flags & OpFlags::SILENT_SUCCESS.bits() != 0;
        self.posted(link, i, what, context, silent, status);
        if let Some(post) = link.sides[i].outstanding.get_mut(&context) {
            post.via = via;
        }
    }

    /// Posts a Write or a Read (`post`: the slots share one signature) of
    /// `sges` at the peer's `remote` address under `token`; its inline
    /// answer.
    fn post_rdma(
        &mut self,
        qp: *mut NdkQp,
        post: NdkFnRead,
        context: usize,
        sges: &[NdkSge],
        (remote, token): (u64, u32),
        flags: u32,
    ) -> NtStatus {
        // SAFETY: a live QP and SGEs over the side's buffer or its guard,
        // as in `receive`; the remote address is an index.
        let status = unsafe {
            post(
                qp,
                ptr::without_provenance_mut(context),
                sges.as_ptr(),
                sges.len() as u32,
                remote,
                token,
                flags,
            )
        };
        self.trace_flags(flags, sges);
        status
    }

    /// A strict link's Read whose bytes are checked when its entry comes:
    /// from the peer's Send sources, which nothing writes, into a free Read
    /// slot of side `i`, never silent (its entry frees the slot); `false`
    /// when every Read slot is held.
    fn checked_read(&mut self, link: &mut Link, i: usize) -> bool {
        let from = self.rng.below(SOURCE);
        let len = 1 + self.rng.below(SOURCE - from);
        let side = &link.sides[i];
        let Some((slot, mut sges)) =
            self.slot_sges(side, SlotUse::Read { from }, len, side.initiator_sge)
        else {
            return false;
        };
        let flags = self.flags(false, false);
        // The sink, now and then through this side's region or LAM page (a
        // Read sink needs only local write: M9).
        let into_region = self.remap(side, flags, true, &mut sges);
        let peer = &link.sides[1 - i];
        let mut remote = peer.buffer.as_ref().map_or(0, |b| b.address(0)) + from;
        let mut token = peer.remote_token;
        let mut via = Via::Mr;
        // Now and then through the peer's fast-registered region, where its
        // FastRegister's page order put the sources (M16), when it granted
        // remote read.
        if let Some(fast) = &peer.fast
            && let Some(region) = fast.region
            && region.remote_read
            && let Some(address) = region.address_of(from, len)
            && self.rng.chance(40)
        {
            (remote, token, via) = (address, fast.remote_token, Via::Fast);
            self.out.sources_remapped += 1;
        }
        let qp = side.qp;
        let context = self.context();
        let read = table(qp).ndk_read;
        let status = self.post_rdma(qp, read, context, &sges, (remote, token), flags);
        self.posted(link, i, "NdkRead", context, false, status);
        if status == STATUS_SUCCESS {
            link.sides[i].hold(context, slot);
            if let Some(post) = link.sides[i].outstanding.get_mut(&context) {
                (post.via, post.into_region) = (via, into_region);
            }
        }
        true
    }

    /// A strict link's Write whose bytes are checked at the peer once a
    /// later Send of this side is received there: from this side's Send
    /// sources (1 to 256 bytes cut into pieces given in a shuffled order,
    /// a gather that is not the memory's order) into a free landing slot of
    /// the peer; `false` when every landing slot of the peer is held.
    fn checked_write(&mut self, link: &mut Link, i: usize) -> bool {
        let from = self.rng.below(SOURCE);
        let len = 1 + self.rng.below(SOURCE - from);
        let count = self.rng.range(1, link.sides[i].initiator_sge) as usize;
        let Some(slot) = link.sides[1 - i]
            .zones
            .as_ref()
            .and_then(|zones| zones.free(SlotUse::Landing, len, 1, |len| len / 2))
        else {
            return false;
        };
        // The source pieces: `from..from + len` of this side's sources.
        let (mut pieces, count) = cut(from, len, count, |len| 1 + self.rng.below(len - 1));
        let pieces = &mut pieces[..count];
        self.shuffle(pieces);
        let side = &link.sides[i];
        let Some(zones) = &side.zones else {
            return false;
        };
        let flags = self.flags(false, false);
        let mut sges = side.sges_over(pieces);
        self.remap(side, flags, false, &mut sges);
        let carried: Vec<u8> = pieces
            .iter()
            .flat_map(|&(offset, length)| {
                let at = usize::try_from(offset).unwrap_or(usize::MAX);
                let n = usize::try_from(length).unwrap_or(0);
                zones.source.get(at..at + n).unwrap_or_default()
            })
            .copied()
            .collect();
        let peer = &link.sides[1 - i];
        let Some(target) = &peer.buffer else {
            return false;
        };
        // Nothing names the free slot: it may be written now.
        target.fill(slot.start, SLOT as usize, UNPLACED);
        let mut remote = target.address(0) + slot.start;
        let mut token = peer.remote_token;
        // Now and then through the peer's fast-registered region, where its
        // FastRegister's page order put the slot (M16), when it granted
        // remote write.
        let mut via_region = false;
        if let Some(fast) = &peer.fast
            && let Some(region) = fast.region
            && region.remote_write
            && let Some(address) = region.address_of(slot.start, len)
            && self.rng.chance(40)
        {
            (remote, token, via_region) = (address, fast.remote_token, true);
            self.out.sources_remapped += 1;
        }
        let (qp, context) = (side.qp, self.context());
        let write = table(qp).ndk_write;
        let status = self.post_rdma(qp, write, context, &sges, (remote, token), flags);
        self.posted(link, i, "NdkWrite", context, false, status);
        if status == STATUS_SUCCESS {
            let call = self.out.calls;
            let peer = &mut link.sides[1 - i];
            peer.mark(&slot, true);
            peer.writes_in.push(Landing {
                slot,
                carried,
                call,
                via_region,
            });
        }
        true
    }

    pub(super) fn bind(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        // Binding a bound window fails the request: noisy links only.
        if (side.window.is_some() || side.binding.is_some() || side.window_retired)
            && !self.invalid()
        {
            return;
        }
        let len = side.buffer_len();
        let zone = side.rdma_zone();
        let start = zone.0 + self.rng.below(zone.1);
        let mut window = 1 + self.rng.below(len - start);
        if self.invalid() {
            window += len;
        }
        let address = side.buffer.as_ref().map_or(0, |b| b.address(0)) + start;
        let mut flags = OpFlags::empty();
        if self.rng.chance(70) {
            flags |= OpFlags::ALLOW_REMOTE_READ;
        }
        if self.rng.chance(70) {
            flags |= OpFlags::ALLOW_REMOTE_WRITE;
        }
        if self.rng.chance(10) {
            flags |= OpFlags::DEFER;
        }
        let (qp, mr, mw) = (side.qp, side.mr, side.mw);
        let context = self.context();
        // SAFETY: live QP, MR and MW; the virtual address is an index.
        let status = unsafe {
            (table(qp).ndk_bind)(
                qp,
                ptr::without_provenance_mut(context),
                mr,
                mw,
                ptr::without_provenance_mut(usize::try_from(address).unwrap_or(0)),
                usize::try_from(window).unwrap_or(0),
                flags.bits(),
            )
        };
        self.posted(link, i, "NdkBind", context, false, status);
        if status == STATUS_SUCCESS {
            // SAFETY: a live MW (M20: its token is readable once Bind returned).
            let token = unsafe { (table(mw).ndk_get_remote_token_from_mw)(mw) };
            self.call("NdkGetRemoteTokenFromMw", STATUS_SUCCESS);
            let reads = flags.contains(OpFlags::ALLOW_REMOTE_READ);
            if link.strict {
                link.sides[i].binding = Some((context, (token, start, window), reads));
            } else {
                link.sides[i].window = Some((token, start, window));
            }
        }
    }

    /// `NdkFastRegister` of side `i`'s fast-register MR (M16): 1 to its
    /// initialized page count of the LAM's pages in a random order, an FBO
    /// below a page, a length that fits, a base of the FBO plus whole pages,
    /// and rights it was initialized for (M15). A clean link maps only an
    /// unmapped MR (mapping a mapped one fails the request). On a noisy
    /// link half of those of an unmapped MR break one of M1, M13, M15 or
    /// M16, or name a page no LAM holds (M33): such a request must not
    /// succeed.
    pub(super) fn fast_register(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        let Some(fast) = &side.fast else {
            return;
        };
        let Some(lam) = &fast.lam else {
            return;
        };
        if fast.mr.is_null() || ((fast.mapped || fast.retired) && !self.invalid()) {
            return;
        }
        let page = PAGE_SIZE as u64;
        let mut pages = lam.pages().to_vec();
        self.shuffle(&mut pages);
        let most = fast.pages.min(pages.len() as u32).max(1);
        let count = self.rng.range(1, most);
        pages.truncate(count as usize);
        let mut fbo = self.rng.below(page);
        let span = u64::from(count) * page - fbo;
        let mut length = 1 + self.rng.below(span);
        let mut base = fbo + page * self.rng.below(1 << 20);
        let mut flags = OpFlags::empty();
        if self.rng.chance(60) {
            flags |= OpFlags::ALLOW_LOCAL_WRITE;
        }
        if fast.remote_access {
            if self.rng.chance(60) {
                flags |= OpFlags::ALLOW_REMOTE_READ;
            }
            if self.rng.chance(60) {
                flags |= OpFlags::ALLOW_REMOTE_WRITE;
            }
        }
        if self.rng.chance(10) {
            flags |= OpFlags::DEFER;
        }
        let mut mr = fast.mr;
        let mut doomed = None;
        // Half of a noisy link's FastRegisters of an unmapped MR break one
        // rule, so that nothing else can fail them.
        if self.noise != 0 && !fast.mapped && !fast.retired && self.rng.chance(50) {
            match self.rng.below(7) {
                0 => {
                    // More pages than the MR was initialized for.
                    let more = fast.pages as usize + 1 + self.rng.index(4);
                    pages.resize(more, lam.pages()[0]);
                    doomed = Some("M13: more pages than initialized");
                }
                1 => {
                    fbo += page;
                    base += page;
                    doomed = Some("M16: an FBO of a page or more");
                }
                2 => {
                    length = span + 1 + self.rng.below(page);
                    doomed = Some("M16: longer than the pages after the FBO");
                }
                3 => {
                    base += 1 + self.rng.below(page - 1);
                    doomed = Some("M16: a base that is not the FBO plus whole pages");
                }
                4 => {
                    let at = self.rng.index(pages.len());
                    pages[at] = self.rng.next() | 1;
                    doomed = Some("M33: a page no LAM holds");
                }
                5 if !fast.remote_access => {
                    flags |= OpFlags::ALLOW_REMOTE_WRITE;
                    doomed = Some("M15: remote rights on an MR initialized without");
                }
                _ => {
                    mr = side.mr;
                    doomed = Some("M1: a RegisterMr MR");
                }
            }
        }
        // Which of the buffer's pages each page given is.
        let mut order = [usize::MAX; Mapping::MOST];
        for (slot, page) in order.iter_mut().zip(&pages) {
            *slot = lam
                .pages()
                .iter()
                .position(|p| p == page)
                .unwrap_or(usize::MAX);
        }
        let mapping = Mapping {
            base,
            length,
            fbo,
            order,
            count: pages.len().min(Mapping::MOST),
            local_write: flags.contains(OpFlags::ALLOW_LOCAL_WRITE),
            remote_read: flags.contains(OpFlags::ALLOW_REMOTE_READ),
            remote_write: flags.contains(OpFlags::ALLOW_REMOTE_WRITE),
        };
        let qp = side.qp;
        let context = self.context();
        let array: Vec<NdkLogicalAddress> = pages.iter().map(|&p| p.cast_signed()).collect();
        // SAFETY: a live QP and MR; the page array is readable during the
        // call (the provider copies it, M16); the base is an index (M5).
        let status = unsafe {
            (table(qp).ndk_fast_register)(
                qp,
                ptr::without_provenance_mut(context),
                mr,
                array.len() as u32,
                array.as_ptr(),
                u32::try_from(fbo).unwrap_or(u32::MAX),
                usize::try_from(length).unwrap_or(usize::MAX),
                ptr::without_provenance_mut(usize::try_from(base).unwrap_or(0)),
                flags.bits(),
            )
        };
        self.trace_flags(flags.bits(), &[]);
        self.posted(link, i, FAST_REGISTER, context, false, status);
        self.doom(link, i, (context, status), doomed);
        if status == STATUS_SUCCESS
            && doomed.is_none()
            && let Some(fast) = &mut link.sides[i].fast
        {
            fast.mapped = true;
            fast.registering = Some((context, mapping));
            fast.region = None;
        }
    }

    /// `NdkInvalidate` of side `i`'s fast-register MR (M22): a clean link
    /// invalidates only a mapped one; on a noisy link an unmapped one's
    /// Invalidate must not succeed.
    fn invalidate_fast(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        let Some(fast) = &side.fast else {
            return;
        };
        if fast.mr.is_null() || (!fast.mapped && !self.invalid()) {
            return;
        }
        // A strict link invalidates it only while no Read of the peer's
        // goes through it, no receive or Read of its own writes into it and
        // no Write of the peer's through it may still be landing (each
        // could find it gone: the Invalidate is not ordered with them).
        if link.strict
            && (link.sides[1 - i].outstanding_via(Via::Fast)
                || link.sides[i].writing_into_region()
                || link.sides[i].landing_via_region())
        {
            return;
        }
        // After the peer's SendAndInvalidate the MR may still be mapped
        // (the Send not yet arrived): no rule then.
        let doomed = (!fast.mapped && !fast.retired).then_some("M22: an MR with nothing mapped");
        let mr = fast.mr;
        let (context, status) = self.post_invalidate(link, i, mr.cast());
        self.doom(link, i, (context, status), doomed);
        if status == STATUS_SUCCESS
            && let Some(fast) = &mut link.sides[i].fast
        {
            // A FastRegister posted before it and not yet reaped maps
            // nothing once its entry comes: the Invalidate runs after it.
            (fast.mapped, fast.region, fast.registering) = (false, None, None);
        }
    }

    /// Posts an Invalidate of `target` (side `i`'s window or fast-register
    /// MR) on side `i`'s QP, DEFER now and then; its context and inline
    /// answer.
    fn post_invalidate(
        &mut self,
        link: &mut Link,
        i: usize,
        target: *mut NdkObjectHeader,
    ) -> (usize, NtStatus) {
        let qp = link.sides[i].qp;
        let context = self.context();
        let flags = if self.rng.chance(10) {
            OpFlags::DEFER.bits()
        } else {
            0
        };
        // SAFETY: a live QP, and a live MW or MR of its PD.
        let status = unsafe {
            (table(qp).ndk_invalidate)(qp, ptr::without_provenance_mut(context), target, flags)
        };
        self.posted(link, i, "NdkInvalidate", context, false, status);
        (context, status)
    }

    /// Records that the request `context` of side `i` breaks `doomed` (if
    /// any): refused inline it is counted now; accepted, its entry must not
    /// be a success ([`Post::doomed`]).
    fn doom(
        &mut self,
        link: &mut Link,
        i: usize,
        (context, status): (usize, NtStatus),
        doomed: Option<&'static str>,
    ) {
        if status != STATUS_SUCCESS {
            self.out.doomed_failed += u64::from(doomed.is_some());
        } else if let Some(post) = link.sides[i].outstanding.get_mut(&context) {
            post.doomed = doomed;
        }
    }

    pub(super) fn invalidate(&mut self, link: &mut Link, i: usize) {
        if link.sides[i].fast.is_some() && self.rng.chance(50) {
            self.invalidate_fast(link, i);
            return;
        }
        let side = &link.sides[i];
        // Invalidating a window never bound fails the request and ends the
        // connection: only on a noisy link. A strict link invalidates only a
        // window no Read of the peer's goes through.
        if (side.window.is_none() && !self.invalid())
            || (link.strict && link.sides[1 - i].outstanding_via(Via::Window))
        {
            return;
        }
        let mw = side.mw;
        let (_, status) = self.post_invalidate(link, i, mw.cast());
        // The token is stale now; a noisy link keeps trying it.
        if status == STATUS_SUCCESS && self.noise == 0 {
            link.sides[i].window = None;
        }
    }
}

/// With INLINE (asked for, or a noisy link's stray flag) the provider reads
/// the SGEs' addresses as pointers (P12): a consumer names only memory it
/// has, so the SGEs that name a fast-registered region's addresses or LAM
/// pages (not pointers) are left out.
fn inline_readable(side: &Side, flags: u32, sges: &mut Vec<NdkSge>) {
    if flags & OpFlags::INLINE.bits() != 0
        && let Some(buffer) = &side.buffer
    {
        sges.retain(|s| buffer.holds(s.address, s.length));
    }
}

/// A receive ready to post, as plain data (it may be posted from another
/// thread, [`race`](super::race)).
#[derive(Clone)]
pub(super) struct Receive {
    context: usize,
    /// The QP, or the SRQ (`srq`), it goes to.
    queue: usize,
    srq: bool,
    sges: Vec<NdkSge>,
    slot: Option<Slot>,
    into_region: bool,
}

impl Receive {
    /// The call it is.
    pub(super) const fn what(&self) -> &'static str {
        if self.srq { SRQ_RECEIVE } else { "NdkReceive" }
    }

    /// Posts it: what the call returned.
    pub(super) fn post(&self) -> NtStatus {
        let request = ptr::without_provenance_mut(self.context);
        let (sges, count) = (self.sges.as_ptr(), self.sges.len() as u32);
        if self.srq {
            let srq: *mut NdkSrq = ptr::with_exposed_provenance_mut(self.queue);
            // SAFETY: a live SRQ (closed after its QPs); every SGE names
            // memory of the side's or the pool's buffer or its guard, which
            // outlives the SRQ.
            unsafe { (table(srq).ndk_srq_receive)(srq, request, sges, count) }
        } else {
            let qp: *mut NdkQp = ptr::with_exposed_provenance_mut(self.queue);
            // SAFETY: a live QP; the SGEs as above, memory that outlives the
            // QP.
            unsafe { (table(qp).ndk_receive)(qp, request, sges, count) }
        }
    }
}
