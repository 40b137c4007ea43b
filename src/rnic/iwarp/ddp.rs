//! DDP (RFC 5041): segment headers and the bookkeeping of untagged messages.
//!
//! ```text
//!  byte 0   T 0x80 (tagged), L 0x40 (last segment), 0x3c reserved,
//!           DV 0x03 (DDP version, 1)
//!  byte 1   RsvdULP: the RDMAP control byte (see `rdmap`)
//!  tagged:    2..6 STag, 6..14 tagged offset               (14 bytes)
//!  untagged:  2..6 RsvdULP (RDMAP: Invalidate STag or 0),
//!             6..10 queue number, 10..14 MSN, 14..18 MO     (18 bytes)
//! ```
//!
//! Reserved bits must be zero: RFC 5041 asks senders for zero, and SoftNDK
//! refuses a header that sets them rather than guess what it means.
//!
//! Over MPA/TCP segments arrive in order, so [`UntaggedQueue`] insists on the
//! next MSN and the next message offset of each queue.

use core::fmt;

use super::terminate::{TermCode, ddp_code, ddp_etype};
use super::wire;

/// The DDP version (DV).
pub const DDP_VERSION: u8 = 1;
/// Bytes of a tagged header.
pub const TAGGED_HEADER_LEN: usize = 14;
/// Bytes of an untagged header.
pub const UNTAGGED_HEADER_LEN: usize = 18;
/// T: tagged buffer model.
pub const FLAG_TAGGED: u8 = 0x80;
/// L: last segment of the message.
pub const FLAG_LAST: u8 = 0x40;
/// Reserved bits of byte 0.
pub const RESERVED_MASK: u8 = 0x3c;
/// DV bits of byte 0.
pub const VERSION_MASK: u8 = 0x03;

/// What went wrong with a DDP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DdpError {
    /// Shorter than its header.
    Truncated {
        /// Bytes the header needs.
        needed: usize,
    },
    /// A DDP version other than 1.
    BadVersion {
        /// Version received.
        version: u8,
        /// Whether the segment was tagged.
        tagged: bool,
    },
    /// Reserved bits of the control byte set.
    ReservedBits,
    /// An untagged segment for a queue that does not exist.
    InvalidQueue(u32),
    /// An untagged segment whose MSN is not the next of its queue.
    MsnMismatch {
        /// MSN expected.
        expected: u32,
        /// MSN received.
        received: u32,
    },
    /// An untagged segment whose offset is not where the message stands.
    MoMismatch {
        /// Offset expected.
        expected: u32,
        /// Offset received.
        received: u32,
    },
    /// An untagged message longer than its buffer.
    MessageTooLong {
        /// Bytes the message reaches so far.
        len: u64,
        /// Bytes of the buffer.
        buffer: u32,
    },
    /// No buffer for the message (the caller's receive queue is empty).
    NoBuffer,
    /// A tagged segment whose offset plus length wraps 64 bits.
    OffsetWrap,
    /// The output buffer is too small (building): `needed` bytes.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
}

impl DdpError {
    /// The Terminate code that reports this error (RFC 5041 §7.2), or `None`
    /// when it is not the peer's fault.
    #[must_use]
    pub const fn term_code(&self) -> Option<TermCode> {
        let (etype, ecode) = match self {
            Self::BufferTooSmall { .. } => return None,
            // A segment too short to hold its header, or with reserved bits,
            // is not a buffer error: the stream is broken.
            Self::Truncated { .. } | Self::ReservedBits => (ddp_etype::LOCAL_CATASTROPHIC, 0),
            Self::BadVersion { tagged: true, .. } => {
                (ddp_etype::TAGGED_BUFFER, ddp_code::T_INVALID_VERSION)
            }
            Self::BadVersion { tagged: false, .. } => {
                (ddp_etype::UNTAGGED_BUFFER, ddp_code::U_INVALID_VERSION)
            }
            Self::OffsetWrap => (ddp_etype::TAGGED_BUFFER, ddp_code::T_TO_WRAP),
            Self::InvalidQueue(_) => (ddp_etype::UNTAGGED_BUFFER, ddp_code::U_INVALID_QN),
            Self::MsnMismatch { .. } => (ddp_etype::UNTAGGED_BUFFER, ddp_code::U_MSN_RANGE),
            Self::MoMismatch { .. } => (ddp_etype::UNTAGGED_BUFFER, ddp_code::U_INVALID_MO),
            Self::MessageTooLong { .. } => (ddp_etype::UNTAGGED_BUFFER, ddp_code::U_TOO_LONG),
            Self::NoBuffer => (ddp_etype::UNTAGGED_BUFFER, ddp_code::U_NO_BUFFER),
        };
        Some(TermCode::ddp(etype, ecode))
    }
}

impl fmt::Display for DdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The buffer model of a segment and its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buffer {
    /// Tagged: placed at an offset of a buffer the STag names.
    Tagged {
        /// Steering tag of the sink.
        stag: u32,
        /// Tagged offset of the segment's first byte.
        to: u64,
    },
    /// Untagged: placed in the next buffer of a queue.
    Untagged {
        /// The ULP's 32 bits (RDMAP: the Invalidate STag, or 0).
        ulp: u32,
        /// Queue number.
        qn: u32,
        /// Message sequence number (from 1 per queue).
        msn: u32,
        /// Message offset of the segment's first byte.
        mo: u32,
    },
}

/// A DDP segment header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DdpHeader {
    /// L: the message's last segment.
    pub last: bool,
    /// The ULP's control byte (RDMAP's version and opcode).
    pub ulp_ctrl: u8,
    /// Buffer model and its fields.
    pub buffer: Buffer,
}

impl DdpHeader {
    /// Bytes of the header.
    #[must_use]
    pub const fn len(&self) -> usize {
        match self.buffer {
            Buffer::Tagged { .. } => TAGGED_HEADER_LEN,
            Buffer::Untagged { .. } => UNTAGGED_HEADER_LEN,
        }
    }

    /// Never true.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Whether the segment is tagged.
    #[must_use]
    pub const fn is_tagged(&self) -> bool {
        matches!(self.buffer, Buffer::Tagged { .. })
    }

    /// Parses the header at the start of a ULPDU; returns it and the payload.
    ///
    /// # Errors
    /// [`DdpError::Truncated`], [`DdpError::BadVersion`],
    /// [`DdpError::ReservedBits`].
    pub fn parse(ulpdu: &[u8]) -> Result<(Self, &[u8]), DdpError> {
        let [ctrl, ulp_ctrl] = wire::array(ulpdu, 0).ok_or(DdpError::Truncated {
            needed: TAGGED_HEADER_LEN,
        })?;
        let tagged = ctrl & FLAG_TAGGED != 0;
        let version = ctrl & VERSION_MASK;
        if version != DDP_VERSION {
            return Err(DdpError::BadVersion { version, tagged });
        }
        if ctrl & RESERVED_MASK != 0 {
            return Err(DdpError::ReservedBits);
        }
        let len = if tagged {
            TAGGED_HEADER_LEN
        } else {
            UNTAGGED_HEADER_LEN
        };
        let (header, payload) = ulpdu
            .split_at_checked(len)
            .ok_or(DdpError::Truncated { needed: len })?;
        let truncated = DdpError::Truncated { needed: len };
        let buffer = if tagged {
            Buffer::Tagged {
                stag: wire::be32(header, 2).ok_or(truncated)?,
                to: wire::be64(header, 6).ok_or(truncated)?,
            }
        } else {
            Buffer::Untagged {
                ulp: wire::be32(header, 2).ok_or(truncated)?,
                qn: wire::be32(header, 6).ok_or(truncated)?,
                msn: wire::be32(header, 10).ok_or(truncated)?,
                mo: wire::be32(header, 14).ok_or(truncated)?,
            }
        };
        let header = Self {
            last: ctrl & FLAG_LAST != 0,
            ulp_ctrl,
            buffer,
        };
        Ok((header, payload))
    }

    /// Writes the header (version 1, reserved bits zero) and returns its
    /// length.
    ///
    /// # Errors
    /// [`DdpError::BufferTooSmall`].
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, DdpError> {
        let len = self.len();
        let too_small = DdpError::BufferTooSmall { needed: len };
        let out = buf.get_mut(..len).ok_or(too_small)?;
        let mut ctrl = DDP_VERSION;
        if self.last {
            ctrl |= FLAG_LAST;
        }
        match self.buffer {
            Buffer::Tagged { stag, to } => {
                ctrl |= FLAG_TAGGED;
                wire::put_be32(out, 2, stag).ok_or(too_small)?;
                wire::put_be64(out, 6, to).ok_or(too_small)?;
            }
            Buffer::Untagged { ulp, qn, msn, mo } => {
                wire::put_be32(out, 2, ulp).ok_or(too_small)?;
                wire::put_be32(out, 6, qn).ok_or(too_small)?;
                wire::put_be32(out, 10, msn).ok_or(too_small)?;
                wire::put_be32(out, 14, mo).ok_or(too_small)?;
            }
        }
        wire::put(out, 0, &[ctrl, self.ulp_ctrl]).ok_or(too_small)?;
        Ok(len)
    }
}

/// The tagged offset just past a tagged segment of `len` bytes at `to`.
///
/// # Errors
/// [`DdpError::OffsetWrap`] when it wraps 64 bits.
pub fn tagged_end(to: u64, len: usize) -> Result<u64, DdpError> {
    u64::try_from(len)
        .ok()
        .and_then(|len| to.checked_add(len))
        .ok_or(DdpError::OffsetWrap)
}

/// Where an accepted untagged segment goes in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The message's MSN.
    pub msn: u32,
    /// Offset of the segment's first byte in the message's buffer.
    pub offset: u32,
    /// Whether this is the message's first segment (a new buffer is taken).
    pub first: bool,
    /// Whether the message is complete with this segment.
    pub last: bool,
    /// The message's length so far (its total length when `last`).
    pub message_len: u32,
}

/// Reassembly state of one untagged queue: the next MSN (the first is 1) and
/// the offset the message in progress has reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntaggedQueue {
    next_msn: u32,
    next_mo: u32,
}

impl Default for UntaggedQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl UntaggedQueue {
    /// A queue expecting MSN 1 at offset 0.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            next_msn: 1,
            next_mo: 0,
        }
    }

    /// The MSN the next segment must carry.
    #[must_use]
    pub const fn next_msn(&self) -> u32 {
        self.next_msn
    }

    /// Whether a message is partly received.
    #[must_use]
    pub const fn in_message(&self) -> bool {
        self.next_mo != 0
    }

    /// Accepts a segment of `len` payload bytes at `msn`/`mo` into a buffer
    /// of `buffer_len` bytes. Nothing changes on error.
    ///
    /// # Errors
    /// [`DdpError::MsnMismatch`], [`DdpError::MoMismatch`],
    /// [`DdpError::MessageTooLong`].
    pub fn accept(
        &mut self,
        msn: u32,
        mo: u32,
        len: usize,
        last: bool,
        buffer_len: u32,
    ) -> Result<Placement, DdpError> {
        if msn != self.next_msn {
            return Err(DdpError::MsnMismatch {
                expected: self.next_msn,
                received: msn,
            });
        }
        if mo != self.next_mo {
            return Err(DdpError::MoMismatch {
                expected: self.next_mo,
                received: mo,
            });
        }
        let end = u64::from(mo).saturating_add(u64::try_from(len).unwrap_or(u64::MAX));
        let message_len = u32::try_from(end)
            .ok()
            .filter(|&end| end <= buffer_len)
            .ok_or(DdpError::MessageTooLong {
                len: end,
                buffer: buffer_len,
            })?;
        if last {
            self.next_msn = self.next_msn.wrapping_add(1);
            self.next_mo = 0;
        } else {
            self.next_mo = message_len;
        }
        Ok(Placement {
            msn,
            offset: mo,
            first: mo == 0,
            last,
            message_len,
        })
    }

    /// Takes the next MSN for an outgoing message (the sending side's
    /// counter, also from 1).
    pub const fn take_msn(&mut self) -> u32 {
        let msn = self.next_msn;
        self.next_msn = self.next_msn.wrapping_add(1);
        msn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tagged_header_is_byte_exact_and_round_trips() {
        let header = DdpHeader {
            last: true,
            ulp_ctrl: 0x40,
            buffer: Buffer::Tagged {
                stag: 0x1122_3344,
                to: 0x0102_0304_0506_0708,
            },
        };
        let mut buf = [0u8; 14];
        assert_eq!(header.write(&mut buf), Ok(14));
        // T | L | DV 1, RDMAP control, STag, TO.
        assert_eq!(
            buf,
            [0xc1, 0x40, 0x11, 0x22, 0x33, 0x44, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        let mut segment = buf.to_vec();
        segment.extend_from_slice(b"data");
        assert_eq!(DdpHeader::parse(&segment), Ok((header, &b"data"[..])));
    }

    #[test]
    fn untagged_header_is_byte_exact_and_round_trips() {
        let header = DdpHeader {
            last: false,
            ulp_ctrl: 0x43,
            buffer: Buffer::Untagged {
                ulp: 0xdead_beef,
                qn: 0,
                msn: 1,
                mo: 0x100,
            },
        };
        let mut buf = [0u8; 18];
        assert_eq!(header.write(&mut buf), Ok(18));
        assert_eq!(
            buf,
            [
                0x01, 0x43, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0
            ]
        );
        assert_eq!(DdpHeader::parse(&buf), Ok((header, &[][..])));
        assert_eq!(
            header.write(&mut [0u8; 17]),
            Err(DdpError::BufferTooSmall { needed: 18 })
        );
    }

    #[test]
    fn header_rejections() {
        let mut tagged = [0u8; 14];
        tagged[0] = 0x80 | 0x02;
        assert_eq!(
            DdpHeader::parse(&tagged),
            Err(DdpError::BadVersion {
                version: 2,
                tagged: true
            })
        );
        assert_eq!(
            DdpHeader::parse(&[0x00; 18]),
            Err(DdpError::BadVersion {
                version: 0,
                tagged: false
            })
        );
        for bit in [0x04u8, 0x08, 0x10, 0x20] {
            assert_eq!(
                DdpHeader::parse(&[0x01 | bit; 18]),
                Err(DdpError::ReservedBits),
                "bit {bit:#x}"
            );
        }
        assert_eq!(
            DdpHeader::parse(&[0x01, 0x43, 0, 0]),
            Err(DdpError::Truncated { needed: 18 })
        );
        assert_eq!(
            DdpHeader::parse(&[0x81, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(DdpError::Truncated { needed: 14 })
        );
        assert_eq!(
            DdpHeader::parse(&[0x81]),
            Err(DdpError::Truncated { needed: 14 })
        );
        assert_eq!(
            DdpHeader::parse(&[]),
            Err(DdpError::Truncated { needed: 14 })
        );
    }

    #[test]
    fn error_term_codes() {
        use crate::rnic::iwarp::terminate::Layer;
        let code = |e: DdpError| e.term_code().map(|c| (c.layer, c.etype, c.ecode));
        assert_eq!(
            code(DdpError::BadVersion {
                version: 0,
                tagged: true
            }),
            Some((Layer::Ddp, 1, 4))
        );
        assert_eq!(
            code(DdpError::BadVersion {
                version: 0,
                tagged: false
            }),
            Some((Layer::Ddp, 2, 6))
        );
        assert_eq!(code(DdpError::InvalidQueue(3)), Some((Layer::Ddp, 2, 1)));
        assert_eq!(code(DdpError::NoBuffer), Some((Layer::Ddp, 2, 2)));
        assert_eq!(
            code(DdpError::MsnMismatch {
                expected: 1,
                received: 2
            }),
            Some((Layer::Ddp, 2, 3))
        );
        assert_eq!(
            code(DdpError::MoMismatch {
                expected: 0,
                received: 2
            }),
            Some((Layer::Ddp, 2, 4))
        );
        assert_eq!(
            code(DdpError::MessageTooLong { len: 9, buffer: 8 }),
            Some((Layer::Ddp, 2, 5))
        );
        assert_eq!(code(DdpError::OffsetWrap), Some((Layer::Ddp, 1, 3)));
        assert_eq!(code(DdpError::BufferTooSmall { needed: 1 }), None);
    }

    #[test]
    fn untagged_reassembly_in_order() {
        let mut q = UntaggedQueue::new();
        assert_eq!(q.next_msn(), 1);
        let p = q.accept(1, 0, 100, false, 250).unwrap();
        assert!(p.first && !p.last);
        assert!(q.in_message());
        let p = q.accept(1, 100, 100, false, 250).unwrap();
        assert_eq!((p.offset, p.message_len, p.first), (100, 200, false));
        let p = q.accept(1, 200, 50, true, 250).unwrap();
        assert_eq!((p.message_len, p.last), (250, true));
        assert_eq!(q.next_msn(), 2);
        assert!(!q.in_message());
        let p = q.accept(2, 0, 0, true, 0).unwrap();
        assert_eq!(p.message_len, 0);
    }

    #[test]
    fn untagged_reassembly_rejections_change_nothing() {
        let mut q = UntaggedQueue::new();
        q.accept(1, 0, 10, false, 100).unwrap();
        let before = q;
        assert_eq!(
            q.accept(2, 10, 10, true, 100),
            Err(DdpError::MsnMismatch {
                expected: 1,
                received: 2
            })
        );
        assert_eq!(
            q.accept(1, 20, 10, true, 100),
            Err(DdpError::MoMismatch {
                expected: 10,
                received: 20
            })
        );
        assert_eq!(
            q.accept(1, 10, 91, true, 100),
            Err(DdpError::MessageTooLong {
                len: 101,
                buffer: 100
            })
        );
        assert_eq!(q, before);
        let mut wrap = UntaggedQueue {
            next_msn: u32::MAX,
            next_mo: 0,
        };
        wrap.accept(u32::MAX, 0, 1, true, 1).unwrap();
        assert_eq!(wrap.next_msn(), 0);
        let mut sender = UntaggedQueue::new();
        assert_eq!((sender.take_msn(), sender.take_msn()), (1, 2));
    }

    #[test]
    fn tagged_offset_wrap() {
        assert_eq!(tagged_end(10, 5), Ok(15));
        assert_eq!(tagged_end(u64::MAX, 0), Ok(u64::MAX));
        assert_eq!(tagged_end(u64::MAX, 1), Err(DdpError::OffsetWrap));
    }

    fn any_header() -> impl Strategy<Value = DdpHeader> {
        let tagged =
            (any::<u32>(), any::<u64>()).prop_map(|(stag, to)| Buffer::Tagged { stag, to });
        let untagged = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>())
            .prop_map(|(ulp, qn, msn, mo)| Buffer::Untagged { ulp, qn, msn, mo });
        (any::<bool>(), any::<u8>(), prop_oneof![tagged, untagged]).prop_map(
            |(last, ulp_ctrl, buffer)| DdpHeader {
                last,
                ulp_ctrl,
                buffer,
            },
        )
    }

    proptest! {
        #[test]
        fn headers_round_trip(header in any_header(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut buf = vec![0u8; header.len() + payload.len()];
            let len = header.write(&mut buf).unwrap();
            buf[len..].copy_from_slice(&payload);
            prop_assert_eq!(DdpHeader::parse(&buf), Ok((header, &payload[..])));
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_ddp_parser(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok((header, payload)) = DdpHeader::parse(&bytes) {
                prop_assert_eq!(header.len() + payload.len(), bytes.len());
            }
        }

        #[test]
        fn arbitrary_segments_never_panic_reassembly(
            segs in proptest::collection::vec((0u32..4, any::<u32>(), 0usize..1000, any::<bool>(), any::<u32>()), 0..20),
        ) {
            let mut q = UntaggedQueue::new();
            for (msn, mo, len, last, buffer) in segs {
                let _ = q.accept(msn, mo, len, last, buffer);
            }
        }
    }
}
