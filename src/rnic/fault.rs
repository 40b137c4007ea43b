//! Deterministic fault injection: which call of which kind fails.
//!
//! Off by default. A *plan* ([`Plan`]) is a seed and a rate per [`Kind`]
//! (parts per million), and / or an exact schedule ("the 3rd call of kind
//! `post`"). Installed ([`install`]), it arms one hook per place where an
//! outcome is decided (the hooks are one line each, in `rnic` and in the
//! provider): each asks [`hit`] whether this call of its kind fails, and if
//! so produces the fault — always one the rules allow the provider to
//! produce (each [`Kind`] names its rules).
//!
//! # Determinism
//!
//! Every kind has its own call counter. The `n`th call of kind `k` (counted
//! from 1 since the plan was installed) fails when the schedule names
//! (`k`, `n`), or when a counter-based pseudo-random function of
//! (seed, `k`, `n`) falls below `k`'s rate ([`Plan::fires`]): no generator
//! state is shared between calls, so there is nothing to race. Hence:
//!
//! * the same plan and the same sequence of calls of each kind give the
//!   same faults, run after run (a single-threaded consumer replays exactly);
//! * with threads, each call takes its index from one atomic increment, so
//!   indices are never lost or repeated and the *set* of failing indices is
//!   the same for a seed; which thread's call received which index follows
//!   the interleaving. A consumer that orders its calls of one kind (one
//!   thread per kind, or a lock) replays exactly.
//!
//! The provider keeps the newest [`TRACE_LEN`] injected faults (kind and
//! index) in a fixed ring ([`each_record`]), so two runs can be compared.
//!
//! # Cost
//!
//! Unarmed, [`hit`] is one relaxed load and a branch. Armed, one atomic
//! increment per hook evaluation and a few multiplications; no allocation,
//! no lock, callable at any IRQL.
//!
//! Plain Rust with no NDK knowledge: the plan's text form is parsed here
//! ([`Plan::parse`]), the C structure and the registry keywords are mapped
//! onto [`Plan`] above this layer.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

use super::types::{Opcode, WcStatus};

numbered! {
    /// A kind of fault: where it is decided and what the consumer sees.
    pub enum Kind {
        /// A create (any object, the adapter included) fails inline with
        /// `STATUS_INSUFFICIENT_RESOURCES` (rule L9); nothing was created.
        Create = 0,
        /// A work request (initiator request or receive) is refused inline as
        /// if its queue were full, `STATUS_NO_MORE_ENTRIES` (P24); it leaves no
        /// trace (P6) and earlier deferred requests are handed over first (D4).
        Post = 1,
        /// An initiator request on a connected QP completes with an error
        /// instead of running — a status E8 allows for its operation, chosen
        /// from the seed and the call's index ([`error_status`]) — and the
        /// connection terminates (E5): later and outstanding requests complete
        /// cancelled, both sides get a disconnect indication (X2). Over iWARP
        /// the peer learns it from a Terminate (RFC 5040 §7: a local
        /// catastrophic error, this side's fault).
        Completion = 2,
        /// The connection of a connected QP aborts just before an initiator
        /// request is queued: both sides get a disconnect indication (X2, N24);
        /// outstanding requests and this one complete cancelled (E5).
        Abort = 3,
        /// A CQ overflows as the next completion is queued: the notification
        /// callback reports `STATUS_BUFFER_OVERFLOW` through the arm, the CQ and
        /// its QPs are unusable, no further completion is reported (E10, E12).
        CqOverflow = 4,
        /// A Send finds the peer's receive queue empty and gives up (the iWARP
        /// behaviour, RFC 5040 §7): it completes with `STATUS_REMOTE_RESOURCES`
        /// (E8) and the connection terminates (E5); the peer's receives
        /// complete cancelled. Over iWARP it is decided where the Send's first
        /// segment arrives: the receiving side answers with a Terminate (DDP
        /// untagged buffer error, "no buffer available", RFC 5041 §7.2), as it
        /// does for a queue really empty.
        ReceiveEmpty = 5,
        /// A create with a completion returns `STATUS_PENDING` and calls its
        /// create completion later, from another thread, with the new object
        /// (L5, L6).
        PendingCreate = 6,
        /// A close with a completion returns `STATUS_PENDING` and completes
        /// later, from another thread (L18, L21).
        PendingClose = 7,
        /// A request completion or event callback (connect, disconnect
        /// indication, SRQ notification) is delivered later from another thread
        /// instead of on the thread that completed it (I3); callbacks of one
        /// object stay in order and never overlap.
        Delay = 8,
    }
}

/// How many kinds there are.
pub const KINDS: usize = Kind::ALL.len();

impl Kind {
    /// The kind's name in a plan's text form.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Post => "post",
            Self::Completion => "completion",
            Self::Abort => "abort",
            Self::CqOverflow => "cq-overflow",
            Self::ReceiveEmpty => "receive-empty",
            Self::PendingCreate => "pending-create",
            Self::PendingClose => "pending-close",
            Self::Delay => "delay",
        }
    }

    /// The kind numbered `index`.
    pub fn from_index(index: usize) -> Option<Self> {
        u8::try_from(index).ok().and_then(Self::from_u8)
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

/// A rate of one in a million: rates are parts per million.
pub const MILLION: u32 = 1_000_000;

/// Entries a schedule holds at most.
pub const MAX_SCHEDULED: usize = 16;

/// A fault plan: a seed, a rate per kind and an exact schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The seed of the pseudo-random decisions.
    pub seed: u64,
    /// Per kind ([`Kind`] order), the share of calls that fail, in parts
    /// per million (0: never by chance, [`MILLION`]: always).
    pub rates: [u32; KINDS],
    /// Calls that fail whatever the rates: (kind, index from 1).
    pub schedule: [Option<(Kind, u64)>; MAX_SCHEDULED],
}

/// Why a plan's text was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// An item that is none of the forms (`seed=`, `rate=`, `KIND=`,
    /// `KIND@N`, `SEED:RATE`).
    BadItem,
    /// An unknown kind name.
    UnknownKind,
    /// A number that does not parse or is out of range (a rate above 1, a
    /// schedule index of 0).
    BadNumber,
    /// More than [`MAX_SCHEDULED`] schedule entries.
    ScheduleFull,
}

/// The splitmix64 finalizer: a well-mixed 64-bit function of its input.
const fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The pseudo-random draw of the `index`th call of `kind` under `seed`, in
/// `0..MILLION`: a pure function (counter-based), so equal inputs always
/// draw equally.
#[must_use]
pub const fn draw(seed: u64, kind: Kind, index: u64) -> u32 {
    let key = mix(seed ^ mix((kind as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    let x = mix(key) >> 32;
    // `x < 2^32`, so the product fits and the result is below MILLION.
    ((x * MILLION as u64) >> 32) as u32
}

impl Plan {
    /// A plan that never fires (all rates 0, nothing scheduled): armed, it
    /// counts calls and injects nothing.
    pub const NEVER: Self = Self {
        seed: 0,
        rates: [0; KINDS],
        schedule: [None; MAX_SCHEDULED],
    };

    /// Whether the `index`th call (from 1) of `kind` fails under this plan.
    #[must_use]
    pub fn fires(&self, kind: Kind, index: u64) -> bool {
        let rate = self.rates.get(kind as usize).copied().unwrap_or(0);
        self.schedule.iter().flatten().any(|&s| s == (kind, index))
            || draw(self.seed, kind, index) < rate
    }

    /// Adds "the `index`th call of `kind` fails" to the schedule.
    ///
    /// # Errors
    /// [`ParseError::ScheduleFull`], [`ParseError::BadNumber`] for index 0.
    pub fn schedule(&mut self, kind: Kind, index: u64) -> Result<(), ParseError> {
        if index == 0 {
            return Err(ParseError::BadNumber);
        }
        let free = self
            .schedule
            .iter_mut()
            .find(|s| s.is_none())
            .ok_or(ParseError::ScheduleFull)?;
        *free = Some((kind, index));
        Ok(())
    }

    /// Parses a plan's text form: items separated by `,` (spaces around
    /// them ignored):
    ///
    /// * `seed=N` — the seed (decimal, or hex with `0x`);
    /// * `rate=R` — the rate of every kind; `KIND=R` — of one kind; `R` is
    ///   a fraction from 0 to 1 with up to six decimals (`0.01`) or a
    ///   percentage (`1%`, `0.5%`);
    /// * `KIND@N` — the `N`th call (from 1) of `KIND` fails;
    /// * `SEED:RATE` — short for `seed=SEED,rate=RATE`.
    ///
    /// Kinds are [`Kind::name`]s. An empty text is the plan that never
    /// fires; `off` is `None` (no plan).
    ///
    /// # Errors
    /// [`ParseError`] for the first item that does not parse.
    pub fn parse(text: &str) -> Result<Option<Self>, ParseError> {
        let text = text.trim();
        if text == "off" {
            return Ok(None);
        }
        let mut plan = Self::NEVER;
        plan.apply(text)?;
        Ok(Some(plan))
    }

    /// Parses the items of `text` (as [`parse`](Self::parse), without
    /// `off`) onto this plan: what they name replaces what it had.
    ///
    /// # Errors
    /// [`ParseError`] for the first item that does not parse (the items
    /// before it are applied).
    pub fn apply(&mut self, text: &str) -> Result<(), ParseError> {
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            self.parse_item(item)?;
        }
        Ok(())
    }

    fn parse_item(&mut self, item: &str) -> Result<(), ParseError> {
        if let Some((name, value)) = item.split_once('=') {
            let (name, value) = (name.trim(), value.trim());
            match name {
                "seed" => self.seed = parse_u64(value)?,
                "rate" => self.rates = [parse_rate(value)?; KINDS],
                _ => {
                    let kind = Kind::from_name(name).ok_or(ParseError::UnknownKind)?;
                    if let Some(rate) = self.rates.get_mut(kind as usize) {
                        *rate = parse_rate(value)?;
                    }
                }
            }
            return Ok(());
        }
        if let Some((name, index)) = item.split_once('@') {
            let kind = Kind::from_name(name.trim()).ok_or(ParseError::UnknownKind)?;
            return self.schedule(kind, parse_u64(index.trim())?);
        }
        if let Some((seed, rate)) = item.split_once(':') {
            self.seed = parse_u64(seed.trim())?;
            self.rates = [parse_rate(rate.trim())?; KINDS];
            return Ok(());
        }
        Err(ParseError::BadItem)
    }
}

/// A decimal or `0x` hexadecimal `u64`.
fn parse_u64(text: &str) -> Result<u64, ParseError> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| ParseError::BadNumber)
}

/// A rate as parts per million: a fraction `0`–`1` with up to six decimals,
/// or a percentage with up to four decimals (`%`). No floating point (the
/// parser also runs in the kernel).
fn parse_rate(text: &str) -> Result<u32, ParseError> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(percent) => (percent.trim(), 4_u32),
        None => (text, 6_u32),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(fraction.is_empty() || digits(fraction)) {
        return Err(ParseError::BadNumber);
    }
    if fraction.len() > scale as usize {
        return Err(ParseError::BadNumber);
    }
    let whole: u64 = whole.parse().map_err(|_| ParseError::BadNumber)?;
    let mut fraction_value: u64 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| ParseError::BadNumber)?
    };
    for _ in fraction.len()..scale as usize {
        fraction_value *= 10;
    }
    let unit = 10_u64.pow(scale);
    let value = whole
        .checked_mul(unit)
        .and_then(|w| w.checked_add(fraction_value))
        .ok_or(ParseError::BadNumber)?;
    // A fraction in millionths, or a percentage in ten-thousandths of a
    // percent: either way, parts per million.
    let ppm = value;
    if ppm > u64::from(MILLION) {
        return Err(ParseError::BadNumber);
    }
    u32::try_from(ppm).map_err(|_| ParseError::BadNumber)
}

// ----- the installed plan --------------------------------------------------

/// Whether a plan is installed: the one word an unarmed hook reads.
static ARMED: AtomicBool = AtomicBool::new(false);
static SEED: AtomicU64 = AtomicU64::new(0);
static RATES: [AtomicU32; KINDS] = [const { AtomicU32::new(0) }; KINDS];
/// Schedule entries: 0 free, else `(kind + 1) << 56 | index`.
static SCHEDULE: [AtomicU64; MAX_SCHEDULED] = [const { AtomicU64::new(0) }; MAX_SCHEDULED];
/// Calls of each kind since the plan was installed.
static CALLS: [AtomicU64; KINDS] = [const { AtomicU64::new(0) }; KINDS];

/// Injected faults kept, the newest ones.
pub const TRACE_LEN: usize = 64;
/// The kept faults: 0 empty, else `(kind + 1) << 56 | index`.
static TRACE: [AtomicU64; TRACE_LEN] = [const { AtomicU64::new(0) }; TRACE_LEN];
/// Faults injected since the plan was installed.
static TRACED: AtomicUsize = AtomicUsize::new(0);

/// Indices above this do not fit a packed entry (2^56: never reached).
const INDEX_MASK: u64 = (1 << 56) - 1;

const fn pack(kind: Kind, index: u64) -> u64 {
    ((kind as u64 + 1) << 56) | (index & INDEX_MASK)
}

fn unpack(word: u64) -> Option<(Kind, u64)> {
    let kind = usize::try_from(word >> 56).ok()?.checked_sub(1)?;
    Some((Kind::from_index(kind)?, word & INDEX_MASK))
}

/// Installs `plan` (or, with `None`, turns fault injection off): the call
/// counters and the trace start again from zero. Calls in flight while a
/// plan is installed may be judged by either plan.
pub fn install(plan: Option<&Plan>) {
    ARMED.store(false, Relaxed);
    let plan = plan.copied();
    let base = plan.unwrap_or(Plan::NEVER);
    SEED.store(base.seed, Relaxed);
    for (rate, value) in RATES.iter().zip(base.rates) {
        rate.store(value, Relaxed);
    }
    for (entry, value) in SCHEDULE.iter().zip(base.schedule) {
        entry.store(value.map_or(0, |(k, i)| pack(k, i)), Relaxed);
    }
    for calls in &CALLS {
        calls.store(0, Relaxed);
    }
    for record in &TRACE {
        record.store(0, Relaxed);
    }
    TRACED.store(0, Relaxed);
    if plan.is_some() {
        ARMED.store(true, Release);
    }
}

/// The installed plan, if any.
pub fn installed() -> Option<Plan> {
    if !ARMED.load(Acquire) {
        return None;
    }
    let mut plan = Plan {
        seed: SEED.load(Relaxed),
        ..Plan::NEVER
    };
    for (value, rate) in plan.rates.iter_mut().zip(&RATES) {
        *value = rate.load(Relaxed);
    }
    for (value, entry) in plan.schedule.iter_mut().zip(&SCHEDULE) {
        *value = unpack(entry.load(Relaxed));
    }
    Some(plan)
}

/// Whether a plan is installed (one relaxed load).
#[inline]
pub fn armed() -> bool {
    ARMED.load(Relaxed)
}

/// Whether this call of `kind` fails: the hook every fault site asks.
/// Unarmed: one relaxed load and a branch.
#[inline]
pub fn hit(kind: Kind) -> bool {
    hit_at(kind).is_some()
}

/// As [`hit`], and gives the failing call's index (from 1) within its kind:
/// what a site needs to choose the fault's details ([`error_status`]).
#[inline]
pub fn hit_at(kind: Kind) -> Option<u64> {
    if !ARMED.load(Relaxed) {
        return None;
    }
    hit_armed(kind)
}

#[cold]
#[inline(never)]
fn hit_armed(kind: Kind) -> Option<u64> {
    let calls = CALLS.get(kind as usize)?;
    let index = calls.fetch_add(1, Relaxed).wrapping_add(1);
    let rate = RATES.get(kind as usize).map_or(0, |r| r.load(Relaxed));
    let scheduled = SCHEDULE
        .iter()
        .any(|entry| entry.load(Relaxed) == pack(kind, index));
    let fires = scheduled || draw(SEED.load(Relaxed), kind, index) < rate;
    if fires {
        let seq = TRACED.fetch_add(1, Relaxed);
        if let Some(record) = TRACE.get(seq % TRACE_LEN) {
            record.store(pack(kind, index), Relaxed);
        }
    }
    fires.then_some(index)
}

// ----- details of a fault ----------------------------------------------------

/// The error statuses an injected error completion ([`Kind::Completion`])
/// may carry for a request of `op`: those rule E8's table gives its
/// operation, less `STATUS_CANCELLED` (a flush's, not an error's) and
/// `STATUS_IO_TIMEOUT` (no [`WcStatus`] maps to it: the emulated device
/// has no retransmission timer). Send (and SendAndInvalidate), Read and
/// Write: `STATUS_DATA_OVERRUN`, `STATUS_ACCESS_VIOLATION`,
/// `STATUS_INVALID_DEVICE_REQUEST`, `STATUS_INTERNAL_ERROR`,
/// `STATUS_REMOTE_RESOURCES`; Bind, Invalidate (and FastRegister, as Bind):
/// `STATUS_INVALID_DEVICE_REQUEST`, `STATUS_INTERNAL_ERROR`.
#[must_use]
pub const fn error_statuses(op: Opcode) -> &'static [WcStatus] {
    match op {
        Opcode::Send | Opcode::Read | Opcode::Write => &[
            WcStatus::InternalError,
            WcStatus::LengthError,
            WcStatus::LocalAccessError,
            WcStatus::InvalidRequest,
            WcStatus::RemoteOperationError,
        ],
        Opcode::Bind
        | Opcode::FastRegister
        | Opcode::Invalidate
        | Opcode::Receive
        | Opcode::ReceiveAndInvalidate => &[WcStatus::InternalError, WcStatus::InvalidRequest],
    }
}

/// The status of the injected error completion of the `index`th call of
/// [`Kind::Completion`] under `seed`, for a request of `op`: one of
/// [`error_statuses`], picked by a second draw independent of the one that
/// decided the fault (a pure function: a seed replays its statuses too).
#[must_use]
pub fn error_status_for(seed: u64, op: Opcode, index: u64) -> WcStatus {
    let statuses = error_statuses(op);
    // A draw of another stream than the firing one: the index's high bit.
    let pick = u64::from(draw(seed, Kind::Completion, index | (1 << 63)));
    let n = statuses.len() as u64;
    let at = usize::try_from(pick % n.max(1)).unwrap_or(0);
    statuses.get(at).copied().unwrap_or(WcStatus::InternalError)
}

/// [`error_status_for`] under the installed plan's seed.
#[must_use]
pub fn error_status(op: Opcode, index: u64) -> WcStatus {
    error_status_for(SEED.load(Relaxed), op, index)
}

/// One injected fault: its kind and the call's index within its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// The kind.
    pub kind: Kind,
    /// Which call of that kind (from 1) failed.
    pub index: u64,
}

/// Calls `each` with every kept fault, oldest first; returns how many.
pub fn each_record(mut each: impl FnMut(Record)) -> usize {
    let total = TRACED.load(Relaxed);
    let mut count = 0;
    for seq in total.saturating_sub(TRACE_LEN)..total {
        let word = TRACE.get(seq % TRACE_LEN).map_or(0, |r| r.load(Relaxed));
        if let Some((kind, index)) = unpack(word) {
            each(Record { kind, index });
            count += 1;
        }
    }
    count
}

/// Faults injected since the plan was installed (also those no longer kept).
pub fn injected() -> usize {
    TRACED.load(Relaxed)
}

/// Calls of `kind` judged since the plan was installed.
pub fn calls(kind: Kind) -> u64 {
    CALLS.get(kind as usize).map_or(0, |c| c.load(Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let plan = Plan::parse("seed=42, rate=0.01, post=5%, abort@3, delay@1")
            .unwrap()
            .unwrap();
        assert_eq!(plan.seed, 42);
        assert_eq!(plan.rates[Kind::Create as usize], 10_000);
        assert_eq!(plan.rates[Kind::Post as usize], 50_000);
        assert_eq!(plan.schedule[0], Some((Kind::Abort, 3)));
        assert_eq!(plan.schedule[1], Some((Kind::Delay, 1)));
        assert_eq!(plan.schedule[2], None);

        let short = Plan::parse("7:0.5").unwrap().unwrap();
        assert_eq!(short.seed, 7);
        assert_eq!(short.rates, [500_000; KINDS]);

        assert_eq!(Plan::parse("").unwrap(), Some(Plan::NEVER));
        assert_eq!(Plan::parse("off").unwrap(), None);
        assert_eq!(Plan::parse("seed=0x10").unwrap().unwrap().seed, 16);
        assert_eq!(
            Plan::parse("rate=1").unwrap().unwrap().rates,
            [MILLION; KINDS]
        );
        assert_eq!(
            Plan::parse("cq-overflow=0.000001").unwrap().unwrap().rates[4],
            1
        );
        assert_eq!(
            Plan::parse("pending-close=0.25%").unwrap().unwrap().rates[7],
            2_500
        );
    }

    #[test]
    fn refuses_what_is_not_a_plan() {
        assert_eq!(Plan::parse("seed"), Err(ParseError::BadItem));
        assert_eq!(Plan::parse("nothing=0.1"), Err(ParseError::UnknownKind));
        assert_eq!(Plan::parse("nothing@1"), Err(ParseError::UnknownKind));
        assert_eq!(Plan::parse("rate=1.5"), Err(ParseError::BadNumber));
        assert_eq!(Plan::parse("rate=101%"), Err(ParseError::BadNumber));
        assert_eq!(Plan::parse("rate=0.0000001"), Err(ParseError::BadNumber));
        assert_eq!(Plan::parse("rate=-1"), Err(ParseError::BadNumber));
        assert_eq!(Plan::parse("rate=.5"), Err(ParseError::BadNumber));
        assert_eq!(Plan::parse("post@0"), Err(ParseError::BadNumber));
        assert_eq!(Plan::parse("seed=x"), Err(ParseError::BadNumber));
        let full = "post@1,".repeat(MAX_SCHEDULED) + "post@2";
        assert_eq!(Plan::parse(&full), Err(ParseError::ScheduleFull));
    }

    #[test]
    fn every_kind_round_trips_by_name() {
        for (i, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
            assert_eq!(Kind::from_name(kind.name()), Some(*kind));
            assert_eq!(Kind::from_index(i), Some(*kind));
        }
        assert_eq!(Kind::from_index(KINDS), None);
    }

    #[test]
    fn the_draw_is_a_pure_function_of_seed_kind_and_index() {
        for index in 1..100 {
            assert_eq!(draw(9, Kind::Post, index), draw(9, Kind::Post, index));
            assert!(draw(9, Kind::Post, index) < MILLION);
        }
        let a: Vec<u32> = (1..50).map(|i| draw(1, Kind::Post, i)).collect();
        let b: Vec<u32> = (1..50).map(|i| draw(2, Kind::Post, i)).collect();
        let c: Vec<u32> = (1..50).map(|i| draw(1, Kind::Create, i)).collect();
        assert_ne!(a, b, "another seed draws otherwise");
        assert_ne!(a, c, "another kind draws otherwise");
    }

    #[test]
    fn the_rate_is_honoured_on_average() {
        let plan = Plan {
            seed: 3,
            rates: [100_000; KINDS],
            ..Plan::NEVER
        };
        let fired = (1..=100_000)
            .filter(|&i| plan.fires(Kind::Completion, i))
            .count();
        // 10 % of 100 000, within a wide margin (a deterministic draw).
        assert!((9_000..11_000).contains(&fired), "{fired}");
        assert!(!(1..=1000).any(|i| Plan::NEVER.fires(Kind::Post, i)));
        let always = Plan {
            rates: [MILLION; KINDS],
            ..Plan::NEVER
        };
        assert!((1..=1000).all(|i| always.fires(Kind::Post, i)));
    }

    #[test]
    fn a_schedule_fires_exactly_the_named_calls() {
        let mut plan = Plan::NEVER;
        plan.schedule(Kind::Post, 3).unwrap();
        let fired: Vec<u64> = (1..=10).filter(|&i| plan.fires(Kind::Post, i)).collect();
        assert_eq!(fired, [3]);
        assert!(!(1..=10).any(|i| plan.fires(Kind::Create, i)));
    }

    #[test]
    fn error_statuses_are_those_e8_allows_and_every_one_is_drawn() {
        for op in [Opcode::Send, Opcode::Read, Opcode::Write, Opcode::Bind] {
            let allowed = error_statuses(op);
            assert!(!allowed.contains(&WcStatus::Cancelled));
            assert!(!allowed.contains(&WcStatus::Success));
            let mut seen = [false; 8];
            for seed in 0..200 {
                let status = error_status_for(seed, op, 1);
                let at = allowed.iter().position(|&s| s == status).unwrap();
                seen[at] = true;
                assert_eq!(status, error_status_for(seed, op, 1), "pure");
            }
            assert!(seen.iter().take(allowed.len()).all(|&s| s), "{op:?}");
        }
        for op in [Opcode::Bind, Opcode::Invalidate, Opcode::FastRegister] {
            assert_eq!(
                error_statuses(op),
                [WcStatus::InternalError, WcStatus::InvalidRequest]
            );
        }
    }

    #[test]
    fn packing_keeps_kind_and_index() {
        for kind in Kind::ALL {
            assert_eq!(unpack(pack(kind, 12345)), Some((kind, 12345)));
        }
        assert_eq!(unpack(0), None);
    }
}
