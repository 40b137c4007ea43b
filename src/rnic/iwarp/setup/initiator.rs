//! The connecting side of the MPA exchange: sends the request, checks the
//! reply, sends the RTR (RFC 5044 §7.1, RFC 6581).

use alloc::vec::Vec;

use super::buffers::{FrameReader, Outbox};
use super::{
    DEFAULT_REPLY_TIMEOUT_MS, Established, Event, RTR_MSN, SetupError, deadline_after, term_of,
};
use crate::rnic::iwarp::mpa::{
    ENHANCED_LEN, Enhanced, FrameKind, MAX_IRD_ORD, MAX_PRIVATE_DATA, MpaError, MpaFrame, RtrKinds,
};
use crate::rnic::iwarp::rdmap::Message;

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

    output_methods!();

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
