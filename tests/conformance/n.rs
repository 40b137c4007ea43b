//! Family N of the rules catalogue, through the C ABI.

#[allow(unused_imports, reason = "filled in by the family's tests")]
use super::harness::*;
