//! A connector's callbacks recorded in order: the cm unit tests' and loom
//! models' one recorder.

use alloc::vec::Vec;

use super::{CmError, ConnectorEvents};
use crate::kernel::sync::SpinLock;

/// One callback of a connector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Ev {
    Connect(Result<(), CmError>),
    Accept(Result<(), CmError>),
    Disconnect(Result<(), CmError>),
    Indicated,
    Closed,
}

/// The callbacks of one connector, in the order they came.
#[derive(Default)]
pub(super) struct Events(SpinLock<Vec<Ev>>);

impl Events {
    /// What came since the last take.
    pub(super) fn take(&self) -> Vec<Ev> {
        core::mem::take(&mut *self.0.lock())
    }
    /// The oldest callback not taken yet.
    #[cfg_attr(
        loom,
        expect(
            dead_code,
            reason = "the unit tests' (waiting one event at a time), not the models'"
        )
    )]
    pub(super) fn next(&self) -> Option<Ev> {
        let mut list = self.0.lock();
        (!list.is_empty()).then(|| list.remove(0))
    }
    fn push(&self, ev: Ev) {
        self.0.lock().push(ev);
    }
}

impl ConnectorEvents for Events {
    fn connect_completed(&self, result: Result<(), CmError>) {
        self.push(Ev::Connect(result));
    }
    fn accept_completed(&self, result: Result<(), CmError>) {
        self.push(Ev::Accept(result));
    }
    fn disconnect_completed(&self, result: Result<(), CmError>) {
        self.push(Ev::Disconnect(result));
    }
    fn disconnected(&self) {
        self.push(Ev::Indicated);
    }
    fn closed(&self) {
        self.push(Ev::Closed);
    }
}
