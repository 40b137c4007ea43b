//! State changes of a QP (`state.rs`) meeting its runner.
//!
//! E3: a disconnect racing the peer's runner. `Qp::disconnect` moves its QP
//! to `Disconnected` and only then tells the peer (`peer_gone`). A peer
//! runner that executes a Send in between finds the receive side gone; the
//! Send must still complete cancelled (E3), not with an error. The window is
//! opened here by hand: the disconnecting side enters `Disconnected` and the
//! test calls `peer_gone` itself, later.
//!
//! X1 b, L21: a QP with nothing queued is quiet at once. Leaving a
//! connection (close, disconnect, flush) then leaves the runner nothing to
//! cancel, so it schedules no pass: a close that waits for the QP's DMA is
//! done at once. It used to pend, on the deferred engine, whenever the
//! worker had picked up the empty pass the close itself scheduled before
//! the close looked (the conformance test N24's connector close, about one
//! run in five).

use alloc::boxed::Box;

use super::QpState;
use crate::rnic::device::EngineMode;
use crate::rnic::mr::Progress;
use crate::rnic::testing::Pair;
use crate::rnic::types::{Access, Opcode, WcStatus};

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

/// Rounds per engine: the deferred worker picks a pass up within a
/// microsecond, so a close that schedules one is caught within a few.
const ROUNDS: usize = 200;

#[test]
fn test_close_of_an_idle_connected_qp_is_done_at_once_rule_l21_x1() {
    for mode in [EngineMode::Inline, EngineMode::Deferred] {
        for round in 0..ROUNDS {
            let pair = Pair::new(mode);
            // A message first, so that the deferred engine's worker has
            // just run a pass and watches for the next one (it spins a
            // while before it parks): a pass the close schedules is then
            // picked up at once.
            let sink = pair.b.buffer(64, 0, Access::LOCAL_WRITE);
            pair.b.qp.post_receive(1, &[sink.sge(0, 64)]).unwrap();
            pair.a.send(1, &[], None).unwrap();
            pair.settle();
            assert_eq!(pair.a.scq.drain().len(), 1, "{mode:?}");
            assert_eq!(pair.b.rcq.drain().len(), 1, "{mode:?}");
            let progress = pair.a.qp.close_with(Box::new(|| {}));
            assert!(
                matches!(progress, Progress::Done),
                "{mode:?}, round {round}: {progress:?}"
            );
            let progress = pair.b.qp.close_with(Box::new(|| {}));
            assert!(
                matches!(progress, Progress::Done),
                "{mode:?}, round {round}, the peer: {progress:?}"
            );
            pair.settle();
        }
    }
}
