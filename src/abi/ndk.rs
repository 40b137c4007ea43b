//! NDKPI 1.2 structures and dispatch tables (ndk-abi.md §3.1–§3.10, §3.12).
//!
//! Every NDK object is an [`NdkObjectHeader`] followed by a pointer to its
//! dispatch table (§3.8); a pointer to the object is also a pointer to its
//! header, which is what the `NDK_OBJECT_HEADER *`-typed functions receive.

use core::ffi::c_void;

use super::consts::{NdkObjectType, NdkOperationType, NdkRdmaTechnology};
use super::ndk_fn::{
    NdkFnAccept, NdkFnArmCq, NdkFnBind, NdkFnBuildLam, NdkFnCloseObject, NdkFnCompleteConnect,
    NdkFnConnect, NdkFnConnectWithSharedEndpoint, NdkFnControlConnectEvents,
    NdkFnControlCqInterruptModeration, NdkFnCreateConnector, NdkFnCreateCq, NdkFnCreateListener,
    NdkFnCreateMr, NdkFnCreateMw, NdkFnCreatePd, NdkFnCreateQp, NdkFnCreateQpWithSrq,
    NdkFnCreateSharedEndpoint, NdkFnCreateSrq, NdkFnDeregisterMr, NdkFnDisconnect,
    NdkFnFastRegister, NdkFnFlush, NdkFnGetConnectionData, NdkFnGetCqResults, NdkFnGetCqResultsEx,
    NdkFnGetListenerLocalAddress, NdkFnGetLocalAddress, NdkFnGetLocalTokenFromMr,
    NdkFnGetPeerAddress, NdkFnGetPrivilegedMemoryRegionToken, NdkFnGetRemoteTokenFromMr,
    NdkFnGetRemoteTokenFromMw, NdkFnGetRssProcessorInfo, NdkFnGetSharedEndpointLocalAddress,
    NdkFnInitializeFastRegisterMr, NdkFnInvalidate, NdkFnListen, NdkFnModifySrq,
    NdkFnQueryAdapterInfo, NdkFnQueryExtensionInterface, NdkFnRead, NdkFnReceive, NdkFnRegisterMr,
    NdkFnReject, NdkFnReleaseLam, NdkFnResizeCq, NdkFnSend, NdkFnSendAndInvalidate,
    NdkFnSrqReceive, NdkFnWrite, PfnWskNdkCloseAdapter, PfnWskNdkOpenAdapter,
};
use super::types::{NdkLogicalAddress, NdkVersion, NtStatus};

// ---------------------------------------------------------------------------
// §3.1 Object header
// ---------------------------------------------------------------------------

/// `NDK_OBJECT_HEADER_RESERVED_BLOCK` (§3.1): four pointers reserved for the
/// consumer side (NDIS / the NDK framework); a provider never touches them.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkObjectHeaderReservedBlock {
    /// `rf`: `PVOID[4]`.
    pub rf: [*mut c_void; 4],
}

/// `NDK_OBJECT_HEADER` (§3.1): the first member of every NDK object, 0x28
/// bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkObjectHeader {
    /// `Version`: the version negotiated when the adapter was opened (§2.3).
    pub version: NdkVersion,
    /// `ObjectType`: which of the ten object structs this header starts (§3.8).
    pub object_type: NdkObjectType,
    /// `NdkReserved`: not the provider's.
    pub ndk_reserved: NdkObjectHeaderReservedBlock,
}

// ---------------------------------------------------------------------------
// §3.8 The ten object structs
// ---------------------------------------------------------------------------

/// `NDK_ADAPTER` (§3.8): an open adapter, created by `OPEN_NDK_ADAPTER_HANDLER`
/// and closed by `CLOSE_NDK_ADAPTER_HANDLER` (no close slot, §3.9).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkAdapter {
    /// `Header`, `ObjectType` = [`NdkObjectType::ADAPTER`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkAdapterDispatch,
}

/// `NDK_QP` (§3.8): a queue pair, created by `NdkCreateQp` /
/// `NdkCreateQpWithSrq` on a PD.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkQp {
    /// `Header`, `ObjectType` = [`NdkObjectType::QP`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkQpDispatch,
}

/// `NDK_CQ` (§3.8): a completion queue, created by `NdkCreateCq` on the adapter.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkCq {
    /// `Header`, `ObjectType` = [`NdkObjectType::CQ`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkCqDispatch,
}

/// `NDK_MR` (§3.8): a memory region, created by `NdkCreateMr` on a PD.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkMr {
    /// `Header`, `ObjectType` = [`NdkObjectType::MR`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkMrDispatch,
}

/// `NDK_MW` (§3.8): a memory window, created by `NdkCreateMw` on a PD.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkMw {
    /// `Header`, `ObjectType` = [`NdkObjectType::MW`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkMwDispatch,
}

/// `NDK_PD` (§3.8): a protection domain, created by `NdkCreatePd` on the adapter.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkPd {
    /// `Header`, `ObjectType` = [`NdkObjectType::PD`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkPdDispatch,
}

/// `NDK_SHARED_ENDPOINT` (§3.8): a local address shared by several connectors,
/// created by `NdkCreateSharedEndpoint` on the adapter.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkSharedEndpoint {
    /// `Header`, `ObjectType` = [`NdkObjectType::SHARED_ENDPOINT`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkSharedEndpointDispatch,
}

/// `NDK_CONNECTOR` (§3.8): one connection's setup and teardown, created by
/// `NdkCreateConnector`, or by the provider for an incoming request and handed
/// over by the connect-event callback.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkConnector {
    /// `Header`, `ObjectType` = [`NdkObjectType::CONNECTOR`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkConnectorDispatch,
}

/// `NDK_LISTENER` (§3.8): a listening address, created by `NdkCreateListener` on
/// the adapter.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkListener {
    /// `Header`, `ObjectType` = [`NdkObjectType::LISTENER`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkListenerDispatch,
}

/// `NDK_SRQ` (§3.8): a shared receive queue, created by `NdkCreateSrq` on a PD.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkSrq {
    /// `Header`, `ObjectType` = [`NdkObjectType::SRQ`].
    pub header: NdkObjectHeader,
    /// `Dispatch`.
    pub dispatch: *const NdkSrqDispatch,
}

// ---------------------------------------------------------------------------
// §3.2 Adapter info
// ---------------------------------------------------------------------------

/// `NDK_ADAPTER_INFO` (§3.2): the adapter's limits and capabilities, returned by
/// `NdkQueryAdapterInfo` and pointed to by `NDIS_NDK_CAPABILITIES.NdkInfo`;
/// 0x68 bytes (the WDK layout with `RdmaTechnology`, ndk-abi.md §6 item 16).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdkAdapterInfo {
    /// `Version`: the negotiated version.
    pub version: NdkVersion,
    /// `VendorId`: the vendor OUI.
    pub vendor_id: u32,
    /// `DeviceId`: vendor-defined.
    pub device_id: u32,
    /// Padding in C, declared so that a zeroed value has no uninitialised bytes
    /// to leak into the consumer's (or user mode's) buffer; write 0.
    pub padding_0c: u32,
    /// `MaxRegistrationSize`: `SIZE_T`, the largest single registration in bytes.
    pub max_registration_size: usize,
    /// `MaxWindowSize`: `SIZE_T`, the largest memory window in bytes.
    pub max_window_size: usize,
    /// `FRMRPageCount`: the FRMR size in pages at which the adapter supports the
    /// most FRMRs; at least [`NDK_MIN_FRMR_PAGE_COUNT`](super::NDK_MIN_FRMR_PAGE_COUNT).
    pub frmr_page_count: u32,
    /// `MaxInitiatorRequestSge`: SGEs per initiator request.
    pub max_initiator_request_sge: u32,
    /// `MaxReceiveRequestSge`: SGEs per receive request.
    pub max_receive_request_sge: u32,
    /// `MaxReadRequestSge`: SGEs per read request (overrides the initiator limit
    /// for reads).
    pub max_read_request_sge: u32,
    /// `MaxTransferLength`: total bytes over all SGEs of one send, receive, read
    /// or write.
    pub max_transfer_length: u32,
    /// `MaxInlineDataSize`: the inline limit for send and write.
    pub max_inline_data_size: u32,
    /// `MaxInboundReadLimit`: incoming reads in flight per QP (IRD).
    pub max_inbound_read_limit: u32,
    /// `MaxOutboundReadLimit`: outgoing reads in flight per QP (ORD).
    pub max_outbound_read_limit: u32,
    /// `MaxReceiveQueueDepth`: per receive queue.
    pub max_receive_queue_depth: u32,
    /// `MaxInitiatorQueueDepth`: per initiator queue.
    pub max_initiator_queue_depth: u32,
    /// `MaxSrqDepth`: 0 = no SRQ support.
    pub max_srq_depth: u32,
    /// `MaxCqDepth`: entries per CQ.
    pub max_cq_depth: u32,
    /// `LargeRequestThreshold`: the size above which read/write beats
    /// send/receive (a hint).
    pub large_request_threshold: u32,
    /// `MaxCallerData`: private data bytes on connect.
    pub max_caller_data: u32,
    /// `MaxCalleeData`: private data bytes on accept / reject.
    pub max_callee_data: u32,
    /// `AdapterFlags`: [`AdapterFlags`](super::AdapterFlags) bits.
    pub adapter_flags: u32,
    /// `RdmaTechnology`.
    pub rdma_technology: NdkRdmaTechnology,
    /// Tail padding in C; see `padding_0c`.
    pub padding_64: u32,
}

// ---------------------------------------------------------------------------
// §3.3–§3.7 SGE, results, LAM, extension interface
// ---------------------------------------------------------------------------

/// `NDK_SGE` (§3.3): one scatter/gather element of a work request, 0x10 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NdkSge {
    /// The anonymous union of `PVOID VirtualAddress` and `NDK_LOGICAL_ADDRESS
    /// LogicalAddress`, kept as its raw 8 bytes (layout-identical on x64).
    ///
    /// With the PD's privileged token in `memory_region_token` it is a logical
    /// address (reinterpret as [`NdkLogicalAddress`]); with any other token it is
    /// a virtual address that only indexes into the registered region and is
    /// never dereferenced directly, so nothing is lost by holding it as an
    /// integer, and reading it needs no `unsafe`.
    pub address: u64,
    /// `Length`: bytes.
    pub length: u32,
    /// `MemoryRegionToken`: the local token of the MR, or the privileged token.
    pub memory_region_token: u32,
}

/// `NDK_RESULT` (§3.4): one completion, as returned by `NdkGetCqResults`;
/// 0x18 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkResult {
    /// `Status`: the completion status.
    pub status: NtStatus,
    /// `BytesTransferred`: valid for receive completions (§6 item 18).
    pub bytes_transferred: u32,
    /// `QPContext`: the `QPContext` given at QP creation.
    pub qp_context: *mut c_void,
    /// `RequestContext`: the `RequestContext` of the completed request.
    pub request_context: *mut c_void,
}

/// `NDK_RESULT_EX` (§3.5, NDKPI 1.2): one completion with its operation type, as
/// returned by `NdkGetCqResultsEx`; 0x28 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkResultEx {
    /// `Status`: the completion status.
    pub status: NtStatus,
    /// `BytesTransferred`: valid for receive completions.
    pub bytes_transferred: u32,
    /// `QPContext`: the `QPContext` given at QP creation.
    pub qp_context: *mut c_void,
    /// `RequestContext`: the `RequestContext` of the completed request.
    pub request_context: *mut c_void,
    /// `Type`: the completed operation.
    pub type_: NdkOperationType,
    /// NDKPI 1.2: padding. NDKPI 2.1: `ProviderErrorCode` (**UNVERIFIED**). It
    /// sits in the x64 padding, so the layout is the same in both; declared as a
    /// field so that a 1.2 provider can write it as 0 instead of leaving
    /// uninitialised bytes in the consumer's array.
    pub provider_error_code: u32,
    /// `TypeSpecificCompletionOutput`: `ULONG_PTR`; the invalidated token for
    /// [`NdkOperationType::RECEIVE_AND_INVALIDATE`], otherwise unspecified.
    pub type_specific_completion_output: usize,
}

/// `NDK_LOGICAL_ADDRESS_MAPPING` (§3.6), the LAM built by `NdkBuildLam`.
///
/// Variable size: 0x10 + 8 × `AdapterPageCount` bytes. The C declaration has a
/// one-entry array, so `size_of` is 0x18; the real array continues past it in
/// the consumer's buffer. Not `Clone`/`Copy`: a copy would keep only the first
/// page.
#[repr(C)]
#[derive(Debug)]
pub struct NdkLogicalAddressMapping {
    /// `AdapterContext`: reserved for the provider.
    pub adapter_context: *mut c_void,
    /// `AdapterPageCount`: entries in `adapter_page_array`.
    pub adapter_page_count: u32,
    /// Padding in C, declared so that a zeroed value has no uninitialised bytes
    /// to leak into the consumer's (or user mode's) buffer; write 0.
    pub padding_0c: u32,
    /// `AdapterPageArray`: `NDK_LOGICAL_ADDRESS[AdapterPageCount]`, declared `[1]`.
    pub adapter_page_array: [NdkLogicalAddress; 1],
}

/// `NDK_EXTENSION_INTERFACE` (§3.7): filled by `NdkQueryExtension` on success.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkExtensionInterface {
    /// `Dispatch`: `const VOID *`, the extension's dispatch table (for the RSS
    /// extension an [`NdkExtensionAdapterRssDispatch`]).
    pub dispatch: *const c_void,
}

// ---------------------------------------------------------------------------
// §3.9 Dispatch tables
// ---------------------------------------------------------------------------

/// `NDK_ADAPTER_DISPATCH` (§3.9): 9 slots, 0x48 bytes. No close slot: the
/// adapter closes through NDIS (`CLOSE_NDK_ADAPTER_HANDLER`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkAdapterDispatch {
    /// Slot 0, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 1, `NdkQueryAdapterInfo` (`PASSIVE_LEVEL`).
    pub ndk_query_adapter_info: NdkFnQueryAdapterInfo,
    /// Slot 2, `NdkCreateCq`.
    pub ndk_create_cq: NdkFnCreateCq,
    /// Slot 3, `NdkCreatePd`.
    pub ndk_create_pd: NdkFnCreatePd,
    /// Slot 4, `NdkCreateSharedEndpoint`.
    pub ndk_create_shared_endpoint: NdkFnCreateSharedEndpoint,
    /// Slot 5, `NdkCreateConnector`.
    pub ndk_create_connector: NdkFnCreateConnector,
    /// Slot 6, `NdkCreateListener`.
    pub ndk_create_listener: NdkFnCreateListener,
    /// Slot 7, `NdkBuildLAM` (documented as `NdkBuildLam`).
    pub ndk_build_lam: NdkFnBuildLam,
    /// Slot 8, `NdkReleaseLAM` (documented as `NdkReleaseLam`).
    pub ndk_release_lam: NdkFnReleaseLam,
}

/// `NDK_CQ_DISPATCH` (§3.9): 7 slots, 0x38 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkCqDispatch {
    /// Slot 0, `NdkCloseCq`.
    pub ndk_close_cq: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkResizeCq`.
    pub ndk_resize_cq: NdkFnResizeCq,
    /// Slot 3, `NdkArmCq`.
    pub ndk_arm_cq: NdkFnArmCq,
    /// Slot 4, `NdkGetCqResults`.
    pub ndk_get_cq_results: NdkFnGetCqResults,
    /// Slot 5, `NdkControlCqInterruptModeration`.
    pub ndk_control_cq_interrupt_moderation: NdkFnControlCqInterruptModeration,
    /// Slot 6, `NdkGetCqResultsEx` (NDKPI 1.2).
    pub ndk_get_cq_results_ex: NdkFnGetCqResultsEx,
}

/// `NDK_MR_DISPATCH` (§3.9): 7 slots, 0x38 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkMrDispatch {
    /// Slot 0, `NdkCloseMr`.
    pub ndk_close_mr: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkRegisterMr`.
    pub ndk_register_mr: NdkFnRegisterMr,
    /// Slot 3, `NdkDeregisterMr`.
    pub ndk_deregister_mr: NdkFnDeregisterMr,
    /// Slot 4, `NdkInitializeFastRegisterMr`.
    pub ndk_initialize_fast_register_mr: NdkFnInitializeFastRegisterMr,
    /// Slot 5, `NdkGetRemoteTokenFromMr`.
    pub ndk_get_remote_token_from_mr: NdkFnGetRemoteTokenFromMr,
    /// Slot 6, `NdkGetLocalTokenFromMr`.
    pub ndk_get_local_token_from_mr: NdkFnGetLocalTokenFromMr,
}

/// `NDK_MW_DISPATCH` (§3.9): 3 slots, 0x18 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkMwDispatch {
    /// Slot 0, `NdkCloseMw`.
    pub ndk_close_mw: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkGetRemoteTokenFromMw`.
    pub ndk_get_remote_token_from_mw: NdkFnGetRemoteTokenFromMw,
}

/// `NDK_SRQ_DISPATCH` (§3.9): 4 slots, 0x20 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkSrqDispatch {
    /// Slot 0, `NdkCloseSrq`.
    pub ndk_close_srq: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkModifySrq`.
    pub ndk_modify_srq: NdkFnModifySrq,
    /// Slot 3, `NdkSrqReceive`.
    pub ndk_srq_receive: NdkFnSrqReceive,
}

/// `NDK_QP_DISPATCH` (§3.9): 11 slots, 0x58 bytes. The send slot is `NdkSend`
/// (there is no `NdkPostSend`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkQpDispatch {
    /// Slot 0, `NdkCloseQp`.
    pub ndk_close_qp: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkFlush`.
    pub ndk_flush: NdkFnFlush,
    /// Slot 3, `NdkSend`.
    pub ndk_send: NdkFnSend,
    /// Slot 4, `NdkReceive`.
    pub ndk_receive: NdkFnReceive,
    /// Slot 5, `NdkBind`.
    pub ndk_bind: NdkFnBind,
    /// Slot 6, `NdkFastRegister`.
    pub ndk_fast_register: NdkFnFastRegister,
    /// Slot 7, `NdkInvalidate`.
    pub ndk_invalidate: NdkFnInvalidate,
    /// Slot 8, `NdkRead`.
    pub ndk_read: NdkFnRead,
    /// Slot 9, `NdkWrite`.
    pub ndk_write: NdkFnWrite,
    /// Slot 10, `NdkSendAndInvalidate` (NDKPI 1.2).
    pub ndk_send_and_invalidate: NdkFnSendAndInvalidate,
}

/// `NDK_PD_DISPATCH` (§3.9): 8 slots, 0x40 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkPdDispatch {
    /// Slot 0, `NdkClosePd`.
    pub ndk_close_pd: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkCreateMr`.
    pub ndk_create_mr: NdkFnCreateMr,
    /// Slot 3, `NdkCreateMw`.
    pub ndk_create_mw: NdkFnCreateMw,
    /// Slot 4, `NdkCreateSrq`.
    pub ndk_create_srq: NdkFnCreateSrq,
    /// Slot 5, `NdkCreateQp`.
    pub ndk_create_qp: NdkFnCreateQp,
    /// Slot 6, `NdkCreateQpWithSrq`.
    pub ndk_create_qp_with_srq: NdkFnCreateQpWithSrq,
    /// Slot 7, `NdkGetPrivilegedMemoryRegionToken`.
    pub ndk_get_privileged_memory_region_token: NdkFnGetPrivilegedMemoryRegionToken,
}

/// `NDK_SHARED_ENDPOINT_DISPATCH` (§3.9): 3 slots, 0x18 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkSharedEndpointDispatch {
    /// Slot 0, `NdkCloseSharedEndpoint`.
    pub ndk_close_shared_endpoint: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkGetLocalAddress` (documented as
    /// `NdkGetSharedEndpointLocalAddress`).
    pub ndk_get_local_address: NdkFnGetSharedEndpointLocalAddress,
}

/// `NDK_CONNECTOR_DISPATCH` (§3.9): the NDKPI 1.x table, 11 slots, 0x58 bytes.
///
/// NDKPI 2.1 appends `NdkCompleteConnectEx` and `NdkAcceptEx` (slots 11 and 12,
/// **UNVERIFIED**); they are not part of this 1.2 table and exist only as the
/// function types [`NdkFnCompleteConnectEx`](super::NdkFnCompleteConnectEx) and
/// [`NdkFnAcceptEx`](super::NdkFnAcceptEx).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkConnectorDispatch {
    /// Slot 0, `NdkCloseConnector`.
    pub ndk_close_connector: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkConnect`.
    pub ndk_connect: NdkFnConnect,
    /// Slot 3, `NdkConnectWithSharedEndpoint`.
    pub ndk_connect_with_shared_endpoint: NdkFnConnectWithSharedEndpoint,
    /// Slot 4, `NdkCompleteConnect`.
    pub ndk_complete_connect: NdkFnCompleteConnect,
    /// Slot 5, `NdkAccept`.
    pub ndk_accept: NdkFnAccept,
    /// Slot 6, `NdkReject`.
    pub ndk_reject: NdkFnReject,
    /// Slot 7, `NdkGetConnectionData`.
    pub ndk_get_connection_data: NdkFnGetConnectionData,
    /// Slot 8, `NdkGetLocalAddress`.
    pub ndk_get_local_address: NdkFnGetLocalAddress,
    /// Slot 9, `NdkGetPeerAddress`.
    pub ndk_get_peer_address: NdkFnGetPeerAddress,
    /// Slot 10, `NdkDisconnect`.
    pub ndk_disconnect: NdkFnDisconnect,
}

/// `NDK_LISTENER_DISPATCH` (§3.9): 5 slots, 0x28 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkListenerDispatch {
    /// Slot 0, `NdkCloseListener`.
    pub ndk_close_listener: NdkFnCloseObject,
    /// Slot 1, `NdkQueryExtension`.
    pub ndk_query_extension: NdkFnQueryExtensionInterface,
    /// Slot 2, `NdkListen`.
    pub ndk_listen: NdkFnListen,
    /// Slot 3, `NdkGetLocalAddress` (documented as `NdkGetListenerLocalAddress`).
    pub ndk_get_local_address: NdkFnGetListenerLocalAddress,
    /// Slot 4, `NdkControlConnectEvents`.
    pub ndk_control_connect_events: NdkFnControlConnectEvents,
}

/// `NDK_EXTENSION_ADAPTER_RSS_DISPATCH` (§3.10, WDK 10.0.16299): the table
/// returned for [`NDK_EXTENSION_ID_ADAPTER_RSS_DISPATCH`](super::NDK_EXTENSION_ID_ADAPTER_RSS_DISPATCH);
/// 1 slot, 0x8 bytes. A provider may answer every query with
/// `STATUS_NOT_SUPPORTED` instead.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NdkExtensionAdapterRssDispatch {
    /// Slot 0, `NdkGetRssProcessorInfo`.
    pub ndk_get_rss_processor_info: NdkFnGetRssProcessorInfo,
}

/// `WSK_PROVIDER_NDK_DISPATCH` (§3.12): the consumer-side WSK entry points that
/// open and close an `NDK_ADAPTER`; 2 slots, 0x10 bytes. Context only: a
/// provider does not implement it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WskProviderNdkDispatch {
    /// Slot 0, `WskOpenNdkAdapter`.
    pub wsk_open_ndk_adapter: PfnWskNdkOpenAdapter,
    /// Slot 1, `WskCloseNdkAdapter`.
    pub wsk_close_ndk_adapter: PfnWskNdkCloseAdapter,
}

// ---------------------------------------------------------------------------
// Layout assertions
// ---------------------------------------------------------------------------

assert_layouts! {
    layout_ndk_object_header_reserved_block: NdkObjectHeaderReservedBlock, size 0x20, align 8 {
        rf: 0x0,
    }
    layout_ndk_object_header: NdkObjectHeader, size 0x28, align 8 {
        version: 0x00, object_type: 0x04, ndk_reserved: 0x08,
    }
    layout_ndk_adapter: NdkAdapter, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_qp: NdkQp, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_cq: NdkCq, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_mr: NdkMr, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_mw: NdkMw, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_pd: NdkPd, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_shared_endpoint: NdkSharedEndpoint, size 0x30, align 8 {
        header: 0x00, dispatch: 0x28,
    }
    layout_ndk_connector: NdkConnector, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_listener: NdkListener, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_srq: NdkSrq, size 0x30, align 8 { header: 0x00, dispatch: 0x28 }
    layout_ndk_adapter_info: NdkAdapterInfo, size 0x68, align 8 {
        version: 0x00, vendor_id: 0x04, device_id: 0x08, padding_0c: 0x0C,
        max_registration_size: 0x10, max_window_size: 0x18, frmr_page_count: 0x20,
        max_initiator_request_sge: 0x24, max_receive_request_sge: 0x28, max_read_request_sge: 0x2C,
        max_transfer_length: 0x30, max_inline_data_size: 0x34, max_inbound_read_limit: 0x38,
        max_outbound_read_limit: 0x3C, max_receive_queue_depth: 0x40,
        max_initiator_queue_depth: 0x44, max_srq_depth: 0x48, max_cq_depth: 0x4C,
        large_request_threshold: 0x50, max_caller_data: 0x54, max_callee_data: 0x58,
        adapter_flags: 0x5C, rdma_technology: 0x60, padding_64: 0x64,
    }
    layout_ndk_sge: NdkSge, size 0x10, align 8 {
        address: 0x0, length: 0x8, memory_region_token: 0xC,
    }
    layout_ndk_result: NdkResult, size 0x18, align 8 {
        status: 0x00, bytes_transferred: 0x04, qp_context: 0x08, request_context: 0x10,
    }
    layout_ndk_result_ex: NdkResultEx, size 0x28, align 8 {
        status: 0x00, bytes_transferred: 0x04, qp_context: 0x08, request_context: 0x10, type_: 0x18,
        provider_error_code: 0x1C, type_specific_completion_output: 0x20,
    }
    // Variable-size: sizeof with the one declared entry, and where the array starts
    // (§3.6: 0x10 + 8 × AdapterPageCount).
    layout_ndk_logical_address_mapping: NdkLogicalAddressMapping, size 0x18, align 8 {
        adapter_context: 0x00, adapter_page_count: 0x08, padding_0c: 0x0C, adapter_page_array: 0x10,
    }
    layout_ndk_extension_interface: NdkExtensionInterface, size 0x8, align 8 { dispatch: 0x0 }
    layout_ndk_adapter_dispatch: NdkAdapterDispatch, size 0x48, align 8 {
        ndk_query_extension: 0x00, ndk_query_adapter_info: 0x08, ndk_create_cq: 0x10,
        ndk_create_pd: 0x18, ndk_create_shared_endpoint: 0x20, ndk_create_connector: 0x28,
        ndk_create_listener: 0x30, ndk_build_lam: 0x38, ndk_release_lam: 0x40,
    }
    layout_ndk_cq_dispatch: NdkCqDispatch, size 0x38, align 8 {
        ndk_close_cq: 0x00, ndk_query_extension: 0x08, ndk_resize_cq: 0x10, ndk_arm_cq: 0x18,
        ndk_get_cq_results: 0x20, ndk_control_cq_interrupt_moderation: 0x28,
        ndk_get_cq_results_ex: 0x30,
    }
    layout_ndk_mr_dispatch: NdkMrDispatch, size 0x38, align 8 {
        ndk_close_mr: 0x00, ndk_query_extension: 0x08, ndk_register_mr: 0x10,
        ndk_deregister_mr: 0x18, ndk_initialize_fast_register_mr: 0x20,
        ndk_get_remote_token_from_mr: 0x28, ndk_get_local_token_from_mr: 0x30,
    }
    layout_ndk_mw_dispatch: NdkMwDispatch, size 0x18, align 8 {
        ndk_close_mw: 0x00, ndk_query_extension: 0x08, ndk_get_remote_token_from_mw: 0x10,
    }
    layout_ndk_srq_dispatch: NdkSrqDispatch, size 0x20, align 8 {
        ndk_close_srq: 0x00, ndk_query_extension: 0x08, ndk_modify_srq: 0x10, ndk_srq_receive: 0x18,
    }
    layout_ndk_qp_dispatch: NdkQpDispatch, size 0x58, align 8 {
        ndk_close_qp: 0x00, ndk_query_extension: 0x08, ndk_flush: 0x10, ndk_send: 0x18,
        ndk_receive: 0x20, ndk_bind: 0x28, ndk_fast_register: 0x30, ndk_invalidate: 0x38,
        ndk_read: 0x40, ndk_write: 0x48, ndk_send_and_invalidate: 0x50,
    }
    layout_ndk_pd_dispatch: NdkPdDispatch, size 0x40, align 8 {
        ndk_close_pd: 0x00, ndk_query_extension: 0x08, ndk_create_mr: 0x10, ndk_create_mw: 0x18,
        ndk_create_srq: 0x20, ndk_create_qp: 0x28, ndk_create_qp_with_srq: 0x30,
        ndk_get_privileged_memory_region_token: 0x38,
    }
    layout_ndk_shared_endpoint_dispatch: NdkSharedEndpointDispatch, size 0x18, align 8 {
        ndk_close_shared_endpoint: 0x00, ndk_query_extension: 0x08, ndk_get_local_address: 0x10,
    }
    layout_ndk_connector_dispatch: NdkConnectorDispatch, size 0x58, align 8 {
        ndk_close_connector: 0x00, ndk_query_extension: 0x08, ndk_connect: 0x10,
        ndk_connect_with_shared_endpoint: 0x18, ndk_complete_connect: 0x20, ndk_accept: 0x28,
        ndk_reject: 0x30, ndk_get_connection_data: 0x38, ndk_get_local_address: 0x40,
        ndk_get_peer_address: 0x48, ndk_disconnect: 0x50,
    }
    layout_ndk_listener_dispatch: NdkListenerDispatch, size 0x28, align 8 {
        ndk_close_listener: 0x00, ndk_query_extension: 0x08, ndk_listen: 0x10,
        ndk_get_local_address: 0x18, ndk_control_connect_events: 0x20,
    }
    layout_ndk_extension_adapter_rss_dispatch: NdkExtensionAdapterRssDispatch, size 0x8, align 8 {
        ndk_get_rss_processor_info: 0x00,
    }
    layout_wsk_provider_ndk_dispatch: WskProviderNdkDispatch, size 0x10, align 8 {
        wsk_open_ndk_adapter: 0x00, wsk_close_ndk_adapter: 0x08,
    }
}
