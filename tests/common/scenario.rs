//! What the in-process scenario (`tests/scenario.rs`) and the two-process
//! one (`tests/scenario_two_process.rs`) share: the stream's messages and the
//! client's per-round registration of its buffer, said once. Included by
//! both with `#[path]`, next to the conformance harness.

use crate::harness::{Buffer, Cq, Mr, Pd, Qp, lam_pages, wait_some};
use softndk::abi::{NdkOperationType, NdkResultEx, NdkSge, STATUS_SUCCESS};

/// Receive credits: each side posts this many receives.
pub const CREDITS: usize = 255;
/// The size of a message (and of a receive slot).
pub const MESSAGE: usize = 1364;
/// Messages of the stream.
pub const STREAM: usize = 2000;
/// Credits granted back in one grant message.
pub const GRANT_EVERY: usize = 64;
/// `NDK_MR_FLAG_ALLOW_LOCAL_WRITE`.
pub const MR_FLAG_LOCAL_WRITE: u32 = 0x1;
/// `NDK_MR_FLAG_ALLOW_REMOTE_READ`.
pub const MR_FLAG_REMOTE_READ: u32 = 0x2;

/// A zeroed buffer of `len` bytes and the MR that registers it with local
/// write.
fn registered(pd: &Pd, len: usize) -> (Buffer, Mr) {
    let mut buffer = Buffer::new(len, 0, 0);
    let mr = pd.mr(false);
    assert_eq!(
        mr.register(&mut buffer, MR_FLAG_LOCAL_WRITE),
        STATUS_SUCCESS
    );
    (buffer, mr)
}

/// One side's receive buffers: [`CREDITS`] slots of [`MESSAGE`] bytes in
/// one registration.
pub struct Slots {
    pub buffer: Buffer,
    pub mr: Mr,
}

impl Slots {
    pub fn new(pd: &Pd) -> Self {
        let (buffer, mr) = registered(pd, CREDITS * MESSAGE);
        Self { buffer, mr }
    }

    pub fn sge(&self, slot: usize) -> NdkSge {
        self.buffer
            .sge(slot * MESSAGE, MESSAGE as u32, self.mr.local_token())
    }

    /// The first `len` bytes of slot `slot`.
    pub fn slot_bytes(&self, slot: usize, len: usize) -> &[u8] {
        &self.buffer.bytes()[slot * MESSAGE..slot * MESSAGE + len]
    }

    /// Posts a receive on every slot (its context: the slot).
    pub fn post_all(&self, qp: &Qp) {
        for slot in 0..CREDITS {
            assert_eq!(qp.receive(slot, &[self.sge(slot)]), STATUS_SUCCESS);
        }
    }
}

/// One side's send staging buffer (one message at a time: each Send is
/// waited for before the buffer is reused; over iWARP a Send completes once
/// the stream has taken its bytes).
pub struct Sender {
    pub buffer: Buffer,
    pub mr: Mr,
}

impl Sender {
    pub fn new(pd: &Pd) -> Self {
        let (buffer, mr) = registered(pd, MESSAGE);
        Self { buffer, mr }
    }

    /// Copies `bytes` (at most [`MESSAGE`]) into the buffer and returns the
    /// SGE that sends them.
    pub fn stage(&mut self, bytes: &[u8]) -> NdkSge {
        self.buffer.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        self.buffer
            .sge(0, bytes.len() as u32, self.mr.local_token())
    }
}

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
    /// The fast-register MR (the server names the region by its remote
    /// token).
    pub fast: &'a Mr,
    /// The buffer's logical address mapping and first-byte offset.
    pub lam: &'a [u64],
    pub fbo: u32,
    pub size: usize,
    /// The server Reads the region (else it Writes it).
    pub server_reads: bool,
}

impl<'a> ClientRegion<'a> {
    /// `size` bytes mapped by `lam` from `fbo`, to be fast-registered
    /// through `fast` for the server to read (`server_reads`) or write.
    pub fn new(fast: &'a Mr, lam: &'a [u64], fbo: u32, size: usize, server_reads: bool) -> Self {
        Self {
            fast,
            lam,
            fbo,
            size,
            server_reads,
        }
    }
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
    request[16..20].copy_from_slice(&region.fast.remote_token().to_le_bytes());
    request[20..28].copy_from_slice(&(region.size as u64).to_le_bytes());
    let sge = stage(&request);
    assert_eq!(qp.send(21, &[sge], 0), STATUS_SUCCESS);
    base
}

/// The oldest completion of `kind` for the QP whose context is
/// `qp_context`, polled from `cq` within the harness's bounded wait
/// (`wait_some`); the completions of other QPs and kinds wait in `backlog`,
/// in arrival order. A failed completion of any kind fails the session.
pub fn expect_completion(
    cq: &Cq,
    backlog: &mut Vec<NdkResultEx>,
    qp_context: usize,
    kind: NdkOperationType,
) -> NdkResultEx {
    wait_some(
        &format!("a {kind:?} completion for QP {qp_context:#x}"),
        || {
            if let Some(bad) = backlog.iter().find(|r| r.status != STATUS_SUCCESS) {
                panic!("completion {:?} failed with {:#x}", bad.type_, bad.status);
            }
            let at = backlog
                .iter()
                .position(|r| r.qp_context as usize == qp_context && r.type_ == kind);
            if let Some(at) = at {
                return Some(backlog.remove(at));
            }
            backlog.extend(cq.poll_ex(64));
            None
        },
    )
}
