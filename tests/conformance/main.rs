//! The NDK conformance suite: a consumer that knows only the NDK C ABI —
//! every call goes through a function pointer read from a dispatch table —
//! checking the provider against every rule of the rules catalogue
//! (`shared/spec/rules.md`). Tests are named `<rule>_<behaviour>`; the rule →
//! test table is `docs/conformance.md`, kept honest by
//! `tests/conformance_table.rs`. The harness and the families are the
//! module `suite` (`suite.rs`), which `tests/conformance_iwarp.rs` runs
//! again over iWARP.

#[path = "suite.rs"]
mod suite;

use suite::harness;

/// The transport every fixture of this binary uses (`harness::Transport`).
const TRANSPORT: harness::Transport = harness::Transport::Local;
