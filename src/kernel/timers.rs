//! One-shot timers for the kernel's [`Net`](super::tcp::Net): many
//! [`Timer`]s by due time, served by one platform alarm.
//!
//! [`Timers`] is plain Rust: a list of `(due, timer)` and the deadline the
//! alarm is set for. The platform [`Alarm`] is one re-armable one-shot that
//! calls [`Timers::expire`] when it goes off: in the kernel a `KTIMER` whose
//! `KDPC` runs at DISPATCH_LEVEL (`ktimer::kernel_alarm`, over the interrupt-time
//! clock), on the host a [`PlayedAlarm`] whose clock and firing the tests
//! drive by hand, as they drive the test WSK provider.
//!
//! Every [`Timer::fire`] is called with no lock held, so a timer may arm
//! another (the connection manager re-arms from its ticks).

use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use super::sync::SpinLock;
use super::tcp::Timer;

/// The platform's one-shot alarm and clock.
pub trait Alarm: Send + Sync {
    /// The clock, in ms (monotonic).
    fn now_ms(&self) -> u64;
    /// Makes the alarm go off (call [`Timers::expire`]) once the clock
    /// reaches `at_ms`, replacing an earlier setting. ≤ DISPATCH_LEVEL.
    fn set(&self, at_ms: u64);
    /// Stops the alarm: once this returns it does not go off again
    /// (PASSIVE_LEVEL in the kernel: it waits for a running expiry).
    fn stop(&self);
    /// The timers the alarm serves (called once, by [`Timers::new`]).
    fn attach(&self, timers: Weak<Timers>);
}

/// The timers waiting, and the deadline the alarm is set for.
struct Due {
    timers: Vec<(u64, Arc<dyn Timer>)>,
    armed: Option<u64>,
    stopped: bool,
}

/// One-shot timers served by one [`Alarm`].
pub struct Timers {
    due: SpinLock<Due>,
    alarm: Box<dyn Alarm>,
}

/// How many timers one expiry fires at most before it re-arms (a timer
/// that keeps arming itself in the past cannot hold the DPC forever).
const FIRE_LIMIT: usize = 1024;

impl Timers {
    /// Timers served by `alarm`, which is given a weak reference to call
    /// [`expire`](Self::expire) through.
    pub fn new(alarm: Box<dyn Alarm>) -> Arc<Self> {
        Arc::new_cyclic(|me| {
            alarm.attach(me.clone());
            Self {
                due: SpinLock::new(Due {
                    timers: Vec::new(),
                    armed: None,
                    stopped: false,
                }),
                alarm,
            }
        })
    }

    /// The clock, in ms.
    pub fn now_ms(&self) -> u64 {
        self.alarm.now_ms()
    }

    /// Calls `timer` once the clock reaches `at_ms`. A timer that cannot be
    /// queued (no memory, or stopped) is dropped: its owner's own teardown
    /// covers it (the connection manager's are time-outs).
    pub fn add(&self, at_ms: u64, timer: Arc<dyn Timer>) {
        let set = {
            let mut due = self.due.lock();
            if due.stopped || due.timers.try_reserve(1).is_err() {
                crate::klog!(super::log::Level::Warning, "timer at {} ms dropped", at_ms);
                return;
            }
            due.timers.push((at_ms, timer));
            let earlier = due.armed.is_none_or(|armed| at_ms < armed);
            if earlier {
                due.armed = Some(at_ms);
            }
            earlier
        };
        if set {
            self.alarm.set(at_ms);
        }
    }

    /// The alarm went off: fires every timer due (no lock held), then sets
    /// the alarm for the next one.
    pub fn expire(&self) {
        for _ in 0..FIRE_LIMIT {
            let now = self.alarm.now_ms();
            let timer = {
                let mut due = self.due.lock();
                let index = due.timers.iter().position(|(at, _)| *at <= now);
                index.map(|i| due.timers.swap_remove(i).1)
            };
            let Some(timer) = timer else { break };
            timer.fire(now);
        }
        let next = {
            let mut due = self.due.lock();
            let next = due.timers.iter().map(|(at, _)| *at).min();
            due.armed = next.filter(|_| !due.stopped);
            due.armed
        };
        if let Some(at) = next {
            self.alarm.set(at);
        }
    }

    /// Timers waiting.
    pub fn pending(&self) -> usize {
        self.due.lock().timers.len()
    }

    /// The deadline the alarm is set for.
    pub fn armed(&self) -> Option<u64> {
        self.due.lock().armed
    }

    /// Stops the alarm and drops every waiting timer (halt; PASSIVE_LEVEL).
    pub fn stop(&self) {
        let dropped = {
            let mut due = self.due.lock();
            due.stopped = true;
            due.armed = None;
            core::mem::take(&mut due.timers)
        };
        self.alarm.stop();
        drop(dropped);
    }
}

/// The host's alarm, played by the tests: its clock moves only when told
/// ([`PlayedClock::advance`]), and it goes off then, as a `KTIMER`'s DPC
/// would.
#[cfg(not(target_os = "windows"))]
pub struct PlayedAlarm {
    clock: Arc<PlayedClock>,
}

/// The played clock, shared by the tests and the alarms they play.
#[cfg(not(target_os = "windows"))]
#[derive(Default)]
pub struct PlayedClock {
    now: core::sync::atomic::AtomicU64,
    set: SpinLock<Option<u64>>,
    targets: SpinLock<Vec<Weak<Timers>>>,
}

#[cfg(not(target_os = "windows"))]
impl PlayedClock {
    /// A clock at `start` ms.
    pub fn new(start: u64) -> Arc<Self> {
        let clock = Arc::new(Self::default());
        clock
            .now
            .store(start, core::sync::atomic::Ordering::Release);
        clock
    }

    /// Timers over an alarm of this clock.
    pub fn timers(self: &Arc<Self>) -> Arc<Timers> {
        let timers = Timers::new(Box::new(PlayedAlarm {
            clock: Arc::clone(self),
        }));
        self.targets.lock().push(Arc::downgrade(&timers));
        timers
    }

    /// The clock, in ms.
    pub fn now(&self) -> u64 {
        self.now.load(core::sync::atomic::Ordering::Acquire)
    }

    /// The latest deadline an alarm was set for.
    pub fn last_set(&self) -> Option<u64> {
        *self.set.lock()
    }

    /// Moves the clock `ms` on and lets every alarm of it go off (the DPC).
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, core::sync::atomic::Ordering::AcqRel);
        let targets: Vec<Arc<Timers>> = self
            .targets
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for timers in targets {
            if timers.armed().is_some_and(|at| at <= self.now()) {
                timers.expire();
            }
        }
    }
}

#[cfg(not(target_os = "windows"))]
impl Alarm for PlayedAlarm {
    fn now_ms(&self) -> u64 {
        self.clock.now()
    }

    fn set(&self, at_ms: u64) {
        *self.clock.set.lock() = Some(at_ms);
    }

    fn stop(&self) {}

    fn attach(&self, _timers: Weak<Timers>) {}
}

#[cfg(target_os = "windows")]
pub use super::ktimer::kernel_alarm;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Fired(Mutex<Vec<(u32, u64)>>);

    struct Mark(Arc<Fired>, u32);

    impl Timer for Mark {
        fn fire(&self, now: u64) {
            self.0.0.lock().unwrap().push((self.1, now));
        }
    }

    /// A played clock at `start` and its timers, with a [`Mark`] added for
    /// each `(due, mark)`, in order; the marks record into the `Fired`.
    fn played(start: u64, marks: &[(u64, u32)]) -> (Arc<PlayedClock>, Arc<Timers>, Arc<Fired>) {
        let clock = PlayedClock::new(start);
        let timers = clock.timers();
        let fired = Arc::new(Fired::default());
        for &(due, mark) in marks {
            timers.add(due, Arc::new(Mark(fired.clone(), mark)));
        }
        (clock, timers, fired)
    }

    #[test]
    fn test_timers_fire_in_due_order_when_the_alarm_goes_off() {
        let (clock, timers, fired) = played(1000, &[(1300, 3), (1100, 1), (1200, 2)]);
        assert_eq!(clock.last_set(), Some(1100), "the alarm: the earliest");
        clock.advance(50);
        assert!(fired.0.lock().unwrap().is_empty(), "nothing due yet");
        clock.advance(150);
        assert_eq!(*fired.0.lock().unwrap(), [(1, 1200), (2, 1200)]);
        assert_eq!(clock.last_set(), Some(1300), "re-armed for the next");
        clock.advance(100);
        assert_eq!(fired.0.lock().unwrap().len(), 3);
        assert_eq!(timers.pending(), 0);
        assert_eq!(timers.armed(), None);
    }

    #[test]
    fn test_a_timer_due_now_fires_at_the_next_expiry_and_stop_drops_the_rest() {
        let (clock, timers, fired) = played(0, &[(0, 1), (500, 2)]);
        clock.advance(0);
        assert_eq!(*fired.0.lock().unwrap(), [(1, 0)]);
        timers.stop();
        assert_eq!(timers.pending(), 0);
        timers.add(1, Arc::new(Mark(fired.clone(), 3)));
        clock.advance(1000);
        assert_eq!(fired.0.lock().unwrap().len(), 1, "nothing after stop");
    }
}
