//! The suite itself, one module shared by both of its binaries: the harness
//! and one module per rule family. `tests/conformance/main.rs` runs it on
//! the in-memory fabric, `tests/conformance_iwarp.rs` over iWARP; each root
//! states its `TRANSPORT`, which every fixture opens on. A test that checks
//! a behaviour only the fabric has ends early over iWARP
//! (`only_on_fabric!`, with the reason), and one whose expectation differs
//! by the RFCs asserts what iWARP does (`Transport::held`,
//! `Transport::peer_refused`, `await_abort`, N12's backlog, N30's ports);
//! docs/iwarp.md, "Conformance over iWARP", lists them.

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

pub(crate) mod harness;

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
