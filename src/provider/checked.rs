//! Checked mode: the consumer's side of the rules, watched and reported.
//!
//! Rules of `../shared/spec/rules.md` marked "(consumer)" bind the consumer;
//! the provider survives their breach (it never crashes for it) but a
//! consumer author wants to know. Each breach the provider can see is a
//! [`Breach`] kind named by its rule id; when one is seen, [`report`] counts
//! it (one atomic counter per rule), keeps it in a fixed ring of the newest
//! [`KEPT`] reports (no allocation, safe at DISPATCH_LEVEL), writes it to the
//! debug log, and in [`Mode::Stop`] stops the machine at the breach (host
//! mode: the report on standard error, then an abort).
//!
//! L17 (a close while another call is inside) is seen by the close path at
//! no cost to anything else and is always reported. The other kinds need
//! bookkeeping on the calls themselves and are watched only in checked mode
//! ([`checked`]), off by default: when off, each watched slot pays one
//! relaxed load of `MODE` and a branch.
//!
//! The mode is per provider instance (the driver, or the host process):
//! set from the registry at driver load, or by `SOFTNDK_CHECKED` /
//! `SoftNdkSetChecked` in host mode (`docs/debugging.md`).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize};

use super::dispatch::Slot;
use crate::abi::NdkObjectType;

/// Declares [`Breach`] from one list of its kinds, each named by its rule
/// id: the enum (discriminants in list order, the counters' order), `ALL`
/// in that order and `rule`, the id as text.
macro_rules! breaches {
    ($($(#[doc = $doc:literal])* $rule:ident,)*) => {
        /// A consumer rule the provider saw broken (and survived).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Breach {
            $($(#[doc = $doc])* $rule,)*
        }

        impl Breach {
            /// Every kind, in counter order.
            pub const ALL: [Self; [$(Self::$rule),*].len()] = [$(Self::$rule),*];

            /// The rule id (`"C1"`).
            pub const fn rule(self) -> &'static str {
                match self {
                    $(Self::$rule => stringify!($rule),)*
                }
            }
        }
    };
}

breaches! {
    /// L17: an object closed while another call on it was still running.
    L17,
    /// C1: GetCqResults, GetCqResultsEx or ArmCq entered a CQ while another
    /// of them was running on it.
    C1,
    /// X5: a QP posted to, or a connector connected, after its connection
    /// ended.
    X5,
    /// D5: a QP flushed, disconnected or closed while its last accepted
    /// initiator request carried the DEFER flag (a chain left un-rung).
    D5,
    /// X7: a connector's Disconnect while initiator requests posted on its
    /// QP have not completed.
    X7,
    /// M22: an accepted post naming a token (an SGE's, or a Read's or
    /// Write's remote token) the consumer itself invalidated earlier and did
    /// not register again.
    M22,
    /// M33: an accepted post whose privileged-token SGE, or a FastRegister
    /// whose page, names a logical address outside every LAM of the adapter.
    M33,
    /// C4: a CQ re-armed from its notification callback while it still holds
    /// results, a second time in a row with no reap in between: a provider
    /// may satisfy such an arm at once, and the callback loops.
    C4,
    /// I3: a consumer callback that ran longer than the bound
    /// ([`callback_bound`]) measured by the provider's clock.
    I3,
    /// P2: a work-request call entering a queue (a QP's initiator or receive
    /// queue, an SRQ) while another one runs on it.
    P2,
}

impl Breach {
    /// The kind whose discriminant is `index` (`ALL` is in that order).
    fn from_index(index: u8) -> Option<Self> {
        Self::ALL.get(usize::from(index)).copied()
    }
}

/// What the provider does about breaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// Only L17 is reported (the default).
    Off,
    /// Every kind is watched and reported.
    Report,
    /// As `Report`, and the first breach stops the machine.
    Stop,
}

/// The mode of this provider instance (a [`Mode`] as its `u8`).
static MODE: AtomicU8 = AtomicU8::new(Mode::Off as u8);

/// Whether checked mode is on: the one test every watched slot makes.
#[inline]
pub fn checked() -> bool {
    MODE.load(Relaxed) != Mode::Off as u8
}

/// The current mode.
pub fn mode() -> Mode {
    match MODE.load(Relaxed) {
        mode if mode == Mode::Report as u8 => Mode::Report,
        mode if mode == Mode::Stop as u8 => Mode::Stop,
        _ => Mode::Off,
    }
}

/// Sets the mode of this provider instance.
pub fn set_mode(mode: Mode) {
    MODE.store(mode as u8, Relaxed);
}

/// One breach as reported: which rule, on which object, the call that broke
/// it and the other call (or event) involved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// The rule broken.
    pub breach: Breach,
    /// The object's type.
    pub object_type: NdkObjectType,
    /// The object's address, as the consumer knows it.
    pub object: usize,
    /// The slot of the call that broke the rule (`"NdkCloseQp"`).
    pub call: &'static str,
    /// The other call or event involved (`"NdkSend"`), `"a call"` when
    /// unknown.
    pub other: &'static str,
    /// A number the kind names: the token (M22), the logical address (M33),
    /// the callback's duration in microseconds (I3); 0 for the others.
    pub detail: u64,
}

impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (rule, call, kind, object, other, detail) = (
            self.breach.rule(),
            self.call,
            self.object_type.name(),
            self.object,
            self.other,
            self.detail,
        );
        match self.breach {
            Breach::L17 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} while {other} is inside it"
            ),
            Breach::C1 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} while {other} is running on it \
                 (calls that reap or arm a CQ are serialized)"
            ),
            Breach::X5 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} after its connection ended \
                 ({other}); a disconnected QP or connector is not reused"
            ),
            Breach::D5 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} with a DEFER chain left un-rung \
                 (the last request accepted, {other}, carried NDK_OP_FLAG_DEFER)"
            ),
            Breach::X7 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} with {other} posted on its QP not \
                 completed (disconnect after every posted request has completed; they are \
                 flushed)"
            ),
            Breach::M22 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} names token {detail:#x}, which the \
                 consumer invalidated ({other}) and did not register again"
            ),
            Breach::M33 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x}: {other} names logical address \
                 {detail:#x}, outside every LAM of the adapter (addresses from BuildLam only)"
            ),
            Breach::C4 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} from {other} while results are still \
                 in the CQ, again with none reaped since the last such arm (a provider may \
                 satisfy it at once: the callback loops)"
            ),
            Breach::I3 => write!(
                f,
                "{rule}: {call} of {kind} {object:#x} ran {detail} us, longer than checked \
                 mode's bound (callbacks run at up to DISPATCH_LEVEL and do not block)"
            ),
            Breach::P2 => write!(
                f,
                "{rule}: {call} on {kind} {object:#x} while {other} is running on the same \
                 queue (work-request calls on one queue are serialized)"
            ),
        }
    }
}

/// One kept report. Plain atomics written field by field, the sequence
/// number last: two breaches reported at once into the same entry (only once
/// the ring wraps) can mix, which costs a diagnostic, nothing else.
struct Kept {
    /// The report's number plus one (0: never written).
    seq: AtomicUsize,
    breach: AtomicU8,
    object: AtomicUsize,
    object_type: AtomicU32,
    call: AtomicPtr<Slot>,
    other: AtomicPtr<Slot>,
    detail: AtomicU64,
}

/// How many reports are kept, the newest ones.
pub const KEPT: usize = 32;
static REPORTS: [Kept; KEPT] = [const {
    Kept {
        seq: AtomicUsize::new(0),
        breach: AtomicU8::new(0),
        object: AtomicUsize::new(0),
        object_type: AtomicU32::new(0),
        call: AtomicPtr::new(core::ptr::null_mut()),
        other: AtomicPtr::new(core::ptr::null_mut()),
        detail: AtomicU64::new(0),
    }
}; KEPT];
/// Reports made so far (every kind).
static REPORTED: AtomicUsize = AtomicUsize::new(0);
/// Breaches seen so far, per kind ([`Breach::ALL`] order).
static BREACHES: [AtomicUsize; Breach::ALL.len()] =
    [const { AtomicUsize::new(0) }; Breach::ALL.len()];

/// A stored slot pointer back as its name.
fn slot_name(slot: *mut Slot) -> &'static str {
    // SAFETY: every slot pointer stored (`report`, the objects' `inside`,
    // the QP's chain and the CQ's reaper) is null or comes from a
    // `&'static Slot`.
    let slot = unsafe { slot.cast_const().as_ref() };
    slot.map_or("a call", Slot::name)
}

/// A `&'static Slot` as the pointer the atomics store.
pub const fn slot_ptr(slot: &'static Slot) -> *mut Slot {
    let slot: *const Slot = slot;
    slot.cast_mut()
}

/// Counts a consumer breach, keeps its report, writes it to the debug log
/// and, in [`Mode::Stop`], stops the machine.
pub fn report(
    breach: Breach,
    object_type: NdkObjectType,
    object: usize,
    call: &'static Slot,
    other: *mut Slot,
) {
    report_detail(breach, object_type, object, call, other, 0);
}

/// [`report`] with the number the kind names ([`Report::detail`]).
pub fn report_detail(
    breach: Breach,
    object_type: NdkObjectType,
    object: usize,
    call: &'static Slot,
    other: *mut Slot,
    detail: u64,
) {
    if let Some(count) = BREACHES.get(breach as usize) {
        count.fetch_add(1, Relaxed);
    }
    let seq = REPORTED.fetch_add(1, Relaxed);
    if let Some(kept) = REPORTS.get(seq % KEPT) {
        kept.seq.store(0, Relaxed);
        kept.breach.store(breach as u8, Relaxed);
        kept.object.store(object, Relaxed);
        kept.object_type.store(object_type.0, Relaxed);
        kept.call.store(slot_ptr(call), Relaxed);
        kept.other.store(other, Relaxed);
        kept.detail.store(detail, Relaxed);
        kept.seq.store(seq + 1, Release);
    }
    let report = Report {
        breach,
        object_type,
        object,
        call: call.name(),
        other: slot_name(other),
        detail,
    };
    crate::klog!(
        crate::kernel::log::Level::Warning,
        "consumer breach {report}"
    );
    if mode() == Mode::Stop {
        stop(&report);
    }
}

/// The bug-check code of a consumer breach in checked mode's stop mode:
/// customer bit (29) set, "SoftNDK consumer breach" below it. Its four
/// parameters are [`stop_parameters`]'s (`docs/debugging.md`).
pub const BREACH_BUGCHECK_CODE: u32 = 0x2000_0000 | 0x0053_4E43;

/// The four bug-check parameters of a stop at `report`, the report
/// numbered `seq` (its place in the sequence of every report since load):
/// the rule id's ASCII bytes packed little-endian (`"C1"` is 0x3143), the
/// object's address, its `NDK_OBJECT_TYPE`, `seq`.
pub fn stop_parameters(report: &Report, seq: usize) -> [usize; 4] {
    let mut rule = [0_u8; core::mem::size_of::<usize>()];
    for (dst, src) in rule.iter_mut().zip(report.breach.rule().bytes()) {
        *dst = src;
    }
    [
        usize::from_le_bytes(rule),
        report.object,
        report.object_type.0 as usize,
        seq,
    ]
}

/// Stops at the breach: host mode prints the report and aborts; the kernel
/// bug-checks with [`BREACH_BUGCHECK_CODE`] (after the report reached the
/// debug log).
fn stop(report: &Report) {
    #[cfg(not(target_os = "windows"))]
    super::host::stop(report);
    #[cfg(target_os = "windows")]
    {
        let seq = REPORTED.load(Relaxed).saturating_sub(1);
        crate::kernel::stop::bug_check(BREACH_BUGCHECK_CODE, stop_parameters(report, seq));
    }
}

/// The kept report numbered `seq`, if it is still in the ring.
fn kept(seq: usize) -> Option<Report> {
    let kept = REPORTS.get(seq % KEPT)?;
    if kept.seq.load(Acquire) != seq + 1 {
        return None;
    }
    Some(Report {
        breach: Breach::from_index(kept.breach.load(Relaxed))?,
        object_type: NdkObjectType(kept.object_type.load(Relaxed)),
        object: kept.object.load(Relaxed),
        call: slot_name(kept.call.load(Relaxed)),
        other: slot_name(kept.other.load(Relaxed)),
        detail: kept.detail.load(Relaxed),
    })
}

/// The newest kept report of `breach` about the object at `object` (the
/// consumer's pointer), if one of the last [`KEPT`] is about it.
pub fn reported(object: *const core::ffi::c_void, breach: Breach) -> Option<Report> {
    if object.is_null() {
        return None;
    }
    let newest = REPORTED.load(Relaxed);
    (1..=KEPT.min(newest)).find_map(|back| {
        kept(newest - back).filter(|r| r.object == object as usize && r.breach == breach)
    })
}

/// Calls `each` with every kept report, oldest first; returns how many.
pub fn each_report(mut each: impl FnMut(&Report)) -> usize {
    each_numbered_report(|_, report| each(report))
}

/// Calls `each` with every kept report and its number, oldest first;
/// returns how many.
pub fn each_numbered_report(mut each: impl FnMut(usize, &Report)) -> usize {
    let newest = REPORTED.load(Relaxed);
    let mut count = 0;
    for seq in newest.saturating_sub(KEPT)..newest {
        if let Some(report) = kept(seq) {
            each(seq, &report);
            count += 1;
        }
    }
    count
}

/// How many times the consumer broke `breach` so far (every adapter).
pub fn breaches(breach: Breach) -> usize {
    BREACHES.get(breach as usize).map_or(0, |c| c.load(Relaxed))
}

/// Reports made so far (every kind), kept or not.
pub fn reported_total() -> usize {
    REPORTED.load(Relaxed)
}

// ----- the watches that need state of their own -------------------------------

/// A claim of a queue or CQ by the call running on it (C1, P2): the slot
/// of that call, null when none. Released when dropped.
pub struct Claimed<'a>(&'a AtomicPtr<Slot>);

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        self.0.store(core::ptr::null_mut(), Release);
    }
}

/// P2 (and the same technique as C1): the call of `slot` claims `cell` (one
/// queue) for its duration; one that finds it claimed is reported with the
/// claimant named. Off, one relaxed load and a branch.
#[inline]
pub fn serialize<'a>(
    cell: &'a AtomicPtr<Slot>,
    slot: &'static Slot,
    breach: Breach,
    object_type: NdkObjectType,
    object: usize,
) -> Option<Claimed<'a>> {
    if checked() {
        claim(cell, slot, breach, (object_type, object))
    } else {
        None
    }
}

#[inline(never)]
fn claim<'a>(
    cell: &'a AtomicPtr<Slot>,
    slot: &'static Slot,
    breach: Breach,
    (object_type, object): (NdkObjectType, usize),
) -> Option<Claimed<'a>> {
    match cell.compare_exchange(core::ptr::null_mut(), slot_ptr(slot), Acquire, Relaxed) {
        Ok(_) => {
            #[cfg(not(target_os = "windows"))]
            super::host::checked_pause(object);
            Some(Claimed(cell))
        }
        Err(other) => {
            report(breach, object_type, object, slot, other);
            None
        }
    }
}

/// Tokens the consumer invalidated (M22), newest [`INVALIDATED_KEPT`]: each
/// entry is a device's tag in the high half and the token's local form in
/// the low half (0: empty). Tokens are never handed out twice
/// (`rnic::keys`), so a kept entry stays true until the consumer registers
/// the same region again (a fast-register region keeps its tokens for
/// life, M35), which removes it.
static INVALIDATED: [AtomicU64; INVALIDATED_KEPT] = [const { AtomicU64::new(0) }; INVALIDATED_KEPT];
/// Entries written so far.
static INVALIDATED_NEXT: AtomicUsize = AtomicUsize::new(0);
/// How many invalidated tokens are remembered.
pub const INVALIDATED_KEPT: usize = 64;

/// The entry of `token` on the device numbered `device`
/// (`rnic::device::Device::serial`: never reused, unlike its address, while
/// token values repeat from one device to the next).
const fn invalidated_entry(device: u32, token: u32) -> u64 {
    ((device as u64) << 32) | (token & !crate::rnic::keys::REMOTE_BIT) as u64
}

/// M22: the consumer invalidated `token` of the device numbered `device`.
pub fn note_invalidated(device: u32, token: u32) {
    let entry = invalidated_entry(device, token);
    if is_invalidated(device, token) {
        return;
    }
    let at = INVALIDATED_NEXT.fetch_add(1, Relaxed) % INVALIDATED_KEPT;
    if let Some(slot) = INVALIDATED.get(at) {
        slot.store(entry, Relaxed);
    }
}

/// M22: the consumer registered the region of `token` again.
pub fn note_registered(device: u32, token: u32) {
    let entry = invalidated_entry(device, token);
    for slot in &INVALIDATED {
        let _ = slot.compare_exchange(entry, 0, Relaxed, Relaxed);
    }
}

/// Whether the consumer invalidated `token` of the device numbered `device` (and
/// did not register it again), as far as the last [`INVALIDATED_KEPT`]
/// invalidations tell.
pub fn is_invalidated(device: u32, token: u32) -> bool {
    let entry = invalidated_entry(device, token);
    INVALIDATED.iter().any(|slot| slot.load(Relaxed) == entry)
}

/// I3's bound on a consumer callback, in 100 ns units of the provider's
/// clock: 1 ms in the kernel (a callback runs at up to DISPATCH_LEVEL, where
/// Microsoft's guidance for a DPC is well under that), 100 ms in host mode
/// (threads of a test process are preempted; `SoftNdkSetCheckedCallbackBound`
/// or `SOFTNDK_CHECKED_CALLBACK_US` change it).
static CALLBACK_BOUND: AtomicU64 = AtomicU64::new(if cfg!(target_os = "windows") {
    10_000
} else {
    1_000_000
});

/// I3's bound, in microseconds.
pub fn callback_bound() -> u64 {
    CALLBACK_BOUND.load(Relaxed) / 10
}

/// Sets I3's bound, in microseconds.
pub fn set_callback_bound(micros: u64) {
    CALLBACK_BOUND.store(micros.saturating_mul(10), Relaxed);
}

/// The clock I3 measures with (100 ns units); host-mode tests may install
/// their own (`host::set_checked_clock`).
fn now() -> u64 {
    #[cfg(not(target_os = "windows"))]
    if let Some(now) = super::host::checked_clock() {
        return now;
    }
    crate::kernel::time::now_100ns()
}

/// I3: a consumer callback starts; the token to give [`callback_returned`].
/// Off, one relaxed load and a branch (0: not watched).
#[inline]
pub fn callback_starts() -> u64 {
    if checked() { now().max(1) } else { 0 }
}

/// I3: the callback `callback` of the object at `object`, started at
/// `started` ([`callback_starts`]), has returned: reported (after it
/// returned) when it ran longer than the bound.
#[inline]
pub fn callback_returned(
    started: u64,
    callback: &'static Slot,
    object_type: NdkObjectType,
    object: usize,
) {
    if started != 0 {
        watch_callback(started, callback, object_type, object);
    }
}

#[inline(never)]
fn watch_callback(
    started: u64,
    callback: &'static Slot,
    object_type: NdkObjectType,
    object: usize,
) {
    let ran = now().saturating_sub(started);
    if ran > CALLBACK_BOUND.load(Relaxed) {
        report_detail(
            Breach::I3,
            object_type,
            object,
            callback,
            core::ptr::null_mut(),
            ran / 10,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_stop_parameters_are_rule_object_type_and_sequence() {
        let report = Report {
            breach: Breach::M22,
            object_type: NdkObjectType::QP,
            object: 0x1234_5670,
            call: "NdkSend",
            other: "an SGE",
            detail: 7,
        };
        let rule = u32::from_le_bytes(*b"M22\0") as usize;
        assert_eq!(
            stop_parameters(&report, 41),
            [rule, 0x1234_5670, NdkObjectType::QP.0 as usize, 41]
        );
        assert_eq!(
            BREACH_BUGCHECK_CODE & 0x2000_0000,
            0x2000_0000,
            "customer bit"
        );
        assert_eq!(BREACH_BUGCHECK_CODE, 0x2053_4E43);
    }
}
