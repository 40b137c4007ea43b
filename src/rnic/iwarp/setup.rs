//! MPA connection setup (RFC 5044 §7.1, RFC 6581) as two sans-I/O state
//! machines: [`Initiator`] and [`Responder`].
//!
//! No sockets and no clocks. The caller (the host transport over `std::net`,
//! the kernel transport over WSK) moves bytes and time in and out:
//!
//! * [`Initiator::receive`] / [`Responder::receive`] take the bytes that came
//!   off the TCP stream, in chunks of any size, and a monotonic `now` in
//!   milliseconds; they return the [`Event`] that chunk completed, if any;
//! * `output()` is what to write to the stream next, `advance_output(n)`
//!   drops the `n` bytes written (partial writes are fine);
//! * `tick(now)` reports a passed deadline when no bytes come, and
//!   `deadline()` says when to call it at the latest.
//!
//! Bytes that complete a wait are taken even when they are handed over after
//! its deadline; a wait still incomplete at its deadline fails.
//!
//! Every error ends the setup: the machine stays failed and returns the same
//! error from then on (except the local mistakes `new`, `accept` and `reject`
//! document, which change nothing). The caller then writes what `output()` still holds (a
//! reject frame, or a Terminate once the side is in FPDU mode) and closes the
//! TCP connection.
//!
//! # The exchange
//!
//! ```text
//!  Initiator                                         Responder
//!  new(): request frame ───────────────────────────▶ AwaitRequest  (5 s)
//!  AwaitReply (10 s)                                  Event::Request ─▶ consumer
//!                                                     AwaitDecision (10 s)
//!                     ◀─────────── reply frame ────── accept() / reject()
//!  Event::Established / Rejected
//!  (peer-to-peer: RTR FPDU) ───────────────────────▶ AwaitRtr (5 s)
//!                                                     Event::Established
//! ```
//!
//! Bytes that follow the last setup message in the same chunk (the peer's
//! first FPDUs) come back untouched in [`Established::leftover`].
//!
//! The frame buffer is fixed (a header and at most 512 bytes of private
//! data), the RTR is read through a [`Deframer`] sized for the longest Terminate, and the output
//! holds at most one frame and one or two short FPDUs: nothing grows with what
//! a peer sends.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::ddp::UNTAGGED_HEADER_LEN;
use super::mpa::{
    Deframer, ENHANCED_LEN, Enhanced, FRAME_HEADER_LEN, FrameKind, MAX_IRD_ORD, MAX_PRIVATE_DATA,
    MpaError, MpaFrame, Negotiated, Rtr, RtrKinds,
};
use super::rdmap::{Message, RdmapError};
use super::terminate::{LlpCode, MAX_TERMINATE_LEN, TermCode, Terminate};

/// How long an initiator waits for the reply: siw's `MPAREQ_TIMEOUT` (10 s,
/// the initiator's wait after sending its request).
pub const DEFAULT_REPLY_TIMEOUT_MS: u64 = 10_000;
/// How long a responder waits for the request once TCP is up: siw's
/// `MPAREP_TIMEOUT` (5 s).
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// How long a responder waits for its consumer's accept or reject: the
/// initiator gives up after [`DEFAULT_REPLY_TIMEOUT_MS`] anyway.
pub const DEFAULT_DECISION_TIMEOUT_MS: u64 = 10_000;
/// How long a responder waits for the RTR after its reply (siw sets no timer
/// here; 5 s, as for the request).
pub const DEFAULT_RTR_TIMEOUT_MS: u64 = 5_000;

/// The MSN the RTR message takes on its queue (Send: 0, Read Request: 1):
/// the first, as RFC 5041 starts every queue at 1.
pub const RTR_MSN: u32 = 1;

/// Largest ULPDU read while waiting for the RTR: the longest Terminate (70
/// bytes with its DDP header); an RTR is at most 46 (a Read Request), and
/// anything longer than a Terminate is no RTR.
const RTR_MAX_ULPDU: usize = UNTAGGED_HEADER_LEN + MAX_TERMINATE_LEN;
/// A whole request or reply frame.
const MAX_FRAME: usize = FRAME_HEADER_LEN + MAX_PRIVATE_DATA;

/// Why a setup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupError {
    /// A frame or FPDU failed an MPA check (key, revision, private data
    /// length, IRD/ORD block, markers, RTR choice, IRD, CRC), or a local
    /// argument did (private data too long, IRD/ORD out of range).
    Mpa(MpaError),
    /// The FPDU that should be the RTR does not hold a valid RDMAP message.
    Rdmap(RdmapError),
    /// Initiator: a revision-2 reply without the IRD/ORD block to a request
    /// that had one.
    EnhancedReplyMissing,
    /// Responder: bytes came after the request before the reply went out
    /// (RFC 5044: the initiator sends nothing until it has the reply).
    DataBeforeReply,
    /// Responder: the first FPDU is not the negotiated zero-length RTR.
    NotRtr,
    /// Responder: the initiator sent a Terminate instead of the RTR.
    PeerTerminated(TermCode),
    /// The deadline of the current wait passed.
    TimedOut,
    /// A call the current state does not take (bytes or a decision after the
    /// setup ended, `accept` without a request, ...).
    WrongState,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl From<MpaError> for SetupError {
    fn from(error: MpaError) -> Self {
        Self::Mpa(error)
    }
}

impl From<RdmapError> for SetupError {
    fn from(error: RdmapError) -> Self {
        Self::Rdmap(error)
    }
}

/// What a setup machine reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Responder: a valid request arrived; call [`Responder::accept`] or
    /// [`Responder::reject`].
    Request(PeerRequest),
    /// The connection is up: FPDUs may flow (after `output()` is flushed).
    Established(Established),
    /// Initiator: the responder rejected the connection.
    Rejected {
        /// The reject frame's private data (after any IRD/ORD block).
        private_data: Vec<u8>,
    },
}

/// A request as the responder's consumer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRequest {
    /// MPA revision (1, or 2 for RFC 6581).
    pub revision: u8,
    /// The initiator asked for CRC (the reply then turns it on).
    pub crc: bool,
    /// The initiator's IRD (enhanced requests only).
    pub ird: Option<u16>,
    /// The initiator's ORD (enhanced requests only).
    pub ord: Option<u16>,
    /// RTR kinds offered (empty unless the request is peer-to-peer).
    pub rtr_offered: RtrKinds,
    /// The consumer's private data (the IRD/ORD block removed).
    pub private_data: Vec<u8>,
}

/// The outcome of a successful setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Established {
    /// What was agreed, in this side's terms: `ird` is how many inbound Read
    /// Requests this side must take, `ord` how many it may issue (`None`
    /// without the RFC 6581 block: each side's own limits apply). `rtr` is
    /// the RTR used; with [`Rtr::Send`] or [`Rtr::Read`] the RTR took MSN
    /// [`RTR_MSN`] of queue 0 or 1, so the data path continues at MSN 2 there
    /// (initiator: sending; responder: receiving). With [`Rtr::Read`] the
    /// initiator has one Read outstanding (counted against its ORD) that the
    /// responder answers with a zero-length Read Response to STag 1.
    pub negotiated: Negotiated,
    /// The MPA revision in force (1 after an initiator's fallback).
    pub revision: u8,
    /// The peer's private data (initiator: the reply's; responder: the
    /// request's).
    pub private_data: Vec<u8>,
    /// Responder without RTR: RFC 5044 lets this side send its first FPDU
    /// only after it has received and checked one from the initiator.
    pub receive_first: bool,
    /// Bytes after the last setup message in the chunk that completed the
    /// setup: the start of the peer's FPDU stream, untouched.
    pub leftover: Vec<u8>,
}

/// Bytes to send, written by the caller in as many pieces as it likes.
#[derive(Debug, Default)]
struct Outbox {
    buf: Vec<u8>,
    sent: usize,
}

impl Outbox {
    fn pending(&self) -> &[u8] {
        self.buf.get(self.sent..).unwrap_or_default()
    }

    fn advance(&mut self, n: usize) {
        self.sent = self.sent.saturating_add(n).min(self.buf.len());
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
        }
    }

    fn push_frame(&mut self, frame: &MpaFrame<'_>) -> Result<(), MpaError> {
        let start = self.buf.len();
        self.buf.resize(start + frame.len(), 0);
        let written = self
            .buf
            .get_mut(start..)
            .ok_or(MpaError::BufferTooSmall {
                needed: frame.len(),
            })
            .and_then(|out| frame.write(out));
        if written.is_err() {
            self.buf.truncate(start);
        }
        written.map(|_| ())
    }

    fn push_message(&mut self, message: &Message<'_>, crc: bool) -> Result<(), RdmapError> {
        let start = self.buf.len();
        let len = super::mpa::fpdu_len(message.ulpdu_len());
        self.buf.resize(start + len, 0);
        let written = self
            .buf
            .get_mut(start..)
            .ok_or(RdmapError::BufferTooSmall { needed: len })
            .and_then(|out| message.write_fpdu(out, crc));
        if written.is_err() {
            self.buf.truncate(start);
        }
        written.map(|_| ())
    }

    /// Queues a Terminate (RFC layout) reporting `code`; a failure to build
    /// it only means the connection closes without one.
    fn push_terminate(&mut self, code: TermCode, crc: bool) {
        let message = Message::Terminate {
            msn: 1,
            terminate: Terminate::new(code),
        };
        let _ = self.push_message(&message, crc);
    }
}

/// Gathers one request or reply frame from chunks, in a buffer allocated
/// once for the largest frame.
#[derive(Debug)]
struct FrameReader {
    buf: Vec<u8>,
    have: usize,
    kind: FrameKind,
}

impl FrameReader {
    fn new(kind: FrameKind) -> Self {
        Self {
            buf: vec![0; MAX_FRAME],
            have: 0,
            kind,
        }
    }

    fn held(&self) -> &[u8] {
        self.buf.get(..self.have).unwrap_or_default()
    }

    /// Takes bytes from `input` until the frame is complete; returns how
    /// many were taken and whether the frame is complete. The key, the
    /// revision and the private data length are checked as soon as the
    /// 20-byte header is in.
    fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), MpaError> {
        let mut consumed = 0;
        loop {
            let needed = if self.have < FRAME_HEADER_LEN {
                FRAME_HEADER_LEN
            } else {
                match MpaFrame::parse(self.held(), self.kind) {
                    Ok((_, len)) if len == self.have => return Ok((consumed, true)),
                    Ok((_, len)) | Err(MpaError::Truncated { needed: len }) => len,
                    Err(error) => return Err(error),
                }
            };
            let rest = input.get(consumed..).unwrap_or_default();
            let take = needed.saturating_sub(self.have).min(rest.len());
            if take == 0 {
                return Ok((consumed, false));
            }
            let (head, _) = rest.split_at_checked(take).unwrap_or((rest, &[]));
            let slot = self
                .buf
                .get_mut(self.have..self.have + take)
                .ok_or(MpaError::PrivateDataTooLong(needed))?;
            slot.copy_from_slice(head);
            self.have += take;
            consumed += take;
        }
    }
}

fn deadline_after(now: u64, timeout_ms: u64) -> u64 {
    now.saturating_add(timeout_ms)
}

/// The initiator's choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitiatorConfig {
    /// Ask for CRC32c on the FPDUs.
    pub crc: bool,
    /// Send a revision-2 request with the RFC 6581 IRD/ORD block (falling
    /// back to revision 1 if the responder answers with revision 1); `false`:
    /// a plain revision-1 request.
    pub enhanced: bool,
    /// Inbound Read Requests this side can take (at most [`MAX_IRD_ORD`]).
    pub ird: u16,
    /// Outbound Read Requests this side will issue (at most [`MAX_IRD_ORD`]).
    pub ord: u16,
    /// RTR kinds offered; non-empty asks for peer-to-peer mode (the
    /// initiator then sends the RTR the responder picks). Enhanced only.
    pub rtr: RtrKinds,
    /// How long to wait for the reply, in ms.
    pub reply_timeout_ms: u64,
    /// Lower this side's ORD to the responder's IRD instead of failing
    /// with [`MpaError::InsufficientIrd`] (NDK's rule N20; siw fails).
    pub lower_ord: bool,
}

impl Default for InitiatorConfig {
    /// What siw sends as initiator: revision 2 with the block, no CRC,
    /// IRD = ORD = 1, no RTR; the reply awaited 10 s.
    fn default() -> Self {
        Self {
            crc: false,
            enhanced: true,
            ird: 1,
            ord: 1,
            rtr: RtrKinds::empty(),
            reply_timeout_ms: DEFAULT_REPLY_TIMEOUT_MS,
            lower_ord: false,
        }
    }
}

impl InitiatorConfig {
    /// The most private data a request can carry with this configuration.
    #[must_use]
    pub const fn max_private_data(&self) -> usize {
        if self.enhanced {
            MAX_PRIVATE_DATA - ENHANCED_LEN
        } else {
            MAX_PRIVATE_DATA
        }
    }

    /// The request frame this configuration sends.
    fn request<'a>(&self, private_data: &'a [u8]) -> MpaFrame<'a> {
        if self.enhanced {
            MpaFrame::request(
                self.crc,
                Enhanced {
                    ird: self.ird,
                    ord: self.ord,
                    peer_to_peer: !self.rtr.is_empty(),
                    rtr: self.rtr,
                },
                private_data,
            )
        } else {
            MpaFrame {
                revision: 1,
                enhanced: None,
                ..MpaFrame::request(self.crc, Enhanced::default(), private_data)
            }
        }
    }
}

#[derive(Debug)]
enum InitiatorState {
    AwaitReply { reader: FrameReader, deadline: u64 },
    Done,
    Failed(SetupError),
}

/// The connecting side: sends the request, checks the reply, sends the RTR.
#[derive(Debug)]
pub struct Initiator {
    /// The request as sent, without its private data (what the reply is
    /// checked against).
    request: MpaFrame<'static>,
    state: InitiatorState,
    out: Outbox,
    lower_ord: bool,
}

impl Initiator {
    /// Starts a setup on a freshly connected stream: the request frame is
    /// queued in [`Self::output`] and the reply awaited until
    /// `now + config.reply_timeout_ms`.
    ///
    /// # Errors
    /// [`MpaError::PrivateDataTooLong`] past
    /// [`InitiatorConfig::max_private_data`]; [`MpaError::IrdOrdOutOfRange`].
    pub fn new(
        config: &InitiatorConfig,
        private_data: &[u8],
        now: u64,
    ) -> Result<Self, SetupError> {
        if config.ird > MAX_IRD_ORD || config.ord > MAX_IRD_ORD {
            return Err(MpaError::IrdOrdOutOfRange.into());
        }
        let frame = config.request(private_data);
        let mut out = Outbox::default();
        out.push_frame(&frame)?;
        Ok(Self {
            request: MpaFrame {
                private_data: &[],
                ..frame
            },
            state: InitiatorState::AwaitReply {
                reader: FrameReader::new(FrameKind::Reply),
                deadline: deadline_after(now, config.reply_timeout_ms),
            },
            out,
            lower_ord: config.lower_ord,
        })
    }

    /// Bytes to write to the stream next.
    #[must_use]
    pub fn output(&self) -> &[u8] {
        self.out.pending()
    }

    /// Drops the first `n` bytes of [`Self::output`], written by the caller.
    pub fn advance_output(&mut self, n: usize) {
        self.out.advance(n);
    }

    /// When [`Self::tick`] must be called at the latest, while waiting.
    #[must_use]
    pub const fn deadline(&self) -> Option<u64> {
        match self.state {
            InitiatorState::AwaitReply { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    /// Whether the setup ended (established, rejected or failed).
    #[must_use]
    pub const fn is_finished(&self) -> bool {
        !matches!(self.state, InitiatorState::AwaitReply { .. })
    }

    /// Reports a passed deadline.
    ///
    /// # Errors
    /// [`SetupError::TimedOut`] once `now` reaches the deadline; the error
    /// the setup failed with before.
    pub fn tick(&mut self, now: u64) -> Result<(), SetupError> {
        match self.state {
            InitiatorState::AwaitReply { deadline, .. } if now >= deadline => {
                Err(self.fail(SetupError::TimedOut))
            }
            InitiatorState::Failed(error) => Err(error),
            _ => Ok(()),
        }
    }

    /// Takes bytes from the stream. Returns [`Event::Established`] (the RTR
    /// is then queued in [`Self::output`] when peer-to-peer mode was agreed)
    /// or [`Event::Rejected`] once the reply is complete; `None` while it is
    /// not.
    ///
    /// # Errors
    /// A malformed reply ([`MpaError::BadKey`], [`MpaError::BadRevision`],
    /// [`MpaError::PrivateDataTooLong`], [`MpaError::EnhancedBlockMissing`],
    /// [`SetupError::EnhancedReplyMissing`], [`MpaError::UnexpectedMarkers`]):
    /// close without a Terminate, MPA is not up. A well-formed accept whose
    /// terms fail ([`MpaError::InsufficientIrd`], [`MpaError::NoMatchingRtr`]):
    /// this side is in FPDU mode and a Terminate with RFC 6581's code for it
    /// is queued (as siw and iw_cxgb4 do). [`SetupError::TimedOut`]; [`SetupError::WrongState`]
    /// after the end.
    pub fn receive(&mut self, input: &[u8], now: u64) -> Result<Option<Event>, SetupError> {
        let InitiatorState::AwaitReply { reader, .. } = &mut self.state else {
            return Err(match self.state {
                InitiatorState::Failed(error) => error,
                _ => SetupError::WrongState,
            });
        };
        let (consumed, complete) = match reader.feed(input) {
            Ok(step) => step,
            Err(error) => return Err(self.fail(error.into())),
        };
        if !complete {
            return self.tick(now).map(|()| None);
        }
        match Self::check(&self.request, reader.held(), self.lower_ord) {
            Ok(Event::Established(established)) => {
                if let Some(rtr) = established.negotiated.rtr {
                    let message = Message::rtr(rtr, RTR_MSN);
                    if let Err(error) = self.out.push_message(&message, established.negotiated.crc)
                    {
                        return Err(self.fail(error.into()));
                    }
                }
                self.state = InitiatorState::Done;
                Ok(Some(Event::Established(Established {
                    leftover: input.get(consumed..).unwrap_or_default().to_vec(),
                    ..established
                })))
            }
            Ok(event) => {
                self.state = InitiatorState::Done;
                Ok(Some(event))
            }
            Err((error, terminate_crc)) => {
                if let (Some(crc), Some(code)) = (terminate_crc, term_of(error)) {
                    self.out.push_terminate(code, crc);
                }
                Err(self.fail(error))
            }
        }
    }

    /// Checks a complete reply against the request. On failure, also says
    /// whether this side entered FPDU mode (the CRC setting to send a
    /// Terminate with).
    fn check(
        request: &MpaFrame<'_>,
        bytes: &[u8],
        lower_ord: bool,
    ) -> Result<Event, (SetupError, Option<bool>)> {
        let (reply, _) = MpaFrame::parse(bytes, FrameKind::Reply).map_err(|e| (e.into(), None))?;
        if reply.reject {
            return Ok(Event::Rejected {
                private_data: reply.private_data.to_vec(),
            });
        }
        if reply.revision == 2 && request.enhanced.is_some() && reply.enhanced.is_none() {
            return Err((SetupError::EnhancedReplyMissing, None));
        }
        let crc = reply.crc || request.crc;
        let negotiated = reply
            .check_reply_with(request, lower_ord)
            .map_err(|error| {
                let fpdu_mode =
                    matches!(error, MpaError::InsufficientIrd | MpaError::NoMatchingRtr);
                (error.into(), fpdu_mode.then_some(crc))
            })?;
        Ok(Event::Established(Established {
            negotiated,
            revision: reply.revision,
            private_data: reply.private_data.to_vec(),
            receive_first: false,
            leftover: Vec::new(),
        }))
    }

    fn fail(&mut self, error: SetupError) -> SetupError {
        self.state = InitiatorState::Failed(error);
        error
    }
}

/// The Terminate that reports `error`, if any.
const fn term_of(error: SetupError) -> Option<TermCode> {
    match error {
        SetupError::Mpa(error) => error.term_code(),
        SetupError::Rdmap(error) => error.term_code(),
        SetupError::NotRtr => Some(TermCode::llp(LlpCode::NoMatchingRtr)),
        _ => None,
    }
}

/// The responder's choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Turn CRC on even when the initiator did not ask (when it asks, CRC is
    /// on regardless: RFC 5044).
    pub crc: bool,
    /// How long to wait for the request, in ms.
    pub request_timeout_ms: u64,
    /// How long to wait for the consumer's accept or reject, in ms.
    pub decision_timeout_ms: u64,
    /// How long to wait for the RTR after the reply, in ms.
    pub rtr_timeout_ms: u64,
}

impl Default for ResponderConfig {
    /// CRC only when asked; the default timeouts.
    fn default() -> Self {
        Self {
            crc: false,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            decision_timeout_ms: DEFAULT_DECISION_TIMEOUT_MS,
            rtr_timeout_ms: DEFAULT_RTR_TIMEOUT_MS,
        }
    }
}

#[derive(Debug)]
enum ResponderState {
    AwaitRequest {
        reader: FrameReader,
        deadline: u64,
    },
    AwaitDecision {
        /// The request without its private data.
        request: MpaFrame<'static>,
        private_data: Vec<u8>,
        deadline: u64,
    },
    AwaitRtr {
        deframer: Deframer,
        established: Established,
        rtr: Rtr,
        deadline: u64,
    },
    Done,
    Failed(SetupError),
}

/// The listening side: checks the request, hands it to the consumer, sends
/// its reply, checks the RTR.
#[derive(Debug)]
pub struct Responder {
    config: ResponderConfig,
    state: ResponderState,
    out: Outbox,
}

impl Responder {
    /// Starts a setup on a freshly accepted stream; the request is awaited
    /// until `now + config.request_timeout_ms`.
    #[must_use]
    pub fn new(config: ResponderConfig, now: u64) -> Self {
        Self {
            state: ResponderState::AwaitRequest {
                reader: FrameReader::new(FrameKind::Request),
                deadline: now.saturating_add(config.request_timeout_ms),
            },
            config,
            out: Outbox {
                buf: Vec::new(),
                sent: 0,
            },
        }
    }

    /// Bytes to write to the stream next.
    #[must_use]
    pub fn output(&self) -> &[u8] {
        self.out.pending()
    }

    /// Drops the first `n` bytes of [`Self::output`], written by the caller.
    pub fn advance_output(&mut self, n: usize) {
        self.out.advance(n);
    }

    /// When [`Self::tick`] must be called at the latest, while waiting.
    #[must_use]
    pub const fn deadline(&self) -> Option<u64> {
        match self.state {
            ResponderState::AwaitRequest { deadline, .. }
            | ResponderState::AwaitDecision { deadline, .. }
            | ResponderState::AwaitRtr { deadline, .. } => Some(deadline),
            ResponderState::Done | ResponderState::Failed(_) => None,
        }
    }

    /// Whether the setup ended (established, rejected or failed).
    #[must_use]
    pub const fn is_finished(&self) -> bool {
        matches!(self.state, ResponderState::Done | ResponderState::Failed(_))
    }

    /// Reports a passed deadline.
    ///
    /// # Errors
    /// [`SetupError::TimedOut`] once `now` reaches the deadline; the error
    /// the setup failed with before.
    pub fn tick(&mut self, now: u64) -> Result<(), SetupError> {
        match self.state {
            ResponderState::Failed(error) => Err(error),
            _ => match self.deadline() {
                Some(deadline) if now >= deadline => Err(self.fail(SetupError::TimedOut)),
                _ => Ok(()),
            },
        }
    }

    /// Takes bytes from the stream. Returns [`Event::Request`] once a valid
    /// request is complete, [`Event::Established`] once the RTR is checked;
    /// `None` while more is needed.
    ///
    /// # Errors
    /// A malformed request ([`MpaError::BadKey`], [`MpaError::BadRevision`],
    /// [`MpaError::PrivateDataTooLong`], [`MpaError::EnhancedBlockMissing`])
    /// or [`SetupError::DataBeforeReply`]: close without a reply, as siw
    /// does. A request with markers ([`MpaError::MarkersRequested`]) or a
    /// peer-to-peer one offering no RTR kind ([`MpaError::NoMatchingRtr`]):
    /// a reject frame is queued. A bad first FPDU after the reply
    /// ([`SetupError::NotRtr`], [`SetupError::Rdmap`], a bad CRC): this side
    /// is in FPDU mode, a Terminate is queued. [`SetupError::PeerTerminated`];
    /// [`SetupError::TimedOut`]; [`SetupError::WrongState`] after the end.
    pub fn receive(&mut self, input: &[u8], now: u64) -> Result<Option<Event>, SetupError> {
        match &mut self.state {
            ResponderState::AwaitRequest { reader, .. } => {
                let (consumed, complete) = match reader.feed(input) {
                    Ok(step) => step,
                    Err(error) => return Err(self.fail(error.into())),
                };
                if !complete {
                    return self.tick(now).map(|()| None);
                }
                if consumed < input.len() {
                    return Err(self.fail(SetupError::DataBeforeReply));
                }
                self.take_request(now).map(Some)
            }
            ResponderState::AwaitDecision { .. } => {
                if input.is_empty() {
                    self.tick(now).map(|()| None)
                } else {
                    Err(self.fail(SetupError::DataBeforeReply))
                }
            }
            ResponderState::AwaitRtr { .. } => self.receive_rtr(input, now),
            ResponderState::Done => Err(SetupError::WrongState),
            ResponderState::Failed(error) => Err(*error),
        }
    }

    /// Checks the complete request: queues an automatic reject for markers
    /// or an empty RTR offer, else reports it to the consumer.
    fn take_request(&mut self, now: u64) -> Result<Event, SetupError> {
        let ResponderState::AwaitRequest { reader, .. } = &self.state else {
            return Err(SetupError::WrongState);
        };
        let parsed = MpaFrame::parse(reader.held(), FrameKind::Request);
        let (request, private_data) = match parsed {
            Ok((frame, _)) => (
                MpaFrame {
                    private_data: &[],
                    ..frame
                },
                frame.private_data.to_vec(),
            ),
            Err(error) => return Err(self.fail(error.into())),
        };
        let offer = request.enhanced.unwrap_or_default();
        let refusal = if request.markers {
            Some(MpaError::MarkersRequested)
        } else if offer.peer_to_peer && offer.rtr.choose().is_none() {
            Some(MpaError::NoMatchingRtr)
        } else {
            None
        };
        if let Some(error) = refusal {
            let _ = self.out.push_frame(&MpaFrame::reject(&request, &[]));
            return Err(self.fail(error.into()));
        }
        let event = PeerRequest {
            revision: request.revision,
            crc: request.crc,
            ird: request.enhanced.map(|e| e.ird),
            ord: request.enhanced.map(|e| e.ord),
            rtr_offered: if offer.peer_to_peer {
                offer.rtr
            } else {
                RtrKinds::empty()
            },
            private_data: private_data.clone(),
        };
        self.state = ResponderState::AwaitDecision {
            request,
            private_data,
            deadline: deadline_after(now, self.config.decision_timeout_ms),
        };
        Ok(Event::Request(event))
    }

    /// Accepts the request: queues the reply (CRC as asked or configured,
    /// this side's IRD and ORD for an enhanced request, the RTR kind chosen
    /// by [`RtrKinds::choose`] for a peer-to-peer one). Without an RTR the
    /// connection is up at once ([`Event::Established`], with
    /// [`Established::receive_first`] set); with one, `None`, and the RTR is
    /// awaited until `now + rtr_timeout_ms`.
    ///
    /// # Errors
    /// Local mistakes leave the machine waiting for a decision:
    /// [`MpaError::PrivateDataTooLong`] (more than 508 bytes with the IRD/ORD
    /// block, 512 without), [`MpaError::IrdOrdOutOfRange`]. Otherwise
    /// [`SetupError::TimedOut`] past the decision deadline, or
    /// [`SetupError::WrongState`] when no request is waiting.
    pub fn accept(
        &mut self,
        ird: u16,
        ord: u16,
        private_data: &[u8],
        now: u64,
    ) -> Result<Option<Event>, SetupError> {
        let (request, peer_data) = self.decision(now)?;
        let reply = MpaFrame::accept(&request, self.config.crc, ird, ord, private_data)?;
        self.out.push_frame(&reply)?;
        let (ird, ord) = match (request.enhanced, reply.enhanced) {
            (Some(offer), Some(answer)) => (
                Some(answer.ird.min(offer.ord)),
                Some(answer.ord.min(offer.ird)),
            ),
            _ => (None, None),
        };
        let rtr = reply.enhanced.and_then(|answer| answer.rtr.single());
        let established = Established {
            negotiated: Negotiated {
                crc: reply.crc,
                ird,
                ord,
                rtr,
            },
            revision: reply.revision,
            private_data: peer_data,
            receive_first: rtr.is_none(),
            leftover: Vec::new(),
        };
        if let Some(rtr) = rtr {
            self.state = ResponderState::AwaitRtr {
                deframer: Deframer::new(RTR_MAX_ULPDU, reply.crc),
                established,
                rtr,
                deadline: deadline_after(now, self.config.rtr_timeout_ms),
            };
            Ok(None)
        } else {
            self.state = ResponderState::Done;
            Ok(Some(Event::Established(established)))
        }
    }

    /// Rejects the request: queues a reject frame carrying `private_data`.
    /// Write [`Self::output`], then close.
    ///
    /// # Errors
    /// [`MpaError::PrivateDataTooLong`] (the machine keeps waiting for a
    /// decision); [`SetupError::TimedOut`]; [`SetupError::WrongState`].
    pub fn reject(&mut self, private_data: &[u8], now: u64) -> Result<(), SetupError> {
        let (request, _) = self.decision(now)?;
        self.out
            .push_frame(&MpaFrame::reject(&request, private_data))?;
        self.state = ResponderState::Done;
        Ok(())
    }

    /// The request awaiting a decision, if the decision is still due.
    fn decision(&mut self, now: u64) -> Result<(MpaFrame<'static>, Vec<u8>), SetupError> {
        self.tick(now)?;
        match &self.state {
            ResponderState::AwaitDecision {
                request,
                private_data,
                ..
            } => Ok((*request, private_data.clone())),
            _ => Err(SetupError::WrongState),
        }
    }

    /// Reads the first FPDU and checks it is the chosen RTR.
    fn receive_rtr(&mut self, input: &[u8], now: u64) -> Result<Option<Event>, SetupError> {
        let ResponderState::AwaitRtr {
            deframer,
            rtr,
            established,
            ..
        } = &mut self.state
        else {
            return Err(SetupError::WrongState);
        };
        let rtr = *rtr;
        let crc = established.negotiated.crc;
        let mut consumed = 0;
        let mut verdict = None;
        while verdict.is_none() {
            let rest = input.get(consumed..).unwrap_or_default();
            if rest.is_empty() {
                break;
            }
            match deframer.feed(rest) {
                Ok(step) => {
                    consumed += step.consumed;
                    if let Some(ulpdu) = step.ulpdu {
                        verdict = Some(check_rtr(ulpdu, rtr));
                    }
                }
                Err(MpaError::UlpduTooLong { .. }) => verdict = Some(Err(SetupError::NotRtr)),
                Err(error) => verdict = Some(Err(error.into())),
            }
        }
        match verdict {
            None => self.tick(now).map(|()| None),
            Some(Ok(answer)) => {
                if let Some(answer) = answer
                    && let Err(error) = self.out.push_message(&answer, crc)
                {
                    return Err(self.fail(error.into()));
                }
                let ResponderState::AwaitRtr { established, .. } =
                    core::mem::replace(&mut self.state, ResponderState::Done)
                else {
                    return Err(SetupError::WrongState);
                };
                Ok(Some(Event::Established(Established {
                    leftover: input.get(consumed..).unwrap_or_default().to_vec(),
                    ..established
                })))
            }
            Some(Err(error)) => {
                if let Some(code) = term_of(error) {
                    self.out.push_terminate(code, crc);
                }
                Err(self.fail(error))
            }
        }
    }

    fn fail(&mut self, error: SetupError) -> SetupError {
        self.state = ResponderState::Failed(error);
        error
    }
}

/// Checks that `ulpdu` is the zero-length `rtr` with MSN 1; returns the
/// message that answers it (a Read RTR's zero-length Read Response).
fn check_rtr(ulpdu: &[u8], rtr: Rtr) -> Result<Option<Message<'static>>, SetupError> {
    let message = Message::parse(ulpdu, None)?;
    if let Message::Terminate { terminate, .. } = message {
        return Err(SetupError::PeerTerminated(terminate.code));
    }
    if !message.is_rtr(rtr) {
        return Err(SetupError::NotRtr);
    }
    match message {
        Message::Send { msn, .. } if msn != RTR_MSN => Err(SetupError::NotRtr),
        Message::ReadRequest { msn, request } => {
            if msn != RTR_MSN {
                return Err(SetupError::NotRtr);
            }
            Ok(Some(Message::ReadResponse {
                stag: request.sink_stag,
                to: request.sink_to,
                last: true,
                payload: &[],
            }))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rnic::iwarp::mpa::{self, FLAG_MARKERS, parse_fpdu, write_fpdu};
    use crate::rnic::iwarp::rdmap::RTR_STAG;
    use crate::rnic::iwarp::terminate::Layer;
    use proptest::prelude::*;

    const T0: u64 = 1_000;

    fn drain_i(i: &mut Initiator) -> Vec<u8> {
        let bytes = i.output().to_vec();
        i.advance_output(bytes.len());
        bytes
    }

    fn drain_r(r: &mut Responder) -> Vec<u8> {
        let bytes = r.output().to_vec();
        r.advance_output(bytes.len());
        bytes
    }

    /// Feeds `bytes` in chunks of the given sizes (cycled) until an event;
    /// returns it and the bytes not yet fed.
    fn feed(
        mut recv: impl FnMut(&[u8]) -> Result<Option<Event>, SetupError>,
        bytes: &[u8],
        chunks: &[usize],
    ) -> Result<(Option<Event>, Vec<u8>), SetupError> {
        let mut sizes = chunks.iter().copied().cycle();
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = sizes.next().unwrap_or(1).clamp(1, rest.len());
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            if let Some(event) = recv(chunk)? {
                return Ok((Some(event), rest.to_vec()));
            }
        }
        Ok((None, Vec::new()))
    }

    fn frame_bytes(frame: &MpaFrame<'_>) -> Vec<u8> {
        let mut buf = vec![0; frame.len()];
        let len = frame.write(&mut buf).unwrap();
        buf.truncate(len);
        buf
    }

    /// The FPDU of a Send carrying `payload` (MSN 1), as data after the setup.
    fn data_fpdu(payload: &[u8], msn: u32, crc: bool) -> Vec<u8> {
        let message = Message::Send {
            solicited: false,
            invalidate: None,
            msn,
            mo: 0,
            last: true,
            payload,
        };
        let mut buf = vec![0; mpa::fpdu_len(message.ulpdu_len())];
        let len = message.write_fpdu(&mut buf, crc).unwrap();
        buf.truncate(len);
        buf
    }

    /// The messages in a stream of FPDUs.
    fn messages(mut stream: &[u8], crc: bool) -> Vec<Message<'_>> {
        let mut out = Vec::new();
        while !stream.is_empty() {
            let (ulpdu, len) = parse_fpdu(stream, crc, mpa::MAX_ULPDU).unwrap();
            out.push(Message::parse(ulpdu, None).unwrap());
            stream = &stream[len..];
        }
        out
    }

    #[derive(Clone, Copy)]
    enum Decision<'a> {
        Accept { ird: u16, ord: u16, pd: &'a [u8] },
        Reject(&'a [u8]),
    }

    #[derive(Debug)]
    struct Outcome {
        request: PeerRequest,
        /// The initiator's Established or Rejected.
        initiator: Event,
        /// The initiator's leftover followed by what was not fed.
        initiator_rest: Vec<u8>,
        /// What the initiator sent after the request (the RTR).
        rtr: Vec<u8>,
        responder: Option<Established>,
        responder_rest: Vec<u8>,
        /// What the responder sent after its reply (a Read RTR's answer).
        responder_tail: Vec<u8>,
    }

    /// Runs a whole setup in memory. `r_extra` follows the reply (FPDUs the
    /// responder sends), `i_extra` follows the RTR.
    fn handshake(
        icfg: &InitiatorConfig,
        ipd: &[u8],
        rcfg: ResponderConfig,
        decision: Decision<'_>,
        i_extra: &[u8],
        r_extra: &[u8],
        chunks: &[usize],
    ) -> Result<Outcome, SetupError> {
        let mut i = Initiator::new(icfg, ipd, T0)?;
        let mut r = Responder::new(rcfg, T0);
        let request_bytes = drain_i(&mut i);
        let (event, rest) = feed(|c| r.receive(c, T0 + 1), &request_bytes, chunks)?;
        assert!(rest.is_empty());
        let Some(Event::Request(request)) = event else {
            panic!("no request: {event:?}");
        };
        let mut responder = None;
        match decision {
            Decision::Accept { ird, ord, pd } => {
                if let Some(Event::Established(e)) = r.accept(ird, ord, pd, T0 + 2)? {
                    responder = Some(e);
                }
            }
            Decision::Reject(pd) => r.reject(pd, T0 + 2)?,
        }
        let mut reply = drain_r(&mut r);
        reply.extend_from_slice(r_extra);
        let (event, rest) = feed(|c| i.receive(c, T0 + 3), &reply, chunks)?;
        let initiator = event.expect("no reply event");
        let mut initiator_rest = match &initiator {
            Event::Established(e) => e.leftover.clone(),
            _ => Vec::new(),
        };
        initiator_rest.extend_from_slice(&rest);
        assert!(i.is_finished());
        let rtr = drain_i(&mut i);
        let mut responder_rest = Vec::new();
        let mut responder_tail = Vec::new();
        if responder.is_none() && matches!(decision, Decision::Accept { .. }) {
            let mut stream = rtr.clone();
            stream.extend_from_slice(i_extra);
            let (event, rest) = feed(|c| r.receive(c, T0 + 4), &stream, chunks)?;
            let Some(Event::Established(e)) = event else {
                panic!("responder not established: {event:?}");
            };
            responder_rest = e.leftover.clone();
            responder_rest.extend_from_slice(&rest);
            responder = Some(e);
            responder_tail = drain_r(&mut r);
        }
        assert!(r.is_finished());
        Ok(Outcome {
            request,
            initiator,
            initiator_rest,
            rtr,
            responder,
            responder_rest,
            responder_tail,
        })
    }

    fn established(event: &Event) -> &Established {
        match event {
            Event::Established(e) => e,
            other => panic!("not established: {other:?}"),
        }
    }

    fn accept(ird: u16, ord: u16, pd: &[u8]) -> Decision<'_> {
        Decision::Accept { ird, ord, pd }
    }

    #[test]
    fn accept_with_and_without_crc() {
        for (icrc, rcrc) in [(false, false), (true, false), (false, true), (true, true)] {
            let icfg = InitiatorConfig {
                crc: icrc,
                ird: 8,
                ord: 4,
                ..InitiatorConfig::default()
            };
            let rcfg = ResponderConfig {
                crc: rcrc,
                ..ResponderConfig::default()
            };
            let crc = icrc || rcrc;
            let data = data_fpdu(b"first", 1, crc);
            let out = handshake(
                &icfg,
                b"hello",
                rcfg,
                accept(16, 8, b"welcome"),
                &[],
                &data,
                &[7],
            )
            .unwrap();
            assert_eq!(
                out.request,
                PeerRequest {
                    revision: 2,
                    crc: icrc,
                    ird: Some(8),
                    ord: Some(4),
                    rtr_offered: RtrKinds::empty(),
                    private_data: b"hello".to_vec(),
                }
            );
            let i = established(&out.initiator);
            assert_eq!(
                i.negotiated,
                Negotiated {
                    crc,
                    ird: Some(8),
                    ord: Some(4),
                    rtr: None,
                }
            );
            assert_eq!((i.revision, i.receive_first), (2, false));
            assert_eq!(i.private_data, b"welcome");
            // The responder's FPDU after the reply comes back untouched.
            assert_eq!(out.initiator_rest, data);
            assert!(out.rtr.is_empty());
            let r = out.responder.unwrap();
            // The responder's view: it takes the initiator's ORD in reads and
            // issues at most the initiator's IRD.
            assert_eq!(
                r.negotiated,
                Negotiated {
                    crc,
                    ird: Some(4),
                    ord: Some(8),
                    rtr: None,
                }
            );
            assert!(r.receive_first);
            assert_eq!(r.private_data, b"hello");
        }
    }

    #[test]
    fn rev2_with_each_rtr_kind() {
        let cases = [
            (RtrKinds::WRITE, Rtr::Write),
            (RtrKinds::READ, Rtr::Read),
            (RtrKinds::SEND, Rtr::Send),
            (RtrKinds::all(), Rtr::Write),
            (RtrKinds::READ | RtrKinds::SEND, Rtr::Read),
        ];
        for (offer, chosen) in cases {
            for crc in [false, true] {
                let icfg = InitiatorConfig {
                    crc,
                    rtr: offer,
                    ird: 2,
                    ord: 2,
                    ..InitiatorConfig::default()
                };
                let next = data_fpdu(b"after the RTR", 2, crc);
                let out = handshake(
                    &icfg,
                    &[],
                    ResponderConfig::default(),
                    accept(2, 2, &[]),
                    &next,
                    &[],
                    &[3, 11],
                )
                .unwrap();
                assert_eq!(out.request.rtr_offered, offer);
                let i = established(&out.initiator);
                assert_eq!(i.negotiated.rtr, Some(chosen));
                // Exactly one FPDU, the zero-length RTR with MSN 1.
                let sent = messages(&out.rtr, crc);
                assert_eq!(sent.len(), 1);
                assert!(sent[0].is_rtr(chosen), "{:?}", sent[0]);
                assert_eq!(sent[0], Message::rtr(chosen, RTR_MSN));
                let r = out.responder.unwrap();
                assert_eq!(r.negotiated.rtr, Some(chosen));
                assert!(!r.receive_first);
                assert_eq!(out.responder_rest, next);
                let answer = messages(&out.responder_tail, crc);
                if chosen == Rtr::Read {
                    assert_eq!(
                        answer,
                        [Message::ReadResponse {
                            stag: RTR_STAG,
                            to: 0,
                            last: true,
                            payload: &[],
                        }]
                    );
                } else {
                    assert!(answer.is_empty());
                }
            }
        }
    }

    #[test]
    fn initiator_falls_back_to_revision_1() {
        let icfg = InitiatorConfig {
            rtr: RtrKinds::all(),
            crc: true,
            ..InitiatorConfig::default()
        };
        let mut i = Initiator::new(&icfg, b"pd", T0).unwrap();
        let request = drain_i(&mut i);
        let (req, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
        assert_eq!(req.revision, 2);
        // A revision-1 responder answers with revision 1 and no block.
        let reply = MpaFrame {
            kind: FrameKind::Reply,
            revision: 1,
            enhanced: None,
            private_data: b"v1",
            ..req
        };
        let data = data_fpdu(b"x", 1, true);
        let mut bytes = frame_bytes(&reply);
        bytes.extend_from_slice(&data);
        let event = i.receive(&bytes, T0 + 5).unwrap().unwrap();
        let e = established(&event);
        assert_eq!(e.revision, 1);
        assert_eq!(
            e.negotiated,
            Negotiated {
                crc: true,
                ird: None,
                ord: None,
                rtr: None,
            }
        );
        assert_eq!(e.private_data, b"v1");
        assert_eq!(e.leftover, data);
        // No RTR without revision 2: RFC 5044 has the initiator send first.
        assert!(i.output().is_empty());
        assert_eq!(i.receive(b"more", T0 + 6), Err(SetupError::WrongState));
    }

    #[test]
    fn revision_1_both_sides() {
        let icfg = InitiatorConfig {
            enhanced: false,
            rtr: RtrKinds::all(),
            ..InitiatorConfig::default()
        };
        assert_eq!(icfg.max_private_data(), 512);
        let pd = [7u8; 512];
        let out = handshake(
            &icfg,
            &pd,
            ResponderConfig::default(),
            accept(1, 1, &[1; 512]),
            &[],
            &[],
            &[64],
        )
        .unwrap();
        assert_eq!(out.request.revision, 1);
        assert_eq!((out.request.ird, out.request.ord), (None, None));
        assert_eq!(out.request.rtr_offered, RtrKinds::empty());
        assert_eq!(out.request.private_data, pd);
        let i = established(&out.initiator);
        assert_eq!((i.revision, i.negotiated.rtr), (1, None));
        assert_eq!(i.private_data, [1; 512]);
        assert!(out.responder.unwrap().receive_first);
    }

    #[test]
    fn reject_with_private_data() {
        for enhanced in [true, false] {
            let icfg = InitiatorConfig {
                enhanced,
                ..InitiatorConfig::default()
            };
            let out = handshake(
                &icfg,
                b"let me in",
                ResponderConfig::default(),
                Decision::Reject(b"go away"),
                &[],
                &[],
                &[5],
            )
            .unwrap();
            assert_eq!(
                out.initiator,
                Event::Rejected {
                    private_data: b"go away".to_vec(),
                }
            );
            assert!(out.responder.is_none());
            assert!(out.rtr.is_empty());
        }
    }

    #[test]
    fn markers_get_an_automatic_reject() {
        let request = MpaFrame {
            markers: true,
            ..MpaFrame::request(true, Enhanced::default(), b"m")
        };
        let bytes = frame_bytes(&request);
        assert_eq!(bytes[16] & FLAG_MARKERS, FLAG_MARKERS);
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(
            r.receive(&bytes, T0),
            Err(SetupError::Mpa(MpaError::MarkersRequested))
        );
        let reply = drain_r(&mut r);
        let (frame, len) = MpaFrame::parse(&reply, FrameKind::Reply).unwrap();
        assert_eq!(len, reply.len());
        assert!(frame.reject && !frame.markers && frame.crc);
        assert_eq!(frame.revision, 2);
        // Failed for good.
        assert_eq!(
            r.accept(1, 1, &[], T0),
            Err(SetupError::Mpa(MpaError::MarkersRequested))
        );
        assert!(r.is_finished());
        // The initiator reading that reject reports it.
        let mut i = Initiator::new(&InitiatorConfig::default(), &[], T0).unwrap();
        assert_eq!(
            i.receive(&reply, T0),
            Ok(Some(Event::Rejected {
                private_data: Vec::new(),
            }))
        );
    }

    #[test]
    fn peer_to_peer_without_rtr_kinds_is_rejected() {
        let offer = Enhanced {
            peer_to_peer: true,
            ..Enhanced::default()
        };
        let bytes = frame_bytes(&MpaFrame::request(false, offer, &[]));
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(
            r.receive(&bytes, T0),
            Err(SetupError::Mpa(MpaError::NoMatchingRtr))
        );
        let (frame, _) = MpaFrame::parse(r.output(), FrameKind::Reply).unwrap();
        assert!(frame.reject);
    }

    #[test]
    fn one_byte_at_a_time() {
        for rtr in [
            RtrKinds::empty(),
            RtrKinds::WRITE,
            RtrKinds::READ,
            RtrKinds::SEND,
        ] {
            let icfg = InitiatorConfig {
                crc: true,
                rtr,
                ..InitiatorConfig::default()
            };
            let after = data_fpdu(b"tail", 2, true);
            let out = handshake(
                &icfg,
                b"abc",
                ResponderConfig::default(),
                accept(1, 1, b"de"),
                &after,
                &after,
                &[1],
            )
            .unwrap();
            assert_eq!(established(&out.initiator).private_data, b"de");
            if rtr.is_empty() {
                assert_eq!(out.initiator_rest, after);
            } else {
                assert_eq!(out.responder_rest, after);
                assert_eq!(out.initiator_rest, after);
            }
        }
    }

    /// A change to a frame's bytes.
    type Edit = fn(&mut Vec<u8>);

    /// A reply frame answering the default request, with `edit` applied.
    fn reply_to_default(edit: impl FnOnce(&mut Vec<u8>)) -> (Initiator, Vec<u8>) {
        let mut i = Initiator::new(&InitiatorConfig::default(), &[], T0).unwrap();
        let request = drain_i(&mut i);
        let (req, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
        let mut reply = frame_bytes(&MpaFrame::accept(&req, false, 1, 1, b"r").unwrap());
        edit(&mut reply);
        (i, reply)
    }

    #[test]
    fn malformed_replies_close_without_terminate() {
        let cases: [(Edit, SetupError); 4] = [
            (|b| b[0] = b'X', SetupError::Mpa(MpaError::BadKey)),
            (|b| b[17] = 3, SetupError::Mpa(MpaError::BadRevision(3))),
            (
                |b| b[18..20].copy_from_slice(&513u16.to_be_bytes()),
                SetupError::Mpa(MpaError::PrivateDataTooLong(513)),
            ),
            // Revision 2 without the enhanced block, to an enhanced request.
            (
                |b| {
                    b[16] &= !mpa::FLAG_ENHANCED;
                },
                SetupError::EnhancedReplyMissing,
            ),
        ];
        for (edit, expected) in cases {
            for chunk in [1, 20, 100] {
                let (mut i, reply) = reply_to_default(edit);
                let got = feed(|c| i.receive(c, T0), &reply, &[chunk]);
                assert_eq!(got, Err(expected), "chunk {chunk}");
                assert!(i.output().is_empty());
                assert!(i.is_finished());
                assert_eq!(i.tick(T0 + 1_000_000), Err(expected));
            }
        }
        // A bad key is seen with the header, before the private data.
        let (mut i, reply) = reply_to_default(|b| b[3] = b'?');
        assert_eq!(
            i.receive(&reply[..20], T0),
            Err(SetupError::Mpa(MpaError::BadKey))
        );
    }

    #[test]
    fn failed_terms_send_a_terminate() {
        // IRD below the initiator's ORD, and an RTR kind not offered.
        let icfg = InitiatorConfig {
            ird: 4,
            ord: 4,
            rtr: RtrKinds::READ,
            crc: true,
            ..InitiatorConfig::default()
        };
        let cases = [
            (
                Enhanced {
                    ird: 3,
                    ord: 4,
                    peer_to_peer: true,
                    rtr: RtrKinds::READ,
                },
                MpaError::InsufficientIrd,
                LlpCode::InsufficientIrd,
            ),
            (
                Enhanced {
                    ird: 4,
                    ord: 4,
                    peer_to_peer: true,
                    rtr: RtrKinds::WRITE,
                },
                MpaError::NoMatchingRtr,
                LlpCode::NoMatchingRtr,
            ),
        ];
        for (answer, error, code) in cases {
            let mut i = Initiator::new(&icfg, &[], T0).unwrap();
            drain_i(&mut i);
            let reply = MpaFrame {
                kind: FrameKind::Reply,
                markers: false,
                crc: true,
                reject: false,
                revision: 2,
                enhanced: Some(answer),
                private_data: &[],
                reserved_flags: 0,
            };
            assert_eq!(
                i.receive(&frame_bytes(&reply), T0),
                Err(SetupError::Mpa(error))
            );
            let sent = messages(i.output(), true);
            let [Message::Terminate { terminate, msn: 1 }] = sent.as_slice() else {
                panic!("{sent:?}");
            };
            assert_eq!(terminate.code, TermCode::llp(code));
            assert_eq!(terminate.code.layer, Layer::Llp);
        }
    }

    #[test]
    fn bad_requests_close_without_reply() {
        let good = frame_bytes(&MpaFrame::request(false, Enhanced::default(), b"abcd"));
        let cases: [(Edit, SetupError); 4] = [
            (|b| b[15] = b'x', SetupError::Mpa(MpaError::BadKey)),
            (|b| b[17] = 0, SetupError::Mpa(MpaError::BadRevision(0))),
            (|b| b[17] = 3, SetupError::Mpa(MpaError::BadRevision(3))),
            (
                |b| b[18..20].copy_from_slice(&0xffffu16.to_be_bytes()),
                SetupError::Mpa(MpaError::PrivateDataTooLong(0xffff)),
            ),
        ];
        for (edit, expected) in cases {
            for chunk in [1, 7, 64] {
                let mut bytes = good.clone();
                edit(&mut bytes);
                let mut r = Responder::new(ResponderConfig::default(), T0);
                assert_eq!(feed(|c| r.receive(c, T0), &bytes, &[chunk]), Err(expected));
                assert!(r.output().is_empty());
                assert_eq!(r.receive(&[], T0), Err(expected));
            }
        }
        // The request's IRD/ORD block announced but missing.
        let mut short = good[..20].to_vec();
        short[18..20].copy_from_slice(&2u16.to_be_bytes());
        short.extend_from_slice(&[0, 1]);
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(
            r.receive(&short, T0),
            Err(SetupError::Mpa(MpaError::EnhancedBlockMissing))
        );
    }

    #[test]
    fn data_before_the_reply_is_refused() {
        let mut bytes = frame_bytes(&MpaFrame::request(false, Enhanced::default(), &[]));
        let request_len = bytes.len();
        bytes.extend_from_slice(&data_fpdu(b"too early", 1, false));
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(r.receive(&bytes, T0), Err(SetupError::DataBeforeReply));
        // The same bytes after the request event, before the decision.
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert!(matches!(
            r.receive(&bytes[..request_len], T0),
            Ok(Some(Event::Request(_)))
        ));
        assert_eq!(
            r.receive(&bytes[request_len..], T0),
            Err(SetupError::DataBeforeReply)
        );
        assert!(r.output().is_empty());
    }

    #[test]
    fn truncated_then_timed_out() {
        let bytes = frame_bytes(&MpaFrame::request(false, Enhanced::default(), b"pd"));
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(r.deadline(), Some(T0 + DEFAULT_REQUEST_TIMEOUT_MS));
        assert_eq!(r.receive(&bytes[..10], T0 + 1), Ok(None));
        assert_eq!(r.tick(T0 + DEFAULT_REQUEST_TIMEOUT_MS - 1), Ok(()));
        assert_eq!(
            r.tick(T0 + DEFAULT_REQUEST_TIMEOUT_MS),
            Err(SetupError::TimedOut)
        );
        assert_eq!(r.receive(&bytes[10..], T0), Err(SetupError::TimedOut));
        assert_eq!(r.deadline(), None);

        // Late bytes that still do not complete the frame time out too.
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(
            r.receive(&bytes[..21], T0 + DEFAULT_REQUEST_TIMEOUT_MS),
            Err(SetupError::TimedOut)
        );

        let mut i = Initiator::new(&InitiatorConfig::default(), &[], T0).unwrap();
        assert_eq!(i.deadline(), Some(T0 + DEFAULT_REPLY_TIMEOUT_MS));
        let (_, reply) = reply_to_default(|_| {});
        assert_eq!(i.receive(&reply[..19], T0 + 9_999), Ok(None));
        assert_eq!(i.tick(T0 + 10_000), Err(SetupError::TimedOut));
        assert_eq!(i.receive(&reply[19..], T0), Err(SetupError::TimedOut));
    }

    #[test]
    fn decision_and_rtr_time_out() {
        let icfg = InitiatorConfig {
            rtr: RtrKinds::WRITE,
            ..InitiatorConfig::default()
        };
        let mut i = Initiator::new(&icfg, &[], T0).unwrap();
        let request = drain_i(&mut i);
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert!(matches!(
            r.receive(&request, T0),
            Ok(Some(Event::Request(_)))
        ));
        assert_eq!(r.deadline(), Some(T0 + DEFAULT_DECISION_TIMEOUT_MS));
        let mut late = Responder::new(ResponderConfig::default(), T0);
        late.receive(&request, T0).unwrap();
        assert_eq!(
            late.accept(1, 1, &[], T0 + DEFAULT_DECISION_TIMEOUT_MS),
            Err(SetupError::TimedOut)
        );
        assert_eq!(r.accept(1, 1, &[], T0 + 10), Ok(None));
        assert_eq!(r.deadline(), Some(T0 + 10 + DEFAULT_RTR_TIMEOUT_MS));
        assert_eq!(
            r.receive(&[], T0 + 10 + DEFAULT_RTR_TIMEOUT_MS - 1),
            Ok(None)
        );
        assert_eq!(
            r.receive(&[], T0 + 10 + DEFAULT_RTR_TIMEOUT_MS),
            Err(SetupError::TimedOut)
        );
    }

    /// A responder that accepted a peer-to-peer request offering `offer`.
    fn awaiting_rtr(offer: RtrKinds, crc: bool) -> Responder {
        let icfg = InitiatorConfig {
            rtr: offer,
            crc,
            ..InitiatorConfig::default()
        };
        let mut i = Initiator::new(&icfg, &[], T0).unwrap();
        let mut r = Responder::new(ResponderConfig::default(), T0);
        r.receive(&drain_i(&mut i), T0).unwrap();
        assert_eq!(r.accept(1, 1, &[], T0), Ok(None));
        drain_r(&mut r);
        r
    }

    fn fpdu_of(message: &Message<'_>, crc: bool) -> Vec<u8> {
        let mut buf = vec![0; mpa::fpdu_len(message.ulpdu_len())];
        let len = message.write_fpdu(&mut buf, crc).unwrap();
        buf.truncate(len);
        buf
    }

    #[test]
    fn wrong_first_fpdu_is_answered_with_a_terminate() {
        let not_rtr = [
            // The wrong kind.
            Message::rtr(Rtr::Read, RTR_MSN),
            Message::rtr(Rtr::Send, RTR_MSN),
            // A Write with data.
            Message::Write {
                stag: 1,
                to: 0,
                last: true,
                payload: b"data",
            },
            // Not the last segment.
            Message::Write {
                stag: 1,
                to: 0,
                last: false,
                payload: &[],
            },
        ];
        for message in not_rtr {
            let mut r = awaiting_rtr(RtrKinds::WRITE, true);
            let bytes = fpdu_of(&message, true);
            assert_eq!(
                feed(|c| r.receive(c, T0), &bytes, &[3]),
                Err(SetupError::NotRtr)
            );
            let sent = messages(r.output(), true);
            let [Message::Terminate { terminate, .. }] = sent.as_slice() else {
                panic!("{sent:?}");
            };
            assert_eq!(terminate.code, TermCode::llp(LlpCode::NoMatchingRtr));
        }
        // A Send RTR with the wrong MSN.
        let mut r = awaiting_rtr(RtrKinds::SEND, false);
        let bytes = fpdu_of(&Message::rtr(Rtr::Send, 2), false);
        assert_eq!(r.receive(&bytes, T0), Err(SetupError::NotRtr));
        // A long first FPDU is not read whole: it is no RTR.
        let mut r = awaiting_rtr(RtrKinds::WRITE, false);
        let bytes = data_fpdu(&[0; 300], 1, false);
        assert_eq!(r.receive(&bytes, T0), Err(SetupError::NotRtr));
        // A bad CRC is reported as such.
        let mut r = awaiting_rtr(RtrKinds::WRITE, true);
        let mut bytes = fpdu_of(&Message::rtr(Rtr::Write, RTR_MSN), true);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        assert!(matches!(
            r.receive(&bytes, T0),
            Err(SetupError::Mpa(MpaError::BadCrc { .. }))
        ));
        let sent = messages(r.output(), true);
        assert!(
            matches!(sent.as_slice(), [Message::Terminate { terminate, .. }]
            if terminate.code == TermCode::llp(LlpCode::Crc))
        );
        // Garbage that is no RDMAP message.
        let mut r = awaiting_rtr(RtrKinds::WRITE, false);
        let mut garbage = vec![0u8; 32];
        let len = write_fpdu(&mut garbage, &[0xff; 20], false).unwrap();
        assert!(matches!(
            r.receive(&garbage[..len], T0),
            Err(SetupError::Rdmap(_))
        ));
        assert!(!r.output().is_empty());
    }

    #[test]
    fn a_terminate_instead_of_the_rtr_is_not_answered() {
        let mut r = awaiting_rtr(RtrKinds::READ, false);
        let code = TermCode::llp(LlpCode::InsufficientIrd);
        let bytes = fpdu_of(
            &Message::Terminate {
                msn: 1,
                terminate: Terminate::new(code),
            },
            false,
        );
        assert_eq!(r.receive(&bytes, T0), Err(SetupError::PeerTerminated(code)));
        assert!(r.output().is_empty());
        // The longest Terminate, copying a Read Request's headers, fits.
        let read = Message::rtr(Rtr::Read, RTR_MSN);
        let mut ulpdu = vec![0; read.ulpdu_len()];
        read.write_ulpdu(&mut ulpdu).unwrap();
        let long = Message::Terminate {
            msn: 1,
            terminate: Terminate {
                code,
                segment_len: Some(46),
                ddp_header: Some(&ulpdu[..18]),
                rdmap_header: Some(&ulpdu[18..]),
            },
        };
        assert_eq!(long.ulpdu_len(), RTR_MAX_ULPDU);
        let mut r = awaiting_rtr(RtrKinds::READ, true);
        let bytes = fpdu_of(&long, true);
        assert_eq!(
            feed(|c| r.receive(c, T0), &bytes, &[5]),
            Err(SetupError::PeerTerminated(code))
        );
        assert!(r.output().is_empty());
    }

    #[test]
    fn local_mistakes_leave_the_machines_usable() {
        let too_much = [0u8; 509];
        assert_eq!(
            Initiator::new(&InitiatorConfig::default(), &too_much, T0).unwrap_err(),
            SetupError::Mpa(MpaError::PrivateDataTooLong(513))
        );
        let big = InitiatorConfig {
            ird: MAX_IRD_ORD + 1,
            ..InitiatorConfig::default()
        };
        assert_eq!(
            Initiator::new(&big, &[], T0).unwrap_err(),
            SetupError::Mpa(MpaError::IrdOrdOutOfRange)
        );
        let mut i = Initiator::new(&InitiatorConfig::default(), &too_much[..508], T0).unwrap();
        let mut r = Responder::new(ResponderConfig::default(), T0);
        assert_eq!(r.accept(1, 1, &[], T0), Err(SetupError::WrongState));
        r.receive(&drain_i(&mut i), T0).unwrap();
        assert_eq!(
            r.accept(1, 1, &too_much, T0),
            Err(SetupError::Mpa(MpaError::PrivateDataTooLong(513)))
        );
        assert_eq!(
            r.accept(MAX_IRD_ORD + 1, 1, &[], T0),
            Err(SetupError::Mpa(MpaError::IrdOrdOutOfRange))
        );
        assert!(r.output().is_empty());
        assert!(r.reject(b"later", T0).is_ok());
        assert_eq!(r.reject(b"again", T0), Err(SetupError::WrongState));
        assert_eq!(r.receive(b"x", T0), Err(SetupError::WrongState));
        // Partial writes of the output.
        let reply = r.output().to_vec();
        r.advance_output(3);
        assert_eq!(r.output(), &reply[3..]);
        r.advance_output(usize::MAX);
        assert!(r.output().is_empty());
    }

    proptest! {
        #[test]
        fn random_chunks_give_the_same_setup(
            chunks in proptest::collection::vec(1usize..64, 1..10),
            icrc in any::<bool>(),
            rcrc in any::<bool>(),
            enhanced in any::<bool>(),
            rtr in 0u8..8,
            ipd in proptest::collection::vec(any::<u8>(), 0..=MAX_PRIVATE_DATA - ENHANCED_LEN),
            rpd in proptest::collection::vec(any::<u8>(), 0..=MAX_PRIVATE_DATA - ENHANCED_LEN),
            ird in 0u16..=MAX_IRD_ORD,
            ord in 0u16..=MAX_IRD_ORD,
            tail in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let icfg = InitiatorConfig {
                crc: icrc,
                enhanced,
                ird,
                ord,
                rtr: RtrKinds::from_bits_truncate(rtr),
                ..InitiatorConfig::default()
            };
            let rcfg = ResponderConfig { crc: rcrc, ..ResponderConfig::default() };
            // The responder's IRD covers the initiator's ORD.
            let out = handshake(&icfg, &ipd, rcfg, accept(ord, ird, &rpd), &tail, &tail, &chunks)
                .unwrap();
            let i = established(&out.initiator);
            let r = out.responder.unwrap();
            prop_assert_eq!(&out.request.private_data, &ipd);
            prop_assert_eq!(&i.private_data, &rpd);
            prop_assert_eq!(i.negotiated.crc, icrc || rcrc);
            prop_assert_eq!(r.negotiated.crc, icrc || rcrc);
            prop_assert_eq!(i.negotiated.rtr, r.negotiated.rtr);
            prop_assert_eq!(i.negotiated.ird, r.negotiated.ord);
            prop_assert_eq!(i.negotiated.ord, r.negotiated.ird);
            if enhanced && rtr != 0 {
                prop_assert_eq!(i.negotiated.rtr, icfg.rtr.choose());
                prop_assert_eq!(&out.responder_rest, &tail);
                prop_assert_eq!(&out.initiator_rest, &tail);
            } else {
                prop_assert!(r.receive_first);
                prop_assert_eq!(&out.initiator_rest, &tail);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..700),
            chunks in proptest::collection::vec(1usize..64, 1..8),
            prefix_valid in any::<bool>(),
            rtr in 0u8..8,
        ) {
            let icfg = InitiatorConfig {
                rtr: RtrKinds::from_bits_truncate(rtr),
                ..InitiatorConfig::default()
            };
            let mut i = Initiator::new(&icfg, &[], T0).unwrap();
            let request = drain_i(&mut i);
            let mut r = Responder::new(ResponderConfig::default(), T0);
            let mut to_r = Vec::new();
            if prefix_valid {
                to_r.extend_from_slice(&request);
            }
            to_r.extend_from_slice(&bytes);
            let _ = feed(|c| r.receive(c, T0), &to_r, &chunks);
            if prefix_valid && !r.is_finished() {
                let _ = r.accept(1, 1, &[], T0);
                let _ = feed(|c| r.receive(c, T0), &bytes, &chunks);
            }
            let _ = feed(|c| i.receive(c, T0), &bytes, &chunks);
            let _ = i.tick(u64::MAX);
            let _ = r.tick(u64::MAX);
            prop_assert!(i.is_finished() && r.is_finished());
        }
    }

    /// Milliseconds since `start`.
    fn now(start: std::time::Instant) -> u64 {
        u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Reads what is there (waiting at most 50 ms); `None` at EOF.
    fn read_some(stream: &mut std::net::TcpStream) -> Option<Vec<u8>> {
        let mut buf = [0u8; 256];
        match std::io::Read::read(stream, &mut buf) {
            Ok(0) => None,
            Ok(n) => Some(buf[..n].to_vec()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Some(Vec::new())
            }
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Reads until one whole FPDU (after `have`) is in; returns its message payload.
    fn read_fpdu(
        stream: &mut std::net::TcpStream,
        mut have: Vec<u8>,
        crc: bool,
        start: std::time::Instant,
    ) -> Vec<u8> {
        loop {
            match parse_fpdu(&have, crc, 1024) {
                Ok((ulpdu, _)) => {
                    let Message::Send { payload, .. } = Message::parse(ulpdu, None).unwrap() else {
                        panic!("not a Send");
                    };
                    return payload.to_vec();
                }
                Err(MpaError::Truncated { .. }) => {}
                Err(e) => panic!("{e}"),
            }
            assert!(now(start) < 10_000, "no FPDU");
            have.extend(read_some(stream).expect("EOF"));
        }
    }

    /// The responder of [`over_tcp_on_loopback`]: accepts, answers "ping"
    /// with "pong", returns what was agreed.
    fn tcp_responder(listener: &std::net::TcpListener, start: std::time::Instant) -> Negotiated {
        use std::io::Write;
        use std::time::Duration;

        // A bounded accept: poll the non-blocking listener for 10 s at most.
        listener.set_nonblocking(true).unwrap();
        let mut stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(now(start) < 10_000, "no connection");
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut r = Responder::new(ResponderConfig::default(), now(start));
        let established = loop {
            let out = r.output().to_vec();
            stream.write_all(&out).unwrap();
            r.advance_output(out.len());
            let chunk = read_some(&mut stream).expect("peer closed");
            match r.receive(&chunk, now(start)).unwrap() {
                Some(Event::Request(request)) => {
                    assert_eq!(request.private_data, b"client");
                    assert_eq!(r.accept(8, 8, b"server", now(start)).unwrap(), None);
                }
                Some(Event::Established(e)) => break e,
                Some(other) => panic!("{other:?}"),
                None => {}
            }
        };
        let out = r.output().to_vec();
        stream.write_all(&out).unwrap();
        r.advance_output(out.len());
        let crc = established.negotiated.crc;
        let first = read_fpdu(&mut stream, established.leftover, crc, start);
        assert_eq!(first, b"ping");
        stream.write_all(&data_fpdu(b"pong", 1, crc)).unwrap();
        established.negotiated
    }

    /// Both sides over a real TCP connection on 127.0.0.1, every read
    /// bounded: the setup, then one FPDU each way.
    #[test]
    fn over_tcp_on_loopback() {
        use std::io::Write;
        use std::net::{TcpListener, TcpStream};
        use std::time::{Duration, Instant};

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let start = Instant::now();
        let server = std::thread::spawn(move || tcp_responder(&listener, start));

        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let icfg = InitiatorConfig {
            crc: true,
            ird: 8,
            ord: 8,
            rtr: RtrKinds::WRITE | RtrKinds::READ,
            ..InitiatorConfig::default()
        };
        let mut i = Initiator::new(&icfg, b"client", now(start)).unwrap();
        let established = loop {
            let out = i.output().to_vec();
            stream.write_all(&out).unwrap();
            i.advance_output(out.len());
            let chunk = read_some(&mut stream).expect("peer closed");
            match i.receive(&chunk, now(start)).unwrap() {
                Some(Event::Established(e)) => break e,
                Some(other) => panic!("{other:?}"),
                None => {}
            }
        };
        assert_eq!(established.private_data, b"server");
        assert_eq!(established.negotiated.rtr, Some(Rtr::Write));
        // The RTR first, then data.
        let out = i.output().to_vec();
        stream.write_all(&out).unwrap();
        i.advance_output(out.len());
        stream.write_all(&data_fpdu(b"ping", 1, true)).unwrap();
        let reply = read_fpdu(&mut stream, established.leftover, true, start);
        assert_eq!(reply, b"pong");
        let responder = server.join().unwrap();
        assert_eq!(responder.rtr, Some(Rtr::Write));
        assert_eq!((responder.ird, responder.ord), (Some(8), Some(8)));
    }
}
