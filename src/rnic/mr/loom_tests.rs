//! Loom model of a deregistration racing a runner pass that resolves the
//! region through its token cache (rules M11, L8): the pass's resolutions
//! take no lock and no count, yet the deregistration completes exactly
//! once, only after the pass's last use, and a resolution that starts after
//! the deregistration returned is refused.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release --lib -- loom`.

use alloc::boxed::Box;

use super::{Denied, Mr, Pd, Progress, TokenCache};
use crate::kernel::sync::Arc;
use crate::kernel::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::rnic::device::{Device, EngineMode};
use crate::rnic::memory::Span;
use crate::rnic::types::{Access, Limits, Sge};

/// Bytes of the region.
const LEN: usize = 8;

/// A region of `LEN` bytes registered from index 0x1000, and an SGE over it.
fn region() -> (Arc<Device>, Arc<Pd>, Arc<Mr>, Sge) {
    let device = Device::new(Limits::DEFAULT, EngineMode::Inline).unwrap();
    let pd = Pd::new(&device).unwrap();
    let mr = Mr::new(&pd, false).unwrap();
    let memory: &'static mut [u8] = Box::leak(alloc::vec![0_u8; LEN].into_boxed_slice());
    // SAFETY: the buffer is leaked, so it stays allocated (and is never
    // moved) for the rest of the process.
    let span = unsafe { Span::new(memory.as_mut_ptr() as usize, LEN) }.unwrap();
    mr.register(span, 0x1000, Access::empty()).unwrap();
    let sge = Sge {
        addr: 0x1000,
        len: 8,
        key: mr.local_key().unwrap(),
    };
    (device, pd, mr, sge)
}

/// Checks `f` over every interleaving of at most two preemptions, each run
/// with a fresh [`region`].
fn model(f: impl Fn((Arc<Device>, Arc<Pd>, Arc<Mr>, Sge)) + Sync + Send + 'static) {
    crate::rnic::loom_model::bounded(move || f(region()));
}

#[test]
fn test_loom_deregistration_racing_cached_pass_completes_once_after_last_use_rule_m11_l8() {
    model(|(device, pd, mr, sge)| {
        let finished = Arc::new(AtomicUsize::new(0));
        let returned = Arc::new(AtomicBool::new(false));
        let deregistering = {
            let finished = Arc::clone(&finished);
            let returned = Arc::clone(&returned);
            loom::thread::spawn(move || {
                let progress = mr.deregister(Box::new(move || {
                    finished.fetch_add(1, Ordering::SeqCst);
                }));
                returned.store(true, Ordering::SeqCst);
                progress
            })
        };
        // The runner's pass: a request of two SGEs over the region (the
        // second resolved through the entry the first made), then one more.
        let mut cache = TokenCache::default();
        for sges in [2, 1] {
            cache.between_requests();
            let mut live = alloc::vec::Vec::new();
            for _ in 0..sges {
                let after = returned.load(Ordering::SeqCst);
                match cache.resolve_local(&device, &pd, &sge, Access::empty()) {
                    Ok(seg) => {
                        assert!(!after, "resolved after the deregistration returned");
                        live.push(seg);
                    }
                    Err(denied) => assert_eq!(denied, Denied::Token),
                }
            }
            // M11: the memory stays registered while a segment lives.
            assert!(
                live.is_empty() || finished.load(Ordering::SeqCst) == 0,
                "deregistration completed under a live segment"
            );
            drop(live);
        }
        drop(cache);
        let progress = deregistering.join().unwrap().unwrap();
        // L8: a deregistration that pended completes exactly once; one that
        // did not pend never calls back.
        assert_eq!(
            finished.load(Ordering::SeqCst),
            usize::from(progress == Progress::Pending)
        );
    });
}

/// A close racing the end of the last use of a region whose deregistration
/// pends (rules M11, L8, L21, L22): whichever of the two sees no use left
/// first finishes, the deregistration's callback runs exactly once, and the
/// close's runs exactly once, after it, when the close pended and never when
/// it was done at once. Explores `close` finding the last use just ended
/// before that use's own `finish_if_idle` ran (it finishes the
/// deregistration itself). A close done at once may return while the
/// thread that ended the last use is still running the deregistration's
/// callback: the provider's MR holds itself open while its DeregisterMr is
/// owed, so its close completes after that completion (L21; `provider::mr`).
#[test]
fn test_loom_close_racing_last_use_of_pending_deregistration_rule_l8_l21_l22() {
    model(|(device, pd, mr, sge)| {
        // The pass's use: one resolution through the cache.
        let mut cache = TokenCache::default();
        let seg = cache
            .resolve_local(&device, &pd, &sge, Access::empty())
            .unwrap();
        // The order in which the callbacks ran: 1 for the first, 2 for the
        // second (0: not run; more than one run would count past 2).
        let calls = Arc::new(AtomicUsize::new(0));
        let deregistered = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let use_ended = Arc::new(AtomicBool::new(false));
        let progress = {
            let (calls, deregistered) = (Arc::clone(&calls), Arc::clone(&deregistered));
            mr.deregister(Box::new(move || {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                assert_eq!(deregistered.swap(n, Ordering::SeqCst), 0, "ran twice");
            }))
            .unwrap()
        };
        assert_eq!(progress, Progress::Pending, "a use lives: M11");
        let ending = {
            let use_ended = Arc::clone(&use_ended);
            loom::thread::spawn(move || {
                drop(seg);
                drop(cache);
                use_ended.store(true, Ordering::SeqCst);
            })
        };
        let before_close = use_ended.load(Ordering::SeqCst);
        let progress = {
            let (calls, closed) = (Arc::clone(&calls), Arc::clone(&closed));
            mr.close(Box::new(move || {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                assert_eq!(closed.swap(n, Ordering::SeqCst), 0, "ran twice");
            }))
        };
        // The use ended before the close began: nothing to wait for.
        assert!(
            !(before_close && progress == Progress::Pending),
            "the close pended with no use left"
        );
        ending.join().unwrap();
        assert_eq!(deregistered.load(Ordering::SeqCst), 1, "L8: once, first");
        assert_eq!(
            closed.load(Ordering::SeqCst),
            if progress == Progress::Pending { 2 } else { 0 },
            "L21/L22: a pended close completes once, after the deregistration"
        );
    });
}
