//! The measurements: RDMA Write / Read / Send bandwidth, the 64 B Send /
//! Receive ping-pong, the 64 B Send message rate, and their baselines
//! (memcpy, a cache-line hand-off between two threads). Every transfer is
//! verified: each completion's status, number and length, and the data at
//! the end of each run.

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use softndk::abi::{NdkResult, NdkSge, OpFlags, STATUS_SUCCESS};

use crate::ndk::{EMPTY_RESULT, Link, Region, Result, SPINS_BEFORE_YIELD, request_number};

/// Bytes of each side's buffer a bandwidth run spreads its messages over.
const SLOT_BUDGET: usize = 32 << 20;
/// The most iterations one run makes (a bound on memory and time).
const MAX_ITERATIONS: u64 = 20_000_000;
/// Size of the latency and message-rate messages.
pub const SMALL: usize = 64;

/// How long each measurement runs.
#[derive(Clone, Copy, Debug)]
pub enum Timing {
    /// This many measured iterations (after a warm-up of a tenth of them).
    Iterations(u64),
    /// About this long (after warm-up runs that also size the run).
    Duration(Duration),
}

impl Timing {
    /// Half the time (memcpy needs less to be precise).
    fn halved(self) -> Self {
        match self {
            Self::Iterations(n) => Self::Iterations(n),
            Self::Duration(d) => Self::Duration(d / 2),
        }
    }
}

/// How the benchmark drives the queues.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Initiator requests in flight at most.
    pub queue_depth: usize,
    /// SGEs per initiator request.
    pub sge: usize,
    /// Sleep on an armed CQ instead of spinning on `GetCqResults`.
    pub armed: bool,
    /// How long each measurement runs.
    pub timing: Timing,
}

/// One timed run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run {
    /// Messages (or round trips) timed.
    pub iterations: u64,
    /// Successful initiator completions counted.
    pub completions: u64,
    /// Successful receive completions counted (Send and ping-pong).
    pub receive_completions: u64,
    /// Wall-clock time of the run.
    pub seconds: f64,
}

/// `n` as a float, for rates.
#[allow(clippy::cast_precision_loss, reason = "counts far below 2^52")]
pub fn float(n: u64) -> f64 {
    n as f64
}

/// Runs `f(n)` as `timing` says: warm-up runs, then the measured one, of
/// at least `least` iterations when sized by a duration.
fn measure<T>(
    timing: Timing,
    least: u64,
    mut f: impl FnMut(u64) -> Result<(Run, T)>,
) -> Result<(Run, T)> {
    match timing {
        Timing::Iterations(n) => {
            f((n / 10).max(1))?;
            f(n)
        }
        Timing::Duration(target) => {
            // The fastest warm-up run per iteration: a descheduling only
            // slows a run down, so one that hit the last warm-up run does
            // not shrink the measured run.
            let (mut n, mut per_iteration) = (1, f64::INFINITY);
            loop {
                let (run, _) = f(n)?;
                per_iteration = per_iteration.min(run.seconds / float(n));
                if run.seconds >= target.as_secs_f64() / 8.0 || n >= MAX_ITERATIONS {
                    break;
                }
                n = (n * 4).min(MAX_ITERATIONS);
            }
            let wanted = target.as_secs_f64() / per_iteration.max(1e-9);
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "clamped to 1..=MAX_ITERATIONS"
            )]
            let n =
                wanted.clamp(float(least.clamp(1, MAX_ITERATIONS)), float(MAX_ITERATIONS)) as u64;
            f(n)
        }
    }
}

/// Rounds in which two measurements that are compared alternate (with
/// [`Timing::Duration`]), so that a burst of load from elsewhere on the
/// machine falls on both rather than on one.
const ROUNDS: u32 = 5;

/// The timing of one round, and the number of rounds.
fn split(timing: Timing) -> (Timing, u32) {
    match timing {
        Timing::Iterations(n) => (Timing::Iterations(n), 1),
        Timing::Duration(d) => (Timing::Duration(d / ROUNDS), ROUNDS),
    }
}

/// One measurement made in rounds: the first round warms up and sizes the
/// run as [`measure`] does (to at least `least` iterations), the later ones
/// repeat its count; `total` adds the rounds up and `runs` keeps each.
struct Rounds {
    timing: Timing,
    least: u64,
    n: Option<u64>,
    total: Run,
    runs: Vec<Run>,
}

impl Rounds {
    fn new(timing: Timing) -> Self {
        Self {
            timing,
            least: 1,
            n: None,
            total: Run::default(),
            runs: Vec::new(),
        }
    }

    /// The same, with at least `least` iterations in each round sized by a
    /// duration.
    fn at_least(self, least: u64) -> Self {
        Self { least, ..self }
    }

    fn round<T>(&mut self, mut f: impl FnMut(u64) -> Result<(Run, T)>) -> Result<T> {
        let (run, out) = match self.n {
            None => measure(self.timing, self.least, f)?,
            Some(n) => f(n)?,
        };
        self.n = Some(run.iterations);
        self.total.iterations += run.iterations;
        self.total.completions += run.completions;
        self.total.receive_completions += run.receive_completions;
        self.total.seconds += run.seconds;
        self.runs.push(run);
        Ok(out)
    }
}

/// Slots of `size` bytes each side's buffer holds.
fn slots(size: usize, queue_depth: usize) -> usize {
    (SLOT_BUDGET / size).clamp(1, queue_depth.max(1))
}

/// A 64-bit mix (splitmix64's finaliser).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Fills `slot` with the pattern of `seed`.
fn fill(slot: &mut [u8], seed: u64) {
    let mut words = slot.chunks_exact_mut(8);
    let mut k = 0_u64;
    for word in &mut words {
        word.copy_from_slice(&mix(seed ^ k).to_le_bytes());
        k += 1;
    }
    let tail = mix(seed ^ k).to_le_bytes();
    let rest = words.into_remainder();
    let len = rest.len();
    rest.copy_from_slice(&tail[..len]);
}

/// The seed of `slot` in run `run` of a test of `size` bytes: the data
/// depends on the size, the run and the iteration (iteration `i` uses slot
/// `i % slots`).
fn seed(tag: u64, size: usize, run: u64, slot: usize) -> u64 {
    mix(mix(mix(tag ^ size as u64) ^ run) ^ slot as u64)
}

/// Checks that the first `used` slots of `dst` equal those of `src`.
fn verify(what: &str, src: &[u8], dst: &[u8], size: usize, used: usize) -> Result<()> {
    let len = size * used;
    if src[..len] == dst[..len] {
        return Ok(());
    }
    let at = src[..len]
        .iter()
        .zip(&dst[..len])
        .position(|(s, d)| s != d)
        .unwrap_or(0);
    Err(format!(
        "data mismatch: {what} of {size} B, message slot {}, byte {}: sent {:#04x}, received {:#04x}",
        at / size,
        at % size,
        src[at],
        dst[at]
    ))
}

/// Checks one completion.
fn completed(what: &str, result: &NdkResult, expected: u64) -> Result<()> {
    if result.status != STATUS_SUCCESS {
        return Err(format!(
            "{what} #{expected} completed with status {:#010x}",
            result.status.cast_unsigned()
        ));
    }
    let number = request_number(result) as u64;
    if number != expected {
        return Err(format!(
            "{what}: completion of request #{number} where #{expected} was due"
        ));
    }
    Ok(())
}

/// The operations measured for bandwidth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `NdkWrite` from A's buffer into B's.
    Write,
    /// `NdkRead` from B's buffer into A's.
    Read,
    /// `NdkSend` from A's buffer into receives posted by B.
    Send,
}

impl Op {
    /// The operation's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Self::Write => "RDMA Write",
            Self::Read => "RDMA Read",
            Self::Send => "Send",
        }
    }
}

/// Messages each bandwidth round times at least when sized by a duration
/// (each memcpy round half as many, as it gets half the time): at 8 MiB a
/// round of 0.2 s / 5 would otherwise hold about 30 messages, so few that
/// one descheduling moves it.
pub const ROUND_MESSAGES: u64 = 64;

/// A bandwidth figure and its memcpy baseline, measured in alternating
/// rounds.
pub struct Bandwidth {
    /// The rounds of the operation, added up.
    pub run: Run,
    /// The memcpy rounds over the same buffers, added up.
    pub memcpy: Run,
    /// Each round's bandwidth over that of the memcpy round after it, in
    /// order.
    pub ratios: Vec<f64>,
}

/// The median of `values` (sorted here); 0 when there are none.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => 0.0,
        len if len % 2 == 1 => values[mid],
        _ => f64::midpoint(values[mid - 1], values[mid]),
    }
}

/// Measures `op` at `size` bytes and memcpy over the same buffers, in
/// alternating rounds: each round's transfer is checked as a whole
/// measurement is (completions counted, data compared).
pub fn bandwidth(link: &Link, op: Op, size: usize, config: &Config) -> Result<Bandwidth> {
    let slots = slots(size, config.queue_depth);
    let mut a = link.a.pd.region(slots * size)?;
    let mut b = link.b.pd.region(slots * size)?;
    // Fault both buffers' pages in before any timing: otherwise the first
    // warm-up runs, which size the rounds, pay for the destination's.
    a.bytes_mut().fill(0xA5);
    b.bytes_mut().fill(0x5A);
    let (timing, rounds) = split(config.timing);
    let mut transfers = Rounds::new(timing).at_least(ROUND_MESSAGES);
    let mut copies = Rounds::new(timing.halved()).at_least(ROUND_MESSAGES / 2);
    let mut run_number = 0;
    for _ in 0..rounds {
        transfers.round(|n| {
            run_number += 1;
            let src = if op == Op::Read { &mut b } else { &mut a };
            for (slot, bytes) in src.bytes_mut().chunks_exact_mut(size).enumerate() {
                fill(bytes, seed(op as u64, size, run_number, slot));
            }
            let buffers = Buffers {
                a: &a,
                b: &b,
                size,
                slots,
            };
            let run = match op {
                Op::Write | Op::Read => rdma(link, op, buffers, n, config)?,
                Op::Send => send(link, buffers, n, false, config)?,
            };
            let (src, dst) = if op == Op::Read { (&b, &a) } else { (&a, &b) };
            let used = usize::try_from(n).unwrap_or(usize::MAX).min(slots);
            verify(op.name(), src.bytes(), dst.bytes(), size, used)?;
            Ok((run, ()))
        })?;
        let (src, dst) = if op == Op::Read {
            (&b, &mut a)
        } else {
            (&a, &mut b)
        };
        let (src, dst) = (src.bytes(), dst.bytes_mut());
        copies.round(|n| Ok((memcpy(src, dst, size, slots, n), ())))?;
    }
    a.close()?;
    b.close()?;
    let rate = |run: &Run| float(run.iterations) / run.seconds;
    let ratios = transfers
        .runs
        .iter()
        .zip(&copies.runs)
        .map(|(transfer, copy)| rate(transfer) / rate(copy))
        .collect();
    Ok(Bandwidth {
        run: transfers.total,
        memcpy: copies.total,
        ratios,
    })
}

/// The slot after `slot` in a rotation over `slots` of them (message `i`
/// uses slot `i % slots`).
fn next_slot(slot: usize, slots: usize) -> usize {
    if slot + 1 >= slots { 0 } else { slot + 1 }
}

/// `n` copies of `size` bytes from slot `i % slots` of `src` to the same
/// slot of `dst`.
fn memcpy(src: &[u8], dst: &mut [u8], size: usize, slots: usize, n: u64) -> Run {
    let start = Instant::now();
    let mut slot = 0;
    for _ in 0..n {
        let at = slot * size;
        black_box(&mut dst[at..at + size]).copy_from_slice(black_box(&src[at..at + size]));
        slot = next_slot(slot, slots);
    }
    Run {
        iterations: n,
        completions: n,
        receive_completions: 0,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// The SGE lists of `slots` messages of `size` bytes each over `region`
/// (slot `i` at offset `i * size`), each split into `sge` SGEs.
fn slot_sges(region: &Region, size: usize, slots: usize, sge: usize) -> Vec<Vec<NdkSge>> {
    let mut lists: Vec<Vec<NdkSge>> = vec![Vec::new(); slots];
    for (slot, list) in lists.iter_mut().enumerate() {
        region.sges(slot * size, size, sge, list);
    }
    lists
}

/// The buffers of one run: `slots` message slots of `size` bytes in A's
/// region and as many in B's (slot `i` at offset `i * size`; message `i`
/// uses slot `i % slots`).
#[derive(Clone, Copy)]
struct Buffers<'r> {
    a: &'r Region,
    b: &'r Region,
    size: usize,
    slots: usize,
}

/// `n` RDMA Writes (A's buffer to B's) or Reads (B's buffer into A's),
/// `queue_depth` in flight.
fn rdma(link: &Link, op: Op, buffers: Buffers<'_>, n: u64, config: &Config) -> Result<Run> {
    let Buffers { a, b, size, slots } = buffers;
    let sges = slot_sges(a, size, slots, config.sge);
    let remote: Vec<u64> = (0..slots).map(|slot| b.address(slot * size)).collect();
    let token = b.remote_token();
    let depth = config.queue_depth as u64;
    let qp = &link.a.qp;
    let mut results = [EMPTY_RESULT; 64];
    let (mut posted, mut done, mut slot) = (0_u64, 0_u64, 0_usize);
    let start = Instant::now();
    while done < n {
        while posted < n && posted - done < depth {
            let number = usize::try_from(posted).unwrap_or(usize::MAX);
            if op == Op::Write {
                qp.write(number, &sges[slot], remote[slot], token)?;
            } else {
                qp.read(number, &sges[slot], remote[slot], token)?;
            }
            posted += 1;
            slot = next_slot(slot, slots);
        }
        let got = link.a.cq.wait(&mut results, config.armed)?;
        for result in &results[..got] {
            completed(op.name(), result, done)?;
            done += 1;
        }
    }
    Ok(Run {
        iterations: n,
        completions: done,
        receive_completions: 0,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// `n` Sends from A's buffer into receives that a second thread posts on B
/// and reaps, `queue_depth` in flight; with `defer`, each batch of posts is
/// one chain of `NDK_OP_FLAG_DEFER` requests rung by its last.
fn send(link: &Link, buffers: Buffers<'_>, n: u64, defer: bool, config: &Config) -> Result<Run> {
    let Buffers { a, b, size, slots } = buffers;
    let sges = slot_sges(a, size, slots, config.sge);
    let receive_sges = slot_sges(b, size, slots, 1);
    let receive_depth = receive_depth(config.queue_depth) as u64;
    let depth = config.queue_depth as u64;
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let receiver = scope.spawn(|| -> Result<(u64, Instant)> {
            let qp = &link.b.qp;
            let (mut posted, mut done) = (0_u64, 0_u64);
            let post = |posted: &mut u64| {
                let slot = usize::try_from(*posted % slots as u64).unwrap_or(0);
                let number = usize::try_from(*posted).unwrap_or(usize::MAX);
                *posted += 1;
                qp.receive(number, &receive_sges[slot])
            };
            let mut prepost = || -> Result<()> {
                while posted < n && posted < receive_depth {
                    post(&mut posted)?;
                }
                Ok(())
            };
            let preposted = prepost();
            barrier.wait();
            preposted?;
            let mut results = [EMPTY_RESULT; 64];
            while done < n {
                let got = link.b.cq.wait(&mut results, config.armed)?;
                for result in &results[..got] {
                    completed("Receive", result, done)?;
                    if result.bytes_transferred as usize != size {
                        return Err(format!(
                            "Receive #{done}: {} bytes where {size} were sent",
                            result.bytes_transferred
                        ));
                    }
                    done += 1;
                }
                while posted < n && posted - done < receive_depth {
                    post(&mut posted)?;
                }
            }
            Ok((done, Instant::now()))
        });
        barrier.wait();
        let qp = &link.a.qp;
        let mut results = [EMPTY_RESULT; 64];
        let (mut posted, mut done, mut slot) = (0_u64, 0_u64, 0_usize);
        let start = Instant::now();
        let sent = (|| -> Result<()> {
            while done < n {
                let room = (n - posted).min(depth - (posted - done));
                for k in 0..room {
                    let flags = if defer && k + 1 < room {
                        OpFlags::DEFER
                    } else {
                        OpFlags::empty()
                    };
                    let number = usize::try_from(posted).unwrap_or(usize::MAX);
                    qp.send(number, &sges[slot], flags)?;
                    posted += 1;
                    slot = next_slot(slot, slots);
                }
                let got = link.a.cq.wait(&mut results, config.armed)?;
                for result in &results[..got] {
                    completed("Send", result, done)?;
                    done += 1;
                }
            }
            Ok(())
        })();
        let sender_end = Instant::now();
        let joined = receiver
            .join()
            .map_err(|_| "the receiving thread panicked".to_owned())?;
        sent?;
        let (receive_count, receiver_end) = joined?;
        Ok(Run {
            iterations: n,
            completions: done,
            receive_completions: receive_count,
            seconds: sender_end
                .max(receiver_end)
                .duration_since(start)
                .as_secs_f64(),
        })
    })
}

/// Receive queue depth for an initiator queue depth.
pub fn receive_depth(queue_depth: usize) -> usize {
    (queue_depth * 4).max(64)
}

/// The 64 B Send message rate, unbatched and with DEFER chains.
pub struct Rate {
    /// One post per request, each ringing the doorbell.
    pub unbatched: Run,
    /// Chains of `queue_depth` requests, all but the last `DEFER`.
    pub deferred: Run,
}

/// Measures the 64 B Send message rate, unbatched and deferred.
pub fn rate(link: &Link, config: &Config) -> Result<Rate> {
    let size = SMALL;
    let slots = slots(size, config.queue_depth);
    let mut a = link.a.pd.region(slots * size)?;
    let b = link.b.pd.region(slots * size)?;
    let (timing, rounds) = split(config.timing);
    let mut figures = [Rounds::new(timing), Rounds::new(timing)];
    let mut run_number = 0;
    for _ in 0..rounds {
        for (defer, figure) in [false, true].into_iter().zip(&mut figures) {
            figure.round(|n| {
                run_number += 1;
                for (slot, bytes) in a.bytes_mut().chunks_exact_mut(size).enumerate() {
                    fill(
                        bytes,
                        seed(0x5E4D + u64::from(defer), size, run_number, slot),
                    );
                }
                let buffers = Buffers {
                    a: &a,
                    b: &b,
                    size,
                    slots,
                };
                let run = send(link, buffers, n, defer, config)?;
                let used = usize::try_from(n).unwrap_or(usize::MAX).min(slots);
                verify("Send", a.bytes(), b.bytes(), size, used)?;
                Ok((run, ()))
            })?;
        }
    }
    a.close()?;
    b.close()?;
    let [unbatched, deferred] = figures.map(|figure| figure.total);
    Ok(Rate {
        unbatched,
        deferred,
    })
}

/// Percentiles of half round trips, in nanoseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Percentiles {
    /// The median.
    pub median: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The 99.9th percentile.
    pub p999: f64,
}

impl Percentiles {
    /// Of `samples` (sorted here).
    fn of(samples: &mut [u64]) -> Self {
        samples.sort_unstable();
        let at = |p: f64| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "an index into samples"
            )]
            let rank = (p * float(samples.len() as u64)).ceil() as usize;
            samples
                .get(rank.saturating_sub(1).min(samples.len().saturating_sub(1)))
                .map_or(0.0, |&ns| float(ns) / 2.0)
        };
        Self {
            median: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
        }
    }
}

/// A ping-pong's half round trips and their baseline.
pub struct Latency {
    /// The ping-pong run.
    pub run: Run,
    /// Its half round trips.
    pub half: Percentiles,
    /// The cache-line hand-off run.
    pub cacheline_run: Run,
    /// Its one-way hand-offs (half round trips).
    pub cacheline: Percentiles,
}

/// The 64 B Send / Receive ping-pong between A (this thread) and B (a
/// second thread), and the cache-line hand-off between two threads.
pub fn latency(link: &Link, config: &Config) -> Result<Latency> {
    let mut regions = [
        link.a.pd.region(SMALL)?,
        link.a.pd.region(SMALL)?,
        link.b.pd.region(SMALL)?,
        link.b.pd.region(SMALL)?,
    ];
    let (timing, rounds) = split(config.timing);
    let mut ping = Rounds::new(timing);
    let mut handoff = Rounds::new(timing);
    let (mut samples, mut handoff_samples) = (Vec::new(), Vec::new());
    let mut run_number = 0;
    for _ in 0..rounds {
        samples.extend(ping.round(|n| {
            run_number += 1;
            let [a_send, a_receive, b_send, b_receive] = &mut regions;
            ping_pong(
                link,
                [a_send, a_receive, b_send, b_receive],
                n,
                run_number,
                config,
            )
        })?);
        handoff_samples.extend(handoff.round(|n| Ok(cacheline(n)))?);
    }
    for region in regions {
        region.close()?;
    }
    let half = Percentiles::of(&mut samples);
    let cacheline = Percentiles::of(&mut handoff_samples);
    let (run, cacheline_run) = (ping.total, handoff.total);
    Ok(Latency {
        run,
        half,
        cacheline_run,
        cacheline,
    })
}

/// The message of iteration `i` in run `run`, from the pinging side
/// (`pong == false`) or the answering side.
fn message(run: u64, i: u64, pong: bool, out: &mut [u8]) {
    fill(out, seed(0x9146 + u64::from(pong), SMALL, run, 0) ^ i);
}

/// Checks a received ping-pong message.
fn check_message(run: u64, i: u64, pong: bool, got: &[u8]) -> Result<()> {
    let mut expected = [0_u8; SMALL];
    message(run, i, pong, &mut expected);
    verify(
        if pong { "Send (pong)" } else { "Send (ping)" },
        &expected,
        got,
        SMALL,
        1,
    )
}

/// Waits on `cq` for receive completion number `i`; counts the send
/// completions met on the way in `sends`.
fn wait_receive(
    cq: &crate::ndk::Cq,
    results: &mut [NdkResult; 1],
    i: u64,
    sends: &mut u64,
    armed: bool,
) -> Result<()> {
    loop {
        cq.wait(results, armed)?;
        let result = &results[0];
        if request_number(result) >= RECEIVE_BASE {
            let mut numbered = *result;
            numbered.request_context =
                std::ptr::without_provenance_mut(request_number(result) - RECEIVE_BASE);
            completed("Receive", &numbered, i)?;
            if result.bytes_transferred as usize != SMALL {
                return Err(format!(
                    "Receive #{i}: {} bytes where {SMALL} were sent",
                    result.bytes_transferred
                ));
            }
            return Ok(());
        }
        completed("Send", result, *sends)?;
        *sends += 1;
    }
}

/// Receive request numbers start here, so that one CQ tells them from sends.
const RECEIVE_BASE: usize = 1 << 40;

/// Request number `i` of a receive.
fn receive_number(i: u64) -> usize {
    RECEIVE_BASE + usize::try_from(i).unwrap_or(0)
}

/// `n` round trips; returns the run and each round trip in nanoseconds.
fn ping_pong(
    link: &Link,
    [a_send, a_receive, b_send, b_receive]: [&mut Region; 4],
    n: u64,
    run: u64,
    config: &Config,
) -> Result<(Run, Vec<u64>)> {
    let mut lists: [Vec<NdkSge>; 4] = Default::default();
    for (region, list) in [&*a_send, &*a_receive, &*b_send, &*b_receive]
        .into_iter()
        .zip(&mut lists)
    {
        region.sges(0, SMALL, 1, list);
    }
    let [a_send_sge, a_receive_sge, b_send_sge, b_receive_sge] = &lists;
    let barrier = Barrier::new(2);
    let armed = config.armed;
    std::thread::scope(|scope| {
        let answerer = scope.spawn(|| -> Result<u64> {
            let qp = &link.b.qp;
            let preposted = qp.receive(receive_number(0), b_receive_sge);
            barrier.wait();
            preposted?;
            let mut results = [EMPTY_RESULT; 1];
            let mut sends = 0;
            for i in 0..n {
                wait_receive(&link.b.cq, &mut results, i, &mut sends, armed)?;
                check_message(run, i, false, b_receive.bytes())?;
                if i + 1 < n {
                    qp.receive(receive_number(i + 1), b_receive_sge)?;
                }
                message(run, i, true, b_send.bytes_mut());
                qp.send(
                    usize::try_from(i).unwrap_or(0),
                    b_send_sge,
                    OpFlags::empty(),
                )?;
            }
            drain_sends(&link.b.cq, &mut sends, n, armed)?;
            Ok(sends)
        });
        let qp = &link.a.qp;
        let preposted = qp.receive(receive_number(0), a_receive_sge);
        barrier.wait();
        let mut samples = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        let mut sends = 0;
        let start = Instant::now();
        let pinged = (|| -> Result<()> {
            preposted?;
            let mut results = [EMPTY_RESULT; 1];
            for i in 0..n {
                message(run, i, false, a_send.bytes_mut());
                let t0 = Instant::now();
                qp.send(
                    usize::try_from(i).unwrap_or(0),
                    a_send_sge,
                    OpFlags::empty(),
                )?;
                wait_receive(&link.a.cq, &mut results, i, &mut sends, armed)?;
                let t1 = Instant::now();
                samples.push(u64::try_from(t1.duration_since(t0).as_nanos()).unwrap_or(u64::MAX));
                check_message(run, i, true, a_receive.bytes())?;
                if i + 1 < n {
                    qp.receive(receive_number(i + 1), a_receive_sge)?;
                }
            }
            drain_sends(&link.a.cq, &mut sends, n, armed)
        })();
        let seconds = start.elapsed().as_secs_f64();
        let joined = answerer
            .join()
            .map_err(|_| "the answering thread panicked".to_owned())?;
        pinged?;
        joined?;
        Ok((
            Run {
                iterations: n,
                completions: sends,
                receive_completions: n,
                seconds,
            },
            samples,
        ))
    })
}

/// Polls send completions until `n` are counted.
fn drain_sends(cq: &crate::ndk::Cq, sends: &mut u64, n: u64, armed: bool) -> Result<()> {
    let mut results = [EMPTY_RESULT; 64];
    while *sends < n {
        let got = cq.wait(&mut results, armed)?;
        for result in &results[..got] {
            completed("Send", result, *sends)?;
            *sends += 1;
        }
    }
    Ok(())
}

/// Spins until `line` holds `value`, yielding the core as a polling CQ
/// wait does after [`SPINS_BEFORE_YIELD`] tries.
fn wait_for(line: &AtomicU64, value: u64) {
    let mut spins = 0_u32;
    while line.load(Ordering::Acquire) != value {
        spins = spins.saturating_add(1);
        if spins > SPINS_BEFORE_YIELD {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One cache line, alone in its own line.
#[repr(align(128))]
struct Line(AtomicU64);

/// `n` round trips of a value between two threads through one cache line;
/// returns the run and each round trip in nanoseconds.
fn cacheline(n: u64) -> (Run, Vec<u64>) {
    let line = Line(AtomicU64::new(0));
    let mut samples = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    let start = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..n {
                wait_for(&line.0, 2 * i + 1);
                line.0.store(2 * i + 2, Ordering::Release);
            }
        });
        for i in 0..n {
            let t0 = Instant::now();
            line.0.store(2 * i + 1, Ordering::Release);
            wait_for(&line.0, 2 * i + 2);
            samples.push(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
    });
    let run = Run {
        iterations: n,
        completions: n,
        receive_completions: 0,
        seconds: start.elapsed().as_secs_f64(),
    };
    (run, samples)
}
