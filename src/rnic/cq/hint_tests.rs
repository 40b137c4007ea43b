//! Models of the CQ's lock-free reads (emptiness from the `head` / `tail`
//! positions, `failed`): a poll that
//! returns at once on an empty CQ never loses a completion, never reports
//! one twice, and keeps them in order; `is_error` without the lock sees an
//! error once it was raised. Under `--cfg loom` every interleaving of a
//! pusher and a poller is checked; without it the same bodies run once.

use super::*;
#[cfg(loom)]
use loom::thread;
#[cfg(not(loom))]
use std::thread;

struct Quiet;

impl CqNotify for Quiet {
    fn notify(&self, _event: CqEvent) {}
    fn close_complete(&self) {}
}

fn ok(context: usize) -> Completion {
    Completion::new(WcStatus::Success, Opcode::Receive, 0, context)
}

/// Runs `f` under loom's model checker (every interleaving, at most three
/// preemptions), or once in a plain test build; shared with `ring_tests`.
#[cfg(loom)]
pub(super) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[cfg(not(loom))]
pub(super) fn model(f: impl Fn() + Sync + Send + 'static) {
    f();
}

/// Two pushes racing two polls: after the pusher is done one more poll
/// finds exactly what the racing polls did not take, in push order (K1).
#[test]
fn test_loom_poll_without_lock_loses_nothing() {
    model(|| {
        let cq = Arc::new(Cq::new(4, Arc::new(Quiet)).unwrap());
        let pusher = {
            let cq = cq.clone();
            thread::spawn(move || {
                cq.push(ok(1)).unwrap();
                cq.push(ok(2)).unwrap();
            })
        };
        let mut seen = Vec::new();
        let mut out = [FREE_SLOT; 2];
        for _ in 0..2 {
            let n = cq.poll(&mut out);
            seen.extend(out.iter().take(n).map(|c| c.request_context));
        }
        pusher.join().unwrap();
        assert_eq!(cq.is_empty(), seen.len() == 2);
        let n = cq.poll(&mut out);
        seen.extend(out.iter().take(n).map(|c| c.request_context));
        assert_eq!(seen, [1, 2]);
        assert!(cq.is_empty());
        assert_eq!(cq.poll(&mut out), 0);
    });
}

/// E11, E13: a fatal error raised by one thread is seen by `is_error`
/// (read without the lock) once `fail` returned, and the completion queued
/// before it can still be polled (E10's choice in the module docs).
#[test]
fn test_loom_error_flag_seen_after_fail() {
    model(|| {
        let cq = Arc::new(Cq::new(2, Arc::new(Quiet)).unwrap());
        cq.push(ok(1)).unwrap();
        let failer = {
            let cq = cq.clone();
            thread::spawn(move || {
                cq.fail();
                assert!(cq.is_error());
            })
        };
        let mut out = [FREE_SLOT; 1];
        let early = cq.poll(&mut out);
        failer.join().unwrap();
        assert!(cq.is_error());
        assert_eq!(cq.push(ok(2)), Err(CqError::InError));
        let late = cq.poll(&mut out);
        assert_eq!(early + late, 1);
        assert_eq!(out[0].request_context, 1);
        assert!(cq.is_empty());
    });
}
