//! The boundary between the miniport and the NDK provider, and the part of
//! the NDIS open-adapter handler that belongs to the miniport: version
//! negotiation (rules A1–A3).
//!
//! # Who does what
//!
//! * The **driver** (this module and [`adapter`](super::adapter)) negotiates
//!   the version (A1–A3), refuses opens while NDK is disabled (A5), counts the
//!   open adapters (A6), answers the NDK OIDs (A13–A21) and fills
//!   `NDIS_NDK_CAPABILITIES` (A11, A12).
//! * The **provider** ([`NdkProvider`], `src/provider/`) creates the
//!   `NDK_ADAPTER` at the version the driver negotiated and stamps it into
//!   `NDK_ADAPTER_INFO.Version` and every object header (A4), closes adapters
//!   (L27), and reports its limits (A7, A8), counters (A16–A18), connections
//!   (A19) and endpoints (A20).
//!
//! The driver makes one provider per miniport adapter, over that adapter's
//! emulated NIC ([`Device`]), with a [`ProviderFactory`]; the Windows glue
//! opens each adapter's provider with `provider::ndis::factory_on`, on the
//! adapter's iWARP transport (`driver::transport`).

use alloc::boxed::Box;
use core::ptr::NonNull;

use crate::abi::{
    AdapterFlags, NDIS_STATUS_BAD_VERSION, NdisNdkPerformanceCounters, NdisStatus, NdkAdapter,
    NdkAdapterInfo, NdkVersion, NtStatus, STATUS_NOT_SUPPORTED,
};
use crate::kernel::sync::Arc;
use crate::rnic::device::Device;

pub use crate::provider::iface::{
    Connection, LocalEndpoint, NdkProvider, PROVIDER_VERSION, ProviderFactory,
    adapter_info_from_limits, counters_from_device,
};

/// Version negotiation of `OPEN_NDK_ADAPTER_HANDLER` (ndk-abi.md §2.3).
///
/// `requested` is the major the consumer wants and the lowest minor it
/// accepts. A major other than 1 fails (rule A1); a minor above 2 fails (rule
/// A3); anything else succeeds with 1.2, the provider's highest minor (rule
/// A2; higher minors are supersets, so a consumer asking for 1.0 or 1.1 gets
/// 1.2 behaviour, rule A4).
///
/// # Errors
/// `NDIS_STATUS_BAD_VERSION` for an unsupported major or minor.
pub const fn negotiate_version(requested: NdkVersion) -> Result<NdkVersion, NdisStatus> {
    if requested.major != PROVIDER_VERSION.major || requested.minor > PROVIDER_VERSION.minor {
        Err(NDIS_STATUS_BAD_VERSION)
    } else {
        Ok(PROVIDER_VERSION)
    }
}

/// Rule A7, the size handshake of `NdkQueryAdapterInfo`: for a consumer
/// buffer of `buffer_size` bytes, the status to return and the value to store
/// in `*pBufferSize` — `STATUS_SUCCESS` and the bytes written (the whole
/// `NDK_ADAPTER_INFO`) when it fits, `STATUS_BUFFER_TOO_SMALL` and the size
/// needed otherwise. The provider's dispatch writes the structure only on
/// success.
#[must_use]
#[expect(
    clippy::cast_possible_truncation,
    reason = "NDK_ADAPTER_INFO is 0x68 bytes (asserted in abi)"
)]
pub const fn query_adapter_info_size(buffer_size: u32) -> (NtStatus, u32) {
    let needed = size_of::<NdkAdapterInfo>() as u32;
    if buffer_size < needed {
        (crate::abi::STATUS_BUFFER_TOO_SMALL, needed)
    } else {
        (crate::abi::STATUS_SUCCESS, needed)
    }
}

/// The provider used until `src/provider/` is plugged in: it reports the
/// NIC's true limits and counters, has no connections, and refuses to open
/// adapters (`STATUS_NOT_SUPPORTED`). It claims no optional feature
/// (`AdapterFlags` empty) because it implements none.
pub struct DeviceOnlyProvider {
    device: Arc<Device>,
}

impl DeviceOnlyProvider {
    /// A placeholder provider over `device`.
    #[must_use]
    pub const fn new(device: Arc<Device>) -> Self {
        Self { device }
    }
}

// SAFETY: `open_adapter` never returns a pointer, so there is no adapter whose
// validity the driver could rely on.
unsafe impl NdkProvider for DeviceOnlyProvider {
    fn open_adapter(&self, _version: NdkVersion) -> Result<NonNull<NdkAdapter>, NtStatus> {
        Err(STATUS_NOT_SUPPORTED)
    }

    fn close_adapter(&self, _adapter: NonNull<NdkAdapter>) {}

    fn adapter_info(&self) -> NdkAdapterInfo {
        adapter_info_from_limits(self.device.limits(), AdapterFlags::empty())
    }

    fn statistics(&self) -> NdisNdkPerformanceCounters {
        counters_from_device(&self.device.counters)
    }

    fn connections(&self, _out: &mut dyn FnMut(&Connection)) {}

    fn local_endpoints(&self, _out: &mut dyn FnMut(&LocalEndpoint)) {}

    fn close_all(&self) {}
}

/// The [`ProviderFactory`] of [`DeviceOnlyProvider`].
///
/// # Errors
/// `STATUS_INSUFFICIENT_RESOURCES` when the provider cannot be allocated.
pub fn device_only_provider(device: &Arc<Device>) -> Result<Box<dyn NdkProvider>, NtStatus> {
    let provider = crate::kernel::mem::try_box(DeviceOnlyProvider::new(Arc::clone(device)))
        .ok_or(crate::abi::STATUS_INSUFFICIENT_RESOURCES)?;
    Ok(provider as Box<dyn NdkProvider>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{CounterMask, NDK_VERSION_1_1, NDK_VERSION_1_2};
    use crate::rnic::Limits;
    use crate::rnic::device::EngineMode;

    #[test]
    fn test_open_rejects_unsupported_major_rule_a1() {
        for major in [0, 2, 3, u16::MAX] {
            let requested = NdkVersion { major, minor: 0 };
            assert_eq!(negotiate_version(requested), Err(NDIS_STATUS_BAD_VERSION));
        }
    }

    #[test]
    fn test_open_uses_highest_minor_rule_a2() {
        for minor in 0..=2 {
            let requested = NdkVersion { major: 1, minor };
            assert_eq!(negotiate_version(requested), Ok(NDK_VERSION_1_2));
        }
        // The observed consumer opens with {1, 0} (ndk-abi.md §2.3).
        assert_eq!(
            negotiate_version(NdkVersion { major: 1, minor: 0 }),
            Ok(PROVIDER_VERSION)
        );
        assert!(negotiate_version(NDK_VERSION_1_1).is_ok());
    }

    #[test]
    fn test_open_rejects_minor_above_two_rule_a3() {
        for minor in [3, 4, u16::MAX] {
            let requested = NdkVersion { major: 1, minor };
            assert_eq!(negotiate_version(requested), Err(NDIS_STATUS_BAD_VERSION));
        }
    }

    #[test]
    fn test_query_adapter_info_reports_size_rule_a7() {
        // Below `sizeof(NDK_ADAPTER_INFO)` (0x68) the answer is "too small",
        // from it on "success"; both report the size.
        let too_small = (crate::abi::STATUS_BUFFER_TOO_SMALL, 0x68);
        let success = (crate::abi::STATUS_SUCCESS, 0x68);
        assert_eq!(query_adapter_info_size(0), too_small);
        assert_eq!(query_adapter_info_size(0x67), too_small);
        assert_eq!(query_adapter_info_size(0x68), success);
        assert_eq!(query_adapter_info_size(0x1000), success);
    }

    #[test]
    fn test_device_only_provider_refuses_opens() {
        let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
        let provider = device_only_provider(&device).unwrap();
        assert_eq!(
            provider.open_adapter(PROVIDER_VERSION),
            Err(STATUS_NOT_SUPPORTED)
        );
        assert_eq!(
            provider.adapter_info().max_cq_depth,
            Limits::DEFAULT.max_cq_depth
        );
        assert_eq!(provider.missing_counters(), CounterMask::empty());
    }
}
