//! Bytes Linux siw sent and accepted on the wire, as `scripts/siw/run.sh`
//! observed them (docs/iwarp.md, "What siw negotiates (observed)"), replayed
//! against `rnic::iwarp` without QEMU: every frame and FPDU siw sent must
//! parse as it did there, and SoftNDK must keep sending exactly the bytes siw
//! accepted. (siw: Debian 6.1.192, default module parameters; rping through
//! rdma_cm.)

use softndk::rnic::iwarp::ddp::{Buffer, DdpHeader};
use softndk::rnic::iwarp::mpa::{Deframer, MAX_ULPDU, MpaError, Rtr, RtrKinds};
use softndk::rnic::iwarp::rdmap::{Message, SendHeader};
use softndk::rnic::iwarp::setup::{
    Event, Initiator, InitiatorConfig, Responder, ResponderConfig, SetupError,
};

/// Decodes spaced hex.
fn bytes(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// A request or reply frame: key, then the rest in hex.
fn frame(key: &[u8; 16], rest: &str) -> Vec<u8> {
    let mut out = key.to_vec();
    out.extend(bytes(rest));
    out
}

const REQ: &[u8; 16] = b"MPA ID Req Frame";
const REP: &[u8; 16] = b"MPA ID Rep Frame";

/// Runs bytes through a de-framer and returns the ULPDUs.
fn ulpdus(stream: &[u8], crc: bool) -> Vec<Vec<u8>> {
    let mut deframer = Deframer::new(MAX_ULPDU, crc);
    let mut out = Vec::new();
    let mut input = stream;
    for _ in 0..16 {
        if input.is_empty() {
            break;
        }
        let step = deframer.feed(input).unwrap();
        if let Some(ulpdu) = step.ulpdu {
            out.push(ulpdu.to_vec());
        }
        input = &input[step.consumed..];
    }
    assert!(input.is_empty(), "left over: {input:?}");
    out
}

/// siw as initiator: its request; our reply as siw accepted it; rping's Send
/// of its buffer description as siw's first FPDU.
#[test]
fn siw_initiator_request_reply_and_first_send() {
    let mut responder = Responder::new(ResponderConfig::default(), 0);
    let request = frame(REQ, "10020004 00010001");
    let Some(Event::Request(peer)) = responder.receive(&request, 0).unwrap() else {
        panic!("no request");
    };
    assert_eq!(peer.revision, 2);
    assert!(!peer.crc);
    assert_eq!((peer.ird, peer.ord), (Some(1), Some(1)));
    assert_eq!(peer.rtr_offered, RtrKinds::empty());
    assert!(
        peer.private_data.is_empty(),
        "rdma_cm adds no header on iWARP"
    );
    let Some(Event::Established(established)) = responder.accept(1, 1, &[], 0).unwrap() else {
        panic!("not established");
    };
    assert_eq!(responder.output(), frame(REP, "10020004 00010001"));
    assert!(established.receive_first);
    assert_eq!(established.negotiated.rtr, None);

    let send = ulpdus(
        &bytes(
            "0022 4143 00000000 00000000 00000001 00000000 0000559f bc814370 b7aeec00 00000040 00000000",
        ),
        false,
    );
    assert_eq!(send.len(), 1);
    let (header, _) = DdpHeader::parse(&send[0]).unwrap();
    assert_eq!(
        header.buffer,
        Buffer::Untagged {
            ulp: 0,
            qn: 0,
            msn: 1,
            mo: 0
        }
    );
    let Message::Send {
        header:
            SendHeader {
                solicited: false,
                invalidate: None,
                msn: 1,
                mo: 0,
                last: true,
            },
        payload,
    } = Message::parse(&send[0], None).unwrap()
    else {
        panic!("not rping's Send");
    };
    // struct rping_rdma_info: address, rkey, length (64), big-endian.
    assert_eq!(payload, bytes("0000559f bc814370 b7aeec00 00000040"));
}

/// One request SoftNDK sent to siw's responder and what came of it.
struct Case {
    offer: RtrKinds,
    crc: bool,
    /// Our request after the key.
    request: &'static str,
    /// siw's reply after the key.
    reply: &'static str,
    rtr: Option<Rtr>,
    /// The RTR FPDU we then sent (siw answered the Read ones; the Write
    /// one drew no Terminate).
    rtr_fpdu: &'static str,
}

/// siw as responder: our request and the reply siw gave, for each RTR offer.
#[test]
fn siw_responder_replies() {
    let cases = [
        Case {
            offer: RtrKinds::empty(),
            crc: false,
            request: "10020004 00010001",
            reply: "10020004 00010001",
            rtr: None,
            rtr_fpdu: "",
        },
        Case {
            offer: RtrKinds::empty(),
            crc: true,
            request: "50020004 00010001",
            reply: "50020004 00010001",
            rtr: None,
            rtr_fpdu: "",
        },
        Case {
            offer: RtrKinds::all(),
            crc: false,
            request: "10020004 c001c001",
            reply: "10020004 80018001",
            rtr: Some(Rtr::Write),
            rtr_fpdu: "000ec140 00000001 00000000 00000000 00000000",
        },
        Case {
            offer: RtrKinds::READ,
            crc: false,
            request: "10020004 80014001",
            reply: "10020004 80014001",
            rtr: Some(Rtr::Read),
            rtr_fpdu: "002e4141 00000000 00000001 00000001 00000000 00000001 00000000 00000000 \
                       00000000 00000001 00000000 00000000 00000000",
        },
        Case {
            offer: RtrKinds::READ,
            crc: true,
            request: "50020004 80014001",
            reply: "50020004 80014001",
            rtr: Some(Rtr::Read),
            rtr_fpdu: "002e4141 00000000 00000001 00000001 00000000 00000001 00000000 00000000 \
                       00000000 00000001 00000000 00000000 27dbd7e7",
        },
    ];
    for Case {
        offer,
        crc,
        request,
        reply,
        rtr,
        rtr_fpdu,
    } in cases
    {
        let config = InitiatorConfig {
            crc,
            rtr: offer,
            ..InitiatorConfig::default()
        };
        let mut initiator = Initiator::new(&config, &[], 0).unwrap();
        assert_eq!(initiator.output(), frame(REQ, request), "{offer:?}");
        let n = initiator.output().len();
        initiator.advance_output(n);
        let Some(Event::Established(established)) =
            initiator.receive(&frame(REP, reply), 0).unwrap()
        else {
            panic!("not established: {offer:?}");
        };
        assert_eq!(established.negotiated.rtr, rtr);
        assert_eq!(established.negotiated.crc, crc);
        assert_eq!(
            (established.negotiated.ird, established.negotiated.ord),
            (Some(1), Some(1))
        );
        assert_eq!(initiator.output(), bytes(rtr_fpdu), "{offer:?}");
    }
}

/// With CRC turned on by our reply, siw's first FPDU carries a CRC32c that
/// the de-framer verifies (and refuses once corrupted).
#[test]
fn siw_send_with_crc() {
    let fpdu = bytes(
        "00224143 00000000 00000000 00000001 00000000 000055a1 d0804370 a4b41300 \
         00000040 db0d4c06",
    );
    let send = ulpdus(&fpdu, true);
    assert!(matches!(
        Message::parse(&send[0], None).unwrap(),
        Message::Send { header: SendHeader { msn: 1, last: true, .. }, payload } if payload.len() == 16
    ));
    let mut corrupt = fpdu.clone();
    corrupt[20] ^= 1;
    assert!(matches!(
        Deframer::new(MAX_ULPDU, true).feed(&corrupt),
        Err(MpaError::BadCrc { .. })
    ));
}

/// siw answers a Read RTR with a zero-length Read Response to STag 1.
#[test]
fn siw_read_rtr_answer() {
    let ulpdu = ulpdus(
        &bytes("000e c1420000 00010000 00000000 0000 00000000"),
        false,
    );
    assert_eq!(
        Message::parse(&ulpdu[0], None).unwrap(),
        Message::ReadResponse {
            stag: 1,
            to: 0,
            last: true,
            payload: &[]
        }
    );
}

/// Offered only a Send RTR, siw answers Write (siw_cm.c never picks Send):
/// against RFC 6581, so our initiator refuses with No Matching RTR. (On
/// siw's side that Terminate crashed the 6.1.192 guest in iw_cm's
/// `cm_close_handler`; the script does not run this case.)
#[test]
fn siw_write_rtr_when_only_send_offered_is_refused() {
    let config = InitiatorConfig {
        rtr: RtrKinds::SEND,
        ..InitiatorConfig::default()
    };
    let mut initiator = Initiator::new(&config, &[], 0).unwrap();
    assert_eq!(initiator.output(), frame(REQ, "10020004 c0010001"));
    let n = initiator.output().len();
    initiator.advance_output(n);
    assert_eq!(
        initiator.receive(&frame(REP, "10020004 80018001"), 0),
        Err(SetupError::Mpa(MpaError::NoMatchingRtr))
    );
    assert_eq!(
        initiator.output(),
        bytes("00164147 00000000 00000002 00000001 00000000 20070000 00000000")
    );
}
