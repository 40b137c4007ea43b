//! One iWARP connection over an ordered byte stream, from the first byte to
//! the data path (issue 8, "connections over TCP"): the MPA exchange
//! (`setup`) driven by the stream's events and a clock, then the QP's
//! [`Link`] over the same stream. Sans-I/O like the rest of `rnic`: the
//! platform (host TCP in `kernel::net`, WSK later) opens the stream, feeds
//! its events here ([`Conn::received`], [`Conn::writable`], [`Conn::closed`])
//! and calls [`Conn::tick`] by [`Conn::deadline`]; nothing here blocks or
//! sleeps, and every wait on the peer has a deadline (`setup`'s time-outs).
//!
//! What the connection layer learns comes through [`ConnEvents`], called
//! with no lock of this module held: the responder's [`PeerRequest`] (to
//! answer with [`Conn::accept`] or [`Conn::reject`]), the connection being
//! up (the QP is connected through its link, with the negotiated read limits
//! applied, N20), or the failure that ended it ([`ConnFailure`]).
//!
//! Not here (`docs/iwarp.md`, "Connections over TCP: design"): the TCP
//! connect itself, and the disconnect and drain time-outs, which
//! `rnic::cm::wire` arms on the platform's timers.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::link::{self, ByteStream, Link, LinkConfig, LinkError};
use super::setup::{
    Established, Event, Initiator, InitiatorConfig, PeerRequest, Responder, ResponderConfig,
    SetupError,
};
use crate::kernel::sync::{Arc, SpinLock};
use crate::rnic::qp::Qp;

/// Why a connection attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnFailure {
    /// The responder rejected the request, with its private data (N16:
    /// `STATUS_CONNECTION_REFUSED` at the initiator).
    Rejected(Vec<u8>),
    /// A wait on the peer passed its deadline (N12, N14, N15:
    /// `STATUS_IO_TIMEOUT`).
    TimedOut,
    /// The peer closed or reset the stream before the setup finished
    /// (`STATUS_CONNECTION_ABORTED`).
    Closed {
        /// A reset rather than an orderly close.
        abortive: bool,
    },
    /// The MPA exchange failed (a malformed or unacceptable frame, a wrong
    /// RTR, a Terminate).
    Setup(SetupError),
    /// The QP could not be connected through its link.
    Link(LinkError),
    /// The peer sent more than [`EARLY_MAX`] bytes before this side's link
    /// ran (or memory for them was short): the stream is reset rather than
    /// let a peer fill memory while the consumer has not completed the
    /// connection (`STATUS_CONNECTION_ABORTED`).
    Flooded,
}

/// The most bytes a connection keeps for its link from the peer before the
/// link runs: after the reply until the consumer's CompleteConnect
/// (initiator), or while the setup's last bytes drain. A responder may send
/// its first FPDUs right behind its reply, though RFC 5044 (§7.1.2) has it
/// wait for the initiator's first FPDU; a few FPDUs are kept, a flood ends
/// the attempt ([`ConnFailure::Flooded`]).
pub const EARLY_MAX: usize = 256 * 1024;

/// The most bytes a connection keeps while the connection layer is being
/// told the link runs (`ConnEvents::established`, the consumer's
/// completion): the peer may send at full speed by then, for as long as
/// the consumer's callback takes. Past it (or when memory for them is
/// short) the stream is reset and the link hears an abortive close after
/// what it was kept, rather than memory grow without bound.
pub const LINKING_MAX: usize = 16 << 20;

/// Appends `bytes` to `kept` if they fit within `most` and memory for them
/// is there; `false` (nothing kept) otherwise.
fn keep(kept: &mut Vec<u8>, bytes: &[u8], most: usize) -> bool {
    let fits = kept.len().saturating_add(bytes.len()) <= most;
    if fits && kept.try_reserve(bytes.len()).is_ok() {
        kept.extend_from_slice(bytes);
        true
    } else {
        false
    }
}

/// What a connection tells the connection layer.
pub trait ConnEvents: Send + Sync {
    /// Responder: a request arrived; answer with [`Conn::accept`] or
    /// [`Conn::reject`] before the decision time-out.
    fn request(&self, request: &PeerRequest);
    /// The connection is up: the QP is connected through `link`.
    /// `private_data` is the peer's (initiator: the reply's; responder: the
    /// request's).
    fn established(&self, link: &Arc<Link>, private_data: &[u8]);
    /// The attempt failed; the stream is closed.
    fn failed(&self, failure: ConnFailure);
    /// Initiator started with [`Conn::initiate`] with [`Finish::AtComplete`]: the responder
    /// accepted (`established`: what was agreed, the reply's private data).
    /// The link starts, and the RTR goes out, at [`Conn::complete`] (N13).
    fn replied(&self, established: &Established) {
        let _ = established;
    }
}

/// What the link is built with once the setup succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkParams {
    /// The largest ULPDU sent (`mpa::mulpdu` of the socket's MSS).
    pub mulpdu: u16,
    /// The largest ULPDU accepted.
    pub max_rx_ulpdu: u16,
    /// (IRD, ORD) when the peer sent no RFC 6581 block (revision 1).
    pub default_ird_ord: (u32, u32),
}

enum Machine {
    Initiator(Initiator),
    Responder(Box<Responder>),
}

impl Machine {
    fn output(&self) -> &[u8] {
        match self {
            Self::Initiator(m) => m.output(),
            Self::Responder(m) => m.output(),
        }
    }

    fn advance_output(&mut self, n: usize) {
        match self {
            Self::Initiator(m) => m.advance_output(n),
            Self::Responder(m) => m.advance_output(n),
        }
    }

    fn receive(&mut self, bytes: &[u8], now: u64) -> Result<Option<Event>, SetupError> {
        match self {
            Self::Initiator(m) => m.receive(bytes, now),
            Self::Responder(m) => m.receive(bytes, now),
        }
    }

    fn tick(&mut self, now: u64) -> Result<(), SetupError> {
        match self {
            Self::Initiator(m) => m.tick(now),
            Self::Responder(m) => m.tick(now),
        }
    }

    fn deadline(&self) -> Option<u64> {
        match self {
            Self::Initiator(m) => m.deadline(),
            Self::Responder(m) => m.deadline(),
        }
    }
}

enum Phase {
    /// The MPA exchange runs.
    Setup(Machine),
    /// Initiator started with [`Conn::initiate`] with [`Finish::AtComplete`]: the reply accepted
    /// the request; the RTR (if any) waits in the machine's output until
    /// [`Conn::complete`]. Bytes received meanwhile are kept in
    /// `established.leftover`.
    Replied(Machine, Established),
    /// Established, but the last setup bytes are not all taken by the
    /// stream yet: the link starts once they are (its FPDUs must follow
    /// them). Bytes received meanwhile are kept in `established.leftover`.
    Draining(Machine, Established),
    /// The responder rejected: the reject frame drains, then the stream
    /// closes.
    Rejecting(Machine),
    /// The link is up and the connection layer is being told
    /// ([`ConnEvents::established`]): what the stream delivers meanwhile
    /// (behind the setup's leftover) and the peer's close wait here, so
    /// that nothing the peer sent reaches the link out of order or before
    /// the establishment is reported (a failure it causes must follow it).
    /// The thread that reported hands them over (`hand_over`).
    Linking {
        link: Arc<Link>,
        backlog: Vec<u8>,
        closed: Option<bool>,
    },
    /// The data path runs.
    Linked(Arc<Link>),
    /// Over (failed or rejected); the stream is closed.
    Over,
}

/// What a step asks of the caller once the lock is released.
enum Report {
    None,
    Request(PeerRequest),
    Replied(Established),
    Established(Arc<Link>, Vec<u8>),
    Failed(ConnFailure, bool),
    /// The reject frame went out: close the stream, report nothing.
    Rejected,
    /// Bytes for the running link could not be kept: reset the stream (the
    /// link hears the close after what it was kept).
    Reset,
    /// The stream has room for the link (while `Linking`).
    Writable(Arc<Link>),
}

/// One connection: its stream, its QP and where the setup stands.
pub struct Conn {
    /// The QP the link connects: the initiator's from the start, the
    /// responder's from its accept.
    qp: SpinLock<Option<Arc<Qp>>>,
    stream: Arc<dyn ByteStream>,
    params: LinkParams,
    initiator: bool,
    /// Initiator: hold the RTR and the link until [`Conn::complete`].
    held: bool,
    phase: SpinLock<Phase>,
    events: Arc<dyn ConnEvents>,
}

impl core::fmt::Debug for Conn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Conn")
            .field("initiator", &self.initiator)
            .finish_non_exhaustive()
    }
}

/// What either side of a connection starts with, besides its QP and its
/// side's MPA configuration.
pub struct ConnParts {
    /// The connected (initiator) or accepted (responder) stream.
    pub stream: Arc<dyn ByteStream>,
    /// What the link is built with once the setup succeeded.
    pub params: LinkParams,
    /// Who hears what the connection learns.
    pub events: Arc<dyn ConnEvents>,
    /// The clock in ms when the setup starts (its first wait counts from
    /// it).
    pub now: u64,
}

/// Where an initiator's connection stops once the reply accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// Nowhere: the RTR (if any) goes out and the link starts at once.
    AtReply,
    /// At [`ConnEvents::replied`]: the RTR and the link wait for
    /// [`Conn::complete`], as NDK's Connect completes at the reply and
    /// CompleteConnect finishes the connection (N13).
    AtComplete,
}

impl Conn {
    /// Starts the initiator's side on a connected stream (`parts`): the MPA
    /// request (IRD/ORD from `config`: the consumer's read limits, N20) with
    /// `private_data` is offered at once; `finish` says whether the
    /// connection waits for [`Self::complete`] after the reply.
    ///
    /// # Errors
    /// The request cannot be built (private data too long, IRD/ORD out of
    /// range): nothing was sent.
    pub fn initiate(
        qp: &Arc<Qp>,
        parts: ConnParts,
        config: &InitiatorConfig,
        private_data: &[u8],
        finish: Finish,
    ) -> Result<Arc<Self>, SetupError> {
        let machine = Initiator::new(config, private_data, parts.now)?;
        let held = finish == Finish::AtComplete;
        let conn = Self::new(Some(qp), parts, held, Machine::Initiator(machine));
        conn.writable();
        Ok(conn)
    }

    /// Starts the responder's side on an accepted stream (`parts`): it
    /// awaits the request. `qp` `None`: the QP is not known yet and comes
    /// with [`Self::accept`], as NDK's Accept names it.
    #[must_use]
    pub fn respond(qp: Option<&Arc<Qp>>, parts: ConnParts, config: ResponderConfig) -> Arc<Self> {
        let machine = Responder::new(config, parts.now);
        Self::new(qp, parts, false, Machine::Responder(Box::new(machine)))
    }

    fn new(qp: Option<&Arc<Qp>>, parts: ConnParts, held: bool, machine: Machine) -> Arc<Self> {
        Arc::new(Self {
            qp: SpinLock::new(qp.map(Arc::clone)),
            stream: parts.stream,
            params: parts.params,
            initiator: matches!(machine, Machine::Initiator(_)),
            held,
            phase: SpinLock::new(Phase::Setup(machine)),
            events: parts.events,
        })
    }

    /// When [`Self::tick`] must be called at the latest (`None`: no wait on
    /// the peer is running).
    pub fn deadline(&self) -> Option<u64> {
        match &*self.phase.lock() {
            Phase::Setup(machine) => machine.deadline(),
            _ => None,
        }
    }

    /// The clock reached `now`: a wait past its deadline fails the attempt
    /// ([`ConnFailure::TimedOut`], the stream is reset).
    pub fn tick(&self, now: u64) {
        let report = {
            let mut phase = self.phase.lock();
            match &mut *phase {
                Phase::Setup(machine) => match machine.tick(now) {
                    Ok(()) => Report::None,
                    Err(error) => {
                        *phase = Phase::Over;
                        Report::Failed(failure_of(error), true)
                    }
                },
                _ => Report::None,
            }
        };
        self.report(report);
    }

    /// Bytes received from the stream, in order.
    pub fn received(&self, bytes: &[u8], now: u64) {
        self.on_phase(
            |link| link.receive(bytes),
            |phase| match phase {
                Phase::Draining(_, established) | Phase::Replied(_, established) => {
                    if keep(&mut established.leftover, bytes, EARLY_MAX) {
                        Report::None
                    } else {
                        *phase = Phase::Over;
                        Report::Failed(ConnFailure::Flooded, true)
                    }
                }
                Phase::Linking {
                    backlog, closed, ..
                } => {
                    // After a close (the peer's, or this side's reset)
                    // nothing more is the link's.
                    if closed.is_some() || keep(backlog, bytes, LINKING_MAX) {
                        Report::None
                    } else {
                        *closed = Some(true);
                        Report::Reset
                    }
                }
                Phase::Setup(machine) => {
                    let result = machine.receive(bytes, now);
                    self.step(phase, result)
                }
                Phase::Linked(_) | Phase::Rejecting(_) | Phase::Over => Report::None,
            },
        );
    }

    /// The stream has room again: the setup's output, then the link's.
    pub fn writable(&self) {
        self.on_phase(Link::writable, |phase| match phase {
            Phase::Setup(machine) => {
                self.flush(machine);
                Report::None
            }
            Phase::Draining(..) | Phase::Rejecting(_) => self.drained(phase),
            // The link's runner may send already (its FPDUs follow the
            // setup's); only what comes in waits. With the lock released:
            // the link's sends may complete inline and call back here.
            Phase::Linking { link, .. } => Report::Writable(Arc::clone(link)),
            Phase::Linked(_) | Phase::Replied(..) | Phase::Over => Report::None,
        });
    }

    /// A stream event: once the data path runs, `linked` gets the link with
    /// the lock released; before, `setup` steps the phase under the lock
    /// and what it asks is reported after.
    fn on_phase(&self, linked: impl FnOnce(&Link), setup: impl FnOnce(&mut Phase) -> Report) {
        let report = {
            let mut phase = self.phase.lock();
            if let Phase::Linked(link) = &*phase {
                let link = Arc::clone(link);
                drop(phase);
                linked(&link);
                return;
            }
            setup(&mut phase)
        };
        self.report(report);
    }

    /// The peer closed (`abortive`: reset) the stream.
    pub fn closed(&self, abortive: bool) {
        let report = {
            let mut phase = self.phase.lock();
            match core::mem::replace(&mut *phase, Phase::Over) {
                Phase::Linked(link) => {
                    *phase = Phase::Linked(Arc::clone(&link));
                    drop(phase);
                    link.peer_closed(abortive);
                    return;
                }
                Phase::Linking {
                    link,
                    backlog,
                    closed: _,
                } => {
                    // After the backlog, once the establishment is reported.
                    *phase = Phase::Linking {
                        link,
                        backlog,
                        closed: Some(abortive),
                    };
                    return;
                }
                Phase::Over => Report::None,
                Phase::Rejecting(_) => Report::Rejected,
                Phase::Setup(_) | Phase::Draining(..) | Phase::Replied(..) => {
                    Report::Failed(ConnFailure::Closed { abortive }, abortive)
                }
            }
        };
        self.report(report);
    }

    /// Responder: accepts the request with this side's read limits (N20)
    /// and `private_data`; `qp` names the QP when the responder started
    /// without one ([`Self::respond`] with `None`), which the link connects
    /// once the setup is over.
    ///
    /// # Errors
    /// Local mistakes (private data too long, IRD/ORD out of range) and
    /// [`SetupError::WrongState`] (no request waiting, or no QP named at
    /// either step) change nothing. A passed decision deadline ends the
    /// attempt: it is reported through [`ConnEvents::failed`] and this
    /// returns `Ok`.
    pub fn accept(
        &self,
        qp: Option<&Arc<Qp>>,
        ird: u16,
        ord: u16,
        private_data: &[u8],
        now: u64,
    ) -> Result<(), SetupError> {
        let report = {
            let mut phase = self.phase.lock();
            let Phase::Setup(Machine::Responder(machine)) = &mut *phase else {
                return Err(SetupError::WrongState);
            };
            if let Some(qp) = qp {
                *self.qp.lock() = Some(Arc::clone(qp));
            } else if self.qp.lock().is_none() {
                return Err(SetupError::WrongState);
            }
            let result = machine.accept(ird, ord, private_data, now);
            if let Err(SetupError::Mpa(_) | SetupError::WrongState) = result {
                return result.map(|_| ());
            }
            self.step(&mut phase, result)
        };
        self.report(report);
        Ok(())
    }

    /// Responder: rejects the request with `private_data`; the stream closes
    /// once the reject frame is out.
    ///
    /// # Errors
    /// As [`Self::accept`].
    pub fn reject(&self, private_data: &[u8], now: u64) -> Result<(), SetupError> {
        let report = {
            let mut phase = self.phase.lock();
            let Phase::Setup(Machine::Responder(machine)) = &mut *phase else {
                return Err(SetupError::WrongState);
            };
            if let Err(error) = machine.reject(private_data, now) {
                if error != SetupError::TimedOut {
                    return Err(error);
                }
                *phase = Phase::Over;
                drop(phase);
                self.report(Report::Failed(ConnFailure::TimedOut, true));
                return Ok(());
            }
            let Phase::Setup(machine) = core::mem::replace(&mut *phase, Phase::Over) else {
                return Err(SetupError::WrongState);
            };
            *phase = Phase::Rejecting(machine);
            self.drained(&mut phase)
        };
        self.report(report);
        Ok(())
    }

    /// Initiator started with [`Self::initiate`] with [`Finish::AtComplete`], after
    /// [`ConnEvents::replied`]: sends the RTR (if one was agreed) and starts
    /// the link ([`ConnEvents::established`] follows, or
    /// [`ConnEvents::failed`] when the QP cannot be connected).
    ///
    /// # Errors
    /// [`SetupError::WrongState`] when the connection is not waiting for it.
    pub fn complete(&self) -> Result<(), SetupError> {
        let report = {
            let mut phase = self.phase.lock();
            if !matches!(*phase, Phase::Replied(..)) {
                return Err(SetupError::WrongState);
            }
            let Phase::Replied(machine, established) = core::mem::replace(&mut *phase, Phase::Over)
            else {
                return Err(SetupError::WrongState);
            };
            *phase = Phase::Draining(machine, established);
            self.drained(&mut phase)
        };
        self.report(report);
        Ok(())
    }

    /// The connection layer gives the attempt up before the link runs (the
    /// consumer closed its connector or rejected after the reply): the
    /// stream closes (`abortive`: reset) and nothing is reported. Once the
    /// link runs, its QP's disconnect or error closes the stream instead.
    pub fn abandon(&self, abortive: bool) {
        let over = {
            let mut phase = self.phase.lock();
            match &*phase {
                Phase::Linking { .. } | Phase::Linked(_) | Phase::Over => false,
                _ => {
                    *phase = Phase::Over;
                    true
                }
            }
        };
        if over {
            self.stream.close(abortive);
        }
    }

    /// The link, once the data path runs.
    pub fn link(&self) -> Option<Arc<Link>> {
        match &*self.phase.lock() {
            Phase::Linking { link, .. } | Phase::Linked(link) => Some(Arc::clone(link)),
            _ => None,
        }
    }

    /// Offers the setup's pending output; `true` once all is taken.
    fn flush(&self, machine: &mut Machine) -> bool {
        // Bounded: each round takes at least one byte or stops.
        for _ in 0..machine.output().len() {
            let pending = machine.output();
            if pending.is_empty() {
                return true;
            }
            let n = self.stream.send(pending);
            if n == 0 {
                return false;
            }
            machine.advance_output(n);
        }
        machine.output().is_empty()
    }

    /// After a setup step: acts on its event or error.
    fn step(&self, phase: &mut Phase, result: Result<Option<Event>, SetupError>) -> Report {
        let Phase::Setup(machine) = phase else {
            return Report::None;
        };
        if self.held
            && let Ok(Some(Event::Established(_))) = &result
        {
            // N13: the RTR stays queued until CompleteConnect.
            let Ok(Some(Event::Established(established))) = result else {
                return Report::None;
            };
            let Phase::Setup(machine) = core::mem::replace(phase, Phase::Over) else {
                return Report::None;
            };
            let report = Report::Replied(established.clone());
            *phase = Phase::Replied(machine, established);
            return report;
        }
        // Whatever the step queued goes out first (a reply, an RTR, a
        // Terminate before the close).
        self.flush(machine);
        match result {
            Ok(None) => Report::None,
            Ok(Some(Event::Request(request))) => Report::Request(request),
            Ok(Some(Event::Rejected { private_data })) => {
                *phase = Phase::Over;
                Report::Failed(ConnFailure::Rejected(private_data), false)
            }
            Ok(Some(Event::Established(established))) => {
                let Phase::Setup(machine) = core::mem::replace(phase, Phase::Over) else {
                    return Report::None;
                };
                *phase = Phase::Draining(machine, established);
                self.drained(phase)
            }
            Err(error) => {
                *phase = Phase::Over;
                Report::Failed(failure_of(error), false)
            }
        }
    }

    /// In `Draining` or `Rejecting`: once the setup's last bytes are taken,
    /// starts the link or ends the rejected attempt.
    fn drained(&self, phase: &mut Phase) -> Report {
        match phase {
            Phase::Draining(machine, _) | Phase::Rejecting(machine) => {
                if !self.flush(machine) {
                    return Report::None;
                }
            }
            _ => return Report::None,
        }
        match core::mem::replace(phase, Phase::Over) {
            Phase::Draining(_, mut established) => {
                let config = LinkConfig::established(
                    &established,
                    self.initiator,
                    self.params.mulpdu,
                    self.params.max_rx_ulpdu,
                    self.params.default_ird_ord,
                );
                let Some(qp) = self.qp.lock().clone() else {
                    return Report::Failed(ConnFailure::Link(LinkError::NotIdle), true);
                };
                match link::connect(&qp, Arc::clone(&self.stream), config) {
                    Ok(link) => {
                        *phase = Phase::Linking {
                            link: Arc::clone(&link),
                            backlog: core::mem::take(&mut established.leftover),
                            closed: None,
                        };
                        Report::Established(link, established.private_data)
                    }
                    Err(error) => Report::Failed(ConnFailure::Link(error), true),
                }
            }
            Phase::Rejecting(_) => Report::Rejected,
            other => {
                *phase = other;
                Report::None
            }
        }
    }

    /// Acts on a step's report with no lock held.
    fn report(&self, report: Report) {
        match report {
            Report::None => {}
            Report::Request(request) => self.events.request(&request),
            Report::Replied(established) => self.events.replied(&established),
            Report::Established(link, private_data) => {
                // The consumer hears of the connection first, then the
                // peer's first FPDUs (those that came with the last setup
                // message or since) go to the link: a failure they cause
                // (the QP in Error, `connection_lost`, X2) must follow the
                // establishment (N13), never precede it.
                self.events.established(&link, &private_data);
                self.hand_over(&link);
            }
            Report::Failed(failure, abortive) => {
                self.stream.close(abortive);
                self.events.failed(failure);
            }
            Report::Rejected => self.stream.close(false),
            Report::Reset => self.stream.close(true),
            Report::Writable(link) => link.writable(),
        }
    }
}

impl Conn {
    /// Once the establishment is reported: hands the link what the stream
    /// delivered while it was (`Phase::Linking`), in order, then the peer's
    /// close if it came; from then on the stream's events go to the link
    /// directly. Each round hands over all that came since the last: the
    /// link places in memory faster than a stream delivers, so the rounds
    /// end once the peer pauses.
    fn hand_over(&self, link: &Arc<Link>) {
        loop {
            let (bytes, closed) = {
                let mut phase = self.phase.lock();
                let Phase::Linking {
                    backlog, closed, ..
                } = &mut *phase
                else {
                    return;
                };
                if backlog.is_empty() {
                    let closed = closed.take();
                    *phase = Phase::Linked(Arc::clone(link));
                    (None, closed)
                } else {
                    (Some(core::mem::take(backlog)), None)
                }
            };
            let Some(bytes) = bytes else {
                if let Some(abortive) = closed {
                    link.peer_closed(abortive);
                }
                return;
            };
            link.receive(&bytes);
        }
    }
}

fn failure_of(error: SetupError) -> ConnFailure {
    match error {
        SetupError::TimedOut => ConnFailure::TimedOut,
        other => ConnFailure::Setup(other),
    }
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, not(loom)))]
mod hostile_tests;

#[cfg(all(test, not(loom)))]
mod order_tests;
