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
//! data), the RTR is read through a [`Deframer`](super::mpa::Deframer) sized for the longest Terminate, and the output
//! holds at most one frame and one or two short FPDUs: nothing grows with what
//! a peer sends.
//!
//! # Files
//!
//! * `setup/buffers.rs`: the output queue and the reader gathering one frame;
//! * `setup/initiator.rs`: [`Initiator`] and its [`InitiatorConfig`];
//! * `setup/responder.rs`: [`Responder`] and its [`ResponderConfig`], the
//!   RTR check;
//! * `setup/tests.rs` (handshakes end to end, random chunking),
//!   `setup/refusal_tests.rs` (what each side refuses, time-outs, local
//!   mistakes), `setup/tcp_tests.rs` (both sides over TCP on 127.0.0.1).

use alloc::vec::Vec;
use core::fmt;

use super::ddp::UNTAGGED_HEADER_LEN;
use super::mpa::{MpaError, Negotiated, RtrKinds};
use super::rdmap::RdmapError;
use super::terminate::{LlpCode, MAX_TERMINATE_LEN, TermCode};

/// The output both machines give their caller, from their `out`
/// ([`buffers::Outbox`]): declared once for [`Initiator`] and [`Responder`].
macro_rules! output_methods {
    () => {
        /// Bytes to write to the stream next.
        #[must_use]
        pub fn output(&self) -> &[u8] {
            self.out.pending()
        }

        /// Drops the first `n` bytes of [`Self::output`], written by the
        /// caller.
        pub fn advance_output(&mut self, n: usize) {
            self.out.advance(n);
        }
    };
}

mod buffers;
mod initiator;
mod responder;

pub use initiator::{Initiator, InitiatorConfig};
pub use responder::{Responder, ResponderConfig};

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
    /// the RTR used; with [`Rtr::Send`](super::mpa::Rtr::Send) or
    /// [`Rtr::Read`](super::mpa::Rtr::Read) the RTR took MSN
    /// [`RTR_MSN`] of queue 0 or 1, so the data path continues at MSN 2 there
    /// (initiator: sending; responder: receiving). With [`Rtr::Read`](super::mpa::Rtr::Read) the
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

fn deadline_after(now: u64, timeout_ms: u64) -> u64 {
    now.saturating_add(timeout_ms)
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

#[cfg(test)]
mod tests;

#[cfg(test)]
mod refusal_tests;

#[cfg(test)]
mod tcp_tests;
