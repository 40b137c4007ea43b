//! The frame path's NDIS bookkeeping ([`super::frames`]) with a table
//! playing NDIS's NBLs: a datagram received becomes an NBL indicated with
//! the frame's bytes and length, its return gives the buffer back to the
//! port; pause with NBLs out pends until the last return; halt with NBLs
//! out indicates nothing more; a low pool indicates with
//! `NDIS_RECEIVE_FLAGS_RESOURCES` and takes the buffer back at once; the
//! port starts on a tick once WSK is up; the link is indicated only once
//! initialise is done and never after halt.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::{Duration, Instant};

use super::ether::{EtherPort, FrameSink, RX_BUFFERS, TxOutcome};
use super::ether_tests::received;
use super::frames::{FramePath, NblOps, PathConfig, RX_LOW_WATER, TICK_MS};
use crate::abi::{NtStatus, STATUS_DEVICE_NOT_READY};
use crate::kernel::sync::atomic::Ordering;
use crate::kernel::testing::waited;
use crate::kernel::timers::PlayedClock;
use crate::kernel::wsk::fake::Provider;
use crate::kernel::wsk::{WskClient, WskSource};

/// One indication as NDIS saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Indication {
    index: usize,
    bytes: Vec<u8>,
    resources: bool,
}

/// NDIS, played: records indications (copying the frame out of the NBL's
/// buffer, as a protocol would), link indications and pause completions.
#[derive(Default)]
struct Table {
    port: Mutex<Option<std::sync::Weak<EtherPort>>>,
    indications: Mutex<Vec<Indication>>,
    links: Mutex<Vec<bool>>,
    pause_completes: AtomicUsize,
}

impl NblOps for Table {
    fn indicate(&self, index: usize, offset: usize, len: usize, resources: bool) {
        let (_, bytes) = received(&self.port, index, offset, len);
        self.indications.lock().unwrap().push(Indication {
            index,
            bytes,
            resources,
        });
    }
    fn link(&self, up: bool) {
        self.links.lock().unwrap().push(up);
    }
    fn pause_complete(&self) {
        self.pause_completes.fetch_add(1, Ordering::Relaxed);
    }
}

impl Table {
    fn wait(&self, count: usize) -> Vec<Indication> {
        let start = Instant::now();
        while self.indications.lock().unwrap().len() < count
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.indications.lock().unwrap().clone()
    }
    fn links(&self) -> Vec<bool> {
        self.links.lock().unwrap().clone()
    }
}

/// WSK, up or not yet.
struct Source {
    provider: &'static Provider,
    up: AtomicBool,
}

impl WskSource for Source {
    fn capture(&self) -> Result<Arc<WskClient>, NtStatus> {
        if self.up.load(Ordering::Acquire) {
            Ok(self.provider.client())
        } else {
            Err(STATUS_DEVICE_NOT_READY)
        }
    }
}

/// The adapter under test: a frame path over the tests' WSK provider.
struct Adapter {
    provider: &'static Provider,
    clock: Arc<PlayedClock>,
    path: FramePath,
    table: Arc<Table>,
    source: Arc<Source>,
}

fn adapter(me: &str, peer: &str, wsk_up: bool) -> Adapter {
    let provider = Provider::new(7);
    provider.set_dgram_addrs(&[me.parse().unwrap()]);
    let clock = PlayedClock::new(1_000);
    let source = Arc::new(Source {
        provider,
        up: AtomicBool::new(wsk_up),
    });
    let peers: Vec<IpAddr> = vec![peer.parse().unwrap()];
    let config = PathConfig {
        mtu: 1500,
        vni: 9,
        peers: &peers,
        udp_port: 4789,
        told_up: false,
    };
    let path = FramePath::new(&config, clock.timers(), source.clone()).unwrap();
    let table = Arc::new(Table::default());
    *table.port.lock().unwrap() = Some(Arc::downgrade(path.port()));
    path.receiver().bind(table.clone());
    Adapter {
        provider,
        clock,
        path,
        table,
        source,
    }
}

/// The far machine: a bare port whose sink gives every buffer back.
struct Far {
    provider: &'static Provider,
    port: Arc<EtherPort>,
}

struct Discard(Mutex<Option<std::sync::Weak<EtherPort>>>);

impl FrameSink for Discard {
    fn indicate(&self, index: usize, _offset: usize, _len: usize) {
        if let Some(port) = self.0.lock().unwrap().clone().and_then(|w| w.upgrade()) {
            port.return_buffer(index);
        }
    }
    fn link(&self, _up: bool) {}
}

fn far(me: &str, peer: &str) -> Far {
    let provider = Provider::new(7);
    provider.set_dgram_addrs(&[me.parse().unwrap()]);
    let sink = Arc::new(Discard(Mutex::new(None)));
    let peers: Vec<IpAddr> = vec![peer.parse().unwrap()];
    let port = EtherPort::new(1500, 9, &peers, 4789, sink.clone(), Box::new(|| 0)).unwrap();
    *sink.0.lock().unwrap() = Some(Arc::downgrade(&port));
    port.start(&provider.client()).unwrap();
    Far { provider, port }
}

fn frame(n: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0xFF; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xB]);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend((0..len).map(|i| n.wrapping_add(u8::try_from(i % 256).unwrap())));
    f
}

fn send(port: &EtherPort, bytes: &[u8]) {
    let outcome = port.transmit(|buf| {
        buf.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(bytes.len())
    });
    assert_eq!(outcome, TxOutcome::Sent);
}

/// Our adapter at 192.0.2.`host`1 and a far port at 192.0.2.`host`2, each
/// the other's peer; WSK is up for ours when `wsk_up`.
fn linked(host: u8, wsk_up: bool) -> (Adapter, Far) {
    let (ours, theirs) = (format!("192.0.2.{host}1"), format!("192.0.2.{host}2"));
    (adapter(&ours, &theirs, wsk_up), far(&theirs, &ours))
}

/// [`linked`] with WSK up, our path started and its receiver running.
fn receiving(host: u8) -> (Adapter, Far) {
    let (a, b) = linked(host, true);
    a.path.go();
    a.path.receiver().restart();
    (a, b)
}

/// Sends frames `numbers`, each of `len` bytes (see [`frame`]).
fn send_frames(port: &EtherPort, numbers: impl IntoIterator<Item = u8>, len: usize) {
    for n in numbers {
        send(port, &frame(n, len));
    }
}

fn halt_all(a: &Adapter, b: &Far) {
    a.path.halt();
    b.port.halt();
    assert!(waited(|| a.path.port().is_closed() && b.port.is_closed()));
    assert_eq!(a.provider.client().sockets(), 0);
    assert_eq!(b.provider.client().sockets(), 0);
}

#[test]
fn a_received_datagram_is_an_nbl_with_its_bytes_and_its_return_frees_the_buffer() {
    let (a, b) = linked(20, true);
    a.path.go();
    assert!(a.path.started());
    assert_eq!(a.table.links(), [true], "link up once the socket is bound");
    // Paused (NDIS has not restarted the adapter yet): nothing indicated,
    // the buffer straight back.
    send(&b.port, &frame(1, 60));
    assert!(waited(|| a.path.receiver().stats().not_running == 1));
    assert_eq!(a.path.port().rx_outstanding(), 0);
    assert!(a.table.indications.lock().unwrap().is_empty());
    a.path.receiver().restart();
    let sent = frame(2, 1000);
    send(&b.port, &sent);
    let seen = a.table.wait(1);
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].bytes, sent,
        "the NBL carries the frame, length and bytes"
    );
    assert!(!seen[0].resources);
    assert_eq!(a.path.port().rx_outstanding(), 1, "the buffer is NDIS's");
    assert_eq!(a.path.receiver().outstanding(), 1);
    a.path.receiver().returned(seen[0].index);
    assert_eq!(a.path.port().rx_outstanding(), 0, "returned to the port");
    assert_eq!(a.path.receiver().outstanding(), 0);
    // A second return of the same NBL is ignored, not a double free.
    a.path.receiver().returned(seen[0].index);
    assert_eq!(a.path.receiver().stats().stray_returns, 1);
    assert_eq!(a.path.port().rx_outstanding(), 0);
    halt_all(&a, &b);
}

#[test]
fn pause_with_nbls_out_pends_until_the_last_return_and_indicates_nothing() {
    let (a, b) = receiving(21);
    send_frames(&b.port, 1..=2, 100);
    let out = a.table.wait(2);
    assert_eq!(out.len(), 2);
    assert!(!a.path.receiver().pause(), "two NBLs up: the pause pends");
    assert!(a.path.receiver().pause_pending());
    // Paused: a frame arriving now is not indicated and its buffer is back.
    send(&b.port, &frame(3, 100));
    assert!(waited(|| a.path.receiver().stats().not_running == 1));
    assert_eq!(a.table.indications.lock().unwrap().len(), 2);
    assert_eq!(a.path.port().rx_outstanding(), 2);
    a.path.receiver().returned(out[0].index);
    assert_eq!(a.table.pause_completes.load(Ordering::Relaxed), 0);
    a.path.receiver().returned(out[1].index);
    assert_eq!(
        a.table.pause_completes.load(Ordering::Relaxed),
        1,
        "the last return completes the pause"
    );
    assert!(!a.path.receiver().pause_pending());
    assert_eq!(a.path.port().rx_outstanding(), 0);
    // A pause with nothing out completes at once; restart resumes.
    assert!(a.path.receiver().pause());
    a.path.receiver().restart();
    send(&b.port, &frame(4, 100));
    assert_eq!(a.table.wait(3).len(), 3);
    a.path.receiver().returned(a.table.wait(3)[2].index);
    assert_eq!(a.table.pause_completes.load(Ordering::Relaxed), 1);
    halt_all(&a, &b);
}

#[test]
fn halt_with_nbls_out_reports_them_and_indicates_nothing_more() {
    let (a, b) = receiving(22);
    send_frames(&b.port, 1..=2, 100);
    assert_eq!(a.table.wait(2).len(), 2);
    assert_eq!(
        a.path.halt(),
        2,
        "halt reports the NBLs NDIS did not return"
    );
    assert!(waited(|| a.path.port().is_closed()));
    // The link went down with the port, but NDIS is not told after halt.
    assert!(!a.path.port().link_up());
    assert_eq!(a.table.links(), [true]);
    assert_eq!(a.table.indications.lock().unwrap().len(), 2);
    b.port.halt();
    assert!(waited(|| b.port.is_closed()));
    assert_eq!(a.provider.client().sockets(), 0);
}

#[test]
fn a_low_pool_indicates_with_resources_and_takes_the_buffer_back_at_once() {
    let (a, b) = receiving(23);
    // Keep every NBL: the pool runs low. The frame that leaves fewer than
    // RX_LOW_WATER buffers free goes up with RESOURCES.
    let kept = RX_BUFFERS - RX_LOW_WATER;
    let total = kept + 2;
    for n in 0..total {
        send(&b.port, &frame(u8::try_from(n).unwrap(), 64));
        // One at a time, so that none is dropped for want of a send slot.
        assert!(waited(|| a.table.indications.lock().unwrap().len() > n));
    }
    let seen = a.table.wait(total);
    assert_eq!(seen.len(), total);
    for (n, indication) in seen.iter().enumerate() {
        assert_eq!(indication.bytes, frame(u8::try_from(n).unwrap(), 64));
        assert_eq!(indication.resources, n >= kept, "indication {n}");
    }
    assert_eq!(a.path.receiver().stats().resources, 2);
    assert_eq!(
        a.path.port().rx_outstanding(),
        kept,
        "RESOURCES buffers are back"
    );
    assert_eq!(a.path.receiver().outstanding(), kept);
    for indication in seen.iter().take(kept) {
        a.path.receiver().returned(indication.index);
    }
    assert_eq!(a.path.port().rx_outstanding(), 0);
    halt_all(&a, &b);
}

#[test]
fn the_port_starts_on_a_tick_once_wsk_is_up_and_the_tick_rearms() {
    let (a, b) = linked(24, false);
    a.path.go();
    assert!(!a.path.started(), "WSK not up: initialise does not wait");
    assert!(a.table.links().is_empty());
    a.clock.advance(TICK_MS);
    assert!(!a.path.started());
    a.source.up.store(true, Ordering::Release);
    a.clock.advance(TICK_MS);
    assert!(a.path.started(), "the next tick starts the port");
    assert_eq!(a.table.links(), [true]);
    a.path.receiver().restart();
    send(&b.port, &frame(1, 100));
    let seen = a.table.wait(1);
    assert_eq!(seen.len(), 1);
    a.path.receiver().returned(seen[0].index);
    // The tick re-arms itself, one period on.
    assert_eq!(a.clock.last_set(), Some(a.clock.now() + TICK_MS));
    a.clock.advance(TICK_MS);
    assert_eq!(a.clock.last_set(), Some(a.clock.now() + TICK_MS));
    halt_all(&a, &b);
}

#[test]
fn the_link_is_told_only_after_initialise() {
    let (a, b) = linked(25, true);
    // The port comes up before initialise is done (the socket binds at
    // once here): NDIS is told only then.
    a.path.port().start(&a.provider.client()).unwrap();
    assert!(a.path.port().link_up());
    assert!(a.table.links().is_empty());
    a.path.receiver().set_ready();
    assert_eq!(a.table.links(), [true]);
    halt_all(&a, &b);
}
