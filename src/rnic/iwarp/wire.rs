//! Checked big-endian reads and writes at byte offsets: the only way the
//! iWARP code touches a buffer, so a short one is a `None`, never a panic.

/// `N` bytes of `bytes` starting at `at`, if they are all there.
pub(crate) fn array<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The byte at `at`.
pub(crate) fn u8_at(bytes: &[u8], at: usize) -> Option<u8> {
    bytes.get(at).copied()
}

/// The big-endian `u16` at `at`.
pub(crate) fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    array(bytes, at).map(u16::from_be_bytes)
}

/// The big-endian `u32` at `at`.
pub(crate) fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    array(bytes, at).map(u32::from_be_bytes)
}

/// The big-endian `u64` at `at`.
pub(crate) fn be64(bytes: &[u8], at: usize) -> Option<u64> {
    array(bytes, at).map(u64::from_be_bytes)
}

/// Copies `src` into `buf` at `at`; `None` when it does not fit.
pub(crate) fn put(buf: &mut [u8], at: usize, src: &[u8]) -> Option<()> {
    buf.get_mut(at..at.checked_add(src.len())?)?
        .copy_from_slice(src);
    Some(())
}

/// Writes `value` big-endian at `at`.
pub(crate) fn put_be16(buf: &mut [u8], at: usize, value: u16) -> Option<()> {
    put(buf, at, &value.to_be_bytes())
}

/// Writes `value` big-endian at `at`.
pub(crate) fn put_be32(buf: &mut [u8], at: usize, value: u32) -> Option<()> {
    put(buf, at, &value.to_be_bytes())
}

/// Writes `value` big-endian at `at`.
pub(crate) fn put_be64(buf: &mut [u8], at: usize, value: u64) -> Option<()> {
    put(buf, at, &value.to_be_bytes())
}

/// Sets `len` bytes of `buf` at `at` to zero.
pub(crate) fn zero(buf: &mut [u8], at: usize, len: usize) -> Option<()> {
    buf.get_mut(at..at.checked_add(len)?)?.fill(0);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_none() {
        let bytes = [1u8, 2, 3];
        assert_eq!(be16(&bytes, 1), Some(0x0203));
        assert_eq!(be16(&bytes, 2), None);
        assert_eq!(be32(&bytes, 0), None);
        assert_eq!(be64(&bytes, usize::MAX), None);
        assert_eq!(u8_at(&bytes, 3), None);
    }

    #[test]
    fn writes_past_the_end_are_none() {
        let mut buf = [0u8; 4];
        assert_eq!(put_be32(&mut buf, 0, 0x0102_0304), Some(()));
        assert_eq!(buf, [1, 2, 3, 4]);
        assert_eq!(put_be16(&mut buf, 3, 1), None);
        assert_eq!(put_be64(&mut buf, 0, 1), None);
        assert_eq!(zero(&mut buf, usize::MAX, 2), None);
        assert_eq!(zero(&mut buf, 1, 2), Some(()));
        assert_eq!(buf, [1, 0, 0, 4]);
    }
}
