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
//!
//! [`TermCode::completion_status`]: super::terminate::TermCode::completion_status

use alloc::boxed::Box;

use super::ddp::{self, UntaggedQueue};
use super::mpa::{self, Deframer, Rtr};
use super::rdmap::{self, ReadRequest};
use super::setup::Established;
use super::terminate::{MAX_TERMINATE_LEN, TermLayout};
use crate::kernel::sync::{Arc, SpinLock, Weak};
use crate::rnic::memory;
use crate::rnic::mr::Segment;
use crate::rnic::qp::{self, ConnectError, MAX_SGE, Qp, RecvWqe};
use crate::rnic::ring::Ring;
use crate::rnic::types::{Access, Completion, Opcode, Sge, WcStatus};

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
        deframer: Deframer::try_new(usize::from(config.max_rx_ulpdu), config.crc)
            .ok_or(LinkError::Resources)?,
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
    crate::kernel::mem::try_filled(n, value).ok_or(LinkError::Resources)
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

impl Link {
    /// The configuration in force (IRD/ORD clamped to the device).
    pub const fn config(&self) -> &LinkConfig {
        &self.config
    }
}

/// Which request a received Terminate concerns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Concerns {
    /// A Read: the one with this MSN, else the oldest outstanding.
    Read(Option<u32>),
    SendOrWrite,
    Any,
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

mod finish;
mod receive;
mod transmit;

#[cfg(test)]
#[cfg(not(loom))]
mod tests;

#[cfg(test)]
#[cfg(not(loom))]
mod tcp_tests;

#[cfg(test)]
#[cfg(not(loom))]
mod lend_tests;
