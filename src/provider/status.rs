//! From RNIC outcomes to NTSTATUS: every status the provider returns or puts
//! in a completion is chosen here, once.

use crate::abi::{
    NdkOperationType, NtStatus, STATUS_ACCESS_VIOLATION, STATUS_BUFFER_OVERFLOW, STATUS_CANCELLED,
    STATUS_CONNECTION_INVALID, STATUS_DATA_OVERRUN, STATUS_IMPLEMENTATION_LIMIT,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_INTERNAL_ERROR, STATUS_INVALID_DEVICE_REQUEST,
    STATUS_INVALID_PARAMETER, STATUS_NO_MORE_ENTRIES, STATUS_REMOTE_RESOURCES, STATUS_SUCCESS,
};
use crate::rnic::device::ResourceError;
use crate::rnic::mr::MrError;
use crate::rnic::qp::{CreateQpError, PostError};
use crate::rnic::srq::{SrqError, SrqEvent};
use crate::rnic::{Opcode, WcStatus};

/// A completion status (E8: each operation reports only statuses its NDSPI
/// kin can report).
pub const fn wc_status(status: WcStatus) -> NtStatus {
    match status {
        WcStatus::Success => STATUS_SUCCESS,
        WcStatus::Cancelled => STATUS_CANCELLED,
        // E7: NDSPI's status for a receive too small for the message.
        WcStatus::ReceiveTooSmall => STATUS_BUFFER_OVERFLOW,
        WcStatus::LengthError => STATUS_DATA_OVERRUN,
        WcStatus::LocalAccessError | WcStatus::RemoteAccessError => STATUS_ACCESS_VIOLATION,
        // P20: a Read past the end of the remote region (ND_REMOTE_ERROR).
        WcStatus::RemoteOperationError => STATUS_REMOTE_RESOURCES,
        WcStatus::InvalidRequest => STATUS_INVALID_DEVICE_REQUEST,
        WcStatus::InternalError => STATUS_INTERNAL_ERROR,
    }
}

/// `NDK_RESULT_EX.Type` of a completion (P22).
pub const fn operation(opcode: Opcode) -> NdkOperationType {
    match opcode {
        Opcode::Receive => NdkOperationType::RECEIVE,
        Opcode::ReceiveAndInvalidate => NdkOperationType::RECEIVE_AND_INVALIDATE,
        Opcode::Send => NdkOperationType::SEND,
        Opcode::FastRegister => NdkOperationType::FAST_REGISTER,
        Opcode::Bind => NdkOperationType::BIND,
        Opcode::Invalidate => NdkOperationType::INVALIDATE,
        Opcode::Read => NdkOperationType::READ,
        Opcode::Write => NdkOperationType::WRITE,
    }
}

/// A work request refused inline.
pub const fn post(error: PostError) -> NtStatus {
    match error {
        // P7, X5.
        PostError::ConnectionInvalid => STATUS_CONNECTION_INVALID,
        // P9 (NDSPI v2: ND_DATA_OVERRUN).
        PostError::TooManySge => STATUS_DATA_OVERRUN,
        // P10 (NDSPI v2: ND_BUFFER_OVERFLOW); P12: inline data beyond the
        // QP's inline size is the same breach.
        PostError::TooLong | PostError::InlineTooLong => STATUS_BUFFER_OVERFLOW,
        // P24 (NDSPI v2: ND_NO_MORE_ENTRIES).
        PostError::QueueFull => STATUS_NO_MORE_ENTRIES,
        PostError::InvalidParameter | PostError::InvalidBuffer => STATUS_INVALID_PARAMETER,
        // M15, M19.
        PostError::AccessViolation => STATUS_ACCESS_VIOLATION,
        // E10, E13: the QP's CQ failed.
        PostError::Unusable => STATUS_INTERNAL_ERROR,
    }
}

/// A memory-region call refused.
pub const fn mr(error: MrError) -> NtStatus {
    match error {
        MrError::InvalidParameter => STATUS_INVALID_PARAMETER,
        MrError::InvalidState => STATUS_INVALID_DEVICE_REQUEST,
        MrError::AccessViolation => STATUS_ACCESS_VIOLATION,
        MrError::ImplementationLimit => STATUS_IMPLEMENTATION_LIMIT,
        MrError::Resources => STATUS_INSUFFICIENT_RESOURCES,
        MrError::Busy => STATUS_NO_MORE_ENTRIES,
    }
}

/// A create refused for resources (L9).
pub const fn resource(_: ResourceError) -> NtStatus {
    STATUS_INSUFFICIENT_RESOURCES
}

/// A QP create refused (L13).
pub const fn create_qp(error: CreateQpError) -> NtStatus {
    match error {
        CreateQpError::InvalidParameter | CreateQpError::Mismatch => STATUS_INVALID_PARAMETER,
        CreateQpError::Resources => STATUS_INSUFFICIENT_RESOURCES,
    }
}

/// An SRQ call refused (L12, Q6, Q7).
pub const fn srq(error: SrqError) -> NtStatus {
    match error {
        SrqError::InvalidParameter => STATUS_INVALID_PARAMETER,
        SrqError::BelowCount => STATUS_BUFFER_OVERFLOW,
        SrqError::InError => STATUS_INTERNAL_ERROR,
        SrqError::Resources => STATUS_INSUFFICIENT_RESOURCES,
    }
}

/// An SRQ notification's `SrqStatus` (Q4, Q9).
pub const fn srq_event(event: SrqEvent) -> NtStatus {
    match event {
        SrqEvent::BelowThreshold => STATUS_SUCCESS,
        SrqEvent::Fatal => STATUS_INTERNAL_ERROR,
    }
}

/// A work request carrying a flag its operation does not document
/// (`ndk-abi.md` §5.3). NDK documents no status for it; NDSPI v2 refuses such
/// a post inline with `STATUS_INVALID_PARAMETER_4` (P25), whose NDK kin is
/// `STATUS_INVALID_PARAMETER`.
pub const fn undocumented_flags() -> NtStatus {
    STATUS_INVALID_PARAMETER
}
