//! NTSTATUS / NDIS_STATUS codes of the miniport side [H ndis.h, ntstatus.h]
//! and the event-log code [H netevent.h].

use crate::abi::types::{NdisStatus, NtStatus};

/// `STATUS_UNSUCCESSFUL` (0xC0000001).
pub const STATUS_UNSUCCESSFUL: NtStatus = 0xC000_0001_u32.cast_signed();
/// `NDIS_STATUS_FAILURE` (= `STATUS_UNSUCCESSFUL`).
pub const NDIS_STATUS_FAILURE: NdisStatus = STATUS_UNSUCCESSFUL;
/// `NDIS_STATUS_NOT_SUPPORTED` (= `STATUS_NOT_SUPPORTED`, 0xC00000BB).
pub const NDIS_STATUS_NOT_SUPPORTED: NdisStatus = 0xC000_00BB_u32.cast_signed();
/// `NDIS_STATUS_INVALID_LENGTH` (0xC0010014): the buffer length is wrong for a
/// set; `BytesNeeded` says what is needed.
pub const NDIS_STATUS_INVALID_LENGTH: NdisStatus = 0xC001_0014_u32.cast_signed();
/// `NDIS_STATUS_INVALID_DATA` (0xC0010015).
pub const NDIS_STATUS_INVALID_DATA: NdisStatus = 0xC001_0015_u32.cast_signed();
/// `NDIS_STATUS_BUFFER_TOO_SHORT` (0xC0010016): a query buffer is too small;
/// `BytesNeeded` says what is needed.
pub const NDIS_STATUS_BUFFER_TOO_SHORT: NdisStatus = 0xC001_0016_u32.cast_signed();
/// `NDIS_STATUS_MULTICAST_FULL` (0xC0010009).
pub const NDIS_STATUS_MULTICAST_FULL: NdisStatus = 0xC001_0009_u32.cast_signed();
/// `NDIS_STATUS_PAUSED` (= `STATUS_NDIS_PAUSED`, 0xC023002A): a send while
/// paused.
pub const NDIS_STATUS_PAUSED: NdisStatus = 0xC023_002A_u32.cast_signed();

/// `EVENT_NDIS_UNSUPPORTED_CONFIGURATION` (0xC0001391) [H netevent.h]: the
/// netevent.dll message "%2 : Does not support the configuration supplied.",
/// written when the configured RoCE frame size is not the operational one
/// (rule A24).
pub const EVENT_NDIS_UNSUPPORTED_CONFIGURATION: NdisStatus = 0xC000_1391_u32.cast_signed();

// The OID failures are errors (negative), and NDIS_STATUS_NOT_SUPPORTED is
// the NDK's STATUS_NOT_SUPPORTED (in `abi::status`).
const _: () = {
    assert!(NDIS_STATUS_BUFFER_TOO_SHORT < 0 && NDIS_STATUS_INVALID_LENGTH < 0);
    assert!(NDIS_STATUS_NOT_SUPPORTED == crate::abi::STATUS_NOT_SUPPORTED);
};
