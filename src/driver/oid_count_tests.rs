//! `OID_NDK_LOCAL_ENDPOINTS` / `OID_NDK_CONNECTIONS` report every entry,
//! not only the first 32 the provider reads on the stack (issue 9's note:
//! `provider::ndis` collected at most `BATCH` entries).

use alloc::vec::Vec;
use core::ffi::c_void;
use std::sync::Mutex;

use super::addresses::tests::{Open, close, ndis_adapter, row};
use crate::abi::{IP_DAD_STATE_PREFERRED, NDK_VERSION_1_2, NetLuid, STATUS_SUCCESS};
use crate::rnic::cm::IpAddr;

#[test]
fn local_endpoints_oid_reports_more_than_a_batch_rule_a20() {
    let luid = NetLuid {
        value: 0x0006_0000_0077_0000,
    };
    let (adapter, tracker) = ndis_adapter(luid);
    let ip = IpAddr::V4([198, 51, 100, 77]);
    tracker.load(
        tracker.begin().unwrap(),
        &[row(ip, luid, IP_DAD_STATE_PREFERRED)],
    );
    let open = Open(adapter.open_ndk_adapter(NDK_VERSION_1_2).unwrap().as_ptr());
    let queue = Mutex::new(Vec::new());
    let listeners: Vec<_> = (0..40_u16)
        .map(|n| {
            let l = open.listener(&queue);
            assert_eq!(Open::listen(l, ip, 5000 + n), STATUS_SUCCESS);
            l
        })
        .collect();
    let mut seen = Vec::new();
    adapter
        .provider()
        .local_endpoints(&mut |endpoint| seen.push(*endpoint));
    let listening = seen.iter().filter(|e| e.listener).count();
    assert_eq!(listening, 40, "every listener reported, not the first 32");
    let mut ports: Vec<u16> = seen.iter().map(|e| e.local.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 40);
    for l in listeners {
        close(l.cast::<c_void>());
    }
    adapter.close_ndk_adapter(core::ptr::NonNull::new(open.0).unwrap());
    tracker.close();
}
