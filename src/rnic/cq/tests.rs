//! Unit tests of the completion queue, grouped by state (disarmed, armed,
//! notifying, error, closed): ring and resize (K1, K4), arm and notification
//! (C3–C6), errors (E9–E13) and close (L18–L23).

use super::*;
use crate::kernel::testing::wait_until;
use crate::rnic::testing;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, Weak};
use std::time::Duration;

/// One call the CQ made to its notifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Notify(CqEvent),
    CloseComplete,
}

type Hook = Box<dyn Fn(&Cq, usize) + Send + Sync>;

/// A notifier that records every call, measures callback nesting and
/// overlap, and optionally runs `hook(cq, call_index)` inside `notify`.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<Call>>,
    threads: Mutex<Vec<std::thread::ThreadId>>,
    running: AtomicUsize,
    max_running: AtomicUsize,
    cq: OnceLock<Weak<Cq>>,
    hook: OnceLock<Hook>,
}

impl Recorder {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    fn notifies(&self) -> Vec<CqEvent> {
        self.calls()
            .into_iter()
            .filter_map(|call| match call {
                Call::Notify(event) => Some(event),
                Call::CloseComplete => None,
            })
            .collect()
    }
    fn close_completes(&self) -> usize {
        self.calls()
            .iter()
            .filter(|&&call| call == Call::CloseComplete)
            .count()
    }
    fn max_running(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }
}

impl CqNotify for Recorder {
    fn notify(&self, event: CqEvent) {
        // Counts callbacks running at once, nested or on other threads.
        let running = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(running, Ordering::SeqCst);
        let index = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(Call::Notify(event));
            calls.len() - 1
        };
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        if let (Some(hook), Some(cq)) = (self.hook.get(), self.cq.get().and_then(Weak::upgrade)) {
            hook(&cq, index);
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
    fn close_complete(&self) {
        assert_eq!(
            self.running.load(Ordering::SeqCst),
            0,
            "close_complete while a callback runs"
        );
        self.calls.lock().unwrap().push(Call::CloseComplete);
    }
}

fn cq_with_hook(depth: u32, hook: Option<Hook>) -> (Arc<Cq>, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    if let Some(hook) = hook {
        assert!(recorder.hook.set(hook).is_ok());
    }
    let cq = Arc::new(Cq::new(depth, recorder.clone()).unwrap());
    assert!(recorder.cq.set(Arc::downgrade(&cq)).is_ok());
    (cq, recorder)
}

fn cq(depth: u32) -> (Arc<Cq>, Arc<Recorder>) {
    cq_with_hook(depth, None)
}

/// Pushes `completions` in order, none overflowing.
#[track_caller]
fn push_all(cq: &Cq, completions: impl IntoIterator<Item = Completion>) {
    for completion in completions {
        cq.push(completion).unwrap();
    }
}

/// A disarmed CQ of `depth` holding `completions`, none polled.
fn holding(
    depth: u32,
    completions: impl IntoIterator<Item = Completion>,
) -> (Arc<Cq>, Arc<Recorder>) {
    let (cq, recorder) = cq(depth);
    push_all(&cq, completions);
    (cq, recorder)
}

/// What a fresh CQ armed with `arm` notified when `completion` arrived.
fn notifies_after(arm: ArmType, completion: Completion) -> Vec<CqEvent> {
    let (cq, recorder) = armed(4, arm);
    cq.push(completion).unwrap();
    recorder.notifies()
}

/// A CQ armed with `arm` and nothing queued.
fn armed(depth: u32, arm: ArmType) -> (Arc<Cq>, Arc<Recorder>) {
    let (cq, recorder) = cq(depth);
    cq.arm(arm);
    assert!(recorder.calls().is_empty());
    (cq, recorder)
}

fn ok(context: usize) -> Completion {
    Completion::new(WcStatus::Success, Opcode::Receive, 7, context)
}

fn solicited(context: usize) -> Completion {
    Completion {
        solicited: true,
        ..ok(context)
    }
}

fn failed(context: usize) -> Completion {
    Completion::new(WcStatus::RemoteAccessError, Opcode::Write, 7, context)
}

/// Polls everything and returns the request contexts, oldest first.
fn drain(cq: &Cq) -> Vec<usize> {
    testing::drain(cq)
        .iter()
        .map(|c| c.request_context)
        .collect()
}

/// Finds the arm type in force after `arm(first); arm(second)` by its
/// behaviour: an unsolicited success satisfies only ANY, a solicited one
/// also SOLICITED, an overflow every arm.
fn behaviour_after(first: ArmType, second: ArmType) -> ArmType {
    let (cq, recorder) = cq(2);
    cq.arm(first);
    cq.arm(second);
    assert!(recorder.calls().is_empty(), "an empty CQ fires no arm");
    cq.push(ok(1)).unwrap();
    if recorder.notifies() == [CqEvent::Completion] {
        return ArmType::Any;
    }
    cq.push(solicited(2)).unwrap();
    if recorder.notifies() == [CqEvent::Completion] {
        return ArmType::Solicited;
    }
    assert_eq!(cq.push(ok(3)), Err(CqError::Overflowed));
    assert_eq!(recorder.notifies(), [CqEvent::Overflow]);
    ArmType::Errors
}

mod disarmed {
    use super::*;

    #[test]
    fn test_disarmed_new_zero_depth_fails() {
        let err = Cq::new(0, Arc::new(Recorder::default())).unwrap_err();
        assert_eq!(err, CreateError::ZeroDepth);
    }

    #[test]
    fn test_disarmed_push_never_fires_rule_c3() {
        let (cq, recorder) = holding(4, [ok(1), failed(2), solicited(3)]);
        assert!(recorder.calls().is_empty());
        assert_eq!(cq.len(), 3);
        assert!(!cq.is_empty());
        assert_eq!(cq.depth(), 4);
    }

    #[test]
    fn test_disarmed_poll_oldest_first_up_to_out_len_rule_k1() {
        let (cq, _recorder) = holding(4, (1..=3).map(ok));
        let mut out = [FREE_SLOT; 2];
        assert_eq!(cq.poll(&mut out), 2);
        assert_eq!(out.map(|c| c.request_context), [1, 2]);
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0], ok(3));
        assert_eq!(cq.poll(&mut out), 0, "0 means the CQ was empty");
        assert_eq!(cq.poll(&mut []), 0);
        assert!(cq.is_empty());
    }

    #[test]
    fn test_disarmed_ring_wraps_in_order_rule_k1() {
        let (cq, _recorder) = cq(3);
        let mut out = [FREE_SLOT; 2];
        let mut next = 0;
        let mut expected = 0;
        for _ in 0..10 {
            for _ in 0..2 {
                cq.push(ok(next)).unwrap();
                next += 1;
            }
            assert_eq!(cq.poll(&mut out), 2);
            for completion in out {
                assert_eq!(completion.request_context, expected);
                expected += 1;
            }
        }
        // Full to the last slot, without overflow.
        for _ in 0..3 {
            cq.push(ok(next)).unwrap();
            next += 1;
        }
        assert_eq!(drain(&cq), (expected..next).collect::<Vec<_>>());
    }

    #[test]
    fn test_disarmed_resize_below_count_fails_and_loses_nothing_rule_k4() {
        let (cq, _recorder) = holding(4, (1..=3).map(ok));
        assert_eq!(cq.resize(2), Err(ResizeError::BelowCount));
        assert_eq!(cq.depth(), 4);
        cq.push(ok(4)).unwrap();
        assert_eq!(drain(&cq), [1, 2, 3, 4]);
    }

    #[test]
    fn test_disarmed_resize_up_keeps_order_across_wrap_rule_k4() {
        let (cq, _recorder) = cq(3);
        let mut out = [FREE_SLOT; 2];
        push_all(&cq, (1..=3).map(ok));
        assert_eq!(cq.poll(&mut out), 2);
        // The ring now wraps: 3 at the end, 4 and 5 at the start.
        push_all(&cq, [ok(4), ok(5)]);
        cq.resize(5).unwrap();
        assert_eq!(cq.depth(), 5);
        push_all(&cq, [ok(6), ok(7)]);
        assert_eq!(
            cq.push(ok(8)),
            Err(CqError::Overflowed),
            "the new depth is enforced"
        );
        assert_eq!(drain(&cq), [3, 4, 5, 6, 7]);
    }

    #[test]
    fn test_disarmed_resize_down_to_count_keeps_order_rule_k4() {
        let (cq, _recorder) = holding(8, (1..=3).map(ok));
        cq.resize(3).unwrap();
        assert_eq!(cq.depth(), 3);
        assert_eq!(cq.push(ok(4)), Err(CqError::Overflowed));
        assert_eq!(drain(&cq), [1, 2, 3]);
    }

    #[test]
    fn test_disarmed_resize_zero_fails_unchanged() {
        let (cq, _recorder) = cq(2);
        assert_eq!(cq.resize(0), Err(ResizeError::ZeroDepth));
        assert_eq!(cq.depth(), 2);
    }

    #[test]
    fn test_disarmed_arm_any_with_fresh_completion_fires_at_once_rule_c4() {
        let (cq, recorder) = holding(4, [ok(1)]);
        cq.arm(ArmType::Any);
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
        // Fired once for that arm (rule C3); the completion is still there.
        cq.arm(ArmType::Any);
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
        assert_eq!(cq.len(), 1);
    }

    #[test]
    fn test_disarmed_arm_solicited_with_fresh_solicited_fires_rule_c4_e9() {
        let (cq, recorder) = holding(4, [ok(1), solicited(2), ok(3)]);
        cq.arm(ArmType::Solicited);
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
    }

    #[test]
    fn test_disarmed_arm_solicited_with_fresh_error_fires_rule_c4_e9() {
        let (cq, recorder) = holding(4, [failed(1)]);
        cq.arm(ArmType::Solicited);
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
    }

    #[test]
    fn test_disarmed_arm_solicited_with_only_unsolicited_waits_rule_c4() {
        let (cq, recorder) = holding(4, [ok(1)]);
        cq.arm(ArmType::Solicited);
        assert!(recorder.calls().is_empty());
        cq.push(solicited(2)).unwrap();
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
    }

    #[test]
    fn test_disarmed_arm_errors_with_fresh_completions_waits_rule_c4_e12() {
        let (cq, recorder) = holding(4, [failed(1), solicited(2)]);
        cq.arm(ArmType::Errors);
        assert!(recorder.calls().is_empty());
    }

    #[test]
    fn test_disarmed_arm_after_drain_waits_rule_c4() {
        let (cq, recorder) = holding(4, [ok(1)]);
        assert_eq!(drain(&cq), [1]);
        cq.arm(ArmType::Any);
        assert!(recorder.calls().is_empty());
    }

    #[test]
    fn test_disarmed_arm_solicited_after_fresh_solicited_polled_waits_rule_c4() {
        let (cq, recorder) = holding(4, [solicited(1), ok(2)]);
        assert_eq!(cq.poll(&mut [FREE_SLOT]), 1);
        // Only the unsolicited success is left: it is fresh but does not
        // match a SOLICITED arm.
        cq.arm(ArmType::Solicited);
        assert!(recorder.calls().is_empty());
        cq.arm(ArmType::Any);
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
    }
}

mod armed {
    use super::*;

    #[test]
    fn test_armed_any_fires_once_rule_c3() {
        let (cq, recorder) = armed(4, ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
        push_all(&cq, [ok(2), ok(3)]);
        assert_eq!(recorder.notifies(), [CqEvent::Completion], "once per arm");
    }

    #[test]
    fn test_armed_solicited_ignores_unsolicited_success_rule_c3() {
        let (cq, recorder) = armed(4, ArmType::Solicited);
        push_all(&cq, [ok(1), ok(2)]);
        assert!(recorder.calls().is_empty());
        cq.push(solicited(3)).unwrap();
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
    }

    #[test]
    fn test_armed_errors_ignores_every_completion_rule_e12() {
        let (cq, recorder) = armed(4, ArmType::Errors);
        push_all(&cq, [ok(1), solicited(2), failed(3)]);
        assert!(recorder.calls().is_empty());
    }

    #[test]
    fn test_armed_merge_table_rule_c6() {
        use ArmType::{Any, Errors, Solicited};
        let table = [
            (Any, Any, Any),
            (Any, Errors, Any),
            (Any, Solicited, Any),
            (Errors, Any, Any),
            (Errors, Errors, Errors),
            (Errors, Solicited, Solicited),
            (Solicited, Any, Any),
            (Solicited, Errors, Solicited),
            (Solicited, Solicited, Solicited),
        ];
        for (first, second, merged) in table {
            assert_eq!(first.merge(second), merged, "{first:?} then {second:?}");
        }
    }

    /// C6 by behaviour: one test per row of the merge table, the arm in
    /// force after arming `first` and then each second arm.
    macro_rules! rearm_rows {
        ($(#[$test:meta] $name:ident: $first:ident then
            [$($second:ident => $merged:ident),*];)*) => {$(
            #[$test]
            fn $name() {
                use ArmType::{Any, Errors, Solicited};
                for (second, merged) in [$(($second, $merged)),*] {
                    assert_eq!(behaviour_after($first, second), merged, "then {second:?}");
                }
            }
        )*};
    }

    rearm_rows! {
        #[test] test_armed_any_row_rearm_rule_c6: Any then
            [Any => Any, Errors => Any, Solicited => Any];
        #[test] test_armed_errors_row_rearm_rule_c6: Errors then
            [Any => Any, Errors => Errors, Solicited => Solicited];
        #[test] test_armed_solicited_row_rearm_rule_c6: Solicited then
            [Any => Any, Errors => Solicited, Solicited => Solicited];
    }

    #[test]
    fn test_armed_rearm_with_backlog_from_last_callback_waits_rule_c4() {
        let (cq, recorder) = armed(4, ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(recorder.notifies().len(), 1);
        // The consumer leaves entry 1 on purpose and re-arms: not woken again.
        cq.arm(ArmType::Any);
        assert_eq!(recorder.notifies().len(), 1);
        // A new completion satisfies the arm.
        cq.push(ok(2)).unwrap();
        assert_eq!(recorder.notifies().len(), 2);
        assert_eq!(drain(&cq), [1, 2]);
    }

    #[test]
    fn test_armed_rearm_with_completion_queued_after_callback_fires_rule_c4() {
        let (cq, recorder) = armed(4, ArmType::Any);
        cq.push(ok(1)).unwrap();
        // Arrives after the callback was initiated, while disarmed.
        cq.push(ok(2)).unwrap();
        assert_eq!(cq.poll(&mut [FREE_SLOT]), 1);
        cq.arm(ArmType::Any);
        assert_eq!(
            recorder.notifies().len(),
            2,
            "entry 2 is fresh and still queued"
        );
    }

    /// E9: an error completion satisfies an ANY or a SOLICITED arm; one test
    /// per arm.
    macro_rules! fires_on_error {
        ($(#[$test:meta] $name:ident: $arm:ident;)*) => {$(
            #[$test]
            fn $name() {
                assert_eq!(notifies_after(ArmType::$arm, failed(1)), [CqEvent::Completion]);
            }
        )*};
    }

    fires_on_error! {
        #[test] test_armed_any_fires_on_error_completion_rule_e9: Any;
        #[test] test_armed_solicited_fires_on_error_completion_rule_e9: Solicited;
    }
}

mod notifying {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn test_notifying_rearm_then_push_inside_callback_does_not_nest_rule_c5() {
        // The callback of the first notification re-arms, then a completion
        // arrives on the same thread (an inline post): the second callback
        // must run after the first returns, not inside it.
        let (cq, recorder) = cq_with_hook(
            8,
            Some(Box::new(|cq: &Cq, index: usize| {
                if index < 3 {
                    drain(cq);
                    cq.arm(ArmType::Any);
                    cq.push(ok(100 + index)).unwrap();
                }
            })),
        );
        cq.arm(ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(recorder.notifies(), [CqEvent::Completion; 4]);
        assert_eq!(recorder.max_running(), 1, "callbacks never nest");
        assert_eq!(drain(&cq), [102]);
    }

    #[test]
    fn test_notifying_push_then_rearm_inside_callback_defers_rule_c4_c5() {
        // The completion arrives before the re-arm: the arm finds it fresh
        // (rule C4) and is satisfied after the running callback returns.
        let (cq, recorder) = cq_with_hook(
            8,
            Some(Box::new(|cq: &Cq, index: usize| {
                if index == 0 {
                    drain(cq);
                    cq.push(ok(2)).unwrap();
                    cq.arm(ArmType::Any);
                }
            })),
        );
        cq.arm(ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(recorder.notifies(), [CqEvent::Completion; 2]);
        assert_eq!(recorder.max_running(), 1);
    }

    #[test]
    fn test_notifying_rearm_with_backlog_inside_callback_waits_rule_c4() {
        // The consumer re-arms without draining: no wake-up loop.
        let (cq, recorder) =
            cq_with_hook(8, Some(Box::new(|cq: &Cq, _: usize| cq.arm(ArmType::Any))));
        cq.arm(ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(recorder.notifies().len(), 1);
        cq.push(ok(2)).unwrap();
        assert_eq!(recorder.notifies().len(), 2);
    }

    #[test]
    fn test_notifying_push_from_other_thread_is_deferred_rule_c5() {
        // The first callback re-arms and waits until another thread has
        // pushed. That push must not call the callback (overlap): the
        // waiting thread calls it after the first one returns.
        let (pushed_tx, pushed_rx) = mpsc::channel::<()>();
        let pushed_rx = Mutex::new(pushed_rx);
        let (cq, recorder) = cq_with_hook(
            8,
            Some(Box::new(move |cq: &Cq, index: usize| {
                if index == 0 {
                    cq.arm(ArmType::Any);
                    pushed_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(10))
                        .unwrap();
                    // Let a wrongly started second callback show itself.
                    std::thread::sleep(Duration::from_millis(20));
                }
            })),
        );
        cq.arm(ArmType::Any);
        let other = {
            let cq = cq.clone();
            let recorder = recorder.clone();
            std::thread::spawn(move || {
                wait_until("the first callback", || !recorder.calls().is_empty());
                cq.push(ok(2)).unwrap();
                // The push returned without running the callback.
                assert_eq!(recorder.notifies().len(), 1);
                pushed_tx.send(()).unwrap();
            })
        };
        cq.push(ok(1)).unwrap();
        other.join().unwrap();
        assert_eq!(recorder.notifies(), [CqEvent::Completion; 2]);
        assert_eq!(recorder.max_running(), 1, "callbacks never overlap");
        let threads = recorder.threads.lock().unwrap().clone();
        assert_eq!(
            threads,
            [std::thread::current().id(); 2],
            "the notifying thread ran both"
        );
    }

    #[test]
    fn test_notifying_error_inside_callback_is_deferred_rule_c5_e12() {
        let (cq, recorder) = cq_with_hook(
            1,
            Some(Box::new(|cq: &Cq, index: usize| {
                if index == 0 {
                    cq.arm(ArmType::Errors);
                    assert_eq!(cq.push(ok(2)), Err(CqError::Overflowed));
                }
            })),
        );
        cq.arm(ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(
            recorder.notifies(),
            [CqEvent::Completion, CqEvent::Overflow]
        );
        assert_eq!(recorder.max_running(), 1);
    }
}

mod error {
    use super::*;

    #[test]
    fn test_error_overflow_armed_reports_overflow_rule_e10_e12() {
        let (cq, recorder) = armed(2, ArmType::Errors);
        push_all(&cq, [ok(1), ok(2)]);
        assert!(!cq.is_error());
        assert_eq!(cq.push(ok(3)), Err(CqError::Overflowed));
        assert!(cq.is_error());
        assert_eq!(recorder.notifies(), [CqEvent::Overflow]);
        assert_eq!(
            cq.push(ok(4)),
            Err(CqError::InError),
            "Overflowed is returned once"
        );
        assert_eq!(recorder.notifies(), [CqEvent::Overflow]);
    }

    #[test]
    fn test_error_overflow_unarmed_reported_at_next_arm_rule_e10_e12() {
        let (cq, recorder) = holding(1, [ok(1)]);
        assert_eq!(cq.push(ok(2)), Err(CqError::Overflowed));
        assert!(recorder.calls().is_empty(), "only through an arm (rule C3)");
        cq.arm(ArmType::Solicited);
        assert_eq!(recorder.notifies(), [CqEvent::Overflow]);
    }

    #[test]
    fn test_error_reported_once_rule_e12() {
        let (cq, recorder) = armed(1, ArmType::Any);
        cq.push(ok(1)).unwrap();
        // The arm was used up by completion 1: the overflow waits for one.
        assert_eq!(cq.push(ok(2)), Err(CqError::Overflowed));
        assert_eq!(recorder.notifies(), [CqEvent::Completion]);
        cq.arm(ArmType::Errors);
        assert_eq!(
            recorder.notifies(),
            [CqEvent::Completion, CqEvent::Overflow]
        );
        cq.arm(ArmType::Any);
        cq.arm(ArmType::Errors);
        cq.fail();
        assert_eq!(cq.push(ok(3)), Err(CqError::InError));
        assert_eq!(
            recorder.notifies(),
            [CqEvent::Completion, CqEvent::Overflow]
        );
    }

    #[test]
    fn test_error_satisfies_every_arm_type_rule_e12() {
        for arm in [ArmType::Errors, ArmType::Any, ArmType::Solicited] {
            let (cq, recorder) = armed(1, arm);
            cq.fail();
            assert_eq!(recorder.notifies(), [CqEvent::Fatal], "{arm:?}");
        }
    }

    #[test]
    fn test_error_fatal_armed_reports_fatal_rule_e11() {
        let (cq, recorder) = armed(4, ArmType::Errors);
        cq.push(ok(1)).unwrap();
        cq.fail();
        assert!(cq.is_error());
        assert_eq!(recorder.notifies(), [CqEvent::Fatal]);
        assert_eq!(cq.push(ok(2)), Err(CqError::InError));
    }

    #[test]
    fn test_error_fatal_unarmed_reported_at_next_arm_rule_e11_e12() {
        let (cq, recorder) = cq(4);
        cq.fail();
        assert!(recorder.calls().is_empty());
        cq.arm(ArmType::Errors);
        assert_eq!(recorder.notifies(), [CqEvent::Fatal]);
    }

    #[test]
    fn test_error_first_error_wins_rule_e11() {
        let (cq, recorder) = holding(1, [ok(1)]);
        assert_eq!(cq.push(ok(2)), Err(CqError::Overflowed));
        cq.fail();
        cq.arm(ArmType::Any);
        assert_eq!(recorder.notifies(), [CqEvent::Overflow]);
    }

    #[test]
    fn test_error_poll_returns_entries_queued_before_rule_e10() {
        let (cq, _recorder) = holding(2, [ok(1), ok(2)]);
        assert_eq!(cq.push(ok(3)), Err(CqError::Overflowed));
        assert_eq!(drain(&cq), [1, 2], "the overflowing completion is dropped");
    }

    #[test]
    fn test_error_resize_fails_rule_e13() {
        let (cq, _recorder) = holding(2, [ok(1)]);
        cq.fail();
        assert_eq!(cq.resize(8), Err(ResizeError::InError));
        assert_eq!(cq.depth(), 2);
        assert_eq!(drain(&cq), [1]);
    }

    #[test]
    fn test_error_close_is_done_rule_e13() {
        let (cq, recorder) = cq(1);
        cq.fail();
        assert_eq!(cq.close(), CloseState::Done);
        cq.arm(ArmType::Any);
        assert!(
            recorder.calls().is_empty(),
            "the unreported error dies with the CQ"
        );
    }
}

mod closed {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn test_closed_idle_is_done_rule_l18_l21() {
        let (cq, recorder) = armed(4, ArmType::Any);
        assert_eq!(cq.close(), CloseState::Done);
        assert_eq!(cq.push(ok(1)), Err(CqError::Closed));
        cq.arm(ArmType::Any);
        cq.fail();
        assert!(
            recorder.calls().is_empty(),
            "no callback after a Done close (rule L22)"
        );
    }

    #[test]
    fn test_closed_push_fails() {
        let (cq, _recorder) = holding(4, [ok(1)]);
        assert_eq!(cq.close(), CloseState::Done);
        assert_eq!(cq.push(ok(2)), Err(CqError::Closed));
        assert_eq!(cq.len(), 1);
    }

    #[test]
    fn test_closed_twice_completes_once_rule_l19() {
        let (cq, recorder) = cq_with_hook(
            4,
            Some(Box::new(|cq: &Cq, _: usize| {
                assert_eq!(cq.close(), CloseState::Pending);
                assert_eq!(cq.close(), CloseState::Done);
            })),
        );
        cq.arm(ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(recorder.close_completes(), 1);
    }

    #[test]
    fn test_closed_from_inside_callback_pending_rule_l23() {
        let (cq, recorder) = cq_with_hook(
            4,
            Some(Box::new(|cq: &Cq, _: usize| {
                // A deferred notification is due as well: close drops it.
                cq.arm(ArmType::Any);
                cq.push(ok(2)).unwrap();
                assert_eq!(cq.close(), CloseState::Pending);
            })),
        );
        cq.arm(ArmType::Any);
        cq.push(ok(1)).unwrap();
        assert_eq!(
            recorder.calls(),
            [Call::Notify(CqEvent::Completion), Call::CloseComplete],
            "close_complete once, after the callback returned, and last"
        );
    }

    #[test]
    fn test_closed_while_callback_runs_on_other_thread_pending_rule_l23() {
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let entered_tx = Mutex::new(entered_tx);
        let release_rx = Mutex::new(release_rx);
        let (cq, recorder) = cq_with_hook(
            4,
            Some(Box::new(move |cq: &Cq, _: usize| {
                cq.arm(ArmType::Any);
                entered_tx.lock().unwrap().send(()).unwrap();
                release_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap();
            })),
        );
        cq.arm(ArmType::Any);
        let notifying = {
            let cq = cq.clone();
            std::thread::spawn(move || cq.push(ok(1)).unwrap())
        };
        entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // A completion that would satisfy the re-arm: deferred, then dropped.
        cq.push(ok(2)).unwrap();
        assert_eq!(cq.close(), CloseState::Pending);
        assert_eq!(
            recorder.close_completes(),
            0,
            "not before the callback returned"
        );
        release_tx.send(()).unwrap();
        notifying.join().unwrap();
        assert_eq!(
            recorder.calls(),
            [Call::Notify(CqEvent::Completion), Call::CloseComplete],
            "close_complete exactly once, and no notification after it"
        );
        assert_eq!(cq.push(ok(3)), Err(CqError::Closed));
    }
}
