//! MDL chains as the kernel hands them over: each MDL mapped to system space
//! on its own (`MDL_MAPPED_TO_SYSTEM_VA`, `MappedSystemVa` anywhere), linked
//! by `Next`, virtually contiguous as indexes (rules M2, M28).

use std::vec::Vec;

use super::*;
use crate::abi::MDL_MAPPED_TO_SYSTEM_VA;

/// A made-up virtual address (an index only, never dereferenced: M4).
const VA: u64 = 0x0000_5000_0000_0000;

/// Page-aligned memory of its own, one allocation per MDL, so no two MDLs'
/// bytes are adjacent.
pub(crate) struct Piece {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl Piece {
    /// `len` bytes at `offset` into a page of their own allocation, filled
    /// with `fill`; a page of slack on both sides.
    pub(crate) fn new(len: usize, offset: usize, fill: u8) -> Self {
        let storage = std::vec![fill; offset + len + 3 * PAGE];
        let start = storage.as_ptr().align_offset(PAGE) + PAGE + offset;
        Self {
            storage,
            start,
            len,
        }
    }

    pub(crate) fn addr(&self) -> usize {
        self.storage.as_ptr() as usize + self.start
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// A chain of MDLs, one per piece, virtually contiguous from `va` (each
/// MDL's index starts where the previous one's ends) and mapped to the
/// pieces. The MDLs live in a vector that is never resized, so `Next`
/// pointers stay valid.
pub(crate) struct Chain {
    pub(crate) mdls: Vec<Mdl>,
}

impl Chain {
    pub(crate) fn new(va: u64, pieces: &mut [Piece]) -> Self {
        let mut at = va;
        let mut mdls: Vec<Mdl> = pieces
            .iter_mut()
            .map(|piece| {
                let offset = (at % PAGE as u64) as u32;
                let start_va = core::ptr::without_provenance_mut(
                    usize::try_from(at - u64::from(offset)).expect("a test VA fits in usize"),
                );
                let mdl = Mdl {
                    mdl_flags: MDL_MAPPED_TO_SYSTEM_VA,
                    mapped_system_va: piece.bytes_mut().as_mut_ptr().cast(),
                    ..Mdl::over(
                        start_va,
                        offset,
                        u32::try_from(piece.len).expect("a test piece is under 4 GiB"),
                    )
                };
                at += piece.len as u64;
                mdl
            })
            .collect();
        let first = mdls.as_mut_ptr();
        for i in 1..mdls.len() {
            mdls[i - 1].next = first.wrapping_add(i);
        }
        Self { mdls }
    }

    pub(crate) fn head(&mut self) -> *mut Mdl {
        self.mdls.as_mut_ptr()
    }
}

/// Pieces whose in-page offsets follow a chain from `va` (as the Memory
/// Manager's mappings keep each MDL's page offset).
pub(crate) fn pieces_for(va: u64, lens: &[usize], seed: u8) -> Vec<Piece> {
    let mut at = va as usize;
    lens.iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut piece = Piece::new(len, at % PAGE, 0);
            for (n, b) in piece.bytes_mut().iter_mut().enumerate() {
                *b = (n as u8)
                    .wrapping_mul(13)
                    .wrapping_add(seed)
                    .wrapping_add(i as u8);
            }
            at += len;
            piece
        })
        .collect()
}

/// rule M2: a virtually contiguous chain mapped apart becomes one span per
/// MDL, in order, over exactly the mapped bytes; only `length` bytes count.
#[test]
fn m2_chain_mapped_apart_is_one_span_per_mdl() {
    let lens = [0x1234, 0x1AB, 0x2000];
    let mut pieces = pieces_for(VA + 0x321, &lens, 1);
    let mut chain = Chain::new(VA + 0x321, &mut pieces);
    // SAFETY: the chain describes the pieces, alive for the test.
    let spans = unsafe { map_chain(chain.head(), 0x1234 + 0x1AB + 0x10) }
        .expect("the chain covers the length");
    let got: Vec<(usize, usize)> = spans.iter().map(|s| (s.addr(), s.len())).collect();
    assert_eq!(
        got,
        [
            (pieces[0].addr(), 0x1234),
            (pieces[1].addr(), 0x1AB),
            (pieces[2].addr(), 0x10)
        ]
    );
    // The whole chain; then within the first MDL only.
    // SAFETY: as above.
    let all = unsafe { map_chain(chain.head(), lens.iter().sum()) }.expect("the whole chain maps");
    assert_eq!(all.len(), 3);
    // SAFETY: as above.
    let first = unsafe { map_chain(chain.head(), 5) }.expect("the first MDL maps");
    assert_eq!(first.len(), 1);
}

/// rule M2: indexes that do not follow one another (a gap, an overlap),
/// a chain shorter than `length` (M3), a cycle, a zero length and a null
/// MDL are refused with `STATUS_INVALID_PARAMETER`.
#[test]
fn m2_chain_not_virtually_contiguous_is_refused() {
    let lens = [0x100, 0x100];
    let mut pieces = pieces_for(VA, &lens, 2);
    for (name, shift) in [("gap", 1_isize), ("overlap", -1)] {
        let mut chain = Chain::new(VA, &mut pieces);
        chain.mdls[1].byte_offset = chain.mdls[1].byte_offset.wrapping_add_signed(shift as i32);
        // SAFETY: the chain describes the pieces, alive for the test.
        let result = unsafe { map_chain(chain.head(), 0x200) };
        assert_eq!(result.unwrap_err(), STATUS_INVALID_PARAMETER, "{name}");
        // Within the first MDL the chain does not matter.
        // SAFETY: as above.
        assert!(unsafe { map_chain(chain.head(), 0x100) }.is_ok(), "{name}");
    }
    let mut chain = Chain::new(VA, &mut pieces);
    // SAFETY: as above.
    let short = unsafe { map_chain(chain.head(), 0x201) };
    assert_eq!(short.unwrap_err(), STATUS_INVALID_PARAMETER);
    // SAFETY: as above.
    let zero = unsafe { map_chain(chain.head(), 0) };
    assert_eq!(zero.unwrap_err(), STATUS_INVALID_PARAMETER);
    // SAFETY: a null chain is refused before any access.
    let null = unsafe { map_chain(core::ptr::null(), 1) };
    assert_eq!(null.unwrap_err(), STATUS_INVALID_PARAMETER);
    // A cycle of empty MDLs at one index: refused after MAX_CHAIN links.
    let mut looped = Chain::new(VA, &mut pieces[..1]);
    looped.mdls[0].byte_count = 0;
    let head = looped.head();
    looped.mdls[0].next = head;
    // SAFETY: the MDL is valid; the cycle is the point.
    let cycle = unsafe { map_chain(head, 1) };
    assert_eq!(cycle.unwrap_err(), STATUS_INVALID_PARAMETER);
}

/// Empty MDLs inside a chain add nothing; mappings that continue one
/// another merge into one span (the single-span fast path); an MDL that
/// cannot be mapped is `STATUS_INSUFFICIENT_RESOURCES`.
#[test]
fn chain_merges_adjacent_mappings_and_skips_empty_mdls() {
    let mut whole = Piece::new(0x3000, 0x10, 7);
    let base = whole.addr();
    let mut pieces = pieces_for(VA + 0x10, &[0x1000, 0, 0x2000], 3);
    let mut chain = Chain::new(VA + 0x10, &mut pieces);
    // Re-map the two non-empty MDLs onto one buffer, back to back.
    chain.mdls[0].mapped_system_va = whole.bytes_mut().as_mut_ptr().cast();
    chain.mdls[2].mapped_system_va = whole.bytes_mut()[0x1000..].as_mut_ptr().cast();
    // SAFETY: the chain describes `whole` (and an empty piece).
    let spans = unsafe { map_chain(chain.head(), 0x3000) }.expect("the chain covers the length");
    let got: Vec<(usize, usize)> = spans.iter().map(|s| (s.addr(), s.len())).collect();
    assert_eq!(got, [(base, 0x3000)]);
    chain.mdls[2].mapped_system_va = core::ptr::null_mut();
    // SAFETY: a valid chain; the null mapping is refused before any access.
    let unmapped = unsafe { map_chain(chain.head(), 0x3000) };
    assert_eq!(unmapped.unwrap_err(), STATUS_INSUFFICIENT_RESOURCES);
}

/// The bound: a chain of more than `MAX_SPANS` MDLs mapped apart is
/// refused with `STATUS_INSUFFICIENT_RESOURCES`; exactly `MAX_SPANS` maps.
#[test]
fn chain_of_more_than_max_spans_is_refused() {
    // One byte per MDL, every other byte of one buffer: never adjacent.
    let mut bytes = std::vec![0_u8; 2 * (MAX_SPANS + 1)];
    let lens = std::vec![1_usize; MAX_SPANS + 1];
    let mut pieces = pieces_for(VA, &lens, 0);
    let mut chain = Chain::new(VA, &mut pieces);
    let first = bytes.as_mut_ptr();
    for (i, mdl) in chain.mdls.iter_mut().enumerate() {
        mdl.mapped_system_va = first.wrapping_add(2 * i).cast();
    }
    // SAFETY: every MDL describes one byte of `bytes`, alive for the test.
    let over = unsafe { map_chain(chain.head(), MAX_SPANS + 1) };
    assert_eq!(over.unwrap_err(), STATUS_INSUFFICIENT_RESOURCES);
    // SAFETY: as above.
    let at = unsafe { map_chain(chain.head(), MAX_SPANS) }.expect("MAX_SPANS spans are allowed");
    assert_eq!(at.len(), MAX_SPANS);
}

fn span(addr: usize, len: usize) -> Span {
    // SAFETY: never dereferenced: the plan only looks at addresses.
    unsafe { Span::new(addr, len) }.expect("a test span neither wraps nor starts at null")
}

fn pages_of(spans: &[Span]) -> Vec<u64> {
    let mut out = Vec::new();
    for_each_lam_page(spans, |p| out.push(p));
    out
}

/// rule M28: the page list of a chain mapped apart: the first MDL's pages
/// from the one holding its first byte (the FBO), each next MDL's pages
/// after; a page two MDLs share (a boundary inside a page) is listed once.
#[test]
fn m28_lam_pages_of_a_chain_mapped_apart() {
    let (a, b, c) = (0x10_0000, 0x20_0000, 0x30_0000);
    // Page-aligned boundaries: every page of every MDL.
    let clean = [span(a + 0x321, 0x1000 - 0x321), span(b, 0x2000), span(c, 5)];
    assert_eq!(
        lam_plan(&clean),
        Some(LamPlan {
            fbo: 0x321,
            pages: 4
        })
    );
    assert_eq!(
        pages_of(&clean),
        [a as u64, b as u64, b as u64 + 0x1000, c as u64]
    );
    // A boundary inside a page: the second MDL's first page is the first
    // MDL's last one.
    let shared = [
        span(a + 0x10, 0x1800),
        span(b + 0x810, 0x17F0),
        span(c, 0x1000),
    ];
    assert_eq!(
        lam_plan(&shared),
        Some(LamPlan {
            fbo: 0x10,
            pages: 4
        })
    );
    assert_eq!(
        pages_of(&shared),
        [a as u64, a as u64 + 0x1000, b as u64 + 0x1000, c as u64]
    );
    // An MDL within the shared page lists no page of its own.
    let inside = [span(a, 0x10), span(b + 0x10, 0x20), span(c + 0x30, 0x1000)];
    assert_eq!(lam_plan(&inside), Some(LamPlan { fbo: 0, pages: 2 }));
    assert_eq!(pages_of(&inside), [a as u64, c as u64 + 0x1000]);
    // A mapping that does not keep its page offset cannot be listed.
    let skewed = [span(a, 0x10), span(b + 0x11, 0x20)];
    assert_eq!(lam_plan(&skewed), None);
    assert_eq!(lam_plan(&[]), None);
    // The LAM's memory: each span's whole pages.
    let memory = lam_memory(&shared).expect("a few spans' worth of memory is allocated");
    let got: Vec<(usize, usize)> = memory.iter().map(|s| (s.addr(), s.len())).collect();
    assert_eq!(got, [(a, 0x2000), (b, 0x2000), (c, 0x1000)]);
}
