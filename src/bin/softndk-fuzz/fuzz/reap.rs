//! Reaping: polls (`NdkGetCqResults` and `NdkGetCqResultsEx`) checked
//! against the outstanding posts, arms, flushes and disconnects; ResizeCq
//! and an SRQ's ModifySrq.

use std::ptr;
use std::time::Duration;

use softndk::abi::{
    NdkCq, NdkCqNotifyType, NdkOperationType, NdkResult, NtStatus, STATUS_BUFFER_OVERFLOW,
    STATUS_CANCELLED, STATUS_INTERNAL_ERROR, STATUS_INVALID_PARAMETER, STATUS_PENDING,
    STATUS_SUCCESS,
};

use super::WAIT;
use super::fuzzer::Fuzzer;
use super::objects::{
    Buffer, Cq, EMPTY_RESULT, EMPTY_RESULT_EX, FAST_REGISTER, INITIATOR_CQ, Link, POLL, Post,
    RECEIVE_QUEUE, SLOT, SRQ_RECEIVE, Side, Slot, SlotUse, UNPLACED, Via, plain, queue_of, table,
};
use super::signal::{Signal, on_status};

impl Fuzzer<'_> {
    /// One `NdkGetCqResults` or (half the time) `NdkGetCqResultsEx` of up
    /// to `room` entries on side `i`'s CQ; the number taken (K1).
    pub(super) fn poll(&mut self, link: &mut Link, i: usize, room: usize) -> usize {
        let c = link.sides[i].any_cq(&mut self.rng);
        self.poll_cq(link, i, c, room)
    }

    /// [`poll`](Self::poll) of side `i`'s CQ `c` ([`Side::cqs`]).
    pub(super) fn poll_cq(&mut self, link: &mut Link, i: usize, c: usize, room: usize) -> usize {
        let ex = !self.rng.chance(50);
        let polled = Polled::take(link.sides[i].cqs[c].ptr, ex, room);
        self.judge_poll(link, (i, c), &polled)
    }

    /// Checks what a poll of side `i`'s CQ `c` took: its count (K1), each
    /// entry's type (P22) and post; the number taken.
    pub(super) fn judge_poll(
        &mut self,
        link: &mut Link,
        (i, c): (usize, usize),
        polled: &Polled,
    ) -> usize {
        let Polled { what, n, room, .. } = *polled;
        self.call(what, STATUS_SUCCESS);
        if n > room {
            self.finding(&format!("{what} returned {n} entries for room {room} (K1)"));
        }
        for entry in polled.taken() {
            let result = entry.result();
            let j = link.owner(i, result.request_context.addr());
            self.out.shared_cq_entries += u64::from(j != i);
            if let Some(kind) = entry.kind {
                self.judge_type(link, j, &result, kind);
            }
            self.reap(link, (j, c), &result);
        }
        n.min(room)
    }

    /// P22: the `Type` of an `NdkGetCqResultsEx` entry names the operation
    /// of its post (a SendAndInvalidate's own entry is a Send; a receive's
    /// is a Receive, or ReceiveAndInvalidate for a peer's
    /// SendAndInvalidate). An entry with no outstanding post is left to
    /// [`Fuzzer::reap`], which reports it.
    fn judge_type(&mut self, link: &Link, i: usize, result: &NdkResult, kind: NdkOperationType) {
        let context = result.request_context.addr();
        let Some(post) = link.post(i, context) else {
            return;
        };
        let allowed: &[NdkOperationType] = match post.what {
            "NdkReceive" | SRQ_RECEIVE => &[
                NdkOperationType::RECEIVE,
                NdkOperationType::RECEIVE_AND_INVALIDATE,
            ],
            "NdkSend" | "NdkSendAndInvalidate" => &[NdkOperationType::SEND],
            "NdkRead" => &[NdkOperationType::READ],
            "NdkWrite" => &[NdkOperationType::WRITE],
            "NdkBind" => &[NdkOperationType::BIND],
            FAST_REGISTER => &[NdkOperationType::FAST_REGISTER],
            "NdkInvalidate" => &[NdkOperationType::INVALIDATE],
            _ => return,
        };
        if !allowed.contains(&kind) {
            self.finding(&format!(
                "{} posted at call {}: its NdkGetCqResultsEx entry (status {:#010x}) has Type {:#x} (P22)",
                post.what,
                post.call,
                result.status.cast_unsigned(),
                kind.0
            ));
        }
    }

    /// `NdkResizeCq` on side `i`'s CQ (K2, K4): it may pend (L8), and must
    /// succeed unless the depth is below the entries the CQ holds (then
    /// `STATUS_BUFFER_OVERFLOW`, unchanged), which it cannot be when at
    /// least the side's requests not yet reaped; a depth above the
    /// adapter's maximum (noise) is `STATUS_INVALID_PARAMETER`. A CQ that
    /// overflowed (noisy links only: a strict link never shrinks its CQ
    /// below its requests outstanding) may answer `STATUS_INTERNAL_ERROR`.
    pub(super) fn resize_cq(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        let c = side.any_cq(&mut self.rng);
        let (cq, old_depth) = (side.cqs[c].ptr, side.cq_depth(c));
        let pool_cq = c == RECEIVE_QUEUE && side.pool_cq;
        let held = link.cq_held(i, c);
        let too_deep = self.invalid();
        // A strict link keeps room for every request it has outstanding (a
        // CQ smaller than that may overflow, E10, as the consumer's fault),
        // and so does every link on a pool's CQ (an overflow would end the
        // pool's later links too).
        let least = if link.strict || pool_cq {
            u32::try_from(held).unwrap_or(u32::MAX).max(1)
        } else {
            1
        };
        let depth = if too_deep {
            u32::MAX
        } else {
            self.rng.range(least, (2 * old_depth).max(least))
        };
        let done = Signal::new();
        // SAFETY: a live CQ; `done` is kept until the request completed.
        let returned = unsafe { (table(cq).ndk_resize_cq)(cq, depth, Some(on_status), done.ctx()) };
        self.call("NdkResizeCq", returned);
        let Some((status, _)) = self.finish("NdkResizeCq", returned, &done) else {
            return;
        };
        let below = (depth as usize) < held;
        let expected = if too_deep {
            status == STATUS_INVALID_PARAMETER
        } else {
            status == STATUS_SUCCESS
                || (below && status == STATUS_BUFFER_OVERFLOW)
                || (!link.strict && status == STATUS_INTERNAL_ERROR)
        };
        if !expected {
            let strict = if link.strict { " on a strict link" } else { "" };
            self.finding(&format!(
                "NdkResizeCq{strict} to depth {depth} with at most {held} entries held completed with {:#010x} (K2, K4)",
                status.cast_unsigned()
            ));
        } else if status == STATUS_SUCCESS {
            for side in &mut link.sides {
                if side.cqs[c].ptr == cq {
                    side.cqs[c].depth = depth;
                }
            }
            if pool_cq && let Some(pool) = &link.sides[i].pool {
                pool.borrow_mut().side.cqs[RECEIVE_QUEUE].depth = depth;
            }
        }
    }

    /// Checks one CQ entry against the outstanding posts.
    pub(super) fn reap(&mut self, link: &mut Link, (i, c): (usize, usize), result: &NdkResult) {
        let context = result.request_context.addr();
        self.remember("entry", result.status, context);
        let side = &mut link.sides[i];
        let qp_ctx = side.qp_ctx;
        if self.config.trace {
            eprintln!(
                "fuzz t{}   link {} side {i} entry {context:#x} status {:#010x}",
                self.thread,
                link.id,
                result.status.cast_unsigned()
            );
        }
        let Some((post, crossed, other_link)) = link.take_post(i, context) else {
            self.finding(&format!(
                "a CQ entry (status {:#010x}) for request context {context:#x}, which has no outstanding post: a duplicate or a stray (P6)",
                result.status.cast_unsigned()
            ));
            return;
        };
        // An SRQ receive posted through another side, taken by this side's
        // QP (Q3); and through another link (E4 when that one is closed).
        self.out.srq_crossed += u64::from(crossed);
        self.out.pool_crossed += u64::from(other_link);
        let side = &mut link.sides[i];
        let due = side.cq_for(queue_of(post.what));
        if c != due {
            self.finding(&format!(
                "{} posted at call {}: its entry came on the {} CQ, not the {} CQ (P1)",
                post.what,
                post.call,
                cq_name(c),
                cq_name(due)
            ));
        }
        let side = &mut link.sides[i];
        if c == RECEIVE_QUEUE
            && side.pool_cq
            && let Some(pool) = &side.pool
        {
            // A pool's CQ: the entry is for a receive of the pool, and
            // carries the context of the QP that took it, on any side of
            // any link on the pool (P21, Q2).
            let taker = pool.borrow().qps.get(&result.qp_context.addr()).copied();
            match taker {
                Some(taker) => self.out.pool_cq_crossed += u64::from(taker != link.id),
                None => self.finding(&format!(
                    "{} posted at call {}: its entry on a pool's CQ carries QP context {:#x}, which no QP on that CQ has (P21)",
                    post.what,
                    post.call,
                    result.qp_context.addr()
                )),
            }
        } else if result.qp_context.addr() != qp_ctx {
            self.finding(&format!(
                "{} posted at call {}: its entry carries QP context {:#x}, not {qp_ctx:#x} (P21)",
                post.what,
                post.call,
                result.qp_context.addr()
            ));
        }
        // A strict link's receive slot is free again once its entry came
        // (whatever its status): the device has done with its bytes.
        side.release(&post);
        // A strict link's window is the peer's to read once its Bind
        // completed.
        if let Some((bind, window, reads)) = side.binding
            && bind == context
        {
            side.binding = None;
            if result.status == STATUS_SUCCESS {
                side.window = Some(window);
                side.window_reads = reads;
            }
        }
        // A mapping is the peer's to use once its FastRegister completed.
        if let Some(fast) = &mut side.fast
            && let Some((registered, region)) = fast.registering
            && registered == context
        {
            fast.registering = None;
            if result.status == STATUS_SUCCESS {
                fast.region = Some(region);
            }
        }
        if let Some(rule) = post.doomed {
            if result.status == STATUS_SUCCESS {
                self.finding(&format!(
                    "{} posted at call {} succeeded, though it breaks {rule}",
                    post.what, post.call
                ));
            } else {
                self.out.doomed_failed += 1;
            }
        }
        if post.what == FAST_REGISTER && result.status == STATUS_SUCCESS {
            self.out.fast_registered += 1;
        }
        match result.status {
            STATUS_SUCCESS => {
                self.out.succeeded += 1;
                if post.silent {
                    self.finding(&format!(
                        "{} posted at call {} with SILENT_SUCCESS got a successful CQ entry (P14)",
                        post.what, post.call
                    ));
                }
            }
            STATUS_CANCELLED => self.out.flushed += 1,
            STATUS_PENDING => {
                self.finding(&format!(
                    "{} posted at call {} completed with STATUS_PENDING",
                    post.what, post.call
                ));
            }
            _ => self.out.failed += 1,
        }
        if link.judged() {
            self.out.judged += 1;
            self.judge_order(&mut link.sides[i], context, &post);
            if queue_of(post.what) == RECEIVE_QUEUE && result.status == STATUS_SUCCESS {
                self.judge_length(&mut link.sides[i], result, &post);
            }
            if let Some(slot) = post.slot
                && let SlotUse::Read { from } = slot.use_
                && result.status == STATUS_SUCCESS
            {
                // A checked Read: the bytes of the peer's sources from
                // `from`, which nothing writes.
                let [a, b] = &link.sides;
                let (side, peer) = if i == 0 { (a, b) } else { (b, a) };
                let source = peer.zones.as_ref().and_then(|zones| {
                    let from = usize::try_from(from).ok()?;
                    zones
                        .source
                        .get(from..from + usize::try_from(slot.len).ok()?)
                });
                if let (Some(source), Some(buffer)) = (source, &side.buffer) {
                    let source = source.to_vec();
                    self.judge_data(buffer, &slot, &source, &post);
                }
            }
            if result.status != STATUS_SUCCESS {
                self.finding(&format!(
                    "{} posted at call {} on a strict link (every request valid, nothing ended by the fuzzer) completed {:#010x}, not STATUS_SUCCESS",
                    post.what,
                    post.call,
                    result.status.cast_unsigned()
                ));
            }
        }
    }

    /// On a strict link: the entry for `context` must name the oldest
    /// request of its queue still owed an entry (P23); silent requests
    /// that it passes completed without one (P14).
    fn judge_order(&mut self, side: &mut Side, context: usize, post: &Post) {
        let queue = &mut side.order[queue_of(post.what)];
        while let Some(&(oldest, silent)) = queue.front() {
            if oldest == context {
                queue.pop_front();
                return;
            }
            if !silent {
                let before = side.outstanding.get(&oldest).map_or(0, |p| p.call);
                self.finding(&format!(
                    "{} posted at call {} completed before the request of its queue posted at call {before} (P23: within a QP each queue completes in post order)",
                    post.what, post.call
                ));
                return;
            }
            queue.pop_front();
        }
        self.finding(&format!(
            "{} posted at call {} has an entry but is not owed one by its queue",
            post.what, post.call
        ));
    }

    /// On a strict link: a successful receive placed as many bytes as the
    /// peer's oldest unmatched Send carried (P21), those bytes, in the
    /// order of its SGEs, and nothing past them.
    fn judge_length(&mut self, side: &mut Side, result: &NdkResult, post: &Post) {
        match side.incoming.pop_front() {
            Some(sent) if sent.bytes.len() as u64 == u64::from(result.bytes_transferred) => {
                if let (Some(slot), Some(buffer)) = (post.slot, &side.buffer) {
                    self.judge_data(buffer, &slot, &sent.bytes, post);
                }
                // The peer's Writes before that Send are placed (RFC 5040
                // §5.5): their landing slots hold their bytes, and are free.
                for write in &sent.writes {
                    if let Some(buffer) = &side.buffer {
                        let by = Post {
                            what: "NdkWrite",
                            call: write.call,
                            silent: false,
                            via: Via::Mr,
                            into_region: false,
                            slot: None,
                            doomed: None,
                        };
                        self.judge_data(buffer, &write.slot, &write.carried, &by);
                    }
                    side.mark(&write.slot, false);
                }
            }
            Some(sent) => self.finding(&format!(
                "NdkReceive posted at call {} placed {} bytes; the peer's Send it took carried {} (P21)",
                post.call,
                result.bytes_transferred,
                sent.bytes.len()
            )),
            None => self.finding(&format!(
                "NdkReceive posted at call {} completed with no Send of the peer to take it",
                post.call
            )),
        }
    }

    /// The bytes of a strict link's receive or checked Read: `expected`
    /// (the Send's, or the peer's sources) scattered over the slot's pieces
    /// in SGE order, the rest of the slot as it was before the request was
    /// posted ([`UNPLACED`]).
    fn judge_data(&mut self, buffer: &Buffer, slot: &Slot, expected: &[u8], post: &Post) {
        self.out.data_checked += 1;
        let (origin, rule) = match slot.use_ {
            SlotUse::Receive => ("the Send carried", "P21: the message, in SGE order"),
            SlotUse::Read { .. } => (
                "the peer's source held",
                "P21: the bytes read, in SGE order",
            ),
            SlotUse::Landing => (
                "the Write carried",
                "RFC 5040 §5.5: a Write is placed before a later Send of its QP completes",
            ),
        };
        let mut rest = expected;
        for &(offset, length) in slot.pieces() {
            let placed = buffer.read(offset, usize::try_from(length).unwrap_or(0));
            let (due, after) = rest.split_at(rest.len().min(placed.len()));
            rest = after;
            let (head, tail) = placed.split_at(due.len());
            if let Some(at) = head.iter().zip(due).position(|(a, b)| a != b) {
                self.finding(&format!(
                    "{} posted at call {}: byte {at} of the piece at buffer offset {offset} is {:#04x}, {origin} {:#04x} there ({rule})",
                    post.what, post.call, head[at], due[at]
                ));
                return;
            }
            if let Some(at) = tail.iter().position(|&b| b != UNPLACED) {
                self.finding(&format!(
                    "{} posted at call {}: byte {} of the piece at buffer offset {offset} was written, past the {} bytes it took",
                    post.what,
                    post.call,
                    due.len() + at,
                    expected.len()
                ));
                return;
            }
        }
        let beyond = SLOT.saturating_sub(slot.len);
        let after = buffer.read(slot.start + slot.len, usize::try_from(beyond).unwrap_or(0));
        if let Some(at) = after.iter().position(|&b| b != UNPLACED) {
            self.finding(&format!(
                "{} posted at call {}: buffer offset {} was written, outside its SGEs",
                post.what,
                post.call,
                slot.start + slot.len + at as u64
            ));
        }
    }

    /// Polls side `i`'s CQs until they are empty (bounded), but a pool's:
    /// its entries, those of this link's QPs too, stay for a later link or
    /// the pool's close to poll (the entries of a closed QP stay in a CQ
    /// other QPs use, with that QP's context, P21).
    pub(super) fn drain(&mut self, link: &mut Link, i: usize) {
        for c in [RECEIVE_QUEUE, INITIATOR_CQ] {
            let side = &link.sides[i];
            if side.cqs[c].ptr.is_null() || (c == RECEIVE_QUEUE && side.pool_cq) {
                continue;
            }
            if (0..100_000).all(|_| self.poll_cq(link, i, c, POLL) != 0) {
                self.finding("a CQ still had entries after 100000 polls");
            }
        }
    }

    /// Whether side `i`'s CQ reported an overflow (E10) or a fatal error
    /// (E11) through its notification callback: from then on no further
    /// completions are reported, so entries missing for requests accepted
    /// before are owed nothing more (E10 overrides P6's one entry; E13
    /// refuses every later post inline). The report comes through an arm
    /// (E12), now or at the next one: if none came yet, the CQ is armed for
    /// errors once and the report waited for (a healthy CQ never answers,
    /// so this waits out [`WAIT`], on a finding only). An overflow nobody
    /// reported stays a finding.
    pub(super) fn cq_failed(&mut self, cq: &Cq) -> bool {
        let reported = |wait| {
            cq.notes
                .saw(&[STATUS_BUFFER_OVERFLOW, STATUS_INTERNAL_ERROR], wait)
        };
        let failed = reported(Duration::ZERO)
            || (!cq.ptr.is_null() && {
                // SAFETY: a live CQ (closed after this check).
                unsafe { (table(cq.ptr).ndk_arm_cq)(cq.ptr, NdkCqNotifyType::ERRORS) };
                self.call("NdkArmCq", STATUS_SUCCESS);
                reported(WAIT)
            });
        self.out.cq_errors += u64::from(failed);
        failed
    }

    pub(super) fn arm(&mut self, link: &mut Link, i: usize) {
        let kind = match self.rng.below(10) {
            0 => NdkCqNotifyType::ERRORS,
            1..=5 => NdkCqNotifyType::ANY,
            6..=8 => NdkCqNotifyType::SOLICITED,
            _ => NdkCqNotifyType(self.rng.range(3, u32::MAX)),
        };
        let side = &link.sides[i];
        let cq = side.cqs[side.any_cq(&mut self.rng)].ptr;
        // SAFETY: a live CQ.
        unsafe { (table(cq).ndk_arm_cq)(cq, kind) };
        self.call("NdkArmCq", STATUS_SUCCESS);
    }

    /// `NdkModifySrq` on side `i`'s SRQ: a new depth (0 keeps it, Q6) and
    /// a threshold (0 keeps it and the arm state; else it re-arms, Q4, Q5).
    /// It may pend (L8). It must succeed, unless the depth is below the
    /// receives the SRQ holds (Q7: `STATUS_BUFFER_OVERFLOW`, unchanged),
    /// which it cannot be when at least the receives posted there and not
    /// yet reaped; a depth above the adapter's maximum (noise) is
    /// `STATUS_INVALID_PARAMETER` (Q6).
    pub(super) fn modify_srq(&mut self, link: &mut Link, i: usize) {
        let side = &link.sides[i];
        let srq = side.srq;
        if srq.is_null() {
            return;
        }
        let held = link.srq_held(i);
        let queue = side
            .pool
            .as_ref()
            .map_or(side.depths.0, |pool| pool.borrow().side.depths.0);
        let too_deep = self.invalid();
        let depth = if too_deep {
            u32::MAX
        } else if self.rng.chance(20) {
            0
        } else {
            self.rng.range(1, 2 * queue.max(1))
        };
        let threshold = if self.rng.chance(50) {
            0
        } else {
            self.rng.range(1, depth.clamp(1, 32))
        };
        let done = Signal::new();
        // SAFETY: a live SRQ; `done` is kept until the request completed.
        let returned = unsafe {
            (table(srq).ndk_modify_srq)(srq, depth, threshold, Some(on_status), done.ctx())
        };
        self.call("NdkModifySrq", returned);
        let Some((status, _)) = self.finish("NdkModifySrq", returned, &done) else {
            return;
        };
        let below = depth != 0 && (depth as usize) < held;
        let expected = if too_deep {
            status == STATUS_INVALID_PARAMETER
        } else {
            status == STATUS_SUCCESS || (below && status == STATUS_BUFFER_OVERFLOW)
        };
        if !expected {
            self.finding(&format!(
                "NdkModifySrq to depth {depth} (threshold {threshold}) with at most {held} receive(s) queued completed with {:#010x} (Q6, Q7)",
                status.cast_unsigned()
            ));
        } else if status == STATUS_SUCCESS && depth != 0 {
            match &link.sides[i].pool {
                Some(pool) => pool.borrow_mut().side.depths.0 = depth,
                None => link.sides[i].depths.0 = depth,
            }
        }
    }

    pub(super) fn flush(&mut self, link: &mut Link, i: usize) {
        let qp = link.sides[i].qp;
        // SAFETY: a live QP.
        unsafe { (table(qp).ndk_flush)(qp) };
        self.call("NdkFlush", STATUS_SUCCESS);
        link.ended = true;
    }

    pub(super) fn disconnect(&mut self, link: &mut Link, i: usize) {
        let connector = link.sides[i].connector;
        if connector.is_null() {
            return;
        }
        let done = Signal::new();
        // SAFETY: a live connector; `done` is kept until it completes.
        let status =
            unsafe { (table(connector).ndk_disconnect)(connector, Some(on_status), done.ctx()) };
        self.call("NdkDisconnect", status);
        link.disconnected = true;
        link.ended = true;
        if status == STATUS_PENDING {
            link.sides[i].disconnecting.push(done);
        }
    }
}

/// A CQ entry as plain data: a poll may run on another thread
/// ([`race`](super::race)), and an [`NdkResult`] holds pointers.
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub(super) status: NtStatus,
    bytes: u32,
    pub(super) qp_context: usize,
    pub(super) request_context: usize,
    /// The `Type` of an `NdkGetCqResultsEx` entry.
    kind: Option<NdkOperationType>,
}

impl Entry {
    const EMPTY: Self = Self {
        status: STATUS_SUCCESS,
        bytes: 0,
        qp_context: 0,
        request_context: 0,
        kind: None,
    };

    fn new(result: &NdkResult, kind: Option<NdkOperationType>) -> Self {
        Self {
            status: result.status,
            bytes: result.bytes_transferred,
            qp_context: result.qp_context.addr(),
            request_context: result.request_context.addr(),
            kind,
        }
    }

    fn result(&self) -> NdkResult {
        NdkResult {
            status: self.status,
            bytes_transferred: self.bytes,
            qp_context: ptr::without_provenance_mut(self.qp_context),
            request_context: ptr::without_provenance_mut(self.request_context),
        }
    }
}

/// What one poll of a CQ took.
#[derive(Clone, Copy)]
pub(super) struct Polled {
    pub(super) what: &'static str,
    pub(super) n: usize,
    room: usize,
    entries: [Entry; POLL],
}

impl Polled {
    /// The entries it took (no more than its room, K1).
    pub(super) fn taken(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(self.n.min(self.room))
    }

    /// One `NdkGetCqResultsEx` (`ex`) or `NdkGetCqResults` of up to `room`
    /// entries (at most [`POLL`]) on `cq`.
    pub(super) fn take(cq: *mut NdkCq, ex: bool, room: usize) -> Self {
        let room = room.min(POLL);
        let count = room as u32;
        let mut entries = [Entry::EMPTY; POLL];
        let (what, n) = if ex {
            let mut results = [EMPTY_RESULT_EX; POLL];
            // SAFETY: a live CQ and room for `room` results.
            let n = unsafe { (table(cq).ndk_get_cq_results_ex)(cq, results.as_mut_ptr(), count) };
            for (entry, result) in entries.iter_mut().zip(&results) {
                *entry = Entry::new(&plain(result), Some(result.type_));
            }
            ("NdkGetCqResultsEx", n)
        } else {
            let mut results = [EMPTY_RESULT; POLL];
            // SAFETY: as above.
            let n = unsafe { (table(cq).ndk_get_cq_results)(cq, results.as_mut_ptr(), count) };
            for (entry, result) in entries.iter_mut().zip(&results) {
                *entry = Entry::new(result, None);
            }
            ("NdkGetCqResults", n)
        };
        Self {
            what,
            n: n as usize,
            room,
            entries,
        }
    }
}

/// How a finding names CQ `c` of a side.
fn cq_name(c: usize) -> &'static str {
    if c == INITIATOR_CQ {
        "initiator"
    } else {
        "receive"
    }
}
