//! NDKPI function types (ndk-abi.md §4.1–§4.12, §4.14).
//!
//! One alias per `NDK_FN_*` type, written by `ndk_fn!` (which says the
//! request and create families' shared parameters once), parameters in the
//! header's order, with the platform default calling convention
//! (`extern "system"`, the x64 Windows convention, §1). Conventions:
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

/// Writes the aliases, one entry each, parameters in the header's order:
///
/// * `Name(params) -> Ret;`: the plain entry, handed to `c_fn!` (`pub type
///   Name = unsafe extern "system" fn(params) -> Ret`);
/// * `Name(params) => request;`: the family whose completion is a request
///   completion (§4): the parameters end with `request_completion:
///   Option<NdkFnRequestCompletion>, request_context: *mut c_void`, and it
///   returns `NtStatus`;
/// * `Name(params) => create out_x: NdkX;`: the create family: the
///   parameters end with `create_completion: Option<NdkFnCreateCompletion>,
///   request_context: *mut c_void, out_x: *mut *mut NdkX`, and it returns
///   `NtStatus`.
///
/// The result is a plain type alias: the same type as written out by hand,
/// which the dispatch tables' layout assertions (`abi::ndk`) check.
macro_rules! ndk_fn {
    () => {};
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),* $(,)?) => request; $($rest:tt)*) => {
        ndk_fn! {
            $(#[$doc])* $name($($arg: $ty,)* request_completion: Option<NdkFnRequestCompletion>,
                request_context: *mut c_void) -> NtStatus;
            $($rest)*
        }
    };
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),* $(,)?) => create $out:ident: $Out:ty;
        $($rest:tt)*) => {
        ndk_fn! {
            $(#[$doc])* $name($($arg: $ty,)* create_completion: Option<NdkFnCreateCompletion>,
                request_context: *mut c_void, $out: *mut *mut $Out) -> NtStatus;
            $($rest)*
        }
    };
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?; $($rest:tt)*) => {
        c_fn! { $(#[$doc])* $name($($arg: $ty),*) $(-> $ret)?; }
        ndk_fn! { $($rest)* }
    };
}

/// Writes a connector's CompleteConnect and Accept over one disconnect
/// callback type: NDKPI 1.2's (§4.9), or 2.1's extended one (§4.10). Both
/// are of the request family.
macro_rules! accept_fns {
    ($(#[$complete_doc:meta])* $complete:ident, $(#[$accept_doc:meta])* $accept:ident:
        $callback:ty) => {
        ndk_fn! {
            $(#[$complete_doc])*
            $complete(connector: *mut NdkConnector, disconnect_event: Option<$callback>,
                disconnect_event_context: *mut c_void) => request;
            $(#[$accept_doc])*
            $accept(connector: *mut NdkConnector, qp: *mut NdkQp, inbound_read_limit: u32,
                outbound_read_limit: u32, private_data: *const c_void, private_data_length: u32,
                disconnect_event: Option<$callback>, disconnect_event_context: *mut c_void)
                => request;
        }
    };
}

// ---------------------------------------------------------------------------
// §4.1 Consumer callbacks
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_CLOSE_COMPLETION` (§4.1): the consumer's callback for a close that
    /// returned `STATUS_PENDING`; `context` is the close call's `RequestContext`.
    NdkFnCloseCompletion(context: *mut c_void);

    /// `NDK_FN_REQUEST_COMPLETION` (§4.1): the consumer's callback for a request that
    /// returned `STATUS_PENDING`.
    NdkFnRequestCompletion(context: *mut c_void, status: NtStatus);

    /// `NDK_FN_CREATE_COMPLETION` (§4.1): the consumer's callback for a create that
    /// returned `STATUS_PENDING`; `ndk_object` is the new object's header on success.
    NdkFnCreateCompletion(context: *mut c_void, status: NtStatus,
        ndk_object: *mut NdkObjectHeader);

    /// `NDK_FN_CQ_NOTIFICATION_CALLBACK` (§4.1): an armed CQ fired. `cq_status` is
    /// `STATUS_SUCCESS`, `STATUS_BUFFER_OVERFLOW` (overrun) or
    /// `STATUS_INTERNAL_ERROR`.
    NdkFnCqNotificationCallback(cq_notification_context: *mut c_void, cq_status: NtStatus);

    /// `NDK_FN_SRQ_NOTIFICATION_CALLBACK` (§4.1): the SRQ fell below its notify
    /// threshold, or failed. `srq_status` is `STATUS_SUCCESS` or
    /// `STATUS_INTERNAL_ERROR`.
    NdkFnSrqNotificationCallback(srq_notification_context: *mut c_void, srq_status: NtStatus);

    /// `NDK_FN_CONNECT_EVENT_CALLBACK` (§4.1): an incoming connection request on a
    /// listener; `connector` is a new provider-created connector for it.
    NdkFnConnectEventCallback(connect_event_context: *mut c_void, connector: *mut NdkConnector);

    /// `NDK_FN_DISCONNECT_EVENT_CALLBACK` (§4.1): the peer disconnected.
    NdkFnDisconnectEventCallback(disconnect_event_context: *mut c_void);

    /// `NDK_FN_DISCONNECT_EVENT_CALLBACK_EX` (§4.1, NDKPI 2.1, **UNVERIFIED** —
    /// rebuilt from the rendered docs; unused by a 1.2 provider): the peer
    /// disconnected; `provider_disconnect_reason` 0 = not provided.
    NdkFnDisconnectEventCallbackEx(disconnect_event_context: *mut c_void,
        provider_disconnect_reason: u32);
}

// ---------------------------------------------------------------------------
// §4.2 Common to every object
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_CLOSE_OBJECT` (§4.2): slot 0 of every table except the adapter's.
    /// Returns `STATUS_SUCCESS` or `STATUS_PENDING` (then `close_completion`).
    NdkFnCloseObject(ndk_object: *mut NdkObjectHeader,
        close_completion: Option<NdkFnCloseCompletion>, request_context: *mut c_void) -> NtStatus;

    /// `NDK_FN_QUERY_EXTENSION_INTERFACE` (§4.2): slot 1 of every table (slot 0 of
    /// the adapter's); synchronous. The version is passed by value.
    NdkFnQueryExtensionInterface(ndk_object: *mut NdkObjectHeader,
        extension_interface_id: *const Guid, extension_interface_version: NdkVersion,
        extension_interface: *mut NdkExtensionInterface) -> NtStatus;
}

// ---------------------------------------------------------------------------
// §4.3 Adapter
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_QUERY_ADAPTER_INFO` (§4.3): `NdkQueryAdapterInfo`, adapter slot 1;
    /// **`PASSIVE_LEVEL`**, may block; synchronous. `buffer_size` is bytes available
    /// in, bytes written (or required, with `STATUS_BUFFER_TOO_SMALL`) out.
    NdkFnQueryAdapterInfo(adapter: *mut NdkAdapter, info: *mut NdkAdapterInfo,
        buffer_size: *mut u32) -> NtStatus;

    /// `NDK_FN_CREATE_CQ` (§4.3): `NdkCreateCq`, adapter slot 2; completion: create.
    NdkFnCreateCq(adapter: *mut NdkAdapter, cq_depth: u32,
        cq_notification: Option<NdkFnCqNotificationCallback>,
        cq_notification_context: *mut c_void, affinity: *const GroupAffinity)
        => create out_cq: NdkCq;

    /// `NDK_FN_CREATE_PD` (§4.3): `NdkCreatePd`, adapter slot 3; completion: create.
    NdkFnCreatePd(adapter: *mut NdkAdapter) => create out_pd: NdkPd;

    /// `NDK_FN_CREATE_SHARED_ENDPOINT` (§4.3): `NdkCreateSharedEndpoint`, adapter
    /// slot 4; completion: create.
    NdkFnCreateSharedEndpoint(adapter: *mut NdkAdapter, address: *const SockAddr,
        address_length: u32) => create out_shared_endpoint: NdkSharedEndpoint;

    /// `NDK_FN_CREATE_CONNECTOR` (§4.3): `NdkCreateConnector`, adapter slot 5;
    /// completion: create.
    NdkFnCreateConnector(adapter: *mut NdkAdapter) => create out_connector: NdkConnector;

    /// `NDK_FN_CREATE_LISTENER` (§4.3): `NdkCreateListener`, adapter slot 6;
    /// completion: create.
    NdkFnCreateListener(adapter: *mut NdkAdapter,
        connect_event: Option<NdkFnConnectEventCallback>, connect_event_context: *mut c_void)
        => create out_listener: NdkListener;

    /// `NDK_FN_BUILD_LAM` (§4.3): `NdkBuildLam` (member `NdkBuildLAM`), adapter slot
    /// 7; completion: request, with an optional callback. `lam_size` is bytes
    /// available in, bytes of the LAM (0x10 + 8 × pages) out; `fbo` receives the
    /// first-byte offset into the first page.
    NdkFnBuildLam(adapter: *mut NdkAdapter, mdl: *mut Mdl, length: usize,
        request_completion: Option<NdkFnRequestCompletion>, request_context: *mut c_void,
        lam: *mut NdkLogicalAddressMapping, lam_size: *mut u32, fbo: *mut u32) -> NtStatus;

    /// `NDK_FN_RELEASE_LAM` (§4.3): `NdkReleaseLam` (member `NdkReleaseLAM`), adapter
    /// slot 8; synchronous.
    NdkFnReleaseLam(adapter: *mut NdkAdapter, lam: *mut NdkLogicalAddressMapping);
}

// ---------------------------------------------------------------------------
// §4.4 CQ
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_RESIZE_CQ` (§4.4): `NdkResizeCq`, CQ slot 2; completion: request.
    NdkFnResizeCq(cq: *mut NdkCq, cq_depth: u32) => request;

    /// `NDK_FN_ARM_CQ` (§4.4): `NdkArmCq`, CQ slot 3; synchronous. The C `Type` is a
    /// `ULONG`; [`NdkCqNotifyType`] is a transparent `u32`.
    NdkFnArmCq(cq: *mut NdkCq, notify_type: NdkCqNotifyType);

    /// `NDK_FN_GET_CQ_RESULTS` (§4.4): `NdkGetCqResults`, CQ slot 4; returns the
    /// number of entries removed (0 = empty), at most `n_results`.
    NdkFnGetCqResults(cq: *mut NdkCq, results: *mut NdkResult, n_results: u32) -> u32;

    /// `NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION` (§4.4):
    /// `NdkControlCqInterruptModeration`, CQ slot 5; synchronous, never
    /// `STATUS_PENDING`. `moderation_interval` is in µs (0 = off,
    /// [`MAXULONG`](super::MAXULONG) = count alone decides); `moderation_count` 0 or
    /// 1 = off, `MAXULONG` or more than the depth = interval alone decides.
    NdkFnControlCqInterruptModeration(cq: *mut NdkCq, moderation_interval: u32,
        moderation_count: u32) -> NtStatus;

    /// `NDK_FN_GET_CQ_RESULTS_EX` (§4.4, NDKPI 1.2): `NdkGetCqResultsEx`, CQ slot 6;
    /// as [`NdkFnGetCqResults`] with [`NdkResultEx`] entries.
    NdkFnGetCqResultsEx(cq: *mut NdkCq, results: *mut NdkResultEx, n_results: u32) -> u32;
}

// ---------------------------------------------------------------------------
// §4.5 MR and MW
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_REGISTER_MR` (§4.5): `NdkRegisterMr`, MR slot 2; completion: request.
    /// `flags` holds [`MrFlags`](super::MrFlags) bits.
    NdkFnRegisterMr(mr: *mut NdkMr, mdl: *mut Mdl, length: usize, flags: u32) => request;

    /// `NDK_FN_DEREGISTER_MR` (§4.5): `NdkDeregisterMr`, MR slot 3; completion:
    /// request.
    NdkFnDeregisterMr(mr: *mut NdkMr) => request;

    /// `NDK_FN_INITIALIZE_FAST_REGISTER_MR` (§4.5): `NdkInitializeFastRegisterMr`,
    /// MR slot 4; completion: request.
    NdkFnInitializeFastRegisterMr(mr: *mut NdkMr, adapter_page_count: u32,
        remote_access: Boolean) => request;

    /// `NDK_FN_GET_REMOTE_TOKEN_FROM_MR` (§4.5): `NdkGetRemoteTokenFromMr`, MR slot
    /// 5; returns the remote token (ndk-abi.md §6 item 11).
    NdkFnGetRemoteTokenFromMr(mr: *mut NdkMr) -> u32;

    /// `NDK_FN_GET_LOCAL_TOKEN_FROM_MR` (§4.5): `NdkGetLocalTokenFromMr`, MR slot 6;
    /// returns the local token.
    NdkFnGetLocalTokenFromMr(mr: *mut NdkMr) -> u32;

    /// `NDK_FN_GET_REMOTE_TOKEN_FROM_MW` (§4.5): `NdkGetRemoteTokenFromMw`, MW slot
    /// 2; returns the remote token.
    NdkFnGetRemoteTokenFromMw(mw: *mut NdkMw) -> u32;
}

// ---------------------------------------------------------------------------
// §4.6 SRQ
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_MODIFY_SRQ` (§4.6): `NdkModifySrq`, SRQ slot 2; completion: request.
    /// `srq_depth` 0 = keep; `notify_threshold` 0 = keep threshold and arm state.
    NdkFnModifySrq(srq: *mut NdkSrq, srq_depth: u32, notify_threshold: u32) => request;

    /// `NDK_FN_SRQ_RECEIVE` (§4.6): `NdkSrqReceive`, SRQ slot 3; completion: CQ. No
    /// flags.
    NdkFnSrqReceive(srq: *mut NdkSrq, request_context: *mut c_void, sgl: *const NdkSge,
        n_sge: u32) -> NtStatus;
}

// ---------------------------------------------------------------------------
// §4.7 QP work requests
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_FLUSH` (§4.7): `NdkFlush`, QP slot 2; flushed requests complete
    /// through the CQ.
    NdkFnFlush(qp: *mut NdkQp);

    /// `NDK_FN_SEND` (§4.7): `NdkSend`, QP slot 3; completion: CQ. `flags` holds
    /// [`OpFlags`](super::OpFlags) bits.
    NdkFnSend(qp: *mut NdkQp, request_context: *mut c_void, sgl: *const NdkSge, n_sge: u32,
        flags: u32) -> NtStatus;

    /// `NDK_FN_RECEIVE` (§4.7): `NdkReceive`, QP slot 4; completion: CQ. No flags.
    NdkFnReceive(qp: *mut NdkQp, request_context: *mut c_void, sgl: *const NdkSge, n_sge: u32)
        -> NtStatus;

    /// `NDK_FN_BIND` (§4.7): `NdkBind`, QP slot 5; completion: CQ. `virtual_address`
    /// is an index into the MR, not a dereferenceable address.
    NdkFnBind(qp: *mut NdkQp, request_context: *mut c_void, mr: *mut NdkMr, mw: *mut NdkMw,
        virtual_address: *mut c_void, length: usize, flags: u32) -> NtStatus;

    /// `NDK_FN_FAST_REGISTER` (§4.7): `NdkFastRegister`, QP slot 6; completion: CQ.
    /// `base_virtual_address` is an index (= `fbo` + n × `PAGE_SIZE`).
    NdkFnFastRegister(qp: *mut NdkQp, request_context: *mut c_void, mr: *mut NdkMr,
        adapter_page_count: u32, adapter_page_array: *const NdkLogicalAddress, fbo: u32,
        length: usize, base_virtual_address: *mut c_void, flags: u32) -> NtStatus;

    /// `NDK_FN_INVALIDATE` (§4.7): `NdkInvalidate`, QP slot 7; completion: CQ.
    /// `mr_or_mw` is the header of a fast-registered MR or a bound MW.
    NdkFnInvalidate(qp: *mut NdkQp, request_context: *mut c_void,
        mr_or_mw: *mut NdkObjectHeader, flags: u32) -> NtStatus;

    /// `NDK_FN_READ` (§4.7): `NdkRead`, QP slot 8; completion: CQ. The SGEs are the
    /// local sink; `remote_address` is in host byte order.
    NdkFnRead(qp: *mut NdkQp, request_context: *mut c_void, sgl: *const NdkSge, n_sge: u32,
        remote_address: u64, remote_token: u32, flags: u32) -> NtStatus;

    /// `NDK_FN_WRITE` (§4.7): `NdkWrite`, QP slot 9; completion: CQ. Same parameters
    /// as [`NdkFnRead`]; the SGEs are the local source.
    NdkFnWrite(qp: *mut NdkQp, request_context: *mut c_void, sgl: *const NdkSge, n_sge: u32,
        remote_address: u64, remote_token: u32, flags: u32) -> NtStatus;

    /// `NDK_FN_SEND_AND_INVALIDATE` (§4.7, NDKPI 1.2): `NdkSendAndInvalidate`, QP
    /// slot 10; completion: CQ. `remote_token` comes **last**, after `flags`
    /// (unlike Read and Write).
    NdkFnSendAndInvalidate(qp: *mut NdkQp, request_context: *mut c_void, sgl: *const NdkSge,
        n_sge: u32, flags: u32, remote_token: u32) -> NtStatus;
}

// ---------------------------------------------------------------------------
// §4.8 PD
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_CREATE_MR` (§4.8): `NdkCreateMr`, PD slot 2; completion: create.
    /// `fast_register` TRUE = fast-register only, FALSE = `NdkRegisterMr` only.
    NdkFnCreateMr(pd: *mut NdkPd, fast_register: Boolean) => create out_mr: NdkMr;

    /// `NDK_FN_CREATE_MW` (§4.8): `NdkCreateMw`, PD slot 3; completion: create.
    NdkFnCreateMw(pd: *mut NdkPd) => create out_mw: NdkMw;

    /// `NDK_FN_CREATE_SRQ` (§4.8): `NdkCreateSrq`, PD slot 4; completion: create.
    NdkFnCreateSrq(pd: *mut NdkPd, srq_depth: u32, max_receive_request_sge: u32,
        notify_threshold: u32, srq_notification: Option<NdkFnSrqNotificationCallback>,
        srq_notification_context: *mut c_void, affinity: *const GroupAffinity)
        => create out_srq: NdkSrq;

    /// `NDK_FN_CREATE_QP` (§4.8): `NdkCreateQp`, PD slot 5; completion: create.
    /// `qp_context` comes back in every completion of this QP.
    NdkFnCreateQp(pd: *mut NdkPd, receive_cq: *mut NdkCq, initiator_cq: *mut NdkCq,
        qp_context: *mut c_void, receive_queue_depth: u32, initiator_queue_depth: u32,
        max_receive_request_sge: u32, max_initiator_request_sge: u32, inline_data_size: u32)
        => create out_qp: NdkQp;

    /// `NDK_FN_CREATE_QP_WITH_SRQ` (§4.8): `NdkCreateQpWithSrq`, PD slot 6;
    /// completion: create. No receive depth or receive SGE parameters.
    NdkFnCreateQpWithSrq(pd: *mut NdkPd, receive_cq: *mut NdkCq, initiator_cq: *mut NdkCq,
        srq: *mut NdkSrq, qp_context: *mut c_void, initiator_queue_depth: u32,
        max_initiator_request_sge: u32, inline_data_size: u32) => create out_qp: NdkQp;

    /// `NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN` (§4.8):
    /// `NdkGetPrivilegedMemoryRegionToken`, PD slot 7; synchronous.
    NdkFnGetPrivilegedMemoryRegionToken(pd: *mut NdkPd, token: *mut u32);
}

// ---------------------------------------------------------------------------
// §4.9 Shared endpoint, connector, listener
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS` (§4.9): shared-endpoint slot 2
    /// (`NdkGetLocalAddress`); synchronous. `address_length` is bytes available in,
    /// bytes written (or required) out.
    NdkFnGetSharedEndpointLocalAddress(shared_endpoint: *mut NdkSharedEndpoint,
        address: *mut SockAddr, address_length: *mut u32) -> NtStatus;

    /// `NDK_FN_CONNECT` (§4.9): `NdkConnect`, connector slot 2; completion: request.
    NdkFnConnect(connector: *mut NdkConnector, qp: *mut NdkQp, src_address: *const SockAddr,
        src_address_length: u32, dest_address: *const SockAddr, dest_address_length: u32,
        inbound_read_limit: u32, outbound_read_limit: u32, private_data: *const c_void,
        private_data_length: u32) => request;

    /// `NDK_FN_CONNECT_WITH_SHARED_ENDPOINT` (§4.9): `NdkConnectWithSharedEndpoint`,
    /// connector slot 3; completion: request.
    NdkFnConnectWithSharedEndpoint(connector: *mut NdkConnector, qp: *mut NdkQp,
        shared_endpoint: *mut NdkSharedEndpoint, dest_address: *const SockAddr,
        dest_address_length: u32, inbound_read_limit: u32, outbound_read_limit: u32,
        private_data: *const c_void, private_data_length: u32) => request;

    /// `NDK_FN_REJECT` (§4.9): `NdkReject`, connector slot 6; **synchronous** (no
    /// completion callback).
    NdkFnReject(connector: *mut NdkConnector, private_data: *const c_void,
        private_data_length: u32) -> NtStatus;

    /// `NDK_FN_GET_CONNECTION_DATA` (§4.9): `NdkGetConnectionData`, connector slot 7;
    /// synchronous. The read limits are optional outputs; `private_data_length` is
    /// bytes available in, bytes written (or required) out.
    NdkFnGetConnectionData(connector: *mut NdkConnector, inbound_read_limit: *mut u32,
        outbound_read_limit: *mut u32, private_data: *mut c_void, private_data_length: *mut u32)
        -> NtStatus;

    /// `NDK_FN_GET_LOCAL_ADDRESS` (§4.9): `NdkGetLocalAddress`, connector slot 8;
    /// synchronous.
    NdkFnGetLocalAddress(connector: *mut NdkConnector, address: *mut SockAddr,
        address_length: *mut u32) -> NtStatus;

    /// `NDK_FN_GET_PEER_ADDRESS` (§4.9): `NdkGetPeerAddress`, connector slot 9;
    /// synchronous; same parameters as [`NdkFnGetLocalAddress`].
    NdkFnGetPeerAddress(connector: *mut NdkConnector, address: *mut SockAddr,
        address_length: *mut u32) -> NtStatus;

    /// `NDK_FN_DISCONNECT` (§4.9): `NdkDisconnect`, connector slot 10; completion:
    /// request.
    NdkFnDisconnect(connector: *mut NdkConnector) => request;

    /// `NDK_FN_CONTROL_CONNECT_EVENTS` (§4.9): `NdkControlConnectEvents`, listener
    /// slot 4; synchronous. `pause` TRUE pauses, FALSE resumes.
    NdkFnControlConnectEvents(listener: *mut NdkListener, pause: Boolean);

    /// `NDK_FN_LISTEN` (§4.9): `NdkListen`, listener slot 2; completion: request.
    NdkFnListen(listener: *mut NdkListener, address: *const SockAddr, address_length: u32)
        => request;

    /// `NDK_FN_GET_LISTENER_LOCAL_ADDRESS` (§4.9): listener slot 3
    /// (`NdkGetLocalAddress`); synchronous.
    NdkFnGetListenerLocalAddress(listener: *mut NdkListener, address: *mut SockAddr,
        address_length: *mut u32) -> NtStatus;
}

accept_fns! {
    /// `NDK_FN_COMPLETE_CONNECT` (§4.9): `NdkCompleteConnect`, connector slot 4;
    /// completion: request. `disconnect_event` is optional.
    NdkFnCompleteConnect,
    /// `NDK_FN_ACCEPT` (§4.9): `NdkAccept`, connector slot 5; completion: request.
    /// `disconnect_event` is optional.
    NdkFnAccept: NdkFnDisconnectEventCallback
}

// ---------------------------------------------------------------------------
// §4.10 NDKPI 2.1 connector functions (UNVERIFIED)
// ---------------------------------------------------------------------------

accept_fns! {
    /// `NDK_FN_COMPLETE_CONNECT_EX` (§4.10, NDKPI 2.1, **UNVERIFIED** — no public
    /// header; connector slot 11 of the 2.1 table, not in
    /// [`NdkConnectorDispatch`](super::NdkConnectorDispatch)): as
    /// [`NdkFnCompleteConnect`] with the extended disconnect callback.
    NdkFnCompleteConnectEx,
    /// `NDK_FN_ACCEPT_EX` (§4.10, NDKPI 2.1, **UNVERIFIED** — no public header;
    /// connector slot 12 of the 2.1 table, not in
    /// [`NdkConnectorDispatch`](super::NdkConnectorDispatch)): as [`NdkFnAccept`]
    /// with the extended disconnect callback.
    NdkFnAcceptEx: NdkFnDisconnectEventCallbackEx
}

// ---------------------------------------------------------------------------
// §4.11 Declared in the header, in no dispatch table
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_DISCONNECT_EX` (§4.11): declared in the header but in no dispatch
    /// table and undocumented; **unused** (ndk-abi.md §6 item 20).
    NdkFnDisconnectEx(connector: *mut NdkConnector, abortive: Boolean) => request;

    /// `NDK_FN_QUERY_ADAPTER_INFO_EX` (§4.11): declared in the header but in no
    /// dispatch table and undocumented; **unused** (ndk-abi.md §6 item 20).
    /// `PASSIVE_LEVEL`.
    NdkFnQueryAdapterInfoEx(adapter: *mut NdkAdapter, version: NdkVersion,
        info: *mut NdkAdapterInfo, buffer_size: *mut u32) -> NtStatus;
}

// ---------------------------------------------------------------------------
// §4.12 Extension function
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `NDK_FN_GET_RSS_PROCESSOR_INFO` (§4.12): `NdkGetRssProcessorInfo`, slot 0 of
    /// [`NdkExtensionAdapterRssDispatch`](super::NdkExtensionAdapterRssDispatch).
    /// `size` is bytes available in, bytes written (or required) out.
    NdkFnGetRssProcessorInfo(adapter: *mut NdkAdapter,
        rss_processor_info: *mut NdisRssProcessorInfo, size: *mut usize) -> NdisStatus;
}

// ---------------------------------------------------------------------------
// §4.14 WSK consumer functions (context only)
// ---------------------------------------------------------------------------

ndk_fn! {
    /// `PFN_WSK_NDK_OPEN_ADAPTER` (§4.14): how a kernel consumer opens an
    /// `NDK_ADAPTER` through WSK (`WskOpenNdkAdapter`); `PASSIVE_LEVEL`. Context
    /// only: the provider never calls it.
    PfnWskNdkOpenAdapter(client: *mut WskClient, ndk_version: NdkVersion, if_index: NetIfIndex,
        out_adapter: *mut *mut NdkAdapter) -> NtStatus;

    /// `PFN_WSK_NDK_CLOSE_ADAPTER` (§4.14): how a kernel consumer closes an
    /// `NDK_ADAPTER` through WSK (`WskCloseNdkAdapter`); `PASSIVE_LEVEL`. Context only.
    PfnWskNdkCloseAdapter(client: *mut WskClient, adapter: *mut NdkAdapter);
}

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
