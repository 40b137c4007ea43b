//! rdma-core's `rping` exchange, spoken by a SoftNDK host-mode program
//! through the NDK C ABI only, over iWARP on TCP (`SoftNdkOpenAdapterEx`,
//! transport 1). Run against Linux siw by `scripts/siw/run.sh` (docs/siw.md).
//!
//! ```text
//! rping -s [-a IP] [-p PORT] [--port-file F] [--connections K] [-v] [-V] [-C N]
//! rping -c  -a IP   -p PORT  [-S SIZE] [-C N] [-v] [-V] [--rtr-delay-ms MS]
//! common: [--timeout S] (default 60: every wait on the peer is bounded by it)
//! ```
//!
//! The exchange, per ping (rping.c's loop; every control message is the
//! 16-byte `struct rping_rdma_info`: the buffer's address (64 bits), its
//! rkey / STag (32 bits) and its length (32 bits), each big-endian):
//!
//! 1. the client fills its start buffer with `rdma-ping-N: ` and a running
//!    alphabet (ending in a NUL) and Sends its address, STag and length;
//! 2. the server RDMA-Reads it and Sends a 16-byte "go ahead";
//! 3. the client Sends the address, STag and length of its (zeroed) sink;
//! 4. the server RDMA-Writes what it read (`strlen + 1` bytes) there and
//!    Sends "go ahead" again; the client compares sink and start buffer.
//!
//! An NDK token is an iWARP STag and an NDK remote address is the tagged
//! offset rping advertises (the buffer's virtual address), so the fields go
//! to `NdkRead` / `NdkWrite` as they are, after the byte swap.
//!
//! Server: accepts `--connections` connections one after the other (default
//! 1), each until the client disconnects (rping's server does the same), and
//! with `-V` checks every buffer it reads against the text rping's client
//! writes (ping number and alphabet); with `-C N` each connection must have
//! exactly N pings. Client: `-V` compares the echoed buffer with the one it
//! sent (rping's `-V`), and the client always checks the byte counts.
//! `--rtr-delay-ms` holds `NdkCompleteConnect` (which sends the RTR) back
//! after the connect completed: siw's responder can lose an RTR sent right
//! after its reply (docs/siw.md).
//!
//! The last line is `RPING-RESULT server|client PASS|FAIL <detail>`; the exit
//! status is 0 only on PASS.

// The NDK C ABI consumer shared with the perf tool and examples/perftest.
#[path = "../common/cli.rs"]
mod cli;
#[path = "../common/control.rs"]
mod control;
#[path = "../../src/bin/softndk-perf/ndk.rs"]
mod ndk;

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use control::{RECV, SEND};
use ndk::{Adapter, Completions, Connector, Cq, Done, Listener, Pd, Qp, QpShape, Region};

/// Read limits (IRD and ORD) asked for at connect and accept: rping asks
/// for one each way.
const READ_LIMIT: u32 = 1;

/// Bytes of rping's `struct rping_rdma_info`.
const INFO_LEN: usize = 16;
/// The largest buffer rping allows (`RPING_BUFSIZE - 1`).
const MAX_SIZE: usize = 64 * 1024 - 1;
/// The smallest (`RPING_MIN_BUFSIZE`: `sizeof "2147483647"` +
/// `sizeof "rdma-ping-%d: "`).
const MIN_SIZE: usize = 11 + 15;
/// Request numbers (the request context) by kind beyond the control
/// messages' `RECV` and `SEND`.
const READ: usize = 3;
const WRITE: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Server,
    Client,
}

struct Args {
    role: Role,
    ip: [u8; 4],
    port: u16,
    port_file: Option<String>,
    connections: u32,
    size: usize,
    count: Option<u32>,
    verbose: bool,
    validate: bool,
    rtr_delay: Duration,
    timeout: Duration,
}

fn usage() -> String {
    "usage: rping -s [-a IP] [-p PORT] [--port-file F] [--connections K] [-v] [-V] [-C N] [--timeout S]\n       \
     rping -c -a IP -p PORT [-S SIZE] [-C N] [-v] [-V] [--rtr-delay-ms MS] [--timeout S]"
        .to_owned()
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        role: Role::Server,
        ip: [127, 0, 0, 1],
        port: 7174,
        port_file: None,
        connections: 1,
        size: 64,
        count: None,
        verbose: false,
        validate: false,
        rtr_delay: Duration::ZERO,
        timeout: Duration::from_mins(1),
    };
    let mut role = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "-s" => role = Some(Role::Server),
            "-c" => role = Some(Role::Client),
            "-a" => args.ip = cli::ipv4(&it.next().ok_or("-a needs a value")?)?,
            "-p" => args.port = cli::number("-p", it.next())?,
            "-S" => args.size = cli::number("-S", it.next())?,
            "-C" => args.count = Some(cli::number("-C", it.next())?),
            "-v" => args.verbose = true,
            "-V" => args.validate = true,
            "--port-file" => args.port_file = Some(it.next().ok_or("--port-file needs a value")?),
            "--connections" => args.connections = cli::number("--connections", it.next())?,
            "--rtr-delay-ms" => {
                args.rtr_delay = Duration::from_millis(cli::number("--rtr-delay-ms", it.next())?);
            }
            "--timeout" => args.timeout = Duration::from_secs(cli::number("--timeout", it.next())?),
            _ => return Err(usage()),
        }
    }
    args.role = role.ok_or_else(usage)?;
    if !(MIN_SIZE..=MAX_SIZE).contains(&args.size) {
        return Err(format!(
            "-S {}: rping's sizes are {MIN_SIZE} to {MAX_SIZE}",
            args.size
        ));
    }
    Ok(args)
}

/// What the rping client writes into its start buffer for ping `ping`:
/// `rdma-ping-N: `, then letters from `A` + (N mod 58) cycling through
/// `A`..=`z`, the last byte NUL.
fn pattern(ping: u32, out: &mut [u8]) {
    let Some(last) = out.len().checked_sub(1) else {
        return;
    };
    let head = format!("rdma-ping-{ping}: ");
    let n = head.len().min(last);
    out[..n].copy_from_slice(&head.as_bytes()[..n]);
    let mut c = b'A' + u8::try_from(ping % 58).unwrap_or(0);
    for b in &mut out[n..] {
        *b = c;
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    out[last] = 0;
}

/// rping's `struct rping_rdma_info`, decoded.
#[derive(Clone, Copy, Debug)]
struct Info {
    addr: u64,
    stag: u32,
    len: u32,
}

impl Info {
    fn encode(self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.addr.to_be_bytes());
        out[8..12].copy_from_slice(&self.stag.to_be_bytes());
        out[12..16].copy_from_slice(&self.len.to_be_bytes());
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(Self {
            addr: u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?),
            stag: u32::from_be_bytes(bytes.get(8..12)?.try_into().ok()?),
            len: u32::from_be_bytes(bytes.get(12..16)?.try_into().ok()?),
        })
    }
}

/// The objects of one connection and the completions not yet claimed.
struct Session {
    cq: Cq,
    pd: Pd,
    qp: Qp,
    ctrl: Region,
    data: Region,
    /// The client's start buffer (rping's `start_buf`).
    start: Option<Region>,
    done: Completions,
    timeout: Duration,
}

/// Why a wait ended without the completion.
enum Ended {
    /// The peer disconnected (its FIN): the normal end of a server's run.
    Disconnected,
    Failed(String),
}

impl From<String> for Ended {
    fn from(why: String) -> Self {
        Self::Failed(why)
    }
}

impl Session {
    fn open(
        adapter: &Adapter,
        data_len: usize,
        with_start: bool,
        timeout: Duration,
    ) -> Result<Self, String> {
        let cq = adapter.cq(64)?;
        let pd = adapter.pd()?;
        let qp = pd.qp(
            &cq,
            0x5EED,
            QpShape {
                receive_depth: 2,
                initiator_depth: 16,
                sge: 1,
            },
        )?;
        let ctrl = pd.region(4096)?;
        let data = pd.region(data_len)?;
        let start = if with_start {
            Some(pd.region(data_len)?)
        } else {
            None
        };
        Ok(Self {
            cq,
            pd,
            qp,
            ctrl,
            data,
            start,
            done: Completions::default(),
            timeout,
        })
    }

    fn post_receive(&self) -> Result<(), String> {
        control::post_receive(&self.ctrl, &self.qp, INFO_LEN)
    }

    /// Sends `info` as a 16-byte control message.
    fn send_info(&mut self, info: Info) -> Result<(), String> {
        let mut message = [0; INFO_LEN];
        info.encode(&mut message);
        control::send(&mut self.ctrl, &self.qp, &message)
    }

    /// Waits for the next completion of `kind`, keeping others for later;
    /// with `connector`, a disconnect by the peer ends the wait.
    fn wait(&mut self, kind: usize, connector: Option<&Connector>) -> Result<Done, Ended> {
        let stop = || connector.is_some_and(Connector::peer_disconnected);
        self.done
            .wait(&self.cq, kind, kind_name, self.timeout, &stop)?
            .ok_or(Ended::Disconnected)
    }

    /// Waits for a control message and posts the receive again (as rping
    /// does), returning what it said.
    fn receive_info(&mut self, connector: Option<&Connector>) -> Result<Info, Ended> {
        let done = self.wait(RECV, connector)?;
        if done.bytes as usize != INFO_LEN {
            return Err(Ended::Failed(format!(
                "received {} bytes, not rping's {INFO_LEN}",
                done.bytes
            )));
        }
        let info = Info::decode(control::received(&self.ctrl, INFO_LEN))
            .ok_or_else(|| "short receive buffer".to_owned())?;
        self.post_receive()?;
        Ok(info)
    }

    fn close(self) -> Result<(), String> {
        self.qp.close()?;
        self.ctrl.close()?;
        self.data.close()?;
        if let Some(start) = self.start {
            start.close()?;
        }
        self.cq.close()?;
        self.pd.close()
    }
}

fn kind_name(kind: usize) -> &'static str {
    match kind {
        RECV => "receive",
        SEND => "send",
        READ => "read",
        WRITE => "write",
        _ => "unknown request",
    }
}

fn hex_head(bytes: &[u8]) -> String {
    let mut s = String::new();
    for b in bytes.iter().take(16) {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[allow(clippy::cast_precision_loss, reason = "byte counts far below 2^52")]
fn megabytes_per_second(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / secs.max(1e-9) / 1e6
}

/// The printable text of a NUL-terminated buffer (what rping's `-v` prints).
fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

/// Serves one connection until the client disconnects; the number of
/// pings and bytes moved.
fn serve_one(
    listener: &Listener,
    adapter: &Adapter,
    args: &Args,
    number: u32,
) -> Result<(u32, u64), String> {
    let mut session = Session::open(adapter, MAX_SIZE + 1, false, args.timeout)?;
    let connector = match session
        .post_receive()
        .and_then(|()| listener.incoming(args.timeout))
    {
        Ok(connector) => connector,
        Err(why) => {
            // Every object must be closed before the adapter can be.
            session.close()?;
            return Err(why);
        }
    };
    let outcome = serve_connected(&mut session, &connector, args, number);
    end_connection(outcome, connector, session)
}

/// Ends a connection whatever its `outcome`: disconnects and closes the
/// connector, then closes the session. The first failure wins, the
/// outcome's first.
fn end_connection<T>(
    outcome: Result<T, String>,
    connector: Connector,
    session: Session,
) -> Result<T, String> {
    let end = connector.disconnect();
    let closed = connector.close();
    let session_closed = session.close();
    let result = outcome?;
    end?;
    closed?;
    session_closed?;
    Ok(result)
}

fn serve_connected(
    s: &mut Session,
    connector: &Connector,
    args: &Args,
    number: u32,
) -> Result<(u32, u64), String> {
    connector.accept(&s.qp, READ_LIMIT)?;
    let (ird, ord) = connector.read_limits()?;
    println!("server: connection {number} accepted (inbound read limit {ird}, outbound {ord})");
    let mut ping = 0_u32;
    let mut moved = 0_u64;
    let mut sges = Vec::new();
    let started = Instant::now();
    loop {
        // 1. The client's source buffer.
        let source = match s.receive_info(Some(connector)) {
            Ok(info) => info,
            Err(Ended::Disconnected) => break,
            Err(Ended::Failed(why)) => return Err(format!("ping {ping}: {why}")),
        };
        let len = source.len as usize;
        if !(1..=MAX_SIZE + 1).contains(&len) {
            return Err(format!("ping {ping}: advertised length {len} out of range"));
        }
        if args.verbose {
            println!(
                "server: ping {ping} source addr {:#x} stag {:#010x} len {len}",
                source.addr, source.stag
            );
        }
        // 2. RDMA Read it.
        s.data.bytes_mut()[..len].fill(0);
        s.data.sges(0, len, 1, &mut sges);
        s.qp.read(READ, &sges, source.addr, source.stag)?;
        // (BytesTransferred is defined for receives only, P21: the data
        // is checked instead.)
        s.wait(READ, None).map_err(|e| ended(ping, e))?;
        if args.verbose {
            println!("server ping data: {}", text(&s.data.bytes()[..len]));
        }
        if args.validate {
            let mut want = vec![0_u8; len];
            pattern(ping, &mut want);
            if s.data.bytes()[..len] != want[..] {
                return Err(format!(
                    "ping {ping}: read data is not rping's text (starts {})",
                    hex_head(s.data.bytes())
                ));
            }
        }
        // "Go ahead".
        s.send_info(Info {
            addr: 0,
            stag: 0,
            len: 0,
        })?;
        // 3. The client's sink.
        let sink = s
            .receive_info(Some(connector))
            .map_err(|e| ended(ping, e))?;
        s.wait(SEND, None).map_err(|e| ended(ping, e))?;
        // 4. RDMA Write the echo: strlen + 1 bytes, as rping.
        let echo = s.data.bytes()[..len]
            .iter()
            .position(|&b| b == 0)
            .map_or(len, |n| n + 1);
        if echo > sink.len as usize {
            return Err(format!(
                "ping {ping}: sink of {} bytes, echo of {echo}",
                sink.len
            ));
        }
        s.data.sges(0, echo, 1, &mut sges);
        s.qp.write(WRITE, &sges, sink.addr, sink.stag)?;
        s.wait(WRITE, None).map_err(|e| ended(ping, e))?;
        s.send_info(Info {
            addr: 0,
            stag: 0,
            len: 0,
        })?;
        s.wait(SEND, None).map_err(|e| ended(ping, e))?;
        moved += (len + echo) as u64;
        ping += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "server: connection {number}: {ping} pings, {moved} bytes read and written in {secs:.3} s ({:.3} MB/s); the client disconnected",
        megabytes_per_second(moved, secs)
    );
    if let Some(count) = args.count
        && ping != count
    {
        return Err(format!(
            "connection {number}: {ping} pings, -C asked {count}"
        ));
    }
    if ping == 0 {
        return Err(format!("connection {number}: no ping"));
    }
    Ok((ping, moved))
}

fn ended(ping: u32, e: Ended) -> String {
    match e {
        Ended::Disconnected => format!("ping {ping}: the client disconnected mid-ping"),
        Ended::Failed(why) => format!("ping {ping}: {why}"),
    }
}

fn server(args: &Args) -> Result<String, String> {
    let adapter = Adapter::open_iwarp(args.ip)?;
    let (listener, port) = Listener::listen(&adapter, args.port)?;
    let [a, b, c, d] = args.ip;
    println!("server: listening on {a}.{b}.{c}.{d}:{port} (iWARP over TCP)");
    if let Some(file) = &args.port_file {
        std::fs::write(file, format!("{port}\n")).map_err(|e| format!("{file}: {e}"))?;
    }
    let mut total = (0_u32, 0_u64);
    let mut failure = None;
    for n in 1..=args.connections {
        match serve_one(&listener, &adapter, args, n) {
            Ok((pings, bytes)) => {
                total.0 += pings;
                total.1 += bytes;
            }
            Err(why) => {
                failure = Some(format!("connection {n}: {why}"));
                break;
            }
        }
    }
    listener.close()?;
    adapter.close()?;
    match failure {
        Some(why) => Err(why),
        None => Ok(format!(
            "{} connection(s), {} pings, {} bytes{}",
            args.connections,
            total.0,
            total.1,
            if args.validate { ", data verified" } else { "" }
        )),
    }
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

fn client(args: &Args) -> Result<String, String> {
    let adapter = Adapter::open_iwarp([127, 0, 0, 1])?;
    let mut session = Session::open(&adapter, args.size, true, args.timeout)?;
    let connector = match session
        .post_receive()
        .and_then(|()| Connector::new(&adapter))
    {
        Ok(connector) => connector,
        Err(why) => {
            // Every object must be closed before the adapter can be.
            session.close()?;
            adapter.close()?;
            return Err(why);
        }
    };
    let outcome = client_connected(&mut session, &connector, &adapter, args);
    let ended = end_connection(outcome, connector, session);
    let adapter_closed = adapter.close();
    let result = ended?;
    adapter_closed?;
    Ok(result)
}

fn client_connected(
    conn: &mut Session,
    connector: &Connector,
    adapter: &Adapter,
    args: &Args,
) -> Result<String, String> {
    let [a, b, c, d] = args.ip;
    connector.connect(adapter, &conn.qp, (args.ip, args.port), READ_LIMIT)?;
    std::thread::sleep(args.rtr_delay);
    connector.complete()?;
    let (ird, ord) = connector.read_limits()?;
    println!(
        "client: connected to {a}.{b}.{c}.{d}:{} (inbound read limit {ird}, outbound {ord})",
        args.port
    );
    let size = args.size;
    let count = args.count.unwrap_or(1);
    let len = u32::try_from(size).map_err(|_| "size".to_owned())?;
    let started = Instant::now();
    for ping in 0..count {
        let start = conn.start.as_mut().ok_or("no start buffer")?;
        pattern(ping, &mut start.bytes_mut()[..size]);
        let source = Info {
            addr: start.address(0),
            stag: start.remote_token(),
            len,
        };
        conn.data.bytes_mut()[..size].fill(0);
        let sink = Info {
            addr: conn.data.address(0),
            stag: conn.data.remote_token(),
            len,
        };
        if args.verbose {
            println!(
                "client: ping {ping} source addr {:#x} stag {:#010x}, sink addr {:#x} stag {:#010x}, len {size}",
                source.addr, source.stag, sink.addr, sink.stag
            );
        }
        conn.send_info(source)?;
        conn.receive_info(Some(connector))
            .map_err(|e| ended(ping, e))?;
        conn.wait(SEND, None).map_err(|e| ended(ping, e))?;
        conn.send_info(sink)?;
        conn.receive_info(Some(connector))
            .map_err(|e| ended(ping, e))?;
        conn.wait(SEND, None).map_err(|e| ended(ping, e))?;
        let start = conn.start.as_ref().ok_or("no start buffer")?;
        if args.validate && start.bytes()[..size] != conn.data.bytes()[..size] {
            return Err(format!(
                "ping {ping}: data mismatch (sent {}, echoed {})",
                hex_head(start.bytes()),
                hex_head(conn.data.bytes())
            ));
        }
        if args.verbose {
            println!("ping data: {}", text(&conn.data.bytes()[..size]));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let moved = 2 * u64::from(count) * size as u64;
    Ok(format!(
        "{count} pings of {size} bytes{} in {secs:.3} s ({:.3} MB/s read + written by the server)",
        if args.validate { ", data verified" } else { "" },
        megabytes_per_second(moved, secs)
    ))
}

fn main() -> ExitCode {
    cli::main_with("RPING", parse_args, |args| match args.role {
        Role::Server => ("server", server(args)),
        Role::Client => ("client", client(args)),
    })
}

#[cfg(test)]
mod tests {
    use super::{Info, pattern};

    #[test]
    fn pattern_is_rpings_text() {
        let mut buf = [0xFF_u8; 26];
        pattern(0, &mut buf);
        assert_eq!(&buf[..13], b"rdma-ping-0: ");
        assert_eq!(&buf[13..16], b"ABC");
        assert_eq!(buf[25], 0);
        pattern(59, &mut buf);
        assert_eq!(&buf[..15], b"rdma-ping-59: B");
    }

    #[test]
    fn info_is_big_endian() {
        let mut out = [0_u8; 16];
        Info {
            addr: 0x0102_0304_0506_0708,
            stag: 0x0A0B_0C0D,
            len: 64,
        }
        .encode(&mut out);
        assert_eq!(
            out,
            [1, 2, 3, 4, 5, 6, 7, 8, 0xA, 0xB, 0xC, 0xD, 0, 0, 0, 64]
        );
        let back = Info::decode(&out).map(|i| (i.addr, i.stag, i.len));
        assert_eq!(back, Some((0x0102_0304_0506_0708, 0x0A0B_0C0D, 64)));
    }
}
