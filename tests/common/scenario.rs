//! What the in-process scenario (`tests/scenario.rs`) and the two-process
//! one (`tests/scenario_two_process.rs`) share: the stream's messages and the
//! client's per-round registration of its buffer, said once. Included by
//! both with `#[path]`, next to the conformance harness.

use crate::harness::{Mr, Qp, lam_pages};
use softndk::abi::{NdkSge, STATUS_SUCCESS};

/// `NDK_OP_FLAG_DEFER`.
pub const OP_FLAG_DEFER: u32 = 0x200;
/// `NDK_OP_FLAG_ALLOW_REMOTE_READ`.
pub const OP_FLAG_ALLOW_REMOTE_READ: u32 = 0x8;
/// `NDK_OP_FLAG_ALLOW_REMOTE_WRITE`.
pub const OP_FLAG_ALLOW_REMOTE_WRITE: u32 = 0x30;

/// A message of the stream: kind, sequence number and a pattern derived
/// from both.
pub fn message(kind: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut m = vec![0_u8; len];
    m[0] = kind;
    m[1..5].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in m.iter_mut().enumerate().skip(5) {
        *b = (seq as u8)
            .wrapping_mul(7)
            .wrapping_add(i as u8)
            .wrapping_add(kind);
    }
    m
}

/// The client's region of round `round`: how it is registered.
pub struct ClientRegion<'a> {
    /// The fast-register MR and its remote token.
    pub fast: &'a Mr,
    pub token: u32,
    /// The buffer's logical address mapping and first-byte offset.
    pub lam: &'a [u64],
    pub fbo: u32,
    pub size: usize,
    /// The server Reads the region (else it Writes it).
    pub server_reads: bool,
}

/// D2: FastRegisters round `round`'s region (deferred, context 20) chained
/// with the request Send (context 21, its SGE from `stage`) that names it
/// to the server: base address, token, length. Returns the base.
pub fn register_and_request(
    qp: &Qp,
    region: &ClientRegion<'_>,
    round: usize,
    stage: impl FnOnce(&[u8]) -> NdkSge,
) -> u64 {
    let pages = lam_pages(region.lam);
    let base = (0x7000_0000_u64 + round as u64 * 0x100_0000) + u64::from(region.fbo);
    let flags = if region.server_reads {
        OP_FLAG_ALLOW_REMOTE_READ
    } else {
        OP_FLAG_ALLOW_REMOTE_WRITE
    };
    let status = qp.fast_register(
        20,
        region.fast,
        &pages,
        region.fbo,
        region.size,
        base,
        flags | OP_FLAG_DEFER,
    );
    assert_eq!(status, STATUS_SUCCESS);
    let mut request = message(b'R', round as u32, 32);
    request[8..16].copy_from_slice(&base.to_le_bytes());
    request[16..20].copy_from_slice(&region.token.to_le_bytes());
    request[20..28].copy_from_slice(&(region.size as u64).to_le_bytes());
    let sge = stage(&request);
    assert_eq!(qp.send(21, &[sge], 0), STATUS_SUCCESS);
    base
}
