//! Tests of the runner's token cache ([`TokenCache`]): resolutions through
//! it take no lock and no count, yet deregistration and close wait for the
//! pass's uses and complete exactly once (rules M11, L8, L21, L22), a token
//! no longer registered fails as through the device's table, and every SGE
//! gets the range and rights checks of the table (P11, M6).

use alloc::boxed::Box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Denied, Finish, Mr, Pd, Progress, Segment, TokenCache};
use crate::kernel::sync::Arc;
use crate::rnic::cq::{ArmType, Cq, CqEvent, CqNotify};
use crate::rnic::keys::REMOTE_BIT;
use crate::rnic::qp::{self, Payload, Qp};
use crate::rnic::testing::{Buffer, CONFIG, Registered, Side, TestCq, drain, inline_device};
use crate::rnic::types::{Access, Sge, WcStatus, WrFlags};

/// Bytes of the regions of these tests.
const LEN: usize = 64;
/// `LEN` as an SGE length.
const LEN32: u32 = 64;

/// A PD on a fresh inline device, with a region of `LEN` bytes registered
/// for local read only, and a region of another PD of the same device.
struct Fixture {
    pd: Arc<Pd>,
    region: Registered,
    other: Registered,
}

impl Fixture {
    fn new() -> Self {
        let device = inline_device();
        let pd = Pd::new(&device).unwrap();
        let other_pd = Pd::new(&device).unwrap();
        Self {
            region: Registered::new(&pd, Buffer::pattern(LEN, 3), Access::empty()),
            other: Registered::new(&other_pd, Buffer::new(LEN, 0), Access::empty()),
            pd,
        }
    }

    /// The whole region.
    fn sge(&self) -> Sge {
        self.region.sge(0, LEN32)
    }

    fn through(&self, cache: &mut TokenCache, sge: &Sge, need: Access) -> Result<u64, Denied> {
        cache
            .resolve_local(self.pd.device(), &self.pd, sge, need)
            .map(|seg| seg.len())
    }

    fn table(&self, sge: &Sge, need: Access) -> Result<u64, Denied> {
        self.pd
            .device()
            .resolve_local(&self.pd, sge, need)
            .map(|seg| seg.len())
    }

    /// A pass's cache after a request over the whole region (its segment
    /// dropped): the entry holds the pass's use.
    fn warm(&self) -> TokenCache {
        let mut cache = TokenCache::default();
        assert_eq!(
            self.through(&mut cache, &self.sge(), Access::empty()),
            Ok(64)
        );
        cache
    }

    fn users(&self) -> usize {
        uses(&self.region)
    }
}

/// Uses of `r`'s region, without the pending bit.
fn uses(r: &Registered) -> usize {
    r.mr.users.load(Ordering::SeqCst) & !super::PENDING
}

/// A deregistration callback that counts its calls.
fn counted() -> (Arc<AtomicUsize>, Finish) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    (
        calls,
        Box::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
        }),
    )
}

#[test]
fn test_cache_hit_takes_no_use_of_its_own_rule_m11() {
    let f = Fixture::new();
    let mut cache = f.warm();
    let sge = f.sge();
    // The pass holds one use; segments through it hold none.
    assert_eq!(f.users(), 1);
    let segments: Vec<_> = (0..3)
        .map(|_| {
            cache
                .resolve_local(f.pd.device(), &f.pd, &sge, Access::empty())
                .unwrap()
        })
        .collect();
    assert_eq!(f.users(), 1);
    assert_eq!(segments[2].run(0, 64).unwrap().len(), 64);
    drop(segments);
    cache.between_requests();
    assert_eq!(f.users(), 1, "nothing pending: the pass keeps the region");
    drop(cache);
    assert_eq!(f.users(), 0, "the pass's end releases its use");
}

/// A request's segment, resolved through a pass's cache, alive when the
/// region's deregistration starts: the deregistration pends.
struct Pended {
    f: Fixture,
    cache: TokenCache,
    sge: Sge,
    seg: Segment,
    /// Calls of the deregistration's callback.
    calls: Arc<AtomicUsize>,
}

fn pended() -> Pended {
    let f = Fixture::new();
    let mut cache = TokenCache::default();
    let sge = f.sge();
    let seg = cache
        .resolve_local(f.pd.device(), &f.pd, &sge, Access::empty())
        .unwrap();
    let (calls, finish) = counted();
    assert_eq!(f.region.mr.deregister(finish), Ok(Progress::Pending));
    Pended {
        f,
        cache,
        sge,
        seg,
        calls,
    }
}

#[test]
fn test_cache_deregistration_waits_for_live_segments_then_completes_once_rule_m11() {
    let Pended {
        f,
        mut cache,
        seg,
        calls,
        ..
    } = pended();
    // The request in progress still holds its segment: the memory stays.
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(seg.run(0, 64).unwrap().len(), 64);
    drop(seg);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the pass still holds it");
    // The next request starts: the pending deregistration gets its use back.
    cache.between_requests();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    drop(cache);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "exactly once (L8)");
    assert_eq!(f.users(), 0);
}

#[test]
fn test_cache_pass_end_completes_pending_deregistration_and_close_rules_l21_l22() {
    let f = Fixture::new();
    let cache = f.warm();
    let (deregistered, finish) = counted();
    assert_eq!(f.region.mr.deregister(finish), Ok(Progress::Pending));
    let (closed, close) = counted();
    assert_eq!(f.region.mr.close(close), Progress::Pending);
    assert_eq!(deregistered.load(Ordering::SeqCst), 0);
    drop(cache);
    assert_eq!(deregistered.load(Ordering::SeqCst), 1);
    assert_eq!(closed.load(Ordering::SeqCst), 1);
}

#[test]
fn test_cache_request_after_deregistration_began_fails_as_through_table_rule_m11() {
    let Pended {
        f,
        mut cache,
        sge,
        seg,
        calls,
    } = pended();
    // Through the entry, still held by this request (hit path)...
    assert_eq!(
        f.through(&mut cache, &sge, Access::empty()),
        Err(Denied::Token)
    );
    // ... and after the entry was released (miss path): as the table says.
    drop(seg);
    cache.between_requests();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        f.through(&mut cache, &sge, Access::empty()),
        Err(Denied::Token)
    );
    assert_eq!(f.table(&sge, Access::empty()), Err(Denied::Token));
}

#[test]
fn test_cache_close_while_cached_refuses_the_token_rule_l21() {
    let f = Fixture::new();
    let mut cache = f.warm();
    let sge = f.sge();
    let (closed, close) = counted();
    assert_eq!(f.region.mr.close(close), Progress::Pending);
    assert_eq!(
        f.through(&mut cache, &sge, Access::empty()),
        Err(Denied::Token)
    );
    cache.between_requests();
    assert_eq!(closed.load(Ordering::SeqCst), 1);
}

#[test]
fn test_cache_full_falls_back_to_segments_holding_their_own_use_rule_m11() {
    let device = inline_device();
    let pd = Pd::new(&device).unwrap();
    let regions: Vec<_> = (0..=super::CACHE_ENTRIES)
        .map(|i| {
            let seed = u8::try_from(i).unwrap();
            Registered::new(&pd, Buffer::pattern(LEN, seed), Access::empty())
        })
        .collect();
    let mut cache = TokenCache::default();
    // One request over every region: the last one finds no free entry.
    let segments: Vec<_> = regions
        .iter()
        .map(|r| {
            cache
                .resolve_local(&device, &pd, &r.sge(0, LEN32), Access::empty())
                .unwrap()
        })
        .collect();
    let users = uses;
    assert_eq!(users(&regions[super::CACHE_ENTRIES]), 1);
    let (calls, finish) = counted();
    let last = &regions[super::CACHE_ENTRIES];
    assert_eq!(last.mr.deregister(finish), Ok(Progress::Pending));
    drop(segments);
    // Its own segment's use was the only one.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(users(last), 0);
    // The next request may replace an entry it does not use.
    cache.between_requests();
    let third = Registered::new(&pd, Buffer::new(LEN, 9), Access::empty());
    assert_eq!(
        cache
            .resolve_local(&device, &pd, &third.sge(0, LEN32), Access::empty())
            .map(|s| s.len()),
        Ok(64)
    );
    assert_eq!(users(&third), 1, "cached");
    let released = regions[..super::CACHE_ENTRIES]
        .iter()
        .filter(|r| users(r) == 0)
        .count();
    assert_eq!(released, 1, "one entry replaced, its use released");
}

#[test]
fn test_cache_chain_over_deregistered_and_live_regions_rule_m11() {
    // A chain of requests keeps going over a live region while another is
    // deregistered mid-chain: the deregistration completes at the next
    // request, not at the chain's end, and later requests over its token
    // fail as through the table.
    let f = Fixture::new();
    let live = Registered::new(&f.pd, Buffer::new(LEN, 1), Access::empty());
    let mut cache = TokenCache::default();
    let (calls, finish) = counted();
    let mut finish = Some(finish);
    let sge = f.sge();
    for request in 0..6 {
        cache.between_requests();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            usize::from(request >= 2),
            "request {request}"
        );
        let dead = f.through(&mut cache, &sge, Access::empty());
        assert_eq!(dead.is_ok(), request < 2, "request {request}");
        assert_eq!(
            f.through(&mut cache, &live.sge(0, LEN32), Access::empty()),
            Ok(64)
        );
        if let Some(finish) = finish.take_if(|_| request == 1) {
            assert_eq!(f.region.mr.deregister(finish), Ok(Progress::Pending));
        }
    }
    assert_eq!(f.users(), 0);
    assert_eq!(uses(&live), 1);
    drop(cache);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(uses(&live), 0);
}

/// Range and rights checks: through the cache, cold (the miss path) and
/// warm (an entry for the region made by an earlier request), each SGE gets
/// the table's answer.
fn same_as_table(case: fn(&Fixture) -> (Sge, Access), expected: Denied) {
    let f = Fixture::new();
    let (sge, need) = case(&f);
    assert_eq!(f.table(&sge, need), Err(expected), "table");
    let mut cold = TokenCache::default();
    assert_eq!(f.through(&mut cold, &sge, need), Err(expected), "cold");
    let mut warm = f.warm();
    warm.between_requests();
    assert_eq!(f.through(&mut warm, &sge, need), Err(expected), "warm");
    // The refusal left the entry as it was.
    assert_eq!(f.through(&mut warm, &f.sge(), Access::empty()), Ok(64));
}

macro_rules! same_as_table {
    ($($name:ident: $case:expr => $denied:expr;)*) => {
        $(
            #[test]
            fn $name() {
                same_as_table($case, $denied);
            }
        )*
    };
}

same_as_table! {
    test_cache_range_below_region_rule_p11:
        |f| (Sge { addr: f.sge().addr - 1, ..f.sge() }, Access::empty()) => Denied::Range;
    test_cache_range_past_region_end_rule_p11:
        |f| (f.region.sge(1, LEN32), Access::empty()) => Denied::Range;
    test_cache_range_longest_sge_rule_p11:
        |f| (f.region.sge(0, u32::MAX), Access::empty()) => Denied::Range;
    test_cache_rights_local_write_not_registered_rule_m6:
        |f| (f.sge(), Access::LOCAL_WRITE) => Denied::Rights;
    test_cache_rights_checked_before_range_rule_m6:
        |f| (f.region.sge(1, LEN32), Access::LOCAL_WRITE) => Denied::Rights;
    test_cache_token_of_another_pd_rule_p11:
        |f| (f.other.sge(0, LEN32), Access::empty()) => Denied::Token;
    test_cache_token_remote_form_rule_p11:
        |f| (Sge { key: f.sge().key | REMOTE_BIT, ..f.sge() }, Access::empty()) => Denied::Token;
}

/// A send CQ whose first notification deregisters a region (the consumer
/// reacting to a completion while the runner's pass goes on), with a
/// callback that records how many completions a watched CQ held when the
/// deregistration completed.
struct DeregisterOnFirst {
    mr: Mutex<Option<Arc<Mr>>>,
    /// Named after the CQs are made (it may be the send CQ itself); the
    /// test takes it out again, which ends that cycle.
    watched: Mutex<Option<Arc<Cq>>>,
    progress: Mutex<Option<Progress>>,
    /// Completions in `watched` when the deregistration completed, plus one
    /// (0: not yet).
    seen: Arc<AtomicUsize>,
}

impl CqNotify for DeregisterOnFirst {
    fn notify(&self, _event: CqEvent) {
        let Some(mr) = self.mr.lock().unwrap().take() else {
            return;
        };
        let Some(watched) = self.watched.lock().unwrap().clone() else {
            return;
        };
        let seen = Arc::clone(&self.seen);
        let progress = mr.deregister(Box::new(move || {
            seen.store(watched.len() + 1, Ordering::SeqCst);
        }));
        *self.progress.lock().unwrap() = progress.ok();
    }
    fn close_complete(&self) {}
}

/// A QP `a` on an inline device, connected to `b` on another, whose send
/// CQ's first notification (armed for any completion) deregisters `first`.
struct Deregistering {
    a: Arc<Qp>,
    b: Side,
    pd: Arc<Pd>,
    first: Registered,
    notifier: Arc<DeregisterOnFirst>,
    scq: Arc<Cq>,
    _rcq: TestCq,
}

impl Deregistering {
    fn new() -> Self {
        let device_a = inline_device();
        let device_b = inline_device();
        let b = Side::new(&device_b, 0xB, CONFIG);
        let pd = Pd::new(&device_a).unwrap();
        let first = Registered::new(&pd, Buffer::pattern(LEN, 1), Access::empty());
        let notifier = Arc::new(DeregisterOnFirst {
            mr: Mutex::new(Some(Arc::clone(&first.mr))),
            watched: Mutex::new(None),
            progress: Mutex::new(None),
            seen: Arc::new(AtomicUsize::new(0)),
        });
        let scq = Arc::new(Cq::new(64, Arc::clone(&notifier) as Arc<dyn CqNotify>).unwrap());
        let rcq = TestCq::new(64);
        let a = Qp::new(&pd, &rcq.cq, &scq, None, CONFIG).unwrap();
        qp::connect(&a, &b.qp, (16, 16), (16, 16)).unwrap();
        scq.arm(ArmType::Any);
        Self {
            a,
            b,
            pd,
            first,
            notifier,
            scq,
            _rcq: rcq,
        }
    }

    /// Counts `cq`'s completions when the deregistration completes.
    fn watch(&self, cq: &Arc<Cq>) {
        *self.notifier.watched.lock().unwrap() = Some(Arc::clone(cq));
    }

    /// Posts one Send per SGE, all but the last deferred, so that one pass
    /// of the runner executes them all.
    fn send_chain(&self, sges: &[Sge]) {
        for (i, sge) in sges.iter().enumerate() {
            let flags = if i + 1 < sges.len() {
                WrFlags::DEFER
            } else {
                WrFlags::empty()
            };
            self.a
                .post_send(i, Payload::Sges(&[*sge]), flags, None)
                .unwrap();
        }
    }
}

impl Drop for Deregistering {
    fn drop(&mut self) {
        self.notifier.watched.lock().unwrap().take();
    }
}

#[test]
fn test_cache_deregistration_pending_mid_chain_completes_before_chain_ends_rule_m11() {
    let f = Deregistering::new();
    f.watch(&f.b.rcq.cq);
    let rest = Registered::new(&f.pd, Buffer::pattern(LEN, 2), Access::empty());
    let sink = f.b.buffer(4 * LEN, 0, Access::LOCAL_WRITE);
    for i in 0..4_u32 {
        let context = usize::try_from(i).unwrap();
        f.b.qp
            .post_receive(context, &[sink.sge(u64::from(LEN32 * i), LEN32)])
            .unwrap();
    }
    // The first Send reads `first`; three more read `rest`.
    f.send_chain(&[
        f.first.sge(0, LEN32),
        rest.sge(0, LEN32),
        rest.sge(0, LEN32),
        rest.sge(0, LEN32),
    ]);
    assert_eq!(
        *f.notifier.progress.lock().unwrap(),
        Some(Progress::Pending)
    );
    // Completed when the second Send started (one receive done at the peer),
    // not when the pass ended (four).
    assert_eq!(f.notifier.seen.load(Ordering::SeqCst), 2);
    let sent = drain(&f.scq);
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(f.b.rcq.drain().len(), 4);
    assert_eq!(&sink.buffer.bytes()[..LEN], f.first.buffer.bytes());
}

/// A pass whose first request failed (and ended the connection, E5), going
/// on to cancel the rest, lets go of the regions it resolved before it
/// reports the failure: a deregistration from the error completion's
/// callback is done at once (L8: no callback follows), rather than waiting
/// for the pass's end, which a consumer that keeps posting could put off for
/// ever.
#[test]
fn test_cache_deregistration_from_a_failure_completion_is_done_at_once_rule_m11_e5_l8() {
    let f = Deregistering::new();
    f.watch(&f.scq);
    // E7: a receive smaller than the message fails the first Send (after
    // its own SGE was resolved through the cache), which ends the connection.
    let sink = f.b.buffer(LEN, 0, Access::LOCAL_WRITE);
    f.b.qp.post_receive(0, &[sink.sge(0, LEN32 / 2)]).unwrap();
    f.send_chain(&[f.first.sge(0, LEN32); 4]);
    assert_eq!(*f.notifier.progress.lock().unwrap(), Some(Progress::Done));
    assert_eq!(f.notifier.seen.load(Ordering::SeqCst), 0, "L8: no callback");
    let sent = drain(&f.scq);
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[0].status, WcStatus::RemoteOperationError);
    assert!(sent[1..].iter().all(|c| c.status == WcStatus::Cancelled));
}
