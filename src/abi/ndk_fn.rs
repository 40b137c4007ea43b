//! NDKPI function types (ndk-abi.md §4.1–§4.12, §4.14).
//!
//! One alias per `NDK_FN_*` type, parameters in the header's order, with the
//! platform default calling convention (`extern "system"`, the x64 Windows
//! convention, §1). Conventions:
//!
//! * Every function is `unsafe` to call: all of them take raw pointers whose
//!   validity only the caller can vouch for.
//! * A consumer callback passed as a parameter is `Option<NdkFn…>`, even where the
//!   documentation says it is mandatory, so that a provider can detect and reject
//!   NULL (`Option` of a function pointer has the same ABI as the C pointer).
//! * `_In_` pointers are `*const` where the callee only reads (`GUID *`,
//!   `const NDK_SGE *`, `CONST PSOCKADDR`, `CONST PVOID`, §1); the object
//!   pointers stay `*mut` as in C. Both have the same ABI.
//! * IRQL is ≤ `DISPATCH_LEVEL` unless the item says otherwise (§4 "IRQL").

use core::ffi::c_void;

use super::consts::NdkCqNotifyType;
use super::ndk::{
    NdkAdapter, NdkAdapterInfo, NdkConnector, NdkCq, NdkExtensionInterface, NdkListener,
    NdkLogicalAddressMapping, NdkMr, NdkMw, NdkObjectHeader, NdkPd, NdkQp, NdkResult, NdkResultEx,
    NdkSge, NdkSharedEndpoint, NdkSrq,
};
use super::types::{
    Boolean, GroupAffinity, Guid, Mdl, NdisStatus, NdkLogicalAddress, NdkVersion, NetIfIndex,
    NtStatus, SockAddr,
};

/// `NDIS_RSS_PROCESSOR_INFO` (§4.12): opaque here; the RSS extension is optional
/// and this crate never fills one, so only the pointer type is needed.
pub type NdisRssProcessorInfo = c_void;

/// `WSK_CLIENT` (§4.14): opaque WSK client object, referenced only by the
/// consumer-side WSK functions.
pub type WskClient = c_void;

// ---------------------------------------------------------------------------
// §4.1 Consumer callbacks
// ---------------------------------------------------------------------------

/// `NDK_FN_CLOSE_COMPLETION` (§4.1): the consumer's callback for a close that
/// returned `STATUS_PENDING`; `context` is the close call's `RequestContext`.
pub type NdkFnCloseCompletion = unsafe extern "system" fn(context: *mut c_void);

/// `NDK_FN_REQUEST_COMPLETION` (§4.1): the consumer's callback for a request that
/// returned `STATUS_PENDING`.
pub type NdkFnRequestCompletion = unsafe extern "system" fn(context: *mut c_void, status: NtStatus);

/// `NDK_FN_CREATE_COMPLETION` (§4.1): the consumer's callback for a create that
/// returned `STATUS_PENDING`; `ndk_object` is the new object's header on success.
pub type NdkFnCreateCompletion = unsafe extern "system" fn(
    context: *mut c_void,
    status: NtStatus,
    ndk_object: *mut NdkObjectHeader,
);

/// `NDK_FN_CQ_NOTIFICATION_CALLBACK` (§4.1): an armed CQ fired. `cq_status` is
/// `STATUS_SUCCESS`, `STATUS_BUFFER_OVERFLOW` (overrun) or
/// `STATUS_INTERNAL_ERROR`.
pub type NdkFnCqNotificationCallback =
    unsafe extern "system" fn(cq_notification_context: *mut c_void, cq_status: NtStatus);

/// `NDK_FN_SRQ_NOTIFICATION_CALLBACK` (§4.1): the SRQ fell below its notify
/// threshold, or failed. `srq_status` is `STATUS_SUCCESS` or
/// `STATUS_INTERNAL_ERROR`.
pub type NdkFnSrqNotificationCallback =
    unsafe extern "system" fn(srq_notification_context: *mut c_void, srq_status: NtStatus);

/// `NDK_FN_CONNECT_EVENT_CALLBACK` (§4.1): an incoming connection request on a
/// listener; `connector` is a new provider-created connector for it.
pub type NdkFnConnectEventCallback =
    unsafe extern "system" fn(connect_event_context: *mut c_void, connector: *mut NdkConnector);

/// `NDK_FN_DISCONNECT_EVENT_CALLBACK` (§4.1): the peer disconnected.
pub type NdkFnDisconnectEventCallback =
    unsafe extern "system" fn(disconnect_event_context: *mut c_void);

/// `NDK_FN_DISCONNECT_EVENT_CALLBACK_EX` (§4.1, NDKPI 2.1, **UNVERIFIED** —
/// rebuilt from the rendered docs; unused by a 1.2 provider): the peer
/// disconnected; `provider_disconnect_reason` 0 = not provided.
pub type NdkFnDisconnectEventCallbackEx = unsafe extern "system" fn(
    disconnect_event_context: *mut c_void,
    provider_disconnect_reason: u32,
);

// ---------------------------------------------------------------------------
// §4.2 Common to every object
// ---------------------------------------------------------------------------

/// `NDK_FN_CLOSE_OBJECT` (§4.2): slot 0 of every table except the adapter's.
/// Returns `STATUS_SUCCESS` or `STATUS_PENDING` (then `close_completion`).
pub type NdkFnCloseObject = unsafe extern "system" fn(
    ndk_object: *mut NdkObjectHeader,
    close_completion: Option<NdkFnCloseCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_QUERY_EXTENSION_INTERFACE` (§4.2): slot 1 of every table (slot 0 of
/// the adapter's); synchronous. The version is passed by value.
pub type NdkFnQueryExtensionInterface = unsafe extern "system" fn(
    ndk_object: *mut NdkObjectHeader,
    extension_interface_id: *const Guid,
    extension_interface_version: NdkVersion,
    extension_interface: *mut NdkExtensionInterface,
) -> NtStatus;

// ---------------------------------------------------------------------------
// §4.3 Adapter
// ---------------------------------------------------------------------------

/// `NDK_FN_QUERY_ADAPTER_INFO` (§4.3): `NdkQueryAdapterInfo`, adapter slot 1;
/// **`PASSIVE_LEVEL`**, may block; synchronous. `buffer_size` is bytes available
/// in, bytes written (or required, with `STATUS_BUFFER_TOO_SMALL`) out.
pub type NdkFnQueryAdapterInfo = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    info: *mut NdkAdapterInfo,
    buffer_size: *mut u32,
) -> NtStatus;

/// `NDK_FN_CREATE_CQ` (§4.3): `NdkCreateCq`, adapter slot 2; completion: create.
pub type NdkFnCreateCq = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    cq_depth: u32,
    cq_notification: Option<NdkFnCqNotificationCallback>,
    cq_notification_context: *mut c_void,
    affinity: *const GroupAffinity,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_cq: *mut *mut NdkCq,
) -> NtStatus;

/// `NDK_FN_CREATE_PD` (§4.3): `NdkCreatePd`, adapter slot 3; completion: create.
pub type NdkFnCreatePd = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_pd: *mut *mut NdkPd,
) -> NtStatus;

/// `NDK_FN_CREATE_SHARED_ENDPOINT` (§4.3): `NdkCreateSharedEndpoint`, adapter
/// slot 4; completion: create.
pub type NdkFnCreateSharedEndpoint = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    address: *const SockAddr,
    address_length: u32,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_shared_endpoint: *mut *mut NdkSharedEndpoint,
) -> NtStatus;

/// `NDK_FN_CREATE_CONNECTOR` (§4.3): `NdkCreateConnector`, adapter slot 5;
/// completion: create.
pub type NdkFnCreateConnector = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_connector: *mut *mut NdkConnector,
) -> NtStatus;

/// `NDK_FN_CREATE_LISTENER` (§4.3): `NdkCreateListener`, adapter slot 6;
/// completion: create.
pub type NdkFnCreateListener = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    connect_event: Option<NdkFnConnectEventCallback>,
    connect_event_context: *mut c_void,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_listener: *mut *mut NdkListener,
) -> NtStatus;

/// `NDK_FN_BUILD_LAM` (§4.3): `NdkBuildLam` (member `NdkBuildLAM`), adapter slot
/// 7; completion: request, with an optional callback. `lam_size` is bytes
/// available in, bytes of the LAM (0x10 + 8 × pages) out; `fbo` receives the
/// first-byte offset into the first page.
pub type NdkFnBuildLam = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    mdl: *mut Mdl,
    length: usize,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
    lam: *mut NdkLogicalAddressMapping,
    lam_size: *mut u32,
    fbo: *mut u32,
) -> NtStatus;

/// `NDK_FN_RELEASE_LAM` (§4.3): `NdkReleaseLam` (member `NdkReleaseLAM`), adapter
/// slot 8; synchronous.
pub type NdkFnReleaseLam =
    unsafe extern "system" fn(adapter: *mut NdkAdapter, lam: *mut NdkLogicalAddressMapping);

// ---------------------------------------------------------------------------
// §4.4 CQ
// ---------------------------------------------------------------------------

/// `NDK_FN_RESIZE_CQ` (§4.4): `NdkResizeCq`, CQ slot 2; completion: request.
pub type NdkFnResizeCq = unsafe extern "system" fn(
    cq: *mut NdkCq,
    cq_depth: u32,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_ARM_CQ` (§4.4): `NdkArmCq`, CQ slot 3; synchronous. The C `Type` is a
/// `ULONG`; [`NdkCqNotifyType`] is a transparent `u32`.
pub type NdkFnArmCq = unsafe extern "system" fn(cq: *mut NdkCq, notify_type: NdkCqNotifyType);

/// `NDK_FN_GET_CQ_RESULTS` (§4.4): `NdkGetCqResults`, CQ slot 4; returns the
/// number of entries removed (0 = empty), at most `n_results`.
pub type NdkFnGetCqResults =
    unsafe extern "system" fn(cq: *mut NdkCq, results: *mut NdkResult, n_results: u32) -> u32;

/// `NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION` (§4.4):
/// `NdkControlCqInterruptModeration`, CQ slot 5; synchronous, never
/// `STATUS_PENDING`. `moderation_interval` is in µs (0 = off,
/// [`MAXULONG`](super::MAXULONG) = count alone decides); `moderation_count` 0 or
/// 1 = off, `MAXULONG` or more than the depth = interval alone decides.
pub type NdkFnControlCqInterruptModeration = unsafe extern "system" fn(
    cq: *mut NdkCq,
    moderation_interval: u32,
    moderation_count: u32,
) -> NtStatus;

/// `NDK_FN_GET_CQ_RESULTS_EX` (§4.4, NDKPI 1.2): `NdkGetCqResultsEx`, CQ slot 6;
/// as [`NdkFnGetCqResults`] with [`NdkResultEx`] entries.
pub type NdkFnGetCqResultsEx =
    unsafe extern "system" fn(cq: *mut NdkCq, results: *mut NdkResultEx, n_results: u32) -> u32;

// ---------------------------------------------------------------------------
// §4.5 MR and MW
// ---------------------------------------------------------------------------

/// `NDK_FN_REGISTER_MR` (§4.5): `NdkRegisterMr`, MR slot 2; completion: request.
/// `flags` holds [`MrFlags`](super::MrFlags) bits.
pub type NdkFnRegisterMr = unsafe extern "system" fn(
    mr: *mut NdkMr,
    mdl: *mut Mdl,
    length: usize,
    flags: u32,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_DEREGISTER_MR` (§4.5): `NdkDeregisterMr`, MR slot 3; completion:
/// request.
pub type NdkFnDeregisterMr = unsafe extern "system" fn(
    mr: *mut NdkMr,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_INITIALIZE_FAST_REGISTER_MR` (§4.5): `NdkInitializeFastRegisterMr`,
/// MR slot 4; completion: request.
pub type NdkFnInitializeFastRegisterMr = unsafe extern "system" fn(
    mr: *mut NdkMr,
    adapter_page_count: u32,
    remote_access: Boolean,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_GET_REMOTE_TOKEN_FROM_MR` (§4.5): `NdkGetRemoteTokenFromMr`, MR slot
/// 5; returns the remote token (ndk-abi.md §6 item 11).
pub type NdkFnGetRemoteTokenFromMr = unsafe extern "system" fn(mr: *mut NdkMr) -> u32;

/// `NDK_FN_GET_LOCAL_TOKEN_FROM_MR` (§4.5): `NdkGetLocalTokenFromMr`, MR slot 6;
/// returns the local token.
pub type NdkFnGetLocalTokenFromMr = unsafe extern "system" fn(mr: *mut NdkMr) -> u32;

/// `NDK_FN_GET_REMOTE_TOKEN_FROM_MW` (§4.5): `NdkGetRemoteTokenFromMw`, MW slot
/// 2; returns the remote token.
pub type NdkFnGetRemoteTokenFromMw = unsafe extern "system" fn(mw: *mut NdkMw) -> u32;

// ---------------------------------------------------------------------------
// §4.6 SRQ
// ---------------------------------------------------------------------------

/// `NDK_FN_MODIFY_SRQ` (§4.6): `NdkModifySrq`, SRQ slot 2; completion: request.
/// `srq_depth` 0 = keep; `notify_threshold` 0 = keep threshold and arm state.
pub type NdkFnModifySrq = unsafe extern "system" fn(
    srq: *mut NdkSrq,
    srq_depth: u32,
    notify_threshold: u32,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_SRQ_RECEIVE` (§4.6): `NdkSrqReceive`, SRQ slot 3; completion: CQ. No
/// flags.
pub type NdkFnSrqReceive = unsafe extern "system" fn(
    srq: *mut NdkSrq,
    request_context: *mut c_void,
    sgl: *const NdkSge,
    n_sge: u32,
) -> NtStatus;

// ---------------------------------------------------------------------------
// §4.7 QP work requests
// ---------------------------------------------------------------------------

/// `NDK_FN_FLUSH` (§4.7): `NdkFlush`, QP slot 2; flushed requests complete
/// through the CQ.
pub type NdkFnFlush = unsafe extern "system" fn(qp: *mut NdkQp);

/// `NDK_FN_SEND` (§4.7): `NdkSend`, QP slot 3; completion: CQ. `flags` holds
/// [`OpFlags`](super::OpFlags) bits.
pub type NdkFnSend = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    sgl: *const NdkSge,
    n_sge: u32,
    flags: u32,
) -> NtStatus;

/// `NDK_FN_RECEIVE` (§4.7): `NdkReceive`, QP slot 4; completion: CQ. No flags.
pub type NdkFnReceive = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    sgl: *const NdkSge,
    n_sge: u32,
) -> NtStatus;

/// `NDK_FN_BIND` (§4.7): `NdkBind`, QP slot 5; completion: CQ. `virtual_address`
/// is an index into the MR, not a dereferenceable address.
pub type NdkFnBind = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    mr: *mut NdkMr,
    mw: *mut NdkMw,
    virtual_address: *mut c_void,
    length: usize,
    flags: u32,
) -> NtStatus;

/// `NDK_FN_FAST_REGISTER` (§4.7): `NdkFastRegister`, QP slot 6; completion: CQ.
/// `base_virtual_address` is an index (= `fbo` + n × `PAGE_SIZE`).
pub type NdkFnFastRegister = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    mr: *mut NdkMr,
    adapter_page_count: u32,
    adapter_page_array: *const NdkLogicalAddress,
    fbo: u32,
    length: usize,
    base_virtual_address: *mut c_void,
    flags: u32,
) -> NtStatus;

/// `NDK_FN_INVALIDATE` (§4.7): `NdkInvalidate`, QP slot 7; completion: CQ.
/// `mr_or_mw` is the header of a fast-registered MR or a bound MW.
pub type NdkFnInvalidate = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    mr_or_mw: *mut NdkObjectHeader,
    flags: u32,
) -> NtStatus;

/// `NDK_FN_READ` (§4.7): `NdkRead`, QP slot 8; completion: CQ. The SGEs are the
/// local sink; `remote_address` is in host byte order.
pub type NdkFnRead = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    sgl: *const NdkSge,
    n_sge: u32,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> NtStatus;

/// `NDK_FN_WRITE` (§4.7): `NdkWrite`, QP slot 9; completion: CQ. Same parameters
/// as [`NdkFnRead`]; the SGEs are the local source.
pub type NdkFnWrite = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    sgl: *const NdkSge,
    n_sge: u32,
    remote_address: u64,
    remote_token: u32,
    flags: u32,
) -> NtStatus;

/// `NDK_FN_SEND_AND_INVALIDATE` (§4.7, NDKPI 1.2): `NdkSendAndInvalidate`, QP
/// slot 10; completion: CQ. `remote_token` comes **last**, after `flags`
/// (unlike Read and Write).
pub type NdkFnSendAndInvalidate = unsafe extern "system" fn(
    qp: *mut NdkQp,
    request_context: *mut c_void,
    sgl: *const NdkSge,
    n_sge: u32,
    flags: u32,
    remote_token: u32,
) -> NtStatus;

// ---------------------------------------------------------------------------
// §4.8 PD
// ---------------------------------------------------------------------------

/// `NDK_FN_CREATE_MR` (§4.8): `NdkCreateMr`, PD slot 2; completion: create.
/// `fast_register` TRUE = fast-register only, FALSE = `NdkRegisterMr` only.
pub type NdkFnCreateMr = unsafe extern "system" fn(
    pd: *mut NdkPd,
    fast_register: Boolean,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_mr: *mut *mut NdkMr,
) -> NtStatus;

/// `NDK_FN_CREATE_MW` (§4.8): `NdkCreateMw`, PD slot 3; completion: create.
pub type NdkFnCreateMw = unsafe extern "system" fn(
    pd: *mut NdkPd,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_mw: *mut *mut NdkMw,
) -> NtStatus;

/// `NDK_FN_CREATE_SRQ` (§4.8): `NdkCreateSrq`, PD slot 4; completion: create.
pub type NdkFnCreateSrq = unsafe extern "system" fn(
    pd: *mut NdkPd,
    srq_depth: u32,
    max_receive_request_sge: u32,
    notify_threshold: u32,
    srq_notification: Option<NdkFnSrqNotificationCallback>,
    srq_notification_context: *mut c_void,
    affinity: *const GroupAffinity,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_srq: *mut *mut NdkSrq,
) -> NtStatus;

/// `NDK_FN_CREATE_QP` (§4.8): `NdkCreateQp`, PD slot 5; completion: create.
/// `qp_context` comes back in every completion of this QP.
pub type NdkFnCreateQp = unsafe extern "system" fn(
    pd: *mut NdkPd,
    receive_cq: *mut NdkCq,
    initiator_cq: *mut NdkCq,
    qp_context: *mut c_void,
    receive_queue_depth: u32,
    initiator_queue_depth: u32,
    max_receive_request_sge: u32,
    max_initiator_request_sge: u32,
    inline_data_size: u32,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_qp: *mut *mut NdkQp,
) -> NtStatus;

/// `NDK_FN_CREATE_QP_WITH_SRQ` (§4.8): `NdkCreateQpWithSrq`, PD slot 6;
/// completion: create. No receive depth or receive SGE parameters.
pub type NdkFnCreateQpWithSrq = unsafe extern "system" fn(
    pd: *mut NdkPd,
    receive_cq: *mut NdkCq,
    initiator_cq: *mut NdkCq,
    srq: *mut NdkSrq,
    qp_context: *mut c_void,
    initiator_queue_depth: u32,
    max_initiator_request_sge: u32,
    inline_data_size: u32,
    create_completion: Option<NdkFnCreateCompletion>,
    request_context: *mut c_void,
    out_qp: *mut *mut NdkQp,
) -> NtStatus;

/// `NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN` (§4.8):
/// `NdkGetPrivilegedMemoryRegionToken`, PD slot 7; synchronous.
pub type NdkFnGetPrivilegedMemoryRegionToken =
    unsafe extern "system" fn(pd: *mut NdkPd, token: *mut u32);

// ---------------------------------------------------------------------------
// §4.9 Shared endpoint, connector, listener
// ---------------------------------------------------------------------------

/// `NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS` (§4.9): shared-endpoint slot 2
/// (`NdkGetLocalAddress`); synchronous. `address_length` is bytes available in,
/// bytes written (or required) out.
pub type NdkFnGetSharedEndpointLocalAddress = unsafe extern "system" fn(
    shared_endpoint: *mut NdkSharedEndpoint,
    address: *mut SockAddr,
    address_length: *mut u32,
) -> NtStatus;

/// `NDK_FN_CONNECT` (§4.9): `NdkConnect`, connector slot 2; completion: request.
pub type NdkFnConnect = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    src_address: *const SockAddr,
    src_address_length: u32,
    dest_address: *const SockAddr,
    dest_address_length: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_CONNECT_WITH_SHARED_ENDPOINT` (§4.9): `NdkConnectWithSharedEndpoint`,
/// connector slot 3; completion: request.
pub type NdkFnConnectWithSharedEndpoint = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    shared_endpoint: *mut NdkSharedEndpoint,
    dest_address: *const SockAddr,
    dest_address_length: u32,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_COMPLETE_CONNECT` (§4.9): `NdkCompleteConnect`, connector slot 4;
/// completion: request. `disconnect_event` is optional.
pub type NdkFnCompleteConnect = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    disconnect_event: Option<NdkFnDisconnectEventCallback>,
    disconnect_event_context: *mut c_void,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_ACCEPT` (§4.9): `NdkAccept`, connector slot 5; completion: request.
/// `disconnect_event` is optional.
pub type NdkFnAccept = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    disconnect_event: Option<NdkFnDisconnectEventCallback>,
    disconnect_event_context: *mut c_void,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_REJECT` (§4.9): `NdkReject`, connector slot 6; **synchronous** (no
/// completion callback).
pub type NdkFnReject = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    private_data: *const c_void,
    private_data_length: u32,
) -> NtStatus;

/// `NDK_FN_GET_CONNECTION_DATA` (§4.9): `NdkGetConnectionData`, connector slot 7;
/// synchronous. The read limits are optional outputs; `private_data_length` is
/// bytes available in, bytes written (or required) out.
pub type NdkFnGetConnectionData = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    inbound_read_limit: *mut u32,
    outbound_read_limit: *mut u32,
    private_data: *mut c_void,
    private_data_length: *mut u32,
) -> NtStatus;

/// `NDK_FN_GET_LOCAL_ADDRESS` (§4.9): `NdkGetLocalAddress`, connector slot 8;
/// synchronous.
pub type NdkFnGetLocalAddress = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    address: *mut SockAddr,
    address_length: *mut u32,
) -> NtStatus;

/// `NDK_FN_GET_PEER_ADDRESS` (§4.9): `NdkGetPeerAddress`, connector slot 9;
/// synchronous; same parameters as [`NdkFnGetLocalAddress`].
pub type NdkFnGetPeerAddress = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    address: *mut SockAddr,
    address_length: *mut u32,
) -> NtStatus;

/// `NDK_FN_DISCONNECT` (§4.9): `NdkDisconnect`, connector slot 10; completion:
/// request.
pub type NdkFnDisconnect = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_CONTROL_CONNECT_EVENTS` (§4.9): `NdkControlConnectEvents`, listener
/// slot 4; synchronous. `pause` TRUE pauses, FALSE resumes.
pub type NdkFnControlConnectEvents =
    unsafe extern "system" fn(listener: *mut NdkListener, pause: Boolean);

/// `NDK_FN_LISTEN` (§4.9): `NdkListen`, listener slot 2; completion: request.
pub type NdkFnListen = unsafe extern "system" fn(
    listener: *mut NdkListener,
    address: *const SockAddr,
    address_length: u32,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_GET_LISTENER_LOCAL_ADDRESS` (§4.9): listener slot 3
/// (`NdkGetLocalAddress`); synchronous.
pub type NdkFnGetListenerLocalAddress = unsafe extern "system" fn(
    listener: *mut NdkListener,
    address: *mut SockAddr,
    address_length: *mut u32,
) -> NtStatus;

// ---------------------------------------------------------------------------
// §4.10 NDKPI 2.1 connector functions (UNVERIFIED)
// ---------------------------------------------------------------------------

/// `NDK_FN_COMPLETE_CONNECT_EX` (§4.10, NDKPI 2.1, **UNVERIFIED** — no public
/// header; connector slot 11 of the 2.1 table, not in
/// [`NdkConnectorDispatch`](super::NdkConnectorDispatch)): as
/// [`NdkFnCompleteConnect`] with the extended disconnect callback.
pub type NdkFnCompleteConnectEx = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    disconnect_event: Option<NdkFnDisconnectEventCallbackEx>,
    disconnect_event_context: *mut c_void,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_ACCEPT_EX` (§4.10, NDKPI 2.1, **UNVERIFIED** — no public header;
/// connector slot 12 of the 2.1 table, not in
/// [`NdkConnectorDispatch`](super::NdkConnectorDispatch)): as [`NdkFnAccept`]
/// with the extended disconnect callback.
pub type NdkFnAcceptEx = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    qp: *mut NdkQp,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    private_data: *const c_void,
    private_data_length: u32,
    disconnect_event: Option<NdkFnDisconnectEventCallbackEx>,
    disconnect_event_context: *mut c_void,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

// ---------------------------------------------------------------------------
// §4.11 Declared in the header, in no dispatch table
// ---------------------------------------------------------------------------

/// `NDK_FN_DISCONNECT_EX` (§4.11): declared in the header but in no dispatch
/// table and undocumented; **unused** (ndk-abi.md §6 item 20).
pub type NdkFnDisconnectEx = unsafe extern "system" fn(
    connector: *mut NdkConnector,
    abortive: Boolean,
    request_completion: Option<NdkFnRequestCompletion>,
    request_context: *mut c_void,
) -> NtStatus;

/// `NDK_FN_QUERY_ADAPTER_INFO_EX` (§4.11): declared in the header but in no
/// dispatch table and undocumented; **unused** (ndk-abi.md §6 item 20).
/// `PASSIVE_LEVEL`.
pub type NdkFnQueryAdapterInfoEx = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    version: NdkVersion,
    info: *mut NdkAdapterInfo,
    buffer_size: *mut u32,
) -> NtStatus;

// ---------------------------------------------------------------------------
// §4.12 Extension function
// ---------------------------------------------------------------------------

/// `NDK_FN_GET_RSS_PROCESSOR_INFO` (§4.12): `NdkGetRssProcessorInfo`, slot 0 of
/// [`NdkExtensionAdapterRssDispatch`](super::NdkExtensionAdapterRssDispatch).
/// `size` is bytes available in, bytes written (or required) out.
pub type NdkFnGetRssProcessorInfo = unsafe extern "system" fn(
    adapter: *mut NdkAdapter,
    rss_processor_info: *mut NdisRssProcessorInfo,
    size: *mut usize,
) -> NdisStatus;

// ---------------------------------------------------------------------------
// §4.14 WSK consumer functions (context only)
// ---------------------------------------------------------------------------

/// `PFN_WSK_NDK_OPEN_ADAPTER` (§4.14): how a kernel consumer opens an
/// `NDK_ADAPTER` through WSK (`WskOpenNdkAdapter`); `PASSIVE_LEVEL`. Context
/// only: the provider never calls it.
pub type PfnWskNdkOpenAdapter = unsafe extern "system" fn(
    client: *mut WskClient,
    ndk_version: NdkVersion,
    if_index: NetIfIndex,
    out_adapter: *mut *mut NdkAdapter,
) -> NtStatus;

/// `PFN_WSK_NDK_CLOSE_ADAPTER` (§4.14): how a kernel consumer closes an
/// `NDK_ADAPTER` through WSK (`WskCloseNdkAdapter`); `PASSIVE_LEVEL`. Context only.
pub type PfnWskNdkCloseAdapter =
    unsafe extern "system" fn(client: *mut WskClient, adapter: *mut NdkAdapter);

// Every function pointer, and `Option` of one, is one 8-byte slot on x64 (§1);
// the `Option` form relies on the null-pointer niche to match a C pointer that
// may be NULL.
#[cfg(target_arch = "x86_64")]
const _: () = {
    assert!(size_of::<NdkFnSend>() == 8 && align_of::<NdkFnSend>() == 8);
    assert!(size_of::<Option<NdkFnRequestCompletion>>() == 8);
    assert!(size_of::<Option<NdkFnCreateCompletion>>() == 8);
    assert!(size_of::<Option<NdkFnCloseCompletion>>() == 8);
    assert!(size_of::<Option<NdkFnCqNotificationCallback>>() == 8);
    assert!(size_of::<Option<NdkFnSrqNotificationCallback>>() == 8);
    assert!(size_of::<Option<NdkFnConnectEventCallback>>() == 8);
    assert!(size_of::<Option<NdkFnDisconnectEventCallback>>() == 8);
    assert!(size_of::<Option<NdkFnDisconnectEventCallbackEx>>() == 8);
    assert!(size_of::<NdkCqNotifyType>() == 4);
};
