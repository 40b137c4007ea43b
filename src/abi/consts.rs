//! NDKPI and NDIS NDK constants (ndk-abi.md §2.2, §5.1–§5.11, §5.13, §5.14).
//!
//! C enums are `#[repr(transparent)]` newtypes with associated constants (see the
//! module documentation of [`abi`](super) for why); C `#define` flag sets are
//! bitflags types; everything else is a plain `const` of the C type.

use super::ndis::NdisNdkPerformanceCounters;
use super::types::{AddressFamily, Guid, NdisOid, NdkVersion};

// ---------------------------------------------------------------------------
// §2.2 Versions
// ---------------------------------------------------------------------------

/// NDKPI 1.1 (NDIS 6.30, Windows Server 2012), the first release (§2.2).
pub const NDK_VERSION_1_1: NdkVersion = NdkVersion { major: 1, minor: 1 };

/// NDKPI 1.2 (NDIS 6.40, Windows Server 2012 R2 / 8.1), the version this ABI
/// module describes (§2.2).
pub const NDK_VERSION_1_2: NdkVersion = NdkVersion { major: 1, minor: 2 };

/// NDKPI 2.1 (Windows Server 2022). Its additions are **UNVERIFIED** (no public
/// header) and are declared here as function types only (§2.2, §4.10).
pub const NDK_VERSION_2_1: NdkVersion = NdkVersion { major: 2, minor: 1 };

// ---------------------------------------------------------------------------
// §5.1 NDK_OBJECT_TYPE
// ---------------------------------------------------------------------------

c_enum! {
    /// `NDK_OBJECT_TYPE` (§5.1): the type tag in `NDK_OBJECT_HEADER.ObjectType`.
    ///
    /// A C enum (4-byte MSVC `int`); every value is non-negative, so `u32` carries
    /// the same bits.
    pub struct NdkObjectType(pub u32) {
        /// `NdkObjectTypeUndefined`: never valid in a header.
        const UNDEFINED = 0x0;
        /// `NdkObjectTypeAdapter`: [`NdkAdapter`](super::NdkAdapter).
        const ADAPTER = 0x1;
        /// `NdkObjectTypeQp`: [`NdkQp`](super::NdkQp).
        const QP = 0x2;
        /// `NdkObjectTypeCq`: [`NdkCq`](super::NdkCq).
        const CQ = 0x3;
        /// `NdkObjectTypeMr`: [`NdkMr`](super::NdkMr).
        const MR = 0x4;
        /// `NdkObjectTypeMw`: [`NdkMw`](super::NdkMw).
        const MW = 0x5;
        /// `NdkObjectTypePd`: [`NdkPd`](super::NdkPd).
        const PD = 0x6;
        /// `NdkObjectTypeSharedEndpoint`: [`NdkSharedEndpoint`](super::NdkSharedEndpoint).
        const SHARED_ENDPOINT = 0x7;
        /// `NdkObjectTypeConnector`: [`NdkConnector`](super::NdkConnector).
        const CONNECTOR = 0x8;
        /// `NdkObjectTypeListener`: [`NdkListener`](super::NdkListener).
        const LISTENER = 0x9;
        /// `NdkObjectTypeSrq`: [`NdkSrq`](super::NdkSrq).
        const SRQ = 0xA;
        /// `NdkObjectTypeMax`: one past the last type; a bound, not a type.
        const MAX = 0xB;
    }
}

impl NdkObjectType {
    /// The type's short name for diagnostics (`"QP"`), `"object"` for a value
    /// that is no type.
    pub const fn name(self) -> &'static str {
        match self.0 {
            0x1 => "adapter",
            0x2 => "QP",
            0x3 => "CQ",
            0x4 => "MR",
            0x5 => "MW",
            0x6 => "PD",
            0x7 => "shared endpoint",
            0x8 => "connector",
            0x9 => "listener",
            0xA => "SRQ",
            _ => "object",
        }
    }
}

// ---------------------------------------------------------------------------
// §5.2 NDK_OPERATION_TYPE
// ---------------------------------------------------------------------------

c_enum! {
    /// `NDK_OPERATION_TYPE` (§5.2): the operation a completion reports in
    /// `NDK_RESULT_EX.Type`.
    ///
    /// A C enum (4-byte MSVC `int`). `RECEIVE_AND_INVALIDATE` is 0x8001, not a
    /// sign-extended 0xFFFF8001 (ndk-abi.md §6 item 2).
    pub struct NdkOperationType(pub u32) {
        /// `NdkOperationTypeReceive`: an `NdkReceive` / `NdkSrqReceive` completion.
        const RECEIVE = 0x1;
        /// `NdkOperationTypeReceiveAndInvalidate`: a receive completion caused by a
        /// peer's `SendAndInvalidate`; `TypeSpecificCompletionOutput` holds the
        /// invalidated token.
        const RECEIVE_AND_INVALIDATE = 0x8001;
        /// `NdkOperationTypeSend`: an `NdkSend` completion, also the sender side of
        /// `NdkSendAndInvalidate`.
        const SEND = 0x2;
        /// `NdkOperationTypeFastRegister`: `NdkFastRegister`.
        const FAST_REGISTER = 0x4;
        /// `NdkOperationTypeBind`: `NdkBind`.
        const BIND = 0x8;
        /// `NdkOperationTypeInvalidate`: `NdkInvalidate`.
        const INVALIDATE = 0x10;
        /// `NdkOperationTypeRead`: `NdkRead`.
        const READ = 0x20;
        /// `NdkOperationTypeWrite`: `NdkWrite`.
        const WRITE = 0x40;
    }
}

// ---------------------------------------------------------------------------
// §5.3 NDK_OP_FLAG_*
// ---------------------------------------------------------------------------

bitflags::bitflags! {
    /// `NDK_OP_FLAG_*` (§5.3): the `Flags` word of a work request (Send,
    /// `SendAndInvalidate`, Read, Write, Bind, `FastRegister`, Invalidate).
    ///
    /// The C parameter is a `ULONG`, kept as `u32` in the function types; use
    /// `OpFlags::from_bits_retain(flags)` to inspect a consumer's word, unknown
    /// bits included. Which flags each request accepts is tabulated in §5.3.
    #[repr(transparent)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct OpFlags: u32 {
        /// `NDK_OP_FLAG_SILENT_SUCCESS` (0x001): no CQ entry if the request
        /// succeeds; failures still produce one.
        const SILENT_SUCCESS = 0x001;
        /// `NDK_OP_FLAG_READ_FENCE` (0x002): all prior reads complete before this
        /// request starts.
        const READ_FENCE = 0x002;
        /// `NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT` (0x004): the peer's receive
        /// completion is solicited.
        const SEND_AND_SOLICIT_EVENT = 0x004;
        /// `NDK_OP_FLAG_ALLOW_REMOTE_READ` (0x008): the FRMR / MW grants remote read.
        const ALLOW_REMOTE_READ = 0x008;
        /// `NDK_OP_FLAG_ALLOW_LOCAL_WRITE` (0x010): the FRMR grants local write.
        const ALLOW_LOCAL_WRITE = 0x010;
        /// `NDK_OP_FLAG_ALLOW_REMOTE_WRITE` (0x030): grants remote write; a
        /// composite value that includes `ALLOW_LOCAL_WRITE` (0x010).
        const ALLOW_REMOTE_WRITE = 0x030;
        /// `NDK_OP_FLAG_INLINE` (0x040): copy the data inline; SGE tokens are
        /// ignored.
        const INLINE = 0x040;
        /// `NDK_OP_FLAG_RDMA_READ_SINK` (0x080): the FRMR may be an RDMA read sink.
        const RDMA_READ_SINK = 0x080;
        /// `NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE` (0x100, NDKPI 1.2): a
        /// successful Read invalidates the token of its first SGE. The `NdkRead`
        /// DDI page wrongly gives 0x200 (ndk-abi.md §6 item 1).
        const RDMA_READ_LOCAL_INVALIDATE = 0x100;
        /// `NDK_OP_FLAG_DEFER` (0x200, NDKPI 1.2): the provider may delay handing
        /// the request to the hardware.
        const DEFER = 0x200;
    }
}

// ---------------------------------------------------------------------------
// §5.4 NDK_MR_FLAG_*
// ---------------------------------------------------------------------------

/// `NDK_MR_FLAG_ALLOW_LOCAL_READ` (0x0, §5.4): local read is always implied.
///
/// Kept outside [`MrFlags`] because a zero-valued flag is meaningless in a
/// bit set (it would be "contained" in every value).
pub const NDK_MR_FLAG_ALLOW_LOCAL_READ: u32 = 0x0;

bitflags::bitflags! {
    /// `NDK_MR_FLAG_*` (§5.4): the `Flags` word of `NdkRegisterMr` (a `ULONG`,
    /// kept as `u32` in [`NdkFnRegisterMr`](super::NdkFnRegisterMr)).
    ///
    /// Local read is always granted ([`NDK_MR_FLAG_ALLOW_LOCAL_READ`] = 0).
    #[repr(transparent)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MrFlags: u32 {
        /// `NDK_MR_FLAG_ALLOW_LOCAL_WRITE` (0x1): local write.
        const ALLOW_LOCAL_WRITE = 0x1;
        /// `NDK_MR_FLAG_ALLOW_REMOTE_READ` (0x2): remote read.
        const ALLOW_REMOTE_READ = 0x2;
        /// `NDK_MR_FLAG_ALLOW_REMOTE_WRITE` (0x5): remote write; a composite value
        /// that includes `ALLOW_LOCAL_WRITE` (0x1).
        const ALLOW_REMOTE_WRITE = 0x5;
        /// `NDK_MR_FLAG_RDMA_READ_SINK` (0x8): the region may be an RDMA read sink.
        const RDMA_READ_SINK = 0x8;
    }
}

// ---------------------------------------------------------------------------
// §5.5 CQ arm types
// ---------------------------------------------------------------------------

c_enum! {
    /// `NDK_CQ_NOTIFY_*` (§5.5): the `Type` argument of `NdkArmCq`.
    ///
    /// In C a set of `#define`s for a `ULONG` parameter; a `#[repr(transparent)]`
    /// newtype over `u32` has the same ABI, so [`NdkFnArmCq`](super::NdkFnArmCq)
    /// takes it directly, and any value a consumer passes is representable.
    pub struct NdkCqNotifyType(pub u32) {
        /// `NDK_CQ_NOTIFY_ERRORS` (0x0): CQ errors only (overrun, catastrophic failure).
        const ERRORS = 0x0;
        /// `NDK_CQ_NOTIFY_ANY` (0x1): the next successful completion.
        const ANY = 0x1;
        /// `NDK_CQ_NOTIFY_SOLICITED` (0x2): a receive completion for a send that
        /// carried `SEND_AND_SOLICIT_EVENT`; error completions always match.
        const SOLICITED = 0x2;
    }
}

// ---------------------------------------------------------------------------
// §5.6 NDK_ADAPTER_FLAG_*
// ---------------------------------------------------------------------------

bitflags::bitflags! {
    /// `NDK_ADAPTER_FLAG_*` (§5.6): `NDK_ADAPTER_INFO.AdapterFlags` (a `ULONG`,
    /// kept as `u32` in [`NdkAdapterInfo`](super::NdkAdapterInfo)).
    #[repr(transparent)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct AdapterFlags: u32 {
        /// `NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED`: incoming data is placed in
        /// order (the last byte never before earlier bytes).
        const IN_ORDER_DMA_SUPPORTED = 0x0000_0001;
        /// `NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED`: consumers need not use
        /// the READ_SINK flags and may use privileged-token (LAM) buffers as read
        /// sinks.
        const RDMA_READ_SINK_NOT_REQUIRED = 0x0000_0002;
        /// `NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED`:
        /// `NdkControlCqInterruptModeration` works.
        const CQ_INTERRUPT_MODERATION_SUPPORTED = 0x0000_0004;
        /// `NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED`: connections run concurrently.
        const MULTI_ENGINE_SUPPORTED = 0x0000_0008;
        /// `NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED` (NDKPI 1.2): Read
        /// may invalidate its first SGE's token.
        const RDMA_READ_LOCAL_INVALIDATE_SUPPORTED = 0x0000_0010;
        /// `NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED`: `NdkResizeCq` may be used.
        const CQ_RESIZE_SUPPORTED = 0x0000_0100;
        /// `NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED`: connections from a
        /// local address to the same address on the same adapter work.
        const LOOPBACK_CONNECTIONS_SUPPORTED = 0x0001_0000;
    }
}

// ---------------------------------------------------------------------------
// §5.7 NDK_RDMA_TECHNOLOGY
// ---------------------------------------------------------------------------

c_enum! {
    /// `NDK_RDMA_TECHNOLOGY` (§5.7): `NDK_ADAPTER_INFO.RdmaTechnology`; the non-zero
    /// values are also the `*NetworkDirectTechnology` INF values (§5.13).
    ///
    /// A C enum (4-byte MSVC `int`).
    pub struct NdkRdmaTechnology(pub u32) {
        /// `NdkUndefined`.
        const UNDEFINED = 0x0;
        /// `NdkiWarp`: iWARP.
        const IWARP = 0x1;
        /// `NdkInfiniBand`: InfiniBand.
        const INFINIBAND = 0x2;
        /// `NdkRoCE`: RoCE.
        const ROCE = 0x3;
        /// `NdkRoCEv2`: RoCE v2.
        const ROCE_V2 = 0x4;
        /// `NdkMaxTechnology`: one past the last technology; a bound.
        const MAX_TECHNOLOGY = 0x5;
    }
}

// ---------------------------------------------------------------------------
// §5.8 NDIS object types, revisions, sizes
// ---------------------------------------------------------------------------

/// `NDIS_OBJECT_TYPE_DEFAULT` (0x80): `NDIS_OBJECT_HEADER.Type` of the NDK
/// capabilities, statistics, connections and local-endpoints structures (§5.8).
pub const NDIS_OBJECT_TYPE_DEFAULT: u8 = 0x80;

/// `NDIS_OBJECT_TYPE_NDK_PROVIDER_CHARACTERISTICS` (0xB2): header type of
/// [`NdisNdkProviderCharacteristics`](super::NdisNdkProviderCharacteristics) (§5.8).
pub const NDIS_OBJECT_TYPE_NDK_PROVIDER_CHARACTERISTICS: u8 = 0xB2;

/// `NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_NDK_ATTRIBUTES` (0xB3): header type of
/// [`NdisMiniportAdapterNdkAttributes`](super::NdisMiniportAdapterNdkAttributes)
/// (§5.8).
pub const NDIS_OBJECT_TYPE_MINIPORT_ADAPTER_NDK_ATTRIBUTES: u8 = 0xB3;

/// `NDIS_NDK_PROVIDER_CHARACTERISTICS_REVISION_1` (§5.8).
pub const NDIS_NDK_PROVIDER_CHARACTERISTICS_REVISION_1: u8 = 0x1;

/// `NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1` (§5.8).
pub const NDIS_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1: u8 = 0x1;

/// `NDIS_NDK_CAPABILITIES_REVISION_1` (§5.8).
pub const NDIS_NDK_CAPABILITIES_REVISION_1: u8 = 0x1;

/// `NDIS_NDK_STATISTICS_INFO_REVISION_1` (§5.8).
pub const NDIS_NDK_STATISTICS_INFO_REVISION_1: u8 = 0x1;

/// `NDIS_NDK_CONNECTIONS_REVISION_1` (§5.8).
pub const NDIS_NDK_CONNECTIONS_REVISION_1: u8 = 0x1;

/// `NDIS_NDK_LOCAL_ENDPOINTS_REVISION_1` (§5.8).
pub const NDIS_NDK_LOCAL_ENDPOINTS_REVISION_1: u8 = 0x1;

/// `NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1` (0x18 on x64): the size
/// through `CloseNDKAdapterHandler` (§3.11, §5.8).
pub const NDIS_SIZEOF_NDK_PROVIDER_CHARACTERISTICS_REVISION_1: u16 = 0x18;

/// `NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1` (0x10 on x64): the
/// size through `NdkCapabilities` (§3.11, §5.8).
pub const NDIS_SIZEOF_MINIPORT_ADAPTER_NDK_ATTRIBUTES_REVISION_1: u16 = 0x10;

/// `NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1` (0x38 on x64): the size through
/// `NdkInfo` (§3.11, §5.8).
pub const NDIS_SIZEOF_NDK_CAPABILITIES_REVISION_1: u16 = 0x38;

/// `NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1` (0xF8) (§3.11, §5.8).
pub const NDIS_SIZEOF_NDK_STATISTICS_INFO_REVISION_1: u16 = 0xF8;

/// Bytes of `NDIS_NDK_CONNECTIONS` before its `Connections` array (0x10), the
/// constant term of `NDIS_SIZEOF_NDK_CONNECTIONS_REVISION_1(n)` (§3.11, §5.8).
pub const NDIS_NDK_CONNECTIONS_HEADER_SIZE: usize = 0x10;

/// Bytes of one `NDIS_NDK_CONNECTION_ENTRY` (0x40), the per-entry term of
/// `NDIS_SIZEOF_NDK_CONNECTIONS_REVISION_1(n)` (§3.11, §5.8).
pub const NDIS_NDK_CONNECTION_ENTRY_SIZE: usize = 0x40;

/// Bytes of `NDIS_NDK_LOCAL_ENDPOINTS` before its `LocalEndpoints` array (0x10),
/// the constant term of `NDIS_SIZEOF_NDK_LOCAL_ENDPOINTS_REVISION_1(n)` (§3.11,
/// §5.8).
pub const NDIS_NDK_LOCAL_ENDPOINTS_HEADER_SIZE: usize = 0x10;

/// Bytes of one `NDIS_NDK_LOCAL_ENDPOINT_ENTRY` (0x24), the per-entry term of
/// `NDIS_SIZEOF_NDK_LOCAL_ENDPOINTS_REVISION_1(n)` (§3.11, §5.8).
pub const NDIS_NDK_LOCAL_ENDPOINT_ENTRY_SIZE: usize = 0x24;

/// `NDIS_SIZEOF_NDK_CONNECTIONS_REVISION_1(n)` = 0x10 + 0x40 × `n` (§5.8).
///
/// Saturates instead of overflowing. The header's `Size` (a `USHORT`) is
/// min(0xFFFF, this); that clamp is the caller's.
#[must_use]
pub const fn ndis_sizeof_ndk_connections_revision_1(n: usize) -> usize {
    NDIS_NDK_CONNECTIONS_HEADER_SIZE
        .saturating_add(n.saturating_mul(NDIS_NDK_CONNECTION_ENTRY_SIZE))
}

/// `NDIS_SIZEOF_NDK_LOCAL_ENDPOINTS_REVISION_1(n)` = 0x10 + 0x24 × `n` (§5.8).
///
/// Saturates instead of overflowing. The header's `Size` (a `USHORT`) is
/// min(0xFFFF, this); that clamp is the caller's.
#[must_use]
pub const fn ndis_sizeof_ndk_local_endpoints_revision_1(n: usize) -> usize {
    NDIS_NDK_LOCAL_ENDPOINTS_HEADER_SIZE
        .saturating_add(n.saturating_mul(NDIS_NDK_LOCAL_ENDPOINT_ENTRY_SIZE))
}

// ---------------------------------------------------------------------------
// §3.11 performance counter mask
// ---------------------------------------------------------------------------

/// Bit of the counter at byte `offset` of `NDIS_NDK_PERFORMANCE_COUNTERS`:
/// `NDIS_NDK_PERFORMANCE_COUNTER_MASK(field)` = 1 << (offset / 8) (§3.11).
const fn counter_bit(offset: usize) -> u64 {
    1 << (offset / 8)
}

bitflags::bitflags! {
    /// `NDIS_NDK_PERFORMANCE_COUNTER_MASK(field)` bits (§3.11): the word in
    /// `NDIS_NDK_CAPABILITIES.MissingCounterMask` (a `ULONG64`, kept as `u64` in
    /// [`NdisNdkCapabilities`](super::NdisNdkCapabilities)) that names the
    /// counters a provider does not maintain.
    ///
    /// Each bit is derived from the field's offset in
    /// [`NdisNdkPerformanceCounters`] (offset / 8), exactly as the C macro does;
    /// the reserved counters (bits 5–24) have no flag.
    #[repr(transparent)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct CounterMask: u64 {
        /// `Connect` (bit 0).
        const CONNECT = counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, connect));
        /// `Accept` (bit 1).
        const ACCEPT = counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, accept));
        /// `ConnectFailure` (bit 2).
        const CONNECT_FAILURE =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, connect_failure));
        /// `ConnectionError` (bit 3).
        const CONNECTION_ERROR =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, connection_error));
        /// `ActiveConnection` (bit 4).
        const ACTIVE_CONNECTION =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, active_connection));
        /// `CQError` (bit 25).
        const CQ_ERROR = counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, cq_error));
        /// `RDMAInOctets` (bit 26).
        const RDMA_IN_OCTETS =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, rdma_in_octets));
        /// `RDMAOutOctets` (bit 27).
        const RDMA_OUT_OCTETS =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, rdma_out_octets));
        /// `RDMAInFrames` (bit 28).
        const RDMA_IN_FRAMES =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, rdma_in_frames));
        /// `RDMAOutFrames` (bit 29).
        const RDMA_OUT_FRAMES =
            counter_bit(core::mem::offset_of!(NdisNdkPerformanceCounters, rdma_out_frames));
    }
}

// The mask bits are tabulated in §3.11; check the derivation against them.
const _: () = {
    assert!(CounterMask::CONNECT.bits() == 1 << 0);
    assert!(CounterMask::ACCEPT.bits() == 1 << 1);
    assert!(CounterMask::CONNECT_FAILURE.bits() == 1 << 2);
    assert!(CounterMask::CONNECTION_ERROR.bits() == 1 << 3);
    assert!(CounterMask::ACTIVE_CONNECTION.bits() == 1 << 4);
    assert!(CounterMask::CQ_ERROR.bits() == 1 << 25);
    assert!(CounterMask::RDMA_IN_OCTETS.bits() == 1 << 26);
    assert!(CounterMask::RDMA_OUT_OCTETS.bits() == 1 << 27);
    assert!(CounterMask::RDMA_IN_FRAMES.bits() == 1 << 28);
    assert!(CounterMask::RDMA_OUT_FRAMES.bits() == 1 << 29);
};

// ---------------------------------------------------------------------------
// §5.9 OIDs
// ---------------------------------------------------------------------------

/// `OID_NDK_SET_STATE` (0xFC040201): set request, a `BOOLEAN` (length 1) that
/// enables or disables NDK (§5.9).
pub const OID_NDK_SET_STATE: NdisOid = 0xFC04_0201;

/// `OID_NDK_STATISTICS` (0xFC040202): query, returns
/// [`NdisNdkStatisticsInfo`](super::NdisNdkStatisticsInfo) (§5.9).
pub const OID_NDK_STATISTICS: NdisOid = 0xFC04_0202;

/// `OID_NDK_CONNECTIONS` (0xFC040203): query, returns
/// [`NdisNdkConnections`](super::NdisNdkConnections) (§5.9).
pub const OID_NDK_CONNECTIONS: NdisOid = 0xFC04_0203;

/// `OID_NDK_LOCAL_ENDPOINTS` (0xFC040204): query, returns
/// [`NdisNdkLocalEndpoints`](super::NdisNdkLocalEndpoints) (§5.9).
pub const OID_NDK_LOCAL_ENDPOINTS: NdisOid = 0xFC04_0204;

// ---------------------------------------------------------------------------
// SoftNDK's own OID: checked mode's counters and reports (docs/debugging.md)
// ---------------------------------------------------------------------------

/// `OID_SOFTNDK_CHECKED` (0xFF534E01): query, SoftNDK's vendor-private OID
/// (an NDIS custom OID has 0xFF as its most significant byte; "SN", 01
/// below it). Returns checked mode's counters and kept reports in the
/// layout below, little-endian, every unused byte zero:
///
/// ```text
/// header (SOFTNDK_CHECKED_HEADER_SIZE = 32 bytes)
///   0x00 u32 Revision      SOFTNDK_CHECKED_REVISION_1
///   0x04 u32 Size          bytes of the whole answer
///   0x08 u32 Mode          0 off, 1 report, 2 report and stop
///   0x0C u32 RuleCount     counter entries that follow the header
///   0x10 u32 ReportCount   report entries that follow the counters
///   0x14 u32 Reserved      0
///   0x18 u64 Reported      reports made since the driver loaded
/// RuleCount counter entries (SOFTNDK_CHECKED_COUNT_SIZE = 16 bytes)
///   0x00 char[8] Rule      "C1", NUL-terminated
///   0x08 u64 Count         breaches of that rule since load
/// ReportCount report entries (SOFTNDK_CHECKED_REPORT_SIZE = 256 bytes),
/// oldest first
///   0x00 char[8] Rule
///   0x08 u32 ObjectType    NDK_OBJECT_TYPE
///   0x0C u32 Reserved      0
///   0x10 u64 Object        the object, as the consumer knows it
///   0x18 u64 Sequence      the report's number (bug-check parameter 4)
///   0x20 u64 Detail        token (M22), address (M33), microseconds (I3)
///   0x28 char[216] Text    the report as the debug log shows it, NUL-terminated
/// ```
///
/// A buffer shorter than the answer gets `NDIS_STATUS_BUFFER_TOO_SHORT`
/// with the size in `BytesNeeded`.
pub const OID_SOFTNDK_CHECKED: NdisOid = 0xFF53_4E01;
/// `Revision` of [`OID_SOFTNDK_CHECKED`]'s answer.
pub const SOFTNDK_CHECKED_REVISION_1: u32 = 1;
/// Bytes of [`OID_SOFTNDK_CHECKED`]'s header.
pub const SOFTNDK_CHECKED_HEADER_SIZE: usize = 32;
/// Bytes of one counter entry of [`OID_SOFTNDK_CHECKED`].
pub const SOFTNDK_CHECKED_COUNT_SIZE: usize = 16;
/// Bytes of one report entry of [`OID_SOFTNDK_CHECKED`].
pub const SOFTNDK_CHECKED_REPORT_SIZE: usize = 256;
/// Offset of the text in a report entry of [`OID_SOFTNDK_CHECKED`].
pub const SOFTNDK_CHECKED_REPORT_TEXT: usize = 0x28;

/// `OID_SOFTNDK_FAULTS` (0xFF534E02): query, SoftNDK's vendor-private OID
/// for fault injection (`docs/debugging.md`, "Fault injection"): the plan
/// in force, each kind's call counter and the newest injected faults, in
/// the layout below, little-endian, every unused byte zero:
///
/// ```text
/// header (SOFTNDK_FAULTS_HEADER_SIZE = 40 bytes)
///   0x00 u32 Revision      SOFTNDK_FAULTS_REVISION_1
///   0x04 u32 Size          bytes of the whole answer
///   0x08 u32 Armed         0 no plan, 1 a plan installed
///   0x0C u32 KindCount     kind entries that follow the header
///   0x10 u32 ScheduleCount schedule entries that follow the kinds
///   0x14 u32 RecordCount   fault entries that follow the schedule
///   0x18 u64 Seed          the plan's seed
///   0x20 u64 Injected      faults injected since the plan was installed
/// KindCount kind entries (SOFTNDK_FAULTS_ENTRY_SIZE = 16 bytes), by kind
/// number (SOFTNDK_FAULT_KIND_*)
///   0x00 u32 Rate          parts per million
///   0x04 u32 Reserved      0
///   0x08 u64 Calls         calls of the kind judged since the install
/// ScheduleCount schedule entries, then RecordCount fault entries (oldest
/// first), 16 bytes each
///   0x00 u32 Kind
///   0x04 u32 Reserved      0
///   0x08 u64 Index         the call of that kind (from 1)
/// ```
///
/// A buffer shorter than the answer gets `NDIS_STATUS_BUFFER_TOO_SHORT`
/// with the size in `BytesNeeded`.
pub const OID_SOFTNDK_FAULTS: NdisOid = 0xFF53_4E02;
/// `Revision` of [`OID_SOFTNDK_FAULTS`]'s answer.
pub const SOFTNDK_FAULTS_REVISION_1: u32 = 1;
/// Bytes of [`OID_SOFTNDK_FAULTS`]'s header.
pub const SOFTNDK_FAULTS_HEADER_SIZE: usize = 40;
/// Bytes of one kind, schedule or fault entry of [`OID_SOFTNDK_FAULTS`].
pub const SOFTNDK_FAULTS_ENTRY_SIZE: usize = 16;

// ---------------------------------------------------------------------------
// §5.10 PnP event codes
// ---------------------------------------------------------------------------

c_enum! {
    /// `NET_PNP_EVENT_CODE` (§5.10), the NDK members only.
    ///
    /// A C enum (4-byte MSVC `int`). The two values are computed from the enum
    /// order (the member before them, `NetEventIMReEnableDevice`, is 12).
    pub struct NetPnpEventCode(pub u32) {
        /// `NetEventNDKEnable` (13): NDK was turned on.
        const NDK_ENABLE = 0xD;
        /// `NetEventNDKDisable` (14): NDK was turned off; NDIS closes every open
        /// `NDK_ADAPTER` of the adapter.
        const NDK_DISABLE = 0xE;
    }
}

// ---------------------------------------------------------------------------
// §5.11 GUIDs and other identifiers
// ---------------------------------------------------------------------------

/// `GUID_NDIS_NDK_CAPABILITIES` {7969ba4d-dd80-4bc7-b3e6-68043997e519}: WMI, NDK
/// capabilities (§5.11).
pub const GUID_NDIS_NDK_CAPABILITIES: Guid =
    Guid::from_u128(0x7969BA4D_DD80_4BC7_B3E6_68043997E519);

/// `GUID_NDIS_NDK_STATE` {530c69c9-2f51-49de-a1af-088d54ffa474}: WMI, NDK state
/// (§5.11).
pub const GUID_NDIS_NDK_STATE: Guid = Guid::from_u128(0x530C69C9_2F51_49DE_A1AF_088D54FFA474);

/// `NDK_EXTENSION_ID_ADAPTER_RSS_DISPATCH` {bab27026-86c3-4e31-9f72-4936ded76d42}:
/// the `NdkQueryExtension` id of
/// [`NdkExtensionAdapterRssDispatch`](super::NdkExtensionAdapterRssDispatch)
/// (§3.10, §5.11).
pub const NDK_EXTENSION_ID_ADAPTER_RSS_DISPATCH: Guid =
    Guid::from_u128(0xBAB27026_86C3_4E31_9F72_4936DED76D42);

/// `WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH` (0x4E444B44, the four characters
/// `'NDKD'`): the WSK control code that returns
/// [`WskProviderNdkDispatch`](super::WskProviderNdkDispatch) (§3.12, §5.11).
pub const WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH: u32 = 0x4E44_4B44;

// ---------------------------------------------------------------------------
// §5.13 INF and registry keywords
// ---------------------------------------------------------------------------

/// `*NetworkDirect` (`NETWORK_DIRECT_KEYWORD`): 0 = disabled, 1 = enabled
/// (default); whether NDK may be enabled (§5.13).
pub const NETWORK_DIRECT_KEYWORD: &str = "*NetworkDirect";

/// `*NetworkDirectTechnology`: the transport, an [`NdkRdmaTechnology`] value 1–4
/// (§5.13).
pub const NETWORK_DIRECT_TECHNOLOGY_KEYWORD: &str = "*NetworkDirectTechnology";

/// `*NetworkDirectRoCEFrameSize`: 256, 512, 1024 (default), 2048 or 4096; required
/// for RoCE and RoCE v2 (§5.13).
pub const NETWORK_DIRECT_ROCE_FRAME_SIZE_KEYWORD: &str = "*NetworkDirectRoCEFrameSize";

/// `*NetworkDirectGlobalFlags` (`NETWORK_DIRECT_GLOBAL_FLAGS_KEYWORD`): bit flags
/// (§5.13).
pub const NETWORK_DIRECT_GLOBAL_FLAGS_KEYWORD: &str = "*NetworkDirectGlobalFlags";

/// `NETWORK_DIRECT_GLOBAL_FLAGS_ALLOW_REMOTE_IP_SUBNET` (0x1) in
/// `*NetworkDirectGlobalFlags`; its meaning is not documented (§5.13).
pub const NETWORK_DIRECT_GLOBAL_FLAGS_ALLOW_REMOTE_IP_SUBNET: u32 = 0x0000_0001;

// ---------------------------------------------------------------------------
// §5.14 Other numbers
// ---------------------------------------------------------------------------

/// `PAGE_SIZE` on x64 (0x1000): the unit of FRMR and LAM pages (§5.14).
pub const PAGE_SIZE: usize = 0x1000;

/// The smallest `NDK_ADAPTER_INFO.FRMRPageCount` a provider may report: FRMRs of
/// at least 16 pages must be supported (§3.2, §5.14).
pub const NDK_MIN_FRMR_PAGE_COUNT: u32 = 0x10;

/// First port of the ephemeral range (49152) used for port 0 on Listen,
/// `CreateSharedEndpoint` and Connect (§5.14).
pub const EPHEMERAL_PORT_FIRST: u16 = 0xC000;

/// Last port of the ephemeral range (65535), inclusive (§5.14).
pub const EPHEMERAL_PORT_LAST: u16 = 0xFFFF;

/// `AF_INET` (2): IPv4 (§5.14).
pub const AF_INET: AddressFamily = 0x2;

/// `AF_INET6` (23): IPv6, the Windows value (Linux uses 10) (§5.14).
pub const AF_INET6: AddressFamily = 0x17;

/// `MAXULONG` (0xFFFFFFFF): "ignore this knob" in
/// `NdkControlCqInterruptModeration` (§4.4, §5.14).
pub const MAXULONG: u32 = u32::MAX;
