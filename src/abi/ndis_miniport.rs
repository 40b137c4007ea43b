//! The NDIS 6 miniport side the driver needs: driver characteristics, adapter
//! attributes, OID requests, PnP notifications, the prefix of
//! `NET_BUFFER_LIST` / `NET_BUFFER`, registry configuration, and the general
//! OID / status constants.
//!
//! These structures are **not** in `shared/spec/ndk-abi.md` (it tabulates the
//! NDK-specific NDIS structures only, which live in [`ndis`](super)). Their
//! facts were looked up in the public WDK headers and confirmed where possible
//! against layouts dumped from the public symbols of `ndis.sys`:
//!
//! * [H] WDK 10.0.16299 `km/ndis.h`, `shared/ntddndis.h`, `shared/ifdef.h`,
//!   `shared/ntstatus.h`, `shared/netevent.h`, `km/wdm.h` (repository
//!   `tpn/winsdk-10`, `Include/10.0.16299.0/…`);
//! * [PDB] x64 layouts from the public symbols of `ndis.sys` (repository
//!   `ntdiff/headers`, `…/x64/System32/ndis.sys/…`, Windows 10 builds).
//!
//! Every declaration in the submodules is written here from those facts (nothing is
//! copied), and each type's doc comment says which source confirms its
//! layout: "PDB" (offsets read from the symbol dump), or "computed" (natural
//! x64 alignment of the header's declaration, not confirmed from symbols).
//! Every size and field offset the driver relies on is asserted in each
//! submodule's [`assert_layouts!`] table, and every `NDIS_SIZEOF_*` in its
//! [`assert_ndis_sizeof!`] table, exactly like the NDK structures.
//!
//! Structures that NDIS allocates and that have grown with NDIS versions
//! (`NDIS_OID_REQUEST`, `NET_BUFFER_LIST`, `NET_BUFFER`) are declared as the
//! **prefix** the driver reads or writes; the driver only ever reaches them
//! through raw pointers to memory NDIS owns, never by value. The set of
//! structures is kept to what `src/driver/` really fills or reads.

mod adapter;
mod config;
mod data_path;
mod driver;
mod enums;
mod mdl;
mod oid;
mod oid_answers;
mod pnp;
mod status;

pub use adapter::*;
pub use config::*;
pub use data_path::*;
pub use driver::*;
pub use enums::*;
pub use mdl::*;
pub use oid::*;
pub use oid_answers::*;
pub use pnp::*;
pub use status::*;
