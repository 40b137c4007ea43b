//! The iWARP wire format: parsing and building the bytes two RNICs exchange
//! over a TCP stream. Plain Rust, no `unsafe`, no I/O, no allocation except
//! the [`mpa::Deframer`]'s one bounded buffer.
//!
//! # Layering
//!
//! ```text
//!  RDMAP message   (RFC 5040)  rdmap.rs, terminate.rs   Write, Read Request/Response,
//!       │                                                Send (4 kinds), Terminate
//!  DDP segment     (RFC 5041)  ddp.rs                   tagged (STag, TO) or untagged
//!       │                                                (queue, MSN, MO) header + payload
//!  MPA FPDU        (RFC 5044)  mpa.rs, crc.rs           length | ULPDU | pad | CRC32c
//!       │          (RFC 6581)  mpa.rs                   request/reply frames, IRD/ORD, RTR
//!  ordered byte stream (TCP; not here)
//! ```
//!
//! An RDMAP message travels in one or more DDP segments; each segment is the
//! ULPDU of one MPA FPDU. Before the first FPDU each side sends one MPA frame:
//! the initiator a request, the responder a reply.
//!
//! # What is checked
//!
//! Everything a peer sends is untrusted. Parsers take `&[u8]` and return typed
//! values or a precise error: every length against the bytes present and the
//! limits in force (private data ≤ 512, ULPDU ≤ the receiver's maximum,
//! exact Read Request and Terminate lengths), every version (MPA revision
//! 1/2, DDP 1, RDMAP 1), every reserved bit DDP and RDMAP define (MPA's are
//! "not checked" by RFC 5044 and are reported, not refused), every opcode
//! against its buffer model and queue, MSNs and message offsets in order, and
//! the CRC when negotiated. No parser panics or indexes out of bounds: every
//! access goes through `get`, `split_at_checked` or `wire`'s checked reads,
//! and proptests feed arbitrary bytes to each parser.
//!
//! Each error type has a `term_code()` giving the Terminate that reports it
//! ([`terminate::TermCode`]), and a received Terminate maps to the
//! [`WcStatus`](crate::rnic::WcStatus) of the request it fails
//! ([`terminate::TermCode::completion_status`]).
//!
//! Builders write into caller-provided `&mut [u8]` and return the length
//! written, or an error when it does not fit.

pub mod conn;
pub mod crc;
pub mod ddp;
pub mod link;
pub mod mpa;
pub mod rdmap;
pub mod setup;
#[cfg(test)]
#[cfg(not(loom))]
mod tcp_testing;
pub mod terminate;
mod wire;
