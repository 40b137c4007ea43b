//! The RDMAP Terminate message (RFC 5040 §4.8) and its error codes (RFC 5040
//! §4.8, RFC 5041 §7.2, RFC 5044 §8, RFC 6581 §9); the mapping from local
//! causes to codes and from a received code to a completion status.
//!
//! # Layout of the Terminate payload
//!
//! ```text
//!  0      layer (high nibble) | error type (low nibble)
//!  1      error code
//!  2      M 0x80 (DDP segment length valid), D 0x40 (DDP header copied),
//!         R 0x20 (RDMAP header copied); 0x1f reserved
//!  3      reserved
//!  4..6   DDP segment length of the offending segment (present when M, D or R)
//!  6..    the offending DDP header, 14 (tagged) or 18 (untagged) bytes (D)
//!  ..     the offending Read Request's 28-byte RDMAP header (R, Read Request)
//! ```
//!
//! Linux siw lays the first and third bytes out with little-endian bit fields:
//! byte 0 is `etype << 4 | layer` and M, D, R are 0x01, 0x02, 0x04 of byte 2.
//! SoftNDK *sends* the RFC layout ([`TermLayout::Rfc`]) and *decodes* both:
//! [`Terminate::parse`] with no layout given detects it (see
//! `docs/iwarp.md` for the reasoning).

use core::fmt;

use super::ddp::{self, DdpHeader};
use super::rdmap::READ_REQUEST_LEN;
use super::wire;
use crate::rnic::WcStatus;
use crate::rnic::mr::Denied;

/// Bytes of the Terminate control word.
pub const CONTROL_LEN: usize = 4;
/// Bytes of the DDP segment length field.
pub const SEGMENT_LEN_LEN: usize = 2;
/// The longest Terminate payload: control, segment length, an untagged DDP
/// header and a Read Request header.
pub const MAX_TERMINATE_LEN: usize =
    CONTROL_LEN + SEGMENT_LEN_LEN + ddp::UNTAGGED_HEADER_LEN + READ_REQUEST_LEN;

/// The layer that reports an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// RDMAP (0).
    Rdmap = 0,
    /// DDP (1).
    Ddp = 1,
    /// The lower layer protocol: MPA (2).
    Llp = 2,
}

impl Layer {
    /// The layer of a wire value.
    #[must_use]
    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            0 => Some(Self::Rdmap),
            1 => Some(Self::Ddp),
            2 => Some(Self::Llp),
            _ => None,
        }
    }
}

/// RDMAP error types.
pub mod rdmap_etype {
    /// Local catastrophic error.
    pub const LOCAL_CATASTROPHIC: u8 = 0;
    /// Remote protection error.
    pub const REMOTE_PROTECTION: u8 = 1;
    /// Remote operation error.
    pub const REMOTE_OPERATION: u8 = 2;
}

/// RDMAP error codes.
pub mod rdmap_code {
    /// Invalid STag (protection).
    pub const INVALID_STAG: u8 = 0x00;
    /// Base or bounds violation (protection).
    pub const BASE_BOUNDS: u8 = 0x01;
    /// Access rights violation (protection).
    pub const ACCESS_RIGHTS: u8 = 0x02;
    /// STag not associated with the RDMAP stream (protection).
    pub const STAG_NOT_ASSOCIATED: u8 = 0x03;
    /// Tagged offset wrap (protection).
    pub const TO_WRAP: u8 = 0x04;
    /// Invalid RDMAP version (operation).
    pub const INVALID_VERSION: u8 = 0x05;
    /// Unexpected opcode (operation).
    pub const UNEXPECTED_OPCODE: u8 = 0x06;
    /// Catastrophic error localized to the RDMAP stream (operation).
    pub const CATASTROPHIC_STREAM: u8 = 0x07;
    /// Catastrophic error, global (operation).
    pub const CATASTROPHIC_GLOBAL: u8 = 0x08;
    /// STag cannot be invalidated (protection and operation).
    pub const CANNOT_INVALIDATE: u8 = 0x09;
    /// Unspecified error.
    pub const UNSPECIFIED: u8 = 0xff;
}

/// DDP error types.
pub mod ddp_etype {
    /// Local catastrophic error.
    pub const LOCAL_CATASTROPHIC: u8 = 0;
    /// Tagged buffer error.
    pub const TAGGED_BUFFER: u8 = 1;
    /// Untagged buffer error.
    pub const UNTAGGED_BUFFER: u8 = 2;
}

/// DDP error codes (tagged `T_`, untagged `U_`).
pub mod ddp_code {
    /// Tagged: invalid STag.
    pub const T_INVALID_STAG: u8 = 0x00;
    /// Tagged: base or bounds violation.
    pub const T_BASE_BOUNDS: u8 = 0x01;
    /// Tagged: STag not associated with the DDP stream.
    pub const T_STAG_NOT_ASSOCIATED: u8 = 0x02;
    /// Tagged: tagged offset wrap.
    pub const T_TO_WRAP: u8 = 0x03;
    /// Tagged: invalid DDP version.
    pub const T_INVALID_VERSION: u8 = 0x04;
    /// Untagged: invalid queue number.
    pub const U_INVALID_QN: u8 = 0x01;
    /// Untagged: invalid MSN, no buffer available.
    pub const U_NO_BUFFER: u8 = 0x02;
    /// Untagged: invalid MSN range.
    pub const U_MSN_RANGE: u8 = 0x03;
    /// Untagged: invalid message offset.
    pub const U_INVALID_MO: u8 = 0x04;
    /// Untagged: DDP message too long for the buffer.
    pub const U_TOO_LONG: u8 = 0x05;
    /// Untagged: invalid DDP version.
    pub const U_INVALID_VERSION: u8 = 0x06;
}

/// MPA (lower layer) error codes; their error type is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LlpCode {
    /// TCP connection closed, terminated or lost (0x01).
    ConnectionLost = 0x01,
    /// MPA CRC error (0x02).
    Crc = 0x02,
    /// Marker and ULPDU length mismatch: the FPDU framing is lost (0x03).
    FpduFraming = 0x03,
    /// Invalid MPA request or reply frame (0x04).
    InvalidRequestReply = 0x04,
    /// Local catastrophic error (0x05, RFC 6581).
    LocalCatastrophic = 0x05,
    /// Insufficient IRD resources (0x06, RFC 6581).
    InsufficientIrd = 0x06,
    /// No matching RTR option (0x07, RFC 6581).
    NoMatchingRtr = 0x07,
}

/// Layer, error type and error code of a Terminate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TermCode {
    /// The layer that reports.
    pub layer: Layer,
    /// Error type (4 bits).
    pub etype: u8,
    /// Error code.
    pub ecode: u8,
}

impl TermCode {
    /// An RDMAP error.
    #[must_use]
    pub const fn rdmap(etype: u8, ecode: u8) -> Self {
        Self {
            layer: Layer::Rdmap,
            etype,
            ecode,
        }
    }

    /// A DDP error.
    #[must_use]
    pub const fn ddp(etype: u8, ecode: u8) -> Self {
        Self {
            layer: Layer::Ddp,
            etype,
            ecode,
        }
    }

    /// An MPA error.
    #[must_use]
    pub const fn llp(code: LlpCode) -> Self {
        Self {
            layer: Layer::Llp,
            etype: 0,
            ecode: code as u8,
        }
    }

    /// Whether the RFCs define this combination (local catastrophic errors
    /// accept any code).
    #[must_use]
    pub const fn is_known(&self) -> bool {
        match (self.layer, self.etype) {
            (Layer::Rdmap | Layer::Ddp, 0) => true,
            (Layer::Rdmap, rdmap_etype::REMOTE_PROTECTION) => {
                matches!(self.ecode, 0x00..=0x04 | 0x09 | 0xff)
            }
            (Layer::Rdmap, rdmap_etype::REMOTE_OPERATION) => {
                matches!(self.ecode, 0x05..=0x09 | 0xff)
            }
            (Layer::Ddp, ddp_etype::TAGGED_BUFFER) => self.ecode <= 0x04,
            (Layer::Ddp, ddp_etype::UNTAGGED_BUFFER) => matches!(self.ecode, 0x01..=0x06),
            (Layer::Llp, 0) => matches!(self.ecode, 0x01..=0x07),
            _ => false,
        }
    }

    /// The status of the request a received Terminate with this code fails.
    /// The other outstanding requests of the QP complete `Cancelled` (E5).
    ///
    /// Chosen to agree with the local engine (`Denied::remote_status`): a
    /// refused token or right is `RemoteAccessError`; a range the region does
    /// not cover, a wrapped offset and every non-protection error is
    /// `RemoteOperationError` (P20), as is an unknown code.
    #[must_use]
    pub const fn completion_status(&self) -> WcStatus {
        match (self.layer, self.etype, self.ecode) {
            (
                Layer::Rdmap,
                rdmap_etype::REMOTE_PROTECTION,
                rdmap_code::INVALID_STAG
                | rdmap_code::ACCESS_RIGHTS
                | rdmap_code::STAG_NOT_ASSOCIATED
                | rdmap_code::UNSPECIFIED,
            )
            | (
                Layer::Ddp,
                ddp_etype::TAGGED_BUFFER,
                ddp_code::T_INVALID_STAG | ddp_code::T_STAG_NOT_ASSOCIATED,
            ) => WcStatus::RemoteAccessError,
            _ => WcStatus::RemoteOperationError,
        }
    }
}

impl fmt::Display for TermCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}/{:#x}/{:#04x}", self.layer, self.etype, self.ecode)
    }
}

/// Why this end terminates a stream, in the RNIC's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalCause {
    /// An incoming Write or Read Response named a sink that did not resolve.
    SinkDenied(Denied),
    /// An incoming Read Request named a source that did not resolve.
    ReadSourceDenied(Denied),
    /// An incoming tagged segment's offset plus length wraps 64 bits.
    SinkOffsetWrap,
    /// An incoming Send with Invalidate named a token that cannot be
    /// invalidated (M24).
    CannotInvalidate,
    /// An incoming Send found no receive posted.
    NoReceive,
    /// An incoming Send is larger than the receive it lands in (E7).
    ReceiveTooSmall,
    /// More incoming Read Requests than the IRD allows.
    IrdExceeded,
    /// This end failed (an internal fault): nothing the peer did.
    Catastrophic,
}

impl LocalCause {
    /// The Terminate code that reports the cause.
    #[must_use]
    pub const fn term_code(self) -> TermCode {
        match self {
            // RFC 5041 has no code for access rights; like siw, report the
            // STag as invalid.
            Self::SinkDenied(Denied::Token | Denied::Rights) => {
                TermCode::ddp(ddp_etype::TAGGED_BUFFER, ddp_code::T_INVALID_STAG)
            }
            Self::SinkDenied(Denied::Range) => {
                TermCode::ddp(ddp_etype::TAGGED_BUFFER, ddp_code::T_BASE_BOUNDS)
            }
            Self::SinkOffsetWrap => TermCode::ddp(ddp_etype::TAGGED_BUFFER, ddp_code::T_TO_WRAP),
            Self::ReadSourceDenied(denied) => TermCode::rdmap(
                rdmap_etype::REMOTE_PROTECTION,
                match denied {
                    Denied::Token => rdmap_code::INVALID_STAG,
                    Denied::Range => rdmap_code::BASE_BOUNDS,
                    Denied::Rights => rdmap_code::ACCESS_RIGHTS,
                },
            ),
            Self::CannotInvalidate => {
                TermCode::rdmap(rdmap_etype::REMOTE_OPERATION, rdmap_code::CANNOT_INVALIDATE)
            }
            Self::NoReceive => TermCode::ddp(ddp_etype::UNTAGGED_BUFFER, ddp_code::U_NO_BUFFER),
            Self::ReceiveTooSmall => {
                TermCode::ddp(ddp_etype::UNTAGGED_BUFFER, ddp_code::U_TOO_LONG)
            }
            Self::IrdExceeded => TermCode::rdmap(
                rdmap_etype::REMOTE_OPERATION,
                rdmap_code::CATASTROPHIC_STREAM,
            ),
            Self::Catastrophic => TermCode::rdmap(rdmap_etype::LOCAL_CATASTROPHIC, 0),
        }
    }
}

/// How the control word's nibbles and header flags are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TermLayout {
    /// RFC 5040: layer in the high nibble of byte 0; M, D, R = 0x80, 0x40,
    /// 0x20 of byte 2. What SoftNDK sends.
    Rfc,
    /// Linux siw: layer in the low nibble; M, D, R = 0x01, 0x02, 0x04.
    Siw,
}

impl TermLayout {
    const fn flag_bits(self) -> (u8, u8, u8) {
        match self {
            Self::Rfc => (0x80, 0x40, 0x20),
            Self::Siw => (0x01, 0x02, 0x04),
        }
    }

    const fn reserved_mask(self) -> u8 {
        match self {
            Self::Rfc => 0x1f,
            Self::Siw => 0xf8,
        }
    }
}

/// What went wrong with a received Terminate. A Terminate is never answered
/// with another: the stream ends either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminateError {
    /// Shorter than its control word or than its flags announce.
    Truncated,
    /// Bytes after what the flags announce.
    TrailingBytes,
    /// A layer other than RDMAP, DDP or MPA.
    BadLayer(u8),
    /// Reserved bits set (in both layouts' flag positions, or the last byte).
    ReservedBits,
    /// R without D: an RDMAP header with no DDP header to say what it is.
    RdmapHeaderWithoutDdp,
    /// The output buffer is too small (building): `needed` bytes.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
    /// A copied header longer than a Terminate can carry (building).
    HeaderTooLong,
}

impl fmt::Display for TerminateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A Terminate payload, parsed or to be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terminate<'a> {
    /// Layer, type and code.
    pub code: TermCode,
    /// The offending segment's DDP length (the M bit) when known.
    pub segment_len: Option<u16>,
    /// The offending DDP header, 14 or 18 bytes (the D bit).
    pub ddp_header: Option<&'a [u8]>,
    /// The offending Read Request's 28-byte RDMAP header (the R bit).
    pub rdmap_header: Option<&'a [u8]>,
}

impl<'a> Terminate<'a> {
    /// A Terminate that copies no header.
    #[must_use]
    pub const fn new(code: TermCode) -> Self {
        Self {
            code,
            segment_len: None,
            ddp_header: None,
            rdmap_header: None,
        }
    }

    /// Bytes of the payload.
    #[must_use]
    pub const fn len(&self) -> usize {
        let headers =
            self.segment_len.is_some() || self.ddp_header.is_some() || self.rdmap_header.is_some();
        CONTROL_LEN
            + if headers { SEGMENT_LEN_LEN } else { 0 }
            + match self.ddp_header {
                Some(h) => h.len(),
                None => 0,
            }
            + match self.rdmap_header {
                Some(h) => h.len(),
                None => 0,
            }
    }

    /// Never true: a Terminate has at least its control word.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The copied DDP header, decoded, when there is one that decodes.
    #[must_use]
    pub fn offending_ddp(&self) -> Option<DdpHeader> {
        DdpHeader::parse(self.ddp_header?).ok().map(|(h, _)| h)
    }

    /// Writes the payload in `layout` and returns its length.
    ///
    /// # Errors
    /// [`TerminateError::BufferTooSmall`]; [`TerminateError::HeaderTooLong`]
    /// when the copied headers exceed [`MAX_TERMINATE_LEN`];
    /// [`TerminateError::RdmapHeaderWithoutDdp`].
    pub fn write(&self, buf: &mut [u8], layout: TermLayout) -> Result<usize, TerminateError> {
        let len = self.len();
        if len > MAX_TERMINATE_LEN {
            return Err(TerminateError::HeaderTooLong);
        }
        if self.rdmap_header.is_some() && self.ddp_header.is_none() {
            return Err(TerminateError::RdmapHeaderWithoutDdp);
        }
        let too_small = TerminateError::BufferTooSmall { needed: len };
        let out = buf.get_mut(..len).ok_or(too_small)?;
        let layer = self.code.layer as u8;
        let etype = self.code.etype & 0x0f;
        let byte0 = match layout {
            TermLayout::Rfc => layer << 4 | etype,
            TermLayout::Siw => etype << 4 | layer,
        };
        let (m, d, r) = layout.flag_bits();
        let mut flags = 0;
        if self.segment_len.is_some() {
            flags |= m;
        }
        if self.ddp_header.is_some() {
            flags |= d;
        }
        if self.rdmap_header.is_some() {
            flags |= r;
        }
        wire::put(out, 0, &[byte0, self.code.ecode, flags, 0]).ok_or(too_small)?;
        if len > CONTROL_LEN {
            wire::put_be16(out, CONTROL_LEN, self.segment_len.unwrap_or_default())
                .ok_or(too_small)?;
            let mut at = CONTROL_LEN + SEGMENT_LEN_LEN;
            for header in [self.ddp_header, self.rdmap_header].into_iter().flatten() {
                wire::put(out, at, header).ok_or(too_small)?;
                at += header.len();
            }
        }
        Ok(len)
    }

    /// Parses a Terminate payload (the bytes after the untagged DDP header).
    /// With `layout` `None` the layout is detected: from the flag bits when
    /// any is set, else from which reading gives a known code (RFC when
    /// both or neither do). Returns the Terminate and the layout used.
    ///
    /// # Errors
    /// [`TerminateError`] for a structure that does not hold together; codes
    /// are kept as received (see [`TermCode::is_known`]).
    pub fn parse(
        bytes: &'a [u8],
        layout: Option<TermLayout>,
    ) -> Result<(Self, TermLayout), TerminateError> {
        let [b0, ecode, flags, b3] =
            wire::array::<CONTROL_LEN>(bytes, 0).ok_or(TerminateError::Truncated)?;
        let layout = match layout {
            Some(layout) => layout,
            None => detect(b0, ecode, flags)?,
        };
        if flags & layout.reserved_mask() != 0 || b3 != 0 {
            return Err(TerminateError::ReservedBits);
        }
        let (layer, etype) = match layout {
            TermLayout::Rfc => (b0 >> 4, b0 & 0x0f),
            TermLayout::Siw => (b0 & 0x0f, b0 >> 4),
        };
        let layer = Layer::from_u8(layer).ok_or(TerminateError::BadLayer(layer))?;
        let code = TermCode {
            layer,
            etype,
            ecode,
        };
        let (m, d, r) = layout.flag_bits();
        let (has_m, has_d, has_r) = (flags & m != 0, flags & d != 0, flags & r != 0);
        let mut term = Self::new(code);
        let rest = bytes.get(CONTROL_LEN..).unwrap_or_default();
        if !(has_m || has_d || has_r) {
            return if rest.is_empty() {
                Ok((term, layout))
            } else {
                Err(TerminateError::TrailingBytes)
            };
        }
        if has_r && !has_d {
            return Err(TerminateError::RdmapHeaderWithoutDdp);
        }
        let (seg, mut rest) = rest
            .split_first_chunk::<SEGMENT_LEN_LEN>()
            .ok_or(TerminateError::Truncated)?;
        if has_m {
            term.segment_len = Some(u16::from_be_bytes(*seg));
        }
        if has_d {
            // The T bit of the copied header says how long it is.
            let first = rest.first().ok_or(TerminateError::Truncated)?;
            let tagged = first & ddp::FLAG_TAGGED != 0;
            let len = if tagged {
                ddp::TAGGED_HEADER_LEN
            } else {
                ddp::UNTAGGED_HEADER_LEN
            };
            let (header, tail) = rest
                .split_at_checked(len)
                .ok_or(TerminateError::Truncated)?;
            term.ddp_header = Some(header);
            rest = tail;
            // Only a Read Request has an RDMAP header beyond the DDP header.
            let read_request = !tagged
                && header
                    .get(1)
                    .is_some_and(|c| c & 0x0f == super::rdmap::Opcode::ReadRequest as u8);
            if has_r && read_request {
                let (header, tail) = rest
                    .split_at_checked(READ_REQUEST_LEN)
                    .ok_or(TerminateError::Truncated)?;
                term.rdmap_header = Some(header);
                rest = tail;
            }
        }
        if !rest.is_empty() {
            return Err(TerminateError::TrailingBytes);
        }
        Ok((term, layout))
    }
}

/// Picks the layout of a received control word.
fn detect(b0: u8, ecode: u8, flags: u8) -> Result<TermLayout, TerminateError> {
    let rfc_flags = flags & 0xe0 != 0;
    let siw_flags = flags & 0x07 != 0;
    match (rfc_flags, siw_flags) {
        (true, true) => Err(TerminateError::ReservedBits),
        (true, false) => Ok(TermLayout::Rfc),
        (false, true) => Ok(TermLayout::Siw),
        (false, false) => {
            let known = |layer: u8, etype: u8| {
                Layer::from_u8(layer).is_some_and(|layer| {
                    TermCode {
                        layer,
                        etype,
                        ecode,
                    }
                    .is_known()
                })
            };
            let rfc = known(b0 >> 4, b0 & 0x0f);
            let siw = known(b0 & 0x0f, b0 >> 4);
            Ok(if siw && !rfc {
                TermLayout::Siw
            } else {
                TermLayout::Rfc
            })
        }
    }
}
