//! The emulated RDMA NIC.
//!
//! Plain, safe Rust that knows nothing of NDK types or NTSTATUS: its own ids,
//! keys, work requests, completions and error enums. It is where the rules of
//! `../shared/spec/rules.md` live (families D and C entirely, and the memory,
//! posting, SRQ and error rules), each cited by id where it is implemented.
//! The only `unsafe` code is in [`memory`], the one place that copies bytes.
//!
//! See `docs/rnic.md` for the design and the choices made where the
//! specification leaves room.

pub mod cm;
pub mod cq;
pub mod device;
pub mod engine;
pub mod ether;
pub mod fault;
pub mod iwarp;
pub mod keys;
pub mod memory;
pub mod mr;
pub mod qp;
pub mod ring;
pub mod srq;
pub mod types;

#[cfg(test)]
#[cfg(not(loom))]
pub mod testing;

pub use types::*;

#[cfg(test)]
#[cfg(not(loom))]
mod model_tests;
