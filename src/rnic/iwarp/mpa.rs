//! MPA (RFC 5044): the connection-setup frames and the framing of DDP
//! segments (FPDUs) on the byte stream, with RFC 6581's enhanced setup.
//!
//! # Request and reply frames (RFC 5044 §7.1, RFC 6581 §7)
//!
//! ```text
//!  0..16  key: "MPA ID Req Frame" or "MPA ID Rep Frame"
//!  16     flags: M 0x80 (markers), C 0x40 (CRC), R 0x20 (reject),
//!         0x10 enhanced (RFC 6581 IRD/ORD block present; the bit Linux
//!         iw_cxgb4 and siw use), 0x0f reserved (sent as 0, not checked)
//!  17     revision: 1, or 2 for RFC 6581
//!  18..20 private data length, big endian (at most 512)
//!  20..   private data; with revision 2 and the enhanced flag its first four
//!         bytes are IRD and ORD, 16 bits each:
//!           IRD word: 0x8000 peer-to-peer, 0x4000 zero-length Send RTR,
//!                     0x3fff IRD
//!           ORD word: 0x8000 zero-length Write RTR,
//!                     0x4000 zero-length Read Request RTR, 0x3fff ORD
//! ```
//!
//! SoftNDK never uses markers: a request that asks for them is answered with a
//! reject frame ([`MpaFrame::reject`]), as siw does.
//!
//! # FPDUs (RFC 5044 §4)
//!
//! ```text
//!  ULPDU length (2 bytes, big endian) | ULPDU | pad to 4 | CRC32c (4 bytes)
//! ```
//!
//! The CRC covers the length field, the ULPDU and the pad, and travels least
//! significant byte first (see [`super::crc`]). Without CRC the field is still
//! there, sent as zero and ignored on receipt. [`Deframer`] cuts FPDUs out of
//! the stream whatever the chunking, into a buffer bounded at construction.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::crc;
use super::terminate::{LlpCode, TermCode};
use super::wire;

/// Key of the request frame.
pub const KEY_REQUEST: [u8; 16] = *b"MPA ID Req Frame";
/// Key of the reply frame.
pub const KEY_REPLY: [u8; 16] = *b"MPA ID Rep Frame";
/// Bytes of a request or reply frame before its private data.
pub const FRAME_HEADER_LEN: usize = 20;
/// Largest private data of a request or reply (RFC 5044 §7.1).
pub const MAX_PRIVATE_DATA: usize = 512;
/// Bytes of the RFC 6581 IRD/ORD block at the start of the private data.
pub const ENHANCED_LEN: usize = 4;
/// Largest IRD or ORD the enhanced block can carry.
pub const MAX_IRD_ORD: u16 = 0x3fff;

/// Flag: markers wanted.
pub const FLAG_MARKERS: u8 = 0x80;
/// Flag: CRC wanted.
pub const FLAG_CRC: u8 = 0x40;
/// Flag (reply): connection rejected.
pub const FLAG_REJECT: u8 = 0x20;
/// Flag: the private data starts with the RFC 6581 IRD/ORD block.
pub const FLAG_ENHANCED: u8 = 0x10;
/// Flag bits that are reserved (sent as zero, not checked).
pub const FLAGS_RESERVED: u8 = 0x0f;

/// Bytes of the ULPDU length field of an FPDU.
pub const FPDU_LENGTH_LEN: usize = 2;
/// Bytes of the CRC field of an FPDU.
pub const FPDU_CRC_LEN: usize = 4;
/// Largest ULPDU the 16-bit length field can announce.
pub const MAX_ULPDU: usize = 0xffff;

const IRD_P2P: u16 = 0x8000;
const IRD_RTR_SEND: u16 = 0x4000;
const ORD_RTR_WRITE: u16 = 0x8000;
const ORD_RTR_READ: u16 = 0x4000;

/// What went wrong with MPA bytes (a peer's, or a frame being built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpaError {
    /// The input ends before the frame does: `needed` bytes in all.
    Truncated {
        /// Bytes the frame needs from its start.
        needed: usize,
    },
    /// The 16-byte key is not the one expected.
    BadKey,
    /// A revision other than 1 or 2.
    BadRevision(u8),
    /// A private data length over [`MAX_PRIVATE_DATA`].
    PrivateDataTooLong(usize),
    /// Revision 2 with the enhanced flag but fewer than 4 bytes of private data.
    EnhancedBlockMissing,
    /// An IRD or ORD over [`MAX_IRD_ORD`] (building).
    IrdOrdOutOfRange,
    /// The peer's request asks for markers, which SoftNDK does not do.
    MarkersRequested,
    /// The peer's reply turns markers on although the request did not.
    UnexpectedMarkers,
    /// The peer's reply rejects the connection.
    Rejected,
    /// The reply picks no RTR kind the request offered, or more than one.
    NoMatchingRtr,
    /// The reply's IRD is below the request's ORD (RFC 6581 §5).
    InsufficientIrd,
    /// An FPDU announces more ULPDU bytes than this end accepts.
    UlpduTooLong {
        /// Announced length.
        len: usize,
        /// Largest accepted.
        max: usize,
    },
    /// An FPDU's CRC does not match its bytes.
    BadCrc {
        /// CRC of the received bytes.
        computed: u32,
        /// CRC the FPDU carries.
        received: u32,
    },
    /// The output buffer cannot hold what is being built: `needed` bytes.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
}

impl MpaError {
    /// The Terminate code that reports this error to the peer (RFC 5044 §8,
    /// RFC 6581 §9), or `None` for what is not the peer's fault (truncated
    /// input waits for more; a small buffer is local) or ends the connection
    /// without a Terminate (a reject).
    #[must_use]
    pub const fn term_code(&self) -> Option<TermCode> {
        let code = match self {
            Self::Truncated { .. } | Self::BufferTooSmall { .. } | Self::Rejected => return None,
            Self::BadKey
            | Self::BadRevision(_)
            | Self::PrivateDataTooLong(_)
            | Self::EnhancedBlockMissing
            | Self::IrdOrdOutOfRange
            | Self::MarkersRequested
            | Self::UnexpectedMarkers => LlpCode::InvalidRequestReply,
            Self::NoMatchingRtr => LlpCode::NoMatchingRtr,
            Self::InsufficientIrd => LlpCode::InsufficientIrd,
            Self::UlpduTooLong { .. } => LlpCode::FpduFraming,
            Self::BadCrc { .. } => LlpCode::Crc,
        };
        Some(TermCode::llp(code))
    }
}

impl fmt::Display for MpaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Which of the two frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// "MPA ID Req Frame", sent by the initiator.
    Request,
    /// "MPA ID Rep Frame", sent by the responder.
    Reply,
}

impl FrameKind {
    /// The frame's key.
    #[must_use]
    pub const fn key(self) -> &'static [u8; 16] {
        match self {
            Self::Request => &KEY_REQUEST,
            Self::Reply => &KEY_REPLY,
        }
    }
}

bitflags::bitflags! {
    /// RFC 6581 ready-to-receive messages: offered (request) or chosen (reply).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct RtrKinds: u8 {
        /// A zero-length Send.
        const SEND = 1 << 0;
        /// A zero-length RDMA Write.
        const WRITE = 1 << 1;
        /// A zero-length RDMA Read Request.
        const READ = 1 << 2;
    }
}

/// One RTR message kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rtr {
    /// A zero-length Send.
    Send,
    /// A zero-length RDMA Write.
    Write,
    /// A zero-length RDMA Read Request.
    Read,
}

impl Rtr {
    /// The flag of this kind.
    #[must_use]
    pub const fn kind(self) -> RtrKinds {
        match self {
            Self::Send => RtrKinds::SEND,
            Self::Write => RtrKinds::WRITE,
            Self::Read => RtrKinds::READ,
        }
    }
}

impl RtrKinds {
    /// The responder's pick among offered kinds: the zero-length Write, else
    /// the zero-length Read, else the zero-length Send (siw's order; a Send
    /// would consume one of the consumer's receives).
    #[must_use]
    pub const fn choose(self) -> Option<Rtr> {
        if self.contains(Self::WRITE) {
            Some(Rtr::Write)
        } else if self.contains(Self::READ) {
            Some(Rtr::Read)
        } else if self.contains(Self::SEND) {
            Some(Rtr::Send)
        } else {
            None
        }
    }

    /// The single kind a reply names, if exactly one bit is set.
    #[must_use]
    pub fn single(self) -> Option<Rtr> {
        [Rtr::Write, Rtr::Read, Rtr::Send]
            .into_iter()
            .find(|rtr| self == rtr.kind())
    }
}

/// The RFC 6581 IRD/ORD block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Enhanced {
    /// Inbound RDMA Read requests the sender can have in flight.
    pub ird: u16,
    /// Outbound RDMA Read requests the sender will have in flight.
    pub ord: u16,
    /// Peer-to-peer mode: an RTR message follows the reply.
    pub peer_to_peer: bool,
    /// The RTR kinds offered (request) or the one chosen (reply).
    pub rtr: RtrKinds,
}

impl Enhanced {
    /// Decodes the four bytes of the block. IRD and ORD are 14-bit fields, so
    /// every value decodes.
    #[must_use]
    pub const fn from_bytes(bytes: [u8; ENHANCED_LEN]) -> Self {
        let [i0, i1, o0, o1] = bytes;
        let ird = u16::from_be_bytes([i0, i1]);
        let ord = u16::from_be_bytes([o0, o1]);
        let mut rtr = RtrKinds::empty();
        if ird & IRD_RTR_SEND != 0 {
            rtr = rtr.union(RtrKinds::SEND);
        }
        if ord & ORD_RTR_WRITE != 0 {
            rtr = rtr.union(RtrKinds::WRITE);
        }
        if ord & ORD_RTR_READ != 0 {
            rtr = rtr.union(RtrKinds::READ);
        }
        Self {
            ird: ird & MAX_IRD_ORD,
            ord: ord & MAX_IRD_ORD,
            peer_to_peer: ird & IRD_P2P != 0,
            rtr,
        }
    }

    /// Encodes the block.
    ///
    /// # Errors
    /// [`MpaError::IrdOrdOutOfRange`] when IRD or ORD exceeds 14 bits.
    pub const fn to_bytes(&self) -> Result<[u8; ENHANCED_LEN], MpaError> {
        if self.ird > MAX_IRD_ORD || self.ord > MAX_IRD_ORD {
            return Err(MpaError::IrdOrdOutOfRange);
        }
        let mut ird = self.ird;
        let mut ord = self.ord;
        if self.peer_to_peer {
            ird |= IRD_P2P;
        }
        if self.rtr.contains(RtrKinds::SEND) {
            ird |= IRD_RTR_SEND;
        }
        if self.rtr.contains(RtrKinds::WRITE) {
            ord |= ORD_RTR_WRITE;
        }
        if self.rtr.contains(RtrKinds::READ) {
            ord |= ORD_RTR_READ;
        }
        let [i0, i1] = ird.to_be_bytes();
        let [o0, o1] = ord.to_be_bytes();
        Ok([i0, i1, o0, o1])
    }
}

/// A request or reply frame, parsed or to be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaFrame<'a> {
    /// Request or reply.
    pub kind: FrameKind,
    /// M: markers.
    pub markers: bool,
    /// C: CRC.
    pub crc: bool,
    /// R: reject (replies).
    pub reject: bool,
    /// 1, or 2 for RFC 6581.
    pub revision: u8,
    /// The IRD/ORD block (revision 2 with the enhanced flag).
    pub enhanced: Option<Enhanced>,
    /// The consumer's private data (after the IRD/ORD block, if any).
    pub private_data: &'a [u8],
    /// Reserved flag bits as received (0 when building). Not checked (RFC
    /// 5044); siw's experimental segmentation bit 0x08 shows up here.
    pub reserved_flags: u8,
}

impl<'a> MpaFrame<'a> {
    /// A revision-2 request with the enhanced block, no markers.
    #[must_use]
    pub const fn request(crc: bool, enhanced: Enhanced, private_data: &'a [u8]) -> Self {
        Self {
            kind: FrameKind::Request,
            markers: false,
            crc,
            reject: false,
            revision: 2,
            enhanced: Some(enhanced),
            private_data,
            reserved_flags: 0,
        }
    }

    /// The reply accepting `request`: its revision, CRC on when the request
    /// asked for it or `want_crc`, the enhanced block when the request had
    /// one. For a peer-to-peer request the reply names the RTR kind
    /// [`RtrKinds::choose`] picks.
    ///
    /// # Errors
    /// [`MpaError::MarkersRequested`] when the request asks for markers (send
    /// [`Self::reject`] instead); [`MpaError::NoMatchingRtr`] when a
    /// peer-to-peer request offers no RTR kind.
    pub fn accept(
        request: &MpaFrame<'_>,
        want_crc: bool,
        ird: u16,
        ord: u16,
        private_data: &'a [u8],
    ) -> Result<Self, MpaError> {
        if request.markers {
            return Err(MpaError::MarkersRequested);
        }
        let enhanced = match request.enhanced {
            Some(offer) => {
                let (peer_to_peer, rtr) = if offer.peer_to_peer {
                    let chosen = offer.rtr.choose().ok_or(MpaError::NoMatchingRtr)?;
                    (true, chosen.kind())
                } else {
                    (false, RtrKinds::empty())
                };
                Some(Enhanced {
                    ird,
                    ord,
                    peer_to_peer,
                    rtr,
                })
            }
            None => None,
        };
        Ok(Self {
            kind: FrameKind::Reply,
            markers: false,
            crc: request.crc || want_crc,
            reject: false,
            revision: request.revision,
            enhanced,
            private_data,
            reserved_flags: 0,
        })
    }

    /// The reply rejecting `request` (R set, no markers, the request's
    /// revision and CRC flag; with the enhanced block, zero IRD/ORD, when the
    /// request had one).
    #[must_use]
    pub fn reject(request: &MpaFrame<'_>, private_data: &'a [u8]) -> Self {
        Self {
            kind: FrameKind::Reply,
            markers: false,
            crc: request.crc,
            reject: true,
            revision: request.revision,
            enhanced: request.enhanced.map(|_| Enhanced::default()),
            private_data,
            reserved_flags: 0,
        }
    }

    /// Bytes of the private data field (IRD/ORD block included).
    #[must_use]
    pub const fn private_data_len(&self) -> usize {
        self.private_data.len()
            + if self.enhanced.is_some() {
                ENHANCED_LEN
            } else {
                0
            }
    }

    /// Bytes of the whole frame.
    #[must_use]
    pub const fn len(&self) -> usize {
        FRAME_HEADER_LEN + self.private_data_len()
    }

    /// Never true: a frame has at least its header.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the frame into `buf` and returns its length.
    ///
    /// # Errors
    /// [`MpaError::BufferTooSmall`]; [`MpaError::PrivateDataTooLong`];
    /// [`MpaError::BadRevision`] for a revision other than 1 or 2, or the
    /// enhanced block with revision 1; [`MpaError::IrdOrdOutOfRange`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, MpaError> {
        if !(1..=2).contains(&self.revision) || (self.enhanced.is_some() && self.revision != 2) {
            return Err(MpaError::BadRevision(self.revision));
        }
        let pd_len = self.private_data_len();
        if pd_len > MAX_PRIVATE_DATA {
            return Err(MpaError::PrivateDataTooLong(pd_len));
        }
        let len = self.len();
        let too_small = MpaError::BufferTooSmall { needed: len };
        let out = buf.get_mut(..len).ok_or(too_small)?;
        let mut flags = 0;
        if self.markers {
            flags |= FLAG_MARKERS;
        }
        if self.crc {
            flags |= FLAG_CRC;
        }
        if self.reject {
            flags |= FLAG_REJECT;
        }
        let mut at = FRAME_HEADER_LEN;
        if let Some(enhanced) = &self.enhanced {
            flags |= FLAG_ENHANCED;
            wire::put(out, at, &enhanced.to_bytes()?).ok_or(too_small)?;
            at += ENHANCED_LEN;
        }
        wire::put(out, 0, self.kind.key()).ok_or(too_small)?;
        wire::put(out, 16, &[flags, self.revision]).ok_or(too_small)?;
        // pd_len <= MAX_PRIVATE_DATA, so it fits 16 bits.
        let pd_len16 = u16::try_from(pd_len).map_err(|_| MpaError::PrivateDataTooLong(pd_len))?;
        wire::put_be16(out, 18, pd_len16).ok_or(too_small)?;
        wire::put(out, at, self.private_data).ok_or(too_small)?;
        Ok(len)
    }

    /// The length of the frame that starts with `bytes`, read from its
    /// header: how many bytes to wait for before [`Self::parse`].
    ///
    /// # Errors
    /// [`MpaError::Truncated`] before the 20 header bytes are in;
    /// [`MpaError::PrivateDataTooLong`] for a lying length.
    pub fn frame_len(bytes: &[u8]) -> Result<usize, MpaError> {
        let truncated = MpaError::Truncated {
            needed: FRAME_HEADER_LEN,
        };
        let pd_len = usize::from(wire::be16(bytes, 18).ok_or(truncated)?);
        if pd_len > MAX_PRIVATE_DATA {
            return Err(MpaError::PrivateDataTooLong(pd_len));
        }
        Ok(FRAME_HEADER_LEN + pd_len)
    }

    /// Parses a `kind` frame at the start of `bytes`; returns it and its
    /// length (the bytes after it are the peer's next data). Checks the key,
    /// the revision, the private data length and the enhanced block; leaves
    /// the negotiation checks to [`Self::check_request`] and
    /// [`Self::check_reply`].
    ///
    /// # Errors
    /// [`MpaError::Truncated`], [`MpaError::BadKey`], [`MpaError::BadRevision`],
    /// [`MpaError::PrivateDataTooLong`], [`MpaError::EnhancedBlockMissing`].
    pub fn parse(bytes: &'a [u8], kind: FrameKind) -> Result<(Self, usize), MpaError> {
        let key: [u8; 16] = wire::array(bytes, 0).ok_or(MpaError::Truncated {
            needed: FRAME_HEADER_LEN,
        })?;
        if &key != kind.key() {
            return Err(MpaError::BadKey);
        }
        let len = Self::frame_len(bytes)?;
        let flags = wire::u8_at(bytes, 16).ok_or(MpaError::Truncated { needed: len })?;
        let revision = wire::u8_at(bytes, 17).ok_or(MpaError::Truncated { needed: len })?;
        if !(1..=2).contains(&revision) {
            return Err(MpaError::BadRevision(revision));
        }
        let pd = bytes
            .get(FRAME_HEADER_LEN..len)
            .ok_or(MpaError::Truncated { needed: len })?;
        let mut reserved_flags = flags & FLAGS_RESERVED;
        let (enhanced, private_data) = if revision == 2 && flags & FLAG_ENHANCED != 0 {
            let (block, rest) = pd
                .split_first_chunk::<ENHANCED_LEN>()
                .ok_or(MpaError::EnhancedBlockMissing)?;
            (Some(Enhanced::from_bytes(*block)), rest)
        } else {
            // Under revision 1 the enhanced bit is one more reserved bit.
            reserved_flags |= flags & FLAG_ENHANCED;
            (None, pd)
        };
        let frame = Self {
            kind,
            markers: flags & FLAG_MARKERS != 0,
            crc: flags & FLAG_CRC != 0,
            reject: flags & FLAG_REJECT != 0,
            revision,
            enhanced,
            private_data,
            reserved_flags,
        };
        Ok((frame, len))
    }

    /// The responder's checks of a parsed request: no markers (answer
    /// [`MpaError::MarkersRequested`] with [`Self::reject`]).
    ///
    /// # Errors
    /// [`MpaError::MarkersRequested`].
    pub const fn check_request(&self) -> Result<(), MpaError> {
        if self.markers {
            return Err(MpaError::MarkersRequested);
        }
        Ok(())
    }

    /// The initiator's checks of a parsed reply to `request`, and what was
    /// agreed.
    ///
    /// # Errors
    /// [`MpaError::Rejected`]; [`MpaError::UnexpectedMarkers`]; a revision
    /// above the request's ([`MpaError::BadRevision`]);
    /// [`MpaError::NoMatchingRtr`] when a peer-to-peer reply does not name
    /// exactly one offered RTR kind; [`MpaError::InsufficientIrd`].
    pub fn check_reply(&self, request: &MpaFrame<'_>) -> Result<Negotiated, MpaError> {
        self.check_reply_with(request, false)
    }

    /// As [`Self::check_reply`]; with `lower_ord` a responder IRD below the
    /// initiator's ORD is no failure: the initiator lowers its ORD to it
    /// (RFC 6581 §4 lets the initiator choose; NDK's read limits need it,
    /// rule N20: effective outbound = min(own outbound, peer's inbound)).
    ///
    /// # Errors
    /// As [`Self::check_reply`].
    pub fn check_reply_with(
        &self,
        request: &MpaFrame<'_>,
        lower_ord: bool,
    ) -> Result<Negotiated, MpaError> {
        if self.reject {
            return Err(MpaError::Rejected);
        }
        if self.markers && !request.markers {
            return Err(MpaError::UnexpectedMarkers);
        }
        if self.revision > request.revision {
            return Err(MpaError::BadRevision(self.revision));
        }
        let mut negotiated = Negotiated {
            crc: self.crc || request.crc,
            ird: None,
            ord: None,
            rtr: None,
        };
        if let (Some(offer), Some(answer)) = (request.enhanced, self.enhanced) {
            if answer.ird < offer.ord && !lower_ord {
                return Err(MpaError::InsufficientIrd);
            }
            if offer.peer_to_peer {
                let chosen = answer.rtr.single().ok_or(MpaError::NoMatchingRtr)?;
                if !offer.rtr.contains(chosen.kind()) {
                    return Err(MpaError::NoMatchingRtr);
                }
                negotiated.rtr = Some(chosen);
            }
            negotiated.ird = Some(offer.ird.min(answer.ord));
            negotiated.ord = Some(offer.ord.min(answer.ird));
        }
        Ok(negotiated)
    }
}

/// What the initiator and the responder agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// CRC on the FPDUs (either side asked).
    pub crc: bool,
    /// The initiator's IRD, bounded by the responder's ORD (enhanced only).
    pub ird: Option<u16>,
    /// The initiator's ORD, bounded by the responder's IRD (enhanced only).
    pub ord: Option<u16>,
    /// The RTR message the initiator sends first (peer-to-peer only).
    pub rtr: Option<Rtr>,
}

/// Pad bytes after a ULPDU of `ulpdu_len` bytes (length field + ULPDU + pad
/// is a multiple of 4).
#[must_use]
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (ulpdu_len + FPDU_LENGTH_LEN) % 4) % 4
}

/// Bytes of the FPDU that carries a ULPDU of `ulpdu_len` bytes.
#[must_use]
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    FPDU_LENGTH_LEN + ulpdu_len + pad_len(ulpdu_len) + FPDU_CRC_LEN
}

/// The largest ULPDU for an effective MSS of `emss` bytes without markers
/// (RFC 5044 §6: `EMSS - (6 + EMSS mod 4)`, where 6 is the length and CRC
/// fields): the largest ULPDU whose FPDU fits one segment. 0 when the MSS is
/// too small to carry any.
#[must_use]
pub const fn mulpdu(emss: u32) -> u32 {
    emss.saturating_sub(6 + emss % 4)
}

/// Frames a ULPDU already written at `buf[2..2 + ulpdu_len]`: writes the
/// length field, the pad and the CRC (zero without CRC), and returns the
/// FPDU's length.
///
/// # Errors
/// [`MpaError::UlpduTooLong`] past [`MAX_ULPDU`]; [`MpaError::BufferTooSmall`].
pub fn seal_fpdu(buf: &mut [u8], ulpdu_len: usize, crc: bool) -> Result<usize, MpaError> {
    let len16 = u16::try_from(ulpdu_len).map_err(|_| MpaError::UlpduTooLong {
        len: ulpdu_len,
        max: MAX_ULPDU,
    })?;
    let total = fpdu_len(ulpdu_len);
    let too_small = MpaError::BufferTooSmall { needed: total };
    let out = buf.get_mut(..total).ok_or(too_small)?;
    wire::put_be16(out, 0, len16).ok_or(too_small)?;
    let covered = total - FPDU_CRC_LEN;
    wire::zero(out, FPDU_LENGTH_LEN + ulpdu_len, pad_len(ulpdu_len)).ok_or(too_small)?;
    let value = if crc {
        out.get(..covered).map_or(0, crc::crc32c)
    } else {
        0
    };
    wire::put(out, covered, &crc::to_wire(value)).ok_or(too_small)?;
    Ok(total)
}

/// Writes the FPDU carrying `ulpdu` into `buf` and returns its length.
///
/// # Errors
/// As [`seal_fpdu`].
pub fn write_fpdu(buf: &mut [u8], ulpdu: &[u8], crc: bool) -> Result<usize, MpaError> {
    let needed = fpdu_len(ulpdu.len());
    wire::put(buf, FPDU_LENGTH_LEN, ulpdu).ok_or(MpaError::BufferTooSmall { needed })?;
    seal_fpdu(buf, ulpdu.len(), crc)
}

/// Parses one complete FPDU at the start of `bytes`: returns its ULPDU and
/// the FPDU's length.
///
/// # Errors
/// [`MpaError::Truncated`]; [`MpaError::UlpduTooLong`] past `max_ulpdu`;
/// [`MpaError::BadCrc`] when `crc` is on and the CRC does not match.
pub fn parse_fpdu(bytes: &[u8], crc: bool, max_ulpdu: usize) -> Result<(&[u8], usize), MpaError> {
    let ulpdu_len = usize::from(wire::be16(bytes, 0).ok_or(MpaError::Truncated {
        needed: FPDU_LENGTH_LEN,
    })?);
    if ulpdu_len > max_ulpdu {
        return Err(MpaError::UlpduTooLong {
            len: ulpdu_len,
            max: max_ulpdu,
        });
    }
    let total = fpdu_len(ulpdu_len);
    let fpdu = bytes
        .get(..total)
        .ok_or(MpaError::Truncated { needed: total })?;
    let covered = total - FPDU_CRC_LEN;
    if crc {
        let computed = fpdu.get(..covered).map_or(0, crc::crc32c);
        let received = wire::array(fpdu, covered).map_or(0, crc::from_wire);
        if computed != received {
            return Err(MpaError::BadCrc { computed, received });
        }
    }
    let ulpdu = fpdu
        .get(FPDU_LENGTH_LEN..FPDU_LENGTH_LEN + ulpdu_len)
        .ok_or(MpaError::Truncated { needed: total })?;
    Ok((ulpdu, total))
}

/// One step of [`Deframer::feed`].
#[derive(Debug, PartialEq, Eq)]
pub struct Step<'a> {
    /// Bytes of the input taken (always all of them unless an FPDU completed).
    pub consumed: usize,
    /// The ULPDU of an FPDU completed by this step (CRC checked).
    pub ulpdu: Option<&'a [u8]>,
}

/// Cuts FPDUs out of a byte stream delivered in chunks of any size.
///
/// The buffer is allocated once, at construction, for the largest FPDU
/// accepted; an FPDU announcing a longer ULPDU is an error, never a larger
/// allocation. An FPDU that arrives whole in one chunk is handed out from the
/// chunk itself, without a copy. After an error the stream has lost its
/// framing: every later call returns the same error.
#[derive(Debug)]
pub struct Deframer {
    buf: Vec<u8>,
    have: usize,
    /// An FPDU handed out from `buf` that the next call drops first.
    delivered: bool,
    max_ulpdu: usize,
    crc: bool,
    failed: Option<MpaError>,
}

impl Deframer {
    /// A de-framer accepting ULPDUs up to `max_ulpdu` bytes (at most
    /// [`MAX_ULPDU`]), checking CRCs when `crc` was negotiated.
    #[must_use]
    pub fn new(max_ulpdu: usize, crc: bool) -> Self {
        let max_ulpdu = max_ulpdu.min(MAX_ULPDU);
        Self::over(vec![0; fpdu_len(max_ulpdu)], max_ulpdu, crc)
    }

    /// As [`Deframer::new`], `None` when memory for its buffer (up to
    /// 64 KiB) is short: what a link is made with, so that running out of
    /// pool fails the connection instead of the allocator's bug check.
    #[must_use]
    pub fn try_new(max_ulpdu: usize, crc: bool) -> Option<Self> {
        let max_ulpdu = max_ulpdu.min(MAX_ULPDU);
        let buf = crate::kernel::mem::try_filled(fpdu_len(max_ulpdu), 0_u8)?;
        Some(Self::over(buf.into_vec(), max_ulpdu, crc))
    }

    fn over(buf: Vec<u8>, max_ulpdu: usize, crc: bool) -> Self {
        Self {
            buf,
            have: 0,
            delivered: false,
            max_ulpdu,
            crc,
            failed: None,
        }
    }

    /// The largest ULPDU accepted.
    #[must_use]
    pub const fn max_ulpdu(&self) -> usize {
        self.max_ulpdu
    }

    /// Bytes of an incomplete FPDU held.
    #[must_use]
    pub const fn pending(&self) -> usize {
        if self.delivered { 0 } else { self.have }
    }

    /// Takes bytes from `input` until one FPDU completes or the input runs
    /// out. Call again with the rest of the input (`input[consumed..]`) until
    /// it is empty; each completed FPDU's ULPDU is valid until the next call.
    ///
    /// # Errors
    /// [`MpaError::UlpduTooLong`] or [`MpaError::BadCrc`], then the same
    /// error for ever.
    pub fn feed<'a>(&'a mut self, input: &'a [u8]) -> Result<Step<'a>, MpaError> {
        if let Some(error) = self.failed {
            return Err(error);
        }
        if self.delivered {
            self.delivered = false;
            self.have = 0;
        }
        if self.have == 0 {
            // Fast path: a whole FPDU at the start of the chunk.
            match parse_fpdu(input, self.crc, self.max_ulpdu) {
                Ok((ulpdu, len)) => {
                    return Ok(Step {
                        consumed: len,
                        ulpdu: Some(ulpdu),
                    });
                }
                Err(MpaError::Truncated { .. }) => {}
                Err(error) => return Err(self.fail(error)),
            }
        }
        // Slow path: gather the length field, then the rest of the FPDU.
        let mut consumed = 0;
        let mut rest = input;
        loop {
            let needed = if self.have < FPDU_LENGTH_LEN {
                FPDU_LENGTH_LEN
            } else {
                let len = usize::from(wire::be16(&self.buf, 0).unwrap_or_default());
                if len > self.max_ulpdu {
                    return Err(self.fail(MpaError::UlpduTooLong {
                        len,
                        max: self.max_ulpdu,
                    }));
                }
                fpdu_len(len)
            };
            if self.have >= needed {
                break;
            }
            let take = (needed - self.have).min(rest.len());
            if take == 0 {
                return Ok(Step {
                    consumed,
                    ulpdu: None,
                });
            }
            let (head, tail) = rest.split_at_checked(take).unwrap_or((rest, &[]));
            if wire::put(&mut self.buf, self.have, head).is_none() {
                // Unreachable: `needed` never exceeds the buffer.
                return Err(self.fail(MpaError::UlpduTooLong {
                    len: self.have + take,
                    max: self.max_ulpdu,
                }));
            }
            self.have += take;
            consumed += take;
            rest = tail;
        }
        let held = self.buf.get(..self.have).unwrap_or_default();
        match parse_fpdu(held, self.crc, self.max_ulpdu) {
            Ok((ulpdu, _)) => {
                self.delivered = true;
                Ok(Step {
                    consumed,
                    ulpdu: Some(ulpdu),
                })
            }
            Err(error) => {
                self.failed = Some(error);
                Err(error)
            }
        }
    }

    fn fail(&mut self, error: MpaError) -> MpaError {
        self.failed = Some(error);
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A frame's bytes laid out by hand from RFC 5044 §7.1.
    fn frame_bytes(key: &[u8; 16], flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
        let mut v = key.to_vec();
        v.push(flags);
        v.push(rev);
        v.extend_from_slice(&u16::try_from(pd.len()).unwrap().to_be_bytes());
        v.extend_from_slice(pd);
        v
    }

    fn written(frame: &MpaFrame<'_>) -> Vec<u8> {
        let mut buf = [0u8; 600];
        let len = frame.write(&mut buf).unwrap();
        buf[..len].to_vec()
    }

    #[test]
    fn request_frame_is_byte_exact() {
        let enhanced = Enhanced {
            ird: 1,
            ord: 1,
            peer_to_peer: false,
            rtr: RtrKinds::empty(),
        };
        let req = MpaFrame::request(false, enhanced, b"hi");
        // "MPA ID Req Frame", flags 0x10 (enhanced), rev 2, PD length 6,
        // IRD 1, ORD 1, "hi": siw's request as initiator, plus user data.
        let expected = frame_bytes(
            b"MPA ID Req Frame",
            0x10,
            2,
            &[0x00, 0x01, 0x00, 0x01, b'h', b'i'],
        );
        assert_eq!(written(&req), expected);
        assert_eq!(&expected[..16], b"MPA ID Req Frame");
        assert_eq!(req.len(), 26);
        let (parsed, len) = MpaFrame::parse(&expected, FrameKind::Request).unwrap();
        assert_eq!((parsed, len), (req, 26));
    }

    #[test]
    fn reply_frame_is_byte_exact() {
        let offer = Enhanced {
            ird: 16,
            ord: 8,
            peer_to_peer: true,
            rtr: RtrKinds::WRITE | RtrKinds::READ,
        };
        let req = MpaFrame::request(true, offer, &[]);
        let rep = MpaFrame::accept(&req, false, 8, 16, b"ok").unwrap();
        // Flags C | enhanced, rev 2, PD 6; IRD word 0x8008 (peer-to-peer,
        // IRD 8), ORD word 0x8010 (Write RTR chosen, ORD 16).
        let expected = frame_bytes(
            b"MPA ID Rep Frame",
            0x40 | 0x10,
            2,
            &[0x80, 0x08, 0x80, 0x10, b'o', b'k'],
        );
        assert_eq!(written(&rep), expected);
        let (parsed, _) = MpaFrame::parse(&expected, FrameKind::Reply).unwrap();
        assert_eq!(parsed, rep);
        let agreed = parsed.check_reply(&req).unwrap();
        assert_eq!(
            agreed,
            Negotiated {
                crc: true,
                ird: Some(16),
                ord: Some(8),
                rtr: Some(Rtr::Write),
            }
        );
    }

    #[test]
    fn markers_request_gets_a_byte_exact_reject() {
        // A revision-1 request with markers and CRC, private data "x".
        let bytes = frame_bytes(b"MPA ID Req Frame", 0x80 | 0x40, 1, b"x");
        let (req, _) = MpaFrame::parse(&bytes, FrameKind::Request).unwrap();
        assert_eq!(req.check_request(), Err(MpaError::MarkersRequested));
        assert_eq!(
            MpaFrame::accept(&req, false, 1, 1, &[]),
            Err(MpaError::MarkersRequested)
        );
        let reject = MpaFrame::reject(&req, &[]);
        // R and C set, no markers, the request's revision, no private data.
        let expected = frame_bytes(b"MPA ID Rep Frame", 0x20 | 0x40, 1, &[]);
        assert_eq!(written(&reject), expected);
        let (parsed, _) = MpaFrame::parse(&expected, FrameKind::Reply).unwrap();
        assert_eq!(parsed.check_reply(&req), Err(MpaError::Rejected));
        assert_eq!(
            MpaError::MarkersRequested.term_code(),
            Some(TermCode::llp(LlpCode::InvalidRequestReply))
        );
    }

    #[test]
    fn enhanced_reject_carries_a_zero_ird_ord_block() {
        let req = MpaFrame::request(false, Enhanced::default(), &[]);
        let reject = MpaFrame::reject(&req, b"no");
        let expected = frame_bytes(
            b"MPA ID Rep Frame",
            0x20 | 0x10,
            2,
            &[0, 0, 0, 0, b'n', b'o'],
        );
        assert_eq!(written(&reject), expected);
    }

    #[test]
    fn enhanced_block_bits() {
        let all = Enhanced {
            ird: MAX_IRD_ORD,
            ord: 5,
            peer_to_peer: true,
            rtr: RtrKinds::all(),
        };
        assert_eq!(all.to_bytes().unwrap(), [0xff, 0xff, 0xc0, 0x05]);
        assert_eq!(Enhanced::from_bytes([0xff, 0xff, 0xc0, 0x05]), all);
        let too_big = Enhanced {
            ird: MAX_IRD_ORD + 1,
            ..Enhanced::default()
        };
        assert_eq!(too_big.to_bytes(), Err(MpaError::IrdOrdOutOfRange));
    }

    #[test]
    fn rtr_choice_prefers_write_then_read_then_send() {
        assert_eq!(RtrKinds::all().choose(), Some(Rtr::Write));
        assert_eq!((RtrKinds::READ | RtrKinds::SEND).choose(), Some(Rtr::Read));
        assert_eq!(RtrKinds::SEND.choose(), Some(Rtr::Send));
        assert_eq!(RtrKinds::empty().choose(), None);
        assert_eq!(RtrKinds::READ.single(), Some(Rtr::Read));
        assert_eq!((RtrKinds::READ | RtrKinds::WRITE).single(), None);
    }

    #[test]
    fn peer_to_peer_without_rtr_is_refused() {
        let offer = Enhanced {
            peer_to_peer: true,
            ..Enhanced::default()
        };
        let req = MpaFrame::request(false, offer, &[]);
        assert_eq!(
            MpaFrame::accept(&req, false, 1, 1, &[]),
            Err(MpaError::NoMatchingRtr)
        );
    }

    #[test]
    fn reply_checks() {
        let offer = Enhanced {
            ird: 4,
            ord: 4,
            peer_to_peer: true,
            rtr: RtrKinds::READ,
        };
        let req = MpaFrame::request(false, offer, &[]);
        let mut rep = MpaFrame::accept(&req, false, 4, 4, &[]).unwrap();
        assert_eq!(rep.check_reply(&req).unwrap().rtr, Some(Rtr::Read));
        rep.enhanced = Some(Enhanced {
            rtr: RtrKinds::WRITE,
            ..rep.enhanced.unwrap()
        });
        assert_eq!(rep.check_reply(&req), Err(MpaError::NoMatchingRtr));
        let mut small = MpaFrame::accept(&req, false, 3, 4, &[]).unwrap();
        assert_eq!(small.check_reply(&req), Err(MpaError::InsufficientIrd));
        small.markers = true;
        assert_eq!(small.check_reply(&req), Err(MpaError::UnexpectedMarkers));
        let v1 = MpaFrame {
            revision: 1,
            enhanced: None,
            ..req
        };
        let rep2 = MpaFrame::accept(&req, false, 4, 4, &[]).unwrap();
        assert_eq!(rep2.check_reply(&v1), Err(MpaError::BadRevision(2)));
    }

    #[test]
    fn frame_rejections() {
        let good = frame_bytes(b"MPA ID Req Frame", 0, 1, b"abc");
        assert_eq!(
            MpaFrame::parse(&good, FrameKind::Reply),
            Err(MpaError::BadKey)
        );
        let mut bad_key = good.clone();
        bad_key[0] = b'm';
        assert_eq!(
            MpaFrame::parse(&bad_key, FrameKind::Request),
            Err(MpaError::BadKey)
        );
        for rev in [0u8, 3, 255] {
            let bytes = frame_bytes(b"MPA ID Req Frame", 0, rev, &[]);
            assert_eq!(
                MpaFrame::parse(&bytes, FrameKind::Request),
                Err(MpaError::BadRevision(rev))
            );
        }
        let mut lying = frame_bytes(b"MPA ID Req Frame", 0, 1, &[]);
        lying[18..20].copy_from_slice(&513u16.to_be_bytes());
        assert_eq!(
            MpaFrame::parse(&lying, FrameKind::Request),
            Err(MpaError::PrivateDataTooLong(513))
        );
        assert_eq!(
            MpaFrame::parse(&good[..22], FrameKind::Request),
            Err(MpaError::Truncated { needed: 23 })
        );
        assert_eq!(
            MpaFrame::parse(&good[..10], FrameKind::Request),
            Err(MpaError::Truncated { needed: 20 })
        );
        assert_eq!(MpaFrame::frame_len(&good), Ok(23));
        let short_block = frame_bytes(b"MPA ID Req Frame", FLAG_ENHANCED, 2, &[0, 1]);
        assert_eq!(
            MpaFrame::parse(&short_block, FrameKind::Request),
            Err(MpaError::EnhancedBlockMissing)
        );
    }

    #[test]
    fn reserved_flags_are_reported_not_refused() {
        // Revision 1 with the enhanced bit and siw's 0x08: both reserved there.
        let bytes = frame_bytes(b"MPA ID Req Frame", 0x10 | 0x08 | 0x01, 1, b"pd");
        let (frame, _) = MpaFrame::parse(&bytes, FrameKind::Request).unwrap();
        assert_eq!(frame.reserved_flags, 0x19);
        assert_eq!(frame.enhanced, None);
        assert_eq!(frame.private_data, b"pd");
    }

    #[test]
    fn builder_refusals() {
        let big = [0u8; MAX_PRIVATE_DATA - ENHANCED_LEN + 1];
        let req = MpaFrame::request(false, Enhanced::default(), &big);
        assert_eq!(
            req.write(&mut [0u8; 1024]),
            Err(MpaError::PrivateDataTooLong(MAX_PRIVATE_DATA + 1))
        );
        let req = MpaFrame::request(false, Enhanced::default(), &[]);
        assert_eq!(
            req.write(&mut [0u8; 23]),
            Err(MpaError::BufferTooSmall { needed: 24 })
        );
        let v1_enhanced = MpaFrame { revision: 1, ..req };
        assert_eq!(
            v1_enhanced.write(&mut [0u8; 64]),
            Err(MpaError::BadRevision(1))
        );
    }

    #[test]
    fn mulpdu_of_ethernet_mss() {
        // 1500-byte MTU: MSS 1460, MULPDU 1454 (what siw accepts).
        assert_eq!(mulpdu(1460), 1454);
        assert_eq!(mulpdu(1461), 1454);
        assert_eq!(mulpdu(1463), 1454);
        assert_eq!(mulpdu(8960), 8954);
        assert_eq!(mulpdu(4), 0);
        // The FPDU of the largest ULPDU fits the segment.
        for emss in 8..4000u32 {
            let m = mulpdu(emss) as usize;
            assert!(fpdu_len(m) <= emss as usize, "emss {emss}");
            assert!(fpdu_len(m + 1) > emss as usize, "emss {emss}");
        }
    }

    #[test]
    fn fpdu_is_byte_exact() {
        let mut buf = [0u8; 32];
        let len = write_fpdu(&mut buf, &[1, 2, 3], true).unwrap();
        // Length 3, three bytes, pad 3 to reach 8, CRC over those 8 bytes.
        assert_eq!(len, 12);
        assert_eq!(&buf[..8], &[0, 3, 1, 2, 3, 0, 0, 0]);
        let crc = crc::crc32c(&buf[..8]);
        assert_eq!(&buf[8..12], &crc.to_le_bytes());
        let len = write_fpdu(&mut buf, &[9, 9], false).unwrap();
        assert_eq!(&buf[..len], &[0, 2, 9, 9, 0, 0, 0, 0]);
        assert_eq!(pad_len(2), 0);
        assert_eq!(pad_len(0), 2);
        assert_eq!(
            write_fpdu(&mut buf, &[0; 30], false),
            Err(MpaError::BufferTooSmall { needed: 36 })
        );
    }

    fn fpdus(payloads: &[Vec<u8>], crc: bool) -> Vec<u8> {
        let mut stream = Vec::new();
        for p in payloads {
            let mut buf = vec![0u8; fpdu_len(p.len())];
            let len = write_fpdu(&mut buf, p, crc).unwrap();
            stream.extend_from_slice(&buf[..len]);
        }
        stream
    }

    /// Feeds `stream` in the given chunk sizes (cycled) and collects ULPDUs.
    fn deframe(
        d: &mut Deframer,
        stream: &[u8],
        chunks: &[usize],
    ) -> Result<Vec<Vec<u8>>, MpaError> {
        let mut out = Vec::new();
        let mut rest = stream;
        let mut sizes = chunks.iter().copied().cycle();
        while !rest.is_empty() {
            let n = sizes.next().unwrap_or(1).clamp(1, rest.len());
            let (mut chunk, tail) = rest.split_at(n);
            rest = tail;
            while !chunk.is_empty() {
                let step = d.feed(chunk)?;
                if let Some(u) = step.ulpdu {
                    out.push(u.to_vec());
                }
                chunk = &chunk[step.consumed..];
            }
        }
        Ok(out)
    }

    #[test]
    fn deframer_one_byte_at_a_time() {
        let payloads: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; usize::from(i) * 7]).collect();
        let stream = fpdus(&payloads, true);
        let mut d = Deframer::new(200, true);
        assert_eq!(deframe(&mut d, &stream, &[1]).unwrap(), payloads);
        assert_eq!(d.pending(), 0);
        let mut whole = Deframer::new(200, true);
        assert_eq!(
            deframe(&mut whole, &stream, &[stream.len()]).unwrap(),
            payloads
        );
    }

    #[test]
    fn deframer_made_fallibly_deframes_and_refuses_as_the_other() {
        let payloads: Vec<Vec<u8>> = (1..6u8).map(|i| vec![i; usize::from(i) * 11]).collect();
        let stream = fpdus(&payloads, true);
        let mut d = Deframer::try_new(200, true).expect("memory for 206 bytes");
        assert_eq!(d.max_ulpdu(), 200);
        assert_eq!(deframe(&mut d, &stream, &[3]).unwrap(), payloads);
        // Its buffer is as large as the largest FPDU it takes, no larger.
        let mut small = Deframer::try_new(54, true).unwrap();
        assert_eq!(
            deframe(&mut small, &stream, &[stream.len()]),
            Err(MpaError::UlpduTooLong { len: 55, max: 54 })
        );
        // Capped at the 16-bit length field's largest ULPDU.
        assert_eq!(
            Deframer::try_new(usize::MAX, false).unwrap().max_ulpdu(),
            MAX_ULPDU
        );
    }

    #[test]
    fn deframer_reports_bad_crc_and_stays_failed() {
        let stream = fpdus(&[vec![5; 10], vec![6; 10]], true);
        let mut broken = stream.clone();
        broken[4] ^= 1;
        for chunk in [1, 3, broken.len()] {
            let mut d = Deframer::new(100, true);
            let err = deframe(&mut d, &broken, &[chunk]).unwrap_err();
            assert!(matches!(err, MpaError::BadCrc { .. }), "{err:?}");
            assert_eq!(d.feed(&stream), Err(err));
            assert_eq!(err.term_code(), Some(TermCode::llp(LlpCode::Crc)));
        }
        // Without CRC negotiated the field is not checked.
        let mut d = Deframer::new(100, false);
        assert_eq!(deframe(&mut d, &broken, &[7]).unwrap().len(), 2);
    }

    #[test]
    fn deframer_refuses_an_oversized_fpdu_without_growing() {
        let stream = fpdus(&[vec![1; 64]], false);
        for chunk in [1, 5, stream.len()] {
            let mut d = Deframer::new(63, false);
            assert_eq!(
                deframe(&mut d, &stream, &[chunk]),
                Err(MpaError::UlpduTooLong { len: 64, max: 63 })
            );
            assert_eq!(d.buf.len(), fpdu_len(63));
        }
    }

    #[test]
    fn deframer_holds_a_truncated_fpdu() {
        let stream = fpdus(&[vec![1; 40]], true);
        let mut d = Deframer::new(100, true);
        let step = d.feed(&stream[..stream.len() - 1]).unwrap();
        assert_eq!(step.consumed, stream.len() - 1);
        assert_eq!(step.ulpdu, None);
        assert_eq!(d.pending(), stream.len() - 1);
        let step = d.feed(&stream[stream.len() - 1..]).unwrap();
        assert_eq!(step.ulpdu, Some(&[1u8; 40][..]));
        assert_eq!(
            parse_fpdu(&stream[..10], true, 100),
            Err(MpaError::Truncated {
                needed: stream.len()
            })
        );
        assert_eq!(
            parse_fpdu(&stream[..1], true, 100),
            Err(MpaError::Truncated { needed: 2 })
        );
    }

    proptest! {
        #[test]
        fn deframer_random_chunks_yield_the_same_fpdus(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..12),
            chunks in proptest::collection::vec(1usize..400, 1..20),
            crc in any::<bool>(),
        ) {
            let stream = fpdus(&payloads, crc);
            let mut d = Deframer::new(300, crc);
            prop_assert_eq!(deframe(&mut d, &stream, &chunks).unwrap(), payloads.clone());
            let mut one = Deframer::new(300, crc);
            prop_assert_eq!(deframe(&mut one, &stream, &[1]).unwrap(), payloads);
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_mpa_parsers(
            bytes in proptest::collection::vec(any::<u8>(), 0..700),
            chunks in proptest::collection::vec(1usize..64, 1..8),
            max in 0usize..70_000,
        ) {
            let _ = MpaFrame::parse(&bytes, FrameKind::Request);
            let _ = MpaFrame::parse(&bytes, FrameKind::Reply);
            let _ = MpaFrame::frame_len(&bytes);
            let _ = parse_fpdu(&bytes, true, max);
            let _ = parse_fpdu(&bytes, false, max);
            let mut d = Deframer::new(max, true);
            let _ = deframe(&mut d, &bytes, &chunks);
        }

        #[test]
        fn arbitrary_frames_round_trip(
            key_rep in any::<bool>(), markers in any::<bool>(), crc in any::<bool>(),
            reject in any::<bool>(), enhanced in proptest::option::of((0u16..=MAX_IRD_ORD, 0u16..=MAX_IRD_ORD, any::<bool>(), 0u8..8)),
            pd in proptest::collection::vec(any::<u8>(), 0..=508),
        ) {
            let frame = MpaFrame {
                kind: if key_rep { FrameKind::Reply } else { FrameKind::Request },
                markers, crc, reject,
                revision: if enhanced.is_some() { 2 } else { 1 },
                enhanced: enhanced.map(|(ird, ord, peer_to_peer, rtr)| Enhanced {
                    ird, ord, peer_to_peer, rtr: RtrKinds::from_bits_truncate(rtr),
                }),
                private_data: &pd,
                reserved_flags: 0,
            };
            let mut buf = [0u8; 600];
            let len = frame.write(&mut buf).unwrap();
            prop_assert_eq!(MpaFrame::parse(&buf[..len], frame.kind).unwrap(), (frame, len));
        }
    }
}
