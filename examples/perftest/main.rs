//! A SoftNDK server for perftest's `ib_write_bw -R`, `ib_read_bw -R` and
//! `ib_send_bw -R` (linux-rdma/perftest, the version in Debian 12), through
//! the NDK C ABI only: the adapter is `SoftNdkOpenAdapterEx(addr, 1, ..)`
//! (iWARP over TCP) and every other call goes through the dispatch tables
//! (the shared consumer module `src/bin/softndk-perf/ndk.rs`). See
//! docs/siw.md ("perftest") for the protocol and how scripts/siw/run.sh
//! runs it against the guest's perftest over siw.
//!
//! ```text
//! perftest [-a IP] [-p PORT] [--port-file F] [--tests write,read,send]
//!          [-s SIZE] [-n ITERS] [--timeout S]
//! ```
//!
//! Serves one client per test named in `--tests`, in that order, on one
//! listener; `-s` and `-n` must be the client's. For each test it prints
//! the bandwidth it saw (bytes the client moved over the time between the
//! last handshake before the run and the first after it) and, for Write and
//! Read, the average the client reported; then `PERFTEST-RESULT <test>
//! PASS|FAIL <detail>`, and last `PERFTEST-RESULT server PASS|FAIL`. The
//! exit status is 0 only when every test passed.

// The NDK C ABI consumer shared with the perf tool and examples/rping.
#[path = "../common/cli.rs"]
mod cli;
#[path = "../common/control.rs"]
mod control;
#[path = "../../src/bin/softndk-perf/ndk.rs"]
mod ndk;
mod wire;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use control::{RECV, SEND};
use ndk::{Adapter, Completions, Connector, Cq, Done, Listener, Pd, Qp, QpShape, Region};
use wire::{DEST_LEN, Dest, MTU_LEN, VERSION_LEN};

/// Request numbers (the request context) by kind beyond the control
/// messages' `RECV` and `SEND`.
const CREDIT: usize = 3;

/// The page and cache-line sizes this server states (perftest takes the
/// larger of both sides').
const PAGE: u32 = 4096;
const CACHE_LINE: u32 = 64;
/// The byte our RDMA Write / Read target is filled with before a test.
const FILL: u8 = 0xA5;
/// Receives kept posted at most for `ib_send_bw` (perftest's default
/// receive depth, which is also the most its client sends uncredited).
const MAX_RECEIVES: u32 = 512;
/// How long a closing side waits for perftest to disconnect first.
const LINGER: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Test {
    Write,
    Read,
    Send,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Read => "read",
            Self::Send => "send",
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        match text {
            "write" => Ok(Self::Write),
            "read" => Ok(Self::Read),
            "send" => Ok(Self::Send),
            _ => Err(format!("unknown test {text:?} (write, read, send)")),
        }
    }
}

struct Args {
    ip: [u8; 4],
    port: u16,
    port_file: Option<String>,
    tests: Vec<Test>,
    size: usize,
    iters: u32,
    timeout: Duration,
}

fn usage() -> String {
    "usage: perftest [-a IP] [-p PORT] [--port-file F] [--tests write,read,send] [-s SIZE] [-n ITERS] [--timeout S]"
        .to_owned()
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        ip: [127, 0, 0, 1],
        port: 18515,
        port_file: None,
        tests: vec![Test::Write, Test::Read, Test::Send],
        size: 65536,
        iters: 1000,
        timeout: Duration::from_mins(1),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "-a" => args.ip = cli::ipv4(&it.next().ok_or("-a needs a value")?)?,
            "-p" => args.port = cli::number("-p", it.next())?,
            "-s" => args.size = cli::number("-s", it.next())?,
            "-n" => args.iters = cli::number("-n", it.next())?,
            "--port-file" => args.port_file = Some(it.next().ok_or("--port-file needs a value")?),
            "--tests" => {
                args.tests = it
                    .next()
                    .ok_or("--tests needs a value")?
                    .split(',')
                    .map(Test::parse)
                    .collect::<Result<_, _>>()?;
            }
            "--timeout" => args.timeout = Duration::from_secs(cli::number("--timeout", it.next())?),
            _ => return Err(usage()),
        }
    }
    if args.size == 0 || args.size > 1 << 24 || args.iters == 0 || args.tests.is_empty() {
        return Err(format!(
            "{}\n-s is 1 to 16 MiB, -n and --tests nonempty",
            usage()
        ));
    }
    Ok(args)
}

/// A QP with its CQ and PD, and the completions not yet claimed.
struct Conn {
    cq: Cq,
    pd: Pd,
    qp: Qp,
    done: Completions,
    timeout: Duration,
}

fn kind_name(kind: usize) -> &'static str {
    match kind {
        RECV => "receive",
        SEND => "send",
        CREDIT => "credit write",
        _ => "unknown request",
    }
}

impl Conn {
    fn open(adapter: &Adapter, shape: QpShape, timeout: Duration) -> Result<Self, String> {
        let cq = adapter.cq((shape.receive_depth + shape.initiator_depth) * 2)?;
        let pd = adapter.pd()?;
        let qp = match pd.qp(&cq, 0, shape) {
            Ok(qp) => qp,
            Err(why) => {
                pd.close()?;
                cq.close()?;
                return Err(why);
            }
        };
        Ok(Self {
            cq,
            pd,
            qp,
            done: Completions::default(),
            timeout,
        })
    }

    /// Moves every completion the CQ has into the stash.
    fn drain(&mut self) -> Result<usize, String> {
        self.done.drain(&self.cq, kind_name)
    }

    /// Waits up to the timeout for the next completion of `kind`.
    fn wait(&mut self, kind: usize) -> Result<Done, String> {
        self.done
            .wait(&self.cq, kind, kind_name, self.timeout, &|| false)?
            .ok_or_else(|| format!("no {}", kind_name(kind)))
    }

    fn close(self) -> Result<(), String> {
        let qp = self.qp.close();
        let pd = self.pd.close();
        let cq = self.cq.close();
        qp.and(pd).and(cq)
    }
}

/// perftest's control connection: one receive of [`DEST_LEN`] bytes kept
/// posted, one Send at a time, every exchange the client's message first.
struct Control {
    conn: Conn,
    buf: Region,
}

impl Control {
    fn open(adapter: &Adapter, timeout: Duration) -> Result<Self, String> {
        let shape = QpShape {
            receive_depth: 2,
            initiator_depth: 2,
            sge: 1,
        };
        let conn = Conn::open(adapter, shape, timeout)?;
        match conn.pd.region(2 * control::SEND_AT) {
            Ok(buf) => Ok(Self { conn, buf }),
            Err(why) => {
                conn.close()?;
                Err(why)
            }
        }
    }

    fn post_receive(&self) -> Result<(), String> {
        control::post_receive(&self.buf, &self.conn.qp, DEST_LEN)
    }

    /// The client's next message, which must be `len` bytes; the receive
    /// is posted again.
    fn recv(&mut self, len: usize, what: &str) -> Result<Vec<u8>, String> {
        let done = self.conn.wait(RECV).map_err(|e| format!("{what}: {e}"))?;
        let got = usize::try_from(done.bytes).unwrap_or(usize::MAX);
        if got != len {
            return Err(format!("{what}: a {got}-byte message, expected {len}"));
        }
        let message = control::received(&self.buf, len).to_vec();
        self.post_receive()?;
        Ok(message)
    }

    fn send(&mut self, message: &[u8], what: &str) -> Result<(), String> {
        control::send(&mut self.buf, &self.conn.qp, message)?;
        self.conn
            .wait(SEND)
            .map(|_| ())
            .map_err(|e| format!("{what}: {e}"))
    }

    /// One exchange as perftest's server side does it: the client's
    /// message, then ours.
    fn exchange(&mut self, len: usize, reply: &[u8], what: &str) -> Result<Vec<u8>, String> {
        let got = self.recv(len, what)?;
        self.send(reply, what)?;
        Ok(got)
    }

    /// A `ctx_hand_shake`: the client's `pingpong_dest`, then ours.
    fn handshake(&mut self, mine: &Dest, what: &str) -> Result<Dest, String> {
        let got = self.exchange(DEST_LEN, &mine.encode(), what)?;
        Dest::decode(&got).ok_or_else(|| format!("{what}: short pingpong_dest"))
    }

    fn close(self) -> Result<(), String> {
        let buf = self.buf.close();
        let conn = self.conn.close();
        buf.and(conn)
    }
}

/// Waits up to [`LINGER`] for the peer to disconnect, then disconnects and
/// closes the connector.
fn hang_up(connector: Connector) -> Result<(), String> {
    let start = Instant::now();
    while !connector.peer_disconnected() && start.elapsed() < LINGER {
        std::thread::sleep(Duration::from_millis(10));
    }
    let end = connector.disconnect();
    let closed = connector.close();
    end.and(closed)
}

/// MiB per second, perftest's "MB/sec".
#[allow(clippy::cast_precision_loss)]
fn mib_per_second(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / secs / f64::from(1_u32 << 20)
    } else {
        0.0
    }
}

/// What one test saw.
struct Outcome {
    bytes: u64,
    secs: f64,
    client_average: Option<f64>,
    note: String,
}

/// Serves one perftest client for `test`: the control connection, the
/// data connection, the handshakes and the run.
fn serve(
    listener: &Listener,
    adapter: &Adapter,
    args: &Args,
    test: Test,
) -> Result<Outcome, String> {
    let mut control = Control::open(adapter, args.timeout)?;
    // The receive is posted before the accept: the client's first Send may
    // come right after the connection is up.
    let outcome = control
        .post_receive()
        .and_then(|()| listener.incoming(args.timeout))
        .and_then(|connector| {
            let outcome = connector
                .accept(&control.conn.qp, 1)
                .and_then(|()| serve_connected(listener, adapter, args, test, &mut control));
            let hung_up = hang_up(connector);
            outcome.and_then(|outcome| hung_up.map(|()| outcome))
        });
    // Every object must be closed before the adapter can be.
    let closed = control.close();
    let outcome = outcome?;
    closed?;
    Ok(outcome)
}

fn serve_connected(
    listener: &Listener,
    adapter: &Adapter,
    args: &Args,
    test: Test,
    control: &mut Control,
) -> Result<Outcome, String> {
    // exchange_versions, check_sys_data, check_mtu.
    let version = control.exchange(
        VERSION_LEN,
        &wire::version_message(wire::VERSION),
        "version",
    )?;
    let peer = wire::parse_version(&version).ok_or("the client's version is not a number")?;
    if peer < wire::OLDEST_VERSION {
        return Err(format!("client version {peer} is older than 5.70"));
    }
    let page = control.exchange(4, &PAGE.to_be_bytes(), "page size")?;
    let page = u32::from_be_bytes(page[..4].try_into().map_err(|_| "page size")?);
    control.exchange(4, &CACHE_LINE.to_be_bytes(), "cache line size")?;
    let mtu = control.recv(MTU_LEN, "mtu")?;
    let mtu = wire::parse_mtu(&mtu).ok_or("the client's MTU is not an ibv_mtu")?;
    control.send(&wire::mtu_message(mtu), "mtu")?;
    println!(
        "{}: client version {peer}, page size {page}, mtu enum {mtu}",
        test.name()
    );

    // The data QP and its buffer; then the data connection between two
    // handshakes (create_rdma_cm_connection).
    let receives = if test == Test::Send {
        shape_receives(args)
    } else {
        1
    };
    let shape = QpShape {
        receive_depth: receives,
        initiator_depth: 16,
        sge: 1,
    };
    let conn = Conn::open(adapter, shape, args.timeout)?;
    let len = 2 * args.size.max(usize::try_from(page).unwrap_or(0)).max(4096);
    let regions = conn
        .pd
        .region(len)
        .and_then(|buf| Ok((buf, conn.pd.region(64)?)));
    let (buf, credit) = match regions {
        Ok(pair) => pair,
        Err(why) => {
            conn.close()?;
            return Err(why);
        }
    };
    let mut data = Data { conn, buf, credit };
    data.buf.bytes_mut().fill(FILL);
    let outcome = serve_data(listener, adapter, (args, test), control, &mut data);
    let closed = data
        .buf
        .close()
        .and(data.credit.close())
        .and(data.conn.close());
    let outcome = outcome?;
    closed?;
    Ok(outcome)
}

/// The data QP and its two buffers: the Write / Read target or the
/// receive buffer, and the credit word's source.
struct Data {
    conn: Conn,
    buf: Region,
    credit: Region,
}

fn serve_data(
    listener: &Listener,
    adapter: &Adapter,
    (args, test): (&Args, Test),
    control: &mut Control,
    data: &mut Data,
) -> Result<Outcome, String> {
    let blank = Dest::default();
    control.handshake(&blank, "sync before the data connection")?;
    if test == Test::Send {
        let mut sges = Vec::new();
        data.buf.sges(0, args.size, 1, &mut sges);
        for _ in 0..shape_receives(args) {
            data.conn.qp.receive(RECV, &sges)?;
        }
    }
    let read_limit = adapter
        .info()
        .map_or(16, |info| info.max_inbound_read_limit.clamp(1, 128));
    let connector = listener.incoming(args.timeout)?;
    let outcome = connector
        .accept(&data.conn.qp, read_limit)
        .and_then(|()| connector.read_limits())
        .and_then(|(ird, ord)| {
            println!(
                "{}: data connection up (offered {read_limit} reads each way; inbound read limit {ird}, outbound {ord})",
                test.name()
            );
            run(args, test, control, data, read_limit)
        });
    let hung_up = hang_up(connector);
    let outcome = outcome?;
    hung_up?;
    Ok(outcome)
}

fn shape_receives(args: &Args) -> u32 {
    args.iters.min(MAX_RECEIVES)
}

fn run(
    args: &Args,
    test: Test,
    control: &mut Control,
    data: &mut Data,
    read_limit: u32,
) -> Result<Outcome, String> {
    let name = test.name();
    let blank = Dest::default();
    control.handshake(&blank, "sync after the data connection")?;
    let mine = Dest {
        out_reads: read_limit,
        rkey: data.buf.remote_token(),
        vaddr: data.buf.address(0),
        ..Dest::default()
    };
    let theirs = control.handshake(&mine, "keys")?;
    control.handshake(&mine, "keys again")?;
    control.handshake(&mine, "sync after RTR")?;
    let bytes = u64::from(args.iters) * args.size as u64;
    if test == Test::Send {
        // Our receives are posted; one more sync, then the client sends.
        control.handshake(&mine, "sync before the run")?;
        let start = Instant::now();
        let received = receive_all(args, data, &theirs)?;
        let secs = start.elapsed().as_secs_f64();
        control.handshake(&mine, "close")?;
        return Ok(Outcome {
            bytes,
            secs,
            client_average: None,
            note: format!(
                "{received} receives of {} bytes counted, credits written",
                args.size
            ),
        });
    }
    let start = Instant::now();
    // The client runs (warm-up and measured requests), then syncs.
    control.handshake(&mine, "sync after the run")?;
    let secs = start.elapsed().as_secs_f64();
    // xchg_bw_reports: size, iters, peak, average, message rate.
    let ours = mib_per_second(bytes, secs);
    let size = control.exchange(8, &wire::report_u64(args.size as u64), "report size")?;
    let iters = control.exchange(8, &wire::report_u64(u64::from(args.iters)), "report iters")?;
    control.exchange(8, &wire::report_f64(ours), "report peak")?;
    let average = control.exchange(8, &wire::report_f64(ours), "report average")?;
    control.exchange(8, &wire::report_f64(0.0), "report message rate")?;
    control.handshake(&mine, "close")?;
    let size = wire::parse_report_u64(&size).unwrap_or(0);
    let iters = wire::parse_report_u64(&iters).unwrap_or(0);
    if size != args.size as u64 || iters != u64::from(args.iters) {
        return Err(format!(
            "{name}: the client ran {iters} x {size} bytes, this server expected {} x {}",
            args.iters, args.size
        ));
    }
    // Our own completions: none expected, and no error may be there.
    data.conn.drain()?;
    let target = &data.buf.bytes()[..args.size];
    let note = if test == Test::Write {
        let changed = target.iter().filter(|&&b| b != FILL).count();
        // perftest writes random bytes: about 255 in 256 differ from the
        // fill.
        if changed * 2 < args.size {
            return Err(format!(
                "write: only {changed} of {} target bytes changed",
                args.size
            ));
        }
        format!("{changed} of {} target bytes written over", args.size)
    } else if target.iter().any(|&b| b != FILL) {
        return Err("read: the Read source changed".to_owned());
    } else {
        "the Read source is unchanged".to_owned()
    };
    Ok(Outcome {
        bytes,
        secs,
        client_average: wire::parse_report_f64(&average),
        note,
    })
}

/// `ib_send_bw`'s run on the server side: count `-n` receives of `-s`
/// bytes, posting receives again while more are due, and write the count
/// into the client's credit word now and then (perftest's client over
/// iWARP stops when it is a receive depth ahead of its credit).
fn receive_all(args: &Args, data: &mut Data, theirs: &Dest) -> Result<u64, String> {
    let total = u64::from(args.iters);
    let every = u64::from((args.iters / 4).clamp(1, 8));
    let mut posted = u64::from(shape_receives(args));
    let mut received = 0_u64;
    let mut credit_out = false;
    let mut credit_due = false;
    let mut recv_sges = Vec::new();
    data.buf.sges(0, args.size, 1, &mut recv_sges);
    let mut credit_sges = Vec::new();
    data.credit.sges(0, 4, 1, &mut credit_sges);
    let start = Instant::now();
    while received < total || credit_out {
        let n = data.conn.drain()?;
        while let Some(done) = data.conn.done.next() {
            match done.kind {
                RECV => {
                    received += 1;
                    if usize::try_from(done.bytes).ok() != Some(args.size) {
                        return Err(format!(
                            "send: receive {received} carried {} bytes, expected {}",
                            done.bytes, args.size
                        ));
                    }
                    if posted < total {
                        data.conn.qp.receive(RECV, &recv_sges)?;
                        posted += 1;
                    }
                    if received.is_multiple_of(every) || received == total {
                        credit_due = true;
                    }
                }
                CREDIT => credit_out = false,
                other => return Err(format!("send: unexpected completion {other}")),
            }
        }
        if credit_due && !credit_out && received < total {
            // Only one credit Write is out at a time: its source is free.
            data.credit.bytes_mut()[..4].copy_from_slice(&wire::credit(received));
            data.conn
                .qp
                .write(CREDIT, &credit_sges, theirs.vaddr, theirs.rkey)?;
            credit_out = true;
            credit_due = false;
        }
        if n == 0 {
            if start.elapsed() > args.timeout {
                return Err(format!(
                    "send: {received} of {total} receives within {:?}",
                    args.timeout
                ));
            }
            std::thread::yield_now();
        }
    }
    Ok(received)
}

fn server(args: &Args) -> Result<String, String> {
    let adapter = Adapter::open_iwarp(args.ip)?;
    let (listener, port) = match Listener::listen(&adapter, args.port) {
        Ok(pair) => pair,
        Err(why) => {
            adapter.close()?;
            return Err(why);
        }
    };
    let [a, b, c, d] = args.ip;
    println!("server: listening on {a}.{b}.{c}.{d}:{port} (iWARP over TCP)");
    if let Some(file) = &args.port_file {
        std::fs::write(file, format!("{port}\n")).map_err(|e| format!("{file}: {e}"))?;
    }
    let mut failed = Vec::new();
    for &test in &args.tests {
        let name = test.name();
        match serve(&listener, &adapter, args, test) {
            Ok(outcome) => {
                let client = outcome
                    .client_average
                    .map(|bw| format!(", the client reported {bw:.2} MB/s average"))
                    .unwrap_or_default();
                println!(
                    "PERFTEST-RESULT {name} PASS {} x {} bytes in {:.3} s: {:.2} MB/s seen by the server{client}; {}",
                    args.iters,
                    args.size,
                    outcome.secs,
                    mib_per_second(outcome.bytes, outcome.secs),
                    outcome.note
                );
            }
            Err(why) => {
                println!("PERFTEST-RESULT {name} FAIL {why}");
                failed.push(name);
            }
        }
    }
    let listener_closed = listener.close();
    let adapter_closed = adapter.close();
    listener_closed?;
    adapter_closed?;
    if failed.is_empty() {
        Ok(format!("{} test(s)", args.tests.len()))
    } else {
        Err(format!("failed: {}", failed.join(", ")))
    }
}

fn main() -> ExitCode {
    cli::main_with("PERFTEST", parse_args, |args| ("server", server(args)))
}
