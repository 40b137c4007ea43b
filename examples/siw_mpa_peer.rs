//! The host side of the Linux siw interop checks (`scripts/siw/run.sh`,
//! docs/siw.md): SoftNDK's MPA connection setup (`rnic::iwarp::setup`) over a
//! real TCP connection with siw in a QEMU guest.
//!
//! ```text
//! siw_mpa_peer respond  --listen 127.0.0.1:0 [--port-file F] [--crc] [--timeout S]
//! siw_mpa_peer initiate --connect 127.0.0.1:P [--rtr none|write|read|send|all] [--crc]
//!                       [--expect-fpdu] [--rtr-delay-ms N] [--timeout S]
//! ```
//!
//! * `respond`: siw is the MPA initiator (`rping -c` in the guest towards
//!   10.0.2.2, the host's 127.0.0.1). Prints siw's request field by field and
//!   in hex, accepts it with [`Responder`], then waits for siw's first FPDU
//!   (the rping client's Send of its buffer's address, STag and length) and
//!   parses it with the project's de-framer, DDP and RDMAP parsers.
//! * `initiate`: siw is the MPA responder (`rping -s` in the guest, reached
//!   through QEMU's hostfwd). Sends our request with [`Initiator`] (optionally
//!   offering RTR kinds), prints siw's reply, sends the RTR when one was
//!   chosen, and prints whatever FPDUs siw sends within a second
//!   (`--expect-fpdu`: waits until the timeout for at least one and fails
//!   without: a Read RTR must be answered). `--rtr-delay-ms` holds the RTR
//!   back after the reply: siw's responder installs its RTR receive upcall
//!   only after sending its reply, and an RTR that lands in between is left
//!   unread (docs/iwarp.md).
//!
//! The last line is `PEER-RESULT <mode> PASS|FAIL <why>`; the exit status is
//! 0 only on PASS. Every wait is bounded by `--timeout`.
//!
//! Hook for the data path: both modes end with an [`Established`] (negotiated
//! CRC, IRD/ORD, RTR, `leftover` bytes) on a connected `TcpStream`: that is
//! where the SoftNDK TCP data path takes over to run rping's whole exchange.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::thread::sleep;
use std::time::{Duration, Instant};

use softndk::rnic::iwarp::ddp::DdpHeader;
use softndk::rnic::iwarp::mpa::{Deframer, FrameKind, MAX_ULPDU, MpaFrame, RtrKinds};
use softndk::rnic::iwarp::rdmap::Message;
use softndk::rnic::iwarp::setup::{
    Established, Event, Initiator, InitiatorConfig, Responder, ResponderConfig,
};

/// How long one read waits before the machines' deadlines are checked.
const POLL: Duration = Duration::from_millis(100);
/// How long the initiator listens for siw's FPDUs after the setup.
const LINGER: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Respond,
    Initiate,
}

struct Args {
    mode: Mode,
    addr: String,
    port_file: Option<String>,
    rtr: RtrKinds,
    crc: bool,
    expect_fpdu: bool,
    rtr_delay: Duration,
    timeout: Duration,
}

fn usage() -> String {
    "usage: siw_mpa_peer respond --listen ADDR [--port-file F] [--crc] [--timeout S]\n       \
     siw_mpa_peer initiate --connect ADDR [--rtr none|write|read|send|all] [--crc] [--expect-fpdu] [--rtr-delay-ms N] [--timeout S]"
        .to_owned()
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mode = match it.next().as_deref() {
        Some("respond") => Mode::Respond,
        Some("initiate") => Mode::Initiate,
        _ => return Err(usage()),
    };
    let mut args = Args {
        mode,
        addr: String::new(),
        port_file: None,
        rtr: RtrKinds::empty(),
        crc: false,
        expect_fpdu: false,
        rtr_delay: Duration::ZERO,
        timeout: Duration::from_mins(1),
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" | "--connect" => args.addr = value()?,
            "--port-file" => args.port_file = Some(value()?),
            "--crc" => args.crc = true,
            "--expect-fpdu" => args.expect_fpdu = true,
            "--rtr-delay-ms" => {
                let ms: u64 = value()?
                    .parse()
                    .map_err(|e| format!("--rtr-delay-ms: {e}"))?;
                args.rtr_delay = Duration::from_millis(ms);
            }
            "--timeout" => {
                let secs: u64 = value()?.parse().map_err(|e| format!("--timeout: {e}"))?;
                args.timeout = Duration::from_secs(secs);
            }
            "--rtr" => {
                args.rtr = match value()?.as_str() {
                    "none" => RtrKinds::empty(),
                    "write" => RtrKinds::WRITE,
                    "read" => RtrKinds::READ,
                    "send" => RtrKinds::SEND,
                    "all" => RtrKinds::all(),
                    other => return Err(format!("--rtr {other}: none|write|read|send|all")),
                }
            }
            _ => return Err(usage()),
        }
    }
    if args.addr.is_empty() {
        return Err(usage());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let (name, result) = match args.mode {
        Mode::Respond => ("respond", respond(&args)),
        Mode::Initiate => ("initiate", initiate(&args)),
    };
    match result {
        Ok(why) => {
            println!("PEER-RESULT {name} PASS {why}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("PEER-RESULT {name} FAIL {why}");
            ExitCode::FAILURE
        }
    }
}

/// Milliseconds since `start`: the machines' `now`.
fn ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Hex, 4-byte groups, 32 bytes a line, each line indented and offset.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (line, chunk) in bytes.chunks(32).enumerate() {
        let _ = write!(out, "    {:04x}:", line * 32);
        for group in chunk.chunks(4) {
            out.push(' ');
            for byte in group {
                let _ = write!(out, "{byte:02x}");
            }
        }
        out.push('\n');
    }
    out
}

/// Reads what is there within [`POLL`]: `Ok(None)` when nothing came, an
/// error when the peer closed.
fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> Result<Option<usize>, String> {
    match stream.read(buf) {
        Ok(0) => Err("peer closed the connection".to_owned()),
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
        Err(e) => Err(format!("read: {e}")),
    }
}

fn print_frame(what: &str, raw: &[u8], kind: FrameKind) {
    match MpaFrame::parse(raw, kind) {
        Ok((frame, len)) => {
            println!("PEER {what} ({len} bytes):");
            print!("{}", hex(raw.get(..len).unwrap_or(raw)));
            println!(
                "PEER {what}: revision {} markers {} crc {} reject {} reserved_flags {:#04x}",
                frame.revision, frame.markers, frame.crc, frame.reject, frame.reserved_flags
            );
            match frame.enhanced {
                Some(block) => println!(
                    "PEER {what}: IRD {} ORD {} peer_to_peer {} rtr {:?}",
                    block.ird, block.ord, block.peer_to_peer, block.rtr
                ),
                None => println!("PEER {what}: no IRD/ORD block"),
            }
            println!(
                "PEER {what}: private data {} bytes{}",
                frame.private_data.len(),
                if frame.private_data.is_empty() {
                    String::new()
                } else {
                    format!(":\n{}", hex(frame.private_data).trim_end())
                }
            );
        }
        Err(e) => {
            println!("PEER {what}: does not parse: {e:?}");
            print!("{}", hex(raw));
        }
    }
}

fn print_established(established: &Established) {
    let n = &established.negotiated;
    println!(
        "PEER established: revision {} crc {} ird {:?} ord {:?} rtr {:?} receive_first {} leftover {} bytes",
        established.revision,
        n.crc,
        n.ird,
        n.ord,
        n.rtr,
        established.receive_first,
        established.leftover.len()
    );
}

/// Parses one ULPDU with the project's DDP and RDMAP parsers and prints it;
/// whether it is a valid RDMAP message.
fn print_ulpdu(index: usize, ulpdu: &[u8]) -> bool {
    println!("PEER FPDU {index}: ULPDU {} bytes:", ulpdu.len());
    print!("{}", hex(ulpdu));
    match DdpHeader::parse(ulpdu) {
        Ok((header, payload)) => println!(
            "PEER FPDU {index}: DDP last {} ulp_ctrl {:#04x} {:?}, payload {} bytes",
            header.last,
            header.ulp_ctrl,
            header.buffer,
            payload.len()
        ),
        Err(e) => println!("PEER FPDU {index}: DDP header rejected: {e:?}"),
    }
    match Message::parse(ulpdu, None) {
        Ok(message) => {
            println!(
                "PEER FPDU {index}: RDMAP {:?}: {message:?}",
                message.opcode()
            );
            if let Message::Send { payload, .. } = message
                && let [a @ .., k0, k1, k2, k3, l0, l1, l2, l3] = payload
                && let Ok(addr) = <[u8; 8]>::try_from(a)
            {
                // rping's struct rping_rdma_info: buf, rkey, size (big-endian).
                println!(
                    "PEER FPDU {index}: as rping's rdma info: addr {:#x} rkey {:#x} size {}",
                    u64::from_be_bytes(addr),
                    u32::from_be_bytes([*k0, *k1, *k2, *k3]),
                    u32::from_be_bytes([*l0, *l1, *l2, *l3])
                );
            }
            true
        }
        Err(e) => {
            println!("PEER FPDU {index}: RDMAP rejected: {e:?}");
            false
        }
    }
}

/// Feeds `input` to the de-framer and prints it raw (length, pad and CRC
/// fields included) and every FPDU it completes.
fn deframe(
    deframer: &mut Deframer,
    mut input: &[u8],
    count: &mut usize,
    valid: &mut bool,
) -> Result<(), String> {
    if !input.is_empty() {
        println!("PEER {} bytes from siw after the setup:", input.len());
        print!("{}", hex(input));
    }
    while !input.is_empty() {
        let step = deframer
            .feed(input)
            .map_err(|e| format!("de-framer: {e:?}"))?;
        if let Some(ulpdu) = step.ulpdu {
            *count += 1;
            *valid &= print_ulpdu(*count, ulpdu);
        }
        input = input.get(step.consumed..).unwrap_or_default();
    }
    Ok(())
}

fn respond(args: &Args) -> Result<String, String> {
    let listener = TcpListener::bind(&args.addr).map_err(|e| format!("bind: {e}"))?;
    let local = listener.local_addr().map_err(|e| format!("{e}"))?;
    println!("PEER listening on {local}");
    if let Some(file) = &args.port_file {
        std::fs::write(file, format!("{}\n", local.port())).map_err(|e| format!("{file}: {e}"))?;
    }
    listener.set_nonblocking(true).map_err(|e| format!("{e}"))?;
    let deadline = Instant::now() + args.timeout;
    let (mut stream, from) = loop {
        match listener.accept() {
            Ok(pair) => break pair,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err("no connection before the timeout".to_owned());
                }
                sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    println!("PEER connection from {from}");
    configure(&stream)?;
    let start = Instant::now();
    let config = ResponderConfig {
        crc: args.crc,
        ..ResponderConfig::default()
    };
    let mut responder = Responder::new(config, 0);
    let mut raw = Vec::new();
    let mut buf = vec![0_u8; 65536];
    let established = loop {
        if Instant::now() >= deadline {
            return Err("setup not done before the timeout".to_owned());
        }
        let Some(n) = read_some(&mut stream, &mut buf)? else {
            responder
                .tick(ms(start))
                .map_err(|e| format!("setup: {e:?}"))?;
            continue;
        };
        let input = buf.get(..n).unwrap_or_default();
        raw.extend_from_slice(input);
        let event = responder.receive(input, ms(start));
        let event = match event {
            Ok(Some(Event::Request(request))) => {
                print_frame("siw's request", &raw, FrameKind::Request);
                // Mirror siw's limits: our IRD covers its ORD, our ORD its IRD.
                let ird = request.ord.unwrap_or(1).max(1);
                let ord = request.ird.unwrap_or(1).max(1);
                let event = responder.accept(ird, ord, &[], ms(start));
                print_frame("our reply", responder.output(), FrameKind::Reply);
                event
            }
            other => other,
        };
        let sent = send_out(&mut stream, responder.output())?;
        responder.advance_output(sent);
        match event {
            Ok(Some(Event::Established(established))) => break established,
            Ok(Some(other)) => return Err(format!("unexpected event {other:?}")),
            Ok(None) => {}
            Err(e) => {
                print!("{}", hex(&raw));
                return Err(format!("setup: {e:?}"));
            }
        }
    };
    print_established(&established);
    // siw accepted the reply if it now sends FPDUs: rping's client posts a
    // Send with its buffer's address, STag and length.
    let mut deframer = Deframer::new(MAX_ULPDU, established.negotiated.crc);
    let mut count = 0;
    let mut valid = true;
    deframe(&mut deframer, &established.leftover, &mut count, &mut valid)?;
    while count == 0 {
        if Instant::now() >= deadline {
            return Err("no FPDU from siw before the timeout".to_owned());
        }
        if let Some(n) = read_some(&mut stream, &mut buf)? {
            deframe(
                &mut deframer,
                buf.get(..n).unwrap_or_default(),
                &mut count,
                &mut valid,
            )?;
        }
    }
    // Here the data path would take over; this peer just closes.
    if valid {
        Ok(format!(
            "siw accepted our reply and sent {count} FPDU(s) that parse"
        ))
    } else {
        Err("siw's first FPDU does not parse".to_owned())
    }
}

fn configure(stream: &TcpStream) -> Result<(), String> {
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(POLL)))
        .and_then(|()| stream.set_nodelay(true))
        .map_err(|e| format!("socket options: {e}"))
}

/// Writes all of a setup side's pending `output`; how many bytes, for its
/// `advance_output`.
fn send_out(stream: &mut TcpStream, output: &[u8]) -> Result<usize, String> {
    stream
        .write_all(output)
        .map_err(|e| format!("write: {e}"))?;
    Ok(output.len())
}

/// Why one initiator attempt ended without a verdict.
enum Attempt {
    /// The connection closed before any byte of a reply: the guest's listener
    /// is not up yet (QEMU's hostfwd accepted, the guest refused). Retry.
    NotListening,
    /// A verdict.
    Done(Result<String, String>),
}

fn initiate(args: &Args) -> Result<String, String> {
    let addr: SocketAddr = args
        .addr
        .parse()
        .map_err(|e| format!("{}: {e}", args.addr))?;
    let deadline = Instant::now() + args.timeout;
    let mut attempt = 0_u32;
    loop {
        attempt += 1;
        if let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            match initiate_once(args, stream, deadline)? {
                Attempt::Done(result) => return result,
                Attempt::NotListening => {}
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("siw did not answer in {attempt} attempt(s)"));
        }
        sleep(Duration::from_millis(500));
    }
}

fn initiate_once(args: &Args, mut stream: TcpStream, deadline: Instant) -> Result<Attempt, String> {
    configure(&stream)?;
    let config = InitiatorConfig {
        crc: args.crc,
        rtr: args.rtr,
        ..InitiatorConfig::default()
    };
    let start = Instant::now();
    let mut initiator =
        Initiator::new(&config, &[], 0).map_err(|e| format!("Initiator::new: {e:?}"))?;
    let request = initiator.output().to_vec();
    match send_out(&mut stream, initiator.output()) {
        Ok(sent) => initiator.advance_output(sent),
        Err(_) => return Ok(Attempt::NotListening),
    }
    let mut raw = Vec::new();
    let mut buf = vec![0_u8; 65536];
    let established = loop {
        if Instant::now() >= deadline {
            return Ok(Attempt::Done(Err("no reply before the timeout".to_owned())));
        }
        let n = match read_some(&mut stream, &mut buf) {
            Ok(Some(n)) => n,
            Ok(None) => {
                if let Err(e) = initiator.tick(ms(start)) {
                    return Ok(Attempt::Done(Err(format!("setup: {e:?}"))));
                }
                continue;
            }
            Err(_) if raw.is_empty() => return Ok(Attempt::NotListening),
            Err(e) => {
                print!("{}", hex(&raw));
                return Ok(Attempt::Done(Err(e)));
            }
        };
        if raw.is_empty() {
            print_frame("our request", &request, FrameKind::Request);
        }
        let input = buf.get(..n).unwrap_or_default();
        raw.extend_from_slice(input);
        let event = initiator.receive(input, ms(start));
        let pending = initiator.output().to_vec();
        if matches!(event, Ok(Some(Event::Established(_)))) && !pending.is_empty() {
            sleep(args.rtr_delay);
        }
        let sent = send_out(&mut stream, initiator.output())?;
        initiator.advance_output(sent);
        match event {
            Ok(None) => {}
            Ok(Some(Event::Established(established))) => {
                print_frame("siw's reply", &raw, FrameKind::Reply);
                if !pending.is_empty() {
                    println!("PEER our RTR FPDU ({} bytes):", pending.len());
                    print!("{}", hex(&pending));
                }
                break established;
            }
            Ok(Some(Event::Rejected { private_data })) => {
                print_frame("siw's reply", &raw, FrameKind::Reply);
                return Ok(Attempt::Done(Err(format!(
                    "siw rejected the request ({} bytes of private data)",
                    private_data.len()
                ))));
            }
            Ok(Some(other)) => {
                return Ok(Attempt::Done(Err(format!("unexpected event {other:?}"))));
            }
            Err(e) => {
                print_frame("siw's reply", &raw, FrameKind::Reply);
                if !pending.is_empty() {
                    println!("PEER our Terminate FPDU ({} bytes):", pending.len());
                    print!("{}", hex(&pending));
                }
                return Ok(Attempt::Done(Err(format!("setup: {e:?}"))));
            }
        }
    };
    after_setup(args, &mut stream, &established, deadline)
}

/// The initiator after the setup: prints what siw sends next without being
/// asked (a Read RTR's zero-length Read Response; nothing otherwise: siw
/// waits for our first FPDU).
fn after_setup(
    args: &Args,
    stream: &mut TcpStream,
    established: &Established,
    deadline: Instant,
) -> Result<Attempt, String> {
    print_established(established);
    let mut buf = vec![0_u8; 65536];
    let mut deframer = Deframer::new(MAX_ULPDU, established.negotiated.crc);
    let mut count = 0;
    let mut valid = true;
    deframe(&mut deframer, &established.leftover, &mut count, &mut valid)?;
    let linger = Instant::now() + LINGER;
    while Instant::now() < linger || (args.expect_fpdu && count == 0 && Instant::now() < deadline) {
        match read_some(stream, &mut buf) {
            Ok(Some(n)) => deframe(
                &mut deframer,
                buf.get(..n).unwrap_or_default(),
                &mut count,
                &mut valid,
            )?,
            Ok(None) => {}
            Err(e) => {
                println!("PEER after setup: {e}");
                break;
            }
        }
    }
    println!("PEER siw sent {count} FPDU(s) after its reply");
    if args.expect_fpdu && count == 0 {
        return Ok(Attempt::Done(Err(
            "no FPDU from siw after the setup".to_owned()
        )));
    }
    Ok(Attempt::Done(if valid {
        Ok("siw accepted our request; its reply passes our checks".to_owned())
    } else {
        Err("an FPDU from siw does not parse".to_owned())
    }))
}
