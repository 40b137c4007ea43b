//! What each side of the MPA exchange refuses and how: malformed frames
//! closed without a reply or a Terminate, failed terms and a wrong first
//! FPDU answered with a Terminate, automatic rejects, time-outs, and the
//! local mistakes that leave a machine usable.

use alloc::vec;
use alloc::vec::Vec;

use super::tests::{T0, data_fpdu, drain_i, drain_r, feed, fpdu_of, frame_bytes, messages};
use super::*;
use crate::rnic::iwarp::mpa::{
    self, Enhanced, FLAG_MARKERS, FrameKind, MAX_IRD_ORD, MpaFrame, Rtr, write_fpdu,
};
use crate::rnic::iwarp::rdmap::Message;
use crate::rnic::iwarp::terminate::{Layer, Terminate};

#[test]
fn markers_get_an_automatic_reject() {
    let request = MpaFrame {
        markers: true,
        ..MpaFrame::request(true, Enhanced::default(), b"m")
    };
    let bytes = frame_bytes(&request);
    assert_eq!(bytes[16] & FLAG_MARKERS, FLAG_MARKERS);
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(
        r.receive(&bytes, T0),
        Err(SetupError::Mpa(MpaError::MarkersRequested))
    );
    let reply = drain_r(&mut r);
    let (frame, len) = MpaFrame::parse(&reply, FrameKind::Reply).unwrap();
    assert_eq!(len, reply.len());
    assert!(frame.reject && !frame.markers && frame.crc);
    assert_eq!(frame.revision, 2);
    // Failed for good.
    assert_eq!(
        r.accept(1, 1, &[], T0),
        Err(SetupError::Mpa(MpaError::MarkersRequested))
    );
    assert!(r.is_finished());
    // The initiator reading that reject reports it.
    let mut i = Initiator::new(&InitiatorConfig::default(), &[], T0).unwrap();
    assert_eq!(
        i.receive(&reply, T0),
        Ok(Some(Event::Rejected {
            private_data: Vec::new(),
        }))
    );
}

#[test]
fn peer_to_peer_without_rtr_kinds_is_rejected() {
    let offer = Enhanced {
        peer_to_peer: true,
        ..Enhanced::default()
    };
    let bytes = frame_bytes(&MpaFrame::request(false, offer, &[]));
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(
        r.receive(&bytes, T0),
        Err(SetupError::Mpa(MpaError::NoMatchingRtr))
    );
    let (frame, _) = MpaFrame::parse(r.output(), FrameKind::Reply).unwrap();
    assert!(frame.reject);
}

/// A change to a frame's bytes.
type Edit = fn(&mut Vec<u8>);

/// A reply frame answering the default request, with `edit` applied.
fn reply_to_default(edit: impl FnOnce(&mut Vec<u8>)) -> (Initiator, Vec<u8>) {
    let mut i = Initiator::new(&InitiatorConfig::default(), &[], T0).unwrap();
    let request = drain_i(&mut i);
    let (req, _) = MpaFrame::parse(&request, FrameKind::Request).unwrap();
    let mut reply = frame_bytes(&MpaFrame::accept(&req, false, 1, 1, b"r").unwrap());
    edit(&mut reply);
    (i, reply)
}

#[test]
fn malformed_replies_close_without_terminate() {
    let cases: [(Edit, SetupError); 4] = [
        (|b| b[0] = b'X', SetupError::Mpa(MpaError::BadKey)),
        (|b| b[17] = 3, SetupError::Mpa(MpaError::BadRevision(3))),
        (
            |b| b[18..20].copy_from_slice(&513u16.to_be_bytes()),
            SetupError::Mpa(MpaError::PrivateDataTooLong(513)),
        ),
        // Revision 2 without the enhanced block, to an enhanced request.
        (
            |b| {
                b[16] &= !mpa::FLAG_ENHANCED;
            },
            SetupError::EnhancedReplyMissing,
        ),
    ];
    for (edit, expected) in cases {
        for chunk in [1, 20, 100] {
            let (mut i, reply) = reply_to_default(edit);
            let got = feed(|c| i.receive(c, T0), &reply, &[chunk]);
            assert_eq!(got, Err(expected), "chunk {chunk}");
            assert!(i.output().is_empty());
            assert!(i.is_finished());
            assert_eq!(i.tick(T0 + 1_000_000), Err(expected));
        }
    }
    // A bad key is seen with the header, before the private data.
    let (mut i, reply) = reply_to_default(|b| b[3] = b'?');
    assert_eq!(
        i.receive(&reply[..20], T0),
        Err(SetupError::Mpa(MpaError::BadKey))
    );
}

#[test]
fn failed_terms_send_a_terminate() {
    // IRD below the initiator's ORD, and an RTR kind not offered.
    let icfg = InitiatorConfig {
        ird: 4,
        ord: 4,
        rtr: RtrKinds::READ,
        crc: true,
        ..InitiatorConfig::default()
    };
    let cases = [
        (
            Enhanced {
                ird: 3,
                ord: 4,
                peer_to_peer: true,
                rtr: RtrKinds::READ,
            },
            MpaError::InsufficientIrd,
            LlpCode::InsufficientIrd,
        ),
        (
            Enhanced {
                ird: 4,
                ord: 4,
                peer_to_peer: true,
                rtr: RtrKinds::WRITE,
            },
            MpaError::NoMatchingRtr,
            LlpCode::NoMatchingRtr,
        ),
    ];
    for (answer, error, code) in cases {
        let mut i = Initiator::new(&icfg, &[], T0).unwrap();
        drain_i(&mut i);
        let reply = MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc: true,
            reject: false,
            revision: 2,
            enhanced: Some(answer),
            private_data: &[],
            reserved_flags: 0,
        };
        assert_eq!(
            i.receive(&frame_bytes(&reply), T0),
            Err(SetupError::Mpa(error))
        );
        let sent = messages(i.output(), true);
        let [Message::Terminate { terminate, msn: 1 }] = sent.as_slice() else {
            panic!("{sent:?}");
        };
        assert_eq!(terminate.code, TermCode::llp(code));
        assert_eq!(terminate.code.layer, Layer::Llp);
    }
}

#[test]
fn bad_requests_close_without_reply() {
    let good = frame_bytes(&MpaFrame::request(false, Enhanced::default(), b"abcd"));
    let cases: [(Edit, SetupError); 4] = [
        (|b| b[15] = b'x', SetupError::Mpa(MpaError::BadKey)),
        (|b| b[17] = 0, SetupError::Mpa(MpaError::BadRevision(0))),
        (|b| b[17] = 3, SetupError::Mpa(MpaError::BadRevision(3))),
        (
            |b| b[18..20].copy_from_slice(&0xffffu16.to_be_bytes()),
            SetupError::Mpa(MpaError::PrivateDataTooLong(0xffff)),
        ),
    ];
    for (edit, expected) in cases {
        for chunk in [1, 7, 64] {
            let mut bytes = good.clone();
            edit(&mut bytes);
            let mut r = Responder::new(ResponderConfig::default(), T0);
            assert_eq!(feed(|c| r.receive(c, T0), &bytes, &[chunk]), Err(expected));
            assert!(r.output().is_empty());
            assert_eq!(r.receive(&[], T0), Err(expected));
        }
    }
    // The request's IRD/ORD block announced but missing.
    let mut short = good[..20].to_vec();
    short[18..20].copy_from_slice(&2u16.to_be_bytes());
    short.extend_from_slice(&[0, 1]);
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(
        r.receive(&short, T0),
        Err(SetupError::Mpa(MpaError::EnhancedBlockMissing))
    );
}

#[test]
fn data_before_the_reply_is_refused() {
    let mut bytes = frame_bytes(&MpaFrame::request(false, Enhanced::default(), &[]));
    let request_len = bytes.len();
    bytes.extend_from_slice(&data_fpdu(b"too early", 1, false));
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(r.receive(&bytes, T0), Err(SetupError::DataBeforeReply));
    // The same bytes after the request event, before the decision.
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert!(matches!(
        r.receive(&bytes[..request_len], T0),
        Ok(Some(Event::Request(_)))
    ));
    assert_eq!(
        r.receive(&bytes[request_len..], T0),
        Err(SetupError::DataBeforeReply)
    );
    assert!(r.output().is_empty());
}

#[test]
fn truncated_then_timed_out() {
    let bytes = frame_bytes(&MpaFrame::request(false, Enhanced::default(), b"pd"));
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(r.deadline(), Some(T0 + DEFAULT_REQUEST_TIMEOUT_MS));
    assert_eq!(r.receive(&bytes[..10], T0 + 1), Ok(None));
    assert_eq!(r.tick(T0 + DEFAULT_REQUEST_TIMEOUT_MS - 1), Ok(()));
    assert_eq!(
        r.tick(T0 + DEFAULT_REQUEST_TIMEOUT_MS),
        Err(SetupError::TimedOut)
    );
    assert_eq!(r.receive(&bytes[10..], T0), Err(SetupError::TimedOut));
    assert_eq!(r.deadline(), None);

    // Late bytes that still do not complete the frame time out too.
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(
        r.receive(&bytes[..21], T0 + DEFAULT_REQUEST_TIMEOUT_MS),
        Err(SetupError::TimedOut)
    );

    let mut i = Initiator::new(&InitiatorConfig::default(), &[], T0).unwrap();
    assert_eq!(i.deadline(), Some(T0 + DEFAULT_REPLY_TIMEOUT_MS));
    let (_, reply) = reply_to_default(|_| {});
    assert_eq!(i.receive(&reply[..19], T0 + 9_999), Ok(None));
    assert_eq!(i.tick(T0 + 10_000), Err(SetupError::TimedOut));
    assert_eq!(i.receive(&reply[19..], T0), Err(SetupError::TimedOut));
}

#[test]
fn decision_and_rtr_time_out() {
    let icfg = InitiatorConfig {
        rtr: RtrKinds::WRITE,
        ..InitiatorConfig::default()
    };
    let mut i = Initiator::new(&icfg, &[], T0).unwrap();
    let request = drain_i(&mut i);
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert!(matches!(
        r.receive(&request, T0),
        Ok(Some(Event::Request(_)))
    ));
    assert_eq!(r.deadline(), Some(T0 + DEFAULT_DECISION_TIMEOUT_MS));
    let mut late = Responder::new(ResponderConfig::default(), T0);
    late.receive(&request, T0).unwrap();
    assert_eq!(
        late.accept(1, 1, &[], T0 + DEFAULT_DECISION_TIMEOUT_MS),
        Err(SetupError::TimedOut)
    );
    assert_eq!(r.accept(1, 1, &[], T0 + 10), Ok(None));
    assert_eq!(r.deadline(), Some(T0 + 10 + DEFAULT_RTR_TIMEOUT_MS));
    assert_eq!(
        r.receive(&[], T0 + 10 + DEFAULT_RTR_TIMEOUT_MS - 1),
        Ok(None)
    );
    assert_eq!(
        r.receive(&[], T0 + 10 + DEFAULT_RTR_TIMEOUT_MS),
        Err(SetupError::TimedOut)
    );
}

/// A responder that accepted a peer-to-peer request offering `offer`.
fn awaiting_rtr(offer: RtrKinds, crc: bool) -> Responder {
    let icfg = InitiatorConfig {
        rtr: offer,
        crc,
        ..InitiatorConfig::default()
    };
    let mut i = Initiator::new(&icfg, &[], T0).unwrap();
    let mut r = Responder::new(ResponderConfig::default(), T0);
    r.receive(&drain_i(&mut i), T0).unwrap();
    assert_eq!(r.accept(1, 1, &[], T0), Ok(None));
    drain_r(&mut r);
    r
}

#[test]
fn wrong_first_fpdu_is_answered_with_a_terminate() {
    let not_rtr = [
        // The wrong kind.
        Message::rtr(Rtr::Read, RTR_MSN),
        Message::rtr(Rtr::Send, RTR_MSN),
        // A Write with data.
        Message::Write {
            stag: 1,
            to: 0,
            last: true,
            payload: b"data",
        },
        // Not the last segment.
        Message::Write {
            stag: 1,
            to: 0,
            last: false,
            payload: &[],
        },
    ];
    for message in not_rtr {
        let mut r = awaiting_rtr(RtrKinds::WRITE, true);
        let bytes = fpdu_of(&message, true);
        assert_eq!(
            feed(|c| r.receive(c, T0), &bytes, &[3]),
            Err(SetupError::NotRtr)
        );
        let sent = messages(r.output(), true);
        let [Message::Terminate { terminate, .. }] = sent.as_slice() else {
            panic!("{sent:?}");
        };
        assert_eq!(terminate.code, TermCode::llp(LlpCode::NoMatchingRtr));
    }
    // A Send RTR with the wrong MSN.
    let mut r = awaiting_rtr(RtrKinds::SEND, false);
    let bytes = fpdu_of(&Message::rtr(Rtr::Send, 2), false);
    assert_eq!(r.receive(&bytes, T0), Err(SetupError::NotRtr));
    // A long first FPDU is not read whole: it is no RTR.
    let mut r = awaiting_rtr(RtrKinds::WRITE, false);
    let bytes = data_fpdu(&[0; 300], 1, false);
    assert_eq!(r.receive(&bytes, T0), Err(SetupError::NotRtr));
    // A bad CRC is reported as such.
    let mut r = awaiting_rtr(RtrKinds::WRITE, true);
    let mut bytes = fpdu_of(&Message::rtr(Rtr::Write, RTR_MSN), true);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    assert!(matches!(
        r.receive(&bytes, T0),
        Err(SetupError::Mpa(MpaError::BadCrc { .. }))
    ));
    let sent = messages(r.output(), true);
    assert!(
        matches!(sent.as_slice(), [Message::Terminate { terminate, .. }]
        if terminate.code == TermCode::llp(LlpCode::Crc))
    );
    // Garbage that is no RDMAP message.
    let mut r = awaiting_rtr(RtrKinds::WRITE, false);
    let mut garbage = vec![0u8; 32];
    let len = write_fpdu(&mut garbage, &[0xff; 20], false).unwrap();
    assert!(matches!(
        r.receive(&garbage[..len], T0),
        Err(SetupError::Rdmap(_))
    ));
    assert!(!r.output().is_empty());
}

#[test]
fn a_terminate_instead_of_the_rtr_is_not_answered() {
    let mut r = awaiting_rtr(RtrKinds::READ, false);
    let code = TermCode::llp(LlpCode::InsufficientIrd);
    let bytes = fpdu_of(
        &Message::Terminate {
            msn: 1,
            terminate: Terminate::new(code),
        },
        false,
    );
    assert_eq!(r.receive(&bytes, T0), Err(SetupError::PeerTerminated(code)));
    assert!(r.output().is_empty());
    // The longest Terminate, copying a Read Request's headers, fits.
    let read = Message::rtr(Rtr::Read, RTR_MSN);
    let mut ulpdu = vec![0; read.ulpdu_len()];
    read.write_ulpdu(&mut ulpdu).unwrap();
    let long = Message::Terminate {
        msn: 1,
        terminate: Terminate {
            code,
            segment_len: Some(46),
            ddp_header: Some(&ulpdu[..18]),
            rdmap_header: Some(&ulpdu[18..]),
        },
    };
    assert_eq!(long.ulpdu_len(), RTR_MAX_ULPDU);
    let mut r = awaiting_rtr(RtrKinds::READ, true);
    let bytes = fpdu_of(&long, true);
    assert_eq!(
        feed(|c| r.receive(c, T0), &bytes, &[5]),
        Err(SetupError::PeerTerminated(code))
    );
    assert!(r.output().is_empty());
}

#[test]
fn local_mistakes_leave_the_machines_usable() {
    let too_much = [0u8; 509];
    assert_eq!(
        Initiator::new(&InitiatorConfig::default(), &too_much, T0).unwrap_err(),
        SetupError::Mpa(MpaError::PrivateDataTooLong(513))
    );
    let big = InitiatorConfig {
        ird: MAX_IRD_ORD + 1,
        ..InitiatorConfig::default()
    };
    assert_eq!(
        Initiator::new(&big, &[], T0).unwrap_err(),
        SetupError::Mpa(MpaError::IrdOrdOutOfRange)
    );
    let mut i = Initiator::new(&InitiatorConfig::default(), &too_much[..508], T0).unwrap();
    let mut r = Responder::new(ResponderConfig::default(), T0);
    assert_eq!(r.accept(1, 1, &[], T0), Err(SetupError::WrongState));
    r.receive(&drain_i(&mut i), T0).unwrap();
    assert_eq!(
        r.accept(1, 1, &too_much, T0),
        Err(SetupError::Mpa(MpaError::PrivateDataTooLong(513)))
    );
    assert_eq!(
        r.accept(MAX_IRD_ORD + 1, 1, &[], T0),
        Err(SetupError::Mpa(MpaError::IrdOrdOutOfRange))
    );
    assert!(r.output().is_empty());
    assert!(r.reject(b"later", T0).is_ok());
    assert_eq!(r.reject(b"again", T0), Err(SetupError::WrongState));
    assert_eq!(r.receive(b"x", T0), Err(SetupError::WrongState));
    // Partial writes of the output.
    let reply = r.output().to_vec();
    r.advance_output(3);
    assert_eq!(r.output(), &reply[3..]);
    r.advance_output(usize::MAX);
    assert!(r.output().is_empty());
}
