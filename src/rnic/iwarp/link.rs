//! The iWARP data path of a QP whose peer is reached over an ordered byte
//! stream (issue 8, "transport seam"), in the manner of Linux siw's transmit
//! and receive paths.
//!
//! # The seam
//! The platform (host TCP, kernel WSK, a test pipe) implements
//! [`ByteStream`]: `send` takes what fits (back-pressure: when it takes less
//! than offered, the platform calls [`Link::writable`] later) and `close`
//! ends the stream. The platform hands received bytes to [`Link::receive`]
//! and reports the peer's close or reset with [`Link::peer_closed`]. Nothing
//! here blocks, sleeps or allocates after [`connect`]: the FPDU buffer, the
//! de-framer and the read queues are allocated there, bounded by the MULPDU,
//! the largest accepted ULPDU and the IRD/ORD. `send` and `close` are called
//! from the QP's runner with link locks held: they must not call back into
//! the link.
//!
//! # Transmit (the QP's runner)
//! One FPDU at a time is built into the link's buffer and offered to the
//! stream. Initiator requests go out in post order, each segmented by the
//! MULPDU: a Send (untagged, queue 0, MSN/MO) or a Write (tagged) completes
//! once its last FPDU has been taken by the stream (as siw); a Read Request
//! (queue 1) waits for the ORD (N21) and, with `READ_FENCE`, for every earlier
//! Read (P16), and completes when its last Read Response segment is placed.
//! Bind, FastRegister and Invalidate execute when they reach the transmit
//! position. Completions retire from the ring head only (P23). Read Responses
//! to the peer's Read Requests alternate FPDU by FPDU with the initiator's own
//! traffic.
//!
//! # Receive (`Link::receive`)
//! FPDUs are cut by the de-framer (CRC checked when negotiated) and parsed.
//! Writes and Read Responses are placed after resolving their STag through
//! `rnic::mr` as the local engine does (remote write right and bounds for a
//! Write; the Read's own sink SGEs for a Response); a Send consumes a posted
//! receive (queue 0, in-order MSN and MO), completing it on its last segment
//! with Solicited and Invalidate honoured (M24); a Read Request is checked
//! against the IRD and the source region and queued for the transmit side.
//!
//! # Errors (E5)
//! Whatever the receive side finds wrong ends the connection: a Terminate
//! naming the error and copying the offending DDP header goes out, the
//! stream closes, the receive in progress (if any) completes with the status
//! the local engine gives, and the QP enters `Error`. **RNR choice**: a Send
//! finding no receive posted is answered with a Terminate (no buffer
//! available), as siw does; the local engine waits instead, since the stream
//! cannot be held back for a receive that may never come. A received
//! Terminate fails the request it concerns (a Read Request's header: the
//! oldest outstanding Read; a Send's or Write's: the oldest one not yet
//! completed; no header: the oldest outstanding request) with
//! [`TermCode::completion_status`], and every other request is cancelled.
//! A Send or Write that has already completed stays successful: over a
//! stream its completion means "handed to the transport", as in siw.

use alloc::boxed::Box;

use super::ddp::{self, Buffer, DdpError, DdpHeader, UntaggedQueue};
use super::mpa::{self, Deframer, Rtr};
use super::rdmap::{self, Message, ReadRequest};
use super::setup::Established;
use super::terminate::{
    LocalCause, MAX_TERMINATE_LEN, TermCode, TermLayout, Terminate, rdmap_code, rdmap_etype,
};
use crate::kernel::sync::atomic::Ordering;
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::engine;
use crate::rnic::fault;
use crate::rnic::memory;
use crate::rnic::mr::Segment;
use crate::rnic::qp::{
    self, ConnectError, MAX_INLINE, MAX_SGE, NoReceive, Qp, QpState, RecvWqe, SendOp, SendWqe,
};
use crate::rnic::ring::Ring;
use crate::rnic::types::{Access, Completion, Opcode, Sge, WcStatus, WrFlags};

/// The ordered byte stream beneath a link, implemented by the platform.
pub trait ByteStream: Send + Sync {
    /// Offers `bytes`; returns how many the stream took (0 to all). When it
    /// took fewer, the platform calls [`Link::writable`] once it has room.
    fn send(&self, bytes: &[u8]) -> usize;
    /// Sends `len` bytes written in place (one FPDU built straight into the
    /// stream's send buffer, a copy less than building it here and offering
    /// it through `send`): when `len` bytes fit now, the stream lends them to
    /// `fill`, which writes all of them, and returns `Some(true)` when `fill`
    /// did (the bytes are taken, as by `send`) or `Some(false)` when it
    /// refused (nothing is taken). `None` without calling `fill` when the
    /// space is not there: the link then offers the FPDU through `send`.
    /// `fill` must not call into the stream. The default lends nothing.
    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        let _ = (len, fill);
        None
    }
    /// Closes the stream: `abortive` resets it, otherwise an orderly close
    /// after the bytes taken. Called once.
    fn close(&self, abortive: bool);
    /// The connection is over but the link cannot close the stream yet: the
    /// rest of an FPDU, or the Terminate, waits for room that only the peer
    /// reading can make. The platform bounds that wait (its graceful-close
    /// time-out, then a reset; issue 8: every wait on a peer ends). Called
    /// on each attempt while it lasts. The default does nothing.
    fn stalled(&self) {}
}

/// What a link is set up with (from the MPA negotiation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// The largest ULPDU sent (MULPDU, from the MSS: `mpa::mulpdu`).
    pub mulpdu: u16,
    /// The largest ULPDU accepted.
    pub max_rx_ulpdu: u16,
    /// CRC negotiated.
    pub crc: bool,
    /// Inbound Read Requests outstanding at most (IRD).
    pub ird: u32,
    /// Outbound Read Requests outstanding at most (ORD).
    pub ord: u32,
    /// The RFC 6581 RTR the setup exchanged, from this side's view.
    pub rtr: Option<RtrRole>,
    /// Send nothing before one FPDU has arrived (a responder without RTR,
    /// `Established::receive_first`, RFC 5044).
    pub receive_first: bool,
}

/// The RTR message of peer-to-peer setup, as one side saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtrRole {
    /// This side (the initiator) sent it: after a Send RTR its queue 0
    /// continues at MSN 2; after a Read RTR its queue 1 does, and the
    /// zero-length Read Response to STag 1 is still to come (it counts
    /// against the ORD until it arrives, and completes nothing).
    Sent(Rtr),
    /// This side (the responder) received it: the peer's queue 0 (Send) or
    /// 1 (Read) continues at MSN 2. The Read RTR's response was sent by
    /// `setup`.
    Received(Rtr),
}

impl LinkConfig {
    /// The configuration after a successful `iwarp::setup` exchange: CRC,
    /// IRD/ORD (`default_ird_ord` when the peer sent no RFC 6581 block), the
    /// RTR and the responder's wait for the first FPDU. `initiator` says
    /// which side this is; `mulpdu` comes from the MSS (`mpa::mulpdu`).
    #[must_use]
    pub fn established(
        established: &Established,
        initiator: bool,
        mulpdu: u16,
        max_rx_ulpdu: u16,
        default_ird_ord: (u32, u32),
    ) -> Self {
        let negotiated = &established.negotiated;
        Self {
            mulpdu,
            max_rx_ulpdu,
            crc: negotiated.crc,
            ird: negotiated.ird.map_or(default_ird_ord.0, u32::from),
            ord: negotiated.ord.map_or(default_ird_ord.1, u32::from),
            rtr: negotiated.rtr.map(|rtr| {
                if initiator {
                    RtrRole::Sent(rtr)
                } else {
                    RtrRole::Received(rtr)
                }
            }),
            receive_first: established.receive_first,
        }
    }
}

/// Why a link could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// The QP is not idle (X5).
    NotIdle,
    /// The MULPDU cannot carry a DDP header and one byte.
    InvalidParameter,
    /// Out of memory.
    Resources,
}

/// A Read Request of this side, awaiting its response.
#[derive(Clone, Copy)]
struct OutRead {
    slot: usize,
    /// Its MSN on queue 1: a Terminate names it so.
    msn: u32,
    stag: u32,
    to: u64,
    len: u64,
    sges: [Sge; MAX_SGE],
    nsge: usize,
    invalidate_first: bool,
}

/// State shared by the transmit and receive sides.
#[expect(
    clippy::struct_excessive_bools,
    reason = "four independent facts of the stream's life"
)]
struct Shared {
    /// Index (from the ring head) of the request being transmitted; the ones
    /// before it are sent and await completion.
    cursor: usize,
    /// Completion status of sent requests, by ring slot.
    done: Box<[Option<WcStatus>]>,
    out_reads: Ring<OutRead>,
    /// Inbound Read Requests with their MSN, answered in order.
    in_reads: Ring<(u32, ReadRequest)>,
    /// A Terminate FPDU to send before closing, and how much of it went.
    term: [u8; TERM_FPDU],
    term_len: usize,
    term_sent: usize,
    /// A Terminate was sent or received, or the stream closed: no more FPDUs.
    failing: bool,
    /// The peer closed or reset the stream.
    peer_closed: bool,
    /// `ByteStream::close` was called.
    closed: bool,
    /// This side's graceful disconnect ([`Link::finish`]): nothing new
    /// starts, and the stream closes once the message in progress is out.
    finishing: bool,
    /// Sending is allowed (false until the first FPDU arrives when the
    /// configuration says `receive_first`).
    may_send: bool,
    /// A Terminate from the peer: the request it concerns and its status,
    /// recorded by the receive side together with `failing` and applied by
    /// the runner (the only one that retires requests) before it retires
    /// anything, so the lookup cannot race with retirement.
    peer_terminate: Option<(Concerns, WcStatus)>,
}

const TERM_FPDU: usize = mpa::fpdu_len(ddp::UNTAGGED_HEADER_LEN + MAX_TERMINATE_LEN);

/// The transmit side, used by the runner only.
struct Tx {
    buf: Box<[u8]>,
    len: usize,
    sent: usize,
    /// Ring slot that completes once `buf` is taken whole (a Send's or
    /// Write's last FPDU).
    completes: Option<usize>,
    /// Bytes of the request at the cursor already sent, and whether it
    /// started (a zero-length message is one FPDU).
    offset: u64,
    started: bool,
    send_msn: u32,
    read_msn: u32,
    /// Bytes of the oldest inbound Read already answered.
    response_sent: u64,
    /// Whose turn it is: Read Responses (`true`) or initiator requests.
    responses_turn: bool,
}

/// The receive side.
struct RxState {
    queues: [UntaggedQueue; rdmap::QUEUE_COUNT],
    /// The receive the Send in progress lands in.
    recv: Option<RecvWqe>,
    /// Bytes of the oldest outbound Read placed so far.
    placed: u64,
    layout: Option<TermLayout>,
    dead: bool,
}

struct Rx {
    deframer: Deframer,
    state: RxState,
}

/// The iWARP link of one QP.
pub struct Link {
    qp: Weak<Qp>,
    stream: Arc<dyn ByteStream>,
    config: LinkConfig,
    shared: SpinLock<Shared>,
    tx: SpinLock<Tx>,
    rx: SpinLock<Rx>,
}

impl core::fmt::Debug for Link {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Link")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Connects the idle `qp` to a peer over `stream` (after the MPA exchange).
/// Bytes the setup left over (`Established::leftover`) go to
/// [`Link::receive`] next.
///
/// # Errors
/// [`LinkError`].
pub fn connect(
    qp: &Arc<Qp>,
    stream: Arc<dyn ByteStream>,
    config: LinkConfig,
) -> Result<Arc<Link>, LinkError> {
    if usize::from(config.mulpdu) <= ddp::UNTAGGED_HEADER_LEN + rdmap::READ_REQUEST_LEN {
        return Err(LinkError::InvalidParameter);
    }
    let slots = qp.initiator_slots();
    let ord = config.ord.min(qp.device().limits().max_outbound_read_limit);
    let ird = config.ird.min(qp.device().limits().max_inbound_read_limit);
    let mut shared = Shared {
        cursor: 0,
        done: try_boxed(slots, None)?,
        out_reads: Ring::new(ord as usize).ok_or(LinkError::Resources)?,
        in_reads: Ring::new(ird as usize).ok_or(LinkError::Resources)?,
        term: [0; TERM_FPDU],
        term_len: 0,
        term_sent: 0,
        failing: false,
        peer_closed: false,
        closed: false,
        finishing: false,
        may_send: !config.receive_first,
        peer_terminate: None,
    };
    let tx = Tx {
        buf: try_boxed(mpa::fpdu_len(usize::from(config.mulpdu)), 0_u8)?,
        len: 0,
        sent: 0,
        completes: None,
        offset: 0,
        started: false,
        send_msn: if config.rtr == Some(RtrRole::Sent(Rtr::Send)) {
            2
        } else {
            1
        },
        read_msn: if config.rtr == Some(RtrRole::Sent(Rtr::Read)) {
            2
        } else {
            1
        },
        response_sent: 0,
        responses_turn: false,
    };
    let mut queues = [UntaggedQueue::new(); rdmap::QUEUE_COUNT];
    let rtr_queue = match config.rtr {
        Some(RtrRole::Received(Rtr::Send)) => Some(rdmap::QN_SEND),
        Some(RtrRole::Received(Rtr::Read)) => Some(rdmap::QN_READ_REQUEST),
        _ => None,
    };
    if let Some(queue) = rtr_queue.and_then(|qn| queues.get_mut(qn as usize)) {
        // The RTR took MSN 1.
        queue.take_msn();
    }
    if config.rtr == Some(RtrRole::Sent(Rtr::Read)) {
        let rtr_read = OutRead {
            slot: usize::MAX,
            msn: 1,
            stag: rdmap::RTR_STAG,
            to: 0,
            len: 0,
            sges: [Sge::default(); MAX_SGE],
            nsge: 0,
            invalidate_first: false,
        };
        shared
            .out_reads
            .push(rtr_read)
            .map_err(|_| LinkError::InvalidParameter)?;
    }
    let rx = Rx {
        deframer: Deframer::new(usize::from(config.max_rx_ulpdu), config.crc),
        state: RxState {
            queues,
            recv: None,
            placed: 0,
            layout: None,
            dead: false,
        },
    };
    let link = Arc::new(Link {
        qp: Arc::downgrade(qp),
        stream,
        config: LinkConfig { ird, ord, ..config },
        shared: SpinLock::new(shared),
        tx: SpinLock::new(tx),
        rx: SpinLock::new(rx),
    });
    qp::attach_link(qp, Arc::clone(&link), (ird, ord)).map_err(|e| match e {
        ConnectError::NotIdle | ConnectError::SameQp => LinkError::NotIdle,
    })?;
    Ok(link)
}

fn try_boxed<T: Clone>(n: usize, value: T) -> Result<Box<[T]>, LinkError> {
    let mut v = alloc::vec::Vec::new();
    v.try_reserve_exact(n).map_err(|_| LinkError::Resources)?;
    v.resize(n, value);
    Ok(v.into_boxed_slice())
}

// ----- memory ------------------------------------------------------------

/// Resolved SGEs, on the stack.
struct SegList {
    segs: [Option<Segment>; MAX_SGE],
    total: u64,
}

fn resolve_local(qp: &Qp, sges: &[Sge], need: Access) -> Result<SegList, WcStatus> {
    let mut list = SegList {
        segs: core::array::from_fn(|_| None),
        total: 0,
    };
    for (place, sge) in list.segs.iter_mut().zip(sges) {
        let seg = qp
            .device()
            .resolve_local(qp.pd(), sge, need)
            .map_err(crate::rnic::mr::Denied::local_status)?;
        list.total = list.total.saturating_add(seg.len());
        *place = Some(seg);
    }
    if sges.len() > MAX_SGE {
        return Err(WcStatus::LengthError);
    }
    Ok(list)
}

/// Runs of `len` bytes at `offset` of `list`, each handed to `each`.
fn for_runs(
    list: &SegList,
    mut offset: u64,
    len: usize,
    mut each: impl FnMut(memory::Span, usize) -> Result<(), ()>,
) -> Result<(), ()> {
    let mut done = 0_usize;
    for seg in list.segs.iter().flatten() {
        if done == len {
            break;
        }
        if offset >= seg.len() {
            offset -= seg.len();
            continue;
        }
        while done < len && offset < seg.len() {
            let span = seg.run(offset, (len - done) as u64).ok_or(())?;
            if span.is_empty() {
                return Err(());
            }
            each(span, done)?;
            done += span.len();
            offset += span.len() as u64;
        }
        offset = 0;
    }
    if done == len { Ok(()) } else { Err(()) }
}

fn copy_out(list: &SegList, offset: u64, dst: &mut [u8]) -> Result<(), ()> {
    let len = dst.len();
    for_runs(list, offset, len, |span, at| {
        let out = dst.get_mut(at..at + span.len()).ok_or(())?;
        memory::copy_to_slice(out, span).map_err(|_| ())
    })
}

fn copy_in(list: &SegList, offset: u64, src: &[u8]) -> Result<(), ()> {
    for_runs(list, offset, src.len(), |span, at| {
        let from = src.get(at..at + span.len()).ok_or(())?;
        memory::copy_from_slice(span, from).map_err(|_| ())
    })
}

// ----- transmit ----------------------------------------------------------

/// Writes `header`, `chunk` payload bytes (from `fill`), the pad and the CRC
/// as one FPDU at the start of `buf`; returns its length.
fn write_fpdu_into(
    buf: &mut [u8],
    header: &DdpHeader,
    chunk: usize,
    crc: bool,
    fill: impl FnOnce(&mut [u8]) -> Result<(), ()>,
) -> Option<usize> {
    let hlen = header.len();
    let ulpdu = buf.get_mut(mpa::FPDU_LENGTH_LEN..)?;
    header.write(ulpdu).ok()?;
    fill(ulpdu.get_mut(hlen..hlen + chunk)?).ok()?;
    mpa::seal_fpdu(buf, hlen + chunk, crc).ok()
}

/// Where the transmit position goes after working on a request.
enum Next {
    /// On to the next request; this one completed with the status, or
    /// completes later (`None`: when its FPDU is taken, or its Read answered).
    Done(Option<WcStatus>),
    /// More FPDUs of this request to come.
    Stay,
    /// It cannot go yet (ORD, READ_FENCE).
    Wait,
}

/// What one transmit step did.
enum Step {
    /// An FPDU is in the buffer (or a request completed without one).
    Progress,
    /// Nothing to do now.
    Idle,
}

impl Link {
    /// The configuration in force (IRD/ORD clamped to the device).
    pub const fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The stream has room again: the runner resumes sending.
    pub fn writable(&self) {
        if let Some(qp) = self.qp.upgrade() {
            qp.kick();
        }
    }

    /// This side's graceful disconnect (X1): the message in progress goes
    /// out whole — the rest of its FPDUs, as the Read Response in progress
    /// — then the stream closes in order (FIN); nothing new starts (the
    /// requests not started complete cancelled when the QP leaves the
    /// connection, X7). Closing the stream at once cut the FPDU in
    /// progress, and the peer never placed the message (issue 8).
    pub fn finish(&self) {
        self.shared.lock().finishing = true;
        match self.qp.upgrade() {
            Some(qp) => qp.kick(),
            None => self.close_in_order(),
        }
    }

    /// Closes the stream in order, once.
    fn close_in_order(&self) {
        let close = !core::mem::replace(&mut self.shared.lock().closed, true);
        if close {
            self.stream.close(false);
        }
    }

    /// Runs the transmit side and retires completed requests (the QP's
    /// runner calls this in place of the local engine).
    pub(crate) fn run(&self, qp: &Arc<Qp>) {
        loop {
            self.retire_done(qp);
            let (failing, may_send, finishing) = {
                let shared = self.shared.lock();
                (shared.failing, shared.may_send, shared.finishing)
            };
            if qp.state() != QpState::Connected || failing {
                self.wind_down(qp);
                return;
            }
            if !may_send && !finishing {
                // RFC 5044: the responder speaks after the initiator's first
                // FPDU; its arrival kicks the runner.
                return;
            }
            if !self.flush(qp) {
                return;
            }
            let step = if finishing {
                self.finish_step(qp)
            } else {
                self.step(qp)
            };
            match step {
                Step::Progress => {}
                Step::Idle => {
                    self.retire_done(qp);
                    return;
                }
            }
        }
    }

    /// While finishing: the next FPDU of the message in progress, else of
    /// the Read Response in progress; with neither, the stream closes.
    fn finish_step(&self, qp: &Arc<Qp>) -> Step {
        let (started, responding) = {
            let tx = self.tx.lock();
            (tx.started, tx.response_sent > 0)
        };
        if started {
            return self.initiate(qp);
        }
        if responding {
            return self.respond(qp);
        }
        self.close_in_order();
        Step::Idle
    }

    /// Offers the buffered FPDU to the stream; `true` once it is all taken.
    fn flush(&self, qp: &Qp) -> bool {
        let mut tx = self.tx.lock();
        while tx.sent < tx.len {
            // The FPDU that completes a request: its completion is recorded
            // before its last bytes can reach the stream (`mark_sent`).
            let marked = tx.completes.filter(|&slot| self.mark_sent(slot));
            let rest = tx.len - tx.sent;
            let n = match tx.buf.get(tx.sent..tx.len) {
                Some(rest) => self.stream.send(rest),
                None => 0,
            };
            if let Some(slot) = marked {
                if n < rest {
                    // Not all of it went: not sent yet after all.
                    self.unmark_sent(slot);
                } else {
                    tx.completes = None;
                }
            }
            if n == 0 {
                return false;
            }
            tx.sent = tx.sent.saturating_add(n).min(tx.len);
        }
        if tx.len > 0 {
            let counters = &qp.device().counters;
            counters.rdma_out_frames.fetch_add(1, Ordering::Relaxed);
            counters
                .rdma_out_octets
                .fetch_add(tx.len as u64, Ordering::Relaxed);
        }
        tx.len = 0;
        tx.sent = 0;
        if let Some(slot) = tx.completes.take() {
            let mut shared = self.shared.lock();
            if let Some(place) = shared.done.get_mut(slot) {
                place.get_or_insert(WcStatus::Success);
            }
        }
        true
    }

    /// Retires the head requests that are complete, oldest first (P23).
    fn retire_done(&self, qp: &Arc<Qp>) {
        loop {
            let Some((slot, _)) = qp.queued(0) else {
                return;
            };
            let status = {
                let mut shared = self.shared.lock();
                if shared.cursor == 0 {
                    return;
                }
                let Some(status) = shared.done.get_mut(slot).and_then(Option::take) else {
                    return;
                };
                shared.cursor -= 1;
                status
            };
            let mut sges = [Sge::default(); MAX_SGE];
            let mut inline = [0_u8; MAX_INLINE];
            if let Some(wqe) = qp.snapshot(0, &mut sges, &mut inline) {
                qp.retire(&wqe, status);
            }
        }
    }

    /// The connection is over: finish a half-sent FPDU, send the Terminate,
    /// close the stream, and retire every request (failed ones with their
    /// status, the others cancelled, E5).
    fn wind_down(&self, qp: &Arc<Qp>) {
        // Whether the request at the cursor went out in part: only such a
        // request, and those before the cursor, can be what a Terminate
        // concerns (the tx lock comes before the shared one).
        let mut started = self.tx.lock().started;
        let (closed, peer_closed) = {
            let mut shared = self.shared.lock();
            // Before a half-sent FPDU completes its request, and before any
            // request retires.
            mark_concerned(&mut shared, qp, started);
            (shared.closed, shared.peer_closed)
        };
        {
            let mut tx = self.tx.lock();
            if tx.sent == 0 || closed || peer_closed {
                // Not started (or nowhere to go): dropped.
                tx.len = 0;
                tx.sent = 0;
                tx.completes = None;
            }
        }
        let blocked = !self.flush(qp);
        let close = {
            let mut shared = self.shared.lock();
            let mut blocked = blocked;
            while !blocked
                && shared.term_sent < shared.term_len
                && !shared.peer_closed
                && !shared.closed
            {
                let n = match shared.term.get(shared.term_sent..shared.term_len) {
                    Some(rest) => self.stream.send(rest),
                    None => 0,
                };
                if n == 0 {
                    blocked = true;
                } else {
                    shared.term_sent += n;
                }
            }
            let close = (!blocked || shared.peer_closed) && !shared.closed;
            shared.closed |= close;
            mark_concerned(&mut shared, qp, started);
            while shared.out_reads.pop().is_some() {}
            while shared.in_reads.pop().is_some() {}
            close
        };
        if close {
            self.stream.close(false);
        } else if !self.shared.lock().closed {
            // The peer reads nothing: the platform bounds the wait.
            self.stream.stalled();
        }
        // A message whose first segments landed holds its receive between
        // segments; no more segments are placed now (`receive` checks the
        // state), so it completes cancelled here, or it would never complete
        // and the QP's close would wait for it (E5, L21).
        let held = {
            let mut rx = self.rx.lock();
            rx.state.dead = true;
            rx.state.recv.take()
        };
        if let Some(recv) = held {
            complete_recv(qp, &recv, WcStatus::Cancelled);
        }
        loop {
            let mut sges = [Sge::default(); MAX_SGE];
            let mut inline = [0_u8; MAX_INLINE];
            let Some(wqe) = qp.snapshot(0, &mut sges, &mut inline) else {
                break;
            };
            let slot = qp.queued(0).map_or(usize::MAX, |(slot, _)| slot);
            let status = {
                let mut shared = self.shared.lock();
                mark_concerned(&mut shared, qp, started);
                // At the cursor, the head is the request in progress, if any.
                started &= shared.cursor > 0;
                shared.cursor = shared.cursor.saturating_sub(1);
                shared.done.get_mut(slot).and_then(Option::take)
            };
            qp.retire(&wqe, status.unwrap_or(WcStatus::Cancelled));
        }
        let mut tx = self.tx.lock();
        tx.offset = 0;
        tx.started = false;
        tx.response_sent = 0;
    }

    /// Builds the next FPDU: a Read Response and an initiator request take
    /// turns.
    fn step(&self, qp: &Arc<Qp>) -> Step {
        let responses = !self.shared.lock().in_reads.is_empty();
        let turn = {
            let mut tx = self.tx.lock();
            tx.responses_turn = !tx.responses_turn;
            tx.responses_turn
        };
        if responses && turn {
            return self.respond(qp);
        }
        match self.initiate(qp) {
            Step::Idle if responses => self.respond(qp),
            step => step,
        }
    }

    /// One Read Response FPDU for the oldest inbound Read.
    fn respond(&self, qp: &Arc<Qp>) -> Step {
        let front = self.shared.lock().in_reads.get(0).copied();
        let Some((msn, request)) = front else {
            return Step::Idle;
        };
        let mut tx = self.tx.lock();
        let room = usize::from(self.config.mulpdu).saturating_sub(ddp::TAGGED_HEADER_LEN);
        let offset = tx.response_sent;
        if offset == 0
            && let Err(denied) = qp.device().resolve_remote(
                qp.pd(),
                qp.id(),
                request.source_stag,
                request.source_to,
                u64::from(request.size),
                Access::REMOTE_READ,
            )
        {
            // Checked in turn, so the Reads before it are answered first,
            // as the local engine completes them. The Terminate copies the
            // request's headers.
            drop(tx);
            let mut ulpdu = [0_u8; ddp::UNTAGGED_HEADER_LEN + rdmap::READ_REQUEST_LEN];
            let copied = Message::ReadRequest { msn, request }
                .write_ulpdu(&mut ulpdu)
                .ok()
                .and_then(|n| ulpdu.get(..n));
            self.fail(qp, LocalCause::ReadSourceDenied(denied).term_code(), copied);
            return Step::Progress;
        }
        let left = u64::from(request.size).saturating_sub(offset);
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(room);
        let last = chunk as u64 == left;
        let header = Message::ReadResponse {
            stag: request.sink_stag,
            to: request.sink_to.wrapping_add(offset),
            last,
            payload: &[],
        }
        .ddp_header();
        let source = qp.device().resolve_remote(
            qp.pd(),
            qp.id(),
            request.source_stag,
            request.source_to.wrapping_add(offset),
            chunk as u64,
            Access::REMOTE_READ,
        );
        let built = source.ok().and_then(|seg| {
            let source_list = one(seg);
            self.build(&mut tx, &header, chunk, None, |out| {
                copy_out(&source_list, 0, out)
            })
        });
        if built.is_none() {
            // The source went away after the request was accepted.
            drop(tx);
            self.fail(qp, LocalCause::Catastrophic.term_code(), None);
            return Step::Progress;
        }
        if last {
            tx.response_sent = 0;
            drop(tx);
            self.shared.lock().in_reads.pop();
        } else {
            tx.response_sent = offset + chunk as u64;
        }
        Step::Progress
    }

    /// Writes `header` and `chunk` payload bytes (from `fill`) as one FPDU:
    /// straight into the stream's send buffer when it lends the room
    /// ([`ByteStream::send_with`]; the FPDU is then taken whole and `flush`
    /// only completes it), else into the link's buffer for `flush` to offer.
    ///
    /// `completes`: the ring slot of the request this FPDU completes (its
    /// last). Its completion is recorded before the stream can take the
    /// FPDU, so that a peer's Terminate arriving after the bytes left can
    /// never be applied to it first (`mark_sent`); `tx.completes` carries
    /// it when the FPDU stays in the link's buffer.
    fn build(
        &self,
        tx: &mut Tx,
        header: &DdpHeader,
        chunk: usize,
        completes: Option<usize>,
        fill: impl FnOnce(&mut [u8]) -> Result<(), ()>,
    ) -> Option<()> {
        let hlen = header.len();
        let total = mpa::fpdu_len(hlen + chunk);
        let crc = self.config.crc;
        let mut fill = Some(fill);
        let marked = completes.filter(|&slot| self.mark_sent(slot));
        let lent = self.stream.send_with(total, &mut |out| {
            fill.take()
                .and_then(|fill| write_fpdu_into(out, header, chunk, crc, fill))
                == Some(total)
        });
        if lent != Some(true)
            && let Some(slot) = marked
        {
            self.unmark_sent(slot);
        }
        match lent {
            Some(true) => {
                // Taken whole: nothing left to offer.
                tx.len = total;
                tx.sent = total;
                tx.completes = completes.filter(|_| marked.is_none());
                return Some(());
            }
            Some(false) => return None,
            None => {}
        }
        let fill = fill.take()?;
        tx.len = write_fpdu_into(&mut tx.buf, header, chunk, crc, fill)?;
        tx.sent = 0;
        tx.completes = completes;
        Some(())
    }

    /// Records the request in ring slot `slot` as sent (success), before
    /// its last bytes are offered to the stream: a peer's Terminate about
    /// it can only arrive after those bytes left, and then finds it
    /// completed (RFC 5040 §7 allows the success; E5 cancels the rest). Not
    /// when a Terminate from the peer is already recorded (it came first:
    /// it may concern this request) or a status is there. Returns whether
    /// it marked; the runner alone calls this and [`Self::unmark_sent`], and
    /// alone reads the mark (`retire_done`, `mark_concerned`), so taking the
    /// mark back when the stream took less is never seen.
    fn mark_sent(&self, slot: usize) -> bool {
        let mut shared = self.shared.lock();
        if shared.peer_terminate.is_some() {
            return false;
        }
        match shared.done.get_mut(slot) {
            Some(place @ None) => {
                *place = Some(WcStatus::Success);
                true
            }
            _ => false,
        }
    }

    /// Takes back [`Self::mark_sent`]: the stream did not take the bytes.
    fn unmark_sent(&self, slot: usize) {
        if let Some(place) = self.shared.lock().done.get_mut(slot) {
            *place = None;
        }
    }

    /// Works on the initiator request at the cursor.
    fn initiate(&self, qp: &Arc<Qp>) -> Step {
        let (cursor, reads) = {
            let shared = self.shared.lock();
            (shared.cursor, shared.out_reads.len())
        };
        let mut sges = [Sge::default(); MAX_SGE];
        let mut inline = [0_u8; MAX_INLINE];
        let Some(wqe) = qp.snapshot(cursor, &mut sges, &mut inline) else {
            return Step::Idle;
        };
        let Some((slot, _)) = qp.queued(cursor) else {
            return Step::Idle;
        };
        // P16: a fenced request waits for every earlier Read.
        if wqe.flags.contains(WrFlags::READ_FENCE) && reads > 0 {
            return Step::Idle;
        }
        if fault::armed() && self.inject_completion(qp, &wqe, slot, reads) {
            return Step::Progress;
        }
        let sges = sges.get(..wqe.nsge.min(MAX_SGE)).unwrap_or_default();
        let inline = inline
            .get(..wqe.inline_len.min(MAX_INLINE))
            .unwrap_or_default();
        let next = match &wqe.op {
            SendOp::Send { .. } | SendOp::Write { .. } => {
                self.send_or_write(qp, &wqe, sges, inline, slot)
            }
            SendOp::Read {
                remote_addr,
                remote_key,
            } => self.read_request(qp, &wqe, sges, *remote_addr, *remote_key, slot, reads),
            _ => Next::Done(engine::execute_local(qp.id(), &wqe)),
        };
        match next {
            Next::Wait => Step::Idle,
            Next::Stay => Step::Progress,
            // Sent whole, or executed here.
            Next::Done(status) => {
                let mut shared = self.shared.lock();
                if let (Some(status), Some(place)) = (status, shared.done.get_mut(slot)) {
                    *place = Some(status);
                }
                shared.cursor += 1;
                Step::Progress
            }
        }
    }

    /// Fault injection ([`fault::Kind::Completion`], E8, E5): the request
    /// at the cursor, as it starts (once per request: not between the
    /// FPDUs of a message, nor while a Read waits for the ORD), completes
    /// with an error instead of going out, and the connection ends as for
    /// any local error: a Terminate reporting a local catastrophic error
    /// (RFC 5040 §7; the fault is this side's), then the stream closes.
    /// Whether it fired.
    fn inject_completion(&self, qp: &Arc<Qp>, wqe: &SendWqe, slot: usize, reads: usize) -> bool {
        let waits = matches!(wqe.op, SendOp::Read { .. }) && reads >= self.config.ord as usize;
        if waits || self.tx.lock().started {
            return false;
        }
        let Some(index) = fault::hit_at(fault::Kind::Completion) else {
            return false;
        };
        {
            let mut shared = self.shared.lock();
            if let Some(place) = shared.done.get_mut(slot) {
                *place = Some(fault::error_status(wqe.op.opcode(), index));
            }
            shared.cursor += 1;
        }
        self.fail(qp, LocalCause::Catastrophic.term_code(), None);
        true
    }

    /// One FPDU of a Send or Write.
    fn send_or_write(
        &self,
        qp: &Arc<Qp>,
        wqe: &SendWqe,
        sges: &[Sge],
        inline: &[u8],
        slot: usize,
    ) -> Next {
        let is_inline = wqe.flags.contains(WrFlags::INLINE);
        let gathered = if is_inline {
            None
        } else {
            match resolve_local(qp, sges, Access::empty()) {
                Ok(resolved) => Some(resolved),
                Err(status) => return Next::Done(Some(status)),
            }
        };
        let total = gathered.as_ref().map_or(inline.len() as u64, |l| l.total);
        let mut tx = self.tx.lock();
        if !tx.started {
            tx.started = true;
            tx.offset = 0;
            if matches!(wqe.op, SendOp::Send { .. }) {
                tx.send_msn = tx.send_msn.wrapping_add(1);
            }
        }
        let offset = tx.offset;
        let header_len = match wqe.op {
            SendOp::Send { .. } => ddp::UNTAGGED_HEADER_LEN,
            _ => ddp::TAGGED_HEADER_LEN,
        };
        let room = usize::from(self.config.mulpdu).saturating_sub(header_len);
        let left = total.saturating_sub(offset);
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(room);
        let last = chunk as u64 == left;
        let header = match wqe.op {
            SendOp::Write {
                remote_addr,
                remote_key,
            } => Message::Write {
                stag: remote_key,
                to: remote_addr.wrapping_add(offset),
                last,
                payload: &[],
            },
            SendOp::Send { invalidate } => Message::Send {
                solicited: wqe.flags.contains(WrFlags::SOLICITED),
                invalidate,
                msn: tx.send_msn.wrapping_sub(1),
                mo: u32::try_from(offset).unwrap_or(u32::MAX),
                last,
                payload: &[],
            },
            _ => return Next::Done(Some(WcStatus::InternalError)),
        }
        .ddp_header();
        let built = self.build(&mut tx, &header, chunk, last.then_some(slot), |out| {
            if let Some(resolved) = &gathered {
                return copy_out(resolved, offset, out);
            }
            let at = usize::try_from(offset).map_err(|_| ())?;
            let from = inline.get(at..at + out.len()).ok_or(())?;
            out.copy_from_slice(from);
            Ok(())
        });
        if built.is_none() {
            tx.started = false;
            tx.len = 0;
            return Next::Done(Some(WcStatus::LocalAccessError));
        }
        if last {
            tx.started = false;
            tx.offset = 0;
            drop(tx);
            // Moves the cursor on; the completion waits for the stream.
            return Next::Done(None);
        }
        tx.offset = offset + chunk as u64;
        Next::Stay
    }

    /// A Read Request, when the ORD allows (N21).
    #[expect(clippy::too_many_arguments, reason = "the request's parts")]
    fn read_request(
        &self,
        qp: &Arc<Qp>,
        wqe: &SendWqe,
        sges: &[Sge],
        remote_addr: u64,
        remote_key: u32,
        slot: usize,
        reads: usize,
    ) -> Next {
        if qp.read_limits().1 == 0 {
            return Next::Done(Some(WcStatus::InvalidRequest));
        }
        if reads >= self.config.ord as usize {
            return Next::Wait;
        }
        // M9: local write suffices for the sink.
        let list = match resolve_local(qp, sges, Access::LOCAL_WRITE) {
            Ok(list) => list,
            Err(status) => return Next::Done(Some(status)),
        };
        let Ok(size) = u32::try_from(list.total) else {
            return Next::Done(Some(WcStatus::LengthError));
        };
        drop(list);
        let first = sges.first().copied().unwrap_or_default();
        let request = ReadRequest {
            sink_stag: first.key,
            sink_to: first.addr,
            size,
            source_stag: remote_key,
            source_to: remote_addr,
        };
        let mut tx = self.tx.lock();
        let msn = tx.read_msn;
        let Tx { buf, len, sent, .. } = &mut *tx;
        let Ok(n) = (Message::ReadRequest { msn, request }).write_fpdu(buf, self.config.crc) else {
            return Next::Done(Some(WcStatus::InternalError));
        };
        *len = n;
        *sent = 0;
        tx.read_msn = msn.wrapping_add(1);
        drop(tx);
        let mut out = OutRead {
            slot,
            msn,
            stag: first.key,
            to: first.addr,
            len: u64::from(size),
            sges: [Sge::default(); MAX_SGE],
            nsge: sges.len().min(MAX_SGE),
            invalidate_first: wqe.flags.contains(WrFlags::READ_LOCAL_INVALIDATE),
        };
        if let Some(dst) = out.sges.get_mut(..out.nsge) {
            dst.copy_from_slice(sges.get(..out.nsge).unwrap_or_default());
        }
        let _ = self.shared.lock().out_reads.push(out);
        Next::Done(None)
    }

    // ----- failure ---------------------------------------------------------

    /// This side found an error: queue `code` in a Terminate (copying the
    /// offending ULPDU's headers when given), then end the connection.
    fn fail(&self, qp: &Arc<Qp>, code: TermCode, ulpdu: Option<&[u8]>) {
        self.queue_terminate(code, ulpdu);
        qp.terminate();
    }

    fn queue_terminate(&self, code: TermCode, ulpdu: Option<&[u8]>) {
        let mut shared = self.shared.lock();
        if shared.failing {
            return;
        }
        shared.failing = true;
        if shared.peer_closed {
            return;
        }
        let mut terminate = Terminate::new(code);
        if let Some(ulpdu) = ulpdu
            && let Ok((header, _)) = DdpHeader::parse(ulpdu)
        {
            let hlen = header.len();
            terminate.segment_len = u16::try_from(ulpdu.len()).ok();
            terminate.ddp_header = ulpdu.get(..hlen);
            if header.ulp_ctrl & 0x0f == rdmap::Opcode::ReadRequest.ctrl() & 0x0f {
                terminate.rdmap_header = ulpdu.get(hlen..hlen + rdmap::READ_REQUEST_LEN);
            }
        }
        let message = Message::Terminate { msn: 1, terminate };
        let built = message
            .write_fpdu(&mut shared.term, self.config.crc)
            .or_else(|_| {
                Message::Terminate {
                    msn: 1,
                    terminate: Terminate::new(code),
                }
                .write_fpdu(&mut shared.term, self.config.crc)
            });
        shared.term_len = built.unwrap_or(0);
        shared.term_sent = 0;
    }

    /// A local error ended the connection (`Qp::terminate`): tell the peer,
    /// unless a Terminate already crossed.
    pub(crate) fn local_failure(&self) {
        self.queue_terminate(LocalCause::Catastrophic.term_code(), None);
    }

    // ----- receive -----------------------------------------------------------

    /// Bytes received from the stream, in order, in any chunking.
    pub fn receive(&self, bytes: &[u8]) {
        let Some(qp) = self.qp.upgrade() else {
            return;
        };
        if qp.state() != QpState::Connected {
            // Flushed, disconnected or closed: nothing is placed any more.
            self.rx.lock().state.dead = true;
            return;
        }
        let mut rest = bytes;
        let mut rounds = 0_usize;
        while !rest.is_empty() && rounds <= bytes.len() {
            rounds += 1;
            let (consumed, outcome) = {
                let mut rx = self.rx.lock();
                let Rx { deframer, state } = &mut *rx;
                if state.dead {
                    return;
                }
                match deframer.feed(rest) {
                    Ok(step) => (
                        step.consumed,
                        match step.ulpdu {
                            Some(ulpdu) => {
                                let mut shared = self.shared.lock();
                                let first = !core::mem::replace(&mut shared.may_send, true);
                                drop(shared);
                                let counters = &qp.device().counters;
                                counters.rdma_in_frames.fetch_add(1, Ordering::Relaxed);
                                counters.rdma_in_octets.fetch_add(
                                    mpa::fpdu_len(ulpdu.len()) as u64,
                                    Ordering::Relaxed,
                                );
                                let mut outcome = self.handle(&qp, state, ulpdu);
                                outcome.kick |= first;
                                outcome
                            }
                            None => Outcome::default(),
                        },
                    ),
                    Err(error) => {
                        state.dead = true;
                        let code = error
                            .term_code()
                            .unwrap_or(LocalCause::Catastrophic.term_code());
                        self.queue_terminate(code, None);
                        (
                            rest.len(),
                            Outcome::failed(state.recv.take().as_ref(), None),
                        )
                    }
                }
            };
            rest = rest.get(consumed..).unwrap_or_default();
            #[cfg(all(test, not(loom)))]
            hook::after_ulpdu();
            let stop = outcome.fail;
            Self::apply(&qp, &outcome);
            if stop {
                return;
            }
        }
    }

    /// The peer closed (`abortive`: reset) the stream.
    pub fn peer_closed(&self, abortive: bool) {
        let Some(qp) = self.qp.upgrade() else {
            return;
        };
        if qp.state() == QpState::Disconnected {
            // This side closed first: the peer's close answers ours.
            self.rx.lock().state.dead = true;
            self.shared.lock().peer_closed = true;
            return;
        }
        let recv = {
            let mut rx = self.rx.lock();
            rx.state.dead = true;
            rx.state.recv.take()
        };
        let failing = {
            let mut shared = self.shared.lock();
            shared.peer_closed = true;
            core::mem::replace(&mut shared.failing, true)
        };
        if let Some(recv) = recv {
            complete_recv(&qp, &recv, WcStatus::Cancelled);
        }
        if failing {
            // A Terminate already ended it; just let the runner close.
            qp.kick();
        } else if abortive {
            qp.terminate();
        } else {
            qp.peer_gone();
            qp.kick();
        }
    }

    fn apply(qp: &Arc<Qp>, outcome: &Outcome) {
        if let Some((recv, status)) = outcome.receive {
            complete_recv(qp, &recv, status);
        }
        if let Some(completion) = outcome.completion {
            qp.complete_taken(completion);
        }
        if outcome.fail {
            qp.terminate();
        } else if outcome.kick {
            qp.kick();
        }
    }

    /// One received ULPDU.
    fn handle(&self, qp: &Arc<Qp>, state: &mut RxState, ulpdu: &[u8]) -> Outcome {
        let message = match Message::parse(ulpdu, state.layout) {
            Ok(message) => message,
            Err(error) => return self.reject(state, error.term_code(), ulpdu),
        };
        match message {
            Message::Write {
                stag, to, payload, ..
            } => self.place_write(qp, state, stag, to, payload, ulpdu),
            Message::ReadResponse {
                stag,
                to,
                last,
                payload,
            } => self.place_response(qp, state, stag, to, last, payload, ulpdu),
            Message::Send {
                solicited,
                invalidate,
                msn,
                mo,
                last,
                payload,
            } => self.place_send(
                qp,
                state,
                SendSegment {
                    solicited,
                    invalidate,
                    msn,
                    mo,
                    last,
                },
                payload,
                ulpdu,
            ),
            Message::ReadRequest { msn, request } => self.queue_read(state, msn, request, ulpdu),
            Message::Terminate { terminate, .. } => {
                state.dead = true;
                let kind = match terminate.offending_ddp().map(|h| h.buffer) {
                    Some(Buffer::Untagged { qn, msn, .. }) if qn == rdmap::QN_READ_REQUEST => {
                        Concerns::Read(Some(msn))
                    }
                    Some(Buffer::Untagged { qn, .. }) if qn == rdmap::QN_SEND => {
                        Concerns::SendOrWrite
                    }
                    Some(Buffer::Tagged { .. }) => {
                        let write = terminate.offending_ddp().is_some_and(|h| {
                            h.ulp_ctrl & 0x0f == rdmap::Opcode::Write.ctrl() & 0x0f
                        });
                        if write {
                            Concerns::SendOrWrite
                        } else {
                            Concerns::Read(None)
                        }
                    }
                    Some(Buffer::Untagged { .. }) | None => Concerns::Any,
                };
                {
                    // Both at once: a runner that sees `failing` sees the
                    // Terminate too.
                    let mut shared = self.shared.lock();
                    shared.failing = true;
                    shared.peer_terminate = Some((kind, terminate.code.completion_status()));
                }
                Outcome::failed(state.recv.take().as_ref(), None)
            }
        }
    }

    /// Refuses a ULPDU: Terminate with `code`, the receive in progress fails.
    fn reject(&self, state: &mut RxState, code: Option<TermCode>, ulpdu: &[u8]) -> Outcome {
        state.dead = true;
        let code = code.unwrap_or(LocalCause::Catastrophic.term_code());
        self.queue_terminate(code, Some(ulpdu));
        Outcome::failed(
            state.recv.take().as_ref(),
            Some(WcStatus::RemoteOperationError),
        )
    }

    fn reject_cause(&self, state: &mut RxState, cause: LocalCause, ulpdu: &[u8]) -> Outcome {
        self.reject(state, Some(cause.term_code()), ulpdu)
    }

    fn place_write(
        &self,
        qp: &Arc<Qp>,
        state: &mut RxState,
        stag: u32,
        to: u64,
        payload: &[u8],
        ulpdu: &[u8],
    ) -> Outcome {
        if ddp::tagged_end(to, payload.len()).is_err() {
            return self.reject_cause(state, LocalCause::SinkOffsetWrap, ulpdu);
        }
        let sink = qp.device().resolve_remote(
            qp.pd(),
            qp.id(),
            stag,
            to,
            payload.len() as u64,
            Access::REMOTE_WRITE,
        );
        match sink {
            Ok(seg) => {
                let list = one(seg);
                if copy_in(&list, 0, payload).is_err() {
                    return self.reject_cause(state, LocalCause::Catastrophic, ulpdu);
                }
                Outcome::default()
            }
            Err(denied) => self.reject_cause(state, LocalCause::SinkDenied(denied), ulpdu),
        }
    }

    #[expect(clippy::too_many_arguments, reason = "the segment's fields")]
    fn place_response(
        &self,
        qp: &Arc<Qp>,
        state: &mut RxState,
        stag: u32,
        to: u64,
        last: bool,
        payload: &[u8],
        ulpdu: &[u8],
    ) -> Outcome {
        let front = self.shared.lock().out_reads.get(0).copied();
        let Some(read) = front else {
            let code =
                TermCode::rdmap(rdmap_etype::REMOTE_OPERATION, rdmap_code::UNEXPECTED_OPCODE);
            return self.reject(state, Some(code), ulpdu);
        };
        let end = state.placed.saturating_add(payload.len() as u64);
        let wrong_stag = stag != read.stag;
        let wrong_range =
            to != read.to.wrapping_add(state.placed) || end > read.len || (last && end != read.len);
        if wrong_stag || wrong_range {
            // The Read this Response claims to answer fails: its answer is
            // wrong (as a malformed segment fails the receive it concerns;
            // siw reports a protection error). Without this it completed
            // `Cancelled`, and no request told the consumer why the
            // connection ended (E5).
            if let Some(place) = self.shared.lock().done.get_mut(read.slot) {
                *place = Some(WcStatus::RemoteOperationError);
            }
        }
        if wrong_stag {
            return self.reject_cause(
                state,
                LocalCause::SinkDenied(crate::rnic::mr::Denied::Token),
                ulpdu,
            );
        }
        if wrong_range {
            return self.reject_cause(
                state,
                LocalCause::SinkDenied(crate::rnic::mr::Denied::Range),
                ulpdu,
            );
        }
        let sges = read.sges.get(..read.nsge).unwrap_or_default();
        let placed = resolve_local(qp, sges, Access::LOCAL_WRITE)
            .ok()
            .and_then(|list| copy_in(&list, state.placed, payload).ok());
        if placed.is_none() {
            // The sink went away under the Read: it fails here, and the
            // connection ends.
            let mut shared = self.shared.lock();
            if let Some(place) = shared.done.get_mut(read.slot) {
                *place = Some(WcStatus::LocalAccessError);
            }
            drop(shared);
            return self.reject_cause(state, LocalCause::Catastrophic, ulpdu);
        }
        if !last {
            state.placed = end;
            return Outcome::default();
        }
        state.placed = 0;
        if read.invalidate_first
            && let Some(first) = sges.first()
        {
            // M26, as the local engine does.
            let _ = qp.device().invalidate_key(qp.pd(), first.key);
        }
        let mut shared = self.shared.lock();
        shared.out_reads.pop();
        if let Some(place) = shared.done.get_mut(read.slot) {
            place.get_or_insert(WcStatus::Success);
        }
        Outcome {
            kick: true,
            ..Outcome::default()
        }
    }

    fn place_send(
        &self,
        qp: &Arc<Qp>,
        state: &mut RxState,
        segment: SendSegment,
        payload: &[u8],
        ulpdu: &[u8],
    ) -> Outcome {
        let recv = match state.recv {
            Some(recv) => recv,
            // Fault injection (`fault::Kind::ReceiveEmpty`, E5): the queue
            // counts as empty.
            None if fault::hit(fault::Kind::ReceiveEmpty) => {
                return self.reject_cause(state, LocalCause::NoReceive, ulpdu);
            }
            None => match qp.take_receive() {
                Ok(recv) => recv,
                // No receive posted: a Terminate, as siw (see module docs).
                Err(NoReceive::Empty | NoReceive::Gone) => {
                    return self.reject_cause(state, LocalCause::NoReceive, ulpdu);
                }
            },
        };
        state.recv = Some(recv);
        let buffer: u64 = recv.sges().iter().map(|s| u64::from(s.len)).sum();
        let buffer = u32::try_from(buffer).unwrap_or(u32::MAX);
        let queue = state
            .queues
            .get_mut(rdmap::QN_SEND as usize)
            .map(|q| q.accept(segment.msn, segment.mo, payload.len(), segment.last, buffer));
        let placement = match queue {
            Some(Ok(placement)) => placement,
            Some(Err(DdpError::MessageTooLong { .. })) => {
                state.dead = true;
                self.queue_terminate(LocalCause::ReceiveTooSmall.term_code(), Some(ulpdu));
                return Outcome::failed(
                    state.recv.take().as_ref(),
                    Some(WcStatus::ReceiveTooSmall),
                );
            }
            Some(Err(error)) => return self.reject(state, error.term_code(), ulpdu),
            None => return self.reject_cause(state, LocalCause::Catastrophic, ulpdu),
        };
        let copied = resolve_local(qp, recv.sges(), Access::LOCAL_WRITE).and_then(|list| {
            copy_in(&list, u64::from(placement.offset), payload)
                .map_err(|()| WcStatus::LocalAccessError)
        });
        if let Err(status) = copied {
            state.dead = true;
            self.queue_terminate(LocalCause::Catastrophic.term_code(), Some(ulpdu));
            return Outcome::failed(state.recv.take().as_ref(), Some(status));
        }
        if !placement.last {
            return Outcome::default();
        }
        state.recv = None;
        let mut completion = Completion::new(
            WcStatus::Success,
            Opcode::Receive,
            qp.config().context,
            recv.context,
        );
        completion.bytes = placement.message_len;
        completion.solicited = segment.solicited;
        if let Some(key) = segment.invalidate {
            // M24 / C2, as the local engine.
            if qp.device().invalidate_key(qp.pd(), key).is_err() {
                state.dead = true;
                self.queue_terminate(LocalCause::CannotInvalidate.term_code(), Some(ulpdu));
                return Outcome::failed(Some(&recv), Some(WcStatus::InvalidRequest));
            }
            completion.opcode = Opcode::ReceiveAndInvalidate;
            completion.invalidated_key = key;
        }
        Outcome {
            completion: Some(completion),
            ..Outcome::default()
        }
    }

    fn queue_read(
        &self,
        state: &mut RxState,
        msn: u32,
        request: ReadRequest,
        ulpdu: &[u8],
    ) -> Outcome {
        let accepted = state
            .queues
            .get_mut(rdmap::QN_READ_REQUEST as usize)
            .map(|q| q.accept(msn, 0, 0, true, 0));
        match accepted {
            Some(Ok(_)) => {}
            Some(Err(error)) => return self.reject(state, error.term_code(), ulpdu),
            None => return self.reject_cause(state, LocalCause::Catastrophic, ulpdu),
        }
        // The source is checked when the request's turn comes (`respond`).
        let full = self.shared.lock().in_reads.push((msn, request)).is_err();
        if full {
            return self.reject_cause(state, LocalCause::IrdExceeded, ulpdu);
        }
        Outcome {
            kick: true,
            ..Outcome::default()
        }
    }
}

/// The fields of a Send segment.
#[derive(Clone, Copy)]
struct SendSegment {
    solicited: bool,
    invalidate: Option<u32>,
    msn: u32,
    mo: u32,
    last: bool,
}

/// Which request a received Terminate concerns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Concerns {
    /// A Read: the one with this MSN, else the oldest outstanding.
    Read(Option<u32>),
    SendOrWrite,
    Any,
}

/// What receiving one ULPDU asks of the QP, done with no link lock held.
#[derive(Default)]
struct Outcome {
    /// A receive that fails (or is cancelled) with a status.
    receive: Option<(RecvWqe, WcStatus)>,
    /// A receive that completed.
    completion: Option<Completion>,
    /// The connection ends.
    fail: bool,
    /// The runner has work (a Read Response to send, a Read to retire).
    kick: bool,
}

impl Outcome {
    /// The connection ends; a receive in progress completes with `status`
    /// (cancelled when none is given).
    fn failed(recv: Option<&RecvWqe>, status: Option<WcStatus>) -> Self {
        Self {
            receive: recv.map(|r| (*r, status.unwrap_or(WcStatus::Cancelled))),
            fail: true,
            ..Self::default()
        }
    }
}

/// Fails the request a received Terminate concerns (if one was received and
/// not yet applied), with `shared` held. Called by the runner only: it alone
/// retires requests, so the ring positions walked here stay put (the
/// receive side used to walk them unlocked while the runner retired, and a
/// status could land on a neighbour or on a retired slot).
///
/// Only a request that went (at least in part) on the wire can be the one
/// concerned: those before the cursor, and the one at it when `started`.
/// A request posted later — after the QP entered `Error` and the abort was
/// indicated, before a deferred runner got here — completes cancelled (E5),
/// not with the Terminate's status.
fn mark_concerned(shared: &mut Shared, qp: &Qp, started: bool) {
    let Some((kind, status)) = shared.peer_terminate.take() else {
        return;
    };
    let read_slot = {
        let reads = || (0..shared.out_reads.len()).filter_map(|i| shared.out_reads.get(i));
        let named = match kind {
            Concerns::Read(Some(msn)) => reads().find(|r| r.msn == msn),
            _ => None,
        };
        named.or_else(|| reads().next()).map(|r| r.slot)
    };
    for index in 0..shared.cursor + usize::from(started) {
        let Some((slot, opcode)) = qp.queued(index) else {
            return;
        };
        let hit = match kind {
            Concerns::Read(_) => Some(slot) == read_slot,
            Concerns::SendOrWrite => matches!(opcode, Opcode::Send | Opcode::Write),
            Concerns::Any => true,
        };
        if hit && let Some(place) = shared.done.get_mut(slot) {
            if place.is_none() {
                *place = Some(status);
                return;
            }
            if matches!(kind, Concerns::Read(_)) {
                return;
            }
        }
    }
}

/// Completes a receive the receive side took (`Qp::take_receive`): the QP's
/// close waits for it (L21).
fn complete_recv(qp: &Qp, recv: &RecvWqe, status: WcStatus) {
    qp.complete_taken(Completion::new(
        status,
        Opcode::Receive,
        qp.config().context,
        recv.context,
    ));
}

fn one(seg: Segment) -> SegList {
    let total = seg.len();
    let mut first = Some(seg);
    SegList {
        segs: core::array::from_fn(|_| first.take()),
        total,
    }
}

/// A test's hook into the receive path: runs after each ULPDU is handled,
/// before its outcome is applied, with no link lock held (to interleave a
/// runner there deterministically).
#[cfg(test)]
#[cfg(not(loom))]
mod hook {
    use alloc::boxed::Box;
    use core::cell::RefCell;

    std::thread_local! {
        static AFTER_ULPDU: RefCell<Option<Box<dyn FnMut()>>> = const { RefCell::new(None) };
    }

    /// Installs `f` for this thread (until `clear`).
    pub(super) fn set(f: Box<dyn FnMut()>) {
        AFTER_ULPDU.with(|h| *h.borrow_mut() = Some(f));
    }

    pub(super) fn clear() {
        AFTER_ULPDU.with(|h| *h.borrow_mut() = None);
    }

    pub(super) fn after_ulpdu() {
        // Taken out while it runs, so a hook may re-enter the receive path.
        let hook = AFTER_ULPDU.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook();
            AFTER_ULPDU.with(|h| {
                let mut slot = h.borrow_mut();
                if slot.is_none() {
                    *slot = Some(hook);
                }
            });
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests;

#[cfg(test)]
#[cfg(not(loom))]
mod tcp_tests;

#[cfg(test)]
#[cfg(not(loom))]
mod lend_tests;
