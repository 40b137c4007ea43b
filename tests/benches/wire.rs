//! Benchmark of the iWARP wire (issue 8): RDMA Write, Read and Send
//! bandwidth between two devices connected through `Conn` over
//! `kernel::net::TcpByteStream` on 127.0.0.1, beside plain TCP throughput
//! between two std sockets measured in the same run.
//!
//! For each message size (64 KiB, 1 MiB, 8 MiB):
//!
//! * **write**: A keeps `depth` Writes into B's region outstanding; the
//!   clock stops once a Send posted after the last Write has been received
//!   by B (so every Write has been placed, not just taken by the stream);
//! * **read**: A keeps `depth` Reads of B's region outstanding (the ORD);
//! * **send**: B keeps `depth` receives posted, A keeps a Send for each;
//!
//! each on a connection that negotiated CRC32c and on one that did not; and
//!
//! * **tcp**: one thread writes messages of the size into a socket as fast
//!   as it can, another reads them from its peer socket (both `TCP_NODELAY`,
//!   as `TcpByteStream` sets it); run before and after the size's other
//!   cases, and the better of the two is the reference.
//!
//! Each case is warmed up, then run for a fixed time; the table reports the
//! bytes delivered per second (GB/s, 10^9 bytes) and the ratio to plain TCP
//! of the same size, then the CPU time the whole process (both ends, every
//! thread) spent per byte moved and its ratio to plain TCP's (writer and
//! reader): on a loaded machine, where rates swing with the load, the CPU
//! cost per byte is the steadier measure of the work (copies, CRC) the wire
//! does. `WIRE_NO_LEND=1` makes the link's streams lend no room, so that
//! FPDUs are built in the link's buffer and copied by `send`, as before
//! `send_with`. At the end of each case the destination bytes are
//! compared with the source (and every completion's status, opcode and
//! length is checked).
//!
//! `cargo bench --bench wire` runs it (under a minute). Run without `--bench`
//! (as `cargo test --benches` does) it makes one short pass over every case
//! to check that the code works; those numbers mean nothing.
//!
//! Timings are printed, never asserted. See docs/performance.md, "Wire".

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use softndk::kernel::net::{StreamEvents, TcpByteStream};
use softndk::rnic::cq::Cq;
use softndk::rnic::device::EngineMode;
use softndk::rnic::iwarp::conn::{Conn, ConnEvents, ConnFailure, ConnParts, Finish, LinkParams};
use softndk::rnic::iwarp::link::{ByteStream, Link};
use softndk::rnic::iwarp::mpa;
use softndk::rnic::iwarp::setup::{InitiatorConfig, PeerRequest, ResponderConfig};
use softndk::rnic::mr::Pd;
use softndk::rnic::qp::{Payload, Qp};
use softndk::rnic::{Access, Completion, Opcode, WcStatus, WrFlags};

#[path = "common.rs"]
mod common;
use common::{Region, qp_on_own_device, wait_one};

/// Message sizes.
const SIZES: [usize; 3] = [64 << 10, 1 << 20, 8 << 20];
/// Bytes of each `TcpByteStream`'s send buffer.
const SEND_BUFFER: usize = 1 << 20;
/// IRD and ORD asked for and granted (Reads outstanding).
const READ_DEPTH: u16 = 16;
/// How long the benchmark's thread sleeps when it finds no completion.
const IDLE: Duration = Duration::from_micros(20);

fn now_ms() -> u64 {
    softndk::kernel::time::now_100ns() / 10_000
}

// ----- memory ----------------------------------------------------------------

/// `len` bytes of a pattern of `seed`, registered with `access`.
fn region(pd: &Arc<Pd>, len: usize, seed: u8, access: Access) -> Region {
    let bytes = (0..len)
        .map(|i| {
            let [low, high, ..] = i.to_le_bytes();
            low.wrapping_mul(31).wrapping_add(seed).wrapping_add(high)
        })
        .collect();
    Region::of(pd, bytes, access)
}

// ----- the connection ----------------------------------------------------------

/// The socket as the link's stream; `false`: it lends no room
/// (`WIRE_NO_LEND`), so FPDUs are built in the link's buffer and copied by
/// `send`, as before `send_with`.
struct Tcp(Arc<TcpByteStream>, bool);

impl ByteStream for Tcp {
    fn send(&self, bytes: &[u8]) -> usize {
        self.0.send(bytes)
    }
    fn send_with(&self, len: usize, fill: &mut dyn FnMut(&mut [u8]) -> bool) -> Option<bool> {
        if !self.1 {
            return None;
        }
        self.0.send_with(len, fill)
    }
    fn close(&self, abortive: bool) {
        self.0.close(abortive);
    }
}

/// The socket's events to the connection.
#[derive(Default)]
struct Glue(OnceLock<Arc<Conn>>);

impl StreamEvents for Glue {
    fn received(&self, bytes: &[u8]) {
        if let Some(conn) = self.0.get() {
            conn.received(bytes, now_ms());
        }
    }
    fn writable(&self) {
        if let Some(conn) = self.0.get() {
            conn.writable();
        }
    }
    fn closed(&self, abortive: bool) {
        if let Some(conn) = self.0.get() {
            conn.closed(abortive);
        }
    }
}

/// What the connection reported.
#[derive(Default)]
struct Seen {
    request: bool,
    up: bool,
    failed: Option<ConnFailure>,
}

#[derive(Default)]
struct Recorder(Mutex<Seen>);

impl ConnEvents for Recorder {
    fn request(&self, _request: &PeerRequest) {
        self.0.lock().expect("lock").request = true;
    }
    fn established(&self, _link: &softndk::kernel::sync::Arc<Link>, _private_data: &[u8]) {
        self.0.lock().expect("lock").up = true;
    }
    fn failed(&self, failure: ConnFailure) {
        self.0.lock().expect("lock").failed = Some(failure);
    }
}

impl Recorder {
    /// Waits (at most 20 s) until `what` holds.
    fn wait(&self, what: impl Fn(&Seen) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            {
                let seen = self.0.lock().expect("lock");
                assert!(seen.failed.is_none(), "setup failed: {:?}", seen.failed);
                if what(&seen) {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the connection did not come up");
    }
}

/// One side: a device, its QP and CQs, and its end of the connection.
struct Side {
    qp: Arc<Qp>,
    scq: Arc<Cq>,
    rcq: Arc<Cq>,
    pd: Arc<Pd>,
    seen: Arc<Recorder>,
    conn: Option<Arc<Conn>>,
}

impl Side {
    fn new(context: usize) -> Self {
        let (qp, scq, rcq, pd) = qp_on_own_device(EngineMode::Inline, context, 64);
        Self {
            qp,
            scq,
            rcq,
            pd,
            seen: Arc::new(Recorder::default()),
            conn: None,
        }
    }

    /// Starts `stream`'s events towards the connection `make` builds from
    /// its parts (the link built with `params`, its events to `seen`).
    fn start(
        &mut self,
        stream: &Arc<TcpByteStream>,
        params: LinkParams,
        make: impl FnOnce(ConnParts) -> Arc<Conn>,
    ) {
        let conn = make(ConnParts {
            stream: Arc::new(Tcp(
                Arc::clone(stream),
                std::env::var_os("WIRE_NO_LEND").is_none(),
            )),
            params,
            events: Arc::clone(&self.seen) as Arc<dyn ConnEvents>,
            now: now_ms(),
        });
        let glue = Arc::new(Glue::default());
        let _ = glue.0.set(Arc::clone(&conn));
        stream.start(glue).expect("start");
        self.conn = Some(conn);
    }
}

/// Two devices connected over TCP on 127.0.0.1: A initiated, B responded.
struct Pair {
    a: Side,
    b: Side,
    mulpdu: u16,
}

impl Pair {
    fn new(crc: bool, mulpdu: Option<u16>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let client = TcpByteStream::new(client, SEND_BUFFER).expect("stream");
        let server = TcpByteStream::new(server, SEND_BUFFER).expect("stream");
        // The MULPDU of the socket's MSS (RFC 5044 §6), as the connection
        // layer computes it; `WIRE_MULPDU` overrides it.
        let mulpdu =
            mulpdu.unwrap_or_else(|| u16::try_from(mpa::mulpdu(client.mss())).unwrap_or(u16::MAX));
        let params = LinkParams {
            mulpdu,
            max_rx_ulpdu: u16::MAX,
            default_ird_ord: (1, 1),
        };
        let mut a = Side::new(0xA);
        let mut b = Side::new(0xB);
        let config = InitiatorConfig {
            crc,
            ird: READ_DEPTH,
            ord: READ_DEPTH,
            ..InitiatorConfig::default()
        };
        let qp = Arc::clone(&a.qp);
        a.start(&client, params, |parts| {
            Conn::initiate(&qp, parts, &config, b"", Finish::AtReply).expect("initiate")
        });
        let qp = Arc::clone(&b.qp);
        let responder = ResponderConfig {
            crc,
            ..ResponderConfig::default()
        };
        b.start(&server, params, |parts| {
            Conn::respond(Some(&qp), parts, responder)
        });
        b.seen.wait(|s| s.request);
        b.conn
            .as_ref()
            .expect("started")
            .accept(None, READ_DEPTH, READ_DEPTH, b"", now_ms())
            .expect("accept");
        a.seen.wait(|s| s.up);
        // Without RTR the responder is up once the initiator's first FPDU
        // arrived: a Send gets it there.
        let ping_src = region(&a.pd, 64, 1, Access::empty());
        let ping_dst = region(&b.pd, 64, 0, Access::LOCAL_WRITE);
        send_64((&a, &b), 0, &ping_src, &ping_dst);
        b.seen.wait(|s| s.up);
        assert_eq!(ping_dst.bytes, ping_src.bytes);
        Self { a, b, mulpdu }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.a.qp.close();
        self.b.qp.close();
    }
}

/// A 64-byte Send of `src` from A to B's `dst` with request context
/// `context`: B's receive completes, then A's Send.
fn send_64((a, b): (&Side, &Side), context: usize, src: &Region, dst: &Region) {
    b.qp.post_receive(context, &[dst.sge(64)])
        .expect("post receive");
    a.qp.post_send(
        context,
        Payload::Sges(&[src.sge(64)]),
        WrFlags::empty(),
        None,
    )
    .expect("post send");
    check(wait_one(&b.rcq), Opcode::Receive, context, 64);
    check(wait_one(&a.scq), Opcode::Send, context, 64);
}

/// Polls `cq` once: the completions queued now.
fn poll(cq: &Cq, out: &mut [Completion]) -> usize {
    cq.poll(out)
}

/// The benchmark measures the success path only.
fn check(completion: Completion, opcode: Opcode, context: usize, bytes: usize) {
    assert_eq!(completion.status, WcStatus::Success, "{completion:?}");
    assert_eq!(completion.opcode, opcode, "{completion:?}");
    if context != usize::MAX {
        assert_eq!(completion.request_context, context, "{completion:?}");
    }
    // Initiator completions carry no byte count (on either path).
    if opcode == Opcode::Receive {
        assert_eq!(completion.bytes as usize, bytes, "{completion:?}");
    }
}

// ----- the cases --------------------------------------------------------------

/// How long to run a case.
#[derive(Clone, Copy)]
struct Plan {
    warm_up: Duration,
    run: Duration,
    /// Messages moved at least (in the timed part).
    min_messages: u64,
}

const FULL: Plan = Plan {
    warm_up: Duration::from_millis(200),
    run: Duration::from_secs(1),
    min_messages: 8,
};

const SMOKE: Plan = Plan {
    warm_up: Duration::from_millis(1),
    run: Duration::from_millis(1),
    min_messages: 2,
};

/// Outstanding requests for messages of `size` (at least 2).
fn depth(size: usize) -> u64 {
    ((16 << 20) / size).clamp(2, 16) as u64
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Read,
    Send,
}

/// Bytes per second, as a float (exact below 2^53 bytes).
#[expect(clippy::cast_precision_loss, reason = "a rate to print")]
fn rate(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs
}

/// Posts one `op` of `size` bytes at A: from or into `a_mem`, to or from
/// `b_mem`.
fn post(op: Op, qp: &Arc<Qp>, a_mem: &Region, b_mem: &Region, size: usize) {
    let result = match op {
        Op::Write => qp.post_write(
            2,
            Payload::Sges(&[a_mem.sge(size)]),
            b_mem.addr(),
            b_mem.rkey(),
            WrFlags::empty(),
        ),
        Op::Read => qp.post_read(
            2,
            &[a_mem.sge(size)],
            b_mem.addr(),
            b_mem.rkey(),
            WrFlags::empty(),
        ),
        Op::Send => qp.post_send(2, Payload::Sges(&[a_mem.sge(size)]), WrFlags::empty(), None),
    };
    result.expect("post");
}

/// Runs `op` with messages of `size` per `plan`; returns bytes per second
/// of the timed part and the process's CPU ns per byte during it.
fn rdma(pair: &Pair, op: Op, size: usize, plan: Plan) -> (f64, Option<f64>) {
    let (a, b) = (&pair.a, &pair.b);
    // A's memory is the source of Writes and Sends and the sink of Reads;
    // B's the other way round.
    let (a_access, b_access) = match op {
        Op::Write => (Access::empty(), Access::REMOTE_WRITE),
        Op::Read => (Access::LOCAL_WRITE, Access::REMOTE_READ),
        Op::Send => (Access::empty(), Access::LOCAL_WRITE),
    };
    let mut a_mem = region(&a.pd, size, 0x11, a_access);
    let mut b_mem = region(&b.pd, size, 0x77, b_access);
    // The destination starts different from the source.
    match op {
        Op::Read => a_mem.bytes.fill(0),
        Op::Write | Op::Send => b_mem.bytes.fill(0),
    }
    let fence_src = region(&a.pd, 64, 3, Access::empty());
    let fence_dst = region(&b.pd, 64, 0, Access::LOCAL_WRITE);
    let depth = depth(size);
    let mut out = [Completion::new(WcStatus::Success, Opcode::Send, 0, 0); 32];
    let mut run = |how_long: Duration, min: u64| -> (u64, f64, Option<f64>) {
        let start = Instant::now();
        let cpu_start = cpu_secs();
        let (mut posted, mut done, mut receives) = (0_u64, 0_u64, 0_u64);
        let opcode = match op {
            Op::Write => Opcode::Write,
            Op::Read => Opcode::Read,
            Op::Send => Opcode::Send,
        };
        loop {
            let going = done < min || start.elapsed() < how_long;
            if op == Op::Send {
                // A receive for every Send, posted before the Send.
                while going && receives < done + depth {
                    b.qp.post_receive(1, &[b_mem.sge(size)])
                        .expect("post receive");
                    receives += 1;
                }
            }
            while going && posted < done + depth && (op != Op::Send || posted < receives) {
                post(op, &a.qp, &a_mem, &b_mem, size);
                posted += 1;
            }
            if !going && done == posted {
                break;
            }
            // Sends are counted when received, the others when complete.
            let cq = if op == Op::Send { &b.rcq } else { &a.scq };
            let n = poll(cq, &mut out);
            for c in &out[..n] {
                let expected = if op == Op::Send {
                    Opcode::Receive
                } else {
                    opcode
                };
                check(*c, expected, usize::MAX, size);
            }
            done += n as u64;
            if op == Op::Send {
                // The Sends' own completions.
                let n = poll(&a.scq, &mut out);
                for c in &out[..n] {
                    check(*c, Opcode::Send, 2, size);
                }
            }
            if n == 0 {
                // Two cores: leave them to the stream threads, which do the
                // work (spinning here costs the wire a third of its speed).
                std::thread::sleep(IDLE);
            }
        }
        if op == Op::Send {
            // Whatever Send completions are still queued.
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline && poll(&a.scq, &mut out) > 0 {}
        }
        if op == Op::Write {
            // A Write completes when the stream took it: a Send behind it
            // is received once every Write before it is placed.
            send_64((a, b), 9, &fence_src, &fence_dst);
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu = cpu_secs().zip(cpu_start).map(|(end, start)| end - start);
        (done, secs, cpu)
    };
    let _ = run(plan.warm_up, 1);
    let (messages, secs, cpu) = run(plan.run, plan.min_messages);
    // Nothing is in flight: the destination holds the source's bytes.
    assert!(
        a_mem.bytes == b_mem.bytes,
        "data differs after {size}-byte messages"
    );
    let bytes = messages * size as u64;
    (rate(bytes, secs), per_byte(cpu, bytes))
}

/// CPU seconds this process has used so far, all threads (live and
/// ended): `utime + stime` of `/proc/self/stat`, in clock ticks of 1/100 s
/// (Linux's `USER_HZ`). `None` where there is no such file.
fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state is the
    // 3rd field of the line, utime the 14th, stime the 15th.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(f64::from(u32::try_from(utime + stime).ok()?) / 100.0)
}

/// CPU nanoseconds per byte moved.
#[expect(clippy::cast_precision_loss, reason = "a cost to print")]
fn per_byte(cpu: Option<f64>, bytes: u64) -> Option<f64> {
    cpu.filter(|_| bytes > 0).map(|c| c * 1e9 / bytes as f64)
}

/// Plain TCP between two std sockets: messages of `size` for the plan's
/// time; bytes per second at the reader, and CPU ns per byte (writer and
/// reader).
fn plain_tcp(size: usize, plan: Plan) -> (f64, Option<f64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (mut server, _) = listener.accept().expect("accept");
    client.set_nodelay(true).expect("nodelay");
    server.set_nodelay(true).expect("nodelay");
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0_u8; size];
        let mut total = 0_u64;
        loop {
            match server.read(&mut buf) {
                Ok(0) => return total,
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => panic!("read: {e}"),
            }
        }
    });
    let message = vec![0x5A_u8; size];
    let warm = Instant::now();
    while warm.elapsed() < plan.warm_up {
        client.write_all(&message).expect("write");
    }
    // The reader counts the warm-up bytes too; the timed part is from here.
    let mut sent = 0_u64;
    let mut messages = 0_u64;
    let start = Instant::now();
    let cpu_start = cpu_secs();
    while messages < plan.min_messages || start.elapsed() < plan.run {
        client.write_all(&message).expect("write");
        sent += size as u64;
        messages += 1;
    }
    client
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    let total = reader.join().expect("reader");
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_secs().zip(cpu_start).map(|(end, start)| end - start);
    assert!(total >= sent, "the reader got {total} of {sent} bytes");
    (rate(sent, secs), per_byte(cpu, sent))
}

fn size_name(size: usize) -> String {
    if size >= 1 << 20 {
        format!("{} MiB", size >> 20)
    } else {
        format!("{} KiB", size >> 10)
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let plan = if full { FULL } else { SMOKE };
    let mulpdu = std::env::var("WIRE_MULPDU")
        .ok()
        .and_then(|v| v.parse::<u16>().ok());
    let begin = Instant::now();
    let with_crc = Pair::new(true, mulpdu);
    let without_crc = Pair::new(false, mulpdu);
    if !full {
        println!("smoke run (pass --bench, as `cargo bench` does, to measure)");
    }
    println!(
        "iWARP over TCP on 127.0.0.1: MULPDU {} bytes, send buffer {} KiB, engine inline",
        with_crc.mulpdu,
        SEND_BUFFER >> 10
    );
    println!(
        "{:<8} {:<16} {:>6} {:>9} {:>8} {:>8} {:>8}",
        "size", "case", "depth", "GB/s", "vs tcp", "cpu ns/B", "vs tcp"
    );
    // `WIRE_CASES=send,read` runs only the cases whose name contains one
    // of the words (for profiling); tcp always runs.
    let only: Vec<String> = std::env::var("WIRE_CASES")
        .map(|v| v.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let cases = [
        ("write, crc", Op::Write, &with_crc),
        ("write, no crc", Op::Write, &without_crc),
        ("read, crc", Op::Read, &with_crc),
        ("read, no crc", Op::Read, &without_crc),
        ("send, crc", Op::Send, &with_crc),
        ("send, no crc", Op::Send, &without_crc),
    ];
    for size in SIZES {
        // Plain TCP before and after the size's cases; the better of the two
        // is the reference (the machine's load varies within a run).
        let tcp_before = plain_tcp(size, plan);
        let mut rows = Vec::new();
        for (name, op, pair) in cases {
            if only.is_empty() || only.iter().any(|w| name.contains(w.as_str())) {
                rows.push((name, rdma(pair, op, size, plan), depth(size)));
            }
        }
        let tcp_after = plain_tcp(size, plan);
        // The better rate, and the lower CPU cost, of the two runs.
        let tcp = (
            tcp_before.0.max(tcp_after.0),
            match (tcp_before.1, tcp_after.1) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        );
        rows.insert(0, ("tcp (2 sockets)", tcp, 1));
        for (case, (rate, cpu), depth) in rows {
            let cpu_text = cpu.map_or_else(|| "-".to_owned(), |c| format!("{c:.3}"));
            let cpu_ratio = cpu
                .zip(tcp.1)
                .map_or_else(|| "-".to_owned(), |(c, t)| format!("{:.2}x", c / t));
            println!(
                "{:<8} {:<16} {:>6} {:>9.3} {:>7.2}x {:>8} {:>8}",
                size_name(size),
                case,
                depth,
                rate / 1e9,
                rate / tcp.0,
                cpu_text,
                cpu_ratio
            );
        }
    }
    println!("total {:.1} s", begin.elapsed().as_secs_f64());
}
