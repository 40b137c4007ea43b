//! NTSTATUS and `NDIS_STATUS` codes used by NDKPI (ndk-abi.md §5.12).
//!
//! The values are written as the unsigned hexadecimal numbers of the tables and
//! reinterpreted bit for bit as the signed [`NtStatus`] with
//! [`u32::cast_signed`], so an error code is negative exactly as in C.
//!
//! The user-mode NDSPI `ND_*` codes are the same NTSTATUS values (for example
//! `ND_CANCELED` = [`STATUS_CANCELLED`], `ND_REMOTE_ERROR` =
//! [`STATUS_REMOTE_RESOURCES`]), so they get no constants of their own.

use super::types::{NdisStatus, NtStatus};

/// `STATUS_SUCCESS` (0x00000000): success, everywhere (§5.12).
pub const STATUS_SUCCESS: NtStatus = 0x0000_0000_u32.cast_signed();

/// `STATUS_PENDING` (0x00000103): an asynchronous create, request or close will
/// complete through its callback (§5.12).
pub const STATUS_PENDING: NtStatus = 0x0000_0103_u32.cast_signed();

/// `STATUS_BUFFER_OVERFLOW` (0x80000005): `CqStatus` of a CQ overrun, after which
/// the CQ and its QPs are unusable; in NDSPI, a receive buffer too small (§5.12).
pub const STATUS_BUFFER_OVERFLOW: NtStatus = 0x8000_0005_u32.cast_signed();

/// `STATUS_NO_MORE_ENTRIES` (0x8000001A): NDSPI only, queue full
/// (`ND_NO_MORE_ENTRIES`) (§5.12).
pub const STATUS_NO_MORE_ENTRIES: NtStatus = 0x8000_001A_u32.cast_signed();

/// `STATUS_ACCESS_VIOLATION` (0xC0000005): Bind / `FastRegister` access mismatch
/// (§5.12).
pub const STATUS_ACCESS_VIOLATION: NtStatus = 0xC000_0005_u32.cast_signed();

/// `STATUS_INVALID_PARAMETER` (0xC000000D): create limits exceeded, MDL not
/// virtually contiguous, bad SRQ / CQ depth (§5.12).
pub const STATUS_INVALID_PARAMETER: NtStatus = 0xC000_000D_u32.cast_signed();

/// `STATUS_INVALID_DEVICE_REQUEST` (0xC0000010): NDSPI completion status of a
/// malformed request (§5.12).
pub const STATUS_INVALID_DEVICE_REQUEST: NtStatus = 0xC000_0010_u32.cast_signed();

/// `STATUS_BUFFER_TOO_SMALL` (0xC0000023): `QueryAdapterInfo`, `GetConnectionData`,
/// the Get…Address functions and `BuildLam`, with the required size reported
/// (§5.12).
pub const STATUS_BUFFER_TOO_SMALL: NtStatus = 0xC000_0023_u32.cast_signed();

/// `STATUS_INVALID_PARAMETER_MIX` (0xC0000030): `ControlCqInterruptModeration` with
/// both knobs on "ignore" (§5.12).
pub const STATUS_INVALID_PARAMETER_MIX: NtStatus = 0xC000_0030_u32.cast_signed();

/// `STATUS_DATA_OVERRUN` (0xC000003C): NDSPI, too many SGEs for inline data, or
/// an SGL that references more data than can be sent (§5.12).
pub const STATUS_DATA_OVERRUN: NtStatus = 0xC000_003C_u32.cast_signed();

/// `STATUS_SHARING_VIOLATION` (0xC0000043): Listen, Connect,
/// `CreateSharedEndpoint`: the local address is in use (§5.12).
pub const STATUS_SHARING_VIOLATION: NtStatus = 0xC000_0043_u32.cast_signed();

/// `STATUS_INSUFFICIENT_RESOURCES` (0xC000009A): any create, inline or
/// asynchronous (§5.12).
pub const STATUS_INSUFFICIENT_RESOURCES: NtStatus = 0xC000_009A_u32.cast_signed();

/// `STATUS_IO_TIMEOUT` (0xC00000B5): Connect, `CompleteConnect`, Accept, Disconnect
/// (§5.12).
pub const STATUS_IO_TIMEOUT: NtStatus = 0xC000_00B5_u32.cast_signed();

/// `STATUS_NOT_SUPPORTED` (0xC00000BB): `QueryExtension`, and
/// `ControlCqInterruptModeration` without the adapter flag (§5.12).
pub const STATUS_NOT_SUPPORTED: NtStatus = 0xC000_00BB_u32.cast_signed();

/// `STATUS_INTERNAL_ERROR` (0xC00000E5): `CqStatus` / `SrqStatus` of a fatal
/// error (§5.12).
pub const STATUS_INTERNAL_ERROR: NtStatus = 0xC000_00E5_u32.cast_signed();

/// `STATUS_INVALID_PARAMETER_4` (0xC00000F2): NDSPI only, invalid flags
/// (`ND_INVALID_PARAMETER_4`) (§5.12).
pub const STATUS_INVALID_PARAMETER_4: NtStatus = 0xC000_00F2_u32.cast_signed();

/// `STATUS_CANCELLED` (0xC0000120): completion status of flushed requests
/// (`ND_CANCELED`) (§5.12).
pub const STATUS_CANCELLED: NtStatus = 0xC000_0120_u32.cast_signed();

/// `STATUS_REMOTE_RESOURCES` (0xC000013D): `NdkRead` beyond the remote region
/// (`ND_REMOTE_ERROR`) (§5.12).
pub const STATUS_REMOTE_RESOURCES: NtStatus = 0xC000_013D_u32.cast_signed();

/// `STATUS_INVALID_ADDRESS` (0xC0000141): Listen, Connect, `CreateSharedEndpoint`:
/// the address is not on this adapter (§5.12).
pub const STATUS_INVALID_ADDRESS: NtStatus = 0xC000_0141_u32.cast_signed();

/// `STATUS_INVALID_BUFFER_SIZE` (0xC0000206): NDSPI only, private data too long
/// (`ND_INVALID_BUFFER_SIZE`) (§5.12).
pub const STATUS_INVALID_BUFFER_SIZE: NtStatus = 0xC000_0206_u32.cast_signed();

/// `STATUS_TOO_MANY_ADDRESSES` (0xC0000209): port 0 requested and the ephemeral
/// range is exhausted (§5.12).
pub const STATUS_TOO_MANY_ADDRESSES: NtStatus = 0xC000_0209_u32.cast_signed();

/// `STATUS_ADDRESS_ALREADY_EXISTS` (0xC000020A): the 4-tuple already exists
/// (§5.12).
pub const STATUS_ADDRESS_ALREADY_EXISTS: NtStatus = 0xC000_020A_u32.cast_signed();

/// `STATUS_CONNECTION_REFUSED` (0xC0000236): Connect found no listener, a full
/// backlog, or an active reject (§5.12).
pub const STATUS_CONNECTION_REFUSED: NtStatus = 0xC000_0236_u32.cast_signed();

/// `STATUS_CONNECTION_INVALID` (0xC000023A): posting on an unconnected QP;
/// `CompleteConnect` when not connecting (§5.12).
pub const STATUS_CONNECTION_INVALID: NtStatus = 0xC000_023A_u32.cast_signed();

/// `STATUS_NETWORK_UNREACHABLE` (0xC000023C): Connect (§5.12).
pub const STATUS_NETWORK_UNREACHABLE: NtStatus = 0xC000_023C_u32.cast_signed();

/// `STATUS_HOST_UNREACHABLE` (0xC000023D): Connect (§5.12).
pub const STATUS_HOST_UNREACHABLE: NtStatus = 0xC000_023D_u32.cast_signed();

/// `STATUS_CONNECTION_ABORTED` (0xC0000241): Accept, `CompleteConnect`, Reject: the
/// peer abandoned the connection (§5.12).
pub const STATUS_CONNECTION_ABORTED: NtStatus = 0xC000_0241_u32.cast_signed();

/// `STATUS_DEVICE_REMOVED` (0xC00002B6): NDSPI (§5.12).
pub const STATUS_DEVICE_REMOVED: NtStatus = 0xC000_02B6_u32.cast_signed();

/// `STATUS_IMPLEMENTATION_LIMIT` (0xC000042B): `InitializeFastRegisterMr` with an
/// unsupported page count (§5.12).
pub const STATUS_IMPLEMENTATION_LIMIT: NtStatus = 0xC000_042B_u32.cast_signed();

/// `NDIS_STATUS_SUCCESS` (0x00000000): open handler success (§5.12).
pub const NDIS_STATUS_SUCCESS: NdisStatus = 0x0000_0000_u32.cast_signed();

/// `NDIS_STATUS_PENDING` (0x00000103, = [`STATUS_PENDING`]); never allowed for
/// `OID_NDK_SET_STATE` (§5.12).
pub const NDIS_STATUS_PENDING: NdisStatus = 0x0000_0103_u32.cast_signed();

/// `NDIS_STATUS_BAD_VERSION` (0xC0010004): open handler, the requested NDKPI
/// version is not supported (§2.3, §5.12).
pub const NDIS_STATUS_BAD_VERSION: NdisStatus = 0xC001_0004_u32.cast_signed();

/// `NDIS_STATUS_ADAPTER_NOT_READY` (0xC0010011): open handler while NDK is
/// disabled (§2.3, §5.12).
pub const NDIS_STATUS_ADAPTER_NOT_READY: NdisStatus = 0xC001_0011_u32.cast_signed();

/// `NDIS_STATUS_RESOURCES` (0xC000009A, = [`STATUS_INSUFFICIENT_RESOURCES`]): open
/// handler out of resources (§2.3, §5.12).
pub const NDIS_STATUS_RESOURCES: NdisStatus = 0xC000_009A_u32.cast_signed();

// §5.12 states these equalities; pin them so a typo in one value cannot split
// them. Error codes (severity 11) must be negative, warnings (severity 10) too.
const _: () = {
    assert!(NDIS_STATUS_SUCCESS == STATUS_SUCCESS);
    assert!(NDIS_STATUS_PENDING == STATUS_PENDING);
    assert!(NDIS_STATUS_RESOURCES == STATUS_INSUFFICIENT_RESOURCES);
    assert!(STATUS_BUFFER_OVERFLOW < 0 && STATUS_NO_MORE_ENTRIES < 0);
    assert!(STATUS_CANCELLED < 0 && NDIS_STATUS_BAD_VERSION < 0);
    assert!(STATUS_PENDING > 0);
};
