//! The kernel's [`Net`] over the WSK glue: what the iWARP transport
//! (`rnic::cm::wire`) runs on in the driver, as it runs on
//! `kernel::tcp_host::HostNet` on the host.
//!
//! * The provider is captured on demand ([`WskSource::capture`], never
//!   waiting): while WSK is not up (boot) a listen or connect fails and the
//!   next one tries again, so neither `DriverEntry` nor miniport
//!   initialisation ever blocks on WSK.
//! * [`Net::listen`] is [`super::listen`]; its result is known only when the
//!   provider completes the bind. A bind the provider completed within the
//!   call is answered there (a failure as the call's error); otherwise the
//!   [`Listening`] says it is not bound yet and [`AcceptEvents::bound`]
//!   reports the outcome once the provider completes the bind (a failure:
//!   logged too, and the socket is closed). The connection manager pends
//!   the NDK Listen until then.
//! * [`Net::connect`] is [`super::connect`] with the time-out served by the
//!   [`Timers`]: past it the attempt reports `TimedOut`, and a connection
//!   that completes later is reset.
//! * [`Net::timer`] and [`Net::now_ms`] are the [`Timers`] (a `KTIMER` and
//!   its DPC in the kernel, played on the host).
//! * [`WskNet::shutdown`] (halt): refuses new work, resets every stream and
//!   closes every listener still open, stops the timers, and waits (bounded)
//!   until every socket's close has completed, then releases the provider.
//!
//! The MSS is not asked of WSK: connections report 1460 (Ethernet's), which
//! MPA only uses to size its FPDUs.

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use core::sync::atomic::{AtomicBool, Ordering};

use super::{ConnectError, ListenEvents, WskClient, WskListener, WskStream};
use crate::abi::{
    NtStatus, STATUS_ADDRESS_ALREADY_EXISTS, STATUS_INSUFFICIENT_RESOURCES, STATUS_INVALID_ADDRESS,
};
use crate::kernel::log::Level;
use crate::kernel::sync::SpinLock;
use crate::kernel::tcp::{
    AcceptEvents, ConnectEvents, Connected, Dial, Listening, Net, NetError, Stream, StreamEvents,
    Timer,
};
use crate::kernel::timers::Timers;

/// The MSS reported for every connection.
pub const DEFAULT_MSS: u16 = 1460;

/// `STATUS_INVALID_ADDRESS_COMPONENT`: a bind to an address not this
/// machine's.
const STATUS_INVALID_ADDRESS_COMPONENT: NtStatus = 0xC000_0207_u32.cast_signed();

/// Where the WSK provider comes from.
pub trait WskSource: Send + Sync {
    /// The provider, captured now without waiting, or why not
    /// (`STATUS_DEVICE_NOT_READY` while WSK is not up). ≤ DISPATCH_LEVEL.
    ///
    /// # Errors
    /// The capture's status.
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus>;
}

/// The kernel's TCP for the iWARP transport, over WSK.
pub struct WskNet {
    me: Weak<WskNet>,
    source: Box<dyn WskSource>,
    client: SpinLock<Option<Arc<WskClient>>>,
    timers: Arc<Timers>,
    send_capacity: usize,
    streams: SpinLock<Vec<Weak<WskStream>>>,
    listeners: SpinLock<Vec<Weak<WskListener>>>,
    closed: AtomicBool,
}

/// `status` (a bind's or a connect's) as a [`NetError`].
fn net_error(status: NtStatus) -> NetError {
    match ConnectError::from_status(status) {
        ConnectError::Refused => NetError::Refused,
        ConnectError::Unreachable => NetError::Unreachable,
        ConnectError::TimedOut => NetError::TimedOut,
        ConnectError::Other(STATUS_ADDRESS_ALREADY_EXISTS) => NetError::AddressInUse,
        ConnectError::Other(STATUS_INVALID_ADDRESS_COMPONENT | STATUS_INVALID_ADDRESS) => {
            NetError::AddressNotAvailable
        }
        ConnectError::Other(STATUS_INSUFFICIENT_RESOURCES) => NetError::Resources,
        ConnectError::Other(_) => NetError::Failed,
    }
}

/// Keeps the live entries of `list` and adds `item` (no memory: not
/// tracked, which only loses the halt-time reset of that one socket).
fn track<T>(list: &SpinLock<Vec<Weak<T>>>, item: &Arc<T>) {
    let mut list = list.lock();
    list.retain(|w| w.strong_count() > 0);
    if list.try_reserve(1).is_ok() {
        list.push(Arc::downgrade(item));
    }
}

impl WskNet {
    /// A `Net` over the provider `source` gives, with `timers`; every
    /// stream gets a send ring of `send_capacity` bytes.
    pub fn new(source: Box<dyn WskSource>, timers: Arc<Timers>, send_capacity: usize) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            source,
            client: SpinLock::new(None),
            timers,
            send_capacity,
            streams: SpinLock::new(Vec::new()),
            listeners: SpinLock::new(Vec::new()),
            closed: AtomicBool::new(false),
        })
    }

    /// The captured provider, capturing it now if it was not yet.
    fn client(&self) -> Result<Arc<WskClient>, NtStatus> {
        if self.closed.load(Ordering::Acquire) {
            return Err(crate::abi::STATUS_DEVICE_NOT_READY);
        }
        if let Some(client) = self.client.lock().as_ref() {
            return Ok(Arc::clone(client));
        }
        let client = self.source.capture()?;
        let mut slot = self.client.lock();
        // Another thread may have captured meanwhile: keep the first (the
        // second capture is released when `client` drops).
        Ok(Arc::clone(slot.get_or_insert(client)))
    }

    /// Whether WSK is up (tries to capture it).
    pub fn ready(&self) -> bool {
        self.client().is_ok()
    }

    /// Sockets whose close has not completed (streams and listeners).
    pub fn sockets_open(&self) -> usize {
        self.client
            .lock()
            .as_ref()
            .map_or(0, |client| client.sockets())
    }

    /// Halt, first half: refuses new work, resets every stream, closes
    /// every listener, stops the timers. ≤ DISPATCH_LEVEL but for the
    /// timers' stop (PASSIVE_LEVEL in the kernel).
    pub fn abort_all(&self) {
        self.closed.store(true, Ordering::Release);
        let streams: Vec<Arc<WskStream>> = core::mem::take(&mut *self.streams.lock())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for stream in streams {
            stream.close(true);
        }
        let listeners: Vec<Arc<WskListener>> = core::mem::take(&mut *self.listeners.lock())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for listener in listeners {
            listener.close();
        }
        self.timers.stop();
    }

    /// Halt, second half (PASSIVE_LEVEL): waits until every socket is
    /// closed, polling every `poll_100ns` at most `polls` times, then
    /// releases the provider. Returns whether none was left.
    pub fn drain(&self, polls: u32, poll_100ns: u64) -> bool {
        for _ in 0..polls {
            if self.sockets_open() == 0 {
                break;
            }
            crate::kernel::time::sleep_passive_100ns(poll_100ns);
        }
        let left = self.sockets_open();
        if left == 0 {
            drop(self.client.lock().take());
        } else {
            crate::klog!(Level::Error, "WSK: {} sockets still open at halt", left);
        }
        left == 0
    }

    /// Halt (PASSIVE_LEVEL): [`abort_all`](Self::abort_all), then
    /// [`drain`](Self::drain) for at most 5 s.
    pub fn shutdown(&self) -> bool {
        self.abort_all();
        self.drain(500, 100_000)
    }
}

/// The net's own provider, captured without waiting (the driver's VXLAN
/// port opens its datagram sockets on the same client; `driver::frames`).
impl WskSource for WskNet {
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus> {
        self.client()
    }
}

impl Net for WskNet {
    fn now_ms(&self) -> u64 {
        self.timers.now_ms()
    }

    fn listen(
        &self,
        local: SocketAddr,
        events: Arc<dyn AcceptEvents>,
    ) -> Result<Box<dyn Listening>, NetError> {
        let client = self.client().map_err(|_| NetError::Failed)?;
        let sink = Arc::new(ListenSink {
            net: self.me.clone(),
            events,
            local,
            bind: SpinLock::new(BindPhase::InCall),
        });
        let listener = super::listen(&client, local, self.send_capacity, sink.clone())
            .map_err(|_| NetError::Resources)?;
        let Some(mut listening) = crate::kernel::mem::try_box(WskListening {
            listener: Arc::clone(&listener),
            local,
            bound: false,
        }) else {
            // Nothing is reported for a socket the caller never gets.
            *sink.bind.lock() = BindPhase::Reported;
            listener.close();
            return Err(NetError::Resources);
        };
        let phase = {
            let mut bind = sink.bind.lock();
            let phase = *bind;
            *bind = match phase {
                BindPhase::InCall => BindPhase::Returned,
                _ => BindPhase::Reported,
            };
            phase
        };
        match phase {
            BindPhase::Done(Err(status)) => {
                // Dropping `listening` closes the socket (the glue closes a
                // failed one itself; closing again changes nothing).
                drop(listening);
                return Err(net_error(status));
            }
            BindPhase::Done(Ok(())) => listening.bound = true,
            // Still binding: `AcceptEvents::bound` follows.
            _ => {}
        }
        track(&self.listeners, &listener);
        Ok(listening as Box<dyn Listening>)
    }

    fn connect(&self, dial: Dial, events: Arc<dyn ConnectEvents>) -> Result<(), NetError> {
        let client = self.client().map_err(|status| {
            if status == STATUS_INSUFFICIENT_RESOURCES {
                NetError::Resources
            } else {
                NetError::Unreachable
            }
        })?;
        let attempt = Arc::new(Attempt {
            net: self.me.clone(),
            events,
            local: dial.local,
            remote: dial.remote,
            over: AtomicBool::new(false),
        });
        let local = dial.local;
        let from = (local.port() != 0 || !local.ip().is_unspecified()).then_some(local);
        super::connect(
            &client,
            from,
            dial.remote,
            self.send_capacity,
            Arc::clone(&attempt) as Arc<dyn super::ConnectEvents>,
        )
        .map_err(|_| NetError::Resources)?;
        let at = self.now_ms().saturating_add(dial.timeout_ms.max(1));
        self.timers
            .add(at, Arc::new(ConnectTimeout(Arc::downgrade(&attempt))));
        Ok(())
    }

    fn timer(&self, at_ms: u64, timer: Arc<dyn Timer>) {
        self.timers.add(at_ms, timer);
    }
}

/// A listening socket of the `Net`; dropping it closes the socket.
struct WskListening {
    listener: Arc<WskListener>,
    local: SocketAddr,
    /// Bound within `listen`.
    bound: bool,
}

impl Listening for WskListening {
    fn local(&self) -> SocketAddr {
        self.local
    }

    fn bound(&self) -> bool {
        self.bound
    }
}

impl Drop for WskListening {
    fn drop(&mut self) {
        self.listener.close();
    }
}

/// Where a listening socket's bind stands relative to [`Net::listen`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BindPhase {
    /// `listen` has not returned and the provider has not completed.
    InCall,
    /// The provider completed within `listen`: `listen` answers it.
    Done(Result<(), NtStatus>),
    /// `listen` returned first: the completion goes to
    /// [`AcceptEvents::bound`].
    Returned,
    /// Answered (or nobody to tell).
    Reported,
}

/// A listener's events, handed on to the connection layer.
struct ListenSink {
    net: Weak<WskNet>,
    events: Arc<dyn AcceptEvents>,
    local: SocketAddr,
    /// Who reports the bind's outcome.
    bind: SpinLock<BindPhase>,
}

fn unspecified_like(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

impl ListenEvents for ListenSink {
    fn accepted(
        &self,
        stream: &Arc<WskStream>,
        local: Option<SocketAddr>,
        remote: Option<SocketAddr>,
    ) -> Option<Arc<dyn StreamEvents>> {
        let net = self.net.upgrade()?;
        if net.closed.load(Ordering::Acquire) {
            return None;
        }
        track(&net.streams, stream);
        drop(net);
        self.events.accepted(Connected {
            stream: Arc::clone(stream) as Arc<dyn Stream>,
            local: local.unwrap_or(self.local),
            peer: remote.unwrap_or_else(|| unspecified_like(self.local)),
            mss: DEFAULT_MSS,
        })
    }

    fn ready(&self, result: Result<(), NtStatus>) {
        if let Err(status) = result {
            crate::klog!(
                Level::Warning,
                "WSK: listening on {} failed, status {:#x}",
                self.local,
                status
            );
        }
        let report = {
            let mut bind = self.bind.lock();
            match *bind {
                BindPhase::InCall => {
                    *bind = BindPhase::Done(result);
                    false
                }
                BindPhase::Returned => {
                    *bind = BindPhase::Reported;
                    true
                }
                BindPhase::Done(_) | BindPhase::Reported => false,
            }
        };
        if report {
            // No lock held (the glue calls `ready` with none of its own).
            self.events.bound(self.local, result.map_err(net_error));
        }
    }
}

/// One connect attempt: reported once, by the provider or the time-out.
struct Attempt {
    net: Weak<WskNet>,
    events: Arc<dyn ConnectEvents>,
    local: SocketAddr,
    remote: SocketAddr,
    over: AtomicBool,
}

impl super::ConnectEvents for Attempt {
    fn connected(
        &self,
        result: Result<Arc<WskStream>, ConnectError>,
    ) -> Option<Arc<dyn StreamEvents>> {
        if self.over.swap(true, Ordering::AcqRel) {
            // Timed out already: a late connection is reset.
            return None;
        }
        match result {
            Ok(stream) => {
                let net = self.net.upgrade()?;
                if net.closed.load(Ordering::Acquire) {
                    return None;
                }
                track(&net.streams, &stream);
                drop(net);
                self.events.connected(Ok(Connected {
                    stream: stream as Arc<dyn Stream>,
                    local: self.local,
                    peer: self.remote,
                    mss: DEFAULT_MSS,
                }))
            }
            Err(error) => {
                let error = match error {
                    ConnectError::Refused => NetError::Refused,
                    ConnectError::Unreachable => NetError::Unreachable,
                    ConnectError::TimedOut => NetError::TimedOut,
                    ConnectError::Other(status) => net_error(status),
                };
                let _ = self.events.connected(Err(error));
                None
            }
        }
    }
}

/// The time-out of one connect attempt.
struct ConnectTimeout(Weak<Attempt>);

impl Timer for ConnectTimeout {
    fn fire(&self, _now: u64) {
        let Some(attempt) = self.0.upgrade() else {
            return;
        };
        if !attempt.over.swap(true, Ordering::AcqRel) {
            let _ = attempt.events.connected(Err(NetError::TimedOut));
        }
    }
}

/// The kernel's source: the driver's WSK registration, captured without
/// waiting.
#[cfg(target_os = "windows")]
pub struct RegistrationSource(pub Arc<super::Registration>);

#[cfg(target_os = "windows")]
impl WskSource for RegistrationSource {
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus> {
        self.0.capture(crate::abi::WSK_NO_WAIT)
    }
}
