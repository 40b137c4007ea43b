//! Switch tests: flooding, unicast after learning, what is learned from
//! whom, aging, a full table, counters; proptests of arbitrary input.

use super::vxlan::{HEADER_LEN, ParseError, UDP_PORT};
use super::*;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use proptest::prelude::*;

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
const C: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3));
const STRANGER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 99));

const LOCAL: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
const MAC_B: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0B]);
const MAC_C: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0C]);

fn config() -> Config {
    Config {
        vni: Vni::new(42).unwrap(),
        port: UDP_PORT,
        mtu: 1450,
        table_capacity: 16,
        max_age: 300,
        reserved_bits: ReservedBits::Refuse,
    }
}

fn switch() -> Switch {
    Switch::new(config(), &[A, B, C]).unwrap()
}

fn frame(dst: MacAddr, src: MacAddr, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(dst.0);
    f.extend(src.0);
    f.extend([0x08, 0x00]);
    f.extend((0..payload).map(|i| i as u8));
    f
}

fn datagram(vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut out = vec![0; HEADER_LEN + inner.len()];
    let len = vxlan::build(Vni::new(vni).unwrap(), inner, &mut out).unwrap();
    out.truncate(len);
    out
}

fn targets(t: &Transmit<'_>) -> Vec<SocketAddr> {
    t.targets.addrs().collect()
}

fn all_peers() -> Vec<SocketAddr> {
    [A, B, C]
        .into_iter()
        .map(|ip| SocketAddr::new(ip, UDP_PORT))
        .collect()
}

#[test]
fn test_config_refuses_bad_peer_lists() {
    let mapped_b = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped());
    assert_eq!(
        Switch::new(config(), &[B, mapped_b]).map(|_| ()),
        Err(ConfigError::DuplicatePeer)
    );
    for bad in [
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        IpAddr::V4(Ipv4Addr::BROADCAST),
        IpAddr::V4(Ipv4Addr::new(239, 1, 1, 1)),
        IpAddr::V6(Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)),
    ] {
        assert_eq!(
            Switch::new(config(), &[A, bad]).map(|_| ()),
            Err(ConfigError::BadPeer),
            "{bad}"
        );
    }
    let many: Vec<IpAddr> = (0..=switch::MAX_PEERS)
        .map(|n| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 1, n as u16)))
        .collect();
    assert_eq!(
        Switch::new(config(), &many).map(|_| ()),
        Err(ConfigError::TooManyPeers)
    );
    assert!(Switch::new(config(), &many[..switch::MAX_PEERS]).is_ok());
}

#[test]
fn test_broadcast_multicast_and_unknown_unicast_flood() {
    let mut sw = switch();
    let mut out = [0u8; 2048];
    for dst in [
        MacAddr::BROADCAST,
        MacAddr([0x33, 0x33, 0, 0, 0, 1]),
        MacAddr([0x01, 0, 0x5E, 0, 0, 0xFB]),
        MAC_B,
    ] {
        let f = frame(dst, LOCAL, 50);
        let t = sw.transmit(&f, 0, &mut out).unwrap();
        assert_eq!(t.len, HEADER_LEN + f.len());
        assert_eq!(targets(&t), all_peers(), "{dst:?}");
        assert_eq!(&out[HEADER_LEN..t.len], &f[..]);
    }
    assert_eq!(sw.stats().tx_flooded, 4);
    assert_eq!(sw.stats().tx_unicast, 0);
}

#[test]
fn test_unicast_goes_to_the_learned_peer_until_it_ages() {
    let mut sw = switch();
    let from_b = datagram(42, &frame(LOCAL, MAC_B, 50));
    let from_c = datagram(42, &frame(MacAddr::BROADCAST, MAC_C, 50));
    assert!(sw.receive(B, &from_b, 100).is_ok());
    assert!(sw.receive(C, &from_c, 100).is_ok());
    assert_eq!(sw.lookup(MAC_B, 100), Some(B));
    assert_eq!(sw.lookup(MAC_C, 100), Some(C));

    let mut out = [0u8; 2048];
    let t = sw
        .transmit(&frame(MAC_B, LOCAL, 10), 200, &mut out)
        .unwrap();
    assert_eq!(targets(&t), [SocketAddr::new(B, UDP_PORT)]);
    assert_eq!(t.targets.unicast(), Some(SocketAddr::new(B, UDP_PORT)));
    let t = sw
        .transmit(&frame(MAC_C, LOCAL, 10), 400, &mut out)
        .unwrap();
    assert_eq!(targets(&t), [SocketAddr::new(C, UDP_PORT)]);
    // 401 - 100 > 300: aged, flooded again.
    let t = sw
        .transmit(&frame(MAC_C, LOCAL, 10), 401, &mut out)
        .unwrap();
    assert_eq!(targets(&t), all_peers());
    assert_eq!(sw.stats().tx_unicast, 2);
    assert_eq!(sw.stats().tx_flooded, 1);
    assert_eq!(sw.expire(401), 2);
    assert!(sw.table().is_empty());
}

#[test]
fn test_station_that_moves_is_relearned() {
    let mut sw = switch();
    sw.receive(B, &datagram(42, &frame(LOCAL, MAC_B, 50)), 0)
        .unwrap();
    sw.receive(A, &datagram(42, &frame(LOCAL, MAC_B, 50)), 1)
        .unwrap();
    assert_eq!(sw.lookup(MAC_B, 1), Some(A));
    assert_eq!(sw.stats().learned, 1);
    assert_eq!(sw.stats().moved, 1);
}

#[test]
fn test_ipv6_and_ipv4_mapped_sources_are_peers() {
    let mut sw = switch();
    let mapped_b = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 2).to_ipv6_mapped());
    sw.receive(mapped_b, &datagram(42, &frame(LOCAL, MAC_B, 50)), 0)
        .unwrap();
    sw.receive(C, &datagram(42, &frame(LOCAL, MAC_C, 50)), 0)
        .unwrap();
    assert_eq!(sw.lookup(MAC_B, 0), Some(B));
    assert_eq!(sw.lookup(MAC_C, 0), Some(C));
}

#[test]
fn test_nothing_is_learned_from_invalid_frames_or_strangers() {
    let mut sw = switch();
    let good = frame(LOCAL, MAC_B, 50);
    let mut reserved = datagram(42, &good);
    reserved[7] = 1;
    let mut no_i = datagram(42, &good);
    no_i[0] = 0;
    let cases: Vec<(IpAddr, Vec<u8>, RxDrop)> = vec![
        (STRANGER, datagram(42, &good), RxDrop::UnknownPeer),
        (
            B,
            datagram(43, &good),
            RxDrop::Malformed(ParseError::WrongVni { got: 43 }),
        ),
        (B, reserved, RxDrop::Malformed(ParseError::ReservedBits)),
        (B, no_i, RxDrop::Malformed(ParseError::FlagIClear)),
        (
            B,
            good[..7].to_vec(),
            RxDrop::Malformed(ParseError::Truncated),
        ),
        (
            B,
            datagram(42, &good[..13]),
            RxDrop::Malformed(ParseError::InnerTooShort),
        ),
        (
            B,
            datagram(42, &frame(LOCAL, MAC_B, 1450 + 5)),
            RxDrop::Malformed(ParseError::InnerTooLong),
        ),
        (
            B,
            datagram(42, &frame(LOCAL, MacAddr::BROADCAST, 50)),
            RxDrop::BadSourceMac,
        ),
        (
            B,
            datagram(42, &frame(LOCAL, MacAddr([0; 6]), 50)),
            RxDrop::BadSourceMac,
        ),
    ];
    for (from, d, want) in &cases {
        assert_eq!(sw.receive(*from, d, 0), Err(*want));
    }
    assert!(sw.table().is_empty());
    let s = sw.stats();
    assert_eq!(s.rx_frames, 0);
    assert_eq!(s.rx_dropped(), cases.len() as u64);
    for counter in [
        s.rx_drop_unknown_peer,
        s.rx_drop_vni,
        s.rx_drop_reserved,
        s.rx_drop_flag_i,
        s.rx_drop_truncated,
        s.rx_drop_inner_short,
        s.rx_drop_inner_long,
    ] {
        assert_eq!(counter, 1);
    }
    assert_eq!(s.rx_drop_source_mac, 2);
}

#[test]
fn test_reserved_bits_may_be_ignored() {
    let mut sw = Switch::new(
        Config {
            reserved_bits: ReservedBits::Ignore,
            ..config()
        },
        &[B],
    )
    .unwrap();
    let mut d = datagram(42, &frame(LOCAL, MAC_B, 50));
    d[0] = 0xFF;
    d[1] = 0xFF;
    assert!(sw.receive(B, &d, 0).is_ok());
}

#[test]
fn test_full_table_still_delivers_and_floods() {
    let mut sw = Switch::new(
        Config {
            table_capacity: 1,
            ..config()
        },
        &[B, C],
    )
    .unwrap();
    sw.receive(B, &datagram(42, &frame(LOCAL, MAC_B, 50)), 0)
        .unwrap();
    let from_c = datagram(42, &frame(LOCAL, MAC_C, 50));
    let delivered = sw.receive(C, &from_c, 0).unwrap();
    assert_eq!(delivered.len(), 64);
    assert_eq!(sw.stats().learn_table_full, 1);
    let mut out = [0u8; 256];
    let t = sw.transmit(&frame(MAC_C, LOCAL, 10), 0, &mut out).unwrap();
    assert!(matches!(t.targets, Targets::Flood { .. }));
    let t = sw.transmit(&frame(MAC_B, LOCAL, 10), 0, &mut out).unwrap();
    assert_eq!(t.targets, Targets::Unicast(SocketAddr::new(B, UDP_PORT)));
}

#[test]
fn test_transmit_drops_are_counted() {
    let mut sw = switch();
    let mut out = [0u8; 128];
    assert_eq!(sw.transmit(&[0; 13], 0, &mut out), Err(TxDrop::TooShort));
    let long = frame(MAC_B, LOCAL, 1450 + 5);
    assert_eq!(sw.transmit(&long, 0, &mut out), Err(TxDrop::TooLong));
    let f = frame(MAC_B, LOCAL, 200);
    assert_eq!(sw.transmit(&f, 0, &mut out), Err(TxDrop::BufferTooSmall));
    let mut lonely = Switch::new(config(), &[]).unwrap();
    assert_eq!(
        lonely.transmit(&frame(MAC_B, LOCAL, 10), 0, &mut out),
        Err(TxDrop::NoPeers)
    );
    assert_eq!(lonely.stats().tx_drop_no_peers, 1);
    let s = sw.stats();
    assert_eq!(
        (s.tx_drop_too_short, s.tx_drop_too_long, s.tx_drop_buffer),
        (1, 1, 1)
    );
    assert_eq!(s.tx_dropped(), 3);
    assert_eq!(s.tx_frames, 0);
}

#[test]
fn test_counters_count_frames_and_inner_bytes() {
    let mut sw = switch();
    let mut out = [0u8; 2048];
    sw.transmit(&frame(MAC_B, LOCAL, 86), 0, &mut out).unwrap();
    sw.receive(B, &datagram(42, &frame(LOCAL, MAC_B, 36)), 0)
        .unwrap();
    let s = sw.stats();
    assert_eq!((s.tx_frames, s.tx_bytes), (1, 100));
    assert_eq!((s.rx_frames, s.rx_bytes), (1, 50));
}

#[test]
fn test_two_switches_talk() {
    // A frame sent by one switch is received by the other as it was.
    let mut left = Switch::new(config(), &[B]).unwrap();
    let mut right = Switch::new(config(), &[A]).unwrap();
    let mut out = [0u8; 2048];
    let f = frame(MacAddr::BROADCAST, LOCAL, 28);
    let t = left.transmit(&f, 0, &mut out).unwrap();
    assert_eq!(targets(&t), [SocketAddr::new(B, UDP_PORT)]);
    let len = t.len;
    assert_eq!(right.receive(A, &out[..len], 0), Ok(&f[..]));
    assert_eq!(right.lookup(LOCAL, 0), Some(A));
}

proptest! {
    /// Arbitrary datagrams from arbitrary sources: no panic, and every one
    /// is either delivered or counted as a drop.
    #[test]
    fn prop_receive_never_panics_and_accounts(
        inputs in proptest::collection::vec(
            (0usize..4, proptest::collection::vec(any::<u8>(), 0..200), any::<bool>()),
            0..40,
        ),
    ) {
        let mut sw = switch();
        let sources = [A, B, C, STRANGER];
        for (n, (src, mut bytes, make_valid)) in inputs.iter().cloned().enumerate() {
            if make_valid && bytes.len() >= 8 {
                bytes[..8].copy_from_slice(&[0x08, 0, 0, 0, 0, 0, 42, 0]);
            }
            let from = sources[src];
            let _ = sw.receive(from, &bytes, n as u64);
            let s = *sw.stats();
            prop_assert_eq!(s.rx_frames + s.rx_dropped(), n as u64 + 1);
            prop_assert!(sw.table().len() <= 16);
        }
    }

    /// Arbitrary outgoing frames: no panic; accepted ones round-trip.
    #[test]
    fn prop_transmit_never_panics_and_round_trips(
        bytes in proptest::collection::vec(any::<u8>(), 0..1600),
        room in 0usize..1700,
    ) {
        let mut sw = switch();
        let mut out = vec![0u8; room];
        let sent = sw.transmit(&bytes, 0, &mut out).map(|t| t.len);
        if let Ok(len) = sent {
            prop_assert_eq!(
                vxlan::parse(&out[..len], config().vni, sw.bounds(), ReservedBits::Refuse),
                Ok(&bytes[..])
            );
        } else {
            prop_assert_eq!(sw.stats().tx_dropped(), 1);
        }
    }
}
