//! CRC32c (Castagnoli) of MPA FPDUs (RFC 5044 §4.4, the iSCSI CRC of RFC 3720).
//!
//! Two implementations of the same function, chosen by target:
//!
//! * **host** (any target but Windows): the `crc32c` crate, which uses SSE4.2's
//!   `crc32` instruction (or ARMv8's) when the processor has it (detected at
//!   run time) and its own tables otherwise. It needs `std`, which the host
//!   build has. The table-driven CRC cost about a fifth of all cycles of the
//!   wire benchmark with CRC on (docs/performance.md, "Wire").
//! * **driver** (Windows, `no_std`): the `crc` crate's `CRC_32_ISCSI` with its
//!   16-lane table (slice-by-16): `no_std`, no `unsafe`. `docs/iwarp.md` ("The
//!   CRC crate") says why not a hardware-accelerated crate there.
//!
//! The tests check the one in use against the RFC vectors and a bitwise
//! reference, and (on the host) against the table-driven one.
//!
//! On the wire the CRC value travels least significant byte first: the byte
//! order of RFC 3720 Appendix B.4 (`aa 36 91 8a` for 32 zero bytes, whose CRC is
//! `0x8a9136aa`), which is also what Linux siw sends.

#[cfg(any(target_os = "windows", test))]
mod table {
    use crc::{CRC_32_ISCSI, Crc, Table};

    /// The Castagnoli CRC with its 16 KiB slice-by-16 table, built at
    /// compile time.
    static CASTAGNOLI: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

    /// The CRC32c of the bytes `crc` covered followed by `data`, where `crc`
    /// is the value over the bytes before (0 for none).
    pub(super) fn append(crc: u32, data: &[u8]) -> u32 {
        // The `crc` crate's digest keeps the register before its final
        // inversion (the value's complement), and bit-reverses the initial
        // value it is given for a reflected CRC: undone here.
        let mut digest = CASTAGNOLI.digest_with_initial((!crc).reverse_bits());
        digest.update(data);
        digest.finalize()
    }
}

/// The CRC32c of the bytes `crc` covered followed by `data` (`crc`: the
/// value over the bytes before, 0 for none).
#[cfg(not(target_os = "windows"))]
fn append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

#[cfg(target_os = "windows")]
use table::append;

/// The CRC32c of `data`, as a number.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    append(0, data)
}

/// An incremental CRC32c over several pieces (length, header, payload, pad).
#[derive(Clone, Copy, Default)]
pub struct Crc32c(u32);

impl core::fmt::Debug for Crc32c {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Crc32c").field(&self.value()).finish()
    }
}

impl Crc32c {
    /// A CRC over nothing yet.
    #[must_use]
    pub const fn new() -> Self {
        Self(0)
    }

    /// Adds `data` to the CRC.
    pub fn update(&mut self, data: &[u8]) {
        self.0 = append(self.0, data);
    }

    /// The CRC of everything added so far, as a number.
    #[must_use]
    pub const fn value(&self) -> u32 {
        self.0
    }

    /// The CRC of everything added so far, in wire byte order.
    #[must_use]
    pub const fn to_wire(&self) -> [u8; 4] {
        to_wire(self.value())
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

    #[test]
    fn hardware_and_table_agree() {
        // The host's CRC (SSE4.2 where the processor has it) against the
        // driver's table-driven one, over lengths around the 8/24-byte and
        // large-block steps of the hardware path.
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [
            0, 1, 7, 8, 9, 23, 24, 25, 255, 256, 4095, 4096, 32_767, 65_536, 70_000,
        ] {
            let piece = &data[..len];
            assert_eq!(crc32c(piece), table::append(0, piece), "len {len}");
            let (a, b) = piece.split_at(len / 3);
            assert_eq!(
                table::append(table::append(0, a), b),
                crc32c(piece),
                "len {len} in two"
            );
        }
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
            prop_assert_eq!(table::append(0, &data), reference(&data));
        }
    }
}
