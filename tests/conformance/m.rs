//! Family M of the rules catalogue, through the C ABI: memory registration,
//! fast registration, windows, tokens and logical address mappings.
//!
//! Every check of data compares every byte of the region involved: the bytes
//! a request moved and the bytes around them that it must not touch. Regions
//! start at odd offsets in their first page and requests cross page (and MDL)
//! boundaries. A request that fails with an error status ends its connection
//! (E5), so each such check runs on a pair of its own.

use std::sync::Arc;

use softndk::abi::*;

use super::harness::*;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

const MR_REMOTE_READ: u32 = MrFlags::ALLOW_REMOTE_READ.bits();
const MR_REMOTE_WRITE: u32 = MrFlags::ALLOW_REMOTE_WRITE.bits();
const MR_READ_SINK: u32 = MrFlags::RDMA_READ_SINK.bits();
/// `PAGE` as a u64.
const PAGE64: u64 = PAGE as u64;

/// Bytes distinct per position and seed (never all one value).
fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let [low, high, ..] = i.to_le_bytes();
            low.wrapping_mul(13)
                .wrapping_add(high.wrapping_mul(7))
                .wrapping_add(seed)
                ^ 0x5C
        })
        .collect()
}

/// `len` bytes at `offset` into a page, holding `content` (`len` bytes).
fn buffer_with(offset: usize, content: &[u8]) -> Buffer {
    let mut buffer = Buffer::new(content.len(), offset, 0);
    buffer.bytes_mut().copy_from_slice(content);
    buffer
}

/// A buffer of `len` bytes at `offset` into a page holding a fresh pattern
/// (`seed`, [`bytes`]), and that pattern: what it holds before the test
/// moves anything.
fn pattern_buffer((len, seed): (usize, u8), offset: usize) -> (Vec<u8>, Buffer) {
    let before = bytes(len, seed);
    let buffer = buffer_with(offset, &before);
    (before, buffer)
}

/// B's region registered with `flags` over a [`pattern_buffer`], and the
/// pattern.
fn b_region(pair: &Pair, (len, seed): (usize, u8), offset: usize, flags: u32) -> (Vec<u8>, Region) {
    let (before, buffer) = pattern_buffer((len, seed), offset);
    (before, Region::of(&pair.b_pd, buffer, flags))
}

/// RegisterMr of `length` bytes of the chain at `mdl` (the outcome, L8).
fn register_mdl(mr: &Mr, mdl: *mut Mdl, length: usize, flags: u32) -> NtStatus {
    let signal = Signal::new();
    // SAFETY: a live MR; `mdl` heads a chain the test keeps alive (and,
    // where it describes real memory, owns) until the MR is closed.
    let status = unsafe {
        (mr.d().ndk_register_mr)(mr.0, mdl, length, flags, Some(on_status), signal.ctx())
    };
    signal.outcome(status)
}

/// An MDL of `len` bytes at a made-up virtual address that no memory backs:
/// only a provider that uses the address as an index survives it.
fn mdl_nowhere(address: u64, len: u64) -> Box<Mdl> {
    let first = std::ptr::without_provenance_mut::<u8>(usize::try_from(address).unwrap());
    let mut mdl = mdl_at(first, 0);
    mdl.byte_count = u32::try_from(len).unwrap();
    mdl
}

/// Makes the buffer's MDL describe only its first `split` bytes and chains
/// `rest` after it.
fn chain(buffer: &mut Buffer, split: usize, rest: &mut Mdl) {
    let first = buffer.mdl();
    // SAFETY: the buffer's own MDL, not in use by any call.
    unsafe { (*first).byte_count = u32::try_from(split).unwrap() };
    // SAFETY: as above; `rest` outlives every use of the chain (the test
    // keeps it until the registration is closed).
    unsafe { (*first).next = &raw mut *rest };
}

/// The bytes following byte `at` of `buffer`, as a host-mode MDL.
fn tail_mdl(buffer: &mut Buffer, at: usize) -> Box<Mdl> {
    let len = buffer.len - at;
    mdl_at(buffer.bytes_mut()[at..].as_mut_ptr(), len)
}

/// Every field of an MDL header, to compare before and after.
fn mdl_fields(mdl: *const Mdl) -> (usize, i16, i16, usize, usize, usize, u32, u32) {
    // SAFETY: the test's own live MDL, not being written.
    let m = unsafe { &*mdl };
    (
        m.next as usize,
        m.size,
        m.mdl_flags,
        m.process as usize,
        m.mapped_system_va as usize,
        m.start_va as usize,
        m.byte_count,
        m.byte_offset,
    )
}

/// Waits for the next completion on `cq` and checks its request context and
/// status.
fn expect(cq: &Cq, context: usize, status: NtStatus) -> NdkResultEx {
    let r = wait_results_ex(cq, 1).remove(0);
    assert_eq!(
        (r.request_context as usize, r.status),
        (context, status),
        "completion of type {:?}",
        r.type_
    );
    r
}

/// Checks that the connection of `pair` is over (E5): a Send posted on A and
/// a Receive posted on B now complete with `STATUS_CANCELLED`, and nothing
/// else is waiting on either CQ.
fn assert_ended(pair: &Pair) {
    await_abort(&pair.a_disconnects);
    send0(&pair.a_qp, 0xEEE1, 0);
    expect(&pair.a_cq, 0xEEE1, STATUS_CANCELLED);
    recv0(&pair.b_qp, 0xEEE2);
    expect(&pair.b_cq, 0xEEE2, STATUS_CANCELLED);
    pair.assert_cqs_empty();
}

/// Checks that the connection of `pair` is over ([`assert_ended`]), then
/// closes the test's regions and tears the pair down ([`teardown_closing`]).
fn teardown_ended<const N: usize>(pair: Pair, regions: [Region; N]) {
    assert_ended(&pair);
    teardown_closing(pair, regions);
}

/// Checks the status of A's Write (or Send) that B refuses — `fabric`, its
/// status on the fabric; over iWARP, where it completes once sent, success
/// (`Transport::peer_refused`), or B's verdict when B's Terminate arrived
/// before the completion was recorded (RFC 5040 §7 allows both; a loaded
/// machine widens that window) — and waits until the refusal has ended the
/// connection at A (X2; over iWARP: B's Terminate has arrived).
fn assert_refused(pair: &Pair, status: NtStatus, fabric: NtStatus) {
    let sent = Transport::default().peer_refused(fabric);
    assert!(
        status == sent || (Transport::default() == Transport::Iwarp && status == fabric),
        "status {status:#x}: expected {sent:#x}"
    );
    await_abort(&pair.a_disconnects);
}

/// Closes B's `frmr` and the test's regions, then [`Pair::teardown`]
/// ([`teardown_with_regions`]).
fn teardown_with_frmr<const N: usize>(pair: Pair, frmr: Frmr, regions: [Region; N]) {
    frmr.close(&pair.b);
    teardown_with_regions(pair, regions);
}

/// Closes B's `frmr` and the test's regions, then tears down a pair whose
/// connection an error may have ended ([`teardown_closing`]).
fn teardown_closing_frmr<const N: usize>(pair: Pair, frmr: Frmr, regions: [Region; N]) {
    frmr.close(&pair.b);
    teardown_closing(pair, regions);
}

/// Fills `buffer` with pattern `seed` ([`bytes`]): what it holds before the
/// test moves anything.
fn fill(buffer: &mut Buffer, seed: u8) -> Vec<u8> {
    let before = bytes(buffer.len, seed);
    buffer.bytes_mut().copy_from_slice(&before);
    before
}

/// B's fast-register MR of `len` bytes for up to `pages` pages (`remote`:
/// initialized with RemoteAccess) over a buffer holding a fresh pattern
/// (`seed`), and that pattern ([`fill`]).
fn b_frmr_filled(
    pair: &Pair,
    (len, pages, remote): (usize, u32, bool),
    seed: u8,
) -> (Frmr, Vec<u8>) {
    let mut frmr = Frmr::new(&pair.b, &pair.b_pd, len, 0, pages, remote);
    let before = fill(&mut frmr.buffer, seed);
    (frmr, before)
}

/// Fast-registers `frmr` on B's QP with each of `flags` in turn (request
/// contexts `context + i`), invalidating it after each (contexts
/// `context + 10 + i`): every FastRegister and Invalidate must succeed.
fn expect_fast_registers(pair: &Pair, frmr: &Frmr, flags: &[u32], context: usize) {
    for (i, &flags) in flags.iter().enumerate() {
        assert_success!(frmr.post(&pair.b_qp, context + i, flags), "{flags:#x}");
        expect(&pair.b_cq, context + i, STATUS_SUCCESS);
        let invalidate = context + 10 + i;
        assert_success!(pair.b_qp.invalidate(invalidate, frmr.mr.header(), 0));
        expect(&pair.b_cq, invalidate, STATUS_SUCCESS);
    }
}

/// A's Write of the bytes of `local` to `remote` / `token` of B; returns
/// its completion status.
fn a_writes(pair: &Pair, local: NdkSge, remote: u64, token: u32) -> NtStatus {
    assert_success!(pair.a_qp.write(0xA11, &[local], remote, token, 0));
    let r = wait_results_ex(&pair.a_cq, 1).remove(0);
    assert_eq!(r.request_context as usize, 0xA11);
    r.status
}

/// B fast-registers `fast` for remote write over the pages of `lam` (first
/// byte at `fbo`, `len` bytes at `base`); the FastRegister succeeds.
fn fast_registers_lam(
    pair: &Pair,
    context: usize,
    fast: &Mr,
    lam: &[u64],
    (fbo, len, base): (u32, usize, u64),
) {
    let pages = lam_pages(lam);
    let status = pair
        .b_qp
        .fast_register(context, fast, &pages, fbo, len, base, OP_REMOTE_WRITE);
    assert_success!(status);
    expect(&pair.b_cq, context, STATUS_SUCCESS);
}

/// B binds `mw` over `len` bytes at `at` of `region` with `flags`; the
/// Bind succeeds.
fn b_binds(
    pair: &Pair,
    context: usize,
    mw: &Mw,
    (region, at, len): (&Region, usize, usize),
    flags: u32,
) {
    let status = pair
        .b_qp
        .bind(context, &region.mr, mw, region.remote(at), len, flags);
    assert_success!(status);
    expect(&pair.b_cq, context, STATUS_SUCCESS);
}

/// A Send of `sge` (request `context`) on one side's QP, whose own token
/// does not cover it, fails there with STATUS_ACCESS_VIOLATION (a local
/// error, E5); the other side's posted receive (`peer`: its CQ and request
/// context) is cancelled and nothing lands in `inbox`.
fn expect_send_refused_locally(
    (qp, cq): (&Qp, &Cq),
    context: usize,
    sge: NdkSge,
    (peer_cq, receive): (&Cq, usize),
    inbox: &Region,
) {
    assert_success!(qp.send(context, &[sge], 0));
    expect(cq, context, STATUS_ACCESS_VIOLATION);
    expect(peer_cq, receive, STATUS_CANCELLED);
    assert!(inbox.bytes().iter().all(|&b| b == 0), "nothing landed");
}

/// A's Write of `len` bytes of a fresh pattern (`seed`) to `remote` /
/// `token` of B, which succeeds; returns the pattern's region, to compare
/// the placed bytes with.
fn a_writes_pattern(pair: &Pair, seed: u8, len: usize, (remote, token): (u64, u32)) -> Region {
    let src = Region::pattern(&pair.a_pd, PAGE, seed, 0);
    assert_success!(a_writes(pair, src.sge(0, len), remote, token));
    src
}

/// A's Write of `local` to `remote` / `token` of B, which B refuses with
/// `fabric` ([`assert_refused`]), leaves every byte of `target` as it was
/// and ends the connection ([`assert_ended`]).
fn expect_write_refused(
    pair: &Pair,
    target: &Buffer,
    local: NdkSge,
    remote: u64,
    token: u32,
    fabric: NtStatus,
) {
    let now = target.bytes().to_vec();
    assert_refused(pair, a_writes(pair, local, remote, token), fabric);
    assert_eq!(target.bytes(), &now[..], "refused Write moved bytes");
    assert_ended(pair);
}

/// A's Read from `remote` / `token` of B into the bytes of `local`; returns
/// its completion status.
fn a_reads(pair: &Pair, local: NdkSge, remote: u64, token: u32) -> NtStatus {
    assert_success!(pair.a_qp.read(0xA12, &[local], remote, token, 0));
    let r = wait_results_ex(&pair.a_cq, 1).remove(0);
    assert_eq!(r.request_context as usize, 0xA12);
    r.status
}

/// The bytes `expected` lie at `at` in `actual`, and every other byte still
/// equals `before`.
fn assert_placed(actual: &[u8], before: &[u8], at: usize, expected: &[u8]) {
    assert_eq!(actual.len(), before.len());
    assert_eq!(&actual[at..at + expected.len()], expected, "moved bytes");
    assert_eq!(&actual[..at], &before[..at], "bytes before the target");
    assert_eq!(
        &actual[at + expected.len()..],
        &before[at + expected.len()..],
        "bytes after the target"
    );
}

/// SGEs naming the logical addresses of `len` bytes from byte `start` of
/// the memory a LAM maps (`pages`, first byte at `fbo`), one per page so
/// that no SGE assumes adjacent pages.
fn lam_sges(pages: &[u64], fbo: u32, start: usize, len: usize, token: u32) -> Vec<NdkSge> {
    let mut sges = Vec::new();
    let mut at = fbo as usize + start;
    let end = at + len;
    while at < end {
        let in_page = at % PAGE;
        let take = (PAGE - in_page).min(end - at);
        sges.push(NdkSge {
            address: pages[at / PAGE] + in_page as u64,
            length: u32::try_from(take).unwrap(),
            memory_region_token: token,
        });
        at += take;
    }
    sges
}

/// The result of one raw BuildLam call.
struct LamCall {
    status: NtStatus,
    /// The LAM buffer (filled with a sentinel before the call).
    words: Vec<u64>,
    size: u32,
    fbo: u32,
    /// The request completion's calls.
    completions: Arc<Signal>,
}

/// A sentinel for bytes the provider must not write.
const SENTINEL: u64 = 0xA5A5_A5A5_A5A5_A5A5;

/// BuildLam over `length` bytes of the chain at `mdl` into a LAM buffer of
/// `room` bytes (none at all for 0), with or without a request completion.
fn build_lam_raw(
    adapter: &Adapter,
    mdl: *mut Mdl,
    length: usize,
    completion: bool,
    room: u32,
) -> LamCall {
    let mut words = vec![SENTINEL; (room as usize).div_ceil(8) + 4];
    let lam: *mut NdkLogicalAddressMapping = if room == 0 {
        std::ptr::null_mut()
    } else {
        words.as_mut_ptr().cast()
    };
    let completions = Signal::new();
    let (callback, context) = if completion {
        (Some(on_status as NdkFnRequestCompletion), completions.ctx())
    } else {
        (None, std::ptr::null_mut())
    };
    let mut size = room;
    let mut fbo = 0xFFFF_FFFF_u32;
    // SAFETY: a live adapter; `mdl` heads a chain the test keeps locked
    // (owned) until ReleaseLam; the LAM buffer has `room` bytes (and more).
    let status = unsafe {
        (adapter.d().ndk_build_lam)(
            adapter.0,
            mdl,
            length,
            callback,
            context,
            lam,
            &raw mut size,
            &raw mut fbo,
        )
    };
    LamCall {
        status,
        words,
        size,
        fbo,
        completions,
    }
}

/// The adapter information (of an adapter opened for the purpose).
fn info() -> NdkAdapterInfo {
    let adapter = open_adapter(own_address());
    let info = adapter.info();
    adapter.close();
    info
}

/// `AdapterPageCount` of a LAM buffer.
fn lam_count(words: &[u64]) -> usize {
    (words[1] & 0xFFFF_FFFF) as usize
}

// ---------------------------------------------------------------------------
// M1–M5: registration
// ---------------------------------------------------------------------------

/// M1: a fast-register MR takes InitializeFastRegisterMr and FastRegister
/// only, a RegisterMr MR RegisterMr only; each refusal leaves the MR usable.
#[test]
fn m1_mr_kind_is_fixed_at_creation() {
    let pair = Pair::new();
    let sink = Region::new(&pair.a_pd, 2 * PAGE, 0, MR_LOCAL_WRITE);
    let (content, mut buffer) = pattern_buffer((PAGE, 1), 0x40);

    // A fast-register MR refuses RegisterMr, DeregisterMr and Bind.
    let fast = pair.b_pd.mr(true);
    assert_eq!(
        fast.register(&mut buffer, MR_LOCAL_WRITE),
        STATUS_INVALID_DEVICE_REQUEST
    );
    assert_eq!(fast.deregister(), STATUS_INVALID_DEVICE_REQUEST);
    assert_success!(fast.init_fast(4, false));
    assert_eq!(
        fast.register(&mut buffer, MR_LOCAL_WRITE),
        STATUS_INVALID_DEVICE_REQUEST
    );
    let mw = pair.b_pd.mw();
    assert_eq!(
        pair.b_qp
            .bind(1, &fast, &mw, 0x7000_0000, 16, OP_REMOTE_READ),
        STATUS_INVALID_PARAMETER
    );

    // A RegisterMr MR refuses InitializeFastRegisterMr and FastRegister.
    let plain = pair.b_pd.mr(false);
    assert_eq!(plain.init_fast(4, false), STATUS_INVALID_DEVICE_REQUEST);
    assert_success!(plain.register(&mut buffer, 0));
    assert_eq!(plain.init_fast(4, false), STATUS_INVALID_DEVICE_REQUEST);
    let mut lam_buffer = buffer_with(0, &bytes(PAGE, 2));
    let (status, mut lam, fbo) = pair.b.build_lam(&mut lam_buffer);
    assert_eq!((status, fbo), (STATUS_SUCCESS, 0));
    let pages = lam_pages(&lam);
    assert_eq!(
        pair.b_qp
            .fast_register(2, &plain, &pages, 0, PAGE, 0x7000_0000, 0),
        STATUS_INVALID_PARAMETER
    );
    assert_empty(&pair.b_cq);

    // Both still work as what they are: B sends from each.
    assert_success!(
        pair.b_qp
            .fast_register(3, &fast, &pages, 0, PAGE, 0x7000_0000, 0)
    );
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    assert_success!(pair.a_qp.receive(4, &[sink.sge(0, PAGE)]));
    assert_success!(pair.a_qp.receive(5, &[sink.sge(PAGE, PAGE)]));
    let from_plain = buffer.sge(0x10, 0x300, plain.local_token());
    assert_success!(pair.b_qp.send(6, &[from_plain], 0));
    let from_fast = NdkSge {
        address: 0x7000_0000 + 0x20,
        length: 0x400,
        memory_region_token: fast.local_token(),
    };
    assert_success!(pair.b_qp.send(7, &[from_fast], 0));
    expect(&pair.b_cq, 6, STATUS_SUCCESS);
    expect(&pair.b_cq, 7, STATUS_SUCCESS);
    expect(&pair.a_cq, 4, STATUS_SUCCESS);
    expect(&pair.a_cq, 5, STATUS_SUCCESS);
    assert_eq!(&sink.bytes()[..0x300], &content[0x10..0x310]);
    assert_eq!(
        &sink.bytes()[PAGE..PAGE + 0x400],
        &lam_buffer.bytes()[0x20..0x420]
    );

    assert_closed([mw.close(), fast.close(), plain.close()]);
    pair.b.release_lam(&mut lam);
    teardown_with_regions(pair, [sink]);
}

/// M2: RegisterMr registers `Length` bytes from the first MDL's address over
/// a virtually contiguous chain: a peer's Write and Read crossing the MDL
/// boundary (and page boundaries) move exactly their bytes.
#[test]
fn m2_register_mr_spans_a_contiguous_mdl_chain() {
    let pair = Pair::new();
    let (before, mut buffer) = pattern_buffer((3 * PAGE, 3), 0x180);
    let split = 0x1234;
    let mut rest = tail_mdl(&mut buffer, split);
    chain(&mut buffer, split, &mut rest);
    let mr = pair.b_pd.mr(false);
    assert_success!(register_mdl(&mr, buffer.mdl(), 3 * PAGE, MR_REMOTE));
    let token = mr.remote_token();
    let src = Region::pattern(&pair.a_pd, PAGE, 9, 0);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);

    // A Write across the MDL boundary at 0x1234 and the page boundary.
    let (at, len) = (0x1100, 0x900);
    assert_success!(a_writes(
        &pair,
        src.sge(0x11, len),
        buffer.va() + at as u64,
        token
    ));
    assert_placed(buffer.bytes(), &before, at, &src.bytes()[0x11..0x11 + len]);
    // A Read of the last bytes of the chain, across the second MDL's pages.
    let now = buffer.bytes().to_vec();
    let (at, len) = (3 * PAGE - 0x700, 0x700);
    assert_success!(a_reads(
        &pair,
        sink.sge(0x30, len),
        buffer.va() + at as u64,
        token
    ));
    assert_eq!(&sink.bytes()[0x30..0x30 + len], &now[at..]);
    assert!(sink.bytes()[..0x30].iter().all(|&b| b == 0));
    assert!(sink.bytes()[0x30 + len..].iter().all(|&b| b == 0));

    assert_close(mr.close());
    teardown_with_regions(pair, [src, sink]);
}

/// A chain of MDLs virtually contiguous from the made-up index `va` (as
/// indexes only, M4), each mapped (`MDL_MAPPED_TO_SYSTEM_VA`) to its own
/// buffer, as the kernel maps each MDL of a chain on its own; each buffer
/// starts at the in-page offset of its MDL's index, as a mapping keeps it.
fn chain_mapped_apart(va: u64, lens: &[usize], seed: u8) -> (Vec<Buffer>, Vec<Mdl>) {
    let mut at = va;
    let mut buffers = Vec::new();
    let mut mdls: Vec<Mdl> = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let offset = usize::try_from(at % PAGE64).unwrap();
        let seed = seed.wrapping_add(u8::try_from(i).unwrap());
        let mut buffer = Buffer::pattern(len, offset, seed);
        let mut mdl = *mdl_nowhere(at, len as u64);
        mdl.mdl_flags = MDL_MAPPED_TO_SYSTEM_VA;
        mdl.mapped_system_va = buffer.bytes_mut().as_mut_ptr().cast();
        buffers.push(buffer);
        mdls.push(mdl);
        at += len as u64;
    }
    // Linked by address: the vector is not resized afterwards.
    let first = mdls.as_mut_ptr();
    for i in 1..mdls.len() {
        mdls[i - 1].next = first.wrapping_add(i);
    }
    (buffers, mdls)
}

/// Every byte of the buffers, in chain order.
fn chain_bytes(buffers: &[Buffer]) -> Vec<u8> {
    buffers.iter().flat_map(|b| b.bytes().to_vec()).collect()
}

/// M2: a chain whose MDLs are mapped apart (the kernel's usual case: each
/// MDL gets its own system mapping) registers as one region over its
/// indexes; a peer's Write and Read that start and end inside different
/// MDLs move exactly their bytes, in every buffer.
#[test]
fn m2_register_mr_over_a_chain_mapped_apart() {
    let pair = Pair::new();
    let va = 0x0000_4100_0000_0000 + 0x321;
    let lens = [0x1234, 0x1AB, 0x2000];
    let total: usize = lens.iter().sum();
    let (buffers, mut mdls) = chain_mapped_apart(va, &lens, 11);
    let before = chain_bytes(&buffers);
    let mr = pair.b_pd.mr(false);
    assert_success!(register_mdl(&mr, mdls.as_mut_ptr(), total, MR_REMOTE));
    let token = mr.remote_token();
    let src = Region::pattern(&pair.a_pd, PAGE, 9, 0);
    let sink = Region::new(&pair.a_pd, 2 * PAGE, 0, MR_LOCAL_WRITE);
    // A Write from inside the first MDL to inside the third.
    let (at, len) = (0x1100, 0x400);
    assert_success!(a_writes(&pair, src.sge(0x11, len), va + at as u64, token));
    let now = chain_bytes(&buffers);
    assert_placed(&now, &before, at, &src.bytes()[0x11..0x11 + len]);
    // A Read of 0x1200..0x1F00, across both boundaries.
    let (at, len) = (0x1200, 0xD00);
    assert_success!(a_reads(&pair, sink.sge(0x30, len), va + at as u64, token));
    assert_eq!(&sink.bytes()[0x30..0x30 + len], &now[at..at + len]);
    assert_close(mr.close());
    teardown_with_regions(pair, [src, sink]);
    drop(mdls);
}

/// M2: a chain that is not virtually contiguous over `Length` — a gap, an
/// overlap, or the next MDL in another buffer — is refused with
/// `STATUS_INVALID_PARAMETER`; the MR stays unregistered and usable.
#[test]
fn m2_register_mr_refuses_a_chain_that_is_not_contiguous() {
    let adapter = open_adapter(own_address());
    let pd = adapter.pd();
    let mr = pd.mr(false);
    let mut buffer = Buffer::pattern(2 * PAGE, 0x10, 4);
    let mut other = Buffer::new(PAGE, 0, 0);
    let first_addr = buffer.bytes_mut().as_mut_ptr();
    for (name, mut next) in [
        ("gap", mdl_at(first_addr.wrapping_add(0x1010), PAGE)),
        ("overlap", mdl_at(first_addr.wrapping_add(0x0FF0), PAGE)),
        (
            "another buffer",
            mdl_at(other.bytes_mut().as_mut_ptr(), PAGE),
        ),
    ] {
        chain(&mut buffer, 0x1000, &mut next);
        assert_eq!(
            register_mdl(&mr, buffer.mdl(), 0x1000 + PAGE, MR_LOCAL_WRITE),
            STATUS_INVALID_PARAMETER,
            "{name}"
        );
        assert_eq!((mr.local_token(), mr.remote_token()), (0, 0), "{name}");
    }
    // Within the first MDL the chain does not matter...
    let mut next = mdl_at(first_addr.wrapping_add(0x1010), PAGE);
    chain(&mut buffer, 0x1000, &mut next);
    assert_success!(register_mdl(&mr, buffer.mdl(), 0x1000, MR_LOCAL_WRITE));
    assert_success!(mr.deregister());
    // ... and the contiguous chain registers.
    let mut next = tail_mdl(&mut buffer, 0x1000);
    chain(&mut buffer, 0x1000, &mut next);
    assert_success!(register_mdl(&mr, buffer.mdl(), 2 * PAGE, MR_LOCAL_WRITE));
    assert_closed([mr.close(), pd.close()]);
    adapter.close();
}

/// M3 (consumer): a chain shorter than `Length` breaks the rule; the
/// provider refuses it (`STATUS_INVALID_PARAMETER`) instead of reaching past
/// the described bytes.
#[test]
fn m3_a_chain_shorter_than_length_is_refused() {
    let adapter = open_adapter(own_address());
    let pd = adapter.pd();
    let mr = pd.mr(false);
    let mut buffer = Buffer::pattern(PAGE + 0x100, 0x300, 5);
    let len = buffer.len;
    assert_eq!(
        register_mdl(&mr, buffer.mdl(), len + 1, MR_LOCAL_WRITE),
        STATUS_INVALID_PARAMETER
    );
    let mut next = mdl_at(buffer.bytes_mut()[0x800..].as_mut_ptr(), 0x100);
    chain(&mut buffer, 0x800, &mut next);
    assert_eq!(
        register_mdl(&mr, buffer.mdl(), 0x901, MR_LOCAL_WRITE),
        STATUS_INVALID_PARAMETER
    );
    assert_success!(register_mdl(&mr, buffer.mdl(), 0x900, MR_LOCAL_WRITE));
    assert_closed([mr.close(), pd.close()]);
    adapter.close();
}

/// M3 (consumer): a consumer that rewrites its MDL while the region is
/// registered breaks the rule; the provider keeps using the mapping it
/// captured at registration and never follows the rewritten header.
#[test]
fn m3_registration_keeps_its_mapping_when_the_mdl_is_rewritten() {
    let pair = Pair::new();
    let (before, mut buffer) = pattern_buffer((2 * PAGE, 6), 0x2A0);
    let mut decoy = Buffer::new(2 * PAGE, 0x2A0, 0xEE);
    let mr = pair.b_pd.mr(false);
    assert_success!(register_mdl(&mr, buffer.mdl(), 2 * PAGE, MR_REMOTE));
    let token = mr.remote_token();
    let base = buffer.va();
    // The consumer points its MDL elsewhere.
    let decoy_start = decoy.bytes_mut().as_mut_ptr();
    let mdl = buffer.mdl();
    // SAFETY: the test's own MDL; the provider holds no reference to it.
    unsafe { (*mdl).start_va = decoy_start.wrapping_sub(0x2A0).cast() };
    // SAFETY: as above.
    unsafe { (*mdl).byte_count = 8 };

    let src = Region::pattern(&pair.a_pd, 2 * PAGE, 7, 0);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    let (at, len) = (0xD00, 0x200);
    assert_success!(a_writes(&pair, src.sge(3, len), base + at as u64, token));
    assert_placed(buffer.bytes(), &before, at, &src.bytes()[3..3 + len]);
    assert!(decoy.bytes().iter().all(|&b| b == 0xEE), "decoy untouched");
    let now = buffer.bytes().to_vec();
    assert_success!(a_reads(&pair, sink.sge(0, 0x800), base + 0x1100, token));
    assert_eq!(&sink.bytes()[..0x800], &now[0x1100..0x1900]);

    assert_close(mr.close());
    teardown_with_regions(pair, [src, sink]);
}

/// M4: the MDL's virtual address is only the index of the region's first
/// byte. The MDL here says (as a kernel MDL mapped to system space does) that
/// its bytes are at `MappedSystemVa`, while its virtual address is that of a
/// decoy buffer: Writes, Reads, local SGEs and a Bind all use the index,
/// move the real bytes, and never touch the decoy. The real address is no
/// index: a Write there fails (M34) and ends the connection.
#[test]
fn m4_mdl_virtual_address_is_only_an_index() {
    let pair = Pair::new();
    let offset = 0x2C0;
    let (before, mut real) = pattern_buffer((2 * PAGE, 8), offset);
    let mut decoy = Buffer::new(2 * PAGE, offset, 0xEE);
    let index = decoy.va();
    let real_first = real.bytes_mut().as_mut_ptr();
    let decoy_first = decoy.bytes_mut().as_mut_ptr();
    let mdl = real.mdl();
    // SAFETY: the test's own MDL, not in use by any call.
    unsafe { (*mdl).mdl_flags = MDL_MAPPED_TO_SYSTEM_VA };
    // SAFETY: as above.
    unsafe { (*mdl).mapped_system_va = real_first.cast() };
    // SAFETY: as above.
    unsafe { (*mdl).start_va = decoy_first.wrapping_sub(offset).cast() };
    let mr = pair.b_pd.mr(false);
    assert_success!(register_mdl(&mr, mdl, 2 * PAGE, MR_REMOTE));
    let token = mr.remote_token();
    let src = Region::pattern(&pair.a_pd, 2 * PAGE, 10, 0);
    let sink = Region::new(&pair.a_pd, 2 * PAGE, 0, MR_LOCAL_WRITE);

    // A Write at the index, across the real buffer's page boundary.
    let (at, len) = (0xC00, 0x900);
    assert_success!(a_writes(
        &pair,
        src.sge(0x40, len),
        index + at as u64,
        token
    ));
    assert_placed(real.bytes(), &before, at, &src.bytes()[0x40..0x40 + len]);
    let now = real.bytes().to_vec();
    // A Read at the index.
    assert_success!(a_reads(&pair, sink.sge(0, 0x500), index + 0x100, token));
    assert_eq!(&sink.bytes()[..0x500], &now[0x100..0x600]);
    // A local SGE at the index.
    assert_success!(pair.a_qp.receive(1, &[sink.sge(PAGE, 0x80)]));
    let local = NdkSge {
        address: index + 0x20,
        length: 0x80,
        memory_region_token: mr.local_token(),
    };
    assert_success!(pair.b_qp.send(2, &[local], 0));
    expect(&pair.b_cq, 2, STATUS_SUCCESS);
    expect(&pair.a_cq, 1, STATUS_SUCCESS);
    assert_eq!(&sink.bytes()[PAGE..PAGE + 0x80], &now[0x20..0xA0]);
    // A window bound at the index (M18: the address is never dereferenced).
    let mw = pair.b_pd.mw();
    assert_success!(
        pair.b_qp
            .bind(3, &mr, &mw, index + 0x1000, 0x200, OP_REMOTE_WRITE)
    );
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    assert_success!(a_writes(
        &pair,
        src.sge(0x1000, 0x200),
        index + 0x1000,
        mw.remote_token()
    ));
    assert_placed(real.bytes(), &now, 0x1000, &src.bytes()[0x1000..0x1200]);
    assert!(decoy.bytes().iter().all(|&b| b == 0xEE), "decoy untouched");

    // The real address is no index of the region.
    expect_write_refused(
        &pair,
        &real,
        src.sge(0, 0x10),
        real.va(),
        token,
        STATUS_REMOTE_RESOURCES,
    );
    assert!(decoy.bytes().iter().all(|&b| b == 0xEE), "decoy untouched");

    assert_closed([mw.close(), mr.close()]);
    teardown_closing(pair, [src, sink]);
}

/// M5: addresses within a registered region are its virtual-address
/// indexes, not offsets from zero: a Bind at a zero-based address is refused
/// inline, a FastRegister based at 0 with a nonzero FBO too, and a peer's
/// Write at a zero-based address fails without touching the region.
#[test]
fn m5_addresses_are_indexes_never_offsets_from_zero() {
    let pair = Pair::new();
    let (before, target) = b_region(&pair, (2 * PAGE, 11), 0x10, MR_REMOTE);
    let src = Region::pattern(&pair.a_pd, PAGE, 12, 0);
    let mw = pair.b_pd.mw();
    assert_eq!(
        pair.b_qp
            .bind(1, &target.mr, &mw, 0x100, 0x100, OP_REMOTE_READ),
        STATUS_INVALID_PARAMETER
    );
    let frmr = Frmr::new(&pair.b, &pair.b_pd, 2 * PAGE, 0, 2, true);
    assert_eq!(
        pair.b_qp
            .fast_register(2, &frmr.mr, &frmr.pages, 0x10, PAGE, 0, OP_REMOTE_WRITE),
        STATUS_INVALID_PARAMETER
    );
    assert_empty(&pair.b_cq);
    // The index works...
    assert_success!(a_writes(
        &pair,
        src.sge(0, 0x20),
        target.remote(0x30),
        target.token()
    ));
    assert_placed(target.bytes(), &before, 0x30, &src.bytes()[..0x20]);
    // ... the zero-based address does not.
    expect_write_refused(
        &pair,
        &target.buffer,
        src.sge(0, 0x20),
        0x30,
        target.token(),
        STATUS_REMOTE_RESOURCES,
    );
    assert_close(mw.close());
    teardown_closing_frmr(pair, frmr, [target, src]);

    // The same for a local SGE: zero-based, it fails with an access
    // violation and no byte moves.
    let pair = Pair::new();
    let target = Region::of(&pair.b_pd, buffer_with(0x10, &before), 0);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(pair.a_qp.receive(3, &[sink.sge(0, 0x40)]));
    let zero_based = NdkSge {
        address: 0x30,
        length: 0x40,
        memory_region_token: target.mr.local_token(),
    };
    expect_send_refused_locally(
        (&pair.b_qp, &pair.b_cq),
        4,
        zero_based,
        (&pair.a_cq, 3),
        &sink,
    );
    teardown_ended(pair, [target, sink]);
}

// ---------------------------------------------------------------------------
// M6–M9: rights
// ---------------------------------------------------------------------------

/// What B's memory is, for the rights probes.
enum Target {
    /// A registered region.
    Registered(Region),
    /// A fast-registered MR over LAM pages.
    Fast(Frmr),
    /// A window over a region (remote access only).
    Window(Region, Mw),
}

impl Target {
    /// The index of the first byte the probes use.
    fn base(&self) -> u64 {
        match self {
            Self::Registered(r) | Self::Window(r, _) => r.remote(0),
            Self::Fast(f) => f.base(),
        }
    }

    fn local_token(&self) -> u32 {
        match self {
            Self::Registered(r) => r.mr.local_token(),
            Self::Fast(f) => f.mr.local_token(),
            Self::Window(..) => unreachable!("a window has no local token"),
        }
    }

    fn remote_token(&self) -> u32 {
        match self {
            Self::Registered(r) => r.token(),
            Self::Fast(f) => f.mr.remote_token(),
            Self::Window(_, mw) => mw.remote_token(),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Self::Registered(r) | Self::Window(r, _) => r.bytes(),
            Self::Fast(f) => f.buffer.bytes(),
        }
    }

    fn close(self, adapter: &Adapter) {
        match self {
            Self::Registered(r) => r.close(),
            Self::Fast(f) => f.close(adapter),
            Self::Window(r, mw) => {
                assert_close(mw.close());
                r.close();
            }
        }
    }
}

/// How the probes use B's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// B sends from it (local read).
    LocalRead,
    /// B receives into it (local write).
    ReceiveSink,
    /// B RDMA-reads into it (local write).
    ReadSink,
    /// A RDMA-reads from it.
    RemoteRead,
    /// A RDMA-writes into it.
    RemoteWrite,
}

const REMOTE_USES: [Use; 2] = [Use::RemoteRead, Use::RemoteWrite];

/// On a pair of its own, makes B's memory with `make` and uses 0x180 bytes
/// of it, 0x10 bytes in, as `how` says. Returns whether the use was granted:
/// then every byte moved is checked; otherwise the exact failure statuses,
/// the untouched memory and the end of the connection are.
fn probe(make: &dyn Fn(&Pair) -> Target, how: Use) -> bool {
    const AT: usize = 0x10;
    const LEN: usize = 0x180;
    let pair = Pair::new();
    let a_src = Region::pattern(&pair.a_pd, PAGE, 0x33, MR_REMOTE);
    let a_sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    let target = make(&pair);
    let before = target.bytes().to_vec();
    let at = target.base() + AT as u64;
    let local = || NdkSge {
        address: at,
        length: LEN as u32,
        memory_region_token: target.local_token(),
    };
    let granted = match how {
        Use::LocalRead => {
            assert_success!(pair.a_qp.receive(1, &[a_sink.sge(0, LEN)]));
            assert_success!(pair.b_qp.send(2, &[local()], 0));
            let sent = wait_results_ex(&pair.b_cq, 1)[0].status;
            if sent == STATUS_SUCCESS {
                expect(&pair.a_cq, 1, STATUS_SUCCESS);
                assert_eq!(&a_sink.bytes()[..LEN], &before[AT..AT + LEN]);
            } else {
                assert_eq!(sent, STATUS_ACCESS_VIOLATION);
                expect(&pair.a_cq, 1, STATUS_CANCELLED);
            }
            sent == STATUS_SUCCESS
        }
        Use::ReceiveSink => {
            assert_success!(pair.b_qp.receive(3, &[local()]));
            assert_success!(pair.a_qp.send(4, &[a_src.sge(0, LEN)], 0));
            let sent = wait_results_ex(&pair.a_cq, 1)[0].status;
            let received = wait_results_ex(&pair.b_cq, 1)[0].status;
            if received == STATUS_SUCCESS {
                assert_success!(sent);
                assert_placed(target.bytes(), &before, AT, &a_src.bytes()[..LEN]);
            } else {
                assert_eq!(
                    (sent, received),
                    (
                        Transport::default().peer_refused(STATUS_REMOTE_RESOURCES),
                        STATUS_ACCESS_VIOLATION
                    )
                );
                assert_eq!(target.bytes(), &before[..]);
            }
            received == STATUS_SUCCESS
        }
        Use::ReadSink => {
            let remote = a_src.remote(0x40);
            assert_success!(pair.b_qp.read(5, &[local()], remote, a_src.token(), 0));
            let read = wait_results_ex(&pair.b_cq, 1)[0].status;
            if read == STATUS_SUCCESS {
                assert_placed(
                    target.bytes(),
                    &before,
                    AT,
                    &a_src.bytes()[0x40..0x40 + LEN],
                );
            } else {
                assert_eq!(read, STATUS_ACCESS_VIOLATION);
                assert_eq!(target.bytes(), &before[..]);
            }
            read == STATUS_SUCCESS
        }
        Use::RemoteRead => {
            let read = a_reads(&pair, a_sink.sge(0, LEN), at, target.remote_token());
            if read == STATUS_SUCCESS {
                assert_eq!(&a_sink.bytes()[..LEN], &before[AT..AT + LEN]);
            } else {
                assert_eq!(read, STATUS_ACCESS_VIOLATION);
            }
            read == STATUS_SUCCESS
        }
        Use::RemoteWrite => {
            let written = a_writes(&pair, a_src.sge(0, LEN), at, target.remote_token());
            // Over iWARP the Write completes once sent, whatever B decides
            // (`Transport::peer_refused`): B's verdict is the bytes placed
            // (the harness waits for them) or its Terminate.
            let placed = match Transport::default() {
                Transport::Local => written == STATUS_SUCCESS,
                Transport::Iwarp => target.bytes() != &before[..],
            };
            if placed {
                assert_success!(written);
                assert_placed(target.bytes(), &before, AT, &a_src.bytes()[..LEN]);
            } else {
                assert_eq!(
                    written,
                    Transport::default().peer_refused(STATUS_ACCESS_VIOLATION)
                );
                assert_eq!(target.bytes(), &before[..]);
            }
            placed
        }
    };
    if !granted {
        assert_ended(&pair);
    }
    pair.assert_cqs_empty();
    target.close(&pair.b);
    teardown_closing(pair, [a_src, a_sink]);
    granted
}

/// The uses of `uses` that `make` grants.
fn granted(make: &dyn Fn(&Pair) -> Target, uses: &[Use]) -> Vec<Use> {
    uses.iter()
        .copied()
        .filter(|&how| probe(make, how))
        .collect()
}

/// A registered region on B: 0x80 bytes into a page, two pages.
fn registered(flags: u32) -> impl Fn(&Pair) -> Target {
    move |pair: &Pair| {
        Target::Registered(Region::of(
            &pair.b_pd,
            buffer_with(0x80, &bytes(2 * PAGE, 0x44)),
            flags,
        ))
    }
}

/// M6: local read is always granted; `ALLOW_LOCAL_WRITE` grants local write
/// (receive and read sinks), `ALLOW_REMOTE_READ` remote read, and
/// `ALLOW_REMOTE_WRITE` (0x5) remote write *and* local write.
#[test]
fn m6_register_flags_grant_their_rights_and_remote_write_implies_local_write() {
    assert_rights(
        registered,
        (MR_LOCAL_WRITE, MR_REMOTE_READ, MR_REMOTE_WRITE),
        "NDK_MR_FLAG_*",
    );
}

/// M6, M7: the target `make` builds with no rights grants local read
/// only; with the local-write right (`rights.0`) local write too; with
/// remote read (`rights.1`) remote read; with remote write (`rights.2`)
/// remote write and local write; with both remote rights, every use.
fn assert_rights<T: Fn(&Pair) -> Target>(
    make: impl Fn(u32) -> T,
    (local_write, remote_read, remote_write): (u32, u32, u32),
    what: &str,
) {
    use Use::*;
    let all = [LocalRead, ReceiveSink, ReadSink, RemoteRead, RemoteWrite];
    for (flags, expected) in [
        (0, vec![LocalRead]),
        (local_write, vec![LocalRead, ReceiveSink, ReadSink]),
        (remote_read, vec![LocalRead, RemoteRead]),
        (
            remote_write,
            vec![LocalRead, ReceiveSink, ReadSink, RemoteWrite],
        ),
        (remote_read | remote_write, all.to_vec()),
    ] {
        assert_eq!(granted(&make(flags), &all), expected, "{what} {flags:#x}");
    }
}

/// A fast-registered MR on B over two LAM pages, with `NDK_OP_FLAG_*`
/// rights `flags`.
fn fast_registered(flags: u32) -> impl Fn(&Pair) -> Target {
    move |pair: &Pair| {
        let mut frmr = Frmr::new(&pair.b, &pair.b_pd, 2 * PAGE, 0, 2, true);
        fill(&mut frmr.buffer, 0x45);
        assert_success!(frmr.post(&pair.b_qp, 0xF5, flags));
        expect(&pair.b_cq, 0xF5, STATUS_SUCCESS);
        Target::Fast(frmr)
    }
}

/// A window on B over 0x200 bytes of a region with local write only, with
/// `NDK_OP_FLAG_*` rights `flags`.
fn window(flags: u32) -> impl Fn(&Pair) -> Target {
    move |pair: &Pair| {
        let r = Region::of(
            &pair.b_pd,
            buffer_with(0x80, &bytes(2 * PAGE, 0x46)),
            MR_LOCAL_WRITE,
        );
        let mw = pair.b_pd.mw();
        assert_success!(pair.b_qp.bind(0xB1, &r.mr, &mw, r.remote(0), 0x200, flags));
        expect(&pair.b_cq, 0xB1, STATUS_SUCCESS);
        Target::Window(r, mw)
    }
}

/// M7: the same for fast registration and binding: `ALLOW_LOCAL_WRITE`
/// (0x10) grants local write, `ALLOW_REMOTE_READ` remote read, and
/// `ALLOW_REMOTE_WRITE` (0x30) remote write and local write.
#[test]
fn m7_fast_register_and_bind_flags_grant_their_rights_and_remote_write_implies_local_write() {
    use Use::*;
    assert_rights(
        fast_registered,
        (OP_LOCAL_WRITE, OP_REMOTE_READ, OP_REMOTE_WRITE),
        "FastRegister NDK_OP_FLAG_*",
    );
    for (flags, expected) in [
        (OP_REMOTE_READ, vec![RemoteRead]),
        (OP_REMOTE_WRITE, vec![RemoteWrite]),
        (OP_REMOTE_READ | OP_REMOTE_WRITE, REMOTE_USES.to_vec()),
    ] {
        assert_eq!(
            granted(&window(flags), &REMOTE_USES),
            expected,
            "Bind NDK_OP_FLAG_* {flags:#x}"
        );
    }
}

/// M8 (consumer) and M9: this adapter reports RDMA_READ_SINK_NOT_REQUIRED,
/// so a consumer may leave the READ_SINK flags out: an RDMA Read lands in a
/// region registered with local write alone and in a fast-registered MR
/// with ALLOW_LOCAL_WRITE alone, exactly as in ones that carry the flags.
#[test]
fn m8_read_sinks_work_with_and_without_the_read_sink_flags() {
    let flags = AdapterFlags::from_bits_retain(info().adapter_flags);
    assert!(flags.contains(AdapterFlags::RDMA_READ_SINK_NOT_REQUIRED));
    for mr_flags in [MR_LOCAL_WRITE, MR_LOCAL_WRITE | MR_READ_SINK] {
        assert!(
            probe(&registered(mr_flags), Use::ReadSink),
            "RegisterMr {mr_flags:#x}"
        );
    }
    for op_flags in [OP_LOCAL_WRITE, OP_LOCAL_WRITE | READ_SINK] {
        assert!(
            probe(&fast_registered(op_flags), Use::ReadSink),
            "FastRegister {op_flags:#x}"
        );
    }
}

/// M9: the adapter reports RDMA_READ_SINK_NOT_REQUIRED and never refuses a
/// registration or fast registration because a READ_SINK flag is present,
/// alone or with others; privileged-token (LAM) buffers are read sinks too.
#[test]
fn m9_read_sink_flags_are_never_refused_and_lam_buffers_are_read_sinks() {
    let pair = Pair::new();
    let flags = pair.b.flags();
    assert!(flags.contains(AdapterFlags::RDMA_READ_SINK_NOT_REQUIRED));
    let mut buffer = Buffer::new(PAGE, 0x10, 0);
    for flags in [
        MR_READ_SINK,
        MR_READ_SINK | MR_LOCAL_WRITE,
        MR_READ_SINK | MR_REMOTE_READ,
        MR_READ_SINK | MR_REMOTE_READ | MR_REMOTE_WRITE,
    ] {
        let mr = pair.b_pd.mr(false);
        assert_success!(mr.register(&mut buffer, flags), "{flags:#x}");
        assert_close(mr.close());
    }
    let frmr = Frmr::new(&pair.b, &pair.b_pd, PAGE, 0, 1, true);
    let all_rights = [
        READ_SINK,
        READ_SINK | OP_LOCAL_WRITE,
        READ_SINK | OP_REMOTE_READ,
        READ_SINK | OP_REMOTE_WRITE | OP_REMOTE_READ,
    ];
    expect_fast_registers(&pair, &frmr, &all_rights, 10);
    frmr.close(&pair.b);
    // READ_SINK is no remote right: an MR initialized without RemoteAccess
    // takes it.
    let local_only = Frmr::new(&pair.b, &pair.b_pd, PAGE, 0, 1, false);
    expect_fast_registers(
        &pair,
        &local_only,
        &[READ_SINK, READ_SINK | OP_LOCAL_WRITE],
        40,
    );
    local_only.close(&pair.b);

    // A Read into privileged-token SGEs over a LAM, across two pages.
    let src = Region::pattern(&pair.a_pd, 2 * PAGE, 13, MR_REMOTE);
    let mut sink = Buffer::new(PAGE + 0x200, 0x700, 0);
    let (status, mut lam, fbo) = pair.b.build_lam(&mut sink);
    assert_eq!((status, fbo), (STATUS_SUCCESS, 0x700));
    let sges = lam_sges(
        &lam_pages(&lam),
        fbo,
        0x80,
        PAGE,
        pair.b_pd.privileged_token(),
    );
    assert_eq!(sges.len(), 2);
    assert_success!(pair.b_qp.read(30, &sges, src.remote(0x123), src.token(), 0));
    expect(&pair.b_cq, 30, STATUS_SUCCESS);
    assert_placed(
        sink.bytes(),
        &vec![0; PAGE + 0x200],
        0x80,
        &src.bytes()[0x123..0x123 + PAGE],
    );
    pair.b.release_lam(&mut lam);
    teardown_with_regions(pair, [src]);
}

// ---------------------------------------------------------------------------
// M10–M12: limits, deregistration, tokens
// ---------------------------------------------------------------------------

/// Where the made-up regions of M10 are: no memory backs them, so only a
/// provider that never touches a region it does not move data for survives.
const NOWHERE: u64 = 0x0000_4000_0000_0000;

/// A chain of MDLs over `len` bytes from [`NOWHERE`], in pieces of at most
/// 2 GiB, linked; the vector must outlive every use of the chain.
fn nowhere_chain(len: u64) -> Vec<Mdl> {
    let piece = 1_u64 << 31;
    let mut mdls: Vec<Mdl> = (0..len.div_ceil(piece))
        .map(|i| *mdl_nowhere(NOWHERE + i * piece, piece.min(len - i * piece)))
        .collect();
    // Linked by address: the vector is not resized afterwards.
    let first = mdls.as_mut_ptr();
    for i in 1..mdls.len() {
        mdls[i - 1].next = first.wrapping_add(i);
    }
    mdls
}

/// M10: a registration longer than MaxRegistrationSize is refused with
/// `STATUS_INVALID_PARAMETER` (one of exactly that size is not), and so is a
/// window longer than MaxWindowSize (one of exactly that size binds). The
/// regions are made-up address ranges: nothing is ever read or written.
#[test]
fn m10_registrations_and_windows_above_the_adapter_limits_are_refused() {
    let pair = Pair::new();
    let info = pair.b.info();
    let max = info.max_registration_size as u64;
    let mut chain = nowhere_chain(max + PAGE64);
    let first: *mut Mdl = chain.as_mut_ptr();
    let too_long = pair.b_pd.mr(false);
    assert_eq!(
        register_mdl(
            &too_long,
            first,
            info.max_registration_size + 1,
            MR_LOCAL_WRITE
        ),
        STATUS_INVALID_PARAMETER
    );
    assert_eq!(too_long.local_token(), 0);
    let largest = pair.b_pd.mr(false);
    assert_success!(register_mdl(
        &largest,
        first,
        info.max_registration_size,
        MR_LOCAL_WRITE
    ));
    let window_max = info.max_window_size.min(info.max_registration_size);
    let mw = pair.b_pd.mw();
    assert_eq!(
        pair.b_qp.bind(
            1,
            &largest,
            &mw,
            NOWHERE,
            info.max_window_size + 1,
            OP_REMOTE_WRITE
        ),
        STATUS_INVALID_PARAMETER
    );
    assert_empty(&pair.b_cq);
    assert_success!(
        pair.b_qp
            .bind(2, &largest, &mw, NOWHERE, window_max, OP_REMOTE_WRITE)
    );
    expect(&pair.b_cq, 2, STATUS_SUCCESS);
    assert_success!(pair.b_qp.invalidate(3, mw.header(), 0));
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    assert_closed([mw.close(), largest.close(), too_long.close()]);
    drop(chain);
    pair.teardown();
}

/// M11: once DeregisterMr has completed, the MR's old remote token grants
/// no access: a peer's Write with it fails with STATUS_ACCESS_VIOLATION,
/// touches nothing, and ends the connection — even after the MR was
/// registered again (with fresh tokens that work).
#[test]
fn m11_old_remote_token_is_refused_after_deregister_mr() {
    // A's Write at 0x10 of B's `target` under its `old` token is refused
    // and moves nothing (M34).
    let refused = |pair: &Pair, target: &Region, local: NdkSge, old: u32| {
        let remote = target.remote(0x10);
        expect_write_refused(
            pair,
            &target.buffer,
            local,
            remote,
            old,
            STATUS_ACCESS_VIOLATION,
        );
    };
    let pair = Pair::new();
    let (before, mut target) = b_region(&pair, (2 * PAGE, 14), 0x90, MR_REMOTE);
    let src = Region::pattern(&pair.a_pd, PAGE, 15, 0);
    let old = target.token();
    assert_success!(a_writes(&pair, src.sge(0, 0x100), target.remote(0x10), old));
    assert_success!(target.mr.deregister());
    target.bytes_mut().copy_from_slice(&before);
    assert_success!(target.mr.register(&mut target.buffer, MR_REMOTE));
    let new = target.token();
    assert_ne!(new, old);
    assert_success!(a_writes(&pair, src.sge(0, 0x100), target.remote(0x10), new));
    assert_placed(target.bytes(), &before, 0x10, &src.bytes()[..0x100]);
    refused(&pair, &target, src.sge(0x100, 0x100), old);
    teardown_closing(pair, [target, src]);

    // Without registering again.
    let pair = Pair::new();
    let target = Region::of(&pair.b_pd, buffer_with(0x90, &before), MR_REMOTE);
    let src = Region::pattern(&pair.a_pd, PAGE, 16, 0);
    let old = target.token();
    assert_success!(target.mr.deregister());
    assert_eq!(target.bytes(), &before[..]);
    refused(&pair, &target, src.sge(0, 0x100), old);
    teardown_closing(pair, [target, src]);
}

/// M11: once DeregisterMr has completed, the MR's old local token is
/// refused too: a Send from it fails with STATUS_ACCESS_VIOLATION and no
/// byte reaches the peer.
#[test]
fn m11_old_local_token_is_refused_after_deregister_mr() {
    let pair = Pair::new();
    let target = Region::of(&pair.b_pd, buffer_with(0, &bytes(PAGE, 17)), 0);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    let old = target.sge(0, 0x100);
    assert_success!(target.mr.deregister());
    assert_success!(pair.a_qp.receive(1, &[sink.sge(0, PAGE)]));
    expect_send_refused_locally((&pair.b_qp, &pair.b_cq), 2, old, (&pair.a_cq, 1), &sink);
    teardown_ended(pair, [target, sink]);
}

/// M11, L8: DeregisterMr while a peer's Writes stream into the region may
/// pend until the DMA in flight has ended (then its completion runs once,
/// with STATUS_SUCCESS); either way, once it has completed, the next Write
/// with the token fails with STATUS_ACCESS_VIOLATION: the Writes complete
/// as successes, then at most one failure, then cancellations.
#[test]
fn m11_deregister_mr_during_dma_completes_and_then_refuses_the_token() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pair = Pair::new();
    let len = 4 << 20;
    let target = Region::of(&pair.b_pd, Buffer::new(len, 0, 0), MR_REMOTE);
    let src = Region::pattern(&pair.a_pd, len, 61, 0);
    let (remote, token) = (target.remote(0), target.token());
    let deregistered = AtomicBool::new(false);
    let (a_qp, sge) = (&pair.a_qp, src.sge(0, len));
    // The first Write completes, and has landed (over iWARP it completes
    // once sent), before the stream of the others and the deregistration.
    assert_success!(a_qp.write(0, &[sge], remote, token, 0));
    let first = pair.a_cq.wait_results(1);
    assert_success!(first[0].status);
    wait_landed();
    let posted = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut posted = 1_usize;
            loop {
                // Stay well below the CQ's depth (1024): nobody reaps meanwhile.
                wait_until("the deregistration", || {
                    posted < 256 || deregistered.load(Ordering::SeqCst)
                });
                let last = deregistered.load(Ordering::SeqCst);
                // While the initiator queue is full (over iWARP the stream
                // drains it), post again.
                let status = wait_some("the initiator queue stays full", || {
                    Some(a_qp.write(posted, &[sge], remote, token, 0))
                        .filter(|&status| status != STATUS_NO_MORE_ENTRIES)
                });
                assert_success!(status);
                posted += 1;
                if last {
                    return posted;
                }
            }
        });
        // Deregister while the others stream.
        let completions = Signal::new();
        // SAFETY: a live MR; the signal outlives its completion (waited for
        // below).
        let returned = unsafe {
            (target.mr.d().ndk_deregister_mr)(target.mr.0, Some(on_status), completions.ctx())
        };
        assert!(returned == STATUS_SUCCESS || returned == STATUS_PENDING);
        assert_success!(completions.outcome(returned));
        deregistered.store(true, Ordering::SeqCst);
        let posted = writer.join().unwrap();
        assert_eq!(completions.count(), usize::from(returned == STATUS_PENDING));
        posted
    });
    let mut statuses = vec![STATUS_SUCCESS];
    statuses.extend(pair.a_cq.wait_results(posted - 1).iter().map(|r| r.status));
    let successes = statuses
        .iter()
        .take_while(|&&s| s == STATUS_SUCCESS)
        .count();
    // Over iWARP a Write completes once sent: the refused one succeeds too,
    // and B's refusal returns as its Terminate (`assert_ended` waits for
    // it), cancelling whatever was still queued behind.
    let refused = Transport::default().peer_refused(STATUS_ACCESS_VIOLATION);
    let cancelled_from = if refused == STATUS_SUCCESS {
        // The Write being sent when the Terminate arrived fails with it.
        successes + usize::from(statuses.get(successes) == Some(&STATUS_ACCESS_VIOLATION))
    } else {
        assert!(
            successes < posted,
            "the Write after the deregistration failed"
        );
        assert_eq!(statuses[successes], refused, "{statuses:x?}");
        successes + 1
    };
    assert!(
        statuses[cancelled_from..]
            .iter()
            .all(|&s| s == STATUS_CANCELLED),
        "{statuses:x?}"
    );
    assert_eq!(target.bytes(), src.bytes());
    teardown_ended(pair, [target, src]);
}

/// M12: an MR's local and remote tokens can be read once RegisterMr or
/// InitializeFastRegisterMr completed, and they are the tokens that work:
/// read right after InitializeFastRegisterMr, before any FastRegister, they
/// name the later mapping.
#[test]
fn m12_tokens_are_readable_once_registration_completed() {
    let pair = Pair::new();
    let (before, target) = b_region(&pair, (PAGE, 18), 0x44, MR_REMOTE);
    let (local, remote) = (target.mr.local_token(), target.token());
    assert!(local != 0 && remote != 0 && local != remote);
    assert_eq!(
        (target.mr.local_token(), target.token()),
        (local, remote),
        "stable"
    );
    let fast = pair.b_pd.mr(true);
    assert_success!(fast.init_fast(2, true));
    let (fast_local, fast_remote) = (fast.local_token(), fast.remote_token());
    assert!(fast_local != 0 && fast_remote != 0 && fast_local != fast_remote);
    assert!(![local, remote].contains(&fast_local) && ![local, remote].contains(&fast_remote));

    let src = Region::pattern(&pair.a_pd, PAGE, 19, 0);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    // The registered region's tokens.
    assert_success!(a_writes(
        &pair,
        src.sge(0, 0x80),
        target.remote(0x100),
        remote
    ));
    assert_placed(target.bytes(), &before, 0x100, &src.bytes()[..0x80]);
    assert_success!(pair.a_qp.receive(1, &[sink.sge(0, 0x80)]));
    let sge = target.buffer.sge(0x100, 0x80, local);
    assert_success!(pair.b_qp.send(2, &[sge], 0));
    expect(&pair.b_cq, 2, STATUS_SUCCESS);
    expect(&pair.a_cq, 1, STATUS_SUCCESS);
    assert_eq!(&sink.bytes()[..0x80], &src.bytes()[..0x80]);
    // The fast-register MR's tokens, read before its FastRegister.
    let mut lam_buffer = Buffer::new(2 * PAGE, 0, 0);
    let (status, mut lam, _) = pair.b.build_lam(&mut lam_buffer);
    assert_success!(status);
    let base = 0x10_0000_0000;
    fast_registers_lam(&pair, 3, &fast, &lam, (0, 2 * PAGE, base));
    assert_success!(a_writes(
        &pair,
        src.sge(0x200, 0x300),
        base + 0xF00,
        fast_remote
    ));
    assert_placed(
        lam_buffer.bytes(),
        &vec![0; 2 * PAGE],
        0xF00,
        &src.bytes()[0x200..0x500],
    );
    assert_success!(pair.a_qp.receive(4, &[sink.sge(0x100, 0x300)]));
    let sge = NdkSge {
        address: base + 0xF00,
        length: 0x300,
        memory_region_token: fast_local,
    };
    assert_success!(pair.b_qp.send(5, &[sge], 0));
    expect(&pair.b_cq, 5, STATUS_SUCCESS);
    expect(&pair.a_cq, 4, STATUS_SUCCESS);
    assert_eq!(&sink.bytes()[0x100..0x400], &src.bytes()[0x200..0x500]);

    assert_close(fast.close());
    pair.b.release_lam(&mut lam);
    teardown_with_regions(pair, [target, src, sink]);
}

// ---------------------------------------------------------------------------
// M13–M17: fast registration
// ---------------------------------------------------------------------------

/// M13: InitializeFastRegisterMr serves up to FRMRPageCount pages and fails
/// with STATUS_IMPLEMENTATION_LIMIT above; it may be called again, with
/// another page count, and the MR serves the latest one.
#[test]
fn m13_initialize_fast_register_mr_serves_up_to_frmr_page_count() {
    let pair = Pair::new();
    let most = pair.b.info().frmr_page_count;
    let fresh = pair.b_pd.mr(true);
    assert_eq!(fresh.init_fast(most + 1, true), STATUS_IMPLEMENTATION_LIMIT);
    assert_eq!(fresh.local_token(), 0, "nothing was initialized");
    let fast = pair.b_pd.mr(true);
    assert_success!(fast.init_fast(most, true));
    let tokens = (fast.local_token(), fast.remote_token());
    assert_eq!(fast.init_fast(most + 1, true), STATUS_IMPLEMENTATION_LIMIT);
    assert_eq!((fast.local_token(), fast.remote_token()), tokens);
    // Again, with 2 pages: a 3-page FastRegister no longer fits, 2 pages do.
    assert_success!(fast.init_fast(2, true));
    let mut buffer = Buffer::new(3 * PAGE, 0, 0);
    let (status, mut lam, _) = pair.b.build_lam(&mut buffer);
    assert_success!(status);
    let pages = lam_pages(&lam);
    let base = 0x20_0000_0000;
    assert_eq!(
        pair.b_qp
            .fast_register(1, &fast, &pages, 0, 3 * PAGE, base, OP_REMOTE_WRITE),
        STATUS_INVALID_PARAMETER
    );
    assert_success!(pair.b_qp.fast_register(
        2,
        &fast,
        &pages[..2],
        0,
        2 * PAGE,
        base,
        OP_REMOTE_WRITE
    ));
    expect(&pair.b_cq, 2, STATUS_SUCCESS);
    let src = Region::pattern(&pair.a_pd, 2 * PAGE, 20, 0);
    assert_success!(a_writes(&pair, src.sge(0, 2 * PAGE), base, tokens.1));
    assert_placed(buffer.bytes(), &vec![0; 3 * PAGE], 0, src.bytes());
    assert_closed([fresh.close(), fast.close()]);
    pair.b.release_lam(&mut lam);
    teardown_with_regions(pair, [src]);
}

/// An MR pointer that threads may share (the provider's objects may be used
/// from any thread, I6).
#[derive(Clone, Copy)]
struct SharedMr(*mut NdkMr);
// SAFETY: see above.
unsafe impl Send for SharedMr {}
// SAFETY: see above.
unsafe impl Sync for SharedMr {}

impl SharedMr {
    fn init_fast(self, pages: u32) -> NtStatus {
        let signal = Signal::new();
        // SAFETY: a live MR (the test closes it after joining the threads).
        let dispatch = unsafe { (*self.0).dispatch };
        // SAFETY: the provider's static table.
        let d = unsafe { &*dispatch };
        // SAFETY: as above.
        let status = unsafe {
            (d.ndk_initialize_fast_register_mr)(self.0, pages, 1, Some(on_status), signal.ctx())
        };
        signal.outcome(status)
    }
}

/// M13: InitializeFastRegisterMr may be called several times, concurrently
/// or one after another — on many MRs at once and on one MR from several
/// threads; the tokens stay, and the MR then serves a FastRegister.
#[test]
fn m13_initialize_fast_register_mr_may_run_concurrently_and_repeatedly() {
    let pair = Pair::new();
    let mrs: Vec<Mr> = (0..6).map(|_| pair.b_pd.mr(true)).collect();
    assert_success!(mrs[0].init_fast(16, true));
    let tokens = (mrs[0].local_token(), mrs[0].remote_token());
    let shared: Vec<SharedMr> = mrs.iter().map(|mr| SharedMr(mr.0)).collect();
    std::thread::scope(|scope| {
        for t in 0_usize..7 {
            // Threads 0 and 1 share MR 0; the others have one each.
            let mr = shared[t.saturating_sub(1)];
            scope.spawn(move || {
                for round in 0..25 {
                    let pages = 4 + (round + t) as u32 % 13;
                    assert_success!(mr.init_fast(pages));
                }
                assert_success!(mr.init_fast(16));
            });
        }
    });
    assert_eq!((mrs[0].local_token(), mrs[0].remote_token()), tokens);
    let mut buffer = Buffer::new(16 * PAGE, 0, 0);
    let (status, mut lam, _) = pair.b.build_lam(&mut buffer);
    assert_success!(status);
    let pages = lam_pages(&lam);
    for (i, mr) in mrs.iter().enumerate() {
        assert_success!(pair.b_qp.fast_register(
            i,
            mr,
            &pages,
            0,
            16 * PAGE,
            0x30_0000_0000,
            OP_LOCAL_WRITE
        ));
        expect(&pair.b_cq, i, STATUS_SUCCESS);
    }
    for mr in mrs {
        assert_close(mr.close());
    }
    pair.b.release_lam(&mut lam);
    pair.teardown();
}

/// M14: FRMRPageCount is at least 16, and a 16-page fast registration (the
/// pages in reverse order) maps every page: a peer's Write of all 16 pages
/// lands page by page where the page list says.
#[test]
fn m14_sixteen_page_fast_registration_maps_every_page() {
    let pair = Pair::new();
    assert!(pair.b.info().frmr_page_count >= NDK_MIN_FRMR_PAGE_COUNT);
    let frmr = Frmr::new(&pair.b, &pair.b_pd, 16 * PAGE, 0, 16, true);
    let reversed: Vec<u64> = frmr.pages.iter().rev().copied().collect();
    let base = 0x40_0000_0000;
    assert_success!(pair.b_qp.fast_register(
        1,
        &frmr.mr,
        &reversed,
        0,
        16 * PAGE,
        base,
        OP_REMOTE_WRITE | OP_REMOTE_READ
    ));
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    let src = Region::pattern(&pair.a_pd, 16 * PAGE, 21, 0);
    assert_success!(a_writes(
        &pair,
        src.sge(0, 16 * PAGE),
        base,
        frmr.mr.remote_token()
    ));
    for page in 0..16 {
        let mapped = 15 - page;
        assert_eq!(
            &frmr.buffer.bytes()[mapped * PAGE..(mapped + 1) * PAGE],
            &src.bytes()[page * PAGE..(page + 1) * PAGE],
            "page {page} of the region"
        );
    }
    let sink = Region::new(&pair.a_pd, 16 * PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(a_reads(
        &pair,
        sink.sge(0, 16 * PAGE),
        base,
        frmr.mr.remote_token()
    ));
    assert_eq!(sink.bytes(), src.bytes());
    teardown_with_frmr(pair, frmr, [src, sink]);
}

/// M15: a FastRegister asking for remote read or write on an MR initialized
/// without RemoteAccess fails inline with STATUS_ACCESS_VIOLATION (no
/// completion, the QP unharmed); local rights are fine; initialized again
/// with RemoteAccess, the MR takes remote rights.
#[test]
fn m15_remote_rights_need_remote_access_at_initialization() {
    let pair = Pair::new();
    let (frmr, before) = b_frmr_filled(&pair, (2 * PAGE, 2, false), 22);
    for (i, flags) in [
        OP_REMOTE_READ,
        OP_REMOTE_WRITE,
        OP_REMOTE_READ | OP_LOCAL_WRITE,
        OP_REMOTE_WRITE | READ_SINK,
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(
            frmr.post(&pair.b_qp, i, flags),
            STATUS_ACCESS_VIOLATION,
            "{flags:#x}"
        );
    }
    assert_empty(&pair.b_cq);
    assert_success!(frmr.post(&pair.b_qp, 10, OP_LOCAL_WRITE));
    expect(&pair.b_cq, 10, STATUS_SUCCESS);
    // Local write through the mapping: B receives into it.
    let src = Region::pattern(&pair.a_pd, PAGE, 23, 0);
    assert_success!(pair.b_qp.receive(11, &[frmr.sge(0xF80, 0x100)]));
    assert_success!(pair.a_qp.send(12, &[src.sge(0, 0x100)], 0));
    expect(&pair.a_cq, 12, STATUS_SUCCESS);
    expect(&pair.b_cq, 11, STATUS_SUCCESS);
    assert_placed(frmr.buffer.bytes(), &before, 0xF80, &src.bytes()[..0x100]);
    assert_success!(pair.b_qp.invalidate(13, frmr.mr.header(), 0));
    expect(&pair.b_cq, 13, STATUS_SUCCESS);
    // With RemoteAccess: remote read works.
    assert_success!(frmr.mr.init_fast(2, true));
    assert_success!(frmr.post(&pair.b_qp, 14, OP_REMOTE_READ));
    expect(&pair.b_cq, 14, STATUS_SUCCESS);
    let now = frmr.buffer.bytes().to_vec();
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(a_reads(
        &pair,
        sink.sge(0, 0x300),
        frmr.base() + 0xE80,
        frmr.mr.remote_token()
    ));
    assert_eq!(&sink.bytes()[..0x300], &now[0xE80..0x1180]);
    teardown_with_frmr(pair, frmr, [src, sink]);
}

/// M16: FastRegister maps page-aligned logical pages that need not be
/// adjacent — here pages 3, 0, 5, 1 of a six-page LAM — as one virtually
/// contiguous region whose first byte is FBO bytes into the first page,
/// based at FBO plus whole pages. A peer's Write of the whole region lands
/// page by page (nothing else moves), Reads across every page boundary
/// return it, and B's own local SGEs see the same region.
#[test]
fn m16_fast_register_maps_non_adjacent_pages_as_one_region() {
    let pair = Pair::new();
    let (frmr, before) = b_frmr_filled(&pair, (6 * PAGE, 4, true), 24);
    let order = [3_usize, 0, 5, 1];
    let pages: Vec<u64> = order.iter().map(|&p| frmr.pages[p]).collect();
    let fbo = 0x234_usize;
    let len = 4 * PAGE - fbo - 0x100;
    let base = 0x50_0000_0000 + fbo as u64;
    assert_success!(pair.b_qp.fast_register(
        1,
        &frmr.mr,
        &pages,
        fbo as u32,
        len,
        base,
        OP_REMOTE_READ | OP_REMOTE_WRITE
    ));
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    // Where byte `i` of the region lives in the buffer.
    let place = |i: usize| order[(fbo + i) / PAGE] * PAGE + (fbo + i) % PAGE;

    let src = Region::pattern(&pair.a_pd, 4 * PAGE, 25, 0);
    assert_success!(a_writes(
        &pair,
        src.sge(0, len),
        base,
        frmr.mr.remote_token()
    ));
    let mut expected = before.clone();
    for i in 0..len {
        expected[place(i)] = src.bytes()[i];
    }
    assert_eq!(frmr.buffer.bytes(), &expected[..]);
    // Reads across each page boundary of the region.
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    for boundary in [PAGE - fbo, 2 * PAGE - fbo, 3 * PAGE - fbo] {
        let start = boundary - 0x40;
        assert_success!(a_reads(
            &pair,
            sink.sge(0, 0x80),
            base + start as u64,
            frmr.mr.remote_token()
        ));
        assert_eq!(&sink.bytes()[..0x80], &src.bytes()[start..start + 0x80]);
    }
    // The first and the last byte of the region, and nothing beyond.
    assert_success!(a_reads(
        &pair,
        sink.sge(0x100, 1),
        base,
        frmr.mr.remote_token()
    ));
    assert_success!(a_reads(
        &pair,
        sink.sge(0x101, 1),
        base + len as u64 - 1,
        frmr.mr.remote_token()
    ));
    assert_eq!(
        &sink.bytes()[0x100..0x102],
        &[src.bytes()[0], src.bytes()[len - 1]]
    );
    // B's local SGE over the whole region, sent to A.
    let whole = Region::new(&pair.a_pd, 4 * PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(pair.a_qp.receive(2, &[whole.sge(0, len)]));
    let local = NdkSge {
        address: base,
        length: len as u32,
        memory_region_token: frmr.mr.local_token(),
    };
    assert_success!(pair.b_qp.send(3, &[local], 0));
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    expect(&pair.a_cq, 2, STATUS_SUCCESS);
    assert_eq!(&whole.bytes()[..len], &src.bytes()[..len]);
    // One byte past the end is outside the region (M34, P20).
    assert_eq!(
        a_reads(
            &pair,
            sink.sge(0, 2),
            base + len as u64 - 1,
            frmr.mr.remote_token()
        ),
        STATUS_REMOTE_RESOURCES
    );
    assert_eq!(frmr.buffer.bytes(), &expected[..]);
    assert_ended(&pair);
    teardown_closing_frmr(pair, frmr, [src, sink, whole]);
}

/// M16: a FastRegister whose geometry does not fit is refused inline with
/// STATUS_INVALID_PARAMETER, produces no completion and leaves the QP
/// unharmed: a length above AdapterPageCount × PAGE_SIZE − FBO, a base that
/// is not FBO plus whole pages (0 with a nonzero FBO), an FBO of a page or
/// more, more pages than the MR was initialized for, no pages. A base of 0
/// with an FBO of 0 is fine.
#[test]
fn m16_fast_register_refuses_a_geometry_that_does_not_fit() {
    let pair = Pair::new();
    let frmr = Frmr::new(&pair.b, &pair.b_pd, 5 * PAGE, 0, 4, true);
    let pages = &frmr.pages[..4];
    let b = 0x60_0000_0000_u64;
    let post = |pages: &[u64], fbo: u32, len: usize, base: u64| {
        pair.b_qp
            .fast_register(1, &frmr.mr, pages, fbo, len, base, OP_REMOTE_WRITE)
    };
    for (name, status) in [
        ("too long", post(pages, 0x10, 4 * PAGE - 0x10 + 1, b + 0x10)),
        ("too long without FBO", post(pages, 0, 4 * PAGE + 1, b)),
        ("base not FBO + pages", post(pages, 0x10, PAGE, b + 0x11)),
        ("base 0 with an FBO", post(pages, 0x10, PAGE, 0)),
        ("base without the FBO", post(pages, 0x10, PAGE, b)),
        ("FBO of a page", post(pages, PAGE as u32, PAGE, b + PAGE64)),
        (
            "more pages than initialized",
            post(&frmr.pages, 0, 5 * PAGE, b),
        ),
        ("no pages", post(&[], 0, 0x10, b)),
    ] {
        assert_eq!(status, STATUS_INVALID_PARAMETER, "{name}");
    }
    assert_empty(&pair.b_cq);
    assert_success!(post(pages, 0, 4 * PAGE, 0));
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    let src = a_writes_pattern(&pair, 26, 0x40, (4 * PAGE64 - 0x40, frmr.mr.remote_token()));
    assert_placed(
        frmr.buffer.bytes(),
        &vec![0; 5 * PAGE],
        4 * PAGE - 0x40,
        &src.bytes()[..0x40],
    );
    teardown_with_frmr(pair, frmr, [src]);
}

/// M17: the remote token of a fast-registered MR can be read as soon as
/// FastRegister returned — here a deferred one, not yet handed to the
/// engine — and it is the token the mapping answers to.
#[test]
fn m17_fast_register_remote_token_is_readable_before_its_completion() {
    let pair = Pair::new();
    let frmr = Frmr::new(&pair.b, &pair.b_pd, 2 * PAGE, 0, 2, true);
    recv0(&pair.a_qp, 1);
    assert_success!(frmr.post(&pair.b_qp, 2, OP_REMOTE_WRITE | DEFER));
    let token = frmr.mr.remote_token();
    assert_ne!(token, 0);
    // A Send without the flag hands the chain over (D2).
    send0(&pair.b_qp, 3, 0);
    expect(&pair.b_cq, 2, STATUS_SUCCESS);
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    expect(&pair.a_cq, 1, STATUS_SUCCESS);
    assert_eq!(frmr.mr.remote_token(), token);
    let src = a_writes_pattern(&pair, 27, 0x200, (frmr.base() + 0xF00, token));
    assert_placed(
        frmr.buffer.bytes(),
        &vec![0; 2 * PAGE],
        0xF00,
        &src.bytes()[..0x200],
    );
    teardown_with_frmr(pair, frmr, [src]);
}

// ---------------------------------------------------------------------------
// M18–M25: windows, invalidation
// ---------------------------------------------------------------------------

/// M18: Bind opens a window of `Length` bytes at `VirtualAddress` inside
/// the region: a peer's Write through the window token lands exactly there
/// (across a page boundary), a Read returns it; a Bind reaching outside the
/// region is refused inline; an access one byte beyond the window, though
/// inside the region, is refused (M34) and touches nothing.
#[test]
fn m18_bind_opens_a_window_of_length_bytes_at_its_index() {
    let pair = Pair::new();
    let (before, r) = b_region(&pair, (3 * PAGE, 28), 0x88, MR_LOCAL_WRITE);
    let mw = pair.b_pd.mw();
    let (at, len) = (0xF00, 0x1200);
    let outside = pair.b_pd.mw();
    for (name, va, n) in [
        ("before the region", r.remote(0) - 1, 0x10),
        ("past the end", r.remote(3 * PAGE - 0x10), 0x11),
        ("longer than the region", r.remote(0), 3 * PAGE + 1),
    ] {
        assert_eq!(
            pair.b_qp.bind(1, &r.mr, &outside, va, n, OP_REMOTE_READ),
            STATUS_INVALID_PARAMETER,
            "{name}"
        );
    }
    assert_empty(&pair.b_cq);
    b_binds(
        &pair,
        2,
        &mw,
        (&r, at, len),
        OP_REMOTE_READ | OP_REMOTE_WRITE,
    );
    let token = mw.remote_token();
    let src = Region::pattern(&pair.a_pd, 2 * PAGE, 29, 0);
    assert_success!(a_writes(&pair, src.sge(0x10, len), r.remote(at), token));
    assert_placed(r.bytes(), &before, at, &src.bytes()[0x10..0x10 + len]);
    let now = r.bytes().to_vec();
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(a_reads(
        &pair,
        sink.sge(0, 0x80),
        r.remote(at + len - 0x80),
        token
    ));
    assert_eq!(&sink.bytes()[..0x80], &now[at + len - 0x80..at + len]);
    // One byte beyond the window.
    expect_write_refused(
        &pair,
        &r.buffer,
        src.sge(0, 0x80),
        r.remote(at + len - 0x7F),
        token,
        STATUS_REMOTE_RESOURCES,
    );
    assert_closed([mw.close(), outside.close()]);
    teardown_closing(pair, [r, src, sink]);
}

/// M19: a Bind asking for remote write on a region registered without local
/// write fails inline with STATUS_ACCESS_VIOLATION (no completion, QP
/// unharmed); remote read alone binds; with local write, remote write binds
/// and works.
#[test]
fn m19_bind_with_remote_write_needs_local_write_on_the_region() {
    let pair = Pair::new();
    let no_write = Region::of(&pair.b_pd, buffer_with(0, &bytes(PAGE, 30)), MR_REMOTE_READ);
    let nothing = Region::of(&pair.b_pd, buffer_with(0, &bytes(PAGE, 31)), 0);
    let (before, writable) = b_region(&pair, (PAGE, 32), 0x20, MR_LOCAL_WRITE);
    let mw = pair.b_pd.mw();
    for (name, r, flags) in [
        ("remote read region", &no_write, OP_REMOTE_WRITE),
        (
            "remote read region, both rights",
            &no_write,
            OP_REMOTE_WRITE | OP_REMOTE_READ,
        ),
        ("region without rights", &nothing, OP_REMOTE_WRITE),
    ] {
        assert_eq!(
            pair.b_qp.bind(1, &r.mr, &mw, r.remote(0), 0x100, flags),
            STATUS_ACCESS_VIOLATION,
            "{name}"
        );
    }
    assert_empty(&pair.b_cq);
    b_binds(&pair, 2, &mw, (&no_write, 0, 0x100), OP_REMOTE_READ);
    assert_success!(pair.b_qp.invalidate(3, mw.header(), 0));
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    b_binds(&pair, 4, &mw, (&writable, 0x40, 0x100), OP_REMOTE_WRITE);
    let src = a_writes_pattern(&pair, 33, 0x100, (writable.remote(0x40), mw.remote_token()));
    assert_placed(writable.bytes(), &before, 0x40, &src.bytes()[..0x100]);
    assert_close(mw.close());
    teardown_with_regions(pair, [no_write, nothing, writable, src]);
}

/// M20: a window's remote token can be read as soon as Bind returned —
/// here a deferred Bind not yet handed to the engine — and it is the token
/// the window answers to (a token of its own, not the region's).
#[test]
fn m20_window_token_is_readable_as_soon_as_bind_returns() {
    let pair = Pair::new();
    let (before, r) = b_region(&pair, (PAGE, 34), 0x10, MR_REMOTE);
    let mw = pair.b_pd.mw();
    recv0(&pair.a_qp, 1);
    assert_success!(pair.b_qp.bind(
        2,
        &r.mr,
        &mw,
        r.remote(0x100),
        0x200,
        OP_REMOTE_WRITE | DEFER
    ));
    let token = mw.remote_token();
    assert!(token != 0 && token != r.token() && token != r.mr.local_token());
    send0(&pair.b_qp, 3, 0);
    expect(&pair.b_cq, 2, STATUS_SUCCESS);
    expect(&pair.b_cq, 3, STATUS_SUCCESS);
    expect(&pair.a_cq, 1, STATUS_SUCCESS);
    assert_eq!(mw.remote_token(), token);
    let src = Region::pattern(&pair.a_pd, PAGE, 35, 0);
    assert_success!(a_writes(&pair, src.sge(0, 0x200), r.remote(0x100), token));
    assert_placed(r.bytes(), &before, 0x100, &src.bytes()[..0x200]);
    assert_close(mw.close());
    teardown_with_regions(pair, [r, src]);
}

/// One connection of the M21 test: QPs on A and B with their own CQs.
struct Conn {
    a_cq: Cq,
    b_cq: Cq,
    a_qp: Qp,
    b_qp: Qp,
    link: Link,
}

impl Conn {
    fn new(a: &Side, b: &Side, context: usize) -> Self {
        let (a_cq, a_qp) = a.cq_and_qp(64, context);
        let (b_cq, b_qp) = b.cq_and_qp(64, context + 1);
        let link = a.connect(&a_qp, b, &b_qp);
        Self {
            a_cq,
            b_cq,
            a_qp,
            b_qp,
            link,
        }
    }

    /// A's Read of `len` bytes at `remote` / `token` into `sink`.
    fn read(&self, sink: &Region, len: usize, remote: u64, token: u32) -> NtStatus {
        assert_success!(self.a_qp.read(0x21, &[sink.sge(0, len)], remote, token, 0));
        let r = wait_results_ex(&self.a_cq, 1).remove(0);
        assert_eq!(r.request_context as usize, 0x21);
        r.status
    }

    /// The connection is over: a Send on A completes cancelled.
    fn assert_ended(&self) {
        await_abort(&self.link.a_disconnects);
        send0(&self.a_qp, 0x22, 0);
        expect(&self.a_cq, 0x22, STATUS_CANCELLED);
    }

    fn close(self) {
        self.link
            .close_with((self.a_qp, self.b_qp), (self.a_cq, self.b_cq));
    }
}

/// M21 (NDSPI v2 only; this provider's behaviour): a window starts unbound
/// (no token), is bound to one QP at a time — only that QP's peer reaches
/// it — and, once invalidated, may be bound again to another region and
/// another QP of the adapter, with a fresh token.
#[test]
fn m21_window_is_bound_to_one_qp_at_a_time_and_rebinds_after_invalidate() {
    let (a, b) = Side::two();
    let one = Conn::new(&a, &b, 0x10);
    let two = Conn::new(&a, &b, 0x20);
    let r1 = Region::of(&b.pd, buffer_with(0x30, &bytes(PAGE, 36)), MR_LOCAL_WRITE);
    let r2 = Region::of(&b.pd, buffer_with(0x50, &bytes(PAGE, 37)), MR_LOCAL_WRITE);
    let sink = Region::new(&a.pd, PAGE, 0, MR_LOCAL_WRITE);
    let mw = b.pd.mw();
    assert_eq!(mw.remote_token(), 0, "unbound: no token");

    assert_success!(
        one.b_qp
            .bind(1, &r1.mr, &mw, r1.remote(0), 0x200, OP_REMOTE_READ)
    );
    expect(&one.b_cq, 1, STATUS_SUCCESS);
    let t1 = mw.remote_token();
    assert_success!(one.read(&sink, 0x200, r1.remote(0), t1));
    assert_eq!(&sink.bytes()[..0x200], &r1.bytes()[..0x200]);
    assert_success!(one.b_qp.invalidate(2, mw.header(), 0));
    expect(&one.b_cq, 2, STATUS_SUCCESS);

    assert_success!(
        two.b_qp
            .bind(3, &r2.mr, &mw, r2.remote(0x100), 0x200, OP_REMOTE_READ)
    );
    expect(&two.b_cq, 3, STATUS_SUCCESS);
    let t2 = mw.remote_token();
    assert_ne!(t2, t1);
    assert_success!(two.read(&sink, 0x200, r2.remote(0x100), t2));
    assert_eq!(&sink.bytes()[..0x200], &r2.bytes()[0x100..0x300]);
    // The window is bound to the second connection's QP only.
    assert_eq!(
        one.read(&sink, 0x10, r2.remote(0x100), t2),
        STATUS_ACCESS_VIOLATION
    );
    one.assert_ended();
    // The first binding's token names nothing any more.
    assert_eq!(
        two.read(&sink, 0x10, r1.remote(0), t1),
        STATUS_ACCESS_VIOLATION
    );
    two.assert_ended();

    assert_close(mw.close());
    for r in [r1, r2, sink] {
        r.close();
    }
    one.close();
    two.close();
    a.close();
    b.close();
}

/// M22: Invalidate of a fast-registered MR completes with STATUS_SUCCESS
/// (type Invalidate) and from then on its token grants no access: a peer's
/// Write fails with STATUS_ACCESS_VIOLATION, touches nothing, and ends the
/// connection.
#[test]
fn m22_invalidated_fast_registered_mr_grants_no_access() {
    let pair = Pair::new();
    let frmr = Frmr::new(&pair.b, &pair.b_pd, 2 * PAGE, 0, 2, true);
    assert_success!(frmr.post(&pair.b_qp, 1, OP_REMOTE_WRITE));
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    let src = Region::pattern(&pair.a_pd, PAGE, 38, 0);
    let token = frmr.mr.remote_token();
    assert_success!(a_writes(
        &pair,
        src.sge(0, 0x100),
        frmr.base() + 0x10,
        token
    ));
    // B invalidates once A's Write has landed (over iWARP it completes at A
    // once sent).
    wait_landed();
    assert_success!(pair.b_qp.invalidate(2, frmr.mr.header(), 0));
    let done = expect(&pair.b_cq, 2, STATUS_SUCCESS);
    assert_eq!(done.type_, NdkOperationType::INVALIDATE);
    expect_write_refused(
        &pair,
        &frmr.buffer,
        src.sge(0x100, 0x100),
        frmr.base() + 0x10,
        token,
        STATUS_ACCESS_VIOLATION,
    );
    teardown_closing_frmr(pair, frmr, [src]);
}

/// M22, M23 (NDSPI v2 only; this provider's behaviour): Invalidate of a
/// bound window completes with STATUS_SUCCESS; a peer's Read through the
/// invalidated window is a fatal error: it fails with
/// STATUS_ACCESS_VIOLATION and the connection ends — the peer's later
/// requests and B's outstanding receive complete cancelled, and both
/// consumers get their disconnect indication (X2).
#[test]
fn m23_access_through_an_invalidated_window_ends_the_connection() {
    let pair = Pair::new();
    let r = Region::of(
        &pair.b_pd,
        buffer_with(0x70, &bytes(PAGE, 39)),
        MR_LOCAL_WRITE,
    );
    let mw = pair.b_pd.mw();
    assert_success!(
        pair.b_qp
            .bind(1, &r.mr, &mw, r.remote(0x10), 0x100, OP_REMOTE_READ)
    );
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    let token = mw.remote_token();
    assert_success!(a_reads(&pair, sink.sge(0, 0x100), r.remote(0x10), token));
    assert_eq!(&sink.bytes()[..0x100], &r.bytes()[0x10..0x110]);
    assert_success!(pair.b_qp.invalidate(2, mw.header(), 0));
    let done = expect(&pair.b_cq, 2, STATUS_SUCCESS);
    assert_eq!(done.type_, NdkOperationType::INVALIDATE);
    recv0(&pair.b_qp, 3);
    assert_eq!(
        a_reads(&pair, sink.sge(0x200, 0x100), r.remote(0x10), token),
        STATUS_ACCESS_VIOLATION
    );
    expect(&pair.b_cq, 3, STATUS_CANCELLED);
    assert!(sink.bytes()[0x200..].iter().all(|&b| b == 0));
    assert_success!(pair.a_disconnects.wait());
    assert_success!(pair.b_disconnects.wait());
    assert_close(mw.close());
    teardown_ended(pair, [r, sink]);
}

/// M22 (consumer): Invalidate never applies to a RegisterMr MR; asked to,
/// the provider refuses it inline (STATUS_INVALID_PARAMETER, no completion)
/// and the region and the connection are unharmed.
#[test]
fn m22_invalidate_of_a_registered_mr_is_refused_inline() {
    let pair = Pair::new();
    let (before, r) = b_region(&pair, (PAGE, 40), 0x70, MR_REMOTE);
    assert_eq!(
        pair.b_qp.invalidate(1, r.mr.header(), 0),
        STATUS_INVALID_PARAMETER
    );
    assert_empty(&pair.b_cq);
    let src = a_writes_pattern(&pair, 41, 0x100, (r.remote(0x10), r.token()));
    assert_placed(r.bytes(), &before, 0x10, &src.bytes()[..0x100]);
    teardown_with_regions(pair, [r, src]);
}

/// M24, C2: SendAndInvalidate invalidates the named token at the receiver
/// when the receive completes: the receive completes as
/// ReceiveAndInvalidate naming the token (GetCqResultsEx) — or plainly with
/// STATUS_SUCCESS through GetCqResults — the sender's as a Send, and the
/// token then grants nothing: the MR can be fast-registered again without
/// an Invalidate, and after the second SendAndInvalidate a peer's Write
/// through it fails and ends the connection.
#[test]
fn m24_send_and_invalidate_invalidates_the_token_at_the_receiver() {
    let pair = Pair::new();
    let frmr = Frmr::new(&pair.b, &pair.b_pd, 2 * PAGE, 0, 2, true);
    let token = frmr.mr.remote_token();
    let src = Region::pattern(&pair.a_pd, PAGE, 42, 0);
    let inbox = Region::new(&pair.b_pd, PAGE, 0, MR_LOCAL_WRITE);

    // Round 1, reaped with GetCqResults.
    assert_success!(frmr.post(&pair.b_qp, 1, OP_REMOTE_WRITE));
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    assert_success!(pair.b_qp.receive(2, &[inbox.sge(0, 0x100)]));
    assert_success!(
        pair.a_qp
            .send_and_invalidate(3, &[src.sge(0, 0x40)], 0, token)
    );
    let sent = expect(&pair.a_cq, 3, STATUS_SUCCESS);
    assert_eq!(sent.type_, NdkOperationType::SEND);
    let got = pair.b_cq.wait_results(1);
    assert_eq!(
        (
            got[0].request_context as usize,
            got[0].status,
            got[0].bytes_transferred
        ),
        (2, STATUS_SUCCESS, 0x40)
    );
    assert_eq!(&inbox.bytes()[..0x40], &src.bytes()[..0x40]);
    // Invalidated: a FastRegister needs no Invalidate first.
    assert_success!(frmr.post(&pair.b_qp, 4, OP_REMOTE_WRITE));
    expect(&pair.b_cq, 4, STATUS_SUCCESS);
    assert_success!(a_writes(&pair, src.sge(0, 0x100), frmr.base(), token));

    // Round 2, reaped with GetCqResultsEx.
    assert_success!(pair.b_qp.receive(5, &[inbox.sge(0x100, 0x100)]));
    assert_success!(
        pair.a_qp
            .send_and_invalidate(6, &[src.sge(0x40, 0x80)], SOLICIT, token)
    );
    expect(&pair.a_cq, 6, STATUS_SUCCESS);
    let got = expect(&pair.b_cq, 5, STATUS_SUCCESS);
    assert_eq!(got.type_, NdkOperationType::RECEIVE_AND_INVALIDATE);
    assert_eq!(got.type_specific_completion_output as u32, token);
    assert_eq!(got.bytes_transferred, 0x80);
    assert_eq!(&inbox.bytes()[0x100..0x180], &src.bytes()[0x40..0xC0]);
    expect_write_refused(
        &pair,
        &frmr.buffer,
        src.sge(0, 0x100),
        frmr.base(),
        token,
        STATUS_ACCESS_VIOLATION,
    );
    teardown_closing_frmr(pair, frmr, [src, inbox]);
}

/// M24: SendAndInvalidate of a window's token invalidates the window at the
/// receiver: a Read through it then fails and ends the connection.
#[test]
fn m24_send_and_invalidate_invalidates_a_window() {
    let pair = Pair::new();
    let r = Region::of(&pair.b_pd, buffer_with(0, &bytes(PAGE, 43)), MR_LOCAL_WRITE);
    let mw = pair.b_pd.mw();
    assert_success!(
        pair.b_qp
            .bind(1, &r.mr, &mw, r.remote(0), 0x400, OP_REMOTE_READ)
    );
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    let token = mw.remote_token();
    recv0(&pair.b_qp, 2);
    assert_success!(pair.a_qp.send_and_invalidate(3, &[], 0, token));
    expect(&pair.a_cq, 3, STATUS_SUCCESS);
    let got = expect(&pair.b_cq, 2, STATUS_SUCCESS);
    assert_eq!(got.type_, NdkOperationType::RECEIVE_AND_INVALIDATE);
    assert_eq!(got.type_specific_completion_output as u32, token);
    let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    assert_eq!(
        a_reads(&pair, sink.sge(0, 0x10), r.remote(0), token),
        STATUS_ACCESS_VIOLATION
    );
    assert_close(mw.close());
    teardown_ended(pair, [r, sink]);
}

/// M24: a SendAndInvalidate naming a token the receiver does not know
/// aborts the connection: the receive completes with
/// STATUS_INVALID_DEVICE_REQUEST, the Send with STATUS_REMOTE_RESOURCES
/// (this provider's statuses), and both sides' later requests are cancelled.
#[test]
fn m24_send_and_invalidate_of_an_unknown_token_aborts_the_connection() {
    let pair = Pair::new();
    recv0(&pair.b_qp, 1);
    assert_success!(pair.a_qp.send_and_invalidate(2, &[], 0, 0xFFFF_FFF0));
    expect(
        &pair.a_cq,
        2,
        Transport::default().peer_refused(STATUS_REMOTE_RESOURCES),
    );
    expect(&pair.b_cq, 1, STATUS_INVALID_DEVICE_REQUEST);
    assert_ended(&pair);
    teardown_lenient(pair);
}

/// M25 (consumer): a SendAndInvalidate naming a token the receiver cannot
/// invalidate — a RegisterMr region's — breaks the rule; it fails cleanly
/// (the connection aborts as for M24), and the region is unharmed: on
/// another connection of the same PDs, its token still works.
#[test]
fn m25_send_and_invalidate_of_a_registered_region_token_fails_cleanly() {
    let (a, b) = Side::two();
    let one = Conn::new(&a, &b, 0x30);
    let before = bytes(PAGE, 44);
    let r = Region::of(&b.pd, buffer_with(0x18, &before), MR_REMOTE);
    let src = Region::pattern(&a.pd, PAGE, 45, 0);
    recv0(&one.b_qp, 1);
    assert_success!(one.a_qp.send_and_invalidate(2, &[], 0, r.token()));
    expect(
        &one.a_cq,
        2,
        Transport::default().peer_refused(STATUS_REMOTE_RESOURCES),
    );
    expect(&one.b_cq, 1, STATUS_INVALID_DEVICE_REQUEST);
    one.assert_ended();
    assert_eq!(r.bytes(), &before[..]);
    let two = Conn::new(&a, &b, 0x40);
    assert_success!(
        two.a_qp
            .write(3, &[src.sge(0, 0x100)], r.remote(0x20), r.token(), 0)
    );
    expect(&two.a_cq, 3, STATUS_SUCCESS);
    assert_placed(r.bytes(), &before, 0x20, &src.bytes()[..0x100]);
    r.close();
    src.close();
    one.close();
    two.close();
    a.close();
    b.close();
}

// ---------------------------------------------------------------------------
// M26–M27: read-local-invalidate, the privileged token
// ---------------------------------------------------------------------------

/// M26: on this adapter (RDMA_READ_LOCAL_INVALIDATE_SUPPORTED), a Read with
/// RDMA_READ_LOCAL_INVALIDATE (0x100) that succeeds invalidates the token of
/// its first SGE — a fast-registered MR — and only that one: the data lands
/// in both SGEs, the second SGE's region still works, and the first's local
/// token is then refused.
#[test]
fn m26_read_with_local_invalidate_invalidates_the_first_sge_token() {
    let pair = Pair::new();
    let flags = pair.a.flags();
    assert!(flags.contains(AdapterFlags::RDMA_READ_LOCAL_INVALIDATE_SUPPORTED));
    let src = Region::pattern(&pair.b_pd, 2 * PAGE, 46, MR_REMOTE);
    let frmr = Frmr::new(&pair.a, &pair.a_pd, PAGE, 0, 1, false);
    assert_success!(frmr.post(&pair.a_qp, 1, OP_LOCAL_WRITE));
    expect(&pair.a_cq, 1, STATUS_SUCCESS);
    let second = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    let sges = [frmr.sge(0xF00, 0x100), second.sge(0x10, 0x200)];
    assert_success!(pair.a_qp.read(
        2,
        &sges,
        src.remote(0x300),
        src.token(),
        READ_LOCAL_INVALIDATE
    ));
    let done = expect(&pair.a_cq, 2, STATUS_SUCCESS);
    assert_eq!(done.type_, NdkOperationType::READ);
    assert_eq!(&frmr.buffer.bytes()[0xF00..], &src.bytes()[0x300..0x400]);
    assert_eq!(&second.bytes()[0x10..0x210], &src.bytes()[0x400..0x600]);
    // With a RegisterMr region first, nothing is invalidated (its token names
    // nothing invalidatable) and the Read succeeds.
    let sges = [second.sge(0x400, 0x100)];
    assert_success!(
        pair.a_qp
            .read(3, &sges, src.remote(0), src.token(), READ_LOCAL_INVALIDATE)
    );
    expect(&pair.a_cq, 3, STATUS_SUCCESS);
    assert_eq!(&second.bytes()[0x400..0x500], &src.bytes()[..0x100]);
    // The second region is still registered: B receives from it.
    let inbox = Region::new(&pair.b_pd, PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(pair.b_qp.receive(4, &[inbox.sge(0, 0x200)]));
    assert_success!(pair.a_qp.send(5, &[second.sge(0x10, 0x200)], 0));
    expect(&pair.a_cq, 5, STATUS_SUCCESS);
    expect(&pair.b_cq, 4, STATUS_SUCCESS);
    assert_eq!(&inbox.bytes()[..0x200], &src.bytes()[0x400..0x600]);
    // The fast-registered MR's token was invalidated by the Read.
    assert_success!(pair.b_qp.receive(6, &[inbox.sge(0x200, 0x100)]));
    assert_success!(pair.a_qp.send(7, &[frmr.sge(0xF00, 0x100)], 0));
    expect(&pair.a_cq, 7, STATUS_ACCESS_VIOLATION);
    expect(&pair.b_cq, 6, STATUS_CANCELLED);
    assert!(inbox.bytes()[0x200..].iter().all(|&b| b == 0));
    assert_ended(&pair);
    frmr.close(&pair.a);
    teardown_closing(pair, [src, second, inbox]);
}

/// M27, M9: the PD's privileged token lets SGEs name adapter logical
/// addresses from a LAM without any registration, for local read (a Send
/// from LAM memory), local write (a Receive into it) and as a read sink
/// (M9); never for remote access: a peer's Write naming it fails with
/// STATUS_ACCESS_VIOLATION and touches nothing.
#[test]
fn m27_privileged_token_names_lam_logical_addresses_for_local_access_only() {
    let pair = Pair::new();
    let token = pair.a_pd.privileged_token();
    assert_eq!(pair.a_pd.privileged_token(), token, "stable");
    let len = 2 * PAGE + 0x300;
    let (content, mut outgoing) = pattern_buffer((len, 47), 0x500);
    let (status, mut out_lam, out_fbo) = pair.a.build_lam(&mut outgoing);
    assert_eq!((status, out_fbo), (STATUS_SUCCESS, 0x500));
    let mut incoming = Buffer::new(len, 0x9A0, 0);
    let (status, mut in_lam, in_fbo) = pair.a.build_lam(&mut incoming);
    assert_eq!((status, in_fbo), (STATUS_SUCCESS, 0x9A0));
    let out_pages = lam_pages(&out_lam);
    let in_pages = lam_pages(&in_lam);
    let inbox = Region::new(&pair.b_pd, 3 * PAGE, 0, MR_LOCAL_WRITE);
    let b_src = Region::pattern(&pair.b_pd, 3 * PAGE, 48, MR_REMOTE);

    // Local read: a Send from LAM memory (one SGE per page).
    let sges = lam_sges(&out_pages, out_fbo, 0, len, token);
    assert_eq!(sges.len(), 3);
    assert_success!(pair.b_qp.receive(1, &[inbox.sge(0, len)]));
    assert_success!(pair.a_qp.send(2, &sges, 0));
    expect(&pair.a_cq, 2, STATUS_SUCCESS);
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    assert_eq!(&inbox.bytes()[..len], &content[..]);
    // Local write: a Receive into LAM memory.
    let sges = lam_sges(&in_pages, in_fbo, 0x10, 0x1000, token);
    assert_success!(pair.a_qp.receive(3, &sges));
    assert_success!(pair.b_qp.send(4, &[b_src.sge(0x80, 0x1000)], 0));
    expect(&pair.b_cq, 4, STATUS_SUCCESS);
    expect(&pair.a_cq, 3, STATUS_SUCCESS);
    assert_placed(
        incoming.bytes(),
        &vec![0; len],
        0x10,
        &b_src.bytes()[0x80..0x1080],
    );
    // A read sink (M9).
    let before = incoming.bytes().to_vec();
    let sges = lam_sges(&in_pages, in_fbo, 0x1100, 0x1000, token);
    assert_success!(
        pair.a_qp
            .read(5, &sges, b_src.remote(0x1500), b_src.token(), 0)
    );
    expect(&pair.a_cq, 5, STATUS_SUCCESS);
    assert_placed(
        incoming.bytes(),
        &before,
        0x1100,
        &b_src.bytes()[0x1500..0x2500],
    );
    assert_eq!(outgoing.bytes(), &content[..]);
    // No remote access.
    let before = incoming.bytes().to_vec();
    assert_success!(pair.b_qp.write(
        6,
        &[b_src.sge(0, 0x10)],
        in_pages[0] + u64::from(in_fbo),
        token,
        0
    ));
    expect(
        &pair.b_cq,
        6,
        Transport::default().peer_refused(STATUS_ACCESS_VIOLATION),
    );
    await_abort(&pair.b_disconnects);
    assert_eq!(incoming.bytes(), &before[..]);
    send0(&pair.b_qp, 7, 0);
    expect(&pair.b_cq, 7, STATUS_CANCELLED);
    recv0(&pair.a_qp, 8);
    expect(&pair.a_cq, 8, STATUS_CANCELLED);

    pair.a.release_lam(&mut out_lam);
    pair.a.release_lam(&mut in_lam);
    teardown_closing(pair, [inbox, b_src]);
}

// ---------------------------------------------------------------------------
// M28–M33: logical address mappings
// ---------------------------------------------------------------------------

/// M28: BuildLam maps `Length` bytes from the MDL's first byte onto
/// PAGE_SIZE-aligned logical pages (whole pages), reports the first byte's
/// offset in `*pFBO`, and those pages reach exactly the buffer's bytes
/// (checked by sending from them with the privileged token). A contiguous
/// two-MDL chain maps as one; a chain with a gap is refused with
/// STATUS_INVALID_PARAMETER.
#[test]
fn m28_build_lam_maps_the_pages_of_a_contiguous_chain_and_reports_the_fbo() {
    let pair = Pair::new();
    let len = 3 * PAGE + 0x100;
    let content = bytes(len, 49);
    let inbox = Region::new(&pair.b_pd, 4 * PAGE, 0, MR_LOCAL_WRITE);
    for (name, split) in [("one MDL", None), ("two MDLs", Some(0x1801))] {
        let mut buffer = buffer_with(0x321, &content);
        let mut rest = split.map(|at| tail_mdl(&mut buffer, at));
        if let (Some(at), Some(rest)) = (split, rest.as_mut()) {
            chain(&mut buffer, at, rest);
        }
        let needed = 0x10 + 8 * 4;
        let call = build_lam_raw(&pair.a, buffer.mdl(), len, false, needed);
        assert_success!(call.status, "{name}");
        assert_eq!((call.size, call.fbo), (needed, 0x321), "{name}");
        let mut lam = call.words;
        assert_eq!(lam_count(&lam), 4, "{name}");
        let pages = lam_pages(&lam);
        assert!(pages.iter().all(|p| p % PAGE64 == 0), "{name}: aligned");
        assert!(
            lam[2 + 4..].iter().all(|&w| w == SENTINEL),
            "{name}: no more"
        );
        // The pages carry the buffer's bytes.
        let sges = lam_sges(&pages, call.fbo, 0, len, pair.a_pd.privileged_token());
        assert_success!(pair.b_qp.receive(1, &[inbox.sge(0, len)]));
        assert_success!(pair.a_qp.send(2, &sges, 0));
        expect(&pair.a_cq, 2, STATUS_SUCCESS);
        expect(&pair.b_cq, 1, STATUS_SUCCESS);
        assert_eq!(&inbox.bytes()[..len], &content[..], "{name}");
        pair.a.release_lam(&mut lam);
        drop(rest);
    }
    // A gap after the first MDL.
    let mut buffer = buffer_with(0x321, &content);
    let first = buffer.bytes_mut().as_mut_ptr();
    let mut rest = mdl_at(first.wrapping_add(0x1808), len - 0x1800);
    chain(&mut buffer, 0x1800, &mut rest);
    let call = build_lam_raw(&pair.a, buffer.mdl(), len, true, 0x100);
    assert_eq!(call.status, STATUS_INVALID_PARAMETER);
    assert!(
        call.words.iter().all(|&w| w == SENTINEL),
        "LAM buffer untouched"
    );
    assert_eq!(call.completions.count(), 0);
    // Only the first `Length` bytes must be contiguous.
    let call = build_lam_raw(&pair.a, buffer.mdl(), 0x1800, true, 0x100);
    assert_eq!((call.status, call.fbo), (STATUS_SUCCESS, 0x321));
    let mut lam = call.words;
    assert_eq!(lam_count(&lam), 2);
    pair.a.release_lam(&mut lam);
    teardown_with_regions(pair, [inbox]);
}

/// M28: BuildLam over a chain whose MDLs are mapped apart lists each MDL's
/// pages (boundaries on pages, as with page-sized MDLs); SGEs of the
/// privileged token over those pages carry the chain's bytes.
#[test]
fn m28_build_lam_over_a_chain_mapped_apart() {
    let pair = Pair::new();
    let va = 0x0000_4200_0000_0000 + 0x321;
    let lens = [2 * PAGE - 0x321, PAGE, 0x234];
    let len: usize = lens.iter().sum();
    let (buffers, mut mdls) = chain_mapped_apart(va, &lens, 31);
    let content = chain_bytes(&buffers);
    let needed = 0x10 + 8 * 4;
    let call = build_lam_raw(&pair.a, mdls.as_mut_ptr(), len, false, needed);
    assert_success!(call.status);
    assert_eq!((call.size, call.fbo), (needed, 0x321));
    let mut lam = call.words;
    assert_eq!(lam_count(&lam), 4);
    let pages = lam_pages(&lam);
    assert!(pages.iter().all(|p| p % PAGE64 == 0));
    let inbox = Region::new(&pair.b_pd, 4 * PAGE, 0, MR_LOCAL_WRITE);
    let sges = lam_sges(&pages, call.fbo, 0, len, pair.a_pd.privileged_token());
    assert_success!(pair.b_qp.receive(1, &[inbox.sge(0, len)]));
    assert_success!(pair.a_qp.send(2, &sges, 0));
    expect(&pair.a_cq, 2, STATUS_SUCCESS);
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    assert_eq!(&inbox.bytes()[..len], &content[..]);
    pair.a.release_lam(&mut lam);
    teardown_with_regions(pair, [inbox]);
    drop(mdls);
}

/// M28: the MDL's virtual address is an index only: BuildLam over an MDL
/// whose bytes are at `MappedSystemVa` (its virtual address being a decoy's)
/// maps the real bytes.
#[test]
fn m28_build_lam_reaches_the_bytes_not_the_virtual_address() {
    let pair = Pair::new();
    let (content, mut real) = pattern_buffer((PAGE, 50), 0x48);
    let mut decoy = Buffer::new(PAGE, 0x48, 0xEE);
    let real_first = real.bytes_mut().as_mut_ptr();
    let decoy_first = decoy.bytes_mut().as_mut_ptr();
    let mdl = real.mdl();
    // SAFETY: the test's own MDL, not in use by any call.
    unsafe { (*mdl).mdl_flags = MDL_MAPPED_TO_SYSTEM_VA };
    // SAFETY: as above.
    unsafe { (*mdl).mapped_system_va = real_first.cast() };
    // SAFETY: as above.
    unsafe { (*mdl).start_va = decoy_first.wrapping_sub(0x48).cast() };
    let call = build_lam_raw(&pair.a, mdl, PAGE, false, 0x40);
    assert_eq!((call.status, call.fbo), (STATUS_SUCCESS, 0x48));
    let mut lam = call.words;
    let inbox = Region::new(&pair.b_pd, PAGE, 0, MR_LOCAL_WRITE);
    let sges = lam_sges(
        &lam_pages(&lam),
        0x48,
        0,
        PAGE,
        pair.a_pd.privileged_token(),
    );
    assert_success!(pair.b_qp.receive(1, &[inbox.sge(0, PAGE)]));
    assert_success!(pair.a_qp.send(2, &sges, 0));
    expect(&pair.a_cq, 2, STATUS_SUCCESS);
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    assert_eq!(inbox.bytes(), &content[..]);
    assert!(decoy.bytes().iter().all(|&b| b == 0xEE));
    pair.a.release_lam(&mut lam);
    teardown_with_regions(pair, [inbox]);
}

/// M29: BuildLam with `*pLAMSize` too small — no buffer at all, or one byte
/// short — fails with STATUS_BUFFER_TOO_SMALL, sets `*pLAMSize` to the size
/// needed (0x10 + 8 × pages) and writes nothing into the buffer; with room,
/// it succeeds and writes exactly that size.
#[test]
fn m29_build_lam_reports_the_size_needed() {
    let adapter = open_adapter(own_address());
    let mut buffer = Buffer::new(5 * PAGE - 0x10, 0x20, 0);
    // 0x20 + 5 pages − 0x10 spans 6 pages.
    let needed = 0x10 + 8 * 6;
    for room in [0, needed - 1] {
        let call = build_lam_raw(&adapter, buffer.mdl(), buffer.len, true, room);
        assert_eq!(call.status, STATUS_BUFFER_TOO_SMALL, "room {room}");
        assert_eq!(call.size, needed, "room {room}");
        assert!(call.words.iter().all(|&w| w == SENTINEL), "room {room}");
        assert_eq!(call.completions.count(), 0, "room {room}");
    }
    for room in [needed, 2 * needed] {
        let call = build_lam_raw(&adapter, buffer.mdl(), buffer.len, true, room);
        assert_success!(call.status, "room {room}");
        assert_eq!((call.size, call.fbo), (needed, 0x20), "room {room}");
        let mut lam = call.words;
        assert_eq!(lam_count(&lam), 6);
        assert!(lam[needed as usize / 8..].iter().all(|&w| w == SENTINEL));
        assert_eq!(
            call.completions.count(),
            0,
            "L8: no callback for an inline success"
        );
        adapter.release_lam(&mut lam);
    }
    adapter.close();
}

/// M30: BuildLam does not pend here, and a BuildLam that fails leaves no
/// mapping behind: after a refused chain (and a too-small buffer), the
/// pages of the first MDL are no logical addresses — a privileged-token
/// Send naming them fails with STATUS_ACCESS_VIOLATION, and nothing moves.
#[test]
fn m30_a_failed_build_lam_leaves_no_mapping() {
    let pair = Pair::new();
    let len = 2 * PAGE;
    let mut buffer = Buffer::pattern(len, 0, 51);
    let first = buffer.bytes_mut().as_mut_ptr();
    let call = build_lam_raw(&pair.a, buffer.mdl(), len, true, 8);
    assert_eq!(call.status, STATUS_BUFFER_TOO_SMALL);
    let mut rest = mdl_at(first.wrapping_add(PAGE + 0x40), PAGE);
    chain(&mut buffer, PAGE, &mut rest);
    let call = build_lam_raw(&pair.a, buffer.mdl(), len, true, 0x100);
    assert_eq!(call.status, STATUS_INVALID_PARAMETER);
    assert_eq!(call.completions.count(), 0);
    let inbox = Region::new(&pair.b_pd, PAGE, 0, MR_LOCAL_WRITE);
    assert_success!(pair.b_qp.receive(1, &[inbox.sge(0, 0x100)]));
    // In SoftNDK a page's logical address is its mapped address
    // (docs/rnic.md): here, the buffer's own page.
    let sge = NdkSge {
        address: buffer.va(),
        length: 0x100,
        memory_region_token: pair.a_pd.privileged_token(),
    };
    expect_send_refused_locally((&pair.a_qp, &pair.a_cq), 2, sge, (&pair.b_cq, 1), &inbox);
    teardown_ended(pair, [inbox]);
}

/// M31, M36: BuildLam's completion is optional: without one it finishes
/// inline (never STATUS_PENDING); with one it finishes inline too here, and
/// the callback is never called (L8).
#[test]
fn m31_build_lam_without_a_completion_finishes_inline() {
    let adapter = open_adapter(own_address());
    let mut buffer = Buffer::new(PAGE + 1, 0xFFF, 0);
    for completion in [false, true] {
        let call = build_lam_raw(&adapter, buffer.mdl(), buffer.len, completion, 0x28);
        assert_success!(call.status, "completion {completion}");
        assert_eq!((call.size, call.fbo), (0x20, 0xFFF));
        let mut lam = call.words;
        assert_eq!(lam_count(&lam), 2);
        assert_eq!(call.completions.count(), 0);
        adapter.release_lam(&mut lam);
    }
    adapter.close();
}

/// M32: ReleaseLam undoes the mapping and leaves the MDL (every header
/// field) and the buffer exactly as they were: its logical addresses are
/// refused afterwards (a privileged-token Send fails with
/// STATUS_ACCESS_VIOLATION), while a LAM built again works.
#[test]
fn m32_release_lam_undoes_the_mapping_and_leaves_the_mdl_alone() {
    let pair = Pair::new();
    let (content, mut buffer) = pattern_buffer((PAGE + 0x80, 52), 0x7C0);
    let fields = mdl_fields(buffer.mdl());
    let inbox = Region::new(&pair.b_pd, 2 * PAGE, 0, MR_LOCAL_WRITE);
    let token = pair.a_pd.privileged_token();
    let send_from = |lam: &[u64], context: usize| {
        let sges = lam_sges(&lam_pages(lam), 0x7C0, 0, content.len(), token);
        assert_success!(pair.b_qp.receive(context, &[inbox.sge(0, 2 * PAGE)]));
        assert_success!(pair.a_qp.send(context + 1, &sges, 0));
    };
    let (status, mut lam, _) = pair.a.build_lam(&mut buffer);
    assert_success!(status);
    assert_eq!(mdl_fields(buffer.mdl()), fields);
    pair.a.release_lam(&mut lam);
    assert_eq!(mdl_fields(buffer.mdl()), fields);
    assert_eq!(buffer.bytes(), &content[..]);
    // Built again, it works.
    let (status, mut again, _) = pair.a.build_lam(&mut buffer);
    assert_success!(status);
    send_from(&again, 1);
    expect(&pair.a_cq, 2, STATUS_SUCCESS);
    expect(&pair.b_cq, 1, STATUS_SUCCESS);
    assert_eq!(&inbox.bytes()[..content.len()], &content[..]);
    pair.a.release_lam(&mut again);
    assert_eq!(mdl_fields(buffer.mdl()), fields);
    assert_eq!(buffer.bytes(), &content[..]);
    // Released, its addresses are refused.
    send_from(&again, 3);
    expect(&pair.a_cq, 4, STATUS_ACCESS_VIOLATION);
    expect(&pair.b_cq, 3, STATUS_CANCELLED);
    assert_ended(&pair);
    assert_eq!(buffer.bytes(), &content[..]);
    teardown_closing(pair, [inbox]);
}

/// M32 (consumer): a LAM is released only after the work using it is done,
/// and its AdapterContext is the provider's. A consumer that breaks both
/// harms nothing: ReleaseLam of a LAM whose AdapterContext it overwrote
/// changes nothing (the LAM still maps its pages; restored, it releases),
/// and once the LAM under a fast-registered mapping is released, a peer's
/// Write through the mapping fails with STATUS_ACCESS_VIOLATION and never
/// reaches the buffer.
#[test]
fn m32_misused_release_lam_never_reaches_memory() {
    let pair = Pair::new();
    let (content, mut buffer) = pattern_buffer((2 * PAGE, 62), 0);
    let (status, mut lam, _) = pair.b.build_lam(&mut buffer);
    assert_success!(status);
    let context = lam[0];
    lam[0] = context ^ 0x5A5A_0000;
    pair.b.release_lam(&mut lam);
    lam[0] = context;
    let fast = pair.b_pd.mr(true);
    assert_success!(fast.init_fast(2, true));
    let base = 0x90_0000_0000;
    fast_registers_lam(&pair, 1, &fast, &lam, (0, 2 * PAGE, base));
    let src = a_writes_pattern(&pair, 63, 0x100, (base + 0xFC0, fast.remote_token()));
    assert_placed(buffer.bytes(), &content, 0xFC0, &src.bytes()[..0x100]);
    // Released under the mapping.
    pair.b.release_lam(&mut lam);
    expect_write_refused(
        &pair,
        &buffer,
        src.sge(0x100, 0x100),
        base + 0xFC0,
        fast.remote_token(),
        STATUS_ACCESS_VIOLATION,
    );
    assert_close(fast.close());
    teardown_closing(pair, [src]);
}

/// M33 (consumer): privileged-token SGEs and FastRegister page arrays carry
/// logical addresses from BuildLam of the same adapter, never other
/// addresses. A consumer that breaks this never reaches memory: a Receive
/// naming an unmapped buffer by the privileged token fails with
/// STATUS_ACCESS_VIOLATION; a FastRegister of unmapped pages, of pages of a
/// released LAM, of another adapter's LAM, or of addresses that are no page
/// starts completes with
/// STATUS_INVALID_DEVICE_REQUEST. The buffers are untouched and each error
/// ends its connection.
#[test]
fn m33_addresses_that_no_live_lam_of_the_adapter_maps_never_reach_memory() {
    let victim_content = bytes(2 * PAGE, 53);

    // A privileged-token Receive into a buffer no LAM maps.
    let pair = Pair::new();
    let victim = buffer_with(0, &victim_content);
    let src = Region::pattern(&pair.a_pd, PAGE, 54, 0);
    let sge = NdkSge {
        address: victim.va(),
        length: 0x100,
        memory_region_token: pair.b_pd.privileged_token(),
    };
    assert_success!(pair.b_qp.receive(1, &[sge]));
    assert_success!(pair.a_qp.send(2, &[src.sge(0, 0x100)], 0));
    expect(
        &pair.a_cq,
        2,
        Transport::default().peer_refused(STATUS_REMOTE_RESOURCES),
    );
    expect(&pair.b_cq, 1, STATUS_ACCESS_VIOLATION);
    assert_eq!(victim.bytes(), &victim_content[..]);
    teardown_ended(pair, [src]);

    // FastRegister of page addresses no LAM maps / of a released LAM / of
    // the other adapter's LAM.
    for case in ["unmapped", "released", "other adapter", "not page-aligned"] {
        let pair = Pair::new();
        let mut victim = buffer_with(0, &victim_content);
        let (mut a_lam, mut b_lam) = (Vec::new(), Vec::new());
        let pages: Vec<u64> = match case {
            "unmapped" => vec![victim.va(), victim.va() + PAGE64],
            "released" => {
                let (status, mut released, _) = pair.b.build_lam(&mut victim);
                assert_success!(status);
                pair.b.release_lam(&mut released);
                lam_pages(&released)
            }
            "other adapter" => {
                let (status, other, _) = pair.a.build_lam(&mut victim);
                assert_success!(status);
                a_lam = other;
                lam_pages(&a_lam)
            }
            _ => {
                let (status, own, _) = pair.b.build_lam(&mut victim);
                assert_success!(status);
                b_lam = own;
                lam_pages(&b_lam).iter().map(|p| p + 8).collect()
            }
        };
        let fast = pair.b_pd.mr(true);
        assert_success!(fast.init_fast(2, true));
        let base = 0x70_0000_0000;
        assert_success!(
            pair.b_qp
                .fast_register(1, &fast, &pages, 0, 2 * PAGE, base, OP_REMOTE_WRITE),
            "{case}"
        );
        expect(&pair.b_cq, 1, STATUS_INVALID_DEVICE_REQUEST);
        assert_eq!(victim.bytes(), &victim_content[..], "{case}");
        assert_ended(&pair);
        assert_close(fast.close());
        if !a_lam.is_empty() {
            pair.a.release_lam(&mut a_lam);
        }
        if !b_lam.is_empty() {
            pair.b.release_lam(&mut b_lam);
        }
        teardown_lenient(pair);
    }
}

// ---------------------------------------------------------------------------
// M34–M36: remote access, token life, this provider
// ---------------------------------------------------------------------------

/// M34: a peer reaches a region only with a valid token for it, within its
/// range and with its rights. Each refused Write or Read fails — with
/// STATUS_ACCESS_VIOLATION for a token or right, STATUS_REMOTE_RESOURCES
/// for a range (this provider's choice between the two NDSPI statuses) —
/// touches nothing, and ends the connection.
#[test]
fn m34_peer_access_needs_a_valid_token_range_and_right() {
    #[derive(Clone, Copy, Debug)]
    enum Case {
        UnknownToken,
        LocalTokenAsRemote,
        TokenOfAnotherPd,
        WritePastTheEnd,
        WriteBeforeTheStart,
        ReadPastTheEnd,
        WriteWithoutTheRight,
        ReadWithoutTheRight,
    }
    use Case::*;
    for (case, expected) in [
        (UnknownToken, STATUS_ACCESS_VIOLATION),
        (LocalTokenAsRemote, STATUS_ACCESS_VIOLATION),
        (TokenOfAnotherPd, STATUS_ACCESS_VIOLATION),
        (WritePastTheEnd, STATUS_REMOTE_RESOURCES),
        (WriteBeforeTheStart, STATUS_REMOTE_RESOURCES),
        (ReadPastTheEnd, STATUS_REMOTE_RESOURCES),
        (WriteWithoutTheRight, STATUS_ACCESS_VIOLATION),
        (ReadWithoutTheRight, STATUS_ACCESS_VIOLATION),
    ] {
        let pair = Pair::new();
        let before = bytes(PAGE, 55);
        let flags = match case {
            WriteWithoutTheRight => MR_LOCAL_WRITE | MR_REMOTE_READ,
            ReadWithoutTheRight => MR_REMOTE_WRITE,
            _ => MR_REMOTE,
        };
        let target = Region::of(&pair.b_pd, buffer_with(0x100, &before), flags);
        let other_pd = pair.b.pd();
        let other = Region::of(&other_pd, buffer_with(0x100, &before), MR_REMOTE);
        let src = Region::pattern(&pair.a_pd, PAGE, 56, 0);
        let sink = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
        let end = target.remote(PAGE);
        let status = match case {
            UnknownToken => a_writes(&pair, src.sge(0, 0x10), target.remote(0), 0xFFFF_FFF0),
            LocalTokenAsRemote => a_writes(
                &pair,
                src.sge(0, 0x10),
                target.remote(0),
                target.mr.local_token(),
            ),
            TokenOfAnotherPd => a_writes(&pair, src.sge(0, 0x10), other.remote(0), other.token()),
            WritePastTheEnd => a_writes(&pair, src.sge(0, 0x10), end - 0xF, target.token()),
            WriteBeforeTheStart => a_writes(
                &pair,
                src.sge(0, 0x10),
                target.remote(0) - 1,
                target.token(),
            ),
            ReadPastTheEnd => a_reads(&pair, sink.sge(0, 0x10), end - 0xF, target.token()),
            WriteWithoutTheRight => {
                a_writes(&pair, src.sge(0, 0x10), target.remote(0), target.token())
            }
            ReadWithoutTheRight => {
                a_reads(&pair, sink.sge(0, 0x10), target.remote(0), target.token())
            }
        };
        // A Write the peer refuses completes once sent over iWARP.
        let expected = if matches!(case, ReadPastTheEnd | ReadWithoutTheRight) {
            expected
        } else {
            Transport::default().peer_refused(expected)
        };
        assert_eq!(status, expected, "{case:?}");
        assert_eq!(target.bytes(), &before[..], "{case:?}");
        assert_eq!(other.bytes(), &before[..], "{case:?}");
        assert!(sink.bytes().iter().all(|&b| b == 0), "{case:?}");
        assert_ended(&pair);
        for r in [target, other, src, sink] {
            r.close();
        }
        assert_close(other_pd.close());
        teardown_lenient(pair);
    }
}

/// M35: a fast-register MR keeps its tokens for its whole life: read once
/// after InitializeFastRegisterMr, they name whatever the latest
/// FastRegister mapped — three cycles over three buffers, with another
/// InitializeFastRegisterMr in between — and nothing between an Invalidate
/// and the next FastRegister.
#[test]
fn m35_fast_register_mr_keeps_its_tokens_across_cycles() {
    let pair = Pair::new();
    let fast = pair.b_pd.mr(true);
    assert_success!(fast.init_fast(3, true));
    let (local, remote) = (fast.local_token(), fast.remote_token());
    let src = Region::pattern(&pair.a_pd, 2 * PAGE, 57, 0);
    let inbox = Region::new(&pair.a_pd, PAGE, 0, MR_LOCAL_WRITE);
    let mut buffers: Vec<(Buffer, Vec<u64>, Vec<u8>)> = Vec::new();
    for cycle in 0..3_usize {
        if cycle == 2 {
            assert_success!(fast.init_fast(2, true));
        }
        let offset = 0x111 * cycle;
        let content = bytes(PAGE + 0x400, 60 + cycle as u8);
        let mut buffer = buffer_with(offset, &content);
        let (status, lam, fbo) = pair.b.build_lam(&mut buffer);
        assert_success!(status);
        let base = 0x80_0000_0000 + 0x100_0000 * cycle as u64 + u64::from(fbo);
        fast_registers_lam(&pair, 10 * cycle, &fast, &lam, (fbo, content.len(), base));
        assert_eq!((fast.local_token(), fast.remote_token()), (local, remote));
        // The peer writes through the remote token, across the page boundary.
        let at = PAGE - offset - 0x80;
        assert_success!(a_writes(
            &pair,
            src.sge(0x100 * cycle, 0x100),
            base + at as u64,
            remote
        ));
        assert_placed(
            buffer.bytes(),
            &content,
            at,
            &src.bytes()[0x100 * cycle..0x100 * (cycle + 1)],
        );
        // B sends through the local token.
        assert_success!(pair.a_qp.receive(1, &[inbox.sge(0, 0x100)]));
        let sge = NdkSge {
            address: base + at as u64,
            length: 0x100,
            memory_region_token: local,
        };
        assert_success!(pair.b_qp.send(10 * cycle + 1, &[sge], 0));
        expect(&pair.b_cq, 10 * cycle + 1, STATUS_SUCCESS);
        expect(&pair.a_cq, 1, STATUS_SUCCESS);
        assert_eq!(&inbox.bytes()[..0x100], &buffer.bytes()[at..at + 0x100]);
        assert_success!(pair.b_qp.invalidate(10 * cycle + 2, fast.header(), 0));
        expect(&pair.b_cq, 10 * cycle + 2, STATUS_SUCCESS);
        let now = buffer.bytes().to_vec();
        buffers.push((buffer, lam, now));
    }
    // The earlier buffers kept what they held at the end of their cycle.
    for (buffer, _, now) in &buffers {
        assert_eq!(buffer.bytes(), &now[..]);
    }
    // Between an Invalidate and the next FastRegister the token names nothing.
    assert_refused(
        &pair,
        a_writes(&pair, src.sge(0, 0x10), 0x80_0200_0000, remote),
        STATUS_ACCESS_VIOLATION,
    );
    for (buffer, _, now) in &buffers {
        assert_eq!(buffer.bytes(), &now[..]);
    }
    assert_ended(&pair);
    assert_close(fast.close());
    for (_, mut lam, _) in buffers {
        pair.b.release_lam(&mut lam);
    }
    teardown_closing(pair, [src, inbox]);
}

/// M36: SoftNDK's adapter reports RDMA_READ_SINK_NOT_REQUIRED and
/// LOOPBACK_CONNECTIONS_SUPPORTED, implements the PD's privileged token
/// (M27), and completes BuildLam inline (M31). The loopback flag is true: a
/// connection from the adapter's address to itself carries a Write.
#[test]
fn m36_adapter_reports_read_sink_not_required_and_loopback_connections() {
    let (side, unused) = Side::two();
    unused.close();
    let flags = side.adapter.flags();
    assert!(flags.contains(AdapterFlags::RDMA_READ_SINK_NOT_REQUIRED));
    assert!(flags.contains(AdapterFlags::LOOPBACK_CONNECTIONS_SUPPORTED));
    assert_ne!(side.pd.privileged_token(), 0);
    let mut buffer = Buffer::new(PAGE, 0, 0);
    let call = build_lam_raw(&side.adapter, buffer.mdl(), PAGE, true, 0x18);
    assert_success!(call.status);
    assert_eq!(call.completions.count(), 0);
    let mut lam = call.words;
    side.adapter.release_lam(&mut lam);
    // Loopback.
    let cq = side.adapter.cq(64);
    let qp1 = side.pd.qp(&cq, &cq, 0x1);
    let qp2 = side.pd.qp(&cq, &cq, 0x2);
    let link = side.connect(&qp1, &side, &qp2);
    let before = bytes(PAGE, 58);
    let target = Region::of(&side.pd, buffer_with(0x10, &before), MR_REMOTE);
    let src = Region::pattern(&side.pd, PAGE, 59, 0);
    assert_success!(qp1.write(
        1,
        &[src.sge(0, 0x200)],
        target.remote(0x300),
        target.token(),
        0
    ));
    expect(&cq, 1, STATUS_SUCCESS);
    assert_placed(target.bytes(), &before, 0x300, &src.bytes()[..0x200]);
    link.close();
    assert_closed([qp1.close(), qp2.close()]);
    target.close();
    src.close();
    assert_close(cq.close());
    side.close();
}
