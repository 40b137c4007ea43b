//! SoftNDK's own host-mode structures for fault injection
//! (`docs/debugging.md`, "Fault injection"): not part of NDKPI. Layouts
//! asserted like the NDK ones.
//!
//! ```c
//! typedef struct {
//!     ULONG   Kind;      /* SOFTNDK_FAULT_KIND_* */
//!     ULONG   Reserved;  /* 0 */
//!     ULONG64 Index;     /* the Index-th call of that kind, from 1 */
//! } SOFTNDK_FAULT_CALL;
//!
//! typedef struct {
//!     ULONG   Size;            /* sizeof(SOFTNDK_FAULTS) = 0x150 */
//!     ULONG   ScheduleCount;   /* entries of Schedule used, at most 16 */
//!     ULONG64 Seed;
//!     ULONG   Rate[16];        /* per kind, parts per million (0..1000000) */
//!     SOFTNDK_FAULT_CALL Schedule[16];
//! } SOFTNDK_FAULTS;
//!
//! NTSTATUS SoftNdkSetFaults(const SOFTNDK_FAULTS *Faults);   /* NULL: off */
//! NTSTATUS SoftNdkSetFaultPlan(const char *Plan);            /* text form; NULL: off */
//! NTSTATUS SoftNdkGetFaultTrace(SOFTNDK_FAULT_CALL *Calls, ULONG *Count);
//! ```

/// Kind numbers (`SOFTNDK_FAULT_KIND_*`), `rnic::fault::Kind` order.
pub const SOFTNDK_FAULT_KIND_CREATE: u32 = 0;
/// A post refused inline.
pub const SOFTNDK_FAULT_KIND_POST: u32 = 1;
/// An error completion.
pub const SOFTNDK_FAULT_KIND_COMPLETION: u32 = 2;
/// A connection abort.
pub const SOFTNDK_FAULT_KIND_ABORT: u32 = 3;
/// A CQ overflow.
pub const SOFTNDK_FAULT_KIND_CQ_OVERFLOW: u32 = 4;
/// A Send finding no receive.
pub const SOFTNDK_FAULT_KIND_RECEIVE_EMPTY: u32 = 5;
/// A pending create.
pub const SOFTNDK_FAULT_KIND_PENDING_CREATE: u32 = 6;
/// A pending close.
pub const SOFTNDK_FAULT_KIND_PENDING_CLOSE: u32 = 7;
/// A delayed callback.
pub const SOFTNDK_FAULT_KIND_DELAY: u32 = 8;

/// Entries of `SOFTNDK_FAULTS.Rate` (kinds beyond those defined must be 0).
pub const SOFTNDK_FAULT_KINDS: usize = 16;
/// Entries of `SOFTNDK_FAULTS.Schedule`.
pub const SOFTNDK_FAULT_SCHEDULE: usize = 16;

/// `SOFTNDK_FAULT_CALL`: one call of one kind — a schedule entry, or an
/// injected fault as `SoftNdkGetFaultTrace` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftNdkFaultCall {
    /// `SOFTNDK_FAULT_KIND_*`.
    pub kind: u32,
    /// Zero.
    pub reserved: u32,
    /// Which call of the kind, from 1.
    pub index: u64,
}

/// `SOFTNDK_FAULTS`: a fault plan.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftNdkFaults {
    /// `sizeof(SOFTNDK_FAULTS)`.
    pub size: u32,
    /// Entries of `schedule` in use.
    pub schedule_count: u32,
    /// Seed of the pseudo-random decisions.
    pub seed: u64,
    /// Per kind, the share of calls that fail, parts per million.
    pub rates: [u32; SOFTNDK_FAULT_KINDS],
    /// Calls that fail whatever the rates.
    pub schedule: [SoftNdkFaultCall; SOFTNDK_FAULT_SCHEDULE],
}

impl SoftNdkFaults {
    /// A plan that never fires, `size` set.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "0x150 bytes (asserted below) fit a ULONG"
    )]
    pub const NEVER: Self = Self {
        size: core::mem::size_of::<Self>() as u32,
        schedule_count: 0,
        seed: 0,
        rates: [0; SOFTNDK_FAULT_KINDS],
        schedule: [SoftNdkFaultCall {
            kind: 0,
            reserved: 0,
            index: 0,
        }; SOFTNDK_FAULT_SCHEDULE],
    };
}

assert_layouts! {
    layout_softndk_fault_call: SoftNdkFaultCall, size 0x10, align 8 {
        kind: 0x0, reserved: 0x4, index: 0x8,
    }
    layout_softndk_faults: SoftNdkFaults, size 0x150, align 8 {
        size: 0x0, schedule_count: 0x4, seed: 0x8, rates: 0x10, schedule: 0x50,
    }
}
