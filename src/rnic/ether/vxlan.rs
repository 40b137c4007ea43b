//! The VXLAN header (RFC 7348 §5): building it in front of an Ethernet frame,
//! and parsing a received datagram with every field checked.
//!
//! ```text
//!  0               1               2               3
//!  flags (I = 0x08) | reserved (24 bits)                           |
//!  VNI (24 bits)                                    | reserved (8)  |
//!  inner Ethernet frame (destination MAC, source MAC, type, payload; no FCS)
//! ```

use super::mac::{ETH_HEADER_LEN, VLAN_TAG_LEN};

/// The IANA-assigned UDP destination port of VXLAN (RFC 7348 §5).
pub const UDP_PORT: u16 = 4789;

/// Length of the VXLAN header in front of the inner frame.
pub const HEADER_LEN: usize = 8;

/// The I flag: "the VNI is valid"; must be set (RFC 7348 §5).
pub const FLAG_I: u8 = 0x08;

/// The largest VXLAN Network Identifier (24 bits).
pub const VNI_MAX: u32 = 0x00FF_FFFF;

/// The VXLAN header and the two outer headers in front of it (UDP 8, IPv4 20):
/// what an underlay MTU must hold beyond the inner frame. Over IPv6 the IP
/// header is 20 bytes longer.
pub const OVERHEAD_IPV4: usize = 14 + 20 + 8 + HEADER_LEN;

/// A VXLAN Network Identifier: 24 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vni(u32);

impl Vni {
    /// The VNI `value`, or `None` when it does not fit in 24 bits.
    pub const fn new(value: u32) -> Option<Self> {
        if value <= VNI_MAX {
            Some(Self(value))
        } else {
            None
        }
    }

    /// The 24-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// The lengths an inner Ethernet frame (header included, no FCS) may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameBounds {
    /// Shortest accepted frame: at least an Ethernet header.
    pub min: usize,
    /// Longest accepted frame.
    pub max: usize,
}

impl FrameBounds {
    /// The bounds of an interface with this IP `mtu`: at least an Ethernet
    /// header, at most the MTU plus the Ethernet header and one 802.1Q tag.
    pub const fn for_mtu(mtu: u16) -> Self {
        Self {
            min: ETH_HEADER_LEN,
            max: mtu as usize + ETH_HEADER_LEN + VLAN_TAG_LEN,
        }
    }

    /// Whether a frame of `len` bytes is within the bounds.
    ///
    /// # Errors
    ///
    /// Which bound it breaks.
    pub const fn check(self, len: usize) -> Result<(), FrameLenError> {
        if len < self.min {
            Err(FrameLenError::TooShort)
        } else if len > self.max {
            Err(FrameLenError::TooLong)
        } else {
            Ok(())
        }
    }
}

/// A frame length outside [`FrameBounds`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameLenError {
    /// Shorter than the minimum (no full Ethernet header).
    TooShort,
    /// Longer than the maximum for the MTU.
    TooLong,
}

/// What to do with the reserved bits of a received header.
///
/// RFC 7348 §5 says they are "ignored on receipt"; Linux's `vxlan` (without
/// extensions such as GBP) drops a datagram that sets any of them. The
/// default, [`Refuse`](Self::Refuse), follows Linux: a set bit means an
/// extension this end does not implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReservedBits {
    /// Drop a datagram with any reserved bit set.
    #[default]
    Refuse,
    /// Ignore the reserved bits, as RFC 7348 §5 allows.
    Ignore,
}

/// Why a received datagram was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the VXLAN header.
    Truncated,
    /// The I flag is clear: the VNI is not valid.
    FlagIClear,
    /// A reserved bit is set (and [`ReservedBits::Refuse`] is in force).
    ReservedBits,
    /// The VNI is not the configured one.
    WrongVni {
        /// The VNI the datagram carries.
        got: u32,
    },
    /// The inner frame is shorter than [`FrameBounds::min`].
    InnerTooShort,
    /// The inner frame is longer than [`FrameBounds::max`].
    InnerTooLong,
}

/// Why a header or datagram could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The output buffer cannot hold the header and the frame.
    BufferTooSmall,
}

/// A decoded VXLAN header, every field as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The flags byte (only [`FLAG_I`] is defined).
    pub flags: u8,
    /// The 24 reserved bits after the flags.
    pub reserved1: u32,
    /// The 24-bit VNI.
    pub vni: u32,
    /// The 8 reserved bits after the VNI.
    pub reserved2: u8,
}

impl Header {
    /// Decodes the first [`HEADER_LEN`] bytes of `datagram`; returns the
    /// header and the bytes after it, or `None` when the datagram is shorter.
    pub fn decode(datagram: &[u8]) -> Option<(Self, &[u8])> {
        let (head, rest) = datagram.split_first_chunk::<HEADER_LEN>()?;
        let [flags, r0, r1, r2, v0, v1, v2, reserved2] = *head;
        let header = Self {
            flags,
            reserved1: u32::from_be_bytes([0, r0, r1, r2]),
            vni: u32::from_be_bytes([0, v0, v1, v2]),
            reserved2,
        };
        Some((header, rest))
    }

    /// Whether any reserved bit (the flags other than I, and both reserved
    /// fields) is set.
    pub const fn has_reserved_bits(&self) -> bool {
        self.flags & !FLAG_I != 0 || self.reserved1 != 0 || self.reserved2 != 0
    }
}

/// Writes the header for `vni` (I flag set, reserved bits zero) into the
/// first [`HEADER_LEN`] bytes of `out`.
///
/// # Errors
///
/// `out` is shorter than the header.
pub fn write_header(vni: Vni, out: &mut [u8]) -> Result<(), BuildError> {
    let head = out
        .first_chunk_mut::<HEADER_LEN>()
        .ok_or(BuildError::BufferTooSmall)?;
    let [_, v0, v1, v2] = vni.get().to_be_bytes();
    *head = [FLAG_I, 0, 0, 0, v0, v1, v2, 0];
    Ok(())
}

/// Builds the VXLAN payload of `frame` for `vni` into `out`: the header then
/// the frame. Returns the length written. The frame's length is the caller's
/// business ([`FrameBounds`]); only the room in `out` is checked here.
///
/// # Errors
///
/// `out` cannot hold the header and the frame; it is left untouched.
pub fn build(vni: Vni, frame: &[u8], out: &mut [u8]) -> Result<usize, BuildError> {
    let len = HEADER_LEN
        .checked_add(frame.len())
        .ok_or(BuildError::BufferTooSmall)?;
    let dst = out.get_mut(..len).ok_or(BuildError::BufferTooSmall)?;
    let (head, body) = dst
        .split_at_mut_checked(HEADER_LEN)
        .ok_or(BuildError::BufferTooSmall)?;
    write_header(vni, head)?;
    body.copy_from_slice(frame);
    Ok(len)
}

/// Parses a received VXLAN payload (the UDP datagram's data): checks the
/// I flag, the reserved bits (per `reserved`), the VNI against `vni` and the
/// inner frame's length against `bounds`; returns the inner frame.
///
/// # Errors
///
/// The first check that fails, in that order.
pub fn parse(
    datagram: &[u8],
    vni: Vni,
    bounds: FrameBounds,
    reserved: ReservedBits,
) -> Result<&[u8], ParseError> {
    let (header, inner) = Header::decode(datagram).ok_or(ParseError::Truncated)?;
    if header.flags & FLAG_I == 0 {
        return Err(ParseError::FlagIClear);
    }
    if reserved == ReservedBits::Refuse && header.has_reserved_bits() {
        return Err(ParseError::ReservedBits);
    }
    if header.vni != vni.get() {
        return Err(ParseError::WrongVni { got: header.vni });
    }
    match bounds.check(inner.len()) {
        Ok(()) => Ok(inner),
        Err(FrameLenError::TooShort) => Err(ParseError::InnerTooShort),
        Err(FrameLenError::TooLong) => Err(ParseError::InnerTooLong),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VNI: Vni = match Vni::new(0x12_3456) {
        Some(v) => v,
        None => panic!("VNI fits"),
    };
    const BOUNDS: FrameBounds = FrameBounds::for_mtu(1450);

    fn frame(len: usize) -> Vec<u8> {
        (0..len).map(|i| i as u8).collect()
    }

    fn datagram(header: [u8; 8], inner_len: usize) -> Vec<u8> {
        let mut d = header.to_vec();
        d.extend(frame(inner_len));
        d
    }

    #[test]
    fn test_vni_is_24_bits() {
        assert_eq!(Vni::new(0).map(Vni::get), Some(0));
        assert_eq!(Vni::new(VNI_MAX).map(Vni::get), Some(VNI_MAX));
        assert_eq!(Vni::new(VNI_MAX + 1), None);
        assert_eq!(Vni::new(u32::MAX), None);
    }

    #[test]
    fn test_header_layout_is_rfc7348() {
        let mut out = [0xAAu8; 8 + 20];
        let len = build(VNI, &frame(20), &mut out).unwrap();
        assert_eq!(len, 28);
        assert_eq!(out[..8], [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        assert_eq!(out[8..], frame(20)[..]);
    }

    #[test]
    fn test_build_refuses_small_buffer_and_leaves_it() {
        let mut out = [0xAAu8; 8 + 19];
        assert_eq!(
            build(VNI, &frame(20), &mut out),
            Err(BuildError::BufferTooSmall)
        );
        assert!(out.iter().all(|&b| b == 0xAA));
        let mut tiny = [0u8; 7];
        assert_eq!(
            write_header(VNI, &mut tiny),
            Err(BuildError::BufferTooSmall)
        );
    }

    #[test]
    fn test_parse_accepts_valid_datagram() {
        let d = datagram([0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0], 60);
        assert_eq!(parse(&d, VNI, BOUNDS, ReservedBits::Refuse), Ok(&d[8..]));
    }

    #[test]
    fn test_parse_refuses_truncated_header() {
        for len in 0..8 {
            let d = vec![0x08; len];
            assert_eq!(
                parse(&d, VNI, BOUNDS, ReservedBits::Ignore),
                Err(ParseError::Truncated)
            );
        }
    }

    #[test]
    fn test_parse_refuses_clear_i_flag() {
        let d = datagram([0x00, 0, 0, 0, 0x12, 0x34, 0x56, 0], 60);
        assert_eq!(
            parse(&d, VNI, BOUNDS, ReservedBits::Ignore),
            Err(ParseError::FlagIClear)
        );
        let d = datagram([0xF7, 0, 0, 0, 0x12, 0x34, 0x56, 0], 60);
        assert_eq!(
            parse(&d, VNI, BOUNDS, ReservedBits::Ignore),
            Err(ParseError::FlagIClear)
        );
    }

    #[test]
    fn test_parse_checks_every_reserved_bit() {
        // Each of the 56 reserved bits, one at a time: refused, or ignored.
        for byte in 0..8 {
            for bit in 0..8 {
                let mut header = [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0];
                if (4..7).contains(&byte) || (byte == 0 && bit == 3) {
                    continue; // VNI and I flag
                }
                header[byte] |= 1 << bit;
                let d = datagram(header, 60);
                assert_eq!(
                    parse(&d, VNI, BOUNDS, ReservedBits::Refuse),
                    Err(ParseError::ReservedBits),
                    "byte {byte} bit {bit}"
                );
                assert_eq!(parse(&d, VNI, BOUNDS, ReservedBits::Ignore), Ok(&d[8..]));
            }
        }
    }

    #[test]
    fn test_parse_refuses_other_vni() {
        let d = datagram([0x08, 0, 0, 0, 0x12, 0x34, 0x57, 0], 60);
        assert_eq!(
            parse(&d, VNI, BOUNDS, ReservedBits::Refuse),
            Err(ParseError::WrongVni { got: 0x12_3457 })
        );
    }

    #[test]
    fn test_parse_checks_inner_length_bounds() {
        let header = [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0];
        for (len, want) in [
            (0, Err(ParseError::InnerTooShort)),
            (13, Err(ParseError::InnerTooShort)),
            (14, Ok(14)),
            (1450 + 18, Ok(1468)),
            (1450 + 19, Err(ParseError::InnerTooLong)),
        ] {
            let d = datagram(header, len);
            assert_eq!(
                parse(&d, VNI, BOUNDS, ReservedBits::Refuse).map(<[u8]>::len),
                want,
                "inner length {len}"
            );
        }
    }

    proptest! {
        #[test]
        fn prop_parse_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..1600),
            vni in 0..=VNI_MAX,
            mtu in any::<u16>(),
            ignore in any::<bool>(),
        ) {
            let reserved = if ignore { ReservedBits::Ignore } else { ReservedBits::Refuse };
            let vni = Vni::new(vni).unwrap();
            if let Ok(inner) = parse(&bytes, vni, FrameBounds::for_mtu(mtu), reserved) {
                prop_assert_eq!(inner, &bytes[8..]);
                prop_assert_eq!(bytes[0] & FLAG_I, FLAG_I);
            }
        }

        #[test]
        fn prop_build_then_parse_round_trips(
            inner in proptest::collection::vec(any::<u8>(), 14..1468),
            vni in 0..=VNI_MAX,
            slack in 0usize..16,
        ) {
            let vni = Vni::new(vni).unwrap();
            let mut out = vec![0u8; HEADER_LEN + inner.len() + slack];
            let len = build(vni, &inner, &mut out).unwrap();
            prop_assert_eq!(len, HEADER_LEN + inner.len());
            let (header, _) = Header::decode(&out[..len]).unwrap();
            prop_assert!(!header.has_reserved_bits());
            prop_assert_eq!(header.vni, vni.get());
            prop_assert_eq!(
                parse(&out[..len], vni, BOUNDS, ReservedBits::Refuse),
                Ok(&inner[..])
            );
        }
    }
}
