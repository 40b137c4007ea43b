//! The NDK conformance suite over iWARP (issue 8): the families of
//! `tests/conformance/` (the module `suite`, `tests/conformance/suite.rs`)
//! with every fixture's adapters opened on the wire
//! (`SoftNdkOpenAdapterEx`, transport 1), so that each connection goes
//! through TCP on 127.0.0.x, MPA and the iWARP link instead of the
//! in-memory fabric. Same tests, same assertions; `docs/conformance.md`
//! says which families run here.

#[path = "conformance/suite.rs"]
mod suite;

use suite::harness;

/// The transport every fixture of this binary uses.
const TRANSPORT: harness::Transport = harness::Transport::Iwarp;
