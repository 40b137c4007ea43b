//! `NDK_MR` and `NDK_MW` over the RNIC's regions and windows.

use super::object::Object;
use super::pd::Pd;
use crate::abi::{NdkMr, NdkMw, NtStatus, STATUS_NOT_SUPPORTED};

/// Creates a region on `pd` (M1).
pub(super) fn create_mr(_pd: &Object<Pd>, _fast: bool) -> Result<*mut NdkMr, NtStatus> {
    Err(STATUS_NOT_SUPPORTED)
}

/// Creates a window on `pd`.
pub(super) fn create_mw(_pd: &Object<Pd>) -> Result<*mut NdkMw, NtStatus> {
    Err(STATUS_NOT_SUPPORTED)
}
