//! CRC32c (Castagnoli) of MPA FPDUs (RFC 5044 §4.4, the iSCSI CRC of RFC 3720).
//!
//! The arithmetic is the `crc` crate's `CRC_32_ISCSI` with its 16-lane table
//! (slice-by-16): `no_std`, no `unsafe`, the same code on the host and in the
//! driver. `docs/iwarp.md` says why not a hardware-accelerated crate.
//!
//! On the wire the CRC value travels least significant byte first: the byte
//! order of RFC 3720 Appendix B.4 (`aa 36 91 8a` for 32 zero bytes, whose CRC is
//! `0x8a9136aa`), which is also what Linux siw sends.

use crc::{CRC_32_ISCSI, Crc, Table};

/// The Castagnoli CRC with its 16 KiB slice-by-16 table, built at compile time.
static CASTAGNOLI: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

/// The CRC32c of `data`, as a number.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    CASTAGNOLI.checksum(data)
}

/// An incremental CRC32c over several pieces (length, header, payload, pad).
#[derive(Clone)]
pub struct Crc32c(crc::Digest<'static, u32, Table<16>>);

impl core::fmt::Debug for Crc32c {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Crc32c").field(&self.value()).finish()
    }
}

impl Crc32c {
    /// A CRC over nothing yet.
    #[must_use]
    pub const fn new() -> Self {
        Self(CASTAGNOLI.digest())
    }

    /// Adds `data` to the CRC.
    pub const fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The CRC of everything added so far, as a number.
    #[must_use]
    pub fn value(&self) -> u32 {
        self.0.clone().finalize()
    }

    /// The CRC of everything added so far, in wire byte order.
    #[must_use]
    pub fn to_wire(&self) -> [u8; 4] {
        to_wire(self.value())
    }
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

/// The CRC value `crc` in wire byte order.
#[must_use]
pub const fn to_wire(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// The CRC value of four bytes in wire byte order.
#[must_use]
pub const fn from_wire(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit-at-a-time reference of the reflected Castagnoli CRC.
    fn reference(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x82f6_3b78
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn rfc3720_b4_vectors() {
        let zeros = [0u8; 32];
        let ones = [0xffu8; 32];
        let up: Vec<u8> = (0..32).collect();
        let down: Vec<u8> = (0..32).rev().collect();
        assert_eq!(crc32c(&zeros), 0x8a91_36aa);
        assert_eq!(crc32c(&ones), 0x62a8_ab43);
        assert_eq!(crc32c(&up), 0x46dd_794e);
        assert_eq!(crc32c(&down), 0x113f_db5c);
    }

    #[test]
    fn rfc3720_b4_wire_byte_order() {
        // RFC 3720 B.4 lists the CRC bytes as sent: "aa 36 91 8a" for zeros.
        assert_eq!(to_wire(crc32c(&[0u8; 32])), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(from_wire([0xaa, 0x36, 0x91, 0x8a]), 0x8a91_36aa);
    }

    #[test]
    fn check_value_of_the_catalogue() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn incremental_over_pieces_equals_one_pass() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut crc = Crc32c::new();
        for piece in data.chunks(7) {
            crc.update(piece);
        }
        assert_eq!(crc.value(), crc32c(&data));
        assert_eq!(crc.to_wire(), to_wire(crc32c(&data)));
        assert_eq!(Crc32c::default().value(), 0);
    }

    proptest! {
        #[test]
        fn matches_bitwise_reference(data in proptest::collection::vec(any::<u8>(), 0..2048), split in 0usize..2048) {
            prop_assert_eq!(crc32c(&data), reference(&data));
            let (a, b) = data.split_at(split.min(data.len()));
            let mut crc = Crc32c::new();
            crc.update(a);
            crc.update(b);
            prop_assert_eq!(crc.value(), reference(&data));
        }
    }
}
