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

numbered! {
    /// The layer that reports an error.
    pub enum Layer {
        /// RDMAP (0).
        Rdmap = 0,
        /// DDP (1).
        Ddp = 1,
        /// The lower layer protocol: MPA (2).
        Llp = 2,
    }

    /// MPA (lower layer) error codes; their error type is 0.
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
            (Layer::Llp, 0) => LlpCode::from_u8(self.ecode).is_some(),
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
    /// The RDMAP header copied (the R bit): a Read Request's 28 bytes, or
    /// empty for a message whose RDMAP header is all in the DDP header.
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
    /// both or neither do). Returns the Terminate and the layout used. The
    /// segment length is kept only when M says it is valid.
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
            if has_r {
                // For other messages the RDMAP header is inside the DDP
                // header: R is kept, with nothing more copied.
                let len = if read_request { READ_REQUEST_LEN } else { 0 };
                let (header, tail) = rest
                    .split_at_checked(len)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rnic::iwarp::ddp::Buffer;
    use crate::rnic::iwarp::mpa::MpaError;
    use crate::rnic::iwarp::rdmap::{Message, ReadRequest};
    use proptest::prelude::*;

    fn written(term: &Terminate<'_>, layout: TermLayout) -> Vec<u8> {
        let mut buf = [0u8; MAX_TERMINATE_LEN];
        let len = term.write(&mut buf, layout).unwrap();
        buf[..len].to_vec()
    }

    /// `numbered!`: RFC 5040 §4.8's layer numbers, nothing else.
    #[test]
    fn layers_are_numbered_as_the_rfc_numbers_them() {
        assert_eq!(Layer::ALL, [Layer::Rdmap, Layer::Ddp, Layer::Llp]);
        for layer in Layer::ALL {
            assert_eq!(Layer::from_u8(layer as u8), Some(layer));
        }
        assert_eq!(Layer::from_u8(3), None);
        assert_eq!(Layer::from_u8(0xff), None);
    }

    /// An MPA error is known exactly for the codes RFC 5044 and RFC 6581
    /// define, 0x01 to 0x07, each an `LlpCode`.
    #[test]
    fn llp_codes_known_are_the_rfcs_codes() {
        assert_eq!(LlpCode::ALL.len(), 7);
        for ecode in 0..=u8::MAX {
            let code = TermCode {
                layer: Layer::Llp,
                etype: 0,
                ecode,
            };
            assert_eq!(
                code.is_known(),
                (0x01..=0x07).contains(&ecode),
                "{ecode:#x}"
            );
            if let Some(llp) = LlpCode::from_u8(ecode) {
                assert_eq!(TermCode::llp(llp), code);
            }
        }
        assert!(
            !TermCode {
                layer: Layer::Llp,
                etype: 1,
                ecode: 0x01
            }
            .is_known()
        );
    }

    #[test]
    fn terminate_without_headers_is_byte_exact() {
        let term = Terminate::new(TermCode::llp(LlpCode::Crc));
        // Layer 2 (high nibble), type 0, code 2, no flags.
        assert_eq!(written(&term, TermLayout::Rfc), [0x20, 0x02, 0, 0]);
        assert_eq!(written(&term, TermLayout::Siw), [0x02, 0x02, 0, 0]);
        assert_eq!(
            Terminate::parse(&[0x20, 0x02, 0, 0], None),
            Ok((term, TermLayout::Rfc))
        );
    }

    #[test]
    fn terminate_with_copied_read_request_round_trips_in_both_layouts() {
        let rreq = Message::ReadRequest {
            msn: 4,
            request: ReadRequest {
                sink_stag: 1,
                sink_to: 2,
                size: 3,
                source_stag: 4,
                source_to: 5,
            },
        };
        let mut offending = [0u8; 46];
        rreq.write_ulpdu(&mut offending).unwrap();
        let term = Terminate {
            code: LocalCause::ReadSourceDenied(Denied::Rights).term_code(),
            segment_len: Some(0),
            ddp_header: Some(&offending[..18]),
            rdmap_header: Some(&offending[18..]),
        };
        let rfc = written(&term, TermLayout::Rfc);
        // Layer 0 / type 1, code 2 (access rights), M | D | R.
        assert_eq!(&rfc[..6], &[0x01, 0x02, 0xe0, 0x00, 0, 0]);
        assert_eq!(rfc.len(), MAX_TERMINATE_LEN);
        let siw = written(&term, TermLayout::Siw);
        assert_eq!(&siw[..4], &[0x10, 0x02, 0x07, 0x00]);
        assert_eq!(Terminate::parse(&rfc, None), Ok((term, TermLayout::Rfc)));
        assert_eq!(Terminate::parse(&siw, None), Ok((term, TermLayout::Siw)));
        let ddp = term.offending_ddp().unwrap();
        assert!(matches!(ddp.buffer, Buffer::Untagged { qn: 1, msn: 4, .. }));
    }

    #[test]
    fn terminate_with_copied_tagged_header() {
        let write = Message::Write {
            stag: 9,
            to: 0,
            last: true,
            payload: &[],
        };
        let mut offending = [0u8; 14];
        write.write_ulpdu(&mut offending).unwrap();
        let term = Terminate {
            code: LocalCause::SinkDenied(Denied::Token).term_code(),
            segment_len: Some(1436),
            ddp_header: Some(&offending),
            rdmap_header: None,
        };
        let bytes = written(&term, TermLayout::Rfc);
        assert_eq!(&bytes[..6], &[0x11, 0x00, 0xc0, 0x00, 0x05, 0x9c]);
        assert_eq!(Terminate::parse(&bytes, None), Ok((term, TermLayout::Rfc)));
    }

    #[test]
    fn r_flag_on_a_send_round_trips_with_an_empty_rdmap_header() {
        let send = Message::rtr(crate::rnic::iwarp::mpa::Rtr::Send, 3);
        let mut offending = [0u8; 18];
        send.write_ulpdu(&mut offending).unwrap();
        // siw's remote protection Terminate for a Send: M | D | R, 18 bytes.
        let mut bytes = vec![0x10, 0x00, 0x07, 0x00, 0x00, 0x00];
        bytes.extend_from_slice(&offending);
        let (term, layout) = Terminate::parse(&bytes, None).unwrap();
        assert_eq!(layout, TermLayout::Siw);
        assert_eq!(term.code, TermCode::rdmap(1, 0));
        assert_eq!(term.rdmap_header, Some(&[][..]));
        assert_eq!(term.segment_len, Some(0));
        assert_eq!(written(&term, TermLayout::Siw), bytes);
    }

    #[test]
    fn terminate_as_a_whole_message() {
        let term = Terminate::new(LocalCause::NoReceive.term_code());
        let message = Message::Terminate {
            msn: 1,
            terminate: term,
        };
        let mut buf = [0u8; 64];
        let len = message.write_ulpdu(&mut buf).unwrap();
        // Untagged, last, DV 1; RDMAP v1 opcode 7; queue 2, MSN 1, MO 0.
        assert_eq!(
            &buf[..len],
            &[
                0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x12, 0x02, 0, 0
            ]
        );
        assert_eq!(Message::parse(&buf[..len], None), Ok(message));
    }

    #[test]
    fn layout_detection_without_flags() {
        // siw's "RDMAP / remote operation / unexpected opcode": byte 0 0x20.
        // Read as RFC it is "MPA / 0 / 6" (insufficient IRD), also known:
        // the RFC reading wins.
        assert_eq!(
            Terminate::parse(&[0x20, 0x06, 0, 0], None).unwrap().1,
            TermLayout::Rfc
        );
        // siw's "DDP / untagged / version" is 0x21; RFC reads layer 2 type 1,
        // unknown, so siw's reading is taken.
        let (term, layout) = Terminate::parse(&[0x21, 0x06, 0, 0], None).unwrap();
        assert_eq!(layout, TermLayout::Siw);
        assert_eq!(term.code, TermCode::ddp(2, 6));
        // With the layout pinned, no guessing.
        let (term, _) = Terminate::parse(&[0x20, 0x06, 0, 0], Some(TermLayout::Siw)).unwrap();
        assert_eq!(term.code, TermCode::rdmap(2, 6));
    }

    #[test]
    fn terminate_rejections() {
        assert_eq!(
            Terminate::parse(&[0x20, 0x02, 0], None),
            Err(TerminateError::Truncated)
        );
        assert_eq!(
            Terminate::parse(&[0x20, 0x02, 0, 0, 0], None),
            Err(TerminateError::TrailingBytes)
        );
        assert_eq!(
            Terminate::parse(&[0x30, 0x02, 0, 0], Some(TermLayout::Rfc)),
            Err(TerminateError::BadLayer(3))
        );
        assert_eq!(
            Terminate::parse(&[0x20, 0x02, 0x81, 0], None),
            Err(TerminateError::ReservedBits)
        );
        assert_eq!(
            Terminate::parse(&[0x20, 0x02, 0x00, 1], None),
            Err(TerminateError::ReservedBits)
        );
        assert_eq!(
            Terminate::parse(&[0x20, 0x02, 0x10, 0], Some(TermLayout::Rfc)),
            Err(TerminateError::ReservedBits)
        );
        // R without D.
        assert_eq!(
            Terminate::parse(&[0x01, 0x02, 0x20, 0, 0, 0], None),
            Err(TerminateError::RdmapHeaderWithoutDdp)
        );
        // D announced, header cut short.
        assert_eq!(
            Terminate::parse(&[0x11, 0x00, 0x40, 0, 0, 0, 0x81, 0x40], None),
            Err(TerminateError::Truncated)
        );
        let no_ddp = Terminate {
            rdmap_header: Some(&[0; 28]),
            ..Terminate::new(TermCode::rdmap(1, 0))
        };
        assert_eq!(
            no_ddp.write(&mut [0u8; 64], TermLayout::Rfc),
            Err(TerminateError::RdmapHeaderWithoutDdp)
        );
        assert_eq!(
            Terminate::new(TermCode::rdmap(0, 0)).write(&mut [0u8; 3], TermLayout::Rfc),
            Err(TerminateError::BufferTooSmall { needed: 4 })
        );
    }

    #[test]
    fn local_causes_map_to_rfc_codes() {
        let code = |c: LocalCause| {
            let t = c.term_code();
            (t.layer, t.etype, t.ecode)
        };
        assert_eq!(
            code(LocalCause::SinkDenied(Denied::Token)),
            (Layer::Ddp, 1, 0)
        );
        assert_eq!(
            code(LocalCause::SinkDenied(Denied::Range)),
            (Layer::Ddp, 1, 1)
        );
        assert_eq!(
            code(LocalCause::SinkDenied(Denied::Rights)),
            (Layer::Ddp, 1, 0)
        );
        assert_eq!(code(LocalCause::SinkOffsetWrap), (Layer::Ddp, 1, 3));
        assert_eq!(
            code(LocalCause::ReadSourceDenied(Denied::Token)),
            (Layer::Rdmap, 1, 0)
        );
        assert_eq!(
            code(LocalCause::ReadSourceDenied(Denied::Range)),
            (Layer::Rdmap, 1, 1)
        );
        assert_eq!(
            code(LocalCause::ReadSourceDenied(Denied::Rights)),
            (Layer::Rdmap, 1, 2)
        );
        assert_eq!(code(LocalCause::CannotInvalidate), (Layer::Rdmap, 2, 9));
        assert_eq!(code(LocalCause::NoReceive), (Layer::Ddp, 2, 2));
        assert_eq!(code(LocalCause::ReceiveTooSmall), (Layer::Ddp, 2, 5));
        assert_eq!(code(LocalCause::IrdExceeded), (Layer::Rdmap, 2, 7));
        assert_eq!(code(LocalCause::Catastrophic), (Layer::Rdmap, 0, 0));
        for cause in [
            LocalCause::SinkDenied(Denied::Token),
            LocalCause::ReadSourceDenied(Denied::Rights),
            LocalCause::CannotInvalidate,
            LocalCause::NoReceive,
            LocalCause::ReceiveTooSmall,
            LocalCause::IrdExceeded,
            LocalCause::Catastrophic,
        ] {
            assert!(cause.term_code().is_known(), "{cause:?}");
        }
    }

    #[test]
    fn received_terminate_status_agrees_with_the_local_engine() {
        // The same denial gives the initiator the same status over the wire
        // as through the local engine (Denied::remote_status, rule P20).
        for denied in [Denied::Token, Denied::Range, Denied::Rights] {
            for cause in [
                LocalCause::SinkDenied(denied),
                LocalCause::ReadSourceDenied(denied),
            ] {
                assert_eq!(
                    cause.term_code().completion_status(),
                    denied.remote_status(),
                    "{cause:?}"
                );
            }
        }
        // E7 and M24: the sender's status is RemoteOperationError.
        for cause in [
            LocalCause::ReceiveTooSmall,
            LocalCause::CannotInvalidate,
            LocalCause::NoReceive,
        ] {
            assert_eq!(
                cause.term_code().completion_status(),
                WcStatus::RemoteOperationError
            );
        }
        assert_eq!(
            TermCode::llp(LlpCode::Crc).completion_status(),
            WcStatus::RemoteOperationError
        );
        assert_eq!(
            TermCode::ddp(ddp_etype::TAGGED_BUFFER, ddp_code::T_STAG_NOT_ASSOCIATED)
                .completion_status(),
            WcStatus::RemoteAccessError
        );
        assert_eq!(
            TermCode::rdmap(9, 9).completion_status(),
            WcStatus::RemoteOperationError
        );
        assert!(!TermCode::rdmap(9, 9).is_known());
        assert_eq!(
            MpaError::UlpduTooLong { len: 2, max: 1 }.term_code(),
            Some(TermCode::llp(LlpCode::FpduFraming))
        );
    }

    #[test]
    fn segment_length_without_m_is_ignored_and_written_back_as_zero() {
        // Found by the property below: D and R set, M clear, and a nonzero
        // segment length that RFC 5040 says is not valid without M.
        let mut bytes = [0u8; 20];
        bytes[2] = 0x60;
        bytes[5] = 1;
        bytes[6] = 0x80;
        let (term, layout) = Terminate::parse(&bytes, None).unwrap();
        assert_eq!(layout, TermLayout::Rfc);
        assert_eq!(term.segment_len, None);
        assert_eq!(
            term.ddp_header.map(<[u8]>::len),
            Some(ddp::TAGGED_HEADER_LEN)
        );
        assert_eq!(term.rdmap_header, Some(&[][..]));
        let mut expected = bytes;
        expected[5] = 0;
        assert_eq!(written(&term, layout), expected);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_terminate_parser(
            bytes in proptest::collection::vec(any::<u8>(), 0..60),
            flags in any::<u8>(),
        ) {
            let _ = Terminate::parse(&bytes, None);
            let _ = Terminate::parse(&bytes, Some(TermLayout::Siw));
            let mut b = bytes.clone();
            if b.len() >= 4 {
                b[2] = flags;
                b[3] = 0;
                if let Ok((term, layout)) = Terminate::parse(&b, None) {
                    // What parses writes back to the same bytes, except a
                    // segment length without M: not valid, so not kept,
                    // and written as zero.
                    let mut expected = b.clone();
                    if term.segment_len.is_none() && b.len() >= CONTROL_LEN + SEGMENT_LEN_LEN {
                        expected[CONTROL_LEN] = 0;
                        expected[CONTROL_LEN + 1] = 0;
                    }
                    let mut out = [0u8; MAX_TERMINATE_LEN];
                    let len = term.write(&mut out, layout).unwrap();
                    prop_assert_eq!(&out[..len], &expected[..]);
                }
            }
        }

        #[test]
        fn codes_round_trip_in_both_layouts(layer in 0u8..3, etype in 0u8..16, ecode in any::<u8>()) {
            let code = TermCode { layer: Layer::from_u8(layer).unwrap(), etype, ecode };
            for layout in [TermLayout::Rfc, TermLayout::Siw] {
                let mut out = [0u8; 4];
                Terminate::new(code).write(&mut out, layout).unwrap();
                let (term, _) = Terminate::parse(&out, Some(layout)).unwrap();
                prop_assert_eq!(term.code, code);
            }
        }
    }
}
