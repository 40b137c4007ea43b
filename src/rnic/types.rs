//! Plain values shared by every part of the RNIC: ids, scatter/gather
//! elements, work-request flags, access rights, completions and limits.
//!
//! Nothing here knows NDK: the provider maps these to and from the C ABI.

use core::fmt;

bitflags::bitflags! {
    /// Options of one work request (the provider maps `NDK_OP_FLAG_*` here).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct WrFlags: u32 {
        /// Produce no completion when the request succeeds (rule P14).
        const SILENT_SUCCESS = 1 << 0;
        /// Start only after every earlier Read of the QP completed (rule P16).
        const READ_FENCE = 1 << 1;
        /// The peer's receive completion is solicited (rule P17).
        const SOLICITED = 1 << 2;
        /// Copy the data at post time; SGE tokens are ignored (rule P12).
        const INLINE = 1 << 3;
        /// May be held back until a request without the flag (rules D1–D6).
        const DEFER = 1 << 4;
        /// A successful Read invalidates its first SGE's token (rule M26).
        const READ_LOCAL_INVALIDATE = 1 << 5;
    }
}

bitflags::bitflags! {
    /// Rights a region or window grants. Local read is always granted.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Access: u32 {
        /// Local writes (receive buffers, Read sinks).
        const LOCAL_WRITE = 1 << 0;
        /// The peer may RDMA-Read it.
        const REMOTE_READ = 1 << 1;
        /// The peer may RDMA-Write it. Implies local write (rules M6, M7).
        const REMOTE_WRITE = 1 << 2;
        /// May be an RDMA Read sink (accepted, never required: rule M9).
        const READ_SINK = 1 << 3;
    }
}

impl Access {
    /// The rights actually granted: remote write implies local write (M6, M7).
    #[must_use]
    pub const fn normalized(self) -> Self {
        if self.contains(Self::REMOTE_WRITE) {
            self.union(Self::LOCAL_WRITE)
        } else {
            self
        }
    }

    /// Whether any remote right is included.
    #[must_use]
    pub const fn is_remote(self) -> bool {
        self.intersects(Self::REMOTE_READ.union(Self::REMOTE_WRITE))
    }
}

/// One scatter/gather element as posted: an address (a virtual-address index
/// into a region, or a logical address for the privileged token), a length and
/// the token that names the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual-address index (or logical address for the privileged token).
    pub addr: u64,
    /// Bytes.
    pub len: u32,
    /// Local token (lkey) of the region, or the PD's privileged token.
    pub key: u32,
}

/// The operation a completion reports (mapped to `NDK_OPERATION_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A receive (QP receive queue or SRQ).
    Receive,
    /// A receive whose message was a SendAndInvalidate (rule C2).
    ReceiveAndInvalidate,
    /// Send, and the sender side of SendAndInvalidate (rule P22).
    Send,
    /// FastRegister.
    FastRegister,
    /// Bind.
    Bind,
    /// Invalidate.
    Invalidate,
    /// RDMA Read.
    Read,
    /// RDMA Write.
    Write,
}

/// How a work request ended (mapped to an NTSTATUS by the provider).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Completed.
    Success,
    /// Flushed or otherwise cancelled before it ran (rules E1, P15).
    Cancelled,
    /// A receive too small for the incoming message (rule E7).
    ReceiveTooSmall,
    /// The message or transfer exceeded a length the request allows.
    LengthError,
    /// A local SGE named memory without the right or outside its region.
    LocalAccessError,
    /// The peer refused the access: bad token, range or rights (rule M34).
    RemoteAccessError,
    /// The peer could not serve the request: a Read or Write past the end of
    /// the region (rule P20) or a receive failure at the peer.
    RemoteOperationError,
    /// A malformed request detected at execution (bad page list, bad state).
    InvalidRequest,
    /// An internal fault of the emulated device.
    InternalError,
}

impl WcStatus {
    /// Whether the request succeeded.
    #[must_use]
    pub const fn is_success(self) -> bool {
        matches!(self, Self::Success)
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One completion-queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: Opcode,
    /// Bytes placed, for receives (rule P21); 0 otherwise.
    pub bytes: u32,
    /// The QP's context given at creation (rule P21).
    pub qp_context: usize,
    /// The request's context given at post time (rule P21).
    pub request_context: usize,
    /// The token a peer's SendAndInvalidate invalidated (rule C2), else 0.
    pub invalidated_key: u32,
    /// A receive completion of a solicited send (rule P17); errors count as
    /// solicited for notification purposes (rule E9) regardless of this bit.
    pub solicited: bool,
}

impl Completion {
    /// A completion with no bytes, no invalidated key and not solicited.
    #[must_use]
    pub const fn new(
        status: WcStatus,
        opcode: Opcode,
        qp_context: usize,
        request_context: usize,
    ) -> Self {
        Self {
            status,
            opcode,
            bytes: 0,
            qp_context,
            request_context,
            invalidated_key: 0,
            solicited: false,
        }
    }
}

/// `PAGE_SIZE` of fast-register page lists and LAMs.
pub const PAGE_SIZE: u64 = 0x1000;

/// The true limits of the emulated NIC: every one is enforced (rule A8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest single registration, bytes.
    pub max_registration_size: u64,
    /// Largest memory window, bytes.
    pub max_window_size: u64,
    /// Pages of a fast-register MR (at least 16, rule M14).
    pub max_fr_pages: u32,
    /// SGEs per initiator request.
    pub max_initiator_sge: u32,
    /// SGEs per receive.
    pub max_receive_sge: u32,
    /// SGEs per Read.
    pub max_read_sge: u32,
    /// Bytes of one request over all SGEs.
    pub max_transfer_length: u32,
    /// Inline bytes of one Send or Write.
    pub max_inline_data: u32,
    /// Incoming Reads in flight per QP.
    pub max_inbound_read_limit: u32,
    /// Outgoing Reads in flight per QP.
    pub max_outbound_read_limit: u32,
    /// Receive queue depth.
    pub max_receive_queue_depth: u32,
    /// Initiator queue depth.
    pub max_initiator_queue_depth: u32,
    /// SRQ depth (0: no SRQ).
    pub max_srq_depth: u32,
    /// CQ depth.
    pub max_cq_depth: u32,
    /// Private data on connect.
    pub max_caller_data: u32,
    /// Private data on accept / reject.
    pub max_callee_data: u32,
    /// Live QPs per device.
    pub max_qp_count: u32,
    /// Live CQs per device.
    pub max_cq_count: u32,
    /// Live MRs per device.
    pub max_mr_count: u32,
    /// Live MWs per device.
    pub max_mw_count: u32,
    /// Live PDs per device.
    pub max_pd_count: u32,
    /// Live SRQs per device.
    pub max_srq_count: u32,
}

impl Limits {
    /// SoftNDK's defaults: generous where a copy engine has no reason to be
    /// stingy, bounded where memory per object is reserved up front.
    pub const DEFAULT: Self = Self {
        max_registration_size: 1 << 32,
        max_window_size: 1 << 32,
        max_fr_pages: 4096,
        max_initiator_sge: 16,
        max_receive_sge: 16,
        max_read_sge: 16,
        max_transfer_length: 64 << 20,
        max_inline_data: 4096,
        max_inbound_read_limit: 128,
        max_outbound_read_limit: 128,
        max_receive_queue_depth: 16384,
        max_initiator_queue_depth: 16384,
        max_srq_depth: 16384,
        max_cq_depth: 65536,
        max_caller_data: 56,
        max_callee_data: 148,
        max_qp_count: 4096,
        max_cq_count: 8192,
        max_mr_count: 32768,
        max_mw_count: 16384,
        max_pd_count: 1024,
        max_srq_count: 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
