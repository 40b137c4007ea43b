//! E3: a disconnect racing the peer's runner.
//!
//! `Qp::disconnect` moves its QP to `Disconnected` and only then tells the
//! peer (`peer_gone`). A peer runner that executes a Send in between finds
//! the receive side gone; the Send must still complete cancelled (E3), not
//! with an error. The window is opened here by hand: the disconnecting side
//! enters `Disconnected` and the test calls `peer_gone` itself, later.

use super::QpState;
use crate::rnic::device::EngineMode;
use crate::rnic::testing::Pair;
use crate::rnic::types::{Opcode, WcStatus};

#[test]
fn test_send_into_a_disconnecting_peer_completes_cancelled_rule_e3() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        let pair = Pair::new(mode);
        // B disconnects; A has not heard of it yet.
        let (was, peer) = pair.b.qp.enter(QpState::Disconnected);
        assert_eq!(was, QpState::Connected);
        let peer = peer.expect("B's peer");
        // A's runner executes a Send in the window: it waits.
        pair.a.send(1, &[], None).unwrap();
        pair.settle();
        assert!(pair.a.scq.drain().is_empty(), "{mode:?}");
        assert_eq!(pair.a.qp.state(), QpState::Connected, "{mode:?}");
        // The rest of B's disconnect: A learns it, and the Send is cancelled.
        peer.peer_gone();
        pair.settle();
        let done: Vec<_> = pair
            .a
            .scq
            .drain()
            .iter()
            .map(|c| (c.request_context, c.opcode, c.status))
            .collect();
        assert_eq!(done, [(1, Opcode::Send, WcStatus::Cancelled)], "{mode:?}");
        assert_eq!(pair.a.qp.state(), QpState::Error, "{mode:?}");
    }
}
