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
//! Every error ends the setup: the machine stays failed and returns the same
//! error from then on. The caller then writes what `output()` still holds (a
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
//! data), the RTR is read through a [`Deframer`] of 128 bytes, and the output
//! holds at most one frame and one or two short FPDUs: nothing grows with what
//! a peer sends.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::mpa::{
    Deframer, ENHANCED_LEN, Enhanced, FRAME_HEADER_LEN, FrameKind, MAX_IRD_ORD, MAX_PRIVATE_DATA,
    MpaError, MpaFrame, Negotiated, Rtr, RtrKinds,
};
use super::rdmap::{Message, RdmapError};
use super::terminate::{LlpCode, TermCode, Terminate};

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

/// Largest ULPDU read while waiting for the RTR: an RTR is at most 46 bytes
/// (a Read Request), a Terminate at most 86; anything longer is not an RTR.
const RTR_MAX_ULPDU: usize = 128;
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
    /// this side is in FPDU mode and a Terminate with that code is queued
    /// (RFC 6581 §9). [`SetupError::TimedOut`]; [`SetupError::WrongState`]
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
        match Self::check(&self.request, reader.held()) {
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
    fn check(request: &MpaFrame<'_>, bytes: &[u8]) -> Result<Event, (SetupError, Option<bool>)> {
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
        let negotiated = reply.check_reply(request).map_err(|error| {
            let fpdu_mode = matches!(error, MpaError::InsufficientIrd | MpaError::NoMatchingRtr);
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
