//! The virtual Ethernet port ([`super::ether`]) between "machines" — each
//! its own instance of the tests' WSK provider with its own underlay
//! address — over loopback UDP: frames both ways, flooding, learning,
//! strangers and bad headers dropped and counted, back-pressure, halt with
//! sends in flight; and the `SoftNdkPeers` / `SoftNdkVni` parsers.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::mem::offset_of;
use core::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::config::{DEFAULT_VNI, MAX_PEERS, parse_peers, vni};
use super::ether::{EtherPort, FrameSink, PortError, RX_BUFFERS, TX_SLOTS, TxOutcome};
use crate::kernel::testing::waited;
use crate::kernel::wsk::fake::Provider;
use crate::rnic::ether::vxlan::{self, HEADER_LEN};
use crate::rnic::ether::{ConfigError, Vni};

/// Records what the port indicates, copies it and gives the buffer back
/// (unless told to keep it, as a protocol holding NBLs would).
#[derive(Default)]
struct Sink {
    port: Mutex<Option<std::sync::Weak<EtherPort>>>,
    frames: Mutex<Vec<Vec<u8>>>,
    kept: Mutex<Vec<usize>>,
    keep: std::sync::atomic::AtomicBool,
    links: Mutex<Vec<bool>>,
}

/// The port behind a played upper layer's weak reference, and a copy of the
/// `len` bytes at `offset` of its receive buffer `index` (the frame an
/// indication hands up, copied out as a protocol would).
pub(super) fn received(
    port: &Mutex<Option<std::sync::Weak<EtherPort>>>,
    index: usize,
    offset: usize,
    len: usize,
) -> (Arc<EtherPort>, Vec<u8>) {
    let port = port.lock().unwrap().clone().unwrap().upgrade().unwrap();
    let frame = port
        .with_rx_buffer(index, |b| b[offset..offset + len].to_vec())
        .unwrap();
    (port, frame)
}

impl FrameSink for Sink {
    fn indicate(&self, index: usize, offset: usize, len: usize) {
        let (port, frame) = received(&self.port, index, offset, len);
        self.frames.lock().unwrap().push(frame);
        if self.keep.load(std::sync::atomic::Ordering::Relaxed) {
            self.kept.lock().unwrap().push(index);
        } else {
            port.return_buffer(index);
        }
    }
    fn link(&self, up: bool) {
        self.links.lock().unwrap().push(up);
    }
}

impl Sink {
    fn wait_frames(&self, count: usize) -> Vec<Vec<u8>> {
        waited(|| self.frames.lock().unwrap().len() >= count);
        self.frames.lock().unwrap().clone()
    }
}

struct Machine {
    provider: &'static Provider,
    port: Arc<EtherPort>,
    sink: Arc<Sink>,
}

fn machine(me: &str, peers: &[&str], vni: u32) -> Machine {
    let provider = Provider::new(5);
    let ip: IpAddr = me.parse().unwrap();
    provider.set_dgram_addrs(&[ip]);
    let peers: Vec<IpAddr> = peers.iter().map(|p| p.parse().unwrap()).collect();
    let sink = Arc::new(Sink::default());
    let port = EtherPort::new(1500, vni, &peers, 4789, sink.clone(), Box::new(|| 1_000)).unwrap();
    *sink.port.lock().unwrap() = Some(Arc::downgrade(&port));
    port.start(&provider.client()).unwrap();
    assert!(port.link_up(), "the test provider binds at once");
    assert_eq!(*sink.links.lock().unwrap(), [true]);
    Machine {
        provider,
        port,
        sink,
    }
}

fn halt(m: &Machine) {
    m.port.halt();
    let start = Instant::now();
    while !m.port.is_closed() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(m.port.is_closed());
    assert_eq!(m.provider.client().sockets(), 0);
    assert_eq!(m.sink.links.lock().unwrap().last(), Some(&false));
}

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xA];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xB];
const BROADCAST: [u8; 6] = [0xFF; 6];

fn frame(dst: [u8; 6], src: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(payload);
    f
}

fn send(port: &EtherPort, bytes: &[u8]) -> TxOutcome {
    port.transmit(|buf| {
        let dst = buf.get_mut(..bytes.len())?;
        dst.copy_from_slice(bytes);
        Some(bytes.len())
    })
}

#[test]
fn two_adapters_flood_then_unicast_after_learning_both_ways() {
    for (a_ip, b_ip, c_ip) in [
        ("192.0.2.101", "192.0.2.102", "192.0.2.103"),
        ("2001:db8::101", "2001:db8::102", "2001:db8::103"),
    ] {
        // A knows B and C (C is never up: its floods go nowhere); B knows A.
        let a = machine(a_ip, &[b_ip, c_ip], 42);
        let b = machine(b_ip, &[a_ip], 42);
        // A broadcast from A floods to both of A's peers; B delivers it.
        let hello = frame(BROADCAST, MAC_A, b"who has B?");
        assert_eq!(send(&a.port, &hello), TxOutcome::Sent);
        assert_eq!(b.sink.wait_frames(1), core::slice::from_ref(&hello));
        let sa = a.port.switch_stats();
        assert_eq!((sa.tx_frames, sa.tx_flooded, sa.tx_unicast), (1, 1, 0));
        // B learned MAC_A behind A: its answer is a unicast.
        let answer = frame(MAC_A, MAC_B, b"B is here");
        assert_eq!(send(&b.port, &answer), TxOutcome::Sent);
        assert_eq!(a.sink.wait_frames(1), core::slice::from_ref(&answer));
        let sb = b.port.switch_stats();
        assert_eq!((sb.tx_unicast, sb.tx_flooded, sb.learned), (1, 0, 1));
        // And now A knows MAC_B behind B: unicast too.
        let data = frame(MAC_B, MAC_A, &[7; 1400]);
        assert_eq!(send(&a.port, &data), TxOutcome::Sent);
        assert_eq!(b.sink.wait_frames(2)[1], data);
        let sa = a.port.switch_stats();
        assert_eq!((sa.tx_unicast, sa.tx_flooded, sa.learned), (1, 1, 1));
        assert_eq!(sa.rx_dropped() + sa.tx_dropped(), 0);
        assert_eq!(a.port.stats().rx_indicated, 1);
        assert_eq!(b.port.stats().rx_indicated, 2);
        assert_eq!((a.port.rx_outstanding(), b.port.rx_outstanding()), (0, 0));
        halt(&a);
        halt(&b);
    }
}

#[test]
fn strangers_and_bad_headers_are_dropped_and_counted() {
    let a = machine("192.0.2.111", &["192.0.2.112"], 7);
    let peer_udp = Provider::dgram_plain("192.0.2.112:4789".parse().unwrap());
    let stranger_udp = Provider::dgram_plain("192.0.2.119:4789".parse().unwrap());
    let real_a = Provider::dgram_real("192.0.2.111:4789".parse().unwrap()).unwrap();
    let good = frame(MAC_A, MAC_B, b"payload");
    let mut datagram = alloc::vec![0_u8; HEADER_LEN + good.len()];
    let n = vxlan::build(Vni::new(7).unwrap(), &good, &mut datagram).unwrap();
    // A stranger's well-formed datagram: unknown peer.
    stranger_udp.send_to(&datagram[..n], real_a).unwrap();
    // The peer: I flag clear, a wrong VNI, then a good one.
    let mut bad = datagram.clone();
    bad[0] = 0;
    peer_udp.send_to(&bad[..n], real_a).unwrap();
    let mut wrong_vni = datagram.clone();
    wrong_vni[6] ^= 1;
    peer_udp.send_to(&wrong_vni[..n], real_a).unwrap();
    peer_udp.send_to(&datagram[..n], real_a).unwrap();
    assert_eq!(a.sink.wait_frames(1), [good]);
    let s = a.port.switch_stats();
    let start = Instant::now();
    while a.port.switch_stats().rx_dropped() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let s2 = a.port.switch_stats();
    assert_eq!(s2.rx_drop_unknown_peer, 1);
    assert_eq!(s2.rx_drop_flag_i, 1);
    assert_eq!(s2.rx_drop_vni, 1);
    assert_eq!(s.rx_frames, 1);
    assert_eq!(a.port.stats().rx_indicated, 1);
    assert_eq!(
        a.port.rx_outstanding(),
        0,
        "dropped datagrams free their buffer"
    );
    halt(&a);
}

#[test]
fn busy_send_slots_drop_and_count_and_halt_waits_for_sends_in_flight() {
    let a = machine("192.0.2.121", &["192.0.2.122"], 9);
    let b = machine("192.0.2.122", &["192.0.2.121"], 9);
    a.provider.hold_dgram_sends(true);
    let f = frame(MAC_B, MAC_A, b"x");
    for _ in 0..TX_SLOTS {
        assert_eq!(send(&a.port, &f), TxOutcome::Sent);
    }
    assert_eq!(a.provider.held_dgram_sends(), TX_SLOTS);
    // Every slot in flight: the next frames are dropped and counted.
    assert_eq!(send(&a.port, &f), TxOutcome::NoResources);
    assert_eq!(send(&a.port, &f), TxOutcome::NoResources);
    assert_eq!(a.port.stats().tx_busy, 2);
    // Halt with every send in flight: the socket closes only once they
    // complete.
    a.port.halt();
    assert!(!a.port.is_closed());
    assert_eq!(
        send(&a.port, &f),
        TxOutcome::NoResources,
        "nothing after halt"
    );
    a.provider.hold_dgram_sends(false);
    halt(&a);
    assert_eq!(
        b.sink.wait_frames(TX_SLOTS).len(),
        TX_SLOTS,
        "{:?} {:?} {:?}",
        b.port.switch_stats(),
        b.port.stats(),
        a.port.switch_stats()
    );
    halt(&b);
}

#[test]
fn receive_buffers_held_up_the_stack_bound_what_is_indicated() {
    let a = machine("192.0.2.131", &["192.0.2.132"], 3);
    let b = machine("192.0.2.132", &["192.0.2.131"], 3);
    b.sink
        .keep
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let f = frame(MAC_B, MAC_A, b"y");
    let total = RX_BUFFERS + 4;
    for _ in 0..total {
        assert_eq!(send(&a.port, &f), TxOutcome::Sent);
        // One at a time, so that none is lost to the loopback socket.
        let start = Instant::now();
        while a.port.switch_stats().tx_frames > 0
            && b.port.stats().rx_indicated + b.port.stats().rx_no_buffer
                < a.port.switch_stats().tx_frames
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert_eq!(b.port.stats().rx_indicated, RX_BUFFERS as u64);
    assert_eq!(b.port.stats().rx_no_buffer, 4);
    assert_eq!(b.port.rx_outstanding(), RX_BUFFERS);
    // Returned (MiniportReturnNetBufferLists): usable again.
    for index in b.sink.kept.lock().unwrap().drain(..) {
        b.port.return_buffer(index);
    }
    assert_eq!(b.port.rx_outstanding(), 0);
    b.sink
        .keep
        .store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(send(&a.port, &f), TxOutcome::Sent);
    assert_eq!(b.sink.wait_frames(RX_BUFFERS + 1).len(), RX_BUFFERS + 1);
    halt(&a);
    halt(&b);
}

#[test]
fn no_peer_or_bad_length_is_refused_by_the_switch() {
    let a = machine("192.0.2.141", &[], 5);
    assert_eq!(
        send(&a.port, &frame(BROADCAST, MAC_A, b"z")),
        TxOutcome::Refused
    );
    assert_eq!(a.port.switch_stats().tx_drop_no_peers, 1);
    assert_eq!(a.port.transmit(|_| None), TxOutcome::Unreadable);
    assert_eq!(a.port.stats().tx_unreadable, 1);
    halt(&a);
    let b = machine("192.0.2.142", &["192.0.2.143"], 5);
    assert_eq!(send(&b.port, &[0; 10]), TxOutcome::Refused);
    assert_eq!(b.port.switch_stats().tx_drop_too_short, 1);
    halt(&b);
    let sink: Arc<dyn FrameSink> = Arc::new(Sink::default());
    assert_eq!(
        EtherPort::new(1500, 0x0100_0000, &[], 4789, sink.clone(), Box::new(|| 0)).err(),
        Some(PortError::BadVni)
    );
    let many: Vec<IpAddr> = (0..=MAX_PEERS)
        .map(|i| IpAddr::from([10, 0, 0, u8::try_from(i + 1).unwrap()]))
        .collect();
    assert_eq!(
        EtherPort::new(1500, 1, &many, 4789, sink, Box::new(|| 0)).err(),
        Some(PortError::Switch(ConfigError::TooManyPeers))
    );
}

fn utf16(text: &str) -> Vec<u16> {
    text.encode_utf16().collect()
}

#[test]
fn soft_ndk_peers_parses_ipv4_ipv6_and_separators_and_refuses_bad_entries() {
    let peers = parse_peers(&utf16(
        "192.0.2.1, 2001:db8::2;192.0.2.3 \t::ffff:192.0.2.4,,fe80::1",
    ));
    let want: Vec<IpAddr> = [
        "192.0.2.1",
        "2001:db8::2",
        "192.0.2.3",
        "192.0.2.4",
        "fe80::1",
    ]
    .iter()
    .map(|p| p.parse().unwrap())
    .collect();
    assert_eq!(peers.addrs(), want.as_slice());
    assert_eq!(peers.refused, 0);
    // Unparsable, unspecified, multicast, broadcast, a repeat (also as
    // IPv4-mapped), with a port, non-ASCII, too long: refused one by one.
    let bad = parse_peers(&utf16(
        "192.0.2.1,nonsense,0.0.0.0,::,224.0.0.1,ff02::1,255.255.255.255,192.0.2.1,\
         ::ffff:192.0.2.1,192.0.2.9:4789,19².0.2.1,1111:2222:3333:4444:5555:6666:7777:8888:9999,\
         10.0.0.1",
    ));
    let want: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap(), "10.0.0.1".parse().unwrap()];
    assert_eq!(bad.addrs(), want.as_slice());
    assert_eq!(bad.refused, 11);
    // Empty (the INF default) and a trailing NUL (REG_SZ as read).
    assert!(parse_peers(&[]).addrs().is_empty());
    let with_nul: Vec<u16> = utf16("192.0.2.1").into_iter().chain([0]).collect();
    assert_eq!(parse_peers(&with_nul).addrs().len(), 1);
    // At most MAX_PEERS; the rest refused.
    let list: Vec<String> = (1..=MAX_PEERS + 3).map(|i| format!("10.1.0.{i}")).collect();
    let capped = parse_peers(&utf16(&list.join(",")));
    assert_eq!(capped.addrs().len(), MAX_PEERS);
    assert_eq!(capped.refused, 3);
    let long = "1".repeat(200);
    assert_eq!(parse_peers(&utf16(&long)).refused, 1);
}

#[test]
fn soft_ndk_vni_range_and_default() {
    assert_eq!(DEFAULT_VNI, 1);
    assert_eq!(vni(None), DEFAULT_VNI);
    assert_eq!(vni(Some(0)), DEFAULT_VNI);
    assert_eq!(vni(Some(1)), 1);
    assert_eq!(vni(Some(0x00FF_FFFF)), 0x00FF_FFFF);
    assert_eq!(vni(Some(0x0100_0000)), DEFAULT_VNI);
}

fn oid_u64(adapter: &super::adapter::Adapter, oid: crate::abi::NdisOid) -> u64 {
    let mut buffer = [0_u8; 8];
    let outcome = super::oid::handle(
        adapter,
        super::oid::OidRequest::Query {
            oid,
            buffer: &mut buffer,
        },
    );
    assert_eq!(outcome.status, crate::abi::NDIS_STATUS_SUCCESS);
    if outcome.bytes_done == 4 {
        u64::from(u32::from_le_bytes(buffer[..4].try_into().unwrap()))
    } else {
        u64::from_le_bytes(buffer)
    }
}

/// Two miniport adapters, each with its port attached as initialise
/// attaches it: sends through `transmit_frame`, statistics OIDs and the
/// media state from the wire.
#[test]
fn two_miniport_adapters_exchange_frames_and_report_true_statistics() {
    use crate::abi::{
        NDIS_STATUS_PAUSED, NDIS_STATUS_RESOURCES, NDIS_STATUS_SUCCESS, NdisStatisticsInfo,
        OID_GEN_MEDIA_CONNECT_STATUS, OID_GEN_RCV_ERROR, OID_GEN_RCV_OK, OID_GEN_STATISTICS,
        OID_GEN_XMIT_ERROR, OID_GEN_XMIT_OK,
    };
    let a = machine("192.0.2.151", &["192.0.2.152"], 11);
    let b = machine("192.0.2.152", &["192.0.2.151"], 11);
    let (adapter_a, _fa) = super::testing::adapter_with(true);
    let (adapter_b, _fb) = super::testing::adapter_with(true);
    adapter_a.attach_ether(a.port.clone());
    adapter_b.attach_ether(b.port.clone());
    let f = frame(BROADCAST, MAC_A, b"arp");
    let copy = |buf: &mut [u8]| {
        buf.get_mut(..f.len())?.copy_from_slice(&f);
        Some(f.len())
    };
    assert_eq!(
        adapter_a.transmit_frame(Some(BROADCAST), f.len() as u64, copy),
        NDIS_STATUS_PAUSED
    );
    adapter_a.restart();
    adapter_b.restart();
    assert_eq!(
        adapter_a.transmit_frame(Some(BROADCAST), f.len() as u64, copy),
        NDIS_STATUS_SUCCESS
    );
    assert_eq!(b.sink.wait_frames(1), core::slice::from_ref(&f));
    assert_eq!(oid_u64(&adapter_a, OID_GEN_XMIT_OK), 1);
    assert_eq!(oid_u64(&adapter_b, OID_GEN_RCV_OK), 1);
    assert_eq!(oid_u64(&adapter_b, OID_GEN_RCV_ERROR), 0);
    let mut stats = [0_u8; 256];
    let outcome = super::oid::handle(
        &adapter_b,
        super::oid::OidRequest::Query {
            oid: OID_GEN_STATISTICS,
            buffer: &mut stats,
        },
    );
    assert_eq!(outcome.status, NDIS_STATUS_SUCCESS);
    for (offset, value) in [
        (offset_of!(NdisStatisticsInfo, if_hc_in_broadcast_pkts), 1),
        (
            offset_of!(NdisStatisticsInfo, if_hc_in_octets),
            f.len() as u64,
        ),
    ] {
        let at = u64::from_le_bytes(stats[offset..offset + 8].try_into().unwrap());
        assert_eq!(at, value, "at {offset:#x}");
    }
    // Back-pressure shows as NDIS_STATUS_RESOURCES and a transmit error.
    a.provider.hold_dgram_sends(true);
    for _ in 0..TX_SLOTS {
        assert_eq!(
            adapter_a.transmit_frame(Some(BROADCAST), f.len() as u64, copy),
            NDIS_STATUS_SUCCESS
        );
    }
    assert_eq!(
        adapter_a.transmit_frame(Some(BROADCAST), f.len() as u64, copy),
        NDIS_STATUS_RESOURCES
    );
    assert_eq!(oid_u64(&adapter_a, OID_GEN_XMIT_ERROR), 1);
    a.provider.hold_dgram_sends(false);
    // Connected while bound; disconnected after halt.
    assert_eq!(oid_u64(&adapter_a, OID_GEN_MEDIA_CONNECT_STATUS), 0);
    halt(&a);
    assert_eq!(oid_u64(&adapter_a, OID_GEN_MEDIA_CONNECT_STATUS), 1);
    halt(&b);
}
