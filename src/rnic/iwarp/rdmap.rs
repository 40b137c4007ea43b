//! RDMAP (RFC 5040): messages carried in DDP segments.
//!
//! The RDMAP control byte is DDP's first RsvdULP byte:
//!
//! ```text
//!  0xc0 RV (RDMAP version, 1) | 0x30 reserved | 0x0f opcode
//! ```
//!
//! | opcode | message | buffer model | queue | body |
//! |---|---|---|---|---|
//! | 0 | RDMA Write | tagged | – | data |
//! | 1 | RDMA Read Request | untagged | 1 | 28-byte header, one segment |
//! | 2 | RDMA Read Response | tagged | – | data |
//! | 3 | Send | untagged | 0 | data |
//! | 4 | Send with Invalidate | untagged | 0 | data; STag in RsvdULP |
//! | 5 | Send with Solicited Event | untagged | 0 | data |
//! | 6 | Send with SE and Invalidate | untagged | 0 | data; STag in RsvdULP |
//! | 7 | Terminate | untagged | 2 | Terminate payload, one segment |
//!
//! The Read Request header: sink STag (4), sink tagged offset (8), RDMA Read
//! message size (4), source STag (4), source tagged offset (8), big endian.
//!
//! [`Message::parse`] checks every field against this table: version,
//! reserved bits (the RsvdULP word too, except where it carries the
//! Invalidate STag), opcode, buffer model, queue number, single-segment
//! messages and lengths.

use core::fmt;

use super::ddp::{self, Buffer, DdpError, DdpHeader};
use super::mpa::{self, MpaError, Rtr};
use super::terminate::{
    TermCode, TermLayout, Terminate, TerminateError, ddp_code, ddp_etype, rdmap_code, rdmap_etype,
};
use super::wire;

/// The RDMAP version (RV).
pub const RDMAP_VERSION: u8 = 1;
/// Bytes of the Read Request header after the DDP header.
pub const READ_REQUEST_LEN: usize = 28;
/// Untagged queue of Sends.
pub const QN_SEND: u32 = 0;
/// Untagged queue of Read Requests.
pub const QN_READ_REQUEST: u32 = 1;
/// Untagged queue of Terminates.
pub const QN_TERMINATE: u32 = 2;
/// Untagged queues RDMAP uses.
pub const QUEUE_COUNT: usize = 3;
/// The STag of RTR Writes and Read Requests (they move no byte; a nonzero
/// value, as siw uses, because some hardware treats STag 0 specially).
pub const RTR_STAG: u32 = 1;

const VERSION_SHIFT: u8 = 6;
const RESERVED_MASK: u8 = 0x30;
const OPCODE_MASK: u8 = 0x0f;

numbered! {
    /// RDMAP opcodes.
    pub enum Opcode {
        /// RDMA Write.
        Write = 0,
        /// RDMA Read Request.
        ReadRequest = 1,
        /// RDMA Read Response.
        ReadResponse = 2,
        /// Send.
        Send = 3,
        /// Send with Invalidate.
        SendInvalidate = 4,
        /// Send with Solicited Event.
        SendSolicited = 5,
        /// Send with Solicited Event and Invalidate.
        SendSolicitedInvalidate = 6,
        /// Terminate.
        Terminate = 7,
    }
}

impl Opcode {
    /// Whether the message uses the tagged buffer model.
    #[must_use]
    pub const fn is_tagged(self) -> bool {
        matches!(self, Self::Write | Self::ReadResponse)
    }

    /// The untagged queue of the message (`None` for tagged ones).
    #[must_use]
    pub const fn queue(self) -> Option<u32> {
        match self {
            Self::Write | Self::ReadResponse => None,
            Self::ReadRequest => Some(QN_READ_REQUEST),
            Self::Terminate => Some(QN_TERMINATE),
            Self::Send
            | Self::SendInvalidate
            | Self::SendSolicited
            | Self::SendSolicitedInvalidate => Some(QN_SEND),
        }
    }

    /// Whether the RsvdULP word carries an STag to invalidate.
    #[must_use]
    pub const fn invalidates(self) -> bool {
        matches!(self, Self::SendInvalidate | Self::SendSolicitedInvalidate)
    }

    /// The RDMAP control byte of this opcode.
    #[must_use]
    pub const fn ctrl(self) -> u8 {
        RDMAP_VERSION << VERSION_SHIFT | self as u8
    }

    /// The Send opcode for the solicited and invalidate options.
    #[must_use]
    pub const fn send(solicited: bool, invalidate: bool) -> Self {
        match (solicited, invalidate) {
            (false, false) => Self::Send,
            (false, true) => Self::SendInvalidate,
            (true, false) => Self::SendSolicited,
            (true, true) => Self::SendSolicitedInvalidate,
        }
    }
}

/// What went wrong with an RDMAP message (or the DDP segment carrying it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmapError {
    /// The DDP segment is wrong.
    Ddp(DdpError),
    /// An RDMAP version other than 1.
    BadVersion(u8),
    /// Reserved bits of the control byte, or a reserved RsvdULP word, set.
    ReservedBits,
    /// An opcode RFC 5040 does not define.
    UnknownOpcode(u8),
    /// A tagged opcode in an untagged segment, or the other way round.
    WrongBufferModel(Opcode),
    /// An untagged message on a queue that is not its own.
    WrongQueue {
        /// The message.
        opcode: Opcode,
        /// The queue it came on.
        qn: u32,
    },
    /// A Read Request or Terminate not sent as one segment at offset 0.
    NotSingleSegment(Opcode),
    /// A body of the wrong length (a Read Request's is 28 bytes).
    BadLength {
        /// The message.
        opcode: Opcode,
        /// Bytes received.
        len: usize,
    },
    /// The Terminate payload does not hold together.
    Terminate(TerminateError),
    /// Framing the message failed (building).
    Mpa(MpaError),
    /// The output buffer is too small (building): `needed` bytes.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
}

impl From<DdpError> for RdmapError {
    fn from(error: DdpError) -> Self {
        match error {
            DdpError::BufferTooSmall { needed } => Self::BufferTooSmall { needed },
            other => Self::Ddp(other),
        }
    }
}

impl From<TerminateError> for RdmapError {
    fn from(error: TerminateError) -> Self {
        match error {
            TerminateError::BufferTooSmall { needed } => Self::BufferTooSmall { needed },
            other => Self::Terminate(other),
        }
    }
}

impl From<MpaError> for RdmapError {
    fn from(error: MpaError) -> Self {
        match error {
            MpaError::BufferTooSmall { needed } => Self::BufferTooSmall { needed },
            other => Self::Mpa(other),
        }
    }
}

impl RdmapError {
    /// The Terminate code that reports this error (RFC 5040 §4.8), or `None`
    /// when none is sent: a local failure, or a bad Terminate (a Terminate is
    /// never answered with another).
    #[must_use]
    pub const fn term_code(&self) -> Option<TermCode> {
        let (etype, ecode) = match self {
            Self::Ddp(error) => return error.term_code(),
            Self::Mpa(error) => return error.term_code(),
            Self::Terminate(_) | Self::BufferTooSmall { .. } => return None,
            Self::WrongQueue { .. } => {
                return Some(TermCode::ddp(
                    ddp_etype::UNTAGGED_BUFFER,
                    ddp_code::U_INVALID_QN,
                ));
            }
            Self::BadVersion(_) => (rdmap_etype::REMOTE_OPERATION, rdmap_code::INVALID_VERSION),
            Self::UnknownOpcode(_) | Self::WrongBufferModel(_) => {
                (rdmap_etype::REMOTE_OPERATION, rdmap_code::UNEXPECTED_OPCODE)
            }
            Self::ReservedBits | Self::NotSingleSegment(_) | Self::BadLength { .. } => {
                (rdmap_etype::REMOTE_OPERATION, rdmap_code::UNSPECIFIED)
            }
        };
        Some(TermCode::rdmap(etype, ecode))
    }
}

impl fmt::Display for RdmapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The body of an RDMA Read Request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ReadRequest {
    /// STag of the requester's buffer the data goes to.
    pub sink_stag: u32,
    /// Tagged offset in the sink.
    pub sink_to: u64,
    /// Bytes to read.
    pub size: u32,
    /// STag of the responder's buffer the data comes from.
    pub source_stag: u32,
    /// Tagged offset in the source.
    pub source_to: u64,
}

impl ReadRequest {
    /// Parses the 28-byte body.
    ///
    /// # Errors
    /// [`RdmapError::BadLength`] unless `body` is exactly 28 bytes.
    pub fn parse(body: &[u8]) -> Result<Self, RdmapError> {
        let bad = RdmapError::BadLength {
            opcode: Opcode::ReadRequest,
            len: body.len(),
        };
        if body.len() != READ_REQUEST_LEN {
            return Err(bad);
        }
        Ok(Self {
            sink_stag: wire::be32(body, 0).ok_or(bad)?,
            sink_to: wire::be64(body, 4).ok_or(bad)?,
            size: wire::be32(body, 12).ok_or(bad)?,
            source_stag: wire::be32(body, 16).ok_or(bad)?,
            source_to: wire::be64(body, 20).ok_or(bad)?,
        })
    }

    /// Writes the 28-byte body.
    ///
    /// # Errors
    /// [`RdmapError::BufferTooSmall`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, RdmapError> {
        let too_small = RdmapError::BufferTooSmall {
            needed: READ_REQUEST_LEN,
        };
        let out = buf.get_mut(..READ_REQUEST_LEN).ok_or(too_small)?;
        wire::put_be32(out, 0, self.sink_stag).ok_or(too_small)?;
        wire::put_be64(out, 4, self.sink_to).ok_or(too_small)?;
        wire::put_be32(out, 12, self.size).ok_or(too_small)?;
        wire::put_be32(out, 16, self.source_stag).ok_or(too_small)?;
        wire::put_be64(out, 20, self.source_to).ok_or(too_small)?;
        Ok(READ_REQUEST_LEN)
    }
}

/// The header of a Send segment: the Send kind (opcode) and what DDP's
/// untagged header says of the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendHeader {
    /// The Solicited Event variant.
    pub solicited: bool,
    /// The STag to invalidate (the Invalidate variants).
    pub invalidate: Option<u32>,
    /// Message sequence number on queue 0.
    pub msn: u32,
    /// Message offset of this segment.
    pub mo: u32,
    /// Last segment of the message.
    pub last: bool,
}

impl SendHeader {
    /// A plain Send (no Solicited Event, no Invalidate) in one segment:
    /// the whole of message `msn`.
    #[must_use]
    pub const fn whole(msn: u32) -> Self {
        Self {
            solicited: false,
            invalidate: None,
            msn,
            mo: 0,
            last: true,
        }
    }

    /// The message's opcode.
    #[must_use]
    pub const fn opcode(&self) -> Opcode {
        Opcode::send(self.solicited, self.invalidate.is_some())
    }
}

/// One RDMAP message segment, parsed or to be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// A segment of an RDMA Write.
    Write {
        /// Sink STag.
        stag: u32,
        /// Tagged offset of this segment.
        to: u64,
        /// Last segment of the Write.
        last: bool,
        /// Data.
        payload: &'a [u8],
    },
    /// A segment of an RDMA Read Response.
    ReadResponse {
        /// Sink STag (the Read Request's).
        stag: u32,
        /// Tagged offset of this segment.
        to: u64,
        /// Last segment of the response.
        last: bool,
        /// Data.
        payload: &'a [u8],
    },
    /// A segment of a Send (any of the four kinds).
    Send {
        /// What the segment's headers say of it.
        header: SendHeader,
        /// Data.
        payload: &'a [u8],
    },
    /// An RDMA Read Request (always one segment).
    ReadRequest {
        /// Message sequence number on queue 1.
        msn: u32,
        /// The request.
        request: ReadRequest,
    },
    /// A Terminate (always one segment).
    Terminate {
        /// Message sequence number on queue 2.
        msn: u32,
        /// The Terminate payload.
        terminate: Terminate<'a>,
    },
}

impl<'a> Message<'a> {
    /// The message's opcode.
    #[must_use]
    pub const fn opcode(&self) -> Opcode {
        match self {
            Self::Write { .. } => Opcode::Write,
            Self::ReadResponse { .. } => Opcode::ReadResponse,
            Self::Send { header, .. } => header.opcode(),
            Self::ReadRequest { .. } => Opcode::ReadRequest,
            Self::Terminate { .. } => Opcode::Terminate,
        }
    }

    /// The RTR message of peer-to-peer setup (RFC 6581): a zero-length
    /// Send, Write or Read Request.
    #[must_use]
    pub const fn rtr(kind: Rtr, msn: u32) -> Message<'static> {
        match kind {
            Rtr::Send => Message::Send {
                header: SendHeader::whole(msn),
                payload: &[],
            },
            Rtr::Write => Message::Write {
                stag: RTR_STAG,
                to: 0,
                last: true,
                payload: &[],
            },
            Rtr::Read => Message::ReadRequest {
                msn,
                request: ReadRequest {
                    sink_stag: RTR_STAG,
                    sink_to: 0,
                    size: 0,
                    source_stag: RTR_STAG,
                    source_to: 0,
                },
            },
        }
    }

    /// Whether this is a zero-length message of the RTR kind `kind`.
    #[must_use]
    pub const fn is_rtr(&self, kind: Rtr) -> bool {
        match (self, kind) {
            (
                Self::Send {
                    header:
                        SendHeader {
                            invalidate: None,
                            mo: 0,
                            last: true,
                            ..
                        },
                    payload,
                },
                Rtr::Send,
            )
            | (
                Self::Write {
                    last: true,
                    payload,
                    ..
                },
                Rtr::Write,
            ) => payload.is_empty(),
            (Self::ReadRequest { request, .. }, Rtr::Read) => request.size == 0,
            _ => false,
        }
    }

    /// The DDP header that carries the message.
    #[must_use]
    pub const fn ddp_header(&self) -> DdpHeader {
        let ulp_ctrl = self.opcode().ctrl();
        let (last, buffer) = match *self {
            Self::Write { stag, to, last, .. } | Self::ReadResponse { stag, to, last, .. } => {
                (last, Buffer::Tagged { stag, to })
            }
            Self::Send { header, .. } => (
                header.last,
                Buffer::Untagged {
                    ulp: match header.invalidate {
                        Some(stag) => stag,
                        None => 0,
                    },
                    qn: QN_SEND,
                    msn: header.msn,
                    mo: header.mo,
                },
            ),
            Self::ReadRequest { msn, .. } => (
                true,
                Buffer::Untagged {
                    ulp: 0,
                    qn: QN_READ_REQUEST,
                    msn,
                    mo: 0,
                },
            ),
            Self::Terminate { msn, .. } => (
                true,
                Buffer::Untagged {
                    ulp: 0,
                    qn: QN_TERMINATE,
                    msn,
                    mo: 0,
                },
            ),
        };
        DdpHeader {
            last,
            ulp_ctrl,
            buffer,
        }
    }

    /// Bytes of the ULPDU (DDP header, RDMAP header, payload).
    #[must_use]
    pub const fn ulpdu_len(&self) -> usize {
        self.ddp_header().len()
            + match self {
                Self::Write { payload, .. }
                | Self::ReadResponse { payload, .. }
                | Self::Send { payload, .. } => payload.len(),
                Self::ReadRequest { .. } => READ_REQUEST_LEN,
                Self::Terminate { terminate, .. } => terminate.len(),
            }
    }

    /// Writes the ULPDU into `buf` (a Terminate in the RFC layout) and
    /// returns its length.
    ///
    /// # Errors
    /// [`RdmapError::BufferTooSmall`]; [`RdmapError::Terminate`] for a
    /// Terminate that cannot be built.
    pub fn write_ulpdu(&self, buf: &mut [u8]) -> Result<usize, RdmapError> {
        let len = self.ulpdu_len();
        let too_small = RdmapError::BufferTooSmall { needed: len };
        let out = buf.get_mut(..len).ok_or(too_small)?;
        let header = self.ddp_header();
        let at = header.write(out)?;
        let body = out.get_mut(at..).ok_or(too_small)?;
        match self {
            Self::Write { payload, .. }
            | Self::ReadResponse { payload, .. }
            | Self::Send { payload, .. } => {
                wire::put(body, 0, payload).ok_or(too_small)?;
            }
            Self::ReadRequest { request, .. } => {
                request.write(body)?;
            }
            Self::Terminate { terminate, .. } => {
                terminate.write(body, TermLayout::Rfc)?;
            }
        }
        Ok(len)
    }

    /// Writes the whole FPDU (MPA length, ULPDU, pad, CRC) into `buf` and
    /// returns its length.
    ///
    /// # Errors
    /// As [`Self::write_ulpdu`], and [`RdmapError::Mpa`] for a ULPDU over
    /// 65535 bytes.
    pub fn write_fpdu(&self, buf: &mut [u8], crc: bool) -> Result<usize, RdmapError> {
        let ulpdu_len = self.ulpdu_len();
        let needed = mpa::fpdu_len(ulpdu_len);
        if ulpdu_len > mpa::MAX_ULPDU {
            return Err(RdmapError::Mpa(MpaError::UlpduTooLong {
                len: ulpdu_len,
                max: mpa::MAX_ULPDU,
            }));
        }
        let out = buf
            .get_mut(..needed)
            .ok_or(RdmapError::BufferTooSmall { needed })?;
        let ulpdu = out
            .get_mut(mpa::FPDU_LENGTH_LEN..)
            .ok_or(RdmapError::BufferTooSmall { needed })?;
        self.write_ulpdu(ulpdu)?;
        Ok(mpa::seal_fpdu(out, ulpdu_len, crc)?)
    }

    /// Parses the message a ULPDU carries, checking every field (see the
    /// module docs). A Terminate is decoded in `term_layout`, or in the
    /// layout detected when `None`.
    ///
    /// # Errors
    /// The [`RdmapError`] (or wrapped [`DdpError`]) of the first check that
    /// fails; [`RdmapError::term_code`] says what to tell the peer.
    pub fn parse(ulpdu: &'a [u8], term_layout: Option<TermLayout>) -> Result<Self, RdmapError> {
        let (header, payload) = DdpHeader::parse(ulpdu)?;
        let ctrl = header.ulp_ctrl;
        let version = ctrl >> VERSION_SHIFT;
        if version != RDMAP_VERSION {
            return Err(RdmapError::BadVersion(version));
        }
        if ctrl & RESERVED_MASK != 0 {
            return Err(RdmapError::ReservedBits);
        }
        let raw = ctrl & OPCODE_MASK;
        let opcode = Opcode::from_u8(raw).ok_or(RdmapError::UnknownOpcode(raw))?;
        if opcode.is_tagged() != header.is_tagged() {
            return Err(RdmapError::WrongBufferModel(opcode));
        }
        match header.buffer {
            Buffer::Tagged { stag, to } => {
                // The payload must not run past the end of the 64-bit space.
                ddp::tagged_end(to, payload.len())?;
                let last = header.last;
                Ok(if opcode == Opcode::Write {
                    Self::Write {
                        stag,
                        to,
                        last,
                        payload,
                    }
                } else {
                    Self::ReadResponse {
                        stag,
                        to,
                        last,
                        payload,
                    }
                })
            }
            Buffer::Untagged { ulp, qn, msn, mo } => {
                if opcode.queue() != Some(qn) {
                    return Err(RdmapError::WrongQueue { opcode, qn });
                }
                if !opcode.invalidates() && ulp != 0 {
                    return Err(RdmapError::ReservedBits);
                }
                match opcode {
                    Opcode::ReadRequest | Opcode::Terminate => {
                        if !header.last || mo != 0 {
                            return Err(RdmapError::NotSingleSegment(opcode));
                        }
                        if opcode == Opcode::ReadRequest {
                            Ok(Self::ReadRequest {
                                msn,
                                request: ReadRequest::parse(payload)?,
                            })
                        } else {
                            let (terminate, _) = Terminate::parse(payload, term_layout)?;
                            Ok(Self::Terminate { msn, terminate })
                        }
                    }
                    _ => Ok(Self::Send {
                        header: SendHeader {
                            solicited: matches!(
                                opcode,
                                Opcode::SendSolicited | Opcode::SendSolicitedInvalidate
                            ),
                            invalidate: if opcode.invalidates() {
                                Some(ulp)
                            } else {
                                None
                            },
                            msn,
                            mo,
                            last: header.last,
                        },
                        payload,
                    }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rnic::iwarp::terminate::{Layer, LlpCode};
    use proptest::prelude::*;

    fn ulpdu(message: &Message<'_>) -> Vec<u8> {
        let mut buf = vec![0u8; message.ulpdu_len()];
        assert_eq!(message.write_ulpdu(&mut buf), Ok(buf.len()));
        buf
    }

    /// `numbered!`: the opcodes in wire order, each found again from its
    /// number and from the control byte it writes; 8 to 15 are no opcode.
    #[test]
    fn every_opcode_round_trips_through_its_number() {
        assert_eq!(Opcode::ALL.len(), 8);
        for (i, op) in Opcode::ALL.into_iter().enumerate() {
            assert_eq!(op as usize, i);
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
            assert_eq!(Opcode::from_u8(op.ctrl() & OPCODE_MASK), Some(op));
        }
        for raw in 8..=u8::MAX {
            assert_eq!(Opcode::from_u8(raw), None, "{raw}");
        }
    }

    #[test]
    fn read_request_is_byte_exact_and_round_trips() {
        let request = ReadRequest {
            sink_stag: 0x0a0b_0c0d,
            sink_to: 0x1000,
            size: 1 << 20,
            source_stag: 0x1111_2222,
            source_to: 0x2000,
        };
        let message = Message::ReadRequest { msn: 7, request };
        let bytes = ulpdu(&message);
        let mut expected = vec![0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0];
        expected.extend_from_slice(&[0x0a, 0x0b, 0x0c, 0x0d]);
        expected.extend_from_slice(&0x1000u64.to_be_bytes());
        expected.extend_from_slice(&(1u32 << 20).to_be_bytes());
        expected.extend_from_slice(&[0x11, 0x11, 0x22, 0x22]);
        expected.extend_from_slice(&0x2000u64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(Message::parse(&bytes, None), Ok(message));
        assert_eq!(ReadRequest::parse(&bytes[18..]), Ok(request));
    }

    #[test]
    fn every_message_kind_round_trips_through_an_fpdu() {
        let terminate = Terminate::new(TermCode::rdmap(2, 6));
        let messages = [
            Message::Write {
                stag: 5,
                to: 9,
                last: false,
                payload: b"abc",
            },
            Message::ReadResponse {
                stag: 6,
                to: 1,
                last: true,
                payload: b"",
            },
            Message::Send {
                header: SendHeader {
                    solicited: true,
                    invalidate: Some(0x77),
                    msn: 3,
                    mo: 40,
                    last: true,
                },
                payload: b"tail",
            },
            Message::Send {
                header: SendHeader {
                    last: false,
                    ..SendHeader::whole(1)
                },
                payload: b"x",
            },
            Message::Terminate { msn: 1, terminate },
        ];
        for message in messages {
            for crc in [false, true] {
                let mut buf = [0u8; 128];
                let len = message.write_fpdu(&mut buf, crc).unwrap();
                let (bytes, used) = mpa::parse_fpdu(&buf[..len], crc, 100).unwrap();
                assert_eq!(used, len);
                assert_eq!(Message::parse(bytes, Some(TermLayout::Rfc)), Ok(message));
            }
        }
    }

    #[test]
    fn send_with_invalidate_carries_the_stag_in_rsvdulp() {
        let message = Message::Send {
            header: SendHeader {
                invalidate: Some(0xcafe_f00d),
                ..SendHeader::whole(1)
            },
            payload: &[],
        };
        let bytes = ulpdu(&message);
        assert_eq!(&bytes[..6], &[0x41, 0x44, 0xca, 0xfe, 0xf0, 0x0d]);
        assert_eq!(message.opcode(), Opcode::SendInvalidate);
    }

    #[test]
    fn rtr_messages() {
        for kind in [Rtr::Send, Rtr::Write, Rtr::Read] {
            let message = Message::rtr(kind, 1);
            assert!(message.is_rtr(kind));
            let bytes = ulpdu(&message);
            let parsed = Message::parse(&bytes, None).unwrap();
            assert!(parsed.is_rtr(kind));
            for other in [Rtr::Send, Rtr::Write, Rtr::Read] {
                assert_eq!(parsed.is_rtr(other), other == kind);
            }
        }
        let data = Message::Write {
            stag: 1,
            to: 0,
            last: true,
            payload: b"x",
        };
        assert!(!data.is_rtr(Rtr::Write));
    }

    fn send_bytes() -> Vec<u8> {
        ulpdu(&Message::Send {
            header: SendHeader::whole(1),
            payload: b"hello",
        })
    }

    #[test]
    fn message_rejections() {
        let good = send_bytes();
        let with = |at: usize, value: u8| {
            let mut b = good.clone();
            b[at] = value;
            Message::parse(&b, None).map(|_| ())
        };
        // DDP version 2.
        assert_eq!(
            with(0, 0x42),
            Err(RdmapError::Ddp(DdpError::BadVersion {
                version: 2,
                tagged: false
            }))
        );
        // DDP reserved bit.
        assert_eq!(
            with(0, 0x41 | 0x08),
            Err(RdmapError::Ddp(DdpError::ReservedBits))
        );
        // RDMAP version 0, 2 and 3.
        assert_eq!(with(1, 0x03), Err(RdmapError::BadVersion(0)));
        assert_eq!(with(1, 0x83), Err(RdmapError::BadVersion(2)));
        assert_eq!(with(1, 0xc3), Err(RdmapError::BadVersion(3)));
        // RDMAP reserved bits.
        assert_eq!(with(1, 0x53), Err(RdmapError::ReservedBits));
        // Unknown opcodes.
        for op in 8..16u8 {
            assert_eq!(with(1, 0x40 | op), Err(RdmapError::UnknownOpcode(op)));
        }
        // A Write in an untagged segment.
        assert_eq!(
            with(1, 0x40),
            Err(RdmapError::WrongBufferModel(Opcode::Write))
        );
        // A Send on queue 1.
        assert_eq!(
            with(9, 1),
            Err(RdmapError::WrongQueue {
                opcode: Opcode::Send,
                qn: 1
            })
        );
        // A plain Send with a nonzero RsvdULP word.
        assert_eq!(with(5, 1), Err(RdmapError::ReservedBits));
        // Truncated.
        assert_eq!(
            Message::parse(&good[..17], None),
            Err(RdmapError::Ddp(DdpError::Truncated { needed: 18 }))
        );
        // A Read Request that is not the last segment, or too short.
        let rr = ulpdu(&Message::rtr(Rtr::Read, 1));
        let mut not_last = rr.clone();
        not_last[0] = 0x01;
        assert_eq!(
            Message::parse(&not_last, None),
            Err(RdmapError::NotSingleSegment(Opcode::ReadRequest))
        );
        assert_eq!(
            Message::parse(&rr[..rr.len() - 1], None),
            Err(RdmapError::BadLength {
                opcode: Opcode::ReadRequest,
                len: 27
            })
        );
        // A tagged segment whose payload wraps the offset.
        let wrap = ulpdu(&Message::Write {
            stag: 1,
            to: u64::MAX,
            last: true,
            payload: b"ab",
        });
        assert_eq!(
            Message::parse(&wrap, None),
            Err(RdmapError::Ddp(DdpError::OffsetWrap))
        );
    }

    #[test]
    fn error_term_codes() {
        let code = |e: RdmapError| e.term_code().map(|c| (c.layer, c.etype, c.ecode));
        assert_eq!(code(RdmapError::BadVersion(2)), Some((Layer::Rdmap, 2, 5)));
        assert_eq!(
            code(RdmapError::UnknownOpcode(9)),
            Some((Layer::Rdmap, 2, 6))
        );
        assert_eq!(
            code(RdmapError::WrongBufferModel(Opcode::Send)),
            Some((Layer::Rdmap, 2, 6))
        );
        assert_eq!(
            code(RdmapError::WrongQueue {
                opcode: Opcode::Send,
                qn: 2
            }),
            Some((Layer::Ddp, 2, 1))
        );
        assert_eq!(
            code(RdmapError::ReservedBits),
            Some((Layer::Rdmap, 2, 0xff))
        );
        assert_eq!(code(RdmapError::Terminate(TerminateError::Truncated)), None);
        assert_eq!(
            code(RdmapError::Mpa(MpaError::BadCrc {
                computed: 1,
                received: 2
            })),
            Some((Layer::Llp, 0, LlpCode::Crc as u8))
        );
        assert_eq!(code(RdmapError::BufferTooSmall { needed: 3 }), None);
    }

    #[test]
    fn builders_refuse_small_buffers() {
        let message = Message::rtr(Rtr::Read, 1);
        assert_eq!(
            message.write_ulpdu(&mut [0u8; 45]),
            Err(RdmapError::BufferTooSmall { needed: 46 })
        );
        assert_eq!(
            message.write_fpdu(&mut [0u8; 50], true),
            Err(RdmapError::BufferTooSmall { needed: 52 })
        );
        let huge = vec![0u8; 70_000];
        let big = Message::Write {
            stag: 1,
            to: 0,
            last: true,
            payload: &huge,
        };
        let mut buf = vec![0u8; 80_000];
        assert!(matches!(
            big.write_fpdu(&mut buf, false),
            Err(RdmapError::Mpa(MpaError::UlpduTooLong { .. }))
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_rdmap_parser(
            bytes in proptest::collection::vec(any::<u8>(), 0..120),
            ctrl in 0u8..=255,
            layout in proptest::option::of(prop_oneof![Just(TermLayout::Rfc), Just(TermLayout::Siw)]),
        ) {
            let _ = Message::parse(&bytes, layout);
            // Mostly-valid headers reach the deeper checks.
            let mut b = bytes.clone();
            if b.len() >= 2 {
                b[0] = (b[0] & 0xc0) | 0x01;
                b[1] = ctrl;
                let _ = Message::parse(&b, layout);
            }
        }

        #[test]
        fn read_requests_round_trip(
            msn in any::<u32>(), sink_stag in any::<u32>(), sink_to in any::<u64>(),
            size in any::<u32>(), source_stag in any::<u32>(), source_to in any::<u64>(),
        ) {
            let message = Message::ReadRequest {
                msn,
                request: ReadRequest { sink_stag, sink_to, size, source_stag, source_to },
            };
            let bytes = ulpdu(&message);
            prop_assert_eq!(Message::parse(&bytes, None), Ok(message));
        }
    }
}
