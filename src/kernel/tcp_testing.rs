//! What the tests of the platform's byte streams share (`net/tests.rs` for
//! the host's, `wsk/tests.rs` and `wsk/net_tests.rs` for the WSK glue's): a
//! stream's events, recorded. Their bounded wait is `kernel::testing`'s.

use alloc::vec::Vec;
use std::sync::Mutex;

use super::tcp::StreamEvents;

/// A stream's events, recorded; a second `closed` fails the test.
#[derive(Default)]
pub(super) struct Recorder {
    received: Mutex<Vec<u8>>,
    writable: Mutex<usize>,
    closed: Mutex<Option<bool>>,
}

impl StreamEvents for Recorder {
    fn received(&self, bytes: &[u8]) {
        self.received.lock().unwrap().extend_from_slice(bytes);
    }
    fn writable(&self) {
        *self.writable.lock().unwrap() += 1;
    }
    fn closed(&self, abortive: bool) {
        let mut closed = self.closed.lock().unwrap();
        assert!(closed.is_none(), "closed twice");
        *closed = Some(abortive);
    }
}

impl Recorder {
    /// The bytes received so far, in order.
    pub(super) fn bytes(&self) -> Vec<u8> {
        self.received.lock().unwrap().clone()
    }
    /// The close reported (`abortive`), if any: none or one.
    pub(super) fn closes(&self) -> Vec<bool> {
        self.closed.lock().unwrap().iter().copied().collect()
    }
    /// How many times `writable` was called.
    pub(super) fn writables(&self) -> usize {
        *self.writable.lock().unwrap()
    }
}
