//! The MPA exchange end to end, in memory: accepts with and without CRC,
//! each RTR kind, the revision-1 fallback, rejects, any chunking. Also the
//! helpers the other setup tests share.

use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::rnic::iwarp::mpa::{
    self, ENHANCED_LEN, FrameKind, MAX_IRD_ORD, MAX_PRIVATE_DATA, MpaFrame, Rtr, parse_fpdu,
};
use crate::rnic::iwarp::rdmap::{Message, RTR_STAG, SendHeader};
use proptest::prelude::*;

pub(super) const T0: u64 = 1_000;

pub(super) fn drain_i(i: &mut Initiator) -> Vec<u8> {
    let bytes = i.output().to_vec();
    i.advance_output(bytes.len());
    bytes
}

pub(super) fn drain_r(r: &mut Responder) -> Vec<u8> {
    let bytes = r.output().to_vec();
    r.advance_output(bytes.len());
    bytes
}

/// Feeds `bytes` in chunks of the given sizes (cycled) until an event;
/// returns it and the bytes not yet fed.
pub(super) fn feed(
    mut recv: impl FnMut(&[u8]) -> Result<Option<Event>, SetupError>,
    bytes: &[u8],
    chunks: &[usize],
) -> Result<(Option<Event>, Vec<u8>), SetupError> {
    let mut sizes = chunks.iter().copied().cycle();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(1).clamp(1, rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        if let Some(event) = recv(chunk)? {
            return Ok((Some(event), rest.to_vec()));
        }
    }
    Ok((None, Vec::new()))
}

pub(super) fn frame_bytes(frame: &MpaFrame<'_>) -> Vec<u8> {
    let mut buf = vec![0; frame.len()];
    let len = frame.write(&mut buf).unwrap();
    buf.truncate(len);
    buf
}

/// The FPDU of a Send carrying `payload`, as data after the setup.
pub(super) fn data_fpdu(payload: &[u8], msn: u32, crc: bool) -> Vec<u8> {
    let message = Message::Send {
        header: SendHeader::whole(msn),
        payload,
    };
    fpdu_of(&message, crc)
}

/// `message` as one FPDU.
pub(super) fn fpdu_of(message: &Message<'_>, crc: bool) -> Vec<u8> {
    let mut buf = vec![0; mpa::fpdu_len(message.ulpdu_len())];
    let len = message.write_fpdu(&mut buf, crc).unwrap();
    buf.truncate(len);
    buf
}
/// The messages in a stream of FPDUs.
pub(super) fn messages(mut stream: &[u8], crc: bool) -> Vec<Message<'_>> {
    let mut out = Vec::new();
    while !stream.is_empty() {
        let (ulpdu, len) = parse_fpdu(stream, crc, mpa::MAX_ULPDU).unwrap();
        out.push(Message::parse(ulpdu, None).unwrap());
        stream = &stream[len..];
    }
    out
}

#[derive(Clone, Copy)]
enum Decision<'a> {
    Accept { ird: u16, ord: u16, pd: &'a [u8] },
    Reject(&'a [u8]),
}

#[derive(Debug)]
struct Outcome {
    request: PeerRequest,
    /// The initiator's Established or Rejected.
    initiator: Event,
    /// The initiator's leftover followed by what was not fed.
    initiator_rest: Vec<u8>,
    /// What the initiator sent after the request (the RTR).
    rtr: Vec<u8>,
    responder: Option<Established>,
    responder_rest: Vec<u8>,
    /// What the responder sent after its reply (a Read RTR's answer).
    responder_tail: Vec<u8>,
}

/// Runs a whole setup in memory. `r_extra` follows the reply (FPDUs the
/// responder sends), `i_extra` follows the RTR.
fn handshake(
    icfg: &InitiatorConfig,
    ipd: &[u8],
    rcfg: ResponderConfig,
    decision: Decision<'_>,
    i_extra: &[u8],
    r_extra: &[u8],
    chunks: &[usize],
) -> Result<Outcome, SetupError> {
    let mut i = Initiator::new(icfg, ipd, T0)?;
    let mut r = Responder::new(rcfg, T0);
    let request_bytes = drain_i(&mut i);
    let (event, rest) = feed(|c| r.receive(c, T0 + 1), &request_bytes, chunks)?;
    assert!(rest.is_empty());
    let Some(Event::Request(request)) = event else {
        panic!("no request: {event:?}");
    };
    let mut responder = None;
    match decision {
        Decision::Accept { ird, ord, pd } => {
            if let Some(Event::Established(e)) = r.accept(ird, ord, pd, T0 + 2)? {
                responder = Some(e);
            }
        }
        Decision::Reject(pd) => r.reject(pd, T0 + 2)?,
    }
    let mut reply = drain_r(&mut r);
    reply.extend_from_slice(r_extra);
    let (event, rest) = feed(|c| i.receive(c, T0 + 3), &reply, chunks)?;
    let initiator = event.expect("no reply event");
    let mut initiator_rest = match &initiator {
        Event::Established(e) => e.leftover.clone(),
        _ => Vec::new(),
    };
    initiator_rest.extend_from_slice(&rest);
    assert!(i.is_finished());
    let rtr = drain_i(&mut i);
    let mut responder_rest = Vec::new();
    let mut responder_tail = Vec::new();
    if responder.is_none() && matches!(decision, Decision::Accept { .. }) {
        let mut stream = rtr.clone();
        stream.extend_from_slice(i_extra);
        let (event, rest) = feed(|c| r.receive(c, T0 + 4), &stream, chunks)?;
        let Some(Event::Established(e)) = event else {
            panic!("responder not established: {event:?}");
        };
        responder_rest = e.leftover.clone();
        responder_rest.extend_from_slice(&rest);
        responder = Some(e);
        responder_tail = drain_r(&mut r);
    }
    assert!(r.is_finished());
    Ok(Outcome {
        request,
        initiator,
        initiator_rest,
        rtr,
        responder,
        responder_rest,
        responder_tail,
    })
}

fn established(event: &Event) -> &Established {
    match event {
        Event::Established(e) => e,
        other => panic!("not established: {other:?}"),
    }
}

fn accept(ird: u16, ord: u16, pd: &[u8]) -> Decision<'_> {
    Decision::Accept { ird, ord, pd }
}

#[test]
fn accept_with_and_without_crc() {
    for (icrc, rcrc) in [(false, false), (true, false), (false, true), (true, true)] {
        let icfg = InitiatorConfig {
            crc: icrc,
            ird: 8,
            ord: 4,
            ..InitiatorConfig::default()
        };
        let rcfg = ResponderConfig {
            crc: rcrc,
            ..ResponderConfig::default()
        };
        let crc = icrc || rcrc;
        let data = data_fpdu(b"first", 1, crc);
        let out = handshake(
            &icfg,
            b"hello",
            rcfg,
            accept(16, 8, b"welcome"),
            &[],
            &data,
            &[7],
        )
        .unwrap();
        assert_eq!(
            out.request,
            PeerRequest {
                revision: 2,
                crc: icrc,
                ird: Some(8),
                ord: Some(4),
                rtr_offered: RtrKinds::empty(),
                private_data: b"hello".to_vec(),
            }
        );
        let i = established(&out.initiator);
        assert_eq!(
            i.negotiated,
            Negotiated {
                crc,
                ird: Some(8),
                ord: Some(4),
                rtr: None,
            }
        );
        assert_eq!((i.revision, i.receive_first), (2, false));
        assert_eq!(i.private_data, b"welcome");
        // The responder's FPDU after the reply comes back untouched.
        assert_eq!(out.initiator_rest, data);
        assert!(out.rtr.is_empty());
        let r = out.responder.unwrap();
        // The responder's view: it takes the initiator's ORD in reads and
        // issues at most the initiator's IRD.
        assert_eq!(
            r.negotiated,
            Negotiated {
                crc,
                ird: Some(4),
                ord: Some(8),
                rtr: None,
            }
        );
        assert!(r.receive_first);
        assert_eq!(r.private_data, b"hello");
    }
}

#[test]
fn rev2_with_each_rtr_kind() {
    let cases = [
        (RtrKinds::WRITE, Rtr::Write),
        (RtrKinds::READ, Rtr::Read),
        (RtrKinds::SEND, Rtr::Send),
        (RtrKinds::all(), Rtr::Write),
        (RtrKinds::READ | RtrKinds::SEND, Rtr::Read),
    ];
    for (offer, chosen) in cases {
        for crc in [false, true] {
            let icfg = InitiatorConfig {
                crc,
                rtr: offer,
                ird: 2,
                ord: 2,
                ..InitiatorConfig::default()
            };
            let next = data_fpdu(b"after the RTR", 2, crc);
            let out = handshake(
                &icfg,
                &[],
                ResponderConfig::default(),
                accept(2, 2, &[]),
                &next,
                &[],
                &[3, 11],
            )
            .unwrap();
            assert_eq!(out.request.rtr_offered, offer);
            let i = established(&out.initiator);
            assert_eq!(i.negotiated.rtr, Some(chosen));
            // Exactly one FPDU, the zero-length RTR with MSN 1.
            let sent = messages(&out.rtr, crc);
            assert_eq!(sent.len(), 1);
            assert!(sent[0].is_rtr(chosen), "{:?}", sent[0]);
            assert_eq!(sent[0], Message::rtr(chosen, RTR_MSN));
            let r = out.responder.unwrap();
            assert_eq!(r.negotiated.rtr, Some(chosen));
            assert!(!r.receive_first);
            assert_eq!(out.responder_rest, next);
            let answer = messages(&out.responder_tail, crc);
            if chosen == Rtr::Read {
                assert_eq!(
                    answer,
                    [Message::ReadResponse {
                        stag: RTR_STAG,
                        to: 0,
                        last: true,
                        payload: &[],
                    }]
                );
            } else {
                assert!(answer.is_empty());
            }
        }
    }
}

#[test]
fn initiator_falls_back_to_revision_1() {
    let icfg = InitiatorConfig {
        rtr: RtrKinds::all(),
        crc: true,
        ..InitiatorConfig::default()
    };
    let mut i = Initiator::new(&icfg, b"pd", T0).unwrap();
    let request = drain_i(&mut i);
    let (req, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
    assert_eq!(req.revision, 2);
    // A revision-1 responder answers with revision 1 and no block.
    let reply = MpaFrame {
        kind: FrameKind::Reply,
        revision: 1,
        enhanced: None,
        private_data: b"v1",
        ..req
    };
    let data = data_fpdu(b"x", 1, true);
    let mut bytes = frame_bytes(&reply);
    bytes.extend_from_slice(&data);
    let event = i.receive(&bytes, T0 + 5).unwrap().unwrap();
    let e = established(&event);
    assert_eq!(e.revision, 1);
    assert_eq!(
        e.negotiated,
        Negotiated {
            crc: true,
            ird: None,
            ord: None,
            rtr: None,
        }
    );
    assert_eq!(e.private_data, b"v1");
    assert_eq!(e.leftover, data);
    // No RTR without revision 2: RFC 5044 has the initiator send first.
    assert!(i.output().is_empty());
    assert_eq!(i.receive(b"more", T0 + 6), Err(SetupError::WrongState));
}

#[test]
fn revision_1_both_sides() {
    let icfg = InitiatorConfig {
        enhanced: false,
        rtr: RtrKinds::all(),
        ..InitiatorConfig::default()
    };
    assert_eq!(icfg.max_private_data(), 512);
    let pd = [7u8; 512];
    let out = handshake(
        &icfg,
        &pd,
        ResponderConfig::default(),
        accept(1, 1, &[1; 512]),
        &[],
        &[],
        &[64],
    )
    .unwrap();
    assert_eq!(out.request.revision, 1);
    assert_eq!((out.request.ird, out.request.ord), (None, None));
    assert_eq!(out.request.rtr_offered, RtrKinds::empty());
    assert_eq!(out.request.private_data, pd);
    let i = established(&out.initiator);
    assert_eq!((i.revision, i.negotiated.rtr), (1, None));
    assert_eq!(i.private_data, [1; 512]);
    assert!(out.responder.unwrap().receive_first);
}

#[test]
fn reject_with_private_data() {
    for enhanced in [true, false] {
        let icfg = InitiatorConfig {
            enhanced,
            ..InitiatorConfig::default()
        };
        let out = handshake(
            &icfg,
            b"let me in",
            ResponderConfig::default(),
            Decision::Reject(b"go away"),
            &[],
            &[],
            &[5],
        )
        .unwrap();
        assert_eq!(
            out.initiator,
            Event::Rejected {
                private_data: b"go away".to_vec(),
            }
        );
        assert!(out.responder.is_none());
        assert!(out.rtr.is_empty());
    }
}

#[test]
fn one_byte_at_a_time() {
    for rtr in [
        RtrKinds::empty(),
        RtrKinds::WRITE,
        RtrKinds::READ,
        RtrKinds::SEND,
    ] {
        let icfg = InitiatorConfig {
            crc: true,
            rtr,
            ..InitiatorConfig::default()
        };
        let after = data_fpdu(b"tail", 2, true);
        let out = handshake(
            &icfg,
            b"abc",
            ResponderConfig::default(),
            accept(1, 1, b"de"),
            &after,
            &after,
            &[1],
        )
        .unwrap();
        assert_eq!(established(&out.initiator).private_data, b"de");
        if rtr.is_empty() {
            assert_eq!(out.initiator_rest, after);
        } else {
            assert_eq!(out.responder_rest, after);
            assert_eq!(out.initiator_rest, after);
        }
    }
}

proptest! {
    #[test]
    fn random_chunks_give_the_same_setup(
        chunks in proptest::collection::vec(1usize..64, 1..10),
        icrc in any::<bool>(),
        rcrc in any::<bool>(),
        enhanced in any::<bool>(),
        rtr in 0u8..8,
        ipd in proptest::collection::vec(any::<u8>(), 0..=MAX_PRIVATE_DATA - ENHANCED_LEN),
        rpd in proptest::collection::vec(any::<u8>(), 0..=MAX_PRIVATE_DATA - ENHANCED_LEN),
        ird in 0u16..=MAX_IRD_ORD,
        ord in 0u16..=MAX_IRD_ORD,
        tail in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let icfg = InitiatorConfig {
            crc: icrc,
            enhanced,
            ird,
            ord,
            rtr: RtrKinds::from_bits_truncate(rtr),
            ..InitiatorConfig::default()
        };
        let rcfg = ResponderConfig { crc: rcrc, ..ResponderConfig::default() };
        // The responder's IRD covers the initiator's ORD.
        let out = handshake(&icfg, &ipd, rcfg, accept(ord, ird, &rpd), &tail, &tail, &chunks)
            .unwrap();
        let i = established(&out.initiator);
        let r = out.responder.unwrap();
        prop_assert_eq!(&out.request.private_data, &ipd);
        prop_assert_eq!(&i.private_data, &rpd);
        prop_assert_eq!(i.negotiated.crc, icrc || rcrc);
        prop_assert_eq!(r.negotiated.crc, icrc || rcrc);
        prop_assert_eq!(i.negotiated.rtr, r.negotiated.rtr);
        prop_assert_eq!(i.negotiated.ird, r.negotiated.ord);
        prop_assert_eq!(i.negotiated.ord, r.negotiated.ird);
        if enhanced && rtr != 0 {
            prop_assert_eq!(i.negotiated.rtr, icfg.rtr.choose());
            prop_assert_eq!(&out.responder_rest, &tail);
            prop_assert_eq!(&out.initiator_rest, &tail);
        } else {
            prop_assert!(r.receive_first);
            prop_assert_eq!(&out.initiator_rest, &tail);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..700),
        chunks in proptest::collection::vec(1usize..64, 1..8),
        prefix_valid in any::<bool>(),
        rtr in 0u8..8,
    ) {
        let icfg = InitiatorConfig {
            rtr: RtrKinds::from_bits_truncate(rtr),
            ..InitiatorConfig::default()
        };
        let mut i = Initiator::new(&icfg, &[], T0).unwrap();
        let request = drain_i(&mut i);
        let mut r = Responder::new(ResponderConfig::default(), T0);
        let mut to_r = Vec::new();
        if prefix_valid {
            to_r.extend_from_slice(&request);
        }
        to_r.extend_from_slice(&bytes);
        let _ = feed(|c| r.receive(c, T0), &to_r, &chunks);
        if prefix_valid && !r.is_finished() {
            let _ = r.accept(1, 1, &[], T0);
            let _ = feed(|c| r.receive(c, T0), &bytes, &chunks);
        }
        let _ = feed(|c| i.receive(c, T0), &bytes, &chunks);
        let _ = i.tick(u64::MAX);
        let _ = r.tick(u64::MAX);
        prop_assert!(i.is_finished() && r.is_finished());
    }
}
