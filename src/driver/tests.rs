//! Host tests of the driver through the platform-neutral handlers, grouped by
//! what they pin down and named after the rules of family A
//! (`shared/spec/rules.md`; the table is in `docs/conformance.md`).

use core::mem::offset_of;
use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use core::ptr::NonNull;

use crate::abi::*;
use crate::kernel::sync::Arc;

use super::adapter::{Adapter, FrameKind};
use super::attributes::{self, MiniportHandlers};
use super::ndk::{Connection, LocalEndpoint, NdkProvider, PROVIDER_VERSION};
use super::oid::{self, OidOutcome, OidRequest, SET_ONLY_OIDS, SUPPORTED_OIDS};
use super::state::NdkEvent;
use super::testing::{FakeProvider, adapter_with};

fn query(adapter: &Adapter, oid: NdisOid, buffer: &mut [u8]) -> OidOutcome {
    oid::handle(adapter, OidRequest::Query { oid, buffer })
}

/// A query on the direct OID path (see [`oid::handle_direct`]).
fn direct_query(adapter: &Adapter, oid: NdisOid, buffer: &mut [u8]) -> OidOutcome {
    oid::handle_direct(adapter, OidRequest::Query { oid, buffer })
}

fn set(adapter: &Adapter, oid: NdisOid, buffer: &[u8]) -> OidOutcome {
    oid::handle(adapter, OidRequest::Set { oid, buffer })
}

/// Why `adapter` refused to open an NDK adapter of version
/// `major`.`minor` (`None`: it opened one).
fn refused(adapter: &Adapter, major: u16, minor: u16) -> Option<NdisStatus> {
    adapter.open_ndk_adapter(version(major, minor)).err()
}

fn u16_at(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(buf[at..at + 2].try_into().unwrap())
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap())
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
}

fn version(major: u16, minor: u16) -> NdkVersion {
    NdkVersion { major, minor }
}

/// Runs the NDK work item the way NDIS would, recording the events.
fn run_work(adapter: &Adapter, on_event: &mut dyn FnMut(NdkEvent)) -> alloc::vec::Vec<NdkEvent> {
    let mut events = alloc::vec::Vec::new();
    adapter
        .ndk()
        .run_announcements(adapter.provider(), &mut |event| {
            events.push(event);
            on_event(event);
            NDIS_STATUS_SUCCESS
        });
    events
}

fn disable(adapter: &Adapter) -> OidOutcome {
    set(adapter, OID_NDK_SET_STATE, &[FALSE])
}

fn enable(adapter: &Adapter) -> OidOutcome {
    set(adapter, OID_NDK_SET_STATE, &[TRUE])
}

mod open {
    use super::*;

    #[test]
    fn test_open_handler_rejects_unsupported_major_rule_a1() {
        let (adapter, fake) = adapter_with(true);
        for requested in [version(0, 2), version(2, 0), version(2, 1)] {
            assert_eq!(
                adapter.open_ndk_adapter(requested),
                Err(NDIS_STATUS_BAD_VERSION)
            );
        }
        assert!(
            fake.state.lock().opened_versions.is_empty(),
            "the provider is not asked"
        );
    }

    #[test]
    fn test_open_handler_uses_highest_minor_rule_a2() {
        let (adapter, fake) = adapter_with(true);
        for minor in 0..=2 {
            let ndk = adapter.open_ndk_adapter(version(1, minor)).unwrap();
            // SAFETY: the fake's adapter is valid until closed below.
            let stamped = unsafe { (*ndk.as_ptr()).header.version };
            assert_eq!(stamped, NDK_VERSION_1_2);
            adapter.close_ndk_adapter(ndk);
        }
        assert_eq!(
            fake.state.lock().opened_versions,
            [NDK_VERSION_1_2, NDK_VERSION_1_2, NDK_VERSION_1_2]
        );
    }

    #[test]
    fn test_open_handler_rejects_minor_above_two_rule_a3() {
        let (adapter, _fake) = adapter_with(true);
        assert_eq!(refused(&adapter, 1, 3), Some(NDIS_STATUS_BAD_VERSION));
        assert_eq!(adapter.ndk().open_adapters(), 0);
    }

    #[test]
    fn test_open_handler_refuses_adapter_with_other_version_rule_a4() {
        let (adapter, fake) = adapter_with(true);
        fake.state.lock().wrong_version = Some(NDK_VERSION_1_1);
        assert_eq!(refused(&adapter, 1, 0), Some(NDIS_STATUS_FAILURE));
        let state = fake.state.lock();
        assert!(state.open.is_empty(), "the wrong adapter was closed again");
        assert_eq!(state.closed, 1);
        drop(state);
        assert_eq!(adapter.ndk().open_adapters(), 0);
    }

    #[test]
    fn test_negotiated_version_is_in_adapter_info_rule_a4() {
        let (adapter, _fake) = adapter_with(true);
        assert_eq!(adapter.provider().adapter_info().version, PROVIDER_VERSION);
    }

    #[test]
    fn test_open_fails_not_ready_while_disabled_rule_a5() {
        let (adapter, fake) = adapter_with(true);
        assert!(disable(&adapter).queue_ndk_work);
        assert_eq!(refused(&adapter, 1, 2), Some(NDIS_STATUS_ADAPTER_NOT_READY));
        // *NetworkDirect = 0: disabled from the start.
        let (off, _) = adapter_with(false);
        assert_eq!(refused(&off, 1, 0), Some(NDIS_STATUS_ADAPTER_NOT_READY));
        assert!(fake.state.lock().opened_versions.is_empty());
    }

    #[test]
    fn test_open_passes_resources_failure_through_rule_a5() {
        let (adapter, fake) = adapter_with(true);
        fake.state.lock().fail_open = Some(STATUS_INSUFFICIENT_RESOURCES);
        assert_eq!(refused(&adapter, 1, 2), Some(NDIS_STATUS_RESOURCES));
        assert_eq!(
            adapter.ndk().open_adapters(),
            0,
            "the reservation is given back"
        );
    }

    #[test]
    fn test_several_adapters_open_and_close_independently_rule_a6() {
        let (adapter, fake) = adapter_with(true);
        let a = adapter.open_ndk_adapter(version(1, 0)).unwrap();
        let b = adapter.open_ndk_adapter(version(1, 2)).unwrap();
        assert_ne!(a, b);
        assert_eq!(adapter.ndk().open_adapters(), 2);
        adapter.close_ndk_adapter(a);
        assert_eq!(adapter.ndk().open_adapters(), 1);
        assert_eq!(fake.state.lock().open, [b.as_ptr() as usize]);
        adapter.close_ndk_adapter(b);
        assert_eq!(adapter.ndk().open_adapters(), 0);
        assert_eq!(fake.state.lock().closed, 2);
    }
}

mod attributes_filled {
    use super::*;

    unsafe extern "system" fn set_options(_: NdisHandle, _: NdisHandle) -> NdisStatus {
        0
    }
    unsafe extern "system" fn initialize(
        _: NdisHandle,
        _: NdisHandle,
        _: *mut NdisMiniportInitParameters,
    ) -> NdisStatus {
        0
    }
    unsafe extern "system" fn halt(_: NdisHandle, _: NdisHaltAction) {}
    unsafe extern "system" fn unload(_: *mut core::ffi::c_void) {}
    unsafe extern "system" fn pause(_: NdisHandle, _: *mut core::ffi::c_void) -> NdisStatus {
        0
    }
    unsafe extern "system" fn oid(_: NdisHandle, _: *mut NdisOidRequest) -> NdisStatus {
        0
    }
    unsafe extern "system" fn send(_: NdisHandle, _: *mut NetBufferList, _: u32, _: u32) {}
    unsafe extern "system" fn return_nbl(_: NdisHandle, _: *mut NetBufferList, _: u32) {}
    unsafe extern "system" fn cancel(_: NdisHandle, _: *mut core::ffi::c_void) {}
    unsafe extern "system" fn reset(_: NdisHandle, _: *mut Boolean) -> NdisStatus {
        0
    }
    unsafe extern "system" fn pnp(_: NdisHandle, _: *mut NetDevicePnpEvent) {}
    unsafe extern "system" fn shutdown(_: NdisHandle, _: NdisShutdownAction) {}
    unsafe extern "system" fn open_ndk(
        _: NdisHandle,
        _: *const NdisOpenNdkAdapterParameters,
        _: *mut *mut NdkAdapter,
    ) -> NdisStatus {
        0
    }
    unsafe extern "system" fn close_ndk(_: NdisHandle, _: *mut NdkAdapter) {}

    fn handlers() -> MiniportHandlers {
        MiniportHandlers {
            set_options,
            initialize,
            halt,
            unload,
            pause,
            restart: pause,
            oid_request: oid,
            send,
            return_net_buffer_lists: return_nbl,
            cancel_send: cancel,
            reset,
            device_pnp_event_notify: pnp,
            shutdown,
            cancel_oid_request: cancel,
            direct_oid_request: oid,
            cancel_direct_oid_request: cancel,
        }
    }

    #[test]
    fn test_characteristics_register_oid_and_set_options_handlers_rule_a9() {
        let chars = attributes::driver_characteristics(&handlers());
        assert_eq!(
            chars.header,
            NdisObjectHeader {
                type_: 0x8A,
                revision: 2,
                size: 0x98
            }
        );
        assert_eq!(
            (chars.major_ndis_version, chars.minor_ndis_version),
            (6, 50)
        );
        assert!(chars.oid_request_handler.is_some());
        assert!(chars.set_options_handler.is_some());
        assert!(chars.direct_oid_request_handler.is_some());
        assert!(chars.initialize_handler_ex.is_some() && chars.halt_handler_ex.is_some());
        assert!(chars.send_net_buffer_lists_handler.is_some());
        assert!(chars.return_net_buffer_lists_handler.is_some());
        assert_eq!(chars.flags, 0);
    }

    #[test]
    fn test_provider_characteristics_header_and_handlers_rule_a10() {
        let chars = attributes::provider_characteristics(open_ndk, close_ndk);
        assert_eq!(chars.header.type_, 0xB2);
        assert_eq!(chars.header.revision, 1);
        assert_eq!(chars.header.size, 0x18);
        assert_eq!(chars.flags, 0);
        let open: OpenNdkAdapterHandler = open_ndk;
        let close: CloseNdkAdapterHandler = close_ndk;
        assert!(core::ptr::fn_addr_eq(chars.open_ndk_adapter_handler, open));
        assert!(core::ptr::fn_addr_eq(
            chars.close_ndk_adapter_handler,
            close
        ));
    }

    #[test]
    fn test_ndk_attributes_carry_state_and_capabilities_rule_a11() {
        let mut caps = attributes::ndk_capabilities(
            &crate::rnic::Limits::DEFAULT,
            core::ptr::null_mut(),
            true,
            CounterMask::empty(),
        );
        for enabled in [true, false] {
            let attrs = attributes::ndk_attributes(enabled, &raw mut caps);
            assert_eq!(attrs.header.type_, 0xB3);
            assert_eq!(attrs.header.revision, 1);
            assert_eq!(attrs.header.size, 0x10);
            assert_eq!(attrs.enabled, u8::from(enabled), "set even while disabled");
            assert_eq!(attrs.padding_05, [0; 3]);
            assert_eq!(attrs.ndk_capabilities, &raw mut caps);
        }
        // The adapter's initial state is what the attributes report.
        let (on, _) = adapter_with(true);
        let (off, _) = adapter_with(false);
        assert!(on.ndk().is_enabled());
        assert!(!off.ndk().is_enabled());
    }

    #[test]
    fn test_ndk_capabilities_fields_rule_a12() {
        let limits = crate::rnic::Limits::DEFAULT;
        let mut blocks = alloc::boxed::Box::new(attributes::NdisBlocks::empty());
        let fake = FakeProvider::default();
        blocks.fill(&limits, fake.adapter_info(), CounterMask::RDMA_IN_FRAMES);
        let caps = blocks.ndk_capabilities;
        assert_eq!(caps.header.type_, 0x80);
        assert_eq!(caps.header.revision, 1);
        assert_eq!(caps.header.size, 0x38);
        assert_eq!(caps.flags, 0);
        assert_eq!(caps.max_qp_count, limits.max_qp_count);
        assert_eq!(caps.max_cq_count, limits.max_cq_count);
        assert_eq!(caps.max_mr_count, limits.max_mr_count);
        assert_eq!(caps.max_pd_count, limits.max_pd_count);
        assert_eq!(caps.max_mw_count, limits.max_mw_count);
        assert_eq!(caps.max_srq_count, limits.max_srq_count);
        assert_eq!(caps.max_inbound_read_limit, 0, "no adapter-wide limit");
        assert_eq!(caps.max_outbound_read_limit, 0);
        assert_eq!(
            caps.missing_counter_mask,
            CounterMask::RDMA_IN_FRAMES.bits()
        );
        assert_eq!(caps.ndk_info, &raw mut blocks.ndk_info);
        // SAFETY: `ndk_info` points into `blocks`, alive here.
        let info = unsafe { *caps.ndk_info };
        assert_eq!(info, fake.adapter_info());
        // No SRQ (depth 0): MaxSrqCount 0.
        let no_srq = attributes::ndk_capabilities(
            &limits,
            core::ptr::null_mut(),
            false,
            CounterMask::empty(),
        );
        assert_eq!(no_srq.max_srq_count, 0);
    }

    #[test]
    fn test_capabilities_are_the_enforced_limits_rule_a8() {
        let (adapter, _fake) = adapter_with(true);
        let limits = *adapter.device().limits();
        let info =
            super::super::ndk::DeviceOnlyProvider::new(Arc::clone(adapter.device())).adapter_info();
        assert_eq!(info.max_cq_depth, limits.max_cq_depth);
        assert_eq!(info.max_receive_queue_depth, limits.max_receive_queue_depth);
        assert_eq!(
            info.max_initiator_queue_depth,
            limits.max_initiator_queue_depth
        );
        assert_eq!(info.max_transfer_length, limits.max_transfer_length);
        assert_eq!(info.rdma_technology, super::super::config::RDMA_TECHNOLOGY);
        assert_eq!(info.rdma_technology, NdkRdmaTechnology::IWARP);
        // The wire's private data (MPA, N17), not the device's RoCE sizes.
        assert_eq!(
            info.max_caller_data as usize,
            crate::rnic::cm::MAX_WIRE_PRIVATE_DATA
        );
        assert_eq!(
            info.max_callee_data as usize,
            crate::rnic::cm::MAX_WIRE_PRIVATE_DATA
        );
        assert_eq!(
            info.adapter_flags, 0,
            "the placeholder claims no optional feature"
        );
        let caps = attributes::ndk_capabilities(
            &limits,
            core::ptr::null_mut(),
            true,
            CounterMask::empty(),
        );
        assert_eq!(caps.max_qp_count, limits.max_qp_count);
    }

    #[test]
    fn test_general_attributes_virtual_ethernet_link_up() {
        let (adapter, _fake) = adapter_with(true);
        let pm = attributes::pm_capabilities();
        let attrs = attributes::general_attributes(
            adapter.config(),
            &adapter.permanent_mac(),
            &SUPPORTED_OIDS,
            &raw const pm,
        );
        assert_eq!(attrs.header.type_, 0x9F);
        assert_eq!(attrs.header.revision, 2);
        assert_eq!(attrs.header.size, 0xE0);
        assert_eq!(attrs.media_type, NdisMedium::MEDIUM_802_3);
        assert_eq!(attrs.physical_medium_type.0, 14);
        assert_eq!(attrs.if_type, 6);
        assert_eq!(attrs.if_connector_present, FALSE);
        assert_eq!(attrs.media_connect_state, NdisMediaConnectState::CONNECTED);
        assert_eq!(attrs.mtu_size, 1500);
        assert_eq!(attrs.mac_address_length, 6);
        assert_eq!(&attrs.current_mac_address[..6], &adapter.config().mac);
        assert_eq!(attrs.current_mac_address[6..], [0; 26]);
        assert_eq!(
            attrs.supported_oid_list_length as usize,
            SUPPORTED_OIDS.len() * 4
        );
        assert_eq!(attrs.power_management_capabilities_ex, &raw const pm);
        assert_eq!(pm.header.size, 0x3C);
        assert_eq!(
            pm.min_magic_packet_wake_up,
            NdisDevicePowerState::UNSPECIFIED
        );
        let reg = attributes::registration_attributes(core::ptr::null_mut());
        assert_eq!(
            (reg.header.type_, reg.header.revision, reg.header.size),
            (0x9E, 2, 0x1C)
        );
        assert_eq!(reg.interface_type, NdisInterfaceType::INTERNAL);
    }
}

mod oids {
    use super::*;

    /// A buffer valid for a set of `oid`.
    fn set_buffer(oid: NdisOid) -> alloc::vec::Vec<u8> {
        match oid {
            OID_NDK_SET_STATE => alloc::vec![1],
            OID_802_3_MULTICAST_LIST => alloc::vec![0x01, 0, 0x5E, 0, 0, 1],
            OID_GEN_CURRENT_LOOKAHEAD => 100_u32.to_le_bytes().to_vec(),
            _ => alloc::vec![0; 4],
        }
    }

    #[test]
    fn test_every_supported_oid_is_answered_rule_a9() {
        let (adapter, _fake) = adapter_with(true);
        for &oid in &SUPPORTED_OIDS {
            let outcome = if SET_ONLY_OIDS.contains(&oid) {
                set(&adapter, oid, &set_buffer(oid))
            } else {
                // Room for OID_SOFTNDK_CHECKED's answer with every report
                // kept (other tests of this process make some).
                let mut buffer = alloc::vec![0_u8; 16 * 1024];
                query(&adapter, oid, &mut buffer)
            };
            assert_eq!(outcome.status, NDIS_STATUS_SUCCESS, "OID {oid:#010x}");
            assert_ne!(outcome.status, NDIS_STATUS_PENDING);
        }
        for oid in [
            OID_NDK_SET_STATE,
            OID_NDK_STATISTICS,
            OID_NDK_CONNECTIONS,
            OID_NDK_LOCAL_ENDPOINTS,
        ] {
            assert!(SUPPORTED_OIDS.contains(&oid), "NDK OID {oid:#010x} listed");
        }
        let mut list = [0_u8; 4096];
        let outcome = query(&adapter, OID_GEN_SUPPORTED_LIST, &mut list);
        assert_eq!(outcome.bytes_done as usize, SUPPORTED_OIDS.len() * 4);
        assert_eq!(u32_at(&list, 0), OID_GEN_SUPPORTED_LIST);
    }

    #[test]
    fn test_unknown_oids_and_methods_not_supported() {
        let (adapter, _fake) = adapter_with(true);
        let mut buffer = [0_u8; 8];
        assert_eq!(
            query(&adapter, 0x0ABC_DEF0, &mut buffer).status,
            NDIS_STATUS_NOT_SUPPORTED
        );
        assert_eq!(
            oid::handle(
                &adapter,
                OidRequest::Other {
                    oid: OID_GEN_STATISTICS
                }
            )
            .status,
            NDIS_STATUS_NOT_SUPPORTED
        );
        // A query of a set-only OID.
        assert_eq!(
            query(&adapter, OID_NDK_SET_STATE, &mut buffer).status,
            NDIS_STATUS_NOT_SUPPORTED
        );
    }

    #[test]
    fn test_short_query_buffer_reports_bytes_needed() {
        let (adapter, _fake) = adapter_with(true);
        let mut two = [0_u8; 2];
        let outcome = query(&adapter, OID_802_3_CURRENT_ADDRESS, &mut two);
        assert_eq!(outcome.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        assert_eq!(outcome.bytes_needed, 6);
        let outcome = query(&adapter, OID_GEN_STATISTICS, &mut []);
        assert_eq!(outcome.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        assert_eq!(outcome.bytes_needed, 0x98);
        // 64-bit counters accept four bytes and still ask for eight.
        let mut four = [0_u8; 4];
        let outcome = query(&adapter, OID_GEN_XMIT_OK, &mut four);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert_eq!((outcome.bytes_done, outcome.bytes_needed), (4, 8));
    }

    #[test]
    fn test_set_packet_filter_lookahead_and_multicast() {
        let (adapter, _fake) = adapter_with(true);
        assert_eq!(
            set(&adapter, OID_GEN_CURRENT_PACKET_FILTER, &[1, 0]).status,
            NDIS_STATUS_INVALID_LENGTH
        );
        let outcome = set(
            &adapter,
            OID_GEN_CURRENT_PACKET_FILTER,
            &0x0B_u32.to_le_bytes(),
        );
        assert_eq!(
            (outcome.status, outcome.bytes_done),
            (NDIS_STATUS_SUCCESS, 4)
        );
        let mut buffer = [0_u8; 4];
        query(&adapter, OID_GEN_CURRENT_PACKET_FILTER, &mut buffer);
        assert_eq!(u32::from_le_bytes(buffer), 0x0B);
        assert_eq!(
            set(&adapter, OID_GEN_CURRENT_LOOKAHEAD, &9000_u32.to_le_bytes()).status,
            NDIS_STATUS_INVALID_DATA,
            "above the MTU"
        );
        assert_eq!(
            set(&adapter, OID_802_3_MULTICAST_LIST, &[1; 7]).status,
            NDIS_STATUS_INVALID_LENGTH
        );
        assert_eq!(
            set(&adapter, OID_802_3_MULTICAST_LIST, &[1; 6 * 33]).status,
            NDIS_STATUS_MULTICAST_FULL
        );
        let list = [0x01, 0, 0x5E, 0, 0, 1, 0x01, 0, 0x5E, 0, 0, 2];
        assert_eq!(
            set(&adapter, OID_802_3_MULTICAST_LIST, &list).status,
            NDIS_STATUS_SUCCESS
        );
        let mut out = [0_u8; 64];
        let outcome = query(&adapter, OID_802_3_MULTICAST_LIST, &mut out);
        assert_eq!(&out[..outcome.bytes_done as usize], &list);
    }

    #[test]
    fn test_gen_statistics_count_sent_frames_by_kind() {
        let (adapter, _fake) = adapter_with(true);
        assert_eq!(FrameKind::of(&[0xFF; 6]), FrameKind::Broadcast);
        assert_eq!(
            FrameKind::of(&[0x01, 0, 0x5E, 0, 0, 1]),
            FrameKind::Multicast
        );
        assert_eq!(FrameKind::of(&[0x02, 0, 0, 0, 0, 1]), FrameKind::Unicast);
        adapter.account_sent(FrameKind::Unicast, 100);
        adapter.account_sent(FrameKind::Broadcast, 60);
        adapter.account_sent(FrameKind::Unicast, 1514);
        let mut buffer = [0xAA_u8; 0x98];
        let outcome = query(&adapter, OID_GEN_STATISTICS, &mut buffer);
        assert_eq!(outcome.bytes_done, 0x98);
        assert_eq!((buffer[0], buffer[1], u16_at(&buffer, 2)), (0x80, 1, 0x98));
        assert_eq!(
            u64_at(
                &buffer,
                offset_of!(NdisStatisticsInfo, if_hc_out_ucast_pkts)
            ),
            2
        );
        assert_eq!(
            u64_at(
                &buffer,
                offset_of!(NdisStatisticsInfo, if_hc_out_broadcast_pkts)
            ),
            1
        );
        assert_eq!(
            u64_at(&buffer, offset_of!(NdisStatisticsInfo, if_hc_out_octets)),
            1674
        );
        assert_eq!(
            u64_at(&buffer, offset_of!(NdisStatisticsInfo, if_hc_in_octets)),
            0
        );
        let mut ok = [0_u8; 8];
        query(&adapter, OID_GEN_XMIT_OK, &mut ok);
        assert_eq!(u64::from_le_bytes(ok), 3);
    }

    #[test]
    fn test_sends_refused_while_paused() {
        let (adapter, _fake) = adapter_with(true);
        assert_eq!(
            adapter.send_status(),
            NDIS_STATUS_PAUSED,
            "paused until restarted"
        );
        adapter.restart();
        assert_eq!(adapter.send_status(), NDIS_STATUS_SUCCESS);
        adapter.pause();
        assert_eq!(adapter.send_status(), NDIS_STATUS_PAUSED);
    }
}

mod ndis_request {
    use super::*;

    fn request(request_type: NdisRequestType, data: NdisOidRequestData) -> NdisOidRequest {
        NdisOidRequest {
            header: NdisObjectHeader {
                type_: NDIS_OBJECT_TYPE_OID_REQUEST,
                revision: 1,
                size: 0xEC,
            },
            request_type,
            port_number: 0,
            timeout: 0,
            request_id: core::ptr::null_mut(),
            request_handle: core::ptr::null_mut(),
            data,
            ndis_reserved: [0; 0x80],
            miniport_reserved: [0; 0x10],
            source_reserved: [0; 0x10],
            supported_revision: 0,
            reserved1: 0,
            reserved2: 0,
        }
    }

    fn query_data(oid: NdisOid, buffer: &mut [u8]) -> NdisOidRequestData {
        let len = u32::try_from(buffer.len()).unwrap();
        query_at(oid, buffer.as_mut_ptr().cast(), len)
    }

    /// A query of `oid` into `len` bytes at `buffer`, whatever it points at.
    fn query_at(oid: NdisOid, buffer: *mut core::ffi::c_void, len: u32) -> NdisOidRequestData {
        NdisOidRequestData {
            query_information: NdisOidQuery {
                oid,
                padding_04: 0,
                information_buffer: buffer,
                information_buffer_length: len,
                bytes_written: 0xAAAA,
                bytes_needed: 0xAAAA,
                padding_1c: 0,
            },
        }
    }

    /// Hands NDIS's handler (`direct` or not) a request of `request_type`
    /// querying `oid` into `buffer`; returns the outcome and the query as
    /// the handler left it.
    fn query_request(
        adapter: &Adapter,
        request_type: NdisRequestType,
        oid: NdisOid,
        buffer: &mut [u8],
        direct: bool,
    ) -> (OidOutcome, NdisOidQuery) {
        let mut req = request(request_type, query_data(oid, buffer));
        // SAFETY: a valid request over `buffer`, live for the call.
        let outcome = unsafe { oid::handle_ndis_request(adapter, &raw mut req, direct) };
        // SAFETY: a query: QUERY_INFORMATION is the member written.
        (outcome, unsafe { req.data.query_information })
    }

    #[test]
    fn test_query_request_parsed_and_byte_counts_stored() {
        let (adapter, _fake) = adapter_with(true);
        let mut buffer = [0_u8; 16];
        let (info, stats) = (
            NdisRequestType::QUERY_INFORMATION,
            NdisRequestType::QUERY_STATISTICS,
        );
        // The second too short: BytesNeeded is stored.
        for (request_type, oid, len, status, counts) in [
            (
                info,
                OID_802_3_CURRENT_ADDRESS,
                16,
                NDIS_STATUS_SUCCESS,
                (6, 0),
            ),
            (
                stats,
                OID_NDK_STATISTICS,
                2,
                NDIS_STATUS_BUFFER_TOO_SHORT,
                (0, 0xF8),
            ),
        ] {
            let (outcome, query) =
                query_request(&adapter, request_type, oid, &mut buffer[..len], false);
            assert_eq!(outcome.status, status, "{oid:#x}");
            assert_eq!((query.bytes_written, query.bytes_needed), counts);
        }
        assert_eq!(&buffer[..6], &adapter.config().mac);
    }

    #[test]
    fn test_set_request_parsed_and_queues_ndk_work_rule_a13() {
        let (adapter, _fake) = adapter_with(true);
        let mut value = [FALSE];
        let mut req = request(
            NdisRequestType::SET_INFORMATION,
            NdisOidRequestData {
                set_information: NdisOidSet {
                    oid: OID_NDK_SET_STATE,
                    padding_04: 0,
                    information_buffer: value.as_mut_ptr().cast(),
                    information_buffer_length: 1,
                    bytes_read: 0,
                    bytes_needed: 0,
                    padding_1c: 0,
                },
            },
        );
        // SAFETY: a valid request over a live buffer.
        let outcome = unsafe { oid::handle_ndis_request(&adapter, &raw mut req, false) };
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert!(outcome.queue_ndk_work);
        // SAFETY: a set: SET_INFORMATION is the member written.
        assert_eq!(unsafe { req.data.set_information }.bytes_read, 1);
        assert!(!adapter.ndk().is_enabled());
    }

    #[test]
    fn test_null_buffer_method_and_null_request_handled() {
        let (adapter, _fake) = adapter_with(true);
        let mut req = request(
            NdisRequestType::QUERY_INFORMATION,
            query_at(OID_GEN_VENDOR_ID, core::ptr::null_mut(), 4),
        );
        // SAFETY: a valid request; the null buffer is never dereferenced.
        let outcome = unsafe { oid::handle_ndis_request(&adapter, &raw mut req, false) };
        assert_eq!(outcome.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        assert_eq!(outcome.bytes_needed, 4);
        let mut buffer = [0_u8; 8];
        let (outcome, _) = query_request(
            &adapter,
            NdisRequestType::METHOD,
            OID_GEN_VENDOR_ID,
            &mut buffer,
            false,
        );
        assert_eq!(outcome.status, NDIS_STATUS_NOT_SUPPORTED);
        // SAFETY: null is allowed.
        let outcome = unsafe { oid::handle_ndis_request(&adapter, core::ptr::null_mut(), false) };
        assert_eq!(outcome.status, NDIS_STATUS_INVALID_DATA);
    }

    #[test]
    fn test_direct_request_serves_ndk_statistics_only_rule_a16() {
        let (adapter, _fake) = adapter_with(true);
        let mut buffer = [0_u8; 0xF8];
        for (oid, status) in [
            (OID_NDK_STATISTICS, NDIS_STATUS_SUCCESS),
            (OID_GEN_VENDOR_ID, NDIS_STATUS_NOT_SUPPORTED),
        ] {
            let (outcome, _) = query_request(
                &adapter,
                NdisRequestType::QUERY_INFORMATION,
                oid,
                &mut buffer,
                true,
            );
            assert_eq!(outcome.status, status, "{oid:#x}");
        }
    }
}

mod ndk_state {
    use super::*;

    #[test]
    fn test_set_state_is_one_byte_set_and_never_pends_rule_a13() {
        let (adapter, _fake) = adapter_with(true);
        let outcome = set(&adapter, OID_NDK_SET_STATE, &[]);
        assert_eq!(outcome.status, NDIS_STATUS_INVALID_LENGTH);
        assert_eq!(outcome.bytes_needed, 1);
        let outcome = disable(&adapter);
        assert_eq!(
            (outcome.status, outcome.bytes_done),
            (NDIS_STATUS_SUCCESS, 1)
        );
        assert!(
            !adapter.ndk().is_enabled(),
            "disabled at once, before any event"
        );
        // Any nonzero byte is TRUE.
        let outcome = set(&adapter, OID_NDK_SET_STATE, &[0x7F]);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert!(adapter.ndk().is_enabled());
        // Setting the current state again changes nothing.
        assert!(!enable(&adapter).queue_ndk_work);
    }

    #[test]
    fn test_set_state_true_needs_network_direct_rule_a13() {
        let (adapter, _fake) = adapter_with(false);
        let outcome = enable(&adapter);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert!(!outcome.queue_ndk_work);
        assert!(
            !adapter.ndk().is_enabled(),
            "*NetworkDirect 0 keeps NDK off"
        );
    }

    #[test]
    fn test_state_change_announced_from_work_item_not_oid_rule_a14() {
        let (adapter, _fake) = adapter_with(true);
        // The OID handler only asks for the work item; it has no way to send a
        // PnP event (oid::handle takes no announcer).
        let outcome = disable(&adapter);
        assert!(outcome.queue_ndk_work);
        assert!(!adapter.ndk().worker_idle(), "work item queued");
        // A second change while queued does not queue it twice.
        assert!(!enable(&adapter).queue_ndk_work);
        assert!(!disable(&adapter).queue_ndk_work);
        let events = run_work(&adapter, &mut |_| {});
        assert_eq!(events, [NdkEvent::Disable]);
        assert!(adapter.ndk().worker_idle());
        assert!(enable(&adapter).queue_ndk_work);
        assert_eq!(run_work(&adapter, &mut |_| {}), [NdkEvent::Enable]);
    }

    #[test]
    fn test_toggles_before_work_item_runs_coalesce_rule_a14() {
        let (adapter, _fake) = adapter_with(true);
        assert!(disable(&adapter).queue_ndk_work);
        enable(&adapter);
        assert!(
            run_work(&adapter, &mut |_| {}).is_empty(),
            "NDIS already knows"
        );
    }

    #[test]
    fn test_change_during_announcement_is_announced_next_rule_a14() {
        let (adapter, _fake) = adapter_with(true);
        assert!(disable(&adapter).queue_ndk_work);
        let mut toggled = false;
        let events = run_work(&adapter, &mut |event| {
            if !toggled {
                toggled = true;
                assert_eq!(event, NdkEvent::Disable);
                // NDIS re-enables while the disable is pending: no second
                // work item, the running one loops.
                assert!(!enable(&adapter).queue_ndk_work);
            }
        });
        assert_eq!(events, [NdkEvent::Disable, NdkEvent::Enable]);
    }

    #[test]
    fn test_adapter_failure_announced_same_way_rule_a14() {
        let (adapter, _fake) = adapter_with(true);
        let transition = adapter.ndk().fail();
        assert!(transition.queue_work);
        assert!(!adapter.ndk().is_enabled());
        assert_eq!(run_work(&adapter, &mut |_| {}), [NdkEvent::Disable]);
    }

    #[test]
    fn test_failed_enable_leaves_ndk_disabled() {
        let (adapter, _fake) = adapter_with(true);
        disable(&adapter);
        run_work(&adapter, &mut |_| {});
        assert!(enable(&adapter).queue_ndk_work);
        adapter
            .ndk()
            .run_announcements(adapter.provider(), &mut |_| NDIS_STATUS_FAILURE);
        assert!(!adapter.ndk().is_enabled());
        assert!(adapter.ndk().worker_idle());
    }

    #[test]
    fn test_disable_closes_adapters_while_event_pending_rule_a15() {
        let (adapter, fake) = adapter_with(true);
        let opened: alloc::vec::Vec<NonNull<NdkAdapter>> = (0..3)
            .map(|_| adapter.open_ndk_adapter(version(1, 2)).unwrap())
            .collect();
        disable(&adapter);
        let events = run_work(&adapter, &mut |event| {
            // NDIS holds NetEventNDKDisable pending and closes every adapter;
            // each close completes without waiting for the event.
            if event == NdkEvent::Disable {
                for &ndk in &opened {
                    adapter.close_ndk_adapter(ndk);
                }
                assert_eq!(adapter.ndk().open_adapters(), 0);
            }
        });
        assert_eq!(events, [NdkEvent::Disable]);
        let state = fake.state.lock();
        assert_eq!(state.closed, 3);
        assert_eq!(state.close_all_calls, 1, "teardown after the event");
        assert_eq!(state.torn_down, 0, "nothing was left");
    }

    #[test]
    fn test_disable_tears_down_leftovers_rule_a15() {
        let (adapter, fake) = adapter_with(true);
        adapter.open_ndk_adapter(version(1, 2)).unwrap();
        adapter.open_ndk_adapter(version(1, 2)).unwrap();
        disable(&adapter);
        run_work(&adapter, &mut |_| {});
        let state = fake.state.lock();
        assert_eq!(
            state.torn_down, 2,
            "close_all tore down what NDIS left open"
        );
        assert!(state.open.is_empty());
    }

    #[test]
    fn test_halt_stops_announcements_and_tears_down() {
        let (adapter, fake) = adapter_with(true);
        adapter.open_ndk_adapter(version(1, 2)).unwrap();
        assert!(disable(&adapter).queue_ndk_work);
        assert!(!adapter.begin_halt(), "the queued work item has not run");
        assert!(
            run_work(&adapter, &mut |_| {}).is_empty(),
            "nothing announced after halt"
        );
        assert!(adapter.ndk().worker_idle());
        adapter.finish_halt();
        assert_eq!(fake.state.lock().torn_down, 1);
        assert_eq!(refused(&adapter, 1, 2), Some(NDIS_STATUS_ADAPTER_NOT_READY));
        assert!(!enable(&adapter).queue_ndk_work);
    }
}

mod ndk_oids {
    use super::*;

    fn counters() -> NdisNdkPerformanceCounters {
        NdisNdkPerformanceCounters {
            connect: 1,
            accept: 2,
            connect_failure: 3,
            connection_error: 4,
            active_connection: 5,
            reserved01: 0xDEAD,
            reserved20: 0xBEEF,
            cq_error: 6,
            rdma_in_octets: 7,
            rdma_out_octets: 8,
            rdma_in_frames: 9,
            rdma_out_frames: 10,
            ..NdisNdkPerformanceCounters::default()
        }
    }

    /// Queries the NDK structure `oid` (A16): into `short` bytes it is
    /// refused with the `len` it needs; into a large buffer of 0xAA it
    /// writes `len` bytes that start with the NDIS object header (type
    /// 0x80, revision 1, size `len`) and zero flags. Returns that buffer.
    #[track_caller]
    fn expect_ndk_structure(
        adapter: &Adapter,
        oid: NdisOid,
        short: usize,
        len: u16,
    ) -> [u8; 0x200] {
        let outcome = query(adapter, oid, &mut alloc::vec![0; short]);
        assert_eq!(outcome.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        assert_eq!(outcome.bytes_needed, u32::from(len));
        let mut buffer = [0xAA_u8; 0x200];
        let outcome = query(adapter, oid, &mut buffer);
        assert_eq!(
            (outcome.status, outcome.bytes_done),
            (NDIS_STATUS_SUCCESS, u32::from(len))
        );
        assert_eq!((buffer[0], buffer[1], u16_at(&buffer, 2)), (0x80, 1, len));
        assert_eq!(u32_at(&buffer, 4), 0, "Flags");
        buffer
    }

    #[test]
    fn test_ndk_statistics_layout_and_counters_rule_a16() {
        let (adapter, fake) = adapter_with(true);
        fake.state.lock().counters = counters();
        let buffer = expect_ndk_structure(&adapter, OID_NDK_STATISTICS, 0xF7, 0xF8);
        for (field, value) in [
            (offset_of!(NdisNdkPerformanceCounters, connect), 1),
            (offset_of!(NdisNdkPerformanceCounters, active_connection), 5),
            (offset_of!(NdisNdkPerformanceCounters, cq_error), 6),
            (offset_of!(NdisNdkPerformanceCounters, rdma_out_frames), 10),
        ] {
            assert_eq!(u64_at(&buffer, 8 + field), value, "at {field:#x}");
        }
        assert_eq!(buffer[0xF8], 0xAA, "nothing written past the structure");
    }

    #[test]
    fn test_ndk_statistics_on_direct_path_rule_a16() {
        let (adapter, fake) = adapter_with(true);
        fake.state.lock().counters = counters();
        let mut buffer = [0_u8; 0xF8];
        let outcome = direct_query(&adapter, OID_NDK_STATISTICS, &mut buffer);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert_eq!(u64_at(&buffer, 8), 1);
        let mut other = [0_u8; 64];
        let outcome = direct_query(&adapter, OID_GEN_STATISTICS, &mut other);
        assert_eq!(
            outcome.status, NDIS_STATUS_NOT_SUPPORTED,
            "only the NDK statistics"
        );
    }

    #[test]
    fn test_reserved_counters_zero_and_missing_mask_rule_a17() {
        let (adapter, fake) = adapter_with(true);
        fake.state.lock().counters = counters();
        let mut buffer = [0xAA_u8; 0xF8];
        query(&adapter, OID_NDK_STATISTICS, &mut buffer);
        let first = 8 + offset_of!(NdisNdkPerformanceCounters, reserved01);
        let last = 8 + offset_of!(NdisNdkPerformanceCounters, reserved20) + 8;
        assert!(
            buffer[first..last].iter().all(|&b| b == 0),
            "Reserved01..20 are 0"
        );
        // The provider's missing counters become MissingCounterMask.
        assert_eq!(adapter.provider().missing_counters(), CounterMask::empty());
        let caps = attributes::ndk_capabilities(
            adapter.device().limits(),
            core::ptr::null_mut(),
            true,
            adapter.provider().missing_counters(),
        );
        assert_eq!(caps.missing_counter_mask, 0, "the RNIC keeps every counter");
    }

    fn v4(a: u8, port: u16) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, a), port))
    }

    #[test]
    fn test_ndk_connections_serialised_rule_a19() {
        let (adapter, fake) = adapter_with(true);
        let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0x1234, 0, 7));
        fake.state.lock().connections = alloc::vec![
            Connection {
                local: v4(1, 445),
                remote: v4(2, 50000),
                user_mode_owner: false,
                owner_pid: 0,
            },
            Connection {
                local: v6,
                remote: v6,
                user_mode_owner: true,
                owner_pid: 42,
            },
        ];
        // A header, then two entries.
        let buffer = expect_ndk_structure(&adapter, OID_NDK_CONNECTIONS, 0, 0x10 + 2 * 0x40);
        assert_eq!(u32_at(&buffer, 8), 2, "Count");
        assert_eq!(
            buffer[0x0C], TRUE,
            "iWARP (SoftNDK's technology) maps onto TCP"
        );
        assert_eq!(&buffer[0x0D..0x10], &[0; 3]);
        let e0 = 0x10;
        assert_eq!(u16_at(&buffer, e0), AF_INET);
        assert_eq!(&buffer[e0 + 2..e0 + 4], &445_u16.to_be_bytes());
        assert_eq!(&buffer[e0 + 4..e0 + 8], &[10, 0, 0, 1]);
        assert!(
            buffer[e0 + 8..e0 + 0x1C].iter().all(|&b| b == 0),
            "zero tail"
        );
        assert_eq!(u16_at(&buffer, e0 + 0x1C), AF_INET);
        assert_eq!(
            buffer[e0 + 0x38],
            FALSE,
            "kernel connection: UserModeOwner FALSE"
        );
        let e1 = 0x50;
        assert_eq!(u16_at(&buffer, e1), AF_INET6);
        assert_eq!(&buffer[e1 + 8..e1 + 0x18], &Ipv6Addr::LOCALHOST.octets());
        assert_eq!(u32_at(&buffer, e1 + 0x18), 7, "scope id");
        assert_eq!(buffer[e1 + 0x38], TRUE);
        assert_eq!(u32_at(&buffer, e1 + 0x3C), 42);
        assert_eq!(buffer[0x90], 0xAA);
    }

    #[test]
    fn test_ndk_connections_empty_and_header_size_clamped_rule_a19() {
        let (adapter, fake) = adapter_with(true);
        let mut buffer = [0xAA_u8; 0x10];
        let outcome = query(&adapter, OID_NDK_CONNECTIONS, &mut buffer);
        assert_eq!(
            (outcome.status, outcome.bytes_done),
            (NDIS_STATUS_SUCCESS, 0x10)
        );
        assert_eq!(u16_at(&buffer, 2), 0x10);
        assert_eq!(u32_at(&buffer, 8), 0);
        // 0x10 + 0x40 × 1100 > 0xFFFF: the header size is clamped.
        fake.state.lock().connections = alloc::vec![
            Connection {
                local: v4(1, 1),
                remote: v4(2, 2),
                user_mode_owner: false,
                owner_pid: 0,
            };
            1100
        ];
        let mut big = alloc::vec![0_u8; 0x10 + 0x40 * 1100];
        let outcome = query(&adapter, OID_NDK_CONNECTIONS, &mut big);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert_eq!(u16_at(&big, 2), 0xFFFF);
        assert_eq!(u32_at(&big, 8), 1100);
    }

    #[test]
    fn test_ndk_local_endpoints_listener_flag_rule_a20() {
        let (adapter, fake) = adapter_with(true);
        fake.state.lock().endpoints = alloc::vec![
            LocalEndpoint {
                local: v4(1, 445),
                user_mode_owner: false,
                listener: true,
                owner_pid: 0,
            },
            LocalEndpoint {
                local: v4(1, 49152),
                user_mode_owner: false,
                listener: false,
                owner_pid: 0,
            },
        ];
        let mut buffer = [0xAA_u8; 0x100];
        let outcome = query(&adapter, OID_NDK_LOCAL_ENDPOINTS, &mut buffer);
        assert_eq!(
            (outcome.status, outcome.bytes_done),
            (NDIS_STATUS_SUCCESS, 0x10 + 2 * 0x24)
        );
        assert_eq!(u16_at(&buffer, 2), 0x58);
        assert_eq!(u32_at(&buffer, 8), 2);
        assert_eq!(buffer[0x10 + 0x1D], TRUE, "first is a listener");
        assert_eq!(
            buffer[0x10 + 0x24 + 0x1D],
            FALSE,
            "second is a shared endpoint"
        );
        assert_eq!(&buffer[0x10 + 0x1E..0x10 + 0x20], &[0, 0], "padding zeroed");
        let mut short = [0_u8; 0x30];
        let outcome = query(&adapter, OID_NDK_LOCAL_ENDPOINTS, &mut short);
        assert_eq!(outcome.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        assert_eq!(outcome.bytes_needed, 0x58);
    }

    #[test]
    fn test_connections_tcp_mapping_flag_follows_technology_rule_a21() {
        assert!(!oid::maps_to_tcp(NdkRdmaTechnology::ROCE_V2));
        assert!(!oid::maps_to_tcp(NdkRdmaTechnology::INFINIBAND));
        assert!(oid::maps_to_tcp(NdkRdmaTechnology::IWARP));
        let (adapter, fake) = adapter_with(true);
        {
            let mut state = fake.state.lock();
            state.technology = Some(NdkRdmaTechnology::IWARP);
            // An iWARP provider reports pairs: ND entry, then its TCP entry.
            state.connections = alloc::vec![
                Connection {
                    local: v4(1, 7),
                    remote: v4(2, 8),
                    user_mode_owner: true,
                    owner_pid: 9,
                },
                Connection {
                    local: v4(1, 445),
                    remote: v4(2, 50000),
                    user_mode_owner: false,
                    owner_pid: 0,
                },
            ];
            state.endpoints = alloc::vec![LocalEndpoint {
                local: v4(1, 7),
                user_mode_owner: false,
                listener: true,
                owner_pid: 0,
            }];
        }
        let mut buffer = [0_u8; 0x100];
        query(&adapter, OID_NDK_CONNECTIONS, &mut buffer);
        assert_eq!(buffer[0x0C], TRUE, "NDConnectionsMappedtoTCPConnections");
        assert_eq!(
            &buffer[0x12..0x14],
            &7_u16.to_be_bytes(),
            "even index: ND entry"
        );
        assert_eq!(
            &buffer[0x52..0x54],
            &445_u16.to_be_bytes(),
            "odd index: TCP entry"
        );
        query(&adapter, OID_NDK_LOCAL_ENDPOINTS, &mut buffer);
        assert_eq!(
            buffer[0x0C], TRUE,
            "NDLocalEndpointsMappedtoTCPLocalEndpoints"
        );
        // A fabric adapter (RoCE v2, provider::iface::FABRIC_TECHNOLOGY):
        // FALSE.
        let (roce, roce_fake) = adapter_with(true);
        roce_fake.state.lock().technology = Some(NdkRdmaTechnology::ROCE_V2);
        query(&roce, OID_NDK_LOCAL_ENDPOINTS, &mut buffer);
        assert_eq!(buffer[0x0C], FALSE);
        query(&roce, OID_NDK_CONNECTIONS, &mut buffer);
        assert_eq!(buffer[0x0C], FALSE);
    }
}

/// `OID_SOFTNDK_CHECKED`: checked mode's counters and kept reports, read
/// the way a tool on Windows reads them (a query OID on the ordinary path).
mod checked_query {
    use super::*;
    use crate::provider::checked::{self, Breach};
    use crate::provider::object::Slot;

    /// The NUL-terminated string at `at`, at most `len` bytes.
    fn c_str(buf: &[u8], at: usize, len: usize) -> &str {
        let field = &buf[at..at + len];
        let end = field.iter().position(|&b| b == 0).unwrap_or(len);
        core::str::from_utf8(&field[..end]).unwrap()
    }

    #[test]
    fn test_checked_query_returns_counters_and_reports_in_the_documented_layout() {
        let (adapter, _fake) = adapter_with(true);
        // A report of the test's own, on an object address no provider
        // object has (other tests of this process may report too).
        let object = 0x5EED_0000_0000_0040_usize;
        checked::report_detail(
            Breach::M33,
            NdkObjectType::QP,
            object,
            &Slot("NdkSend"),
            checked::slot_ptr(&Slot("a privileged-token SGE")),
            0xABC0_0000,
        );
        let short = query(&adapter, OID_SOFTNDK_CHECKED, &mut [0_u8; 8]);
        assert_eq!(short.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        let needed = short.bytes_needed as usize;
        assert!(needed >= SOFTNDK_CHECKED_HEADER_SIZE + 10 * SOFTNDK_CHECKED_COUNT_SIZE);
        let mut buf = alloc::vec![0_u8; 16 * 1024];
        let outcome = query(&adapter, OID_SOFTNDK_CHECKED, &mut buf);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        let size = u32_at(&buf, 0x04) as usize;
        assert_eq!(outcome.bytes_done as usize, size);
        assert_eq!(u32_at(&buf, 0x00), SOFTNDK_CHECKED_REVISION_1);
        let rules = u32_at(&buf, 0x0C) as usize;
        let reports = u32_at(&buf, 0x10) as usize;
        assert_eq!(rules, Breach::ALL.len());
        assert!((1..=checked::KEPT).contains(&reports));
        assert_eq!(
            size,
            SOFTNDK_CHECKED_HEADER_SIZE
                + rules * SOFTNDK_CHECKED_COUNT_SIZE
                + reports * SOFTNDK_CHECKED_REPORT_SIZE
        );
        assert!(u64_at(&buf, 0x18) >= 1, "reports made since load");
        let names: alloc::vec::Vec<&str> = (0..rules)
            .map(|i| c_str(&buf, SOFTNDK_CHECKED_HEADER_SIZE + i * 16, 8))
            .collect();
        assert_eq!(
            names,
            [
                "L17", "C1", "X5", "D5", "X7", "M22", "M33", "C4", "I3", "P2"
            ]
        );
        let m33 = SOFTNDK_CHECKED_HEADER_SIZE + 6 * SOFTNDK_CHECKED_COUNT_SIZE;
        assert!(u64_at(&buf, m33 + 8) >= 1, "the M33 counter");
        let first = SOFTNDK_CHECKED_HEADER_SIZE + rules * SOFTNDK_CHECKED_COUNT_SIZE;
        let ours = (0..reports)
            .map(|i| first + i * SOFTNDK_CHECKED_REPORT_SIZE)
            .find(|&at| u64_at(&buf, at + 0x10) == object as u64)
            .expect("the test's report is kept");
        assert_eq!(c_str(&buf, ours, 8), "M33");
        assert_eq!(u32_at(&buf, ours + 0x08), NdkObjectType::QP.0);
        assert_eq!(u64_at(&buf, ours + 0x20), 0xABC0_0000);
        let text = c_str(&buf, ours + SOFTNDK_CHECKED_REPORT_TEXT, 216);
        assert!(
            text.starts_with("M33: NdkSend on QP 0x5eed000000000040")
                && text.contains("0xabc00000"),
            "{text}"
        );
    }
}

/// `OID_SOFTNDK_FAULTS`: the fault plan in force, the call counters and the
/// kept faults, read as a tool on Windows reads them. The plan installed
/// here never fires (rates 0, a schedule entry no counter reaches), so the
/// other tests of this process, whose calls it counts, are not disturbed;
/// schedule entries and fault entries are written by the same code.
mod fault_query {
    use super::*;
    use crate::rnic::fault::{self, KINDS, Kind, Plan};

    #[test]
    fn test_fault_query_returns_the_plan_and_counters_in_the_documented_layout() {
        let (adapter, _fake) = adapter_with(true);
        let far = 1_u64 << 40;
        let mut plan = Plan {
            seed: 0x5EED,
            ..Plan::NEVER
        };
        plan.schedule(Kind::Delay, far).unwrap();
        fault::install(Some(&plan));
        let short = query(&adapter, OID_SOFTNDK_FAULTS, &mut [0_u8; 8]);
        assert_eq!(short.status, NDIS_STATUS_BUFFER_TOO_SHORT);
        let mut buf = alloc::vec![0_u8; 4096];
        let outcome = query(&adapter, OID_SOFTNDK_FAULTS, &mut buf);
        fault::install(None);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        let size = u32_at(&buf, 0x04) as usize;
        assert_eq!(outcome.bytes_done as usize, size);
        assert_eq!(short.bytes_needed as usize, size);
        assert_eq!(u32_at(&buf, 0x00), SOFTNDK_FAULTS_REVISION_1);
        assert_eq!(u32_at(&buf, 0x08), 1, "armed");
        assert_eq!(u32_at(&buf, 0x0C) as usize, KINDS);
        assert_eq!(u32_at(&buf, 0x10), 1, "one schedule entry");
        assert_eq!(u32_at(&buf, 0x14), 0, "nothing injected");
        assert_eq!(u64_at(&buf, 0x18), 0x5EED);
        assert_eq!(u64_at(&buf, 0x20), 0);
        assert_eq!(
            size,
            SOFTNDK_FAULTS_HEADER_SIZE + (KINDS + 1) * SOFTNDK_FAULTS_ENTRY_SIZE
        );
        for i in 0..KINDS {
            let at = SOFTNDK_FAULTS_HEADER_SIZE + i * SOFTNDK_FAULTS_ENTRY_SIZE;
            assert_eq!(u32_at(&buf, at), 0, "kind {i}: rate 0");
        }
        let entry = SOFTNDK_FAULTS_HEADER_SIZE + KINDS * SOFTNDK_FAULTS_ENTRY_SIZE;
        assert_eq!(u32_at(&buf, entry), SOFTNDK_FAULT_KIND_DELAY);
        assert_eq!(u64_at(&buf, entry + 8), far);

        // No plan: armed 0, no schedule, no faults.
        let outcome = query(&adapter, OID_SOFTNDK_FAULTS, &mut buf);
        assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
        assert_eq!(u32_at(&buf, 0x08), 0);
        assert_eq!(u32_at(&buf, 0x10), 0);
        assert_eq!(u64_at(&buf, 0x18), 0);
        assert!(SUPPORTED_OIDS.contains(&OID_SOFTNDK_FAULTS));
    }
}
