//! The NDK conformance suite: a consumer that knows only the NDK C ABI —
//! every call goes through a function pointer read from a dispatch table —
//! checking the provider against every rule of the rules catalogue
//! (`shared/spec/rules.md`). Tests are named `<rule>_<behaviour>`; the rule →
//! test table is `docs/conformance.md`, kept honest by
//! `tests/conformance_table.rs`.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::too_many_lines,
    clippy::items_after_statements,
    clippy::similar_names,
    clippy::unnecessary_box_returns,
    reason = "test code: contexts, offsets and byte patterns round-trip through small \
              integers; a scenario reads best as one long sequence with a/b names and \
              local helper types; MDLs are linked by address, so they live in boxes"
)]

mod harness;

/// The transport every fixture of this binary uses (`harness::Transport`).
const TRANSPORT: harness::Transport = harness::Transport::Local;

mod c;
mod d;
mod e;
mod i;
mod k;
mod l;
mod m;
mod n;
mod p;
mod q;
mod x;
