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
//! relaxed load of [`MODE`] and a branch.
//!
//! The mode is per provider instance (the driver, or the host process):
//! set from the registry at driver load, or by `SOFTNDK_CHECKED` /
//! `SoftNdkSetChecked` in host mode (`docs/debugging.md`).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, AtomicUsize};

use super::dispatch::Slot;
use crate::abi::NdkObjectType;

/// A consumer rule the provider saw broken (and survived).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Breach {
    /// L17: an object closed while another call on it was still running.
    L17 = 0,
    /// C1: GetCqResults, GetCqResultsEx or ArmCq entered a CQ while another
    /// of them was running on it.
    C1 = 1,
    /// X5: a QP posted to, or a connector connected, after its connection
    /// ended.
    X5 = 2,
    /// D5: a QP flushed, disconnected or closed while its last accepted
    /// initiator request carried the DEFER flag (a chain left un-rung).
    D5 = 3,
}

impl Breach {
    /// Every kind, in counter order.
    pub const ALL: [Self; 4] = [Self::L17, Self::C1, Self::X5, Self::D5];

    /// The rule id (`"C1"`).
    pub const fn rule(self) -> &'static str {
        match self {
            Self::L17 => "L17",
            Self::C1 => "C1",
            Self::X5 => "X5",
            Self::D5 => "D5",
        }
    }

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
    Off = 0,
    /// Every kind is watched and reported.
    Report = 1,
    /// As `Report`, and the first breach stops the machine.
    Stop = 2,
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
        1 => Mode::Report,
        2 => Mode::Stop,
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
}

impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (rule, call, kind, object, other) = (
            self.breach.rule(),
            self.call,
            self.object_type.name(),
            self.object,
            self.other,
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
    }
}; KEPT];
/// Reports made so far (every kind).
static REPORTED: AtomicUsize = AtomicUsize::new(0);
/// Breaches seen so far, per kind ([`Breach::ALL`] order).
static BREACHES: [AtomicUsize; Breach::ALL.len()] = [const { AtomicUsize::new(0) }; 4];

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
        kept.seq.store(seq + 1, Release);
    }
    let report = Report {
        breach,
        object_type,
        object,
        call: call.name(),
        other: slot_name(other),
    };
    crate::klog!(
        crate::kernel::log::Level::Warning,
        "consumer breach {report}"
    );
    if mode() == Mode::Stop {
        stop(&report);
    }
}

/// Stops at the breach: host mode prints the report and aborts. The kernel
/// stop (a SoftNDK bug check) is not implemented yet: the kernel reports and
/// goes on.
fn stop(report: &Report) {
    #[cfg(not(target_os = "windows"))]
    super::host::stop(report);
    #[cfg(target_os = "windows")]
    let _ = report;
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
    let newest = REPORTED.load(Relaxed);
    let mut count = 0;
    for seq in newest.saturating_sub(KEPT)..newest {
        if let Some(report) = kept(seq) {
            each(&report);
            count += 1;
        }
    }
    count
}

/// How many times the consumer broke `breach` so far (every adapter).
pub fn breaches(breach: Breach) -> usize {
    BREACHES.get(breach as usize).map_or(0, |c| c.load(Relaxed))
}
