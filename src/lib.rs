//! SoftNDK: a Windows kernel NDK (Network Direct Kernel) provider whose RDMA NIC
//! is simulated in software.
//!
//! The crate is one package in four layers (see `docs/architecture.md`):
//!
//! * [`abi`] — the NDKPI 1.2 and NDIS NDK C ABI as `#[repr(C)]` Rust, with every
//!   layout asserted at compile time. No logic.
//! * [`rnic`] — the emulated RDMA NIC in plain, safe Rust (except the one checked
//!   copy routine in `rnic::memory`); it knows nothing of NDK.
//! * [`kernel`] — platform services (pool, spin lock, deferred work, debug log)
//!   with three backends: `host` (std), `raw` (hand-declared `ntoskrnl.exe` /
//!   `ndis.sys` imports) and `wdk` (windows-drivers-rs, feature `wdk`).
//! * [`driver`] — the NDIS miniport and NDK open / close handlers: the logic
//!   is platform-neutral (unit-tested on the host), the entry points are
//!   Windows only.
//!
//! Built for a Windows target the crate is `no_std` (with `alloc`) and links as a
//! kernel driver; built for any other host it is an ordinary library used by the
//! tests, the benchmarks and user-mode consumers.

#![cfg_attr(target_os = "windows", no_std)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![cfg_attr(
    test,
    allow(
        clippy::cast_possible_truncation,
        reason = "tests run on 64-bit hosts, where usize and u64 agree"
    )
)]

extern crate alloc;

pub mod abi;
pub mod kernel;
pub mod provider;
pub mod rnic;

pub mod driver;
