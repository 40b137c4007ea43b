//! The NDK conformance suite over iWARP (issue 8): the families of
//! `tests/conformance/` with every fixture's adapters opened on the wire
//! (`SoftNdkOpenAdapterEx`, transport 1), so that each connection goes
//! through TCP on 127.0.0.x, MPA and the iWARP link instead of the
//! in-memory fabric. Same tests, same assertions; `docs/conformance.md`
//! says which families run here.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::too_many_lines,
    clippy::items_after_statements,
    clippy::similar_names,
    clippy::unnecessary_box_returns,
    reason = "as tests/conformance/main.rs"
)]

#[path = "conformance/harness/mod.rs"]
mod harness;

/// The transport every fixture of this binary uses.
const TRANSPORT: harness::Transport = harness::Transport::Iwarp;

// Every family of the suite. A test that checks a behaviour only the
// fabric has ends early here (`only_on_fabric!`, with the reason), and one
// whose expectation differs by the RFCs asserts what iWARP does
// (`Transport::held`, `Transport::peer_refused`, `await_abort`, N12's
// backlog, N30's ports); docs/iwarp.md, "Conformance over iWARP", lists
// them.
#[path = "conformance/c.rs"]
mod c;
#[path = "conformance/d.rs"]
mod d;
#[path = "conformance/e.rs"]
mod e;
#[path = "conformance/i.rs"]
mod i;
#[path = "conformance/k.rs"]
mod k;
#[path = "conformance/l.rs"]
mod l;
#[path = "conformance/m.rs"]
mod m;
#[path = "conformance/n.rs"]
mod n;
#[path = "conformance/p.rs"]
mod p;
#[path = "conformance/q.rs"]
mod q;
#[path = "conformance/x.rs"]
mod x;
