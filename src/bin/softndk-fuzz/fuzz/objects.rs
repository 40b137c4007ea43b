//! What a thread holds: provider objects and their dispatch tables,
//! registered buffers between guard pages, links and their sides.

use std::collections::{HashMap, VecDeque};
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use softndk::abi::{
    AF_INET, InAddr, Mdl, NdkAdapter, NdkConnector, NdkCq, NdkFnCloseObject, NdkListener,
    NdkLogicalAddressMapping, NdkMr, NdkMw, NdkOperationType, NdkPd, NdkQp, NdkResult, NdkResultEx,
    NdkSge, NdkSharedEndpoint, NdkSrq, PAGE_SIZE, STATUS_SUCCESS, SockAddrIn,
};

use super::pool::Shared;
use super::signal::Signal;

/// A provider object type and its dispatch table.
pub(super) trait Dispatched {
    type Table: 'static;
    /// The object's dispatch table. The fuzzer passes only objects the
    /// provider created and that are still open (a safe function, so that
    /// it can be called inside the `unsafe` block of the call it feeds).
    fn read(object: *mut Self) -> &'static Self::Table;
}

macro_rules! dispatched {
    ($($object:ty => $table:ty),* $(,)?) => {$(
        impl Dispatched for $object {
            type Table = $table;
            fn read(object: *mut Self) -> &'static $table {
                // SAFETY: a live object the provider created (the fuzzer
                // passes no other): its header and dispatch pointer are
                // readable while it is open.
                let table = unsafe { (*object).dispatch };
                // SAFETY: the provider's dispatch tables are static and full.
                unsafe { &*table }
            }
        }
    )*};
}

dispatched! {
    NdkAdapter => softndk::abi::NdkAdapterDispatch,
    NdkCq => softndk::abi::NdkCqDispatch,
    NdkPd => softndk::abi::NdkPdDispatch,
    NdkQp => softndk::abi::NdkQpDispatch,
    NdkSrq => softndk::abi::NdkSrqDispatch,
    NdkMr => softndk::abi::NdkMrDispatch,
    NdkMw => softndk::abi::NdkMwDispatch,
    NdkConnector => softndk::abi::NdkConnectorDispatch,
    NdkListener => softndk::abi::NdkListenerDispatch,
    NdkSharedEndpoint => softndk::abi::NdkSharedEndpointDispatch,
}

/// A provider object the fuzzer closes through its own table's close slot.
pub(super) trait Closable: Dispatched {
    /// The close's name in traces and findings.
    const CLOSE: &'static str;
    /// The close slot of the object's table.
    fn close_slot(table: &Self::Table) -> NdkFnCloseObject;
}

macro_rules! closable {
    ($($object:ty => $what:literal, $slot:ident;)*) => {$(
        impl Closable for $object {
            const CLOSE: &'static str = $what;
            fn close_slot(table: &Self::Table) -> NdkFnCloseObject {
                table.$slot
            }
        }
    )*};
}

closable! {
    NdkCq => "NdkCloseCq", ndk_close_cq;
    NdkPd => "NdkClosePd", ndk_close_pd;
    NdkQp => "NdkCloseQp", ndk_close_qp;
    NdkSrq => "NdkCloseSrq", ndk_close_srq;
    NdkMr => "NdkCloseMr", ndk_close_mr;
    NdkMw => "NdkCloseMw", ndk_close_mw;
    NdkConnector => "NdkCloseConnector", ndk_close_connector;
    NdkListener => "NdkCloseListener", ndk_close_listener;
}

/// The dispatch table of a live provider object.
pub(super) fn table<T: Dispatched>(object: *mut T) -> &'static T::Table {
    T::read(object)
}

/// Bytes before and after each registered buffer that nobody may write.
pub(super) const GUARD: usize = PAGE_SIZE;
/// The guard bytes' value.
pub(super) const GUARD_BYTE: u8 = 0x5A;
/// How far outside its buffer an invalid address may point (inside the
/// guard, so a missed bounds check writes the guard instead of crashing).
pub(super) const STRAY: u64 = 256;

/// A page-aligned buffer between two guard pages, and its MDL.
pub(super) struct Buffer {
    pub(super) storage: Vec<u8>,
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) mdl: Box<Mdl>,
}

impl Buffer {
    pub(super) fn new(len: usize) -> Self {
        let mut storage = vec![GUARD_BYTE; len + 2 * GUARD + PAGE_SIZE];
        let base = storage.as_mut_ptr();
        let start = base.align_offset(PAGE_SIZE) + GUARD;
        storage[start..start + len].fill(0);
        let start_va = base.wrapping_add(start);
        let byte_count = u32::try_from(len).unwrap_or(u32::MAX);
        let mdl = Box::new(Mdl::over(start_va.cast(), 0, byte_count));
        Self {
            storage,
            start,
            len,
            mdl,
        }
    }

    /// The address of byte `offset` of the buffer (any offset: an invalid
    /// address is made from one outside it).
    pub(super) fn address(&self, offset: i64) -> u64 {
        let base = self.storage.as_ptr().wrapping_add(self.start);
        (base.expose_provenance() as u64).wrapping_add_signed(offset)
    }

    /// The address of the `len` bytes at `offset`, if they lie inside the
    /// buffer.
    fn inside(&self, offset: u64, len: usize) -> Option<usize> {
        let end = offset.checked_add(len as u64)?;
        (end <= self.len as u64).then(|| self.address(offset.cast_signed()) as usize)
    }

    /// A copy of the `len` bytes at `offset`, read as the device reads
    /// them, while it may be writing other bytes of the buffer.
    pub(super) fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        if let Some(at) = self.inside(offset, len) {
            let from: *const u8 = ptr::with_exposed_provenance(at);
            // SAFETY: `offset..offset + len` lies inside the buffer, which
            // `self` keeps alive; the oracle reads only bytes no request
            // outstanding names, so nothing writes them meanwhile.
            unsafe { ptr::copy_nonoverlapping(from, out.as_mut_ptr(), len) };
        }
        out
    }

    /// Sets the `len` bytes at `offset` to `byte`, as the device writes,
    /// while it may be using other bytes of the buffer.
    pub(super) fn fill(&self, offset: u64, len: usize, byte: u8) {
        if let Some(at) = self.inside(offset, len) {
            let to: *mut u8 = ptr::with_exposed_provenance_mut(at);
            // SAFETY: as in `read`: inside the buffer, and named by no
            // request outstanding, so the device neither reads nor writes
            // these bytes meanwhile.
            unsafe { ptr::write_bytes(to, byte, len) };
        }
    }

    /// Whether the `len` bytes at `address` are memory of the buffer or
    /// its guards: what an INLINE request may name (the provider reads its
    /// SGEs' addresses as pointers, P12, whatever their token says).
    pub(super) fn holds(&self, address: u64, len: u32) -> bool {
        let start = self.storage.as_ptr().expose_provenance() as u64;
        let end = start + self.storage.len() as u64;
        address >= start && address.saturating_add(u64::from(len)) <= end
    }

    /// Whether every guard byte still holds its value.
    pub(super) fn guards_intact(&self) -> bool {
        let (before, rest) = self.storage.split_at(self.start);
        let after = rest.get(self.len..).unwrap_or_default();
        before.iter().chain(after).all(|&b| b == GUARD_BYTE)
    }
}

/// The queue a post of `what` goes to: the receive queue
/// ([`RECEIVE_QUEUE`]) or the initiator queue (Sends, RDMA, Binds,
/// Invalidates); an index of [`Side::order`].
pub(super) fn queue_of(what: &str) -> usize {
    usize::from(!is_receive(what))
}

/// Whether a post of `what` is a receive: to the QP's own queue, or to its
/// SRQ (Q2: a QP with an SRQ takes its receives from there).
pub(super) fn is_receive(what: &str) -> bool {
    what == "NdkReceive" || what == SRQ_RECEIVE
}

/// A receive posted to the side's SRQ. Unlike a QP's own receives, it
/// survives the QP's flush, disconnect and close (E4) and is owed no entry
/// once the QP is closed: the SRQ's close drops what it still holds.
pub(super) const SRQ_RECEIVE: &str = "NdkSrqReceive";
/// The name of a FastRegister post.
pub(super) const FAST_REGISTER: &str = "NdkFastRegister";

/// [`queue_of`] a receive.
pub(super) const RECEIVE_QUEUE: usize = 0;

/// The index of a side's initiator CQ in [`Side::cqs`].
pub(super) const INITIATOR_CQ: usize = 1;

/// A CQ of a side.
pub(super) struct Cq {
    pub(super) ptr: *mut NdkCq,
    /// Its notifications (and its error reports, E12).
    pub(super) notes: Arc<Signal>,
    /// Its depth. A CQ may overflow (posts to a queue in error complete at
    /// once, E1, E5, or one is injected): whether it did is asked of the
    /// CQ when entries are missing ([`Fuzzer::cq_failed`](super::Fuzzer::cq_failed)).
    pub(super) depth: u32,
}

impl Cq {
    pub(super) fn new() -> Self {
        Self {
            ptr: ptr::null_mut(),
            notes: Signal::new(),
            depth: 0,
        }
    }

    /// The same CQ, for the other side of a link that shares it.
    pub(super) fn share(&self) -> Self {
        Self {
            ptr: self.ptr,
            notes: Arc::clone(&self.notes),
            depth: self.depth,
        }
    }
}

/// An outstanding post, by request context.
#[derive(Clone, Copy, Debug)]
pub(super) struct Post {
    pub(super) what: &'static str,
    pub(super) call: u64,
    pub(super) silent: bool,
    /// What it named the peer's memory through (strict links count the
    /// Reads through a window or a fast-registered region: it is not
    /// invalidated while one is outstanding).
    pub(super) via: Via,
    /// Whether its SGEs name this side's own fast-registered region for
    /// writing (a receive, a Read's sink): strict links do not invalidate
    /// the region while one is outstanding (the Invalidate is not ordered
    /// with receives, nor with a Read's response).
    pub(super) into_region: bool,
    /// A strict link's receive: the slot its SGEs cover.
    pub(super) slot: Option<Slot>,
    /// The rule a request breaks (a FastRegister or an Invalidate the
    /// region cannot take): it must not succeed.
    pub(super) doomed: Option<&'static str>,
}

/// What a request names memory through, where it matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Via {
    /// The registered MRs (or where it does not matter).
    Mr,
    /// The peer's window (an RDMA request).
    Window,
    /// The peer's fast-registered region (an RDMA request).
    Fast,
}

/// A LAM (`NdkBuildLam`) over a side's whole buffer, in storage of its
/// own: the `NDK_LOGICAL_ADDRESS_MAPPING` header, then one logical address
/// a page.
pub(super) struct Lam {
    pub(super) storage: Vec<u64>,
}

impl Lam {
    /// The header's 16 bytes, as 64-bit words.
    const HEADER: usize = 2;

    /// Room for a LAM of `size` bytes (`*pLAMSize`).
    pub(super) fn new(size: u32) -> Self {
        Self {
            storage: vec![0; (size as usize).div_ceil(8).max(Self::HEADER)],
        }
    }

    pub(super) fn ptr(&mut self) -> *mut NdkLogicalAddressMapping {
        self.storage.as_mut_ptr().cast()
    }

    /// `AdapterPageCount`.
    pub(super) fn count(&self) -> usize {
        (self.storage[1] & 0xFFFF_FFFF) as usize
    }

    /// The logical addresses of its pages (`AdapterPageArray`).
    pub(super) fn pages(&self) -> &[u64] {
        let end = (Self::HEADER + self.count()).min(self.storage.len());
        &self.storage[Self::HEADER..end]
    }
}

/// A side's fast-register MR (M13–M17, M22, M35), the LAM its pages come
/// from, and what the fuzzer knows of its mapping.
pub(super) struct Fast {
    /// The MR, created with `FastRegister` TRUE (null once closed).
    pub(super) mr: *mut NdkMr,
    /// The LAM of the side's buffer; `None` once released.
    pub(super) lam: Option<Lam>,
    /// `AdapterPageCount` the MR was initialized for (M13).
    pub(super) pages: u32,
    /// `RemoteAccess` at the initialization (M15).
    pub(super) remote_access: bool,
    /// Its tokens, read once after the initialization (M35).
    pub(super) local_token: u32,
    pub(super) remote_token: u32,
    /// The PD's privileged token (M27): SGEs with it name LAM addresses.
    pub(super) privileged: u32,
    /// In the initiator queue's order, the MR is mapped: a FastRegister was
    /// accepted and no Invalidate after it. A FastRegister now fails, an
    /// Invalidate succeeds (M22); a clean link posts only those that do.
    pub(super) mapped: bool,
    /// The peer invalidated the region with a SendAndInvalidate (M24),
    /// which this side learns of only when it arrives: a clean link does not
    /// map it again, and no rule is claimed for its requests.
    pub(super) retired: bool,
    /// A FastRegister accepted and not yet reaped: its context and what it
    /// maps.
    pub(super) registering: Option<(usize, Mapping)>,
    /// The mapping once its FastRegister's entry was a success, until an
    /// Invalidate is posted: what SGEs and the peer's RDMA may name (on a
    /// strict link, only where the bytes are checked).
    pub(super) region: Option<Mapping>,
}

/// What a FastRegister maps (M16): `length` bytes at `base`, through the
/// pages it was given in the order given, from the FBO in the first.
#[derive(Clone, Copy, Debug)]
pub(super) struct Mapping {
    pub(super) base: u64,
    pub(super) length: u64,
    pub(super) fbo: u64,
    /// For each page given, in order, which page of the side's buffer it
    /// is (its index in the buffer's LAM).
    pub(super) order: [usize; Mapping::MOST],
    pub(super) count: usize,
    /// Whether the FastRegister granted local write (a receive may land
    /// there), remote read and remote write (the peer may read or write
    /// there).
    pub(super) local_write: bool,
    pub(super) remote_read: bool,
    pub(super) remote_write: bool,
}

impl Mapping {
    /// The most pages a fast-register MR is initialized for here (M14).
    pub(super) const MOST: usize = 16;

    /// The region address of bytes `at..at + len` of the side's buffer,
    /// when they lie in one page and the region maps them all.
    pub(super) fn address_of(&self, at: u64, len: u64) -> Option<u64> {
        let page = PAGE_SIZE as u64;
        if at % page + len > page {
            return None;
        }
        let index = usize::try_from(at / page).ok()?;
        let j = self
            .order
            .get(..self.count)?
            .iter()
            .position(|&p| p == index)?;
        let offset = (j as u64 * page + at % page).checked_sub(self.fbo)?;
        (offset + len <= self.length).then_some(self.base + offset)
    }
}

/// Bytes of a strict link's Send sources, at the start of each buffer.
pub(super) const SOURCE: u64 = 256;
/// Bytes of a slot: what the largest Send carries (4 × 64), and the
/// sources' length (the largest Read checked).
pub(super) const SLOT: u64 = 256;
/// The byte a slot holds before its request is posted: what the provider
/// did not place keeps it.
pub(super) const UNPLACED: u8 = 0xC3;

/// What a slot of a strict link's buffer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SlotUse {
    /// A receive's: it must hold the bytes of the peer's Send it took.
    Receive,
    /// A Read's sink: it must hold the peer's source bytes from offset
    /// `from`.
    Read { from: u64 },
    /// Where a checked Write of the peer lands: once a Send the peer posted
    /// after it was received here, it must hold the Write's bytes (RDMA's
    /// ordering: a Send is placed after the Writes before it, RFC 5040
    /// §5.5).
    Landing,
}

/// A checked Write that landed, or is landing, in a slot of this side:
/// its slot, the bytes it carried and the call that posted it.
#[derive(Clone, Debug)]
pub(super) struct Landing {
    pub(super) slot: Slot,
    pub(super) carried: Vec<u8>,
    pub(super) call: u64,
    /// Whether it names the slot through this side's fast-registered
    /// region: until its bytes are checked, the region is not invalidated
    /// (a Write completes at its initiator once sent, and may land later).
    pub(super) via_region: bool,
}

/// A Send of the peer accepted on a strict link and not yet matched by a
/// successful receive here: its bytes, and the peer's checked Writes
/// posted before it (since its previous Send), which it must find placed.
#[derive(Clone, Debug, Default)]
pub(super) struct Incoming {
    pub(super) bytes: Vec<u8>,
    pub(super) writes: Vec<Landing>,
}

/// A strict link's receive or Read: the slot its SGEs cover, and its SGEs,
/// pieces of the slot's first `len` bytes (offset in the buffer, length)
/// in the order they were given, which is not their order in memory.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub(super) use_: SlotUse,
    pub(super) index: usize,
    pub(super) start: u64,
    pub(super) len: u64,
    pub(super) pieces: [(u64, u64); 4],
    pub(super) count: usize,
}

impl Slot {
    pub(super) fn pieces(&self) -> &[(u64, u64)] {
        self.pieces.get(..self.count).unwrap_or_default()
    }
}

/// On a strict link, a side's buffer in zones, so that the bytes of every
/// Send can be checked where the peer's receive placed them, and those of
/// some Reads where they landed (P21):
/// * `[0, SOURCE)`: Send sources, random bytes set before the buffer is
///   registered and never written after (no receive, Read sink, remote
///   Write or window covers them; the peer's checked Reads read them);
/// * one slot of [`SLOT`] bytes per receive the queue holds, then one per
///   initiator request, then [`LANDINGS`]: a receive, a checked Read's
///   sink or the peer's checked Write covers a free slot, whose bytes
///   nothing else names;
/// * the rest: RDMA (local SGEs, remote targets and windows).
pub(super) struct Zones {
    /// What the source zone holds.
    pub(super) source: Vec<u8>,
    /// Which receive slots a receive holds (until its entry is reaped).
    pub(super) receiving: Vec<bool>,
    /// Which Read slots a Read holds (until its entry is reaped).
    pub(super) reading: Vec<bool>,
    /// Which landing slots a checked Write of the peer holds (until a
    /// later Send of the peer is received and the Write's bytes checked).
    pub(super) landing: Vec<bool>,
}

/// Landing slots per side: checked Writes of the peer not yet followed by
/// a Send received.
pub(super) const LANDINGS: usize = 16;

impl Zones {
    /// Where the RDMA zone starts.
    pub(super) fn rdma(&self) -> u64 {
        SOURCE + (self.receiving.len() + self.reading.len() + self.landing.len()) as u64 * SLOT
    }

    /// Which slots of a use are held.
    pub(super) fn held(&mut self, use_: SlotUse) -> &mut Vec<bool> {
        match use_ {
            SlotUse::Receive => &mut self.receiving,
            SlotUse::Read { .. } => &mut self.reading,
            SlotUse::Landing => &mut self.landing,
        }
    }

    /// A free slot for `use_`, its first `len` bytes cut into `count`
    /// pieces (at most 4, at most `len`, at least 1) by `cut`, which gives
    /// a number in `1..len`; `None` when every slot of that use is held.
    pub(super) fn free(
        &self,
        use_: SlotUse,
        len: u64,
        count: usize,
        cut_at: impl FnMut(u64) -> u64,
    ) -> Option<Slot> {
        let (held, first) = match use_ {
            SlotUse::Receive => (&self.receiving, SOURCE),
            SlotUse::Read { .. } => (&self.reading, SOURCE + self.receiving.len() as u64 * SLOT),
            SlotUse::Landing => (
                &self.landing,
                SOURCE + (self.receiving.len() + self.reading.len()) as u64 * SLOT,
            ),
        };
        let index = held.iter().position(|held| !held)?;
        let start = first + index as u64 * SLOT;
        let (pieces, count) = cut(start, len, count, cut_at);
        Some(Slot {
            use_,
            index,
            start,
            len,
            pieces,
            count,
        })
    }
}

/// `start..start + len` cut into `count` pieces (at most 4, at most `len`,
/// at least 1), in memory order, by `cut_at`, which gives a number in
/// `1..len`: the pieces (offset, length) and their count.
pub(super) fn cut(
    start: u64,
    len: u64,
    count: usize,
    mut cut_at: impl FnMut(u64) -> u64,
) -> ([(u64, u64); 4], usize) {
    let count = count
        .clamp(1, 4)
        .min(usize::try_from(len).unwrap_or(1).max(1));
    let mut cuts = vec![0, len];
    while cuts.len() < count + 1 {
        let at = cut_at(len);
        if !cuts.contains(&at) {
            cuts.push(at);
        }
    }
    cuts.sort_unstable();
    let mut pieces = [(0, 0); 4];
    for (piece, w) in pieces.iter_mut().zip(cuts.windows(2)) {
        *piece = (start + w[0], w[1] - w[0]);
    }
    (pieces, count)
}

/// One side of a link.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts of one side: its CQs borrowed, its MR registered, its window's state"
)]
pub(super) struct Side {
    pub(super) adapter: usize,
    /// Its CQs: `[RECEIVE_QUEUE]` the receive CQ when the QP has one of
    /// its own (null otherwise), `[INITIATOR_CQ]` the initiator CQ, which
    /// also takes the receive queue's entries when there is no receive CQ
    /// (P1); [`Side::cq_for`] says which.
    pub(super) cqs: [Cq; 2],
    /// The CQs are the other side's (side 0's, which closes them): the
    /// link's two QPs share them ([`Link::shared_cq`]).
    pub(super) borrowed_cqs: bool,
    /// The receive CQ is its pool's, which the QPs of every side on the
    /// pool report their receives on, whichever link they belong to (the
    /// pool closes it; its depth is the pool's, [`Side::cq_depth`]).
    pub(super) pool_cq: bool,
    pub(super) pd: *mut NdkPd,
    pub(super) qp: *mut NdkQp,
    /// The SRQ the QP takes its receives from, if the side has one (null
    /// otherwise, and once closed).
    pub(super) srq: *mut NdkSrq,
    /// The SRQ's notifications (Q4, Q5).
    pub(super) srq_notes: Arc<Signal>,
    /// The thread's pool the PD and the SRQ are (the pool closes them):
    /// its receives are posted to, and reaped from, the pool.
    pub(super) pool: Option<Shared>,
    pub(super) qp_ctx: usize,
    pub(super) receive_sge: u32,
    pub(super) initiator_sge: u32,
    pub(super) inline: u32,
    pub(super) mr: *mut NdkMr,
    pub(super) registered: bool,
    pub(super) buffer: Option<Buffer>,
    pub(super) local_token: u32,
    pub(super) remote_token: u32,
    pub(super) mw: *mut NdkMw,
    /// The fast-register MR, on some sides.
    pub(super) fast: Option<Fast>,
    /// The MW's token and window (start offset, length) once a Bind was
    /// accepted; kept after an Invalidate so that stale tokens are tried.
    pub(super) window: Option<(u32, u64, u64)>,
    /// On a strict link: whether the window allows remote reads (only Reads
    /// go through a window there: a Write completes at its initiator once
    /// sent, so it may land after a later invalidation).
    pub(super) window_reads: bool,
    /// On a strict link: a Bind accepted and not yet reaped (its context,
    /// its window, whether it allows remote reads). The peer uses the
    /// window only once the Bind completed: before, it may race it (E8).
    pub(super) binding: Option<(usize, (u32, u64, u64), bool)>,
    /// On a strict link: the peer invalidated this side's window with a
    /// SendAndInvalidate, which this side learns of only when it arrives;
    /// a Bind before that would find the window still bound, so the window
    /// is not bound again.
    pub(super) window_retired: bool,
    /// On a strict link: the contexts of the accepted receives (`[0]`) and
    /// initiator requests (`[1]`) in post order, each with whether it was
    /// silent. Within a QP each queue completes in post order (P23), so an
    /// entry must name the oldest request of its queue still owed one (a
    /// silent success has none: one that a later entry passes completed).
    pub(super) order: [VecDeque<(usize, bool)>; 2],
    /// On a strict link: the lengths of the peer's accepted Sends not yet
    /// matched by a successful receive entry here. The peer's Sends take
    /// this side's receives in order, so a receive's `BytesTransferred`
    /// (the bytes placed, P21) is the length of the oldest one, and its
    /// bytes the ones the Send carried.
    pub(super) incoming: VecDeque<Incoming>,
    /// On a strict link: the peer's checked Writes into this side posted
    /// since the peer's last Send (they join that Send's [`Incoming`]).
    pub(super) writes_in: Vec<Landing>,
    /// A strict link's buffer zones (see [`Zones`]).
    pub(super) zones: Option<Zones>,
    pub(super) connector: *mut NdkConnector,
    /// The thread's shared endpoint the connector connected from (side 0,
    /// on some links), and whether that connect is known to have
    /// succeeded.
    pub(super) endpoint: Option<(u64, bool)>,
    /// Where the side's connector connected to (the active side's).
    pub(super) dst: SockAddrIn,
    pub(super) disconnects: Arc<Signal>,
    /// Completions of Disconnect calls still to come.
    pub(super) disconnecting: Vec<Arc<Signal>>,
    pub(super) outstanding: HashMap<usize, Post>,
    /// Receives accepted on this side and not yet matched by a Send the
    /// peer posted: a clean link sends only when the peer has one (over
    /// iWARP, and on the fabric, a Send that finds no receive ends the
    /// connection).
    pub(super) credits: u64,
    /// The QP's receive and initiator queue depths: a post to a queue
    /// holding fewer requests must be accepted (P24).
    pub(super) depths: (u32, u32),
}

impl Side {
    pub(super) fn new(adapter: usize) -> Self {
        Self {
            adapter,
            cqs: [Cq::new(), Cq::new()],
            borrowed_cqs: false,
            pool_cq: false,
            pd: ptr::null_mut(),
            qp: ptr::null_mut(),
            srq: ptr::null_mut(),
            srq_notes: Signal::new(),
            pool: None,
            qp_ctx: 0,
            receive_sge: 1,
            initiator_sge: 1,
            inline: 0,
            mr: ptr::null_mut(),
            registered: false,
            buffer: None,
            local_token: 0,
            remote_token: 0,
            mw: ptr::null_mut(),
            fast: None,
            window: None,
            window_reads: false,
            binding: None,
            window_retired: false,
            order: [VecDeque::new(), VecDeque::new()],
            incoming: VecDeque::new(),
            writes_in: Vec::new(),
            zones: None,
            connector: ptr::null_mut(),
            endpoint: None,
            dst: SockAddrIn::default(),
            disconnects: Signal::new(),
            disconnecting: Vec::new(),
            outstanding: HashMap::new(),
            credits: 0,
            depths: (0, 0),
        }
    }

    /// The CQ ([`Side::cqs`]) the entries of `queue` come on (P1).
    pub(super) fn cq_for(&self, queue: usize) -> usize {
        if queue == RECEIVE_QUEUE && !self.cqs[RECEIVE_QUEUE].ptr.is_null() {
            RECEIVE_QUEUE
        } else {
            INITIATOR_CQ
        }
    }

    /// The depth of its CQ `c`: a pool's CQ's is kept by the pool, since
    /// a ResizeCq through any side on it changes it for all.
    pub(super) fn cq_depth(&self, c: usize) -> u32 {
        match &self.pool {
            Some(pool) if c == RECEIVE_QUEUE && self.pool_cq => {
                pool.borrow().side.cqs[RECEIVE_QUEUE].depth
            }
            _ => self.cqs[c].depth,
        }
    }

    /// A random one of its CQs.
    pub(super) fn any_cq(&self, rng: &mut super::rng::Rng) -> usize {
        if self.cqs[RECEIVE_QUEUE].ptr.is_null() || rng.chance(50) {
            INITIATOR_CQ
        } else {
            RECEIVE_QUEUE
        }
    }

    /// Whether the queue `what` posts to holds as many requests as its
    /// depth (counting those completed and not yet reaped, so never fewer
    /// than the provider holds).
    pub(super) fn queue_full(&self, what: &str) -> bool {
        let queue = queue_of(what);
        let held = self
            .outstanding
            .values()
            .filter(|post| queue_of(post.what) == queue)
            .count();
        let depth = if queue == RECEIVE_QUEUE {
            self.depths.0
        } else {
            self.depths.1
        };
        held >= depth as usize
    }

    /// Whether a receive or Read of this side writing into its own
    /// fast-registered region is outstanding.
    pub(super) fn writing_into_region(&self) -> bool {
        self.outstanding.values().any(|post| post.into_region)
    }

    /// Whether a checked Write of the peer through this side's
    /// fast-registered region may still be landing (its bytes not checked
    /// yet).
    pub(super) fn landing_via_region(&self) -> bool {
        self.writes_in
            .iter()
            .chain(self.incoming.iter().flat_map(|sent| &sent.writes))
            .any(|write| write.via_region)
    }

    /// Whether a request of this side that named memory through `via` is
    /// outstanding.
    pub(super) fn outstanding_via(&self, via: Via) -> bool {
        self.outstanding.values().any(|post| post.via == via)
    }

    pub(super) fn buffer_len(&self) -> u64 {
        self.buffer.as_ref().map_or(0, |b| b.len as u64)
    }

    /// Marks `slot` held (`true`) or free again.
    pub(super) fn mark(&mut self, slot: &Slot, held: bool) {
        if let Some(zones) = &mut self.zones
            && let Some(flag) = zones.held(slot.use_).get_mut(slot.index)
        {
            *flag = held;
        }
    }

    /// Marks `slot` held by the accepted post `context` (a strict link's).
    pub(super) fn hold(&mut self, context: usize, slot: Slot) {
        self.mark(&slot, true);
        if let Some(post) = self.outstanding.get_mut(&context) {
            post.slot = Some(slot);
        }
    }

    /// Frees the slot of a post whose entry came (of any status: the
    /// device has done with its bytes).
    pub(super) fn release(&mut self, post: &Post) {
        if let Some(slot) = &post.slot {
            self.mark(slot, false);
        }
    }

    /// SGEs over `pieces` (offset, length) of the buffer, in that order,
    /// under the local token.
    pub(super) fn sges_over(&self, pieces: &[(u64, u64)]) -> Vec<NdkSge> {
        let base = self.buffer.as_ref().map_or(0, |b| b.address(0));
        pieces
            .iter()
            .map(|&(offset, length)| NdkSge {
                address: base + offset,
                length: u32::try_from(length).unwrap_or(u32::MAX),
                memory_region_token: self.local_token,
            })
            .collect()
    }

    /// Where Send sources are taken from: (start, length) in the buffer.
    pub(super) fn source_zone(&self) -> (u64, u64) {
        match &self.zones {
            Some(_) => (0, SOURCE),
            None => (0, self.buffer_len()),
        }
    }

    /// Where RDMA requests and windows go: (start, length) in the buffer.
    pub(super) fn rdma_zone(&self) -> (u64, u64) {
        match &self.zones {
            Some(zones) => (zones.rdma(), self.buffer_len().saturating_sub(zones.rdma())),
            None => (0, self.buffer_len()),
        }
    }
}

/// Two connected QPs and what they need.
pub(super) struct Link {
    /// The link's number in its thread (for traces).
    pub(super) id: u64,
    /// Whether the fuzzer called Disconnect on it.
    pub(super) disconnected: bool,
    /// Whether it is strict: clean, without injected faults, and posting
    /// only requests that must succeed (a window is read only once its Bind
    /// completed, only with the right granted, and invalidated only while
    /// no Read through it is outstanding; never past its CQ's room; no Read
    /// with read limits of 0). Until [`ended`](Self::ended), every entry on
    /// it must be a success and every post to a queue with room accepted.
    pub(super) strict: bool,
    /// The inbound and outbound read limits both ends asked for: with 0
    /// no Read may be in flight (N21), so a strict link posts none.
    pub(super) read_limit: u32,
    /// Whether the fuzzer itself flushed, disconnected or began closing
    /// it: from then on, requests may complete cancelled (E1, E5, X5).
    pub(super) ended: bool,
    /// The percentage of its calls' parameters made invalid: 0 on most
    /// links (long clean runs), up to 10 on the others.
    pub(super) noise: u64,
    pub(super) sides: [Side; 2],
    pub(super) listener: *mut NdkListener,
    /// The listener's connect events (the connectors they brought).
    pub(super) incoming: Arc<Signal>,
}

impl Link {
    /// Whether its requests are judged strictly now: a strict link the
    /// fuzzer has not ended.
    pub(super) fn judged(&self) -> bool {
        self.strict && !self.ended
    }

    /// Whether its two QPs take their receives from one SRQ, the thread's
    /// pool on their adapter (never strict: either QP may take any of the
    /// SRQ's receives, Q3, so no queue order or byte count is owed to one
    /// side).
    pub(super) fn shared(&self) -> bool {
        match (&self.sides[0].pool, &self.sides[1].pool) {
            (Some(a), Some(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether a side takes its receives from a pool (then the link is
    /// never strict, as a [`shared`](Self::shared) one).
    pub(super) fn pooled(&self) -> bool {
        self.sides.iter().any(|side| side.pool.is_some())
    }

    /// The receives a Send from side `i` may find: the peer's, or those of
    /// the peer's pool, whichever side of whichever link posted them.
    pub(super) fn credits_for(&self, i: usize) -> u64 {
        let peer = &self.sides[1 - i];
        peer.pool
            .as_ref()
            .map_or(peer.credits, |pool| pool.borrow().side.credits)
    }

    /// A Send from side `i` was accepted: one receive fewer to find.
    pub(super) fn take_credit(&mut self, i: usize) {
        let peer = &mut self.sides[1 - i];
        match &peer.pool {
            Some(pool) => {
                let credits = &mut pool.borrow_mut().side.credits;
                *credits = credits.saturating_sub(1);
            }
            None => peer.credits = peer.credits.saturating_sub(1),
        }
    }

    /// Whether its two QPs (both sides on one adapter, neither on a pool)
    /// share their CQs, side 0's: an entry on one may be for a request of
    /// either side, and must carry the context of that side's QP (P21).
    pub(super) fn shared_cq(&self) -> bool {
        self.sides[1].borrowed_cqs
    }

    /// The side whose QP a post `context` whose entry came on side `i`'s
    /// CQ was posted to: side `i`, or on a link sharing its CQs the other
    /// side when the post is that side's.
    pub(super) fn owner(&self, i: usize, context: usize) -> usize {
        let other = 1 - i;
        if self.shared_cq()
            && !self.sides[i].outstanding.contains_key(&context)
            && self.sides[other].outstanding.contains_key(&context)
        {
            other
        } else {
            i
        }
    }

    /// The outstanding post `context` whose entry came on side `i`'s CQ:
    /// posted through side `i`, or a receive of its pool (the QP that
    /// takes a receive reports it on its own CQ with its own context, Q2).
    pub(super) fn post(&self, i: usize, context: usize) -> Option<Post> {
        let side = &self.sides[i];
        side.outstanding.get(&context).copied().or_else(|| {
            let pool = side.pool.as_ref()?;
            pool.borrow().side.outstanding.get(&context).copied()
        })
    }

    /// Takes [`post`](Self::post) out: the post, whether it is a pool's
    /// receive posted through another side, and through another link.
    pub(super) fn take_post(&mut self, i: usize, context: usize) -> Option<(Post, bool, bool)> {
        let side = &mut self.sides[i];
        if let Some(post) = side.outstanding.remove(&context) {
            return Some((post, false, false));
        }
        let pool = side.pool.as_ref()?;
        pool.borrow_mut().take(context, (self.id, i))
    }

    /// The entries side `i`'s CQ `c` may hold: one for each request posted
    /// through side `i` to a queue whose entries come there and not yet
    /// reaped, and if the receive queue's come there one for each receive
    /// of its pool not yet reaped (its QP may take any of them).
    pub(super) fn cq_held(&self, i: usize, c: usize) -> usize {
        if self.shared_cq() {
            // No pool: every entry is for a request posted through a side.
            return self
                .sides
                .iter()
                .flat_map(|side| {
                    side.outstanding
                        .values()
                        .map(move |post| side.cq_for(queue_of(post.what)))
                })
                .filter(|&at| at == c)
                .count();
        }
        let side = &self.sides[i];
        let own = side
            .outstanding
            .values()
            .filter(|post| side.cq_for(queue_of(post.what)) == c)
            .count();
        let pooled = match &side.pool {
            Some(pool) if side.cq_for(RECEIVE_QUEUE) == c => pool.borrow().side.outstanding.len(),
            _ => 0,
        };
        own + pooled
    }

    /// A CQ of side `i` that may be full, if any. A pool's CQ is not: no
    /// receive is posted to the pool while its CQ may be full
    /// ([`Pool::cq_full`](super::pool::Pool::cq_full)), and only receives
    /// complete there.
    pub(super) fn full_cq(&self, i: usize) -> Option<usize> {
        let side = &self.sides[i];
        (0..2).find(|&c| {
            let pool_cq = c == RECEIVE_QUEUE && side.pool_cq;
            !(side.cqs[c].ptr.is_null() || pool_cq)
                && self.cq_held(i, c) >= side.cq_depth(c) as usize
        })
    }

    /// The receives posted to side `i`'s SRQ and not yet reaped (for a
    /// pool's, through any side): never fewer than the SRQ holds.
    pub(super) fn srq_held(&self, i: usize) -> usize {
        let side = &self.sides[i];
        match &side.pool {
            Some(pool) => pool.borrow().side.outstanding.len(),
            None => side
                .outstanding
                .values()
                .filter(|post| post.what == SRQ_RECEIVE)
                .count(),
        }
    }
}

/// An adapter opened for the run and its address.
#[derive(Clone, Copy)]
pub(super) struct Adapter {
    pub(super) ptr: usize,
    pub(super) ip: [u8; 4],
}

impl Adapter {
    pub(super) fn ptr(self) -> *mut NdkAdapter {
        ptr::with_exposed_provenance_mut(self.ptr)
    }
}

/// A SOCKADDR_IN.
pub(super) fn sockaddr(ip: [u8; 4], port: u16) -> SockAddrIn {
    SockAddrIn {
        sin_family: AF_INET,
        sin_port: port.to_be(),
        sin_addr: InAddr { bytes: ip },
        sin_zero: [0; 8],
    }
}

pub(super) const SOCKADDR_IN_LEN: u32 = 16;

/// SGE lengths (least, most) of receives, sends and RDMA requests: a send
/// (at most 4 × 64 bytes) always fits a receive (at least 256 bytes), so
/// only a noisy link ends connections with E7.
pub(super) const RECEIVE_SGE: (u64, u64) = (256, 1024);
pub(super) const SEND_SGE: (u64, u64) = (1, 64);
pub(super) const RDMA_SGE: (u64, u64) = (1, 1024);

/// Entries one poll takes at most.
pub(super) const POLL: usize = 16;

/// An empty extended result, to fill a poll buffer with.
pub(super) const EMPTY_RESULT_EX: NdkResultEx = NdkResultEx {
    status: STATUS_SUCCESS,
    bytes_transferred: 0,
    qp_context: ptr::null_mut(),
    request_context: ptr::null_mut(),
    type_: NdkOperationType(0),
    provider_error_code: 0,
    type_specific_completion_output: 0,
};

/// The plain part of an extended result.
pub(super) const fn plain(result: &NdkResultEx) -> NdkResult {
    NdkResult {
        status: result.status,
        bytes_transferred: result.bytes_transferred,
        qp_context: result.qp_context,
        request_context: result.request_context,
    }
}

/// An empty result, to fill a poll buffer with.
pub(super) const EMPTY_RESULT: NdkResult = NdkResult {
    status: STATUS_SUCCESS,
    bytes_transferred: 0,
    qp_context: ptr::null_mut(),
    request_context: ptr::null_mut(),
};

#[cfg(test)]
mod tests {
    use super::{Mapping, PAGE_SIZE};

    const PAGE: u64 = PAGE_SIZE as u64;

    /// Buffer pages 2, 0 and 1 given in that order, 100 bytes into the
    /// first, 50 bytes short of the end: where the oracle expects the
    /// provider to find a buffer range in the region (M16).
    fn mapping() -> Mapping {
        let mut order = [usize::MAX; Mapping::MOST];
        order[..3].copy_from_slice(&[2, 0, 1]);
        Mapping {
            base: 100 + 5 * PAGE,
            length: 3 * PAGE - 100 - 50,
            fbo: 100,
            order,
            count: 3,
            local_write: true,
            remote_read: true,
            remote_write: true,
        }
    }

    #[test]
    fn a_buffer_range_is_found_where_the_page_order_puts_it() {
        let m = mapping();
        // Buffer page 0 is the second page given: one page in, less the FBO.
        assert_eq!(m.address_of(10, 20), Some(m.base + PAGE + 10 - 100));
        // Buffer page 2 is the first given: the FBO skips its first 100 bytes.
        assert_eq!(m.address_of(2 * PAGE + 150, 8), Some(m.base + 50));
        assert_eq!(m.address_of(2 * PAGE + 100, 1), Some(m.base));
        // Buffer page 1 is the last given.
        assert_eq!(m.address_of(PAGE, 1), Some(m.base + 2 * PAGE - 100));
    }

    #[test]
    fn a_range_the_region_does_not_map_has_no_address() {
        let m = mapping();
        assert_eq!(m.address_of(2 * PAGE + 99, 1), None, "before the FBO");
        assert_eq!(m.address_of(2 * PAGE - 40, 30), None, "past the length");
        assert_eq!(m.address_of(PAGE - 10, 20), None, "across two pages");
        assert_eq!(m.address_of(3 * PAGE, 1), None, "a page not given");
    }
}
