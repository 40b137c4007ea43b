//! Close racing every entry point (issue 15, rules L17–L19): for every object
//! type and every slot of its dispatch table that enters the object — the
//! list comes from the generated tables (`provider::hook::tables`), so a new
//! slot is raced without a change here (and fails until it has a call below)
//! — calls of that slot on several threads are held *inside* the object by
//! the host-mode thunk hook (`provider::hook`), at a known point, while the
//! test closes the object; then they are let go. Each race checks:
//!
//! * the close returns what L18 names (`STATUS_SUCCESS` or `STATUS_PENDING`,
//!   and a pending close completes), and the breach is reported (L17)
//!   naming the close and the call inside;
//! * every call held inside returns normally (whatever status);
//! * nothing is left: every object the calls created is closed by the test,
//!   and once all closes completed no provider object is allocated (no
//!   leak); every wait is bounded (no hang).
//!
//! Two points are raced: [`Point::Entered`] (the close completes before the
//! method runs: the method then runs on a closed object) and
//! [`Point::Leaving`] (the method has run; the close lands before the call
//! leaves, so the call's exit frees the object). One more race per type
//! holds one call of *every* slot at once. `.ci/run` runs this binary under
//! valgrind (memcheck), which turns any read of freed memory into a failure.
//!
//! This file is its own test binary, and its tests take one lock, so that the
//! leak count and the hook see only one race at a time.

#![allow(
    clippy::too_many_lines,
    clippy::cast_possible_truncation,
    reason = "one table of calls per object type reads best as one match"
)]

#[path = "conformance/harness/mod.rs"]
mod harness;

/// The transport every fixture of this binary uses (`harness::Transport`).
const TRANSPORT: harness::Transport = harness::Transport::Local;

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use harness::*;
use softndk::abi::*;
use softndk::provider::hook::{self, Point, TableSlots};
use softndk::provider::host::SoftNdkCloseAdapter;
use softndk::provider::object::{Breach, Slot, consumer_breaches, live_objects, reported_breach};

/// One race at a time in this binary (the hook and the leak count are
/// process-wide).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Calls of one slot held inside the object at once.
const THREADS: usize = 3;

// ---------------------------------------------------------------------------
// What calls leave behind
// ---------------------------------------------------------------------------

/// What a raced call left for the test: objects it created (closed by the
/// test afterwards, as a consumer must) or a request completion to wait for.
enum Made {
    Cq(Cq),
    Pd(Pd),
    Mr(Mr),
    Mw(Mw),
    Srq(Srq),
    Qp(Qp),
    Connector(Connector),
    Listener(Listener),
    Endpoint(SharedEndpoint),
    /// A request that returned `STATUS_PENDING`: its completion (L8).
    Pending(Arc<Signal>),
}

impl Made {
    fn close(self) {
        let status = match self {
            Self::Cq(o) => o.close(),
            Self::Pd(o) => o.close(),
            Self::Mr(o) => o.close(),
            Self::Mw(o) => o.close(),
            Self::Srq(o) => o.close(),
            Self::Qp(o) => o.close(),
            Self::Connector(o) => {
                let (status, signal) = o.disconnect();
                if status == STATUS_PENDING {
                    let _ = signal.wait();
                }
                o.close()
            }
            Self::Listener(o) => o.close(),
            Self::Endpoint(o) => o.close(),
            Self::Pending(_) => STATUS_SUCCESS,
        };
        assert_close(status);
    }
}

/// `Made::Pending` for a call that returned `status` with completion
/// `signal`, else nothing.
fn pending(status: NtStatus, signal: Arc<Signal>) -> Vec<Made> {
    if status == STATUS_PENDING {
        vec![Made::Pending(signal)]
    } else {
        Vec::new()
    }
}

/// The calls of `slots`, each made by `call`.
fn calls_of(slots: &[&'static str], call: impl Fn(&'static str) -> Call) -> Vec<Call> {
    slots.iter().map(|&slot| call(slot)).collect()
}

/// A call that leaves nothing for the teardown.
fn quiet(call: impl Fn(&World) + Send + Sync + 'static) -> Call {
    Arc::new(move |w: &World| {
        call(w);
        Vec::new()
    })
}

/// A call that may pend: its status and its completion's signal.
fn pends(call: impl Fn(&World) -> (NtStatus, Arc<Signal>) + Send + Sync + 'static) -> Call {
    Arc::new(move |w: &World| {
        let (status, signal) = call(w);
        pending(status, signal)
    })
}

/// A call through a slot that completes on `on_status`: given the context
/// of a fresh signal of the world, it returns the slot's status.
fn completing(call: impl Fn(&World, *mut c_void) -> NtStatus + Send + Sync + 'static) -> Call {
    Arc::new(move |w: &World| {
        let signal = w.signal();
        let status = call(w, signal.ctx());
        pending(status, signal)
    })
}

/// A create through a slot: given the out-pointer, it returns the slot's
/// status; the object, wrapped by `wrap`, when it succeeded.
fn creating<T: 'static>(
    create: impl Fn(&World, *mut *mut T) -> NtStatus + Send + Sync + 'static,
    wrap: fn(*mut T) -> Made,
) -> Call {
    Arc::new(move |w: &World| {
        let mut out = std::ptr::null_mut();
        let status = create(w, &raw mut out);
        created(status, out, wrap)
    })
}

/// The object a create made, if it did.
fn made<T, E>(result: Result<T, E>, wrap: fn(T) -> Made) -> Vec<Made> {
    result.into_iter().map(wrap).collect()
}

/// A created object when the create succeeded.
fn created<T>(status: NtStatus, out: *mut T, wrap: impl FnOnce(*mut T) -> Made) -> Vec<Made> {
    if status == STATUS_SUCCESS {
        assert!(!out.is_null());
        vec![wrap(out)]
    } else {
        Vec::new()
    }
}

// ---------------------------------------------------------------------------
// The world a race runs in
// ---------------------------------------------------------------------------

/// Every object a race's calls use, the target among them. The teardown
/// closes all but the target, in an order that lets each close complete.
#[derive(Default)]
struct World {
    adapters: Vec<(Adapter, Addr)>,
    cqs: Vec<Cq>,
    pds: Vec<Pd>,
    srqs: Vec<Srq>,
    qps: Vec<Qp>,
    regions: Vec<Region>,
    mrs: Vec<Mr>,
    mws: Vec<Mw>,
    frmrs: Vec<Frmr>,
    connectors: Vec<Connector>,
    listeners: Vec<(Listener, Arc<Incoming>, Addr)>,
    endpoints: Vec<SharedEndpoint>,
    buffers: Vec<Mutex<Buffer>>,
    lams: Mutex<Vec<Vec<u64>>>,
    /// Contexts handed to the provider (completions, events): they live
    /// until the world is gone.
    signals: Mutex<Vec<Arc<Signal>>>,
    /// Incoming connectors already taken from the listeners' events.
    taken: Mutex<Vec<usize>>,
}

// SAFETY: the world's buffers hold host-mode MDLs (raw pointers to their own
// storage), used by one call at a time under their mutex; every provider
// object may be used from any thread (I6).
unsafe impl Send for World {}
// SAFETY: as above.
unsafe impl Sync for World {}

impl World {
    fn adapter(&self) -> &Adapter {
        &self.adapters[0].0
    }

    fn addr(&self) -> Addr {
        self.adapters[0].1
    }

    /// The MDL and length of buffer `n` (the buffer outlives every call;
    /// the provider only reads the MDL).
    fn mdl(&self, n: usize) -> (*mut Mdl, usize) {
        let mut buffer = self.buffers[n].lock().unwrap();
        (buffer.mdl(), buffer.len)
    }

    /// A new completion context, kept alive by the world.
    fn signal(&self) -> Arc<Signal> {
        let signal = Signal::new();
        self.signals.lock().unwrap().push(Arc::clone(&signal));
        signal
    }

    /// Rejects and closes every incoming connector not yet taken (a
    /// connect a raced call made reaches a listener of the world).
    fn reject_incoming(&self, target: usize) {
        for (_, incoming, _) in &self.listeners {
            for n in 1..=incoming.count() {
                let connector = incoming.wait_nth(n);
                let ptr = connector.0 as usize;
                let mut taken = self.taken.lock().unwrap();
                if ptr == target || taken.contains(&ptr) {
                    continue;
                }
                taken.push(ptr);
                drop(taken);
                let _ = connector.reject(b"");
                assert_close(connector.close());
            }
        }
    }

    /// Closes everything but `target` (whose close the race started):
    /// connectors, listeners, endpoints, QPs, SRQs, memory, CQs and PDs;
    /// then `target_done` (waits for the target's close); then the
    /// adapters.
    fn teardown(mut self, target: usize, made: Vec<Made>, target_done: impl FnOnce()) {
        let not = |p: *mut c_void| p as usize != target;
        // Every object of the lists named but the target, closed, list by
        // list.
        macro_rules! close_others {
            ($world:ident: $($list:ident),*) => {$(
                for object in std::mem::take(&mut $world.$list) {
                    if not(object.0.cast()) {
                        assert_close(object.close());
                    }
                }
            )*};
        }
        // Connects the calls made reach the world's listeners: refuse them,
        // until every pending request of the calls has completed.
        let signals: Vec<Arc<Signal>> = made
            .iter()
            .filter_map(|m| match m {
                Made::Pending(s) => Some(Arc::clone(s)),
                _ => None,
            })
            .collect();
        // X1: a disconnect completes once the peer's arrives: start all.
        let disconnects: Vec<_> = self
            .connectors
            .iter()
            .filter(|c| not(c.0.cast()))
            .map(Connector::disconnect)
            .collect();
        for (status, signal) in disconnects {
            if status == STATUS_PENDING {
                let _ = signal.wait();
            }
        }
        wait_until("the raced calls' requests complete", || {
            self.reject_incoming(target);
            signals.iter().all(|s| s.count() > 0)
        });
        for m in made {
            m.close();
        }
        for connector in std::mem::take(&mut self.connectors) {
            if not(connector.0.cast()) {
                assert_close(connector.close());
            }
        }
        self.reject_incoming(target);
        for (listener, incoming, _) in std::mem::take(&mut self.listeners) {
            if not(listener.0.cast()) {
                assert_close(listener.close());
            }
            // Its context outlives the listener's close (done above, or
            // the target's, waited for below): leaked, a few bytes a race.
            std::mem::forget(incoming);
        }
        close_others!(self: endpoints, qps, srqs, mws);
        for region in std::mem::take(&mut self.regions) {
            if not(region.mr.0.cast()) {
                region.close();
            } else {
                // The target's memory: kept until its close completed.
                self.buffers.push(Mutex::new(region.buffer));
            }
        }
        for frmr in std::mem::take(&mut self.frmrs) {
            if not(frmr.mr.0.cast()) {
                assert_close(frmr.mr.close());
            }
            let mut lam = frmr.lam;
            self.adapters[0].0.release_lam(&mut lam);
            drop(frmr.buffer);
        }
        close_others!(self: mrs, cqs, pds);
        target_done();
        if not(self.adapters[0].0.0.cast()) {
            for mut lam in self.lams.into_inner().unwrap() {
                self.adapters[0].0.release_lam(&mut lam);
            }
        }
        for (adapter, _) in self.adapters {
            if not(adapter.0.cast()) {
                adapter.close();
            }
        }
        drop(self.buffers);
        drop(self.signals);
    }
}

// ---------------------------------------------------------------------------
// The race
// ---------------------------------------------------------------------------

/// Builds a race's world, target and calls for the slots given.
type Build = fn(&[&'static str]) -> (World, Target, Vec<Call>);

/// A raced call: one slot's call on the world's target.
type Call = Arc<dyn Fn(&World) -> Vec<Made> + Send + Sync>;

/// The object a race closes.
#[derive(Clone, Copy)]
struct Target {
    ptr: usize,
    /// Its close slot; `None`: the adapter (`SoftNdkCloseAdapter`).
    close: Option<NdkFnCloseObject>,
    /// The close's name in the L17 report.
    close_name: &'static str,
}

/// Where the calls wait inside the object until the test lets them go.
#[derive(Default)]
struct Gate {
    state: Mutex<(Vec<&'static str>, bool)>,
    cv: Condvar,
}

impl Gate {
    /// Called by the hook on the calling thread: records the slot and
    /// waits (bounded) to be let go. No panic here: it runs inside a
    /// provider call.
    fn hold(&self, slot: &'static str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0.push(slot);
        self.cv.notify_all();
        let _ = self
            .cv
            .wait_timeout_while(state, WAIT, |s| !s.1)
            .unwrap_or_else(PoisonError::into_inner);
    }

    fn held(&self) -> Vec<&'static str> {
        self.state.lock().unwrap().0.clone()
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

/// Runs `calls` (slot name, call) on threads of their own, holds each
/// inside the target at `point`, closes the target, lets the calls go and
/// checks what the module docs say.
fn race(world: World, target: Target, calls: Vec<(&'static str, Call)>, point: Point) {
    let world = Arc::new(world);
    let gate = Arc::new(Gate::default());
    let hook = {
        let gate = Arc::clone(&gate);
        hook::install(move |slot, object, at| {
            if object == target.ptr && at == point {
                gate.hold(slot.name());
            }
        })
    };
    let n = calls.len();
    let threads: Vec<(&str, JoinHandle<Vec<Made>>)> = calls
        .into_iter()
        .map(|(name, call)| {
            let world = Arc::clone(&world);
            (name, std::thread::spawn(move || call(&world)))
        })
        .collect();
    wait_until("every call is held inside the object", || {
        gate.held().len() == n
    });
    let held = gate.held();
    // L17 broken on purpose: the close while the calls are inside.
    let before = consumer_breaches(Breach::L17);
    let close = target
        .close
        .map(|slot| close_started(target.ptr as *mut _, slot));
    let closer = target.close.is_none().then(|| {
        let ptr = target.ptr;
        // SAFETY: the test's open adapter, closed once, here; it blocks
        // until everything on it is closed (L27).
        std::thread::spawn(move || unsafe { SoftNdkCloseAdapter(ptr as *mut NdkAdapter) })
    });
    wait_until("the close reports the breach (L17)", || {
        consumer_breaches(Breach::L17) > before
    });
    let report = reported_breach(target.ptr as *const c_void)
        .expect("a report on the object")
        .to_string();
    assert!(
        report.contains(target.close_name) && held.iter().any(|slot| report.contains(slot)),
        "L17 report {report:?} names {} and one of {held:?}",
        target.close_name
    );
    gate.release();
    let mut made = Vec::new();
    for (name, thread) in threads {
        wait_until(&format!("{name} returns"), || thread.is_finished());
        made.extend(thread.join().unwrap_or_else(|_| panic!("{name} panicked")));
    }
    drop(hook);
    let world = Arc::try_unwrap(world).unwrap_or_else(|_| panic!("the world is ours again"));
    world.teardown(target.ptr, made, || {
        if let Some((status, signal)) = close {
            assert_close(status);
            if status == STATUS_PENDING {
                let _ = signal.wait();
            }
        }
    });
    if let Some(closer) = closer {
        wait_until("the adapter's close returns", || closer.is_finished());
        assert_eq!(
            closer.join().unwrap(),
            STATUS_SUCCESS,
            "SoftNdkCloseAdapter"
        );
    }
}

/// Races every slot of `table` (built by `build` for the slots given) at
/// both points, then all slots at once; no provider object is left after.
fn race_table(object_type: NdkObjectType, build: Build) {
    let _serial = serial();
    let table: TableSlots = hook::tables()
        .into_iter()
        .find(|t| t.object_type == object_type)
        .expect("a table of this type");
    let names: Vec<&'static str> = table.slots.iter().map(Slot::name).collect();
    let baseline = live_objects();
    let mut rounds: Vec<(Vec<&'static str>, Point, usize)> = Vec::new();
    for &name in &names {
        rounds.push((vec![name], Point::Entered, THREADS));
        rounds.push((vec![name], Point::Leaving, 1));
    }
    rounds.push((names.clone(), Point::Entered, 1));
    for (slots, point, copies) in rounds {
        eprintln!("race: {slots:?} at {point:?}, {copies} call(s) each");
        let (world, target, calls) = build(&slots);
        let mut raced = Vec::new();
        for (&name, call) in slots.iter().zip(calls) {
            for _ in 0..copies {
                raced.push((name, Arc::clone(&call)));
            }
        }
        race(world, target, raced, point);
        wait_until(
            &format!("every object freed after {slots:?} at {point:?}"),
            || live_objects() == baseline,
        );
    }
}

/// The call of `slot`, or a failure naming a slot this file does not know.
fn unknown(slot: &str) -> ! {
    panic!("{slot}: a new slot? add its call to tests/close_race.rs")
}

/// L17, one `#[test]` per object type: every slot of its table raced against its
/// close ([`race_table`]), in the world its function builds.
macro_rules! l17_tests {
    ($(fn $name:ident() = $object_type:ident, $build:ident;)*) => {
        $(
            #[test]
            fn $name() {
                race_table(NdkObjectType::$object_type, $build);
            }
        )*
    };
}

l17_tests! {
    fn l17_adapter_closed_while_each_slot_is_inside() = ADAPTER, adapter_world;
    fn l17_pd_closed_while_each_slot_is_inside() = PD, pd_world;
    fn l17_cq_closed_while_each_slot_is_inside() = CQ, cq_world;
    fn l17_qp_closed_while_each_slot_is_inside() = QP, qp_world;
    fn l17_srq_closed_while_each_slot_is_inside() = SRQ, srq_world;
    fn l17_mr_closed_while_each_slot_is_inside() = MR, mr_world;
    fn l17_mw_closed_while_each_slot_is_inside() = MW, mw_world;
    fn l17_shared_endpoint_closed_while_each_slot_is_inside() = SHARED_ENDPOINT, endpoint_world;
    fn l17_listener_closed_while_each_slot_is_inside() = LISTENER, listener_world;
    fn l17_connector_closed_while_each_slot_is_inside() = CONNECTOR, connector_world;
}

// ---------------------------------------------------------------------------
// Per object type: its world and its calls
// ---------------------------------------------------------------------------

fn opened() -> World {
    let (addr, _) = fresh_addresses();
    World {
        adapters: vec![(open_adapter(addr), addr)],
        ..World::default()
    }
}

/// The object whose close slot is `slot` (its pointer and its close), with
/// the close's name.
fn slot_target((header, close): CloseSlot, close_name: &'static str) -> Target {
    Target {
        ptr: header as usize,
        close: Some(close),
        close_name,
    }
}

fn adapter_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let world = opened();
    let mut buffer = Buffer::new(4096, 0, 0);
    // LAMs for the ReleaseLam calls (none else: the adapter is closed by
    // the race, so the test could not release them).
    let lams = (0..THREADS)
        .filter(|_| slots.contains(&"NdkReleaseLAM"))
        .map(|_| world.adapter().build_lam(&mut buffer).1)
        .collect();
    *world.lams.lock().unwrap() = lams;
    let world = World {
        buffers: vec![Mutex::new(buffer), Mutex::new(Buffer::new(4096, 0, 0))],
        ..world
    };
    let target = Target {
        ptr: world.adapter().0 as usize,
        close: None,
        close_name: "SoftNdkCloseAdapter",
    };
    let calls = calls_of(slots, |slot| match slot {
        "NdkQueryAdapterInfo" => quiet(|w| {
            let mut info = std::mem::MaybeUninit::<NdkAdapterInfo>::zeroed();
            let mut size = size_of::<NdkAdapterInfo>() as u32;
            // SAFETY: a buffer of `size` bytes.
            let _ = unsafe {
                (w.adapter().d().ndk_query_adapter_info)(
                    w.adapter().0,
                    info.as_mut_ptr(),
                    &raw mut size,
                )
            };
        }),
        "NdkCreateCq" => Arc::new(|w: &World| {
            let watch = w.signal();
            made(w.adapter().try_cq(16, &watch), Made::Cq)
        }),
        "NdkCreatePd" => creating(
            |w, out| {
                // SAFETY: valid arguments.
                unsafe {
                    (w.adapter().d().ndk_create_pd)(w.adapter().0, None, std::ptr::null_mut(), out)
                }
            },
            |p| Made::Pd(Pd(p)),
        ),
        "NdkCreateSharedEndpoint" => {
            Arc::new(|w: &World| made(w.adapter().try_shared_endpoint(w.addr()), Made::Endpoint))
        }
        "NdkCreateConnector" => creating(
            |w, out| {
                // SAFETY: valid arguments.
                unsafe {
                    (w.adapter().d().ndk_create_connector)(
                        w.adapter().0,
                        None,
                        std::ptr::null_mut(),
                        out,
                    )
                }
            },
            |p| Made::Connector(Connector(p)),
        ),
        "NdkCreateListener" => Arc::new(|w: &World| {
            let incoming = Incoming::new();
            let mut l = std::ptr::null_mut();
            // SAFETY: valid arguments; `incoming` is leaked below, so
            // it outlives the listener.
            let status = unsafe {
                (w.adapter().d().ndk_create_listener)(
                    w.adapter().0,
                    Some(on_connect),
                    incoming.ctx(),
                    None,
                    std::ptr::null_mut(),
                    &raw mut l,
                )
            };
            std::mem::forget(incoming);
            created(status, l, |p| Made::Listener(Listener(p)))
        }),
        "NdkBuildLAM" => quiet(|w| {
            let (mdl, len) = w.mdl(1);
            let mut lam = [0_u64; 8];
            let mut size = size_of_val(&lam) as u32;
            let mut fbo = 0_u32;
            // SAFETY: the buffer's MDL and a LAM of `size` bytes.
            let status = unsafe {
                (w.adapter().d().ndk_build_lam)(
                    w.adapter().0,
                    mdl,
                    len,
                    None,
                    std::ptr::null_mut(),
                    lam.as_mut_ptr().cast(),
                    &raw mut size,
                    &raw mut fbo,
                )
            };
            if status == STATUS_SUCCESS {
                w.lams.lock().unwrap().push(lam.to_vec());
            }
        }),
        "NdkReleaseLAM" => quiet(|w| {
            let lam = w.lams.lock().unwrap().pop();
            if let Some(mut lam) = lam {
                w.adapter().release_lam(&mut lam);
            }
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

/// An adapter with a CQ (notifying a signal of the world) and a PD.
fn with_pd() -> World {
    let mut world = opened();
    let watch = world.signal();
    let cq = world.adapter().try_cq(64, &watch).expect("CreateCq");
    let pd = world.adapter().pd();
    world.cqs.push(cq);
    world.pds.push(pd);
    world
}

fn pd_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = with_pd();
    let srq = world.pds[0].try_srq(16, 1, 0, None).expect("CreateSrq");
    world.srqs.push(srq);
    let target = slot_target(world.pds[0].close_slot(), "NdkClosePd");
    let calls = calls_of(slots, |slot| match slot {
        "NdkCreateMr" => Arc::new(|w: &World| made(w.pds[0].try_mr(false), Made::Mr)),
        "NdkCreateMw" => Arc::new(|w: &World| {
            let pd = &w.pds[0];
            let mut mw = std::ptr::null_mut();
            // SAFETY: valid arguments.
            let status =
                unsafe { (pd.d().ndk_create_mw)(pd.0, None, std::ptr::null_mut(), &raw mut mw) };
            created(status, mw, |p| Made::Mw(Mw(p)))
        }),
        "NdkCreateSrq" => Arc::new(|w: &World| made(w.pds[0].try_srq(16, 1, 0, None), Made::Srq)),
        "NdkCreateQp" => Arc::new(|w: &World| {
            made(
                w.pds[0].try_qp(&w.cqs[0], &w.cqs[0], RecvQueue::SMALL, 1, 4, 1, 0),
                Made::Qp,
            )
        }),
        "NdkCreateQpWithSrq" => Arc::new(|w: &World| {
            let shared = RecvQueue::Shared(&w.srqs[0]);
            made(
                w.pds[0].try_qp(&w.cqs[0], &w.cqs[0], shared, 1, 4, 1, 0),
                Made::Qp,
            )
        }),
        "NdkGetPrivilegedMemoryRegionToken" => quiet(|w| {
            let _ = w.pds[0].privileged_token();
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

fn cq_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = with_pd();
    // A flushed receive: one completion waits in the CQ, so an arm fires
    // and a poll finds something; the QP holds the CQ's close (L24).
    let region = Region::new(&world.pds[0], 4096, 0, MR_LOCAL_WRITE);
    let qp = world.pds[0].qp(&world.cqs[0], &world.cqs[0], 1);
    for context in 1..=8 {
        assert_eq!(qp.receive(context, &[region.sge(0, 64)]), STATUS_SUCCESS);
    }
    qp.flush();
    world.qps.push(qp);
    world.regions.push(region);
    let target = slot_target(world.cqs[0].close_slot(), "NdkCloseCq");
    let calls = calls_of(slots, |slot| match slot {
        "NdkResizeCq" => completing(|w, ctx| {
            let cq = &w.cqs[0];
            // SAFETY: a CQ of the world; the signal lives as long.
            unsafe { (cq.d().ndk_resize_cq)(cq.0, 128, Some(on_status), ctx) }
        }),
        "NdkArmCq" => quiet(|w| {
            w.cqs[0].arm(NdkCqNotifyType::ANY);
        }),
        "NdkGetCqResults" => quiet(|w| {
            let _ = w.cqs[0].poll(2);
        }),
        "NdkControlCqInterruptModeration" => quiet(|w| {
            let cq = &w.cqs[0];
            // SAFETY: a CQ of the world.
            let _ = unsafe { (cq.d().ndk_control_cq_interrupt_moderation)(cq.0, 0, 0) };
        }),
        "NdkGetCqResultsEx" => quiet(|w| {
            let _ = w.cqs[0].poll_ex(2);
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

/// A connected pair's A side, as a world: adapters A and B, CQ, PD and QP
/// each (A's first), the connectors and B's listener; memory for every
/// kind of post: a local region and a window on A, a remote region on B
/// (receives posted on B for the sends), a fast-register MR on A.
fn pair_world() -> World {
    let pair = Pair::new();
    let mut world = World::default();
    let mine = Region::pattern(&pair.a_pd, 4096, 3, MR_ALL);
    let theirs = Region::new(&pair.b_pd, 4096, 0, MR_ALL);
    for context in 1..=16 {
        assert_eq!(
            pair.b_qp.receive(context, &[theirs.sge(0, 4096)]),
            STATUS_SUCCESS
        );
    }
    let mw = pair.a_pd.mw();
    let frmr = Frmr::new(&pair.a, &pair.a_pd, 4096, 0, 1, true);
    let (a_addr, b_addr) = (Addr::empty(), Addr::empty());
    world.adapters = vec![(pair.a, a_addr), (pair.b, b_addr)];
    world.cqs = vec![pair.a_cq, pair.b_cq];
    world.pds = vec![pair.a_pd, pair.b_pd];
    world.qps = vec![pair.a_qp, pair.b_qp];
    // B's connector came from the listener's connect event: taken.
    world.taken.lock().unwrap().push(pair.b_conn.0 as usize);
    world.connectors = vec![pair.a_conn, pair.b_conn];
    world.listeners = vec![(pair.listener, pair.incoming, Addr::empty())];
    world.regions = vec![mine, theirs];
    world.mws = vec![mw];
    world.frmrs = vec![frmr];
    world
        .signals
        .lock()
        .unwrap()
        .extend([pair.a_disconnects, pair.b_disconnects]);
    world
}

fn qp_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let world = pair_world();
    let target = slot_target(world.qps[0].close_slot(), "NdkCloseQp");
    let calls = calls_of(slots, |slot| match slot {
        "NdkFlush" => quiet(|w| {
            w.qps[0].flush();
        }),
        "NdkSend" => quiet(|w| {
            let _ = w.qps[0].send(1, &[w.regions[0].sge(0, 64)], 0);
        }),
        "NdkReceive" => quiet(|w| {
            let _ = w.qps[0].receive(2, &[w.regions[0].sge(0, 64)]);
        }),
        "NdkBind" => quiet(|w| {
            let mine = &w.regions[0];
            let _ = w.qps[0].bind(3, &mine.mr, &w.mws[0], mine.remote(0), 64, OP_REMOTE_READ);
        }),
        "NdkFastRegister" => quiet(|w| {
            let _ = w.frmrs[0].post(&w.qps[0], 4, 0);
        }),
        "NdkInvalidate" => quiet(|w| {
            let _ = w.qps[0].invalidate(5, w.mws[0].header(), 0);
        }),
        "NdkRead" => quiet(|w| {
            let (sgl, theirs) = ([w.regions[0].sge(0, 64)], &w.regions[1]);
            let _ = w.qps[0].read(6, &sgl, theirs.remote(0), theirs.token(), 0);
        }),
        "NdkWrite" => quiet(|w| {
            let (sgl, theirs) = ([w.regions[0].sge(0, 64)], &w.regions[1]);
            let _ = w.qps[0].write(7, &sgl, theirs.remote(0), theirs.token(), 0);
        }),
        "NdkSendAndInvalidate" => quiet(|w| {
            let _ = w.qps[0].send_and_invalidate(8, &[w.regions[0].sge(0, 64)], 0, 0);
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

fn srq_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = with_pd();
    let watch = world.signal();
    let srq = world.pds[0]
        .try_srq(16, 1, 4, Some(&watch))
        .expect("CreateSrq");
    world
        .regions
        .push(Region::new(&world.pds[0], 4096, 0, MR_LOCAL_WRITE));
    world.srqs.push(srq);
    let target = slot_target(world.srqs[0].close_slot(), "NdkCloseSrq");
    let calls = calls_of(slots, |slot| match slot {
        "NdkModifySrq" => completing(|w, ctx| {
            let srq = &w.srqs[0];
            // SAFETY: an SRQ of the world; the signal lives as long.
            unsafe { (srq.d().ndk_modify_srq)(srq.0, 32, 2, Some(on_status), ctx) }
        }),
        "NdkSrqReceive" => quiet(|w| {
            let _ = w.srqs[0].receive(1, &[w.regions[0].sge(0, 64)]);
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

fn mr_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = with_pd();
    let only = |name: &str| slots == [name];
    let mr = world.pds[0].mr(only("NdkInitializeFastRegisterMr"));
    let mut buffer = Buffer::new(4096, 0, 0);
    if !only("NdkRegisterMr") && !only("NdkInitializeFastRegisterMr") {
        assert_success!(mr.register(&mut buffer, MR_ALL));
    }
    world.buffers.push(Mutex::new(buffer));
    world.mrs.push(mr);
    let target = slot_target(world.mrs[0].close_slot(), "NdkCloseMr");
    let calls = calls_of(slots, |slot| match slot {
        "NdkRegisterMr" => completing(|w, ctx| {
            let mr = &w.mrs[0];
            let (mdl, len) = w.mdl(0);
            // SAFETY: the world's buffer outlives the MR.
            unsafe { (mr.d().ndk_register_mr)(mr.0, mdl, len, MR_ALL, Some(on_status), ctx) }
        }),
        "NdkDeregisterMr" => completing(|w, ctx| {
            let mr = &w.mrs[0];
            // SAFETY: an MR of the world; the signal lives as long.
            unsafe { (mr.d().ndk_deregister_mr)(mr.0, Some(on_status), ctx) }
        }),
        "NdkInitializeFastRegisterMr" => completing(|w, ctx| {
            let mr = &w.mrs[0];
            // SAFETY: as above.
            unsafe { (mr.d().ndk_initialize_fast_register_mr)(mr.0, 1, 0, Some(on_status), ctx) }
        }),
        "NdkGetRemoteTokenFromMr" => quiet(|w| {
            let _ = w.mrs[0].remote_token();
        }),
        "NdkGetLocalTokenFromMr" => quiet(|w| {
            let _ = w.mrs[0].local_token();
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

fn mw_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = with_pd();
    let mw = world.pds[0].mw();
    world.mws.push(mw);
    let target = slot_target(world.mws[0].close_slot(), "NdkCloseMw");
    let calls = calls_of(slots, |slot| match slot {
        "NdkGetRemoteTokenFromMw" => quiet(|w| {
            let _ = w.mws[0].remote_token();
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

fn endpoint_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = opened();
    let endpoint = world
        .adapter()
        .try_shared_endpoint(world.addr())
        .expect("CreateSharedEndpoint");
    world.endpoints.push(endpoint);
    let target = slot_target(world.endpoints[0].close_slot(), "NdkCloseSharedEndpoint");
    let calls = calls_of(slots, |slot| match slot {
        "NdkGetLocalAddress" => quiet(|w| {
            let _ = get_address(Getter::Endpoint(&w.endpoints[0]), 28);
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

fn listener_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let mut world = opened();
    let addr = world.addr();
    let incoming = Incoming::new();
    let listener = world.adapter().listener(&incoming);
    let mut bound = addr;
    if slots != ["NdkListen"] {
        assert_eq!(listener.listen(addr), STATUS_SUCCESS);
        bound = listener.local_address().1;
    }
    world.listeners.push((listener, incoming, bound));
    let target = slot_target(world.listeners[0].0.close_slot(), "NdkCloseListener");
    let calls = calls_of(slots, |slot| match slot {
        "NdkListen" => completing(|w, ctx| {
            let (listener, _, addr) = &w.listeners[0];
            // SAFETY: a listener of the world; a 28-byte address.
            unsafe {
                (listener.d().ndk_listen)(
                    listener.0,
                    addr.as_ptr(),
                    addr.len(),
                    Some(on_status),
                    ctx,
                )
            }
        }),
        "NdkGetLocalAddress" => quiet(|w| {
            let _ = w.listeners[0].0.local_address();
        }),
        "NdkControlConnectEvents" => quiet(|w| {
            w.listeners[0].0.pause(true);
        }),
        other => unknown(other),
    });
    (world, target, calls)
}

/// Two ends with a QP each and a listener on B ([`Fixture::stage`]), as a
/// world: A's objects first.
fn staged() -> World {
    let ((a, b), (qa, qb), listening) = Fixture::new().stage();
    World {
        adapters: vec![(a.adapter, a.addr), (b.adapter, b.addr)],
        cqs: vec![a.cq, b.cq],
        pds: vec![a.pd, b.pd],
        qps: vec![qa, qb],
        listeners: vec![listening],
        ..World::default()
    }
}

/// A's connector connecting to B's listener: it, and the passive connector
/// of B's connect event (taken, so the teardown does not reject it).
fn connecting(world: &World) -> (Connector, Connector) {
    let active = world.adapter().connector();
    let (status, connected) = active.connect(
        &world.qps[0],
        world.addr(),
        world.listeners[0].2,
        16,
        16,
        b"hello",
    );
    assert!(
        status == STATUS_PENDING || status == STATUS_SUCCESS,
        "Connect {status:#x}"
    );
    world.signals.lock().unwrap().push(connected);
    let passive = world.listeners[0].1.wait_nth(1);
    world.taken.lock().unwrap().push(passive.0 as usize);
    (active, passive)
}

fn connector_world(slots: &[&'static str]) -> (World, Target, Vec<Call>) {
    let first = slots[0];
    let single = slots.len() == 1;
    let mut world;
    let target_ptr;
    if single && ["NdkConnect", "NdkConnectWithSharedEndpoint"].contains(&first) {
        world = staged();
        let endpoint = world
            .adapter()
            .try_shared_endpoint(world.addr())
            .expect("CreateSharedEndpoint");
        world.endpoints.push(endpoint);
        world.connectors.push(world.adapter().connector());
        target_ptr = world.connectors[0].0;
    } else if single && first == "NdkCompleteConnect" {
        world = staged();
        let (active, passive) = connecting(&world);
        let events = world.signal();
        let (status, accepted) = accept_with(
            &passive,
            &world.qps[1],
            (16, 16),
            b"welcome",
            (Some(on_disconnect), events.ctx()),
        );
        assert!(
            status == STATUS_PENDING || status == STATUS_SUCCESS,
            "Accept {status:#x}"
        );
        world.signals.lock().unwrap().push(accepted);
        let connected = Arc::clone(world.signals.lock().unwrap().first().expect("Connect's"));
        assert_eq!(connected.wait(), STATUS_SUCCESS, "Connect completion");
        target_ptr = active.0;
        world.connectors = vec![active, passive];
    } else if single && ["NdkAccept", "NdkReject", "NdkGetConnectionData"].contains(&first) {
        world = staged();
        let (active, passive) = connecting(&world);
        target_ptr = passive.0;
        world.connectors = vec![passive, active];
    } else {
        world = pair_world();
        target_ptr = world.connectors[0].0;
    }
    let c = &world.connectors[0];
    assert_eq!(c.0, target_ptr);
    let target = slot_target(c.close_slot(), "NdkCloseConnector");
    let calls = calls_of(slots, |slot| match slot {
        "NdkConnect" => pends(|w| {
            w.connectors[0].connect(&w.qps[0], w.addr(), w.listeners[0].2, 16, 16, b"hello")
        }),
        "NdkConnectWithSharedEndpoint" => pends(|w| {
            // A null endpoint (refused, after the call entered)
            // when the world has none.
            let none = SharedEndpoint(std::ptr::null_mut());
            connect_shared(
                &w.connectors[0],
                &w.qps[0],
                w.endpoints.first().unwrap_or(&none),
                w.listeners[0].2,
                16,
                16,
                b"hello",
            )
        }),
        "NdkCompleteConnect" => pends(|w| {
            let events = w.signal();
            complete_connect_with(&w.connectors[0], Some(on_disconnect), events.ctx())
        }),
        "NdkAccept" => pends(|w| {
            let events = w.signal();
            accept_with(
                &w.connectors[0],
                &w.qps[1],
                (16, 16),
                b"welcome",
                (Some(on_disconnect), events.ctx()),
            )
        }),
        "NdkReject" => quiet(|w| {
            let _ = w.connectors[0].reject(b"no");
        }),
        "NdkGetConnectionData" => quiet(|w| {
            let _ = w.connectors[0].connection_data(64);
        }),
        "NdkGetLocalAddress" => quiet(|w| {
            let _ = w.connectors[0].local_address();
        }),
        "NdkGetPeerAddress" => quiet(|w| {
            let _ = w.connectors[0].peer_address();
        }),
        "NdkDisconnect" => pends(|w| w.connectors[0].disconnect()),
        other => unknown(other),
    });
    (world, target, calls)
}
