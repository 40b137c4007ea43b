//! `softndk-perf`: SoftNDK's loopback performance suite, perftest-style.
//!
//! With no arguments it opens two host-mode adapters (127.0.0.1 and
//! 127.0.0.2), connects a QP of each, and measures RDMA Write, RDMA Read and
//! Send bandwidth at 64 B to 8 MiB beside memcpy, the 64 B Send / Receive
//! ping-pong beside a cache-line hand-off between two threads, and the 64 B
//! Send message rate unbatched and with `NDK_OP_FLAG_DEFER` chains, in both
//! engine modes; then it prints one table and the goals. It uses
//! only the C ABI: `SoftNdkOpenAdapter` / `SoftNdkCloseAdapter` and the
//! dispatch tables (module `ndk`). See `docs/performance.md`.

#[cfg(not(target_os = "windows"))]
mod bench;
#[cfg(not(target_os = "windows"))]
mod ndk;
#[cfg(not(target_os = "windows"))]
mod options;
#[cfg(not(target_os = "windows"))]
mod plot;
#[cfg(not(target_os = "windows"))]
mod report;
#[cfg(not(target_os = "windows"))]
mod suite;

#[cfg(not(target_os = "windows"))]
fn main() -> std::process::ExitCode {
    suite::main()
}

/// Host mode, which the tool measures, exists only on non-Windows hosts.
#[cfg(target_os = "windows")]
fn main() {
    eprintln!("softndk-perf runs SoftNDK in host mode, which is built for non-Windows hosts only");
    std::process::exit(1);
}
