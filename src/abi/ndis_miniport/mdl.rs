//! MDL flags and Mm constants [H wdm.h], used by `kernel::mdl`.

/// `MDL_MAPPED_TO_SYSTEM_VA` (0x1): `MappedSystemVa` is valid.
pub const MDL_MAPPED_TO_SYSTEM_VA: i16 = 0x0001;
/// `MDL_SOURCE_IS_NONPAGED_POOL` (0x4): the buffer is non-paged pool and
/// `MappedSystemVa` is its address.
pub const MDL_SOURCE_IS_NONPAGED_POOL: i16 = 0x0004;
/// `MM_PAGE_PRIORITY::NormalPagePriority` (16): the mapping may fail when
/// system PTEs run low.
pub const NORMAL_PAGE_PRIORITY: u32 = 16;
/// `MdlMappingNoExecute` (0x40000000): map non-executable.
pub const MDL_MAPPING_NO_EXECUTE: u32 = 0x4000_0000;
/// `MEMORY_CACHING_TYPE::MmCached` (1).
pub const MM_CACHED: u32 = 1;
/// `KPROCESSOR_MODE::KernelMode` (0).
pub const KERNEL_MODE: u8 = 0;
