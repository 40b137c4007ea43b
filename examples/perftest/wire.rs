//! The messages perftest's `ib_*_bw -R` sends on its control connection
//! (docs/siw.md, "perftest"): every one is a single Send of at most
//! [`DEST_LEN`] bytes, numbers big-endian.

/// Bytes of perftest's `struct pingpong_dest` on x86-64 (the size of the
/// receive buffer each side keeps posted on the control connection).
pub const DEST_LEN: usize = 56;
/// Bytes of the version exchange (`MAX_VERSION`).
pub const VERSION_LEN: usize = 16;
/// Bytes of the MTU exchange with a peer of version 5.31 or later: the
/// `ibv_mtu` enum as decimal text, NUL-terminated when one digit.
pub const MTU_LEN: usize = 2;
/// The version this server speaks (Debian 12's perftest 4.5-0.17 calls
/// itself 6.06): with it, the peer sends the page and cache-line sizes, a
/// 2-byte MTU and 8-byte iteration counts.
pub const VERSION: &str = "6.06";
/// The oldest peer version perftest accepts, and so do we.
pub const OLDEST_VERSION: f64 = 5.70;

/// perftest's `struct pingpong_dest`: what each side tells the other about
/// one QP and its buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    /// IB LID (0 on iWARP).
    pub lid: u32,
    /// Reads the side allows in flight.
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// Starting packet sequence number.
    pub psn: u32,
    /// Remote key of the buffer (an STag on iWARP).
    pub rkey: u32,
    /// Address of the buffer (the tagged offset on iWARP).
    pub vaddr: u64,
    /// GID (unused with rdma_cm).
    pub gid: [u8; 16],
    /// SRQ number (XRC / DC only).
    pub srqn: u32,
    /// GID index.
    pub gid_index: u32,
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

impl Dest {
    /// The 56 bytes perftest sends: the C struct's layout (a 4-byte hole
    /// before `vaddr`), every number big-endian.
    pub fn encode(&self) -> [u8; DEST_LEN] {
        let mut out = [0_u8; DEST_LEN];
        out[0..4].copy_from_slice(&self.lid.to_be_bytes());
        out[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        out[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        out[12..16].copy_from_slice(&self.psn.to_be_bytes());
        out[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        out[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        out[32..48].copy_from_slice(&self.gid);
        out[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        out[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        out
    }

    /// Decodes [`Dest::encode`]'s layout; `None` when too short.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        Some(Self {
            lid: be32(bytes, 0)?,
            out_reads: be32(bytes, 4)?,
            qpn: be32(bytes, 8)?,
            psn: be32(bytes, 12)?,
            rkey: be32(bytes, 16)?,
            vaddr: be64(bytes, 24)?,
            gid: bytes.get(32..48)?.try_into().ok()?,
            srqn: be32(bytes, 48)?,
            gid_index: be32(bytes, 52)?,
        })
    }
}

/// The version message: the text, NUL-padded to [`VERSION_LEN`].
pub fn version_message(text: &str) -> [u8; VERSION_LEN] {
    let mut out = [0_u8; VERSION_LEN];
    let n = text.len().min(VERSION_LEN - 1);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out
}

/// The version a peer sent (its text up to the first NUL, as a number the
/// way perftest's `atof` reads it); `None` when it is not a number.
pub fn parse_version(bytes: &[u8]) -> Option<f64> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end]).ok()?.trim().parse().ok()
}

/// The MTU message: `ibv_mtu` (1 = 256 B .. 5 = 4096 B) as decimal text.
pub fn mtu_message(mtu: u8) -> [u8; MTU_LEN] {
    [b'0' + mtu.min(9), 0]
}

/// The `ibv_mtu` a peer sent, if it is one of the five.
pub fn parse_mtu(bytes: &[u8]) -> Option<u8> {
    let digit = *bytes.first()?;
    (b'1'..=b'5').contains(&digit).then(|| digit - b'0')
}

/// One 8-byte field of perftest's bandwidth report exchange (`size`,
/// `iters`, then `bw_peak`, `bw_avg` and `msgRate_avg` as doubles), each
/// its own message, big-endian.
pub fn report_u64(value: u64) -> [u8; 8] {
    value.to_be_bytes()
}

/// A double of the report exchange (perftest byte-swaps the IEEE bits).
pub fn report_f64(value: f64) -> [u8; 8] {
    value.to_bits().to_be_bytes()
}

/// Decodes [`report_u64`].
pub fn parse_report_u64(bytes: &[u8]) -> Option<u64> {
    be64(bytes, 0)
}

/// Decodes [`report_f64`].
pub fn parse_report_f64(bytes: &[u8]) -> Option<f64> {
    be64(bytes, 0).map(f64::from_bits)
}

/// The credit a Send server writes into an iWARP client's credit word
/// (`ib_send_bw` over iWARP): the receives completed so far, in the
/// client's byte order (little-endian on x86), truncated to 32 bits.
pub fn credit(received: u64) -> [u8; 4] {
    let bytes = received.to_le_bytes();
    [bytes[0], bytes[1], bytes[2], bytes[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dest_has_the_c_layout_big_endian() {
        let dest = Dest {
            lid: 1,
            out_reads: 16,
            qpn: 0x0102_0304,
            psn: 5,
            rkey: 0xA0B0_C0D0,
            vaddr: 0x1122_3344_5566_7788,
            gid: [9; 16],
            srqn: 6,
            gid_index: 7,
        };
        let bytes = dest.encode();
        assert_eq!(&bytes[0..4], &[0, 0, 0, 1]);
        assert_eq!(&bytes[4..8], &[0, 0, 0, 16]);
        assert_eq!(&bytes[8..12], &[1, 2, 3, 4]);
        assert_eq!(&bytes[16..20], &[0xA0, 0xB0, 0xC0, 0xD0]);
        assert_eq!(&bytes[20..24], &[0; 4], "the C struct's hole");
        assert_eq!(
            &bytes[24..32],
            &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]
        );
        assert_eq!(&bytes[32..48], &[9; 16]);
        assert_eq!(&bytes[52..56], &[0, 0, 0, 7]);
        assert_eq!(Dest::decode(&bytes), Some(dest));
        assert_eq!(Dest::decode(&bytes[..55]), None);
    }

    #[test]
    fn version_is_nul_padded_text() {
        let message = version_message(VERSION);
        assert_eq!(&message[..5], b"6.06\0");
        assert_eq!(message.len(), VERSION_LEN);
        assert_eq!(parse_version(&message), Some(6.06));
        assert_eq!(parse_version(b"5.60\0\0\0"), Some(5.6));
        assert_eq!(parse_version(b"x\0"), None);
        assert!(parse_version(&message).is_some_and(|v| v >= OLDEST_VERSION));
    }

    #[test]
    fn mtu_is_one_digit_text() {
        assert_eq!(mtu_message(3), [b'3', 0]);
        assert_eq!(parse_mtu(b"3\0"), Some(3));
        assert_eq!(parse_mtu(b"0\0"), None);
        assert_eq!(parse_mtu(b""), None);
    }

    #[test]
    fn report_fields_are_big_endian() {
        assert_eq!(report_u64(65536), [0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(parse_report_u64(&report_u64(200)), Some(200));
        assert_eq!(report_f64(1.0), [0x3F, 0xF0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_report_f64(&report_f64(12.5)), Some(12.5));
        assert_eq!(parse_report_f64(&[0; 7]), None);
    }

    #[test]
    fn credit_is_the_clients_order() {
        assert_eq!(credit(0x0102_0304), [4, 3, 2, 1]);
        assert_eq!(credit(1 << 32 | 5), [5, 0, 0, 0]);
    }
}
