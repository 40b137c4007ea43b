//! A fake [`NdkProvider`] for the host tests, and an adapter built on it.
//!
//! The fake creates real `NDK_ADAPTER` structs (so the driver's checks of the
//! header run on real memory), records every call, and can be told to fail
//! opens, stamp a wrong version, or report given counters, connections and
//! endpoints.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::abi::{
    AdapterFlags, NdisNdkPerformanceCounters, NdkAdapter, NdkAdapterInfo, NdkObjectHeader,
    NdkObjectHeaderReservedBlock, NdkObjectType, NdkRdmaTechnology, NdkVersion, NtStatus,
};
use crate::kernel::sync::{Arc, SpinLock};
use crate::rnic::Limits;
use crate::rnic::device::{Device, EngineMode};

use super::adapter::Adapter;
use super::config::{AdapterConfig, RawConfig, generated_mac};
use super::ndk::{Connection, LocalEndpoint, NdkProvider, adapter_info_from_limits};

/// What the fake has been asked and told to do.
#[derive(Default)]
pub struct FakeState {
    /// Adapters open now, by address.
    pub open: Vec<usize>,
    /// Every version `open_adapter` was given.
    pub opened_versions: Vec<NdkVersion>,
    /// Adapters closed by `close_adapter`.
    pub closed: usize,
    /// Calls to `close_all`.
    pub close_all_calls: usize,
    /// Adapters torn down by `close_all`.
    pub torn_down: usize,
    /// Fail the next opens with this status.
    pub fail_open: Option<NtStatus>,
    /// Stamp this version instead of the one given (a provider bug).
    pub wrong_version: Option<NdkVersion>,
    /// `statistics()`.
    pub counters: NdisNdkPerformanceCounters,
    /// `connections()`.
    pub connections: Vec<Connection>,
    /// `local_endpoints()`.
    pub endpoints: Vec<LocalEndpoint>,
    /// `adapter_info().rdma_technology`.
    pub technology: Option<NdkRdmaTechnology>,
}

/// The fake provider; cloning shares the state.
#[derive(Clone, Default)]
pub struct FakeProvider {
    /// Shared with the test.
    pub state: Arc<SpinLock<FakeState>>,
}

impl FakeProvider {
    fn free(address: usize) {
        // SAFETY: every address in `open` came from `Box::into_raw` in
        // `open_adapter` and is removed from `open` before it is freed, so it
        // is freed exactly once.
        drop(unsafe { Box::from_raw(address as *mut NdkAdapter) });
    }
}

// SAFETY: `open_adapter` returns a leaked `Box<NdkAdapter>` with the version
// in its header (unless a test asks for a wrong one, which the driver must
// catch), freed only by `close_adapter` / `close_all`.
unsafe impl NdkProvider for FakeProvider {
    fn open_adapter(&self, version: NdkVersion) -> Result<NonNull<NdkAdapter>, NtStatus> {
        let mut state = self.state.lock();
        state.opened_versions.push(version);
        if let Some(status) = state.fail_open {
            return Err(status);
        }
        let adapter = Box::new(NdkAdapter {
            header: NdkObjectHeader {
                version: state.wrong_version.unwrap_or(version),
                object_type: NdkObjectType::ADAPTER,
                ndk_reserved: NdkObjectHeaderReservedBlock {
                    rf: [core::ptr::null_mut(); 4],
                },
            },
            dispatch: core::ptr::null(),
        });
        let raw = Box::into_raw(adapter);
        state.open.push(raw as usize);
        Ok(NonNull::new(raw).expect("Box::into_raw is never null"))
    }

    fn close_adapter(&self, adapter: NonNull<NdkAdapter>) {
        let address = adapter.as_ptr() as usize;
        let mut state = self.state.lock();
        if let Some(i) = state.open.iter().position(|&a| a == address) {
            state.open.swap_remove(i);
            state.closed += 1;
            drop(state);
            Self::free(address);
        }
    }

    fn adapter_info(&self) -> NdkAdapterInfo {
        let mut info = adapter_info_from_limits(&Limits::DEFAULT, AdapterFlags::empty());
        if let Some(technology) = self.state.lock().technology {
            info.rdma_technology = technology;
        }
        info
    }

    fn statistics(&self) -> NdisNdkPerformanceCounters {
        self.state.lock().counters
    }

    fn connections(&self, out: &mut dyn FnMut(&Connection)) {
        let list = self.state.lock().connections.clone();
        for c in &list {
            out(c);
        }
    }

    fn local_endpoints(&self, out: &mut dyn FnMut(&LocalEndpoint)) {
        let list = self.state.lock().endpoints.clone();
        for e in &list {
            out(e);
        }
    }

    fn close_all(&self) {
        let open = {
            let mut state = self.state.lock();
            state.close_all_calls += 1;
            state.torn_down += state.open.len();
            core::mem::take(&mut state.open)
        };
        for address in open {
            Self::free(address);
        }
    }
}

impl Drop for FakeState {
    fn drop(&mut self) {
        for address in self.open.drain(..) {
            FakeProvider::free(address);
        }
    }
}

/// An adapter over a fake provider, with `*NetworkDirect` = `network_direct`.
pub fn adapter_with(network_direct: bool) -> (Adapter, FakeProvider) {
    let fake = FakeProvider::default();
    let raw = RawConfig {
        network_direct: Some(u32::from(network_direct)),
        ..RawConfig::default()
    };
    let config = AdapterConfig::from_raw(&raw, 1);
    let device = Device::new(Limits::DEFAULT, EngineMode::Inline).expect("device");
    let adapter = Adapter::new(config, generated_mac(1), device, Box::new(fake.clone()));
    (adapter, fake)
}
