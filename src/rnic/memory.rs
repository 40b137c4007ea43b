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
        self.entries
            .try_reserve(1)
            .map_err(|_| LamError::NoMemory)?;
        let id = LamId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        let start = pages.addr() as u64;
        let at = self.entries.partition_point(|&(s, _, _)| s <= start);
        self.entries.insert(at, (start, id, pages));
        Ok(id)
    }

    /// Forgets a LAM; returns its span. Unknown ids give `None` (a consumer
    /// releasing twice).
    pub fn remove(&mut self, id: LamId) -> Option<Span> {
        let at = self.entries.iter().position(|&(_, i, _)| i == id)?;
        Some(self.entries.remove(at).2)
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
}
