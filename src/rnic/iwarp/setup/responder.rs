//! The listening side of the MPA exchange: checks the request, hands it to
//! the consumer, sends its reply, checks the RTR (RFC 5044 §7.1, RFC 6581).

use alloc::vec::Vec;

use super::buffers::{FrameReader, Outbox};
use super::{
    DEFAULT_DECISION_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_RTR_TIMEOUT_MS, Established,
    Event, PeerRequest, RTR_MAX_ULPDU, RTR_MSN, SetupError, deadline_after, term_of,
};
use crate::rnic::iwarp::mpa::{Deframer, FrameKind, MpaError, MpaFrame, Negotiated, Rtr, RtrKinds};
use crate::rnic::iwarp::rdmap::Message;

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
                deadline: deadline_after(now, config.request_timeout_ms),
            },
            config,
            out: Outbox::default(),
        }
    }

    output_methods!();

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
        Message::Send { header, .. } if header.msn != RTR_MSN => Err(SetupError::NotRtr),
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
