//! The byte buffers of a setup machine: the [`Outbox`] of what to write
//! next, and the [`FrameReader`] gathering one request or reply frame from
//! chunks of any size.

use alloc::vec;
use alloc::vec::Vec;

use crate::rnic::iwarp::mpa::{
    FRAME_HEADER_LEN, FrameKind, MAX_PRIVATE_DATA, MpaError, MpaFrame, fpdu_len,
};
use crate::rnic::iwarp::rdmap::{Message, RdmapError};
use crate::rnic::iwarp::terminate::{TermCode, Terminate};

/// A whole request or reply frame.
const MAX_FRAME: usize = FRAME_HEADER_LEN + MAX_PRIVATE_DATA;

/// Bytes to send, written by the caller in as many pieces as it likes.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    buf: Vec<u8>,
    sent: usize,
}

impl Outbox {
    pub(super) fn pending(&self) -> &[u8] {
        self.buf.get(self.sent..).unwrap_or_default()
    }

    pub(super) fn advance(&mut self, n: usize) {
        self.sent = self.sent.saturating_add(n).min(self.buf.len());
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
        }
    }

    pub(super) fn push_frame(&mut self, frame: &MpaFrame<'_>) -> Result<(), MpaError> {
        let start = self.buf.len();
        self.buf.resize(start + frame.len(), 0);
        let written = self
            .buf
            .get_mut(start..)
            .ok_or(MpaError::BufferTooSmall {
                needed: frame.len(),
            })
            .and_then(|out| frame.write(out));
        if written.is_err() {
            self.buf.truncate(start);
        }
        written.map(|_| ())
    }

    pub(super) fn push_message(
        &mut self,
        message: &Message<'_>,
        crc: bool,
    ) -> Result<(), RdmapError> {
        let start = self.buf.len();
        let len = fpdu_len(message.ulpdu_len());
        self.buf.resize(start + len, 0);
        let written = self
            .buf
            .get_mut(start..)
            .ok_or(RdmapError::BufferTooSmall { needed: len })
            .and_then(|out| message.write_fpdu(out, crc));
        if written.is_err() {
            self.buf.truncate(start);
        }
        written.map(|_| ())
    }

    /// Queues a Terminate (RFC layout) reporting `code`; a failure to build
    /// it only means the connection closes without one.
    pub(super) fn push_terminate(&mut self, code: TermCode, crc: bool) {
        let message = Message::Terminate {
            msn: 1,
            terminate: Terminate::new(code),
        };
        let _ = self.push_message(&message, crc);
    }
}

/// Gathers one request or reply frame from chunks, in a buffer allocated
/// once for the largest frame.
#[derive(Debug)]
pub(super) struct FrameReader {
    buf: Vec<u8>,
    have: usize,
    kind: FrameKind,
}

impl FrameReader {
    pub(super) fn new(kind: FrameKind) -> Self {
        Self {
            buf: vec![0; MAX_FRAME],
            have: 0,
            kind,
        }
    }

    pub(super) fn held(&self) -> &[u8] {
        self.buf.get(..self.have).unwrap_or_default()
    }

    /// Takes bytes from `input` until the frame is complete; returns how
    /// many were taken and whether the frame is complete. The key, the
    /// revision and the private data length are checked as soon as the
    /// 20-byte header is in.
    pub(super) fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), MpaError> {
        let mut consumed = 0;
        loop {
            let needed = if self.have < FRAME_HEADER_LEN {
                FRAME_HEADER_LEN
            } else {
                match MpaFrame::parse(self.held(), self.kind) {
                    Ok((_, len)) if len == self.have => return Ok((consumed, true)),
                    Ok((_, len)) | Err(MpaError::Truncated { needed: len }) => len,
                    Err(error) => return Err(error),
                }
            };
            let rest = input.get(consumed..).unwrap_or_default();
            let take = needed.saturating_sub(self.have).min(rest.len());
            if take == 0 {
                return Ok((consumed, false));
            }
            let (head, _) = rest.split_at_checked(take).unwrap_or((rest, &[]));
            let slot = self
                .buf
                .get_mut(self.have..self.have + take)
                .ok_or(MpaError::PrivateDataTooLong(needed))?;
            slot.copy_from_slice(head);
            self.have += take;
            consumed += take;
        }
    }
}
