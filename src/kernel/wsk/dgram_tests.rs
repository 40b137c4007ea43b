//! The datagram glue ([`super::dgram`]) against the tests' WSK provider:
//! two "machines" (providers) with their own virtual addresses exchange
//! datagrams over loopback UDP.

use super::dgram::{DatagramEvents, MAX_SLOTS, WskDatagram};
use super::fake::Provider;
use super::*;
use crate::abi::STATUS_ADDRESS_ALREADY_EXISTS;
use crate::kernel::testing::waited;
use alloc::vec::Vec;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Inbox {
    ready: Mutex<Vec<Result<(), NtStatus>>>,
    got: Mutex<Vec<(SocketAddr, Vec<u8>)>>,
}

impl DatagramEvents for Inbox {
    fn ready(&self, result: Result<(), NtStatus>) {
        self.ready.lock().unwrap().push(result);
    }
    fn received(&self, from: SocketAddr, datagram: &super::Datagram<'_>) {
        let mut out = alloc::vec![0_u8; 2048];
        let n = datagram.copy_to(&mut out).expect("fits");
        assert_eq!(n, datagram.len());
        out.truncate(n);
        self.got.lock().unwrap().push((from, out));
    }
}

impl Inbox {
    fn wait_for(&self, count: usize) -> Vec<(SocketAddr, Vec<u8>)> {
        waited(|| self.got.lock().unwrap().len() >= count);
        self.got.lock().unwrap().clone()
    }
}

fn machine(ip: &str) -> (&'static Provider, Arc<WskClient>) {
    let provider = Provider::new(7);
    provider.set_dgram_addrs(&[ip.parse().unwrap()]);
    (provider, provider.client())
}

fn wait_closed(socket: &WskDatagram) {
    let start = Instant::now();
    while !socket.is_closed() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(socket.is_closed());
}

fn open(client: &Arc<WskClient>, local: &str, slots: usize) -> (Arc<WskDatagram>, Arc<Inbox>) {
    let inbox = Arc::new(Inbox::default());
    let socket =
        WskDatagram::open(client, local.parse().unwrap(), slots, 1500, inbox.clone()).unwrap();
    assert_eq!(*inbox.ready.lock().unwrap(), [Ok(())]);
    assert!(socket.is_open());
    (socket, inbox)
}

fn send(socket: &WskDatagram, to: &str, bytes: &[u8]) -> bool {
    let Some(mut slot) = socket.slot() else {
        return false;
    };
    slot.buffer()[..bytes.len()].copy_from_slice(bytes);
    slot.send(to.parse().unwrap(), bytes.len());
    true
}

#[test]
fn two_machines_exchange_datagrams_both_ways_ipv4_and_ipv6() {
    for (a_ip, b_ip, any, a_at, b_at) in [
        (
            "192.0.2.11",
            "192.0.2.12",
            "0.0.0.0:4789",
            "192.0.2.11:4789",
            "192.0.2.12:4789",
        ),
        (
            "2001:db8::11",
            "2001:db8::12",
            "[::]:4789",
            "[2001:db8::11]:4789",
            "[2001:db8::12]:4789",
        ),
    ] {
        let (_pa, ca) = machine(a_ip);
        let (_pb, cb) = machine(b_ip);
        let (a, a_in) = open(&ca, any, 4);
        let (b, b_in) = open(&cb, any, 4);
        assert!(send(&a, b_at, b"hello from a"));
        // A datagram longer than an MDL piece and than one indication piece.
        let long: Vec<u8> = (0..1400_u32).map(|i| i as u8).collect();
        assert!(send(&b, a_at, &long));
        let at_b = b_in.wait_for(1);
        assert_eq!(at_b, [(a_at.parse().unwrap(), b"hello from a".to_vec())]);
        let at_a = a_in.wait_for(1);
        assert_eq!(at_a, [(b_at.parse().unwrap(), long)]);
        assert_eq!(a.stats().sent, 1);
        assert_eq!(a.busy_slots(), 0);
        a.close();
        b.close();
        wait_closed(&a);
        wait_closed(&b);
        assert_eq!(ca.sockets(), 0);
        assert_eq!(cb.sockets(), 0);
    }
}

#[test]
fn every_slot_busy_drops_and_counts_and_close_waits_for_sends_in_flight() {
    let (pa, ca) = machine("192.0.2.21");
    let (_pb, cb) = machine("192.0.2.22");
    let (a, _a_in) = open(&ca, "0.0.0.0:4789", 3);
    let (b, b_in) = open(&cb, "0.0.0.0:4789", 3);
    pa.hold_dgram_sends(true);
    for i in 0..3_u8 {
        assert!(send(&a, "192.0.2.22:4789", &[i; 20]));
    }
    assert_eq!(pa.held_dgram_sends(), 3);
    assert_eq!(a.busy_slots(), 3);
    // Every slot is in flight: no fourth, counted.
    assert!(!send(&a, "192.0.2.22:4789", &[9; 20]));
    assert!(!send(&a, "192.0.2.22:4789", &[9; 20]));
    assert_eq!(a.stats().busy, 2);
    // Released: delivered in order, slots free again.
    pa.hold_dgram_sends(false);
    let got = b_in.wait_for(3);
    assert_eq!(got.len(), 3);
    for (i, (_, bytes)) in got.iter().enumerate() {
        assert_eq!(bytes, &alloc::vec![u8::try_from(i).unwrap(); 20]);
    }
    assert_eq!(a.busy_slots(), 0);
    assert_eq!(a.stats().sent, 3);
    // Close with two sends in flight: it waits for them; the provider
    // cancels nothing it has not been asked to close.
    pa.hold_dgram_sends(true);
    assert!(send(&a, "192.0.2.22:4789", &[1; 20]));
    assert!(send(&a, "192.0.2.22:4789", &[2; 20]));
    a.close();
    assert!(!a.is_open());
    assert!(!a.is_closed(), "close waits for the sends in flight");
    assert!(a.slot().is_none(), "no slot once closing");
    pa.hold_dgram_sends(false);
    wait_closed(&a);
    assert_eq!(a.busy_slots(), 0);
    assert_eq!(ca.sockets(), 0);
    b.close();
    wait_closed(&b);
}

#[test]
fn a_slot_taken_and_not_sent_is_given_back_and_a_busy_port_fails_setup() {
    let (_pa, ca) = machine("192.0.2.31");
    let (a, _in) = open(&ca, "0.0.0.0:4789", MAX_SLOTS);
    let slots: Vec<_> = (0..MAX_SLOTS).map(|_| a.slot().unwrap()).collect();
    assert!(a.slot().is_none());
    a.close();
    assert!(!a.is_closed(), "close waits for the slots taken");
    drop(slots);
    wait_closed(&a);
    // The port is free again once closed; a second socket on a bound port
    // reports the provider's status and leaves nothing open.
    let (a2, _in2) = open(&ca, "0.0.0.0:4789", 2);
    let inbox = Arc::new(Inbox::default());
    let clash = WskDatagram::open(
        &ca,
        "192.0.2.31:4789".parse().unwrap(),
        2,
        100,
        inbox.clone(),
    )
    .unwrap();
    assert_eq!(
        *inbox.ready.lock().unwrap(),
        [Err(STATUS_ADDRESS_ALREADY_EXISTS)]
    );
    wait_closed(&clash);
    a2.close();
    wait_closed(&a2);
    assert_eq!(ca.sockets(), 0);
    assert!(WskDatagram::open(&ca, "0.0.0.0:1".parse().unwrap(), 0, 100, inbox.clone()).is_err());
    assert!(
        WskDatagram::open(&ca, "0.0.0.0:1".parse().unwrap(), MAX_SLOTS + 1, 100, inbox).is_err()
    );
}

struct Small(Mutex<Vec<Option<usize>>>);
impl DatagramEvents for Small {
    fn ready(&self, _: Result<(), NtStatus>) {}
    fn received(&self, _: SocketAddr, datagram: &super::Datagram<'_>) {
        let mut out = [0_u8; 8];
        self.0.lock().unwrap().push(datagram.copy_to(&mut out));
    }
}
#[test]
fn a_datagram_too_long_for_the_callers_buffer_is_refused_by_copy_to() {
    let (_pa, ca) = machine("192.0.2.41");
    let small = Arc::new(Small(Mutex::new(Vec::new())));
    let a = WskDatagram::open(&ca, "0.0.0.0:4789".parse().unwrap(), 1, 64, small.clone()).unwrap();
    let plain = Provider::dgram_plain("192.0.2.42:4789".parse().unwrap());
    let real = Provider::dgram_real("192.0.2.41:4789".parse().unwrap()).unwrap();
    plain.send_to(&[1; 8], real).unwrap();
    plain.send_to(&[1; 9], real).unwrap();
    waited(|| small.0.lock().unwrap().len() >= 2);
    assert_eq!(*small.0.lock().unwrap(), [Some(8), None]);
    a.close();
    wait_closed(&a);
}
