//! Calls on one link from two threads at once, where the consumer rules let
//! a consumer make them: a Flush (P4) or the close of the QP's connector
//! (P5) while a work request is posted on the QP; a Receive while an
//! initiator request is posted on the same QP (P2: the queues differ); a
//! poll of the side's CQ while a request is posted on its QP (C1
//! serializes only the CQ's own calls). The second call runs on a scoped
//! thread, both released by one barrier; what it did is accounted on the
//! thread's own once both returned, so the oracle stays single-threaded.
//!
//! With one thread a run replays a seed exactly; a race would not, so a
//! run races only with several threads.

use std::ffi::c_void;
use std::ptr;
use std::sync::{Arc, Barrier, mpsc};
use std::thread::JoinHandle;

use softndk::abi::{NdkConnector, NdkCq, NdkQp, NtStatus, STATUS_PENDING, STATUS_SUCCESS};

use super::fuzzer::Fuzzer;
use super::objects::{Link, POLL, table};
use super::reap::Polled;
use super::signal::{Signal, on_event};

/// What the second thread does.
#[derive(Clone, Copy, Debug)]
enum Racer {
    /// `NdkFlush` of the side's QP (P4).
    Flush,
    /// The close of the side's connector (P5).
    CloseConnector,
    /// A Receive on the side's QP or SRQ (P2).
    Receive,
    /// A poll of the side's CQ (C1).
    Poll,
}

/// What a racing call returned.
enum Done {
    Nothing,
    Status(NtStatus),
    Polled(Box<Polled>),
}

/// A call for the second thread.
type Job = Box<dyn FnOnce() -> Done + Send>;

/// A thread's second thread, kept for its races (a thread spawned per race
/// cost more than the rest of a fabric run), and the barrier that starts
/// both calls together.
pub(super) struct Second {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Done>,
    start: Arc<Barrier>,
    thread: Option<JoinHandle<()>>,
}

impl Second {
    fn new() -> Self {
        let (jobs, todo) = mpsc::channel::<Job>();
        let (finished, done) = mpsc::channel();
        let start = Arc::new(Barrier::new(2));
        let go = Arc::clone(&start);
        let thread = std::thread::spawn(move || {
            for job in todo {
                go.wait();
                if finished.send(job()).is_err() {
                    return;
                }
            }
        });
        Self {
            jobs: Some(jobs),
            done,
            start,
            thread: Some(thread),
        }
    }
}

impl Drop for Second {
    fn drop(&mut self) {
        // Without jobs to come its loop ends.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Fuzzer<'_> {
    /// Runs `racer` on the second thread while this one runs `main`, both
    /// released together; what `racer` returned.
    fn race(&mut self, racer: Job, main: impl FnOnce(&mut Self)) -> Done {
        let second = self.second.get_or_insert_with(Second::new);
        let sent = second
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(racer).is_ok());
        let start = Arc::clone(&second.start);
        if sent {
            start.wait();
        }
        main(self);
        let done = self
            .second
            .as_ref()
            .filter(|_| sent)
            .and_then(|second| second.done.recv().ok());
        done.unwrap_or_else(|| {
            self.finding("the fuzzer's second thread is gone (a fuzzer bug)");
            Done::Nothing
        })
    }

    /// A post on side `i` of one of the kinds the race allows: a Send or
    /// an RDMA request, or (`receive`) a Receive.
    fn racing_post(&mut self, link: &mut Link, i: usize, receive: bool) {
        match self.rng.below(if receive { 4 } else { 3 }) {
            0 => self.send(link, i, false),
            1 => self.rdma(link, i, false),
            2 => self.rdma(link, i, true),
            _ => self.receive(link, i),
        }
    }

    /// One race on side `i` of `link` (see the module's documentation).
    pub(super) fn race_on(&mut self, link: &mut Link, i: usize) {
        // A race may add two entries to the side's CQ (a Receive and the
        // racing post): a strict link never goes past its CQ's room.
        if link.strict
            && let Some(c) = (0..2).find(|&c| {
                let side = &link.sides[i];
                !side.cqs[c].ptr.is_null() && link.cq_held(i, c) + 2 > side.cq_depth(c) as usize
            })
        {
            self.poll_cq(link, i, c, POLL);
            return;
        }
        let racer = match self.rng.below(4) {
            0 => Racer::Flush,
            // A connector that connected from a shared endpoint closes
            // with the link, which accounts for the endpoint (N10).
            1 if link.sides[i].endpoint.is_none() && !link.sides[i].connector.is_null() => {
                Racer::CloseConnector
            }
            1 | 2 => Racer::Receive,
            _ => Racer::Poll,
        };
        self.out.races += 1;
        if self.config.trace {
            eprintln!("fuzz t{}   race {racer:?} on side {i}", self.thread);
        }
        if matches!(racer, Racer::Flush | Racer::CloseConnector) {
            // The racing post may be refused, or complete cancelled (P4,
            // P5): the fuzzer ends the link as it starts the race.
            link.ended = true;
        }
        let side = &link.sides[i];
        match racer {
            Racer::Flush => {
                let qp = side.qp.expose_provenance();
                self.race(
                    Box::new(move || {
                        let qp: *mut NdkQp = ptr::with_exposed_provenance_mut(qp);
                        // SAFETY: a live QP: it is closed only by this
                        // thread, after the race.
                        unsafe { (table(qp).ndk_flush)(qp) };
                        Done::Nothing
                    }),
                    |this| this.racing_post(link, i, true),
                );
                self.call("NdkFlush", STATUS_SUCCESS);
            }
            Racer::CloseConnector => {
                let connector = std::mem::replace(&mut link.sides[i].connector, ptr::null_mut());
                let closed = Signal::new();
                let (connector, context) = (
                    connector.expose_provenance(),
                    closed.ctx().expose_provenance(),
                );
                let done = self.race(
                    Box::new(move || {
                        let connector: *mut NdkConnector =
                            ptr::with_exposed_provenance_mut(connector);
                        let context: *mut c_void = ptr::with_exposed_provenance_mut(context);
                        let close = table(connector).ndk_close_connector;
                        // SAFETY: a live connector, taken out of its slot
                        // (closed once); `closed` outlives its completion.
                        Done::Status(unsafe { close(connector.cast(), Some(on_event), context) })
                    }),
                    |this| this.racing_post(link, i, true),
                );
                let Done::Status(status) = done else {
                    // The close may never have started: its completion's
                    // context must outlive it.
                    std::mem::forget(closed);
                    return;
                };
                self.call("NdkCloseConnector", status);
                // The QP has no connection any more (X5): later posts fail
                // or complete cancelled; the link closes soon.
                link.disconnected = true;
                let mut pending = Vec::new();
                match status {
                    STATUS_SUCCESS => self.out.closed += 1,
                    STATUS_PENDING => pending.push(("NdkCloseConnector", closed)),
                    other => self.finding(&format!(
                        "NdkCloseConnector racing a post returned {:#010x} (L18: a close never fails)",
                        other.cast_unsigned()
                    )),
                }
                self.wait_closes(pending);
            }
            Racer::Receive => {
                let Some(receive) = self.prepare_receive(link, i) else {
                    return;
                };
                let racing = receive.clone();
                let done = self.race(Box::new(move || Done::Status(racing.post())), |this| {
                    this.racing_post(link, i, false);
                });
                let Done::Status(status) = done else {
                    return;
                };
                self.record_receive(link, i, &receive, status);
            }
            Racer::Poll => {
                let ex = self.rng.chance(50);
                let c = side.any_cq(&mut self.rng);
                let cq = side.cqs[c].ptr.expose_provenance();
                let done = self.race(
                    Box::new(move || {
                        let cq: *mut NdkCq = ptr::with_exposed_provenance_mut(cq);
                        Done::Polled(Box::new(Polled::take(cq, ex, POLL)))
                    }),
                    |this| this.racing_post(link, i, true),
                );
                let Done::Polled(polled) = done else {
                    return;
                };
                self.judge_poll(link, (i, c), &polled);
            }
        }
    }
}
