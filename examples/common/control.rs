//! The control messages of the host-mode examples (`rping`, `perftest`),
//! which include this file with `#[path]` beside the consumer module `ndk`:
//! one region holds the receive buffer at [`RECV_AT`] and the send buffer
//! at [`SEND_AT`]; one receive is kept posted (request number [`RECV`]) and
//! one Send goes at a time ([`SEND`]), each program waiting for its
//! completions in its own way.

use softndk::abi::OpFlags;

use super::ndk::{Qp, Region};

/// Request numbers (the request context) of the control messages.
pub const RECV: usize = 1;
pub const SEND: usize = 2;

/// Where the receive and the send buffer sit in the control region.
pub const RECV_AT: usize = 0;
pub const SEND_AT: usize = 64;

/// Posts on `qp` the receive of a `len`-byte message into `region`.
pub fn post_receive(region: &Region, qp: &Qp, len: usize) -> Result<(), String> {
    let mut sges = Vec::new();
    region.sges(RECV_AT, len, 1, &mut sges);
    qp.receive(RECV, &sges)
}

/// The `len` bytes of the message received in `region`.
pub fn received(region: &Region, len: usize) -> &[u8] {
    &region.bytes()[RECV_AT..RECV_AT + len]
}

/// Sends `message` on `qp` from the send buffer of `region` (the previous
/// Send has completed).
pub fn send(region: &mut Region, qp: &Qp, message: &[u8]) -> Result<(), String> {
    region.bytes_mut()[SEND_AT..SEND_AT + message.len()].copy_from_slice(message);
    let mut sges = Vec::new();
    region.sges(SEND_AT, message.len(), 1, &mut sges);
    qp.send(SEND, &sges, OpFlags::empty())
}
