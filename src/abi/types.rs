//! Primitive and borrowed Windows types the NDK ABI is built from (ndk-abi.md §1,
//! §2.1, §3.13, §3.14).
//!
//! Only what the NDK structures and function types reference is declared here;
//! the address types are the Winsock ones because NDK addresses are `SOCKADDR`s.

use core::ffi::c_void;

/// `NTSTATUS`: a signed 32-bit status code (§1). Negative values are errors
/// (severity bits `11`), so `status < 0` is the C `!NT_SUCCESS(status)`.
pub type NtStatus = i32;

/// `NDIS_STATUS`: NDIS status values are NTSTATUS values (§1).
pub type NdisStatus = NtStatus;

/// `BOOLEAN`: one unsigned byte, TRUE = 1, FALSE = 0 (§1).
///
/// Kept as `u8` rather than `bool` because a consumer may pass any byte value and
/// a Rust `bool` holding anything but 0 or 1 is undefined behaviour.
pub type Boolean = u8;

/// `TRUE` as a [`Boolean`] (§1).
pub const TRUE: Boolean = 1;

/// `FALSE` as a [`Boolean`] (§1).
pub const FALSE: Boolean = 0;

/// `NDK_LOGICAL_ADDRESS` (= `PHYSICAL_ADDRESS` = `LARGE_INTEGER`, §1).
///
/// In C a union of `{ULONG LowPart; LONG HighPart}` and `LONGLONG QuadPart`; both
/// views cover the same 8 bytes with 8-byte alignment, so the signed 64-bit
/// `QuadPart` is the whole value.
pub type NdkLogicalAddress = i64;

/// `PHYSICAL_ADDRESS`: the same 8-byte `LARGE_INTEGER` as [`NdkLogicalAddress`] (§1).
pub type PhysicalAddress = i64;

/// `NDIS_HANDLE`: an opaque pointer-sized handle (§1).
pub type NdisHandle = *mut c_void;

/// `ADDRESS_FAMILY`: `USHORT` [H-ws2def] (§1).
pub type AddressFamily = u16;

/// `KAFFINITY`: a pointer-sized processor bit mask (§1).
pub type KAffinity = usize;

/// `PFN_NUMBER`: a physical page frame number, pointer-sized on x64 (§3.13 and
/// ndk-abi.md §6 item 17, which corrects the DDI page's `ULONG`).
pub type PfnNumber = usize;

/// `NDIS_NIC_SWITCH_ID`: `ULONG` [H-ndisndk] (§1).
pub type NdisNicSwitchId = u32;

/// `NDIS_NIC_SWITCH_VPORT_ID`: `ULONG` [H-ndisndk] (§1).
pub type NdisNicSwitchVportId = u32;

/// `NDIS_OID`: an object identifier for an NDIS OID request (§5.9).
pub type NdisOid = u32;

/// `NET_IFINDEX`: a network interface index, `ULONG` (§4.14).
pub type NetIfIndex = u32;

/// `NDK_VERSION` (§2.1): the NDKPI version, `{Major, Minor}`, 4 bytes, align 2.
///
/// Passed **by value** where a parameter has this type (§1); as a 4-byte
/// `#[repr(C)]` struct it travels in one integer register, exactly as in C.
/// The derived ordering compares `major` first, then `minor`, which is version
/// order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NdkVersion {
    /// `Major`.
    pub major: u16,
    /// `Minor`.
    pub minor: u16,
}

/// `GUID` (§1): `{ULONG Data1; USHORT Data2; USHORT Data3; UCHAR Data4[8]}`,
/// 0x10 bytes, align 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Guid {
    /// `Data1`.
    pub data1: u32,
    /// `Data2`.
    pub data2: u16,
    /// `Data3`.
    pub data3: u16,
    /// `Data4`.
    pub data4: [u8; 8],
}

impl Guid {
    /// A GUID from its registry form read as one number: the GUID
    /// `{2227e803-8d8b-11d4-abad-009027719e09}` is
    /// `from_u128(0x2227E803_8D8B_11D4_ABAD_009027719E09)`:
    /// `Data1`, `Data2` and `Data3` are the first three groups as numbers,
    /// `Data4` the last eight bytes in the order written.
    #[must_use]
    pub const fn from_u128(value: u128) -> Self {
        let bytes = value.to_be_bytes();
        Self {
            data1: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            data2: u16::from_be_bytes([bytes[4], bytes[5]]),
            data3: u16::from_be_bytes([bytes[6], bytes[7]]),
            data4: [
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14],
                bytes[15],
            ],
        }
    }
}

/// `GROUP_AFFINITY` (§3.14): a processor group and a mask of processors in it,
/// 0x10 bytes, align 8.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupAffinity {
    /// `Mask`: the processors of `group`.
    pub mask: KAffinity,
    /// `Group`: the processor group number.
    pub group: u16,
    /// `Reserved`: zero.
    pub reserved: [u16; 3],
}

/// `SOCKADDR` (§3.14): the generic socket address a `PSOCKADDR` parameter is
/// typed as, 16 bytes, align 2.
///
/// NDK never passes a bare `SOCKADDR`: the pointee is a [`SockAddrIn`] or a
/// [`SockAddrIn6`], chosen by `sa_family`, with the length parameter next to it
/// giving the bytes available (§1, parameter-type notes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SockAddr {
    /// `sa_family`: [`AF_INET`](super::AF_INET) or [`AF_INET6`](super::AF_INET6).
    pub sa_family: AddressFamily,
    /// `sa_data`: `CHAR[14]`, family-specific bytes.
    pub sa_data: [u8; 14],
}

/// `IN_ADDR` (§3.14): an IPv4 address, 4 bytes in network byte order, align 4.
///
/// In C a union of `UCHAR[4]`, `USHORT[2]` and `ULONG`; the bytes are the
/// natural Rust view and `align(4)` keeps the alignment the `ULONG` member gives.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct InAddr {
    /// The address bytes, most significant first (`S_un.S_un_b`).
    pub bytes: [u8; 4],
}

/// `IN6_ADDR` (§3.14): an IPv6 address, 16 bytes in network byte order, align 2.
///
/// In C a union of `UCHAR Byte[16]` and `USHORT Word[8]`; `align(2)` keeps the
/// alignment of the `USHORT` member.
#[repr(C, align(2))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct In6Addr {
    /// The address bytes, most significant first (`u.Byte`).
    pub bytes: [u8; 16],
}

/// `SOCKADDR_IN` (§3.14): an IPv4 socket address, 0x10 bytes, align 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SockAddrIn {
    /// `sin_family`: [`AF_INET`](super::AF_INET).
    pub sin_family: AddressFamily,
    /// `sin_port`: the port in network byte order.
    pub sin_port: u16,
    /// `sin_addr`.
    pub sin_addr: InAddr,
    /// `sin_zero`: `CHAR[8]`, zero.
    pub sin_zero: [u8; 8],
}

/// `SOCKADDR_IN6` (= `SOCKADDR_IN6_LH`, §3.14): an IPv6 socket address, 0x1C
/// bytes, align 4.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SockAddrIn6 {
    /// `sin6_family`: [`AF_INET6`](super::AF_INET6).
    pub sin6_family: AddressFamily,
    /// `sin6_port`: the port in network byte order.
    pub sin6_port: u16,
    /// `sin6_flowinfo`.
    pub sin6_flowinfo: u32,
    /// `sin6_addr`.
    pub sin6_addr: In6Addr,
    /// `sin6_scope_id`. In C a union with `SCOPE_ID sin6_scope_struct`, a `ULONG`
    /// of bit fields (`Zone : 28`, `Level : 4`); both are the same 4 bytes.
    pub sin6_scope_id: u32,
}

/// `SOCKADDR_INET` (§3.14): an IPv4 or IPv6 socket address, told apart by the
/// family member shared by both; 0x1C bytes, align 4.
///
/// No `Debug`: which member is valid depends on the data.
#[repr(C)]
#[derive(Clone, Copy)]
pub union SockAddrInet {
    /// `Ipv4`, valid when `si_family` is [`AF_INET`](super::AF_INET).
    pub ipv4: SockAddrIn,
    /// `Ipv6`, valid when `si_family` is [`AF_INET6`](super::AF_INET6).
    pub ipv6: SockAddrIn6,
    /// `si_family`: the first two bytes of either member.
    pub si_family: AddressFamily,
}

/// All zeros, through the largest member (`ipv6`) so that every byte is
/// initialised; the family is then 0 (`AF_UNSPEC`).
impl Default for SockAddrInet {
    fn default() -> Self {
        Self {
            ipv6: SockAddrIn6::default(),
        }
    }
}

/// `MDL` header (§3.13): the memory descriptor list a consumer passes to
/// `NdkRegisterMr` and `NdkBuildLam`.
///
/// Only the fixed header is declared: the `PFN_NUMBER` ([`PfnNumber`]) array
/// follows immediately at offset 0x30 (`size_of::<Mdl>()`), with one entry per
/// page the buffer spans. Windows treats the structure as partially opaque and
/// drivers read it through the Mm accessors; the fields are here so that the
/// host backend can build MDLs and the raw backend can implement those
/// accessors. Not `Clone`/`Copy`: a copy of the header alone would lose the PFN
/// array that belongs to it.
#[repr(C)]
#[derive(Debug)]
pub struct Mdl {
    /// `Next`: the next MDL of a chain, or null.
    pub next: *mut Mdl,
    /// `Size`: `CSHORT`, bytes of the header plus its PFN array.
    pub size: i16,
    /// `MdlFlags`: `CSHORT`, `MDL_*` flags.
    pub mdl_flags: i16,
    /// Padding in C; declared so that a header built here is fully initialised.
    pub padding_0c: u32,
    /// `Process`: `PEPROCESS` (opaque) owning the described user-mode pages, or null.
    pub process: *mut c_void,
    /// `MappedSystemVa`: the system-space mapping, when `MdlFlags` says there is one.
    pub mapped_system_va: *mut c_void,
    /// `StartVa`: the page-aligned start of the buffer.
    pub start_va: *mut c_void,
    /// `ByteCount`: the buffer length in bytes (`MmGetMdlByteCount`).
    pub byte_count: u32,
    /// `ByteOffset`: the buffer start within the first page (`MmGetMdlByteOffset`);
    /// `StartVa + ByteOffset` is `MmGetMdlVirtualAddress`.
    pub byte_offset: u32,
}

impl Mdl {
    /// A lone header (no next MDL, no process, no flags, not mapped)
    /// describing `byte_count` bytes at `start_va + byte_offset`; `size` is
    /// the header's own 0x30 bytes. A caller that sets `mdl_flags` or
    /// `mapped_system_va` does so with struct update syntax.
    #[must_use]
    pub const fn over(start_va: *mut c_void, byte_offset: u32, byte_count: u32) -> Self {
        Self {
            next: core::ptr::null_mut(),
            size: 0x30,
            mdl_flags: 0,
            padding_0c: 0,
            process: core::ptr::null_mut(),
            mapped_system_va: core::ptr::null_mut(),
            start_va,
            byte_count,
            byte_offset,
        }
    }
}

assert_layouts! {
    layout_ndk_version: NdkVersion, size 0x4, align 2 { major: 0x0, minor: 0x2 }
    layout_guid: Guid, size 0x10, align 4 { data1: 0x0, data2: 0x4, data3: 0x6, data4: 0x8 }
    layout_group_affinity: GroupAffinity, size 0x10, align 8 {
        mask: 0x0, group: 0x8, reserved: 0xA,
    }
    layout_sock_addr: SockAddr, size 0x10, align 2 { sa_family: 0x0, sa_data: 0x2 }
    layout_in_addr: InAddr, size 0x4, align 4 { bytes: 0x0 }
    layout_in6_addr: In6Addr, size 0x10, align 2 { bytes: 0x0 }
    layout_sock_addr_in: SockAddrIn, size 0x10, align 4 {
        sin_family: 0x0, sin_port: 0x2, sin_addr: 0x4, sin_zero: 0x8,
    }
    layout_sock_addr_in6: SockAddrIn6, size 0x1C, align 4 {
        sin6_family: 0x00, sin6_port: 0x02, sin6_flowinfo: 0x04, sin6_addr: 0x08,
        sin6_scope_id: 0x18,
    }
    layout_sock_addr_inet: SockAddrInet, size 0x1C, align 4 { ipv4: 0x0, ipv6: 0x0, si_family: 0x0 }
    layout_mdl: Mdl, size 0x30, align 8 {
        next: 0x00, size: 0x08, mdl_flags: 0x0A, padding_0c: 0x0C, process: 0x10,
        mapped_system_va: 0x18, start_va: 0x20, byte_count: 0x28, byte_offset: 0x2C,
    }
}

#[cfg(target_arch = "x86_64")]
const _: () = {
    // §1: the scalar aliases must have the Windows x64 sizes.
    assert!(size_of::<NtStatus>() == 4);
    assert!(size_of::<Boolean>() == 1);
    assert!(size_of::<NdkLogicalAddress>() == 8 && align_of::<NdkLogicalAddress>() == 8);
    assert!(size_of::<KAffinity>() == 8);
    assert!(size_of::<PfnNumber>() == 8);
    assert!(size_of::<NdisHandle>() == 8);
};

#[cfg(test)]
mod tests {
    use super::Guid;

    /// `from_u128` gives the fields a header's `DEFINE_GUID` lists for the
    /// same GUID (`NPI_WSK_INTERFACE_ID`, `wsk.h`).
    #[test]
    fn guid_from_its_registry_form_has_the_header_fields() {
        let guid = Guid::from_u128(0x2227_E803_8D8B_11D4_ABAD_0090_2771_9E09);
        assert_eq!(
            guid,
            Guid {
                data1: 0x2227_E803,
                data2: 0x8D8B,
                data3: 0x11D4,
                data4: [0xAB, 0xAD, 0x00, 0x90, 0x27, 0x71, 0x9E, 0x09],
            }
        );
        assert_eq!(guid, crate::abi::NPI_WSK_INTERFACE_ID);
    }
}
