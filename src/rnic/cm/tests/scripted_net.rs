//! The platform's TCP (`kernel::tcp::Net`) for the cm tests over the wire:
//! the host's TCP underneath, with the departures a test scripts — source
//! ports found taken, timers held for the test to fire, listening sockets
//! that report their bind late or early — and the wire hosts built on it.

use core::net::SocketAddr;
use core::sync::atomic::AtomicU32;

use super::*;
use crate::kernel::tcp::{AcceptEvents, ConnectEvents, Dial, Listening, NetError, Timer};
use crate::kernel::tcp_host::HostNet;

/// When the listening sockets a [`ScriptedNet`] makes report their bind.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Bind {
    /// Within `listen` (`Listening::bound`): no report.
    Inline,
    /// Later, when the test calls [`ScriptedNet::finish_binds`].
    Late,
    /// Reported as done (`result`) before `listen` returns, though the
    /// socket says it was not bound: the report overtakes the return.
    Early(Result<(), NetError>),
}

/// The host's TCP, departing from it as the test scripts.
pub(super) struct ScriptedNet {
    inner: Arc<dyn crate::kernel::tcp::Net>,
    /// How many more connects find their source port taken (reported
    /// `AddressInUse` from another thread, as the host's connect does).
    busy_ports: AtomicU32,
    /// The source port of every connect, in order.
    tried: Mutex<Vec<u16>>,
    /// Record timers instead of arming them (see [`Self::take_timers`]).
    hold_timers: bool,
    held: Mutex<Vec<(u64, Arc<dyn Timer>)>>,
    /// When new listening sockets report their bind.
    pub(super) bind: Mutex<Bind>,
    /// Sockets whose bind is still to be reported.
    waiting: Mutex<Vec<(SocketAddr, Arc<dyn AcceptEvents>)>>,
    /// The streams its connects made, watched (`wire_close::Watch`).
    pub(super) streams: Arc<Mutex<Vec<super::wire_close::Watch>>>,
}

impl ScriptedNet {
    /// The host's TCP as it is.
    fn host() -> Self {
        Self {
            inner: HostNet::shared(),
            busy_ports: AtomicU32::new(0),
            tried: Mutex::new(Vec::new()),
            hold_timers: false,
            held: Mutex::new(Vec::new()),
            bind: Mutex::new(Bind::Inline),
            waiting: Mutex::new(Vec::new()),
            streams: Arc::default(),
        }
    }

    /// The first `busy` connects find their source port taken, as when
    /// another program holds it.
    pub(super) fn busy_ports(busy: u32) -> Arc<Self> {
        Arc::new(Self {
            busy_ports: AtomicU32::new(busy),
            ..Self::host()
        })
    }

    /// Timers are only recorded: the test fires them when it chooses (the
    /// platform's timers cannot be cancelled, so a connection's setup
    /// deadlines still come due after the link is up).
    pub(super) fn holding_timers() -> Arc<Self> {
        Arc::new(Self {
            hold_timers: true,
            ..Self::host()
        })
    }

    /// Listening sockets report their bind as `bind` says.
    pub(super) fn binding(bind: Bind) -> Arc<Self> {
        Arc::new(Self {
            bind: Mutex::new(bind),
            ..Self::host()
        })
    }

    /// The source ports the connects tried, in order.
    pub(super) fn tried(&self) -> Vec<u16> {
        self.tried.lock().unwrap().clone()
    }

    /// The timers held since the last call.
    pub(super) fn take_timers(&self) -> Vec<(u64, Arc<dyn Timer>)> {
        core::mem::take(&mut *self.held.lock().unwrap())
    }

    /// Reports every waiting bind with `result` (no lock held); returns how
    /// many.
    pub(super) fn finish_binds(&self, result: Result<(), NetError>) -> usize {
        let waiting = core::mem::take(&mut *self.waiting.lock().unwrap());
        for (local, events) in &waiting {
            events.bound(*local, result);
        }
        waiting.len()
    }
}

/// A listening socket whose `bound` says what its [`Bind`] made it.
struct ScriptedListening {
    inner: alloc::boxed::Box<dyn Listening>,
    bound: bool,
}

impl Listening for ScriptedListening {
    fn local(&self) -> SocketAddr {
        self.inner.local()
    }
    fn bound(&self) -> bool {
        self.bound
    }
}

impl crate::kernel::tcp::Net for ScriptedNet {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }

    fn listen(
        &self,
        local: SocketAddr,
        events: Arc<dyn AcceptEvents>,
    ) -> Result<alloc::boxed::Box<dyn Listening>, NetError> {
        let inner = self.inner.listen(local, Arc::clone(&events))?;
        let bind = *self.bind.lock().unwrap();
        let at = inner.local();
        match bind {
            Bind::Inline => {}
            Bind::Late => self.waiting.lock().unwrap().push((at, events)),
            Bind::Early(result) => events.bound(at, result),
        }
        Ok(alloc::boxed::Box::new(ScriptedListening {
            inner,
            bound: bind == Bind::Inline,
        }))
    }

    fn connect(&self, dial: Dial, events: Arc<dyn ConnectEvents>) -> Result<(), NetError> {
        self.tried.lock().unwrap().push(dial.local.port());
        let busy = self
            .busy_ports
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if busy {
            // Reported from another thread, as the host's connect does.
            std::thread::spawn(move || {
                let _ = events.connected(Err(NetError::AddressInUse));
            });
            return Ok(());
        }
        let events = super::wire_close::watch(&self.streams, events);
        self.inner.connect(dial, events)
    }

    fn timer(&self, at_ms: u64, timer: Arc<dyn Timer>) {
        if self.hold_timers {
            self.held.lock().unwrap().push((at_ms, timer));
        } else {
            self.inner.timer(at_ms, timer);
        }
    }
}

/// A device on `ips` attached to the wire over `net` (the host's TCP when
/// `None`) with `timeouts`.
pub(super) fn wire_host(
    fabric: &Arc<Fabric>,
    ips: &[IpAddr],
    net: Option<Arc<ScriptedNet>>,
    timeouts: ConnTimeouts,
) -> Host {
    let h = host(fabric, ips, EngineMode::Inline);
    let net: Arc<dyn crate::kernel::tcp::Net> = match net {
        Some(net) => net,
        None => HostNet::shared(),
    };
    fabric
        .attach_wire(&h.device, Wire { net, timeouts })
        .unwrap();
    h
}
