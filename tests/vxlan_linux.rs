//! The virtual Ethernet's frame logic (`rnic::ether`) against the Linux
//! kernel's own `vxlan` device, over IPv4 and over IPv6 underlays.
//!
//! Each test builds, in two network namespaces of its own:
//!
//! ```text
//!  namespace A                                namespace B
//!  tap0  192.168.77.1/24 fd77::1/64           vx0  192.168.77.2/24 fd77::2/64
//!   │ (TAP fd)                                 │ (Linux vxlan, VNI 4242, dstport 4789)
//!  harness: rnic::ether::Switch                │
//!   │ (UDP socket on the underlay, port 4789)  │
//!  va0  10.77.0.1/24 | fd10:77::1/64  ═veth═  vb0  10.77.0.2/24 | fd10:77::2/64
//! ```
//!
//! then pings over the overlay both ways, IPv4 and IPv6, and checks what each
//! side learned. Nothing leaves the namespaces; a guard deletes them however
//! the test ends. It needs root, `ip` and `bridge` (iproute2), `ping` (iputils-ping) and
//! `/dev/net/tun`, and fails with a message saying so when one is missing.

#![cfg(target_os = "linux")]

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use softndk::kernel::host_tap::{Tap, enter_netns};
use softndk::rnic::ether::vxlan::{self, UDP_PORT};
use softndk::rnic::ether::{Config, MacAddr, ReservedBits, Stats, Switch, Vni};

const VNI: u32 = 4242;
/// Overlay MTU on both ends: fits the VXLAN overhead over an IPv6 underlay
/// on a 1500-byte veth.
const MTU: u16 = 1400;
/// How long a bridge thread runs at most, whatever happens.
const BRIDGE_LIMIT: Duration = Duration::from_mins(2);
/// How long one wait of a bridge thread lasts before it checks its stop flag.
const POLL: Duration = Duration::from_millis(50);

fn fail_unless_able() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?");
    assert!(
        euid == "0",
        "vxlan_linux needs root (network namespaces, TAP, vxlan); effective uid is {euid}. \
         CI runs it as root."
    );
    for (tool, arg, package) in [
        ("ip", "-V", "iproute2"),
        ("bridge", "-V", "iproute2"),
        ("ping", "-V", "iputils-ping"),
    ] {
        let ok = Command::new(tool)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "vxlan_linux needs `{tool}` (Debian package {package}); .ci/run installs it"
        );
    }
    assert!(
        Path::new("/dev/net/tun").exists(),
        "vxlan_linux needs /dev/net/tun (the tun module)"
    );
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

fn describe(args: &[&str], out: &Output) -> String {
    format!(
        "{args:?}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `ip` with `args`; panics with its output unless it succeeds.
fn ip(args: &[&str]) -> String {
    let out = run("ip", args);
    assert!(out.status.success(), "ip {}", describe(args, &out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two namespaces with names no other run or test uses; deleted on drop,
/// including when the test panics.
struct Namespaces {
    a: String,
    b: String,
    made: Vec<String>,
}

impl Namespaces {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let mut ns = Self {
            a: format!("sndk-vx{tag}-a-{pid}-{n}"),
            b: format!("sndk-vx{tag}-b-{pid}-{n}"),
            made: Vec::new(),
        };
        for name in [ns.a.clone(), ns.b.clone()] {
            ip(&["netns", "add", &name]);
            ns.made.push(name);
        }
        ns
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.made {
            let out = run("ip", &["netns", "del", name]);
            if !out.status.success() {
                eprintln!("cleanup: {}", describe(&["netns", "del", name], &out));
            }
        }
    }
}

/// The harness: a TAP device in namespace A bridged through a [`Switch`] to
/// a UDP socket on A's underlay address. Two threads, each bounded by a stop
/// flag and [`BRIDGE_LIMIT`]; stopped and joined on drop.
struct Bridge {
    switch: Arc<Mutex<Switch>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    start: Instant,
    tap: Arc<Tap>,
}

impl Bridge {
    fn start(netns: &str, local: IpAddr, peer: IpAddr) -> Self {
        let path = Path::new("/var/run/netns").join(netns);
        let bind = SocketAddr::new(local, UDP_PORT);
        // A thread of its own enters the namespace, so that the TAP device
        // and the socket are created there; the test thread stays put.
        let opened = std::thread::spawn(move || -> std::io::Result<(Tap, UdpSocket)> {
            enter_netns(&path)?;
            let tap = Tap::open("tap0")?;
            let socket = UdpSocket::bind(bind)?;
            Ok((tap, socket))
        })
        .join()
        .expect("the opening thread");
        let (tap, socket) = opened.expect("TAP device and UDP socket in namespace A");
        socket.set_read_timeout(Some(POLL)).expect("read timeout");
        let config = Config {
            vni: Vni::new(VNI).expect("24-bit VNI"),
            port: UDP_PORT,
            mtu: MTU,
            table_capacity: 64,
            max_age: 300_000,
            reserved_bits: ReservedBits::Refuse,
        };
        let switch = Arc::new(Mutex::new(
            Switch::new(config, &[peer]).expect("switch config"),
        ));
        let tap = Arc::new(tap);
        let socket = Arc::new(socket);
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let running = {
            let stop = Arc::clone(&stop);
            move || !stop.load(Ordering::Relaxed) && start.elapsed() < BRIDGE_LIMIT
        };
        let clock = move || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);

        let outbound = {
            let (switch, tap, socket, running) = (
                Arc::clone(&switch),
                Arc::clone(&tap),
                Arc::clone(&socket),
                running.clone(),
            );
            let peers: Vec<SocketAddr> = switch
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .peers()
                .iter()
                .map(|ip| SocketAddr::new(*ip, UDP_PORT))
                .collect();
            std::thread::spawn(move || {
                let mut frame = vec![0u8; 2048];
                let mut datagram = vec![0u8; 2048 + vxlan::HEADER_LEN];
                while running() {
                    let Ok(Some(len)) = tap.recv(&mut frame, POLL) else {
                        continue;
                    };
                    // Decide under the lock, send after it: a flood goes to
                    // the fixed peer list, copied once before the loop.
                    let sent = switch
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .transmit(&frame[..len], clock(), &mut datagram)
                        .map(|t| (t.len, t.targets.unicast()));
                    let Ok((len, unicast)) = sent else {
                        continue;
                    };
                    let targets = unicast.as_ref().map_or(&peers[..], std::slice::from_ref);
                    for to in targets {
                        let _ = socket.send_to(&datagram[..len], to);
                    }
                }
            })
        };
        let inbound = {
            let (switch, tap, socket) = (Arc::clone(&switch), Arc::clone(&tap), socket);
            std::thread::spawn(move || {
                let mut datagram = vec![0u8; 2048 + vxlan::HEADER_LEN];
                while running() {
                    let Ok((len, from)) = socket.recv_from(&mut datagram) else {
                        continue;
                    };
                    let received = switch
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .receive(from.ip(), &datagram[..len], clock());
                    if let Ok(frame) = received {
                        let _ = tap.send(frame);
                    }
                }
            })
        };
        Self {
            switch,
            stop,
            threads: vec![outbound, inbound],
            start,
            tap,
        }
    }

    fn stats(&self) -> Stats {
        *self
            .switch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stats()
    }

    fn learned(&self, mac: MacAddr) -> Option<IpAddr> {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.switch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lookup(mac, now)
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                eprintln!("a bridge thread panicked");
            }
        }
    }
}

fn parse_mac(text: &str) -> MacAddr {
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = text.trim().split(':').collect();
    assert_eq!(parts.len(), 6, "a MAC address: {text:?}");
    for (byte, part) in mac.iter_mut().zip(parts) {
        *byte = u8::from_str_radix(part, 16).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
    MacAddr(mac)
}

fn mac_of(netns: &str, dev: &str) -> MacAddr {
    let out = run(
        "ip",
        &[
            "netns",
            "exec",
            netns,
            "cat",
            &format!("/sys/class/net/{dev}/address"),
        ],
    );
    assert!(out.status.success(), "{}", describe(&[netns, dev], &out));
    parse_mac(&String::from_utf8_lossy(&out.stdout))
}

fn ping(netns: &str, target: &str) {
    // -c 3 replies wanted, -W 2 s per reply, -w 15 s overall: bounded.
    let args = [
        "netns", "exec", netns, "ping", "-c", "3", "-W", "2", "-w", "15", target,
    ];
    let out = run("ip", &args);
    assert!(
        out.status.success(),
        "ping failed: {}",
        describe(&args, &out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 received"),
        "three replies wanted: {}",
        describe(&args, &out)
    );
}

/// The underlay addresses of one test (A's, B's, prefix length, `nodad`).
struct Underlay {
    a: &'static str,
    b: &'static str,
    prefix: &'static str,
    v6: bool,
}

fn pings_both_ways(tag: &str, underlay: &Underlay) {
    fail_unless_able();
    let ns = Namespaces::new(tag);
    let (a, b) = (ns.a.as_str(), ns.b.as_str());
    let nodad: &[&str] = if underlay.v6 { &["nodad"] } else { &[] };
    let with = |args: &[&str], extra: &[&str]| {
        let all: Vec<&str> = args.iter().chain(extra).copied().collect();
        ip(&all);
    };

    // Underlay: a veth pair between the namespaces.
    ip(&["-n", a, "link", "set", "lo", "up"]);
    ip(&["-n", b, "link", "set", "lo", "up"]);
    ip(&[
        "-n", a, "link", "add", "va0", "type", "veth", "peer", "name", "vb0", "netns", b,
    ]);
    let addr_a = format!("{}/{}", underlay.a, underlay.prefix);
    let addr_b = format!("{}/{}", underlay.b, underlay.prefix);
    with(&["-n", a, "addr", "add", &addr_a, "dev", "va0"], nodad);
    with(&["-n", b, "addr", "add", &addr_b, "dev", "vb0"], nodad);
    ip(&["-n", a, "link", "set", "va0", "up"]);
    ip(&["-n", b, "link", "set", "vb0", "up"]);

    // A: the harness, its TAP device and overlay addresses.
    let local: IpAddr = underlay.a.parse().expect("underlay address");
    let peer: IpAddr = underlay.b.parse().expect("underlay address");
    let bridge = Bridge::start(a, local, peer);
    assert_eq!(bridge.tap.name(), "tap0");
    let mtu = MTU.to_string();
    ip(&["-n", a, "link", "set", "tap0", "mtu", &mtu, "up"]);
    ip(&["-n", a, "addr", "add", "192.168.77.1/24", "dev", "tap0"]);
    ip(&["-n", a, "addr", "add", "fd77::1/64", "dev", "tap0", "nodad"]);

    // B: Linux's vxlan device towards A.
    let vni = VNI.to_string();
    let port = UDP_PORT.to_string();
    ip(&[
        "-n", b, "link", "add", "vx0", "type", "vxlan", "id", &vni, "remote", underlay.a, "local",
        underlay.b, "dstport", &port, "dev", "vb0",
    ]);
    ip(&["-n", b, "link", "set", "vx0", "mtu", &mtu, "up"]);
    ip(&["-n", b, "addr", "add", "192.168.77.2/24", "dev", "vx0"]);
    ip(&["-n", b, "addr", "add", "fd77::2/64", "dev", "vx0", "nodad"]);

    ping(b, "192.168.77.1");
    ping(b, "fd77::1");
    ping(a, "192.168.77.2");
    ping(a, "fd77::2");

    // The harness learned vx0's address behind B, and Linux learned tap0's
    // behind A.
    let vx0 = mac_of(b, "vx0");
    let tap0 = mac_of(a, "tap0");
    assert_eq!(bridge.learned(vx0), Some(peer));
    let fdb = ip(&["netns", "exec", b, "bridge", "fdb", "show", "dev", "vx0"]);
    let tap0_text = tap0
        .0
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    assert!(
        fdb.lines()
            .any(|l| l.starts_with(&tap0_text) && l.contains(&format!("dst {}", underlay.a))),
        "Linux's fdb should hold {tap0_text} behind {}: {fdb}",
        underlay.a
    );

    let stats = bridge.stats();
    assert!(stats.rx_frames >= 12, "{stats:?}");
    assert!(stats.tx_frames >= 12, "{stats:?}");
    assert!(
        stats.tx_unicast >= 1,
        "replies go to the learned peer: {stats:?}"
    );
    assert!(
        stats.tx_flooded >= 1,
        "ARP / ND requests are flooded: {stats:?}"
    );
    assert_eq!(
        stats.rx_dropped(),
        0,
        "Linux's datagrams all pass: {stats:?}"
    );
    assert_eq!(stats.tx_dropped(), 0, "{stats:?}");
    // The bridge goes first (its sockets hold namespace A), then the
    // namespaces; both on panic too, in that order.
    drop(bridge);
    drop(ns);
}

#[test]
fn test_linux_vxlan_pings_both_ways_over_ipv4_underlay() {
    pings_both_ways(
        "4",
        &Underlay {
            a: "10.77.0.1",
            b: "10.77.0.2",
            prefix: "24",
            v6: false,
        },
    );
}

#[test]
fn test_linux_vxlan_pings_both_ways_over_ipv6_underlay() {
    pings_both_ways(
        "6",
        &Underlay {
            a: "fd10:77::1",
            b: "fd10:77::2",
            prefix: "64",
            v6: true,
        },
    );
}
