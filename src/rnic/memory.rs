//! Memory the emulated NIC may touch, and the one routine that moves bytes.
//!
//! This is the only module of `rnic` with `unsafe` code. Everything that
//! reaches consumer memory does so through a [`Span`]: an address range the
//! provider vouched for when it created the span (a registered MDL mapped to a
//! system address in the kernel, the caller's own buffer in host mode, a LAM
//! page). Every copy checks the requested offset and length against the spans
//! on both sides **before** a byte moves; a range that does not fit is an
//! error, never an access.
//!
//! The [`LamTable`] records the logical-address ranges built by `BuildLam`:
//! privileged-token SGEs and fast-register page lists are only honoured inside
//! a live LAM (rules M27, M33), so a consumer cannot make the device touch an
//! arbitrary address.

use core::fmt;

/// A range of memory the device may read and write.
///
/// # Invariants
/// `addr..addr + len` does not wrap, and whoever created the span guaranteed
/// (see [`Span::new`]) that the range is valid for reads and writes for as long
/// as the registration, LAM or call that holds it lasts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Span {
    addr: usize,
    len: usize,
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Span({:#x}+{:#x})", self.addr, self.len)
    }
}

/// Why a copy did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// The source range leaves its span.
    SourceOutOfBounds,
    /// The destination range leaves its span.
    DestinationOutOfBounds,
}

impl Span {
    /// Vouches for `len` bytes at `addr`.
    ///
    /// Returns `None` when the range wraps the address space or `addr` is null
    /// with a nonzero length.
    ///
    /// # Safety
    /// For as long as the returned span (or any copy of it) is used, the range
    /// must be valid for reads and writes from any thread at up to
    /// DISPATCH_LEVEL: resident, mapped, and not freed. Concurrent access by
    /// the consumer is allowed (the device's view of such bytes is then
    /// unspecified, as on hardware), but the memory must stay allocated.
    pub unsafe fn new(addr: usize, len: usize) -> Option<Self> {
        if addr == 0 && len != 0 {
            return None;
        }
        addr.checked_add(len)?;
        // INVARIANT: the range does not wrap; validity is the caller's promise.
        Some(Self { addr, len })
    }

    /// An empty span (no bytes, never dereferenced).
    #[must_use]
    pub const fn empty() -> Self {
        Self { addr: 0, len: 0 }
    }

    /// First address.
    #[must_use]
    pub const fn addr(&self) -> usize {
        self.addr
    }

    /// Bytes.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the span has no bytes.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sub-span `offset..offset + len`, if it lies inside this one.
    #[must_use]
    pub fn sub(&self, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // INVARIANT: a sub-range of a valid span is valid for as long as it is.
        Some(Self {
            addr: self.addr + offset,
            len,
        })
    }
}

/// Copies `src.len()` bytes from `src` to the start of `dst`.
///
/// The ranges may overlap (a loopback Write into the region it reads from):
/// the copy behaves like `memmove`.
///
/// # Errors
/// [`CopyError::DestinationOutOfBounds`] when `dst` is shorter than `src`;
/// nothing is copied then.
pub fn copy(dst: Span, src: Span) -> Result<(), CopyError> {
    if src.len > dst.len {
        return Err(CopyError::DestinationOutOfBounds);
    }
    if src.len == 0 {
        return Ok(());
    }
    // SAFETY:
    // - `src` and `dst` are spans: valid for reads and writes of their whole
    //   length for as long as they are used (type invariant), and `src.len`
    //   bytes fit in both (checked above).
    // - `core::ptr::copy` allows overlapping ranges and has no alignment needs
    //   for `u8`.
    unsafe { core::ptr::copy(src.addr as *const u8, dst.addr as *mut u8, src.len) };
    Ok(())
}

/// Copies from a span into device-owned bytes (inline data, private data).
///
/// # Errors
/// [`CopyError::DestinationOutOfBounds`] when `dst` is shorter than `src`.
pub fn copy_to_slice(dst: &mut [u8], src: Span) -> Result<(), CopyError> {
    let dst = dst
        .get_mut(..src.len)
        .ok_or(CopyError::DestinationOutOfBounds)?;
    if dst.is_empty() {
        return Ok(());
    }
    // SAFETY:
    // - `src` is valid for reads of `src.len` bytes (type invariant); `dst` is a
    //   live exclusive slice of exactly that length.
    // - A span never aliases device-owned memory (it names consumer memory), so
    //   the ranges do not overlap.
    unsafe { core::ptr::copy_nonoverlapping(src.addr as *const u8, dst.as_mut_ptr(), dst.len()) };
    Ok(())
}

/// Copies device-owned bytes into the start of a span.
///
/// # Errors
/// [`CopyError::DestinationOutOfBounds`] when `dst` is shorter than `src`.
pub fn copy_from_slice(dst: Span, src: &[u8]) -> Result<(), CopyError> {
    if src.len() > dst.len {
        return Err(CopyError::DestinationOutOfBounds);
    }
    if src.is_empty() {
        return Ok(());
    }
    // SAFETY:
    // - `dst` is valid for writes of `dst.len >= src.len()` bytes (type invariant).
    // - `src` is a live slice of device-owned memory, which no span aliases.
    unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst.addr as *mut u8, src.len()) };
    Ok(())
}

/// The most spans one region may have: a registration over an MDL chain
/// gets one span per MDL whose mapping does not continue the previous one's
/// (rule M2). A longer chain is refused ([`SpanListError::TooMany`], which the
/// provider reports as `STATUS_INSUFFICIENT_RESOURCES`).
pub const MAX_SPANS: usize = 1024;

/// The memory of a region made of several spans, in order: the bytes of an
/// MDL chain whose MDLs are mapped on their own, wherever each mapping lies
/// (rule M2). Byte `n` of the list is byte `n - start` of the span whose
/// `start` is the greatest one not above `n`.
///
/// Built once, at registration (the only allocation); read without
/// allocating: [`run`](Self::run) finds the span of an offset by binary
/// search.
///
/// # Invariants
/// No span is empty; `starts[i]` is the sum of the lengths of the spans
/// before `i`, so `starts` is strictly increasing from 0; `len` is the sum of
/// every length. Spans that continue one another are merged, so a list never
/// holds two spans that could be one.
pub struct SpanList {
    starts: alloc::boxed::Box<[u64]>,
    spans: alloc::boxed::Box<[Span]>,
    len: u64,
}

impl fmt::Debug for SpanList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpanList")
            .field("spans", &self.spans.len())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Why a span list was not built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanListError {
    /// More than [`MAX_SPANS`] spans after merging.
    TooMany,
    /// The total length does not fit in a `u64`.
    TooLong,
    /// Pool memory for the list ran out.
    NoMemory,
}

impl SpanList {
    /// The spans `parts`, in order, as one list; empty parts are skipped and
    /// a part that starts where the previous one ends is merged into it.
    ///
    /// Control path only: allocates the list once.
    ///
    /// # Errors
    /// [`SpanListError`] for more than [`MAX_SPANS`] spans after merging, a
    /// total length past `u64::MAX`, or no memory.
    pub fn new(parts: &[Span]) -> Result<Self, SpanListError> {
        let count = Self::merged(parts, |_| ());
        if count > MAX_SPANS {
            return Err(SpanListError::TooMany);
        }
        let mut spans = alloc::vec::Vec::new();
        spans
            .try_reserve_exact(count)
            .map_err(|_| SpanListError::NoMemory)?;
        let mut starts = alloc::vec::Vec::new();
        starts
            .try_reserve_exact(count)
            .map_err(|_| SpanListError::NoMemory)?;
        Self::merged(parts, |span| spans.push(span));
        let mut len = 0_u64;
        for span in &spans {
            starts.push(len);
            len = len
                .checked_add(span.len as u64)
                .ok_or(SpanListError::TooLong)?;
        }
        // INVARIANT: non-empty, merged spans; `starts` their running offsets.
        Ok(Self {
            starts: starts.into_boxed_slice(),
            spans: spans.into_boxed_slice(),
            len,
        })
    }

    /// Feeds the merged, non-empty spans of `parts` to `each`; returns how
    /// many there were.
    fn merged(parts: &[Span], mut each: impl FnMut(Span)) -> usize {
        let mut count = 0;
        let mut open: Option<Span> = None;
        for &part in parts.iter().filter(|p| !p.is_empty()) {
            match open {
                // Both valid, and the second starts where the first ends: the
                // union is one valid range that does not wrap (the end of a
                // span does not wrap).
                Some(run) if run.addr + run.len == part.addr => {
                    open = Some(Span {
                        addr: run.addr,
                        len: run.len + part.len,
                    });
                }
                _ => {
                    if let Some(run) = open.replace(part) {
                        each(run);
                        count += 1;
                    }
                }
            }
        }
        if let Some(run) = open {
            each(run);
            count += 1;
        }
        count
    }

    /// Bytes.
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the list has no bytes.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many spans (after merging).
    #[must_use]
    pub fn count(&self) -> usize {
        self.spans.len()
    }

    /// The only span, when there is exactly one.
    #[must_use]
    pub fn single(&self) -> Option<Span> {
        match &*self.spans {
            [only] => Some(*only),
            _ => None,
        }
    }

    /// The spans, in order.
    #[must_use]
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// The memory at byte `offset` of the list, up to `max` bytes and never
    /// past the end of the span holding `offset`; `None` at or past the end.
    /// A caller walking a range calls again at `offset + run.len()`.
    #[must_use]
    pub fn run(&self, offset: u64, max: u64) -> Option<Span> {
        if offset >= self.len {
            return None;
        }
        // The last span starting at or below `offset` (the first starts at 0).
        let index = self
            .starts
            .partition_point(|&s| s <= offset)
            .checked_sub(1)?;
        let span = self.spans.get(index)?;
        let within = offset - self.starts.get(index)?;
        let room = (span.len as u64).checked_sub(within)?;
        span.sub(
            usize::try_from(within).ok()?,
            usize::try_from(max.min(room)).ok()?,
        )
    }

    /// Copies `src` into the list from byte `offset`, span by span.
    ///
    /// # Errors
    /// [`CopyError::DestinationOutOfBounds`] when the range leaves the list;
    /// nothing is copied then.
    pub fn write(&self, offset: u64, src: &[u8]) -> Result<(), CopyError> {
        self.check(offset, src.len(), CopyError::DestinationOutOfBounds)?;
        let mut done = 0;
        while let Some(rest) = src.get(done..).filter(|r| !r.is_empty()) {
            let span = self
                .run(offset + done as u64, rest.len() as u64)
                .ok_or(CopyError::DestinationOutOfBounds)?;
            let piece = rest
                .get(..span.len)
                .ok_or(CopyError::DestinationOutOfBounds)?;
            copy_from_slice(span, piece)?;
            done += span.len;
        }
        Ok(())
    }

    /// Copies bytes of the list from byte `offset` into `dst`, span by span.
    ///
    /// # Errors
    /// [`CopyError::SourceOutOfBounds`] when the range leaves the list;
    /// nothing is copied then.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), CopyError> {
        self.check(offset, dst.len(), CopyError::SourceOutOfBounds)?;
        let mut done = 0;
        while done < dst.len() {
            let want = (dst.len() - done) as u64;
            let span = self
                .run(offset + done as u64, want)
                .ok_or(CopyError::SourceOutOfBounds)?;
            let piece = dst
                .get_mut(done..done + span.len)
                .ok_or(CopyError::SourceOutOfBounds)?;
            copy_to_slice(piece, span)?;
            done += span.len;
        }
        Ok(())
    }

    /// Whether `len` bytes at `offset` lie inside the list.
    fn check(&self, offset: u64, len: usize, error: CopyError) -> Result<(), CopyError> {
        let end = offset.checked_add(len as u64).ok_or(error)?;
        if end > self.len {
            return Err(error);
        }
        Ok(())
    }
}

/// Identifies one LAM built by `BuildLam`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LamId(pub u64);

/// The live logical-address ranges of one device.
///
/// Logical addresses are what `BuildLam` hands out and what privileged-token
/// SGEs and fast-register page lists name. SoftNDK uses the address of the
/// mapped memory itself (the system address in the kernel, the caller's own
/// address in host mode), page-aligned, so a logical address is valid exactly
/// when it falls inside a live LAM.
#[derive(Default)]
pub struct LamTable {
    /// Live LAMs sorted by start address. Several LAMs may cover the same
    /// pages; each is its own entry.
    entries: alloc::vec::Vec<(u64, LamId, Span)>,
    next_id: u64,
}

impl fmt::Debug for LamTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LamTable")
            .field("live", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// Why a LAM could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LamError {
    /// Pool memory for the table entry ran out.
    NoMemory,
}

impl LamTable {
    /// An empty table.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            entries: alloc::vec::Vec::new(),
            next_id: 1,
        }
    }

    /// Records `pages` (a page-aligned span) as logical addresses.
    ///
    /// Control path only: it may allocate and moves entries to keep them sorted.
    ///
    /// # Errors
    /// [`LamError::NoMemory`] when the table cannot grow.
    pub fn insert(&mut self, pages: Span) -> Result<LamId, LamError> {
        self.insert_all(&[pages])
    }

    /// Records several page-aligned spans as one LAM (`BuildLam` over an MDL
    /// chain whose MDLs are mapped apart, rule M28): each span is an entry
    /// of its own, all under the returned id, all released together.
    ///
    /// Control path only: it may allocate and moves entries to keep them sorted.
    ///
    /// # Errors
    /// [`LamError::NoMemory`] when the table cannot grow; nothing is
    /// recorded then.
    pub fn insert_all(&mut self, pages: &[Span]) -> Result<LamId, LamError> {
        self.entries
            .try_reserve(pages.len())
            .map_err(|_| LamError::NoMemory)?;
        let id = LamId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        for &span in pages {
            let start = span.addr() as u64;
            let at = self.entries.partition_point(|&(s, _, _)| s <= start);
            self.entries.insert(at, (start, id, span));
        }
        Ok(id)
    }

    /// Forgets a LAM (every entry it recorded); returns its lowest span.
    /// Unknown ids give `None` (a consumer releasing twice).
    pub fn remove(&mut self, id: LamId) -> Option<Span> {
        let first = self.entries.iter().find(|&&(_, i, _)| i == id)?.2;
        self.entries.retain(|&(_, i, _)| i != id);
        Some(first)
    }

    /// Live LAMs.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no LAM is live.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The span for `len` bytes at logical address `addr`, if one live LAM
    /// covers all of them.
    ///
    /// Binary search to the last LAM starting at or below `addr`, then a walk
    /// back over earlier ones (only LAMs that overlap each other make the walk
    /// longer than one step for a valid address).
    #[must_use]
    pub fn resolve(&self, addr: u64, len: u64) -> Option<Span> {
        let end = addr.checked_add(len)?;
        let candidates = self.entries.partition_point(|&(s, _, _)| s <= addr);
        let below = self.entries.get(..candidates)?;
        below.iter().rev().find_map(|&(start, _, span)| {
            let span_end = start.checked_add(span.len() as u64)?;
            if end > span_end {
                return None;
            }
            span.sub(
                usize::try_from(addr - start).ok()?,
                usize::try_from(len).ok()?,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    /// `PAGE_SIZE` as a `usize` for buffer sizes.
    const PAGE: usize = 4096;
    const PAGE_SIZE: u64 = crate::rnic::types::PAGE_SIZE;

    fn span_of(buf: &mut [u8]) -> Span {
        // SAFETY: the test buffer outlives every use of the span.
        unsafe { Span::new(buf.as_mut_ptr() as usize, buf.len()) }.unwrap()
    }

    #[test]
    fn test_span_rejects_wrapping_and_null() {
        // SAFETY: the spans are never used for access.
        assert!(unsafe { Span::new(usize::MAX - 3, 8) }.is_none());
        // SAFETY: as above.
        assert!(unsafe { Span::new(0, 1) }.is_none());
        // SAFETY: as above.
        assert!(unsafe { Span::new(0, 0) }.is_some());
    }

    #[test]
    fn test_span_sub_checks_bounds() {
        let mut buf = [0_u8; 16];
        let span = span_of(&mut buf);
        assert_eq!(span.sub(4, 12).unwrap().len(), 12);
        assert!(span.sub(4, 13).is_none());
        assert!(span.sub(usize::MAX, 2).is_none());
        assert_eq!(span.sub(16, 0).unwrap().len(), 0);
    }

    #[test]
    fn test_copy_moves_every_byte_and_checks_bounds_first() {
        let mut src: Vec<u8> = (0..=255).collect();
        let mut dst = vec![0xEE_u8; 300];
        let s = span_of(&mut src);
        let d = span_of(&mut dst);
        copy(d.sub(10, 256).unwrap(), s).unwrap();
        assert_eq!(&dst[10..266], &src[..]);
        assert!(dst[..10].iter().chain(&dst[266..]).all(|&b| b == 0xEE));
        // Too small: nothing moves.
        let before = dst.clone();
        assert_eq!(
            copy(d.sub(0, 255).unwrap(), s),
            Err(CopyError::DestinationOutOfBounds)
        );
        assert_eq!(dst, before);
    }

    #[test]
    fn test_copy_overlapping_behaves_like_memmove() {
        let mut buf: Vec<u8> = (0..32).collect();
        let span = span_of(&mut buf);
        copy(span.sub(4, 16).unwrap(), span.sub(0, 16).unwrap()).unwrap();
        assert_eq!(&buf[4..20], &(0..16).collect::<Vec<u8>>()[..]);
    }

    #[test]
    fn test_slice_copies() {
        let mut buf = [0_u8; 8];
        let span = span_of(&mut buf);
        copy_from_slice(span, &[1, 2, 3]).unwrap();
        let mut out = [0_u8; 3];
        copy_to_slice(&mut out, span.sub(0, 3).unwrap()).unwrap();
        assert_eq!(out, [1, 2, 3]);
        assert_eq!(
            copy_from_slice(span, &[0; 9]),
            Err(CopyError::DestinationOutOfBounds)
        );
        assert_eq!(
            copy_to_slice(&mut out, span),
            Err(CopyError::DestinationOutOfBounds)
        );
    }

    #[test]
    fn test_lam_table_resolves_only_live_ranges() {
        let mut buf = vec![0_u8; 3 * PAGE];
        let span = span_of(&mut buf);
        let mut table = LamTable::new();
        let start = span.addr() as u64;
        let id = table.insert(span).unwrap();
        assert_eq!(
            table.resolve(start + 10, 100).unwrap().addr(),
            span.addr() + 10
        );
        assert!(
            table.resolve(start + 3 * PAGE_SIZE - 1, 2).is_none(),
            "past the end"
        );
        assert!(table.resolve(start - 1, 2).is_none(), "before the start");
        assert!(table.resolve(u64::MAX, 2).is_none(), "wrapping");
        assert!(table.remove(id).is_some());
        assert!(table.remove(id).is_none(), "released twice");
        assert!(table.resolve(start + 10, 100).is_none(), "released");
        assert!(table.is_empty());
    }

    #[test]
    fn test_lam_table_overlapping_entries() {
        let mut buf = vec![0_u8; 4 * PAGE];
        let all = span_of(&mut buf);
        let mut table = LamTable::new();
        let big = table.insert(all).unwrap();
        let small = table.insert(all.sub(PAGE, PAGE).unwrap()).unwrap();
        let start = all.addr() as u64;
        // Covered by the big one even though the small one starts closer.
        assert!(
            table
                .resolve(start + PAGE_SIZE + 10, 2 * PAGE_SIZE)
                .is_some()
        );
        table.remove(big);
        assert!(
            table
                .resolve(start + PAGE_SIZE + 10, 2 * PAGE_SIZE)
                .is_none()
        );
        assert!(table.resolve(start + PAGE_SIZE + 10, 100).is_some());
        table.remove(small);
        assert_eq!(table.len(), 0);
    }

    /// Several host buffers, made non-adjacent on purpose: each part lives
    /// in its own allocation with a guard byte on both sides, so no part can
    /// merge with the next and an access past a part's end would be caught
    /// by the guards (and by Miri).
    struct Scattered {
        bufs: Vec<Vec<u8>>,
    }

    impl Scattered {
        /// Parts of `lens` bytes, each starting `offsets[i]` bytes into its
        /// allocation (odd offsets: a part may end mid-page), filled 0xEE.
        fn new(lens: &[usize], offsets: &[usize]) -> Self {
            let bufs = lens
                .iter()
                .zip(offsets.iter().cycle())
                .map(|(&len, &offset)| vec![0xEE_u8; offset + len + 1])
                .collect();
            Self { bufs }
        }

        fn spans(&mut self, lens: &[usize], offsets: &[usize]) -> Vec<Span> {
            self.bufs
                .iter_mut()
                .zip(lens.iter().zip(offsets.iter().cycle()))
                .map(|(buf, (&len, &offset))| span_of(&mut buf[offset..offset + len]))
                .collect()
        }

        /// The parts' bytes, concatenated.
        fn flat(&self, lens: &[usize], offsets: &[usize]) -> Vec<u8> {
            self.bufs
                .iter()
                .zip(lens.iter().zip(offsets.iter().cycle()))
                .flat_map(|(buf, (&len, &offset))| buf[offset..offset + len].iter().copied())
                .collect()
        }

        /// Whether every guard byte (before and after each part) is intact.
        fn guards_intact(&self, lens: &[usize], offsets: &[usize]) -> bool {
            self.bufs
                .iter()
                .zip(lens.iter().zip(offsets.iter().cycle()))
                .all(|(buf, (&len, &offset))| {
                    buf[..offset].iter().all(|&b| b == 0xEE) && buf[offset + len] == 0xEE
                })
        }
    }

    /// rule M2: a region over spans mapped apart reads and writes across
    /// every span boundary, and a run never crosses one.
    #[test]
    fn test_span_list_copies_across_every_boundary() {
        let lens = [0x123, 1, 0x1000, 0x7FF, 3];
        let offsets = [0x11, 0x5, 0x3];
        let mut parts = Scattered::new(&lens, &offsets);
        let spans = parts.spans(&lens, &offsets);
        let list = SpanList::new(&spans).unwrap();
        let total: usize = lens.iter().sum();
        assert_eq!((list.len(), list.count()), (total as u64, lens.len()));
        assert!(list.single().is_none());
        // Runs stop at each span's end.
        let mut at = 0_u64;
        for &len in &lens {
            let run = list.run(at, u64::MAX).unwrap();
            assert_eq!(run.len(), len);
            at += len as u64;
        }
        assert!(list.run(at, 1).is_none(), "past the end");
        // A write straddling every boundary, then a read of it back.
        let data: Vec<u8> = (0..total - 2).map(|i| (i * 7 + 1) as u8).collect();
        list.write(1, &data).unwrap();
        let flat = parts.flat(&lens, &offsets);
        assert_eq!(&flat[1..total - 1], &data[..]);
        assert_eq!((flat[0], flat[total - 1]), (0xEE, 0xEE));
        assert!(parts.guards_intact(&lens, &offsets));
        let mut back = vec![0_u8; total - 2];
        list.read(1, &mut back).unwrap();
        assert_eq!(back, data);
        // Every boundary on its own: two bytes either side of it.
        let mut start = 0_usize;
        for &len in &lens[..lens.len() - 1] {
            start += len;
            let mut two = [0_u8; 2];
            list.read((start - 1) as u64, &mut two).unwrap();
            assert_eq!(two, [data[start - 2], data[start - 1]]);
        }
    }

    /// rule M2: a range that leaves the list is refused before a byte moves.
    #[test]
    fn test_span_list_checks_bounds_at_the_edges() {
        let lens = [10, 20];
        let offsets = [1, 2];
        let mut parts = Scattered::new(&lens, &offsets);
        let spans = parts.spans(&lens, &offsets);
        let list = SpanList::new(&spans).unwrap();
        let before = parts.flat(&lens, &offsets);
        assert_eq!(
            list.write(25, &[1; 6]),
            Err(CopyError::DestinationOutOfBounds)
        );
        assert_eq!(
            list.write(u64::MAX, &[1]),
            Err(CopyError::DestinationOutOfBounds)
        );
        assert_eq!(parts.flat(&lens, &offsets), before, "nothing moved");
        assert_eq!(
            list.read(30, &mut [0; 1]),
            Err(CopyError::SourceOutOfBounds)
        );
        list.write(30, &[]).unwrap();
        list.write(24, &[9; 6]).unwrap();
        assert!(parts.guards_intact(&lens, &offsets));
        assert!(list.run(30, 1).is_none());
        assert_eq!(list.run(29, 100).unwrap().len(), 1);
        assert_eq!(list.run(9, 100).unwrap().len(), 1);
        assert_eq!(list.run(10, 0).unwrap().len(), 0);
    }

    /// Adjacent spans merge (one span: the fast path), empty ones vanish,
    /// and the bound on spans holds.
    #[test]
    fn test_span_list_merges_and_is_bounded() {
        let mut buf = vec![0_u8; 64];
        let all = span_of(&mut buf);
        let pieces = [
            all.sub(0, 10).unwrap(),
            Span::empty(),
            all.sub(10, 0).unwrap(),
            all.sub(10, 54).unwrap(),
        ];
        let list = SpanList::new(&pieces).unwrap();
        assert_eq!(list.single(), Some(all));
        assert_eq!(SpanList::new(&[]).unwrap().len(), 0);
        // Every other byte: nothing merges.
        let mut big = vec![0_u8; 2 * (MAX_SPANS + 1)];
        let big_span = span_of(&mut big);
        let apart: Vec<Span> = (0..=MAX_SPANS)
            .map(|i| big_span.sub(2 * i, 1).unwrap())
            .collect();
        assert_eq!(SpanList::new(&apart).unwrap_err(), SpanListError::TooMany);
        assert_eq!(
            SpanList::new(&apart[..MAX_SPANS]).unwrap().count(),
            MAX_SPANS
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 128 },
            // Under Miri's isolation the failure file's path (the working
            // directory) cannot be read; failures are printed either way.
            failure_persistence: if cfg!(miri) {
                None
            } else {
                proptest::prelude::ProptestConfig::default().failure_persistence
            },
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// rule M2: any write then read at any offset of a list of spans
        /// mapped apart does exactly what it does on one flat buffer.
        #[test]
        fn test_span_list_matches_a_flat_buffer(
            lens in proptest::collection::vec(1_usize..300, 1..6),
            offsets in proptest::collection::vec(0_usize..9, 1..4),
            ops in proptest::collection::vec((0_usize..1600, 0_usize..400, proptest::prelude::any::<u8>()), 1..8),
        ) {
            let mut parts = Scattered::new(&lens, &offsets);
            let spans = parts.spans(&lens, &offsets);
            let list = SpanList::new(&spans).unwrap();
            let mut reference = parts.flat(&lens, &offsets);
            let total = reference.len();
            for (at, len, seed) in ops {
                let data: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
                let fits = at + len <= total;
                proptest::prop_assert_eq!(list.write(at as u64, &data).is_ok(), fits);
                if fits {
                    reference[at..at + len].copy_from_slice(&data);
                }
                proptest::prop_assert_eq!(&parts.flat(&lens, &offsets), &reference);
                let mut out = vec![0_u8; len];
                proptest::prop_assert_eq!(list.read(at as u64, &mut out).is_ok(), fits);
                if fits {
                    proptest::prop_assert_eq!(&out[..], &reference[at..at + len]);
                }
            }
            proptest::prop_assert!(parts.guards_intact(&lens, &offsets));
        }
    }
}
