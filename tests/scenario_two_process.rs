//! The SMB-Direct-like session of `tests/scenario.rs` between two processes
//! over TCP on loopback, a server on 127.0.0.1 and a client on 127.0.0.2
//! (issue 8, item 5).
//!
//! The test re-executes this test binary twice, once per role, each child
//! running the ignored test [`child_role`] with `SOFTNDK_TWO_PROCESS_ROLE`
//! naming its role:
//!
//! * the **server** opens its adapter with `SoftNdkOpenAdapterEx(127.0.0.1,
//!   1)` (iWARP over TCP), listens on an ephemeral port and prints the port
//!   the listener reports;
//! * the **client** opens its adapter on 127.0.0.2 with plain
//!   `SoftNdkOpenAdapter` and `SOFTNDK_TRANSPORT=iwarp` in its environment,
//!   and connects to the server's port on 127.0.0.1.
//!
//! Both use only the NDK C ABI, through the conformance harness. The session:
//! 255 receive credits of 1364 bytes posted on each side before connecting
//! (over iWARP a Send that finds no receive ends the connection), private
//! data both ways, a negotiate exchange, 2000 full-size Sends under credit
//! flow, six transfers of 64 KiB, 1 MiB and 8 MiB through a client buffer
//! fast-registered with a deferred FastRegister chained to the request Send
//! (the server RDMA-reads it or RDMA-writes into it, in two SGEs, and replies
//! with SendAndInvalidate of the client's token), a graceful disconnect
//! started by the client, the flush of the posted receives, and the close of
//! every object with no provider object left in either process.
//!
//! Every byte is checked by the side that can see it. An RDMA Write's
//! completion over iWARP means the data was sent, not placed, so the client
//! checks what the server wrote only once the server's later reply has
//! arrived (as SMB Direct does); the server checks what it read as soon as
//! its Read completes (a Read completes once its data is placed locally).
//!
//! The parent waits at most [`LIMIT`] for both children, kills both when
//! that passes (and on any failure of its own), and requires both to exit
//! with status 0 after printing their end marker. Each child also ends
//! itself after [`CHILD_LIMIT`], so nothing is left behind if the parent
//! itself dies.

#![allow(
    clippy::cast_possible_truncation,
    clippy::too_many_lines,
    reason = "a test of bounded sizes, written as one session per role"
)]

#[path = "conformance/harness/mod.rs"]
mod harness;
#[path = "common/scenario.rs"]
mod scenario_common;

/// The harness's transport in this binary. No fixture of the harness is
/// used: each role opens its own adapter on the wire. `Local` keeps the
/// harness from its same-process aids for iWARP (such as waiting, in
/// `Buffer::bytes`, for this process's bytes in flight to land): across two
/// processes they cannot balance, and this test never relies on them (it
/// checks a Write's data only after a later message of the writer).
const TRANSPORT: harness::Transport = harness::Transport::Local;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::*;
use scenario_common::*;
use softndk::abi::*;

// ---------------------------------------------------------------------------
// The two processes
// ---------------------------------------------------------------------------

/// The environment variable naming a child's role (`server`, `client`).
const ROLE: &str = "SOFTNDK_TWO_PROCESS_ROLE";
/// The environment variable giving the client the server's port.
const SERVER_PORT: &str = "SOFTNDK_TWO_PROCESS_PORT";
/// What the server prints before the port its listener reports.
const PORT_MARK: &str = "softndk-two-process-port=";
/// What a role prints once its whole session passed.
const DONE_MARK: &str = "softndk-two-process-done=";
/// The name of the test each child runs.
const CHILD_TEST: &str = "child_role";
/// How long the parent waits for both children, from the server's start.
const LIMIT: Duration = Duration::from_mins(1);
/// How long a child lives at most, whatever happens to its parent.
const CHILD_LIMIT: Duration = Duration::from_secs(90);

/// A child process of the test, killed (and reaped) when dropped unless it
/// has exited; its output is collected by two reader threads.
struct Running {
    role: &'static str,
    child: Child,
    output: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl Running {
    /// Starts this test binary running [`CHILD_TEST`] as `role`, with
    /// `env` added to its environment; every line of its output is sent on
    /// `lines` too.
    fn spawn(role: &'static str, env: &[(&str, &str)], lines: &mpsc::Sender<String>) -> Self {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut command = Command::new(exe);
        command
            .args([CHILD_TEST, "--exact", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(ROLE, role)
            .env_remove(SERVER_PORT)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn a child process");
        let output = Arc::new(Mutex::new(String::new()));
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let readers = vec![
            collect(stdout, Arc::clone(&output), lines.clone()),
            collect(stderr, Arc::clone(&output), lines.clone()),
        ];
        Self {
            role,
            child,
            output,
            readers,
            status: None,
        }
    }

    /// Whether the child has exited (recording its status).
    fn exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status.is_some()
    }

    /// Kills the child if it still runs, and reaps it.
    fn stop(&mut self) {
        if !self.exited() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Everything the child printed (after it exited: once its readers
    /// reached the end of its output).
    fn output(&mut self) -> String {
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        self.output.lock().unwrap().clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A thread reading `from` line by line into `into` and onto `lines`.
fn collect(
    from: impl Read + Send + 'static,
    into: Arc<Mutex<String>>,
    lines: mpsc::Sender<String>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            {
                let mut all = into.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
            // The parent stops listening once it has the port.
            let _ = lines.send(line);
        }
    })
}

/// The port in a line of the server's output, if the line announces it
/// (libtest may print the test's name on the same line).
fn announced_port(line: &str) -> Option<u16> {
    let at = line.find(PORT_MARK)? + PORT_MARK.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[test]
fn smb_direct_like_session_between_two_processes_over_tcp() {
    let deadline = Instant::now() + LIMIT;
    let (lines, server_lines) = mpsc::channel();
    let mut server = Running::spawn("server", &[], &lines);
    // The port the server's listener reports, once it is listening.
    let port = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = server_lines.recv_timeout(left) else {
            server.stop();
            let output = server.output();
            panic!(
                "the server announced no port (status {:?}):\n{output}",
                server.status
            );
        };
        if let Some(port) = announced_port(&line) {
            break port;
        }
    };
    assert_ne!(port, 0, "the listener reports the port it was given");
    drop(server_lines); // the readers' later sends fail harmlessly
    let (client_lines, _) = mpsc::channel();
    let port = port.to_string();
    let mut client = Running::spawn(
        "client",
        &[(SERVER_PORT, port.as_str()), ("SOFTNDK_TRANSPORT", "iwarp")],
        &client_lines,
    );

    // Both must exit by the deadline; every wait is bounded by it.
    while !(server.exited() && client.exited()) {
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let in_time = server.exited() && client.exited();
    server.stop();
    client.stop();
    let server_output = server.output();
    let client_output = client.output();
    let report = format!(
        "server ({:?}):\n{server_output}\nclient ({:?}):\n{client_output}",
        server.status, client.status
    );
    assert!(
        in_time,
        "the session did not end within {LIMIT:?}\n{report}"
    );
    for (role, status, output) in [
        (server.role, server.status, &server_output),
        (client.role, client.status, &client_output),
    ] {
        assert!(
            status.is_some_and(|s| s.success()),
            "the {role} failed\n{report}"
        );
        // A filter that matched no test would exit 0 too.
        assert!(
            output.contains(&format!("{DONE_MARK}{role}")),
            "the {role} did not finish its session\n{report}"
        );
    }
}

/// One role of the two-process session, run in a child process by
/// [`smb_direct_like_session_between_two_processes_over_tcp`].
#[test]
#[ignore = "a child process's role in the two-process scenario, which runs it"]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        eprintln!("{ROLE} is not set: nothing to do outside the two-process test");
        return;
    };
    // Whatever happens to the parent, this process ends.
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_LIMIT);
        eprintln!("the {ROLE} child ran out of time");
        std::process::exit(3);
    });
    match role.as_str() {
        "server" => server(),
        "client" => client(),
        other => panic!("unknown role {other}"),
    }
    println!("\n{DONE_MARK}{role}");
    std::io::stdout().flush().unwrap();
}

// ---------------------------------------------------------------------------
// The session: what both roles share
// ---------------------------------------------------------------------------

/// The transfers: size, and whether the server RDMA-reads the client's
/// buffer (a "write" request) or RDMA-writes into it (a "read" request).
const ROUNDS: [(usize, bool); 6] = [
    (64 << 10, false),
    (1 << 20, true),
    (8 << 20, false),
    (64 << 10, true),
    (1 << 20, false),
    (8 << 20, true),
];
/// The offset of the client's buffer into its first page, per round.
fn first_byte_offset(round: usize) -> usize {
    if round < 3 { 0 } else { 0x234 }
}

const CLIENT: usize = 0xC11E;
const SERVER: usize = 0x5E7E;

/// Bytes distinct at every 8-byte word of a transfer and per seed, so that
/// data placed at a wrong offset (even a multiple of 64 KiB away) is seen.
fn payload(len: usize, seed: u8) -> Vec<u8> {
    let mut bytes = vec![0_u8; len];
    for (word, chunk) in bytes.chunks_mut(8).enumerate() {
        // splitmix64 of the seed and the word's index.
        let mut z = (u64::from(seed) << 48 ^ word as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
    bytes
}

/// What the client's buffer holds for the server to read in `round`.
fn client_payload(round: usize, len: usize) -> Vec<u8> {
    payload(len, round as u8)
}

/// What the server writes into the client's buffer in `round`.
fn server_payload(round: usize, len: usize) -> Vec<u8> {
    payload(len, 0x80 | round as u8)
}

/// One side's receive buffers ([`Slots`]), consumed in order (receives
/// complete in order, P23).
struct Receives {
    slots: Slots,
    next: usize,
}

impl Receives {
    fn new(pd: &Pd) -> Self {
        Self {
            slots: Slots::new(pd),
            next: 0,
        }
    }

    fn post_all(&self, qp: &Qp) {
        self.slots.post_all(qp);
    }

    /// Takes the next receive's completion `r`: checks it is the next slot
    /// and that it holds `len` bytes, returns them and reposts the slot.
    fn take(&mut self, qp: &Qp, r: &NdkResultEx, len: usize) -> Vec<u8> {
        let slot = self.next;
        assert_eq!(
            r.request_context as usize, slot,
            "receives complete in order (P23)"
        );
        assert_eq!(r.bytes_transferred as usize, len, "length of a message");
        let bytes = self.slots.slot_bytes(slot, len).to_vec();
        assert_success!(qp.receive(slot, &[self.slots.sge(slot)]));
        self.next = (slot + 1) % CREDITS;
        bytes
    }
}

/// A side's QP, its CQ and the completions polled but not yet consumed.
struct Queue<'a> {
    cq: &'a Cq,
    qp: &'a Qp,
    context: usize,
    backlog: Vec<NdkResultEx>,
}

impl<'a> Queue<'a> {
    /// The completions of `qp` (context `context`) on `cq`, none kept yet.
    fn new(cq: &'a Cq, qp: &'a Qp, context: usize) -> Self {
        Self {
            cq,
            qp,
            context,
            backlog: Vec::new(),
        }
    }

    /// The oldest completion of `kind`; asserts it succeeded. A failed
    /// completion of any kind fails the session.
    fn expect(&mut self, kind: NdkOperationType) -> NdkResultEx {
        expect_completion(self.cq, &mut self.backlog, self.context, kind)
    }

    /// Sends `sge` with `context` and waits for its completion.
    fn send(&mut self, context: usize, sge: NdkSge) {
        assert_success!(self.qp.send(context, &[sge], 0));
        let done = self.expect(NdkOperationType::SEND);
        assert_eq!(done.request_context as usize, context);
    }

    /// Asserts every completion was consumed.
    fn assert_drained(&self) {
        assert!(self.backlog.is_empty(), "unconsumed: {:?}", self.backlog);
        assert!(self.cq.poll(16).is_empty(), "unreaped completions");
    }
}

fn loopback() -> Addr {
    Addr::v4([127, 0, 0, 1], 0)
}

// ---------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------

/// What each role opens on its adapter before it connects: a CQ, a PD, a
/// QP with `context` and its receive credits, posted.
fn open_session(adapter: &Adapter, context: usize) -> (Cq, Pd, Qp, Receives) {
    let cq = adapter.cq(4096);
    let pd = adapter.pd();
    let own = RecvQueue::Own { depth: 256, sge: 1 };
    let qp = pd
        .try_qp(&cq, &cq, own, context, 512, 2, 0)
        .expect("the role's QP");
    let receives = Receives::new(&pd);
    receives.post_all(&qp);
    (cq, pd, qp, receives)
}

/// The private data the peer sent with its Connect or Accept (`whose`),
/// as GetConnectionData reports it.
fn expect_private_data(conn: &Connector, expected: &[u8], whose: &str) {
    let (status, _, _, data, len) = conn.connection_data(64);
    assert_success!(status);
    assert_eq!(&data[..len as usize], expected, "{whose} private data");
}

/// Once a role's connector is disconnected, every receive it still had
/// posted comes back flushed (E3).
fn expect_receives_flushed(cq: &Cq) {
    let flushed = cq.wait_results(CREDITS);
    assert!(
        flushed.iter().all(|r| r.status == STATUS_CANCELLED),
        "the posted receives are flushed (E3): {flushed:?}"
    );
}

/// Closes what [`open_session`] opened (after the role's memory), the
/// adapter last, every close L18 checked; then no provider object of the
/// `role` is left.
fn close_session((cq, pd, qp): (Cq, Pd, Qp), adapter: Adapter, before: usize, role: &str) {
    assert_close(qp.close());
    assert_close(cq.close());
    assert_close(pd.close());
    adapter.close();
    assert_eq!(
        softndk::provider::object::live_objects(),
        before,
        "every provider object of the {role} was freed"
    );
}

fn server() {
    let before = softndk::provider::object::live_objects();
    // SoftNdkOpenAdapterEx(127.0.0.1, 1): iWARP over TCP.
    let adapter = Adapter::open_on(loopback(), 1);
    assert!(
        adapter.info().max_transfer_length as usize >= 8 << 20,
        "8 MiB transfers fit"
    );
    // Receive credits before the connection exists.
    let (cq, pd, qp, mut receives) = open_session(&adapter, SERVER);

    let incoming = Incoming::new();
    let listener = adapter.listener(&incoming);
    assert_success!(listener.listen(loopback()), "Listen on an ephemeral port");
    let (status, local, _) = listener.local_address();
    assert_success!(status);
    println!("\n{PORT_MARK}{}", local.port());
    std::io::stdout().flush().unwrap();

    let conn = incoming.wait_nth(1);
    expect_private_data(&conn, b"smb2", "the client's");
    let disconnects = Signal::new();
    let (accept, accepted) = conn.accept(&qp, 16, 16, b"ok", &disconnects);
    assert_success!(accepted.outcome(accept), "Accept");

    let mut q = Queue::new(&cq, &qp, SERVER);
    let mut sender = Sender::new(&pd);

    // --- Negotiate ----------------------------------------------------------
    let r = q.expect(NdkOperationType::RECEIVE);
    assert_eq!(receives.take(&qp, &r, 36), message(b'N', 0, 36));
    let sge = sender.stage(&message(b'n', 0, 32));
    q.send(2, sge);

    // --- The stream: consume, check, repost, grant credits back -------------
    let mut ungranted = 0_usize;
    for received in 0..STREAM {
        let r = q.expect(NdkOperationType::RECEIVE);
        assert_eq!(
            receives.take(&qp, &r, MESSAGE),
            message(b'D', received as u32, MESSAGE),
            "message {received}"
        );
        ungranted += 1;
        if ungranted == GRANT_EVERY || received + 1 == STREAM {
            let sge = sender.stage(&message(b'G', ungranted as u32, 24));
            q.send(3, sge);
            ungranted = 0;
        }
    }

    // --- Transfers ----------------------------------------------------------
    let mut data = Buffer::new(8 << 20, 0, 0);
    let mr = pd.mr(false);
    assert_success!(mr.register(&mut data, MR_FLAG_LOCAL_WRITE | MR_FLAG_REMOTE_READ));
    for (round, (size, server_reads)) in ROUNDS.into_iter().enumerate() {
        let r = q.expect(NdkOperationType::RECEIVE);
        let request = receives.take(&qp, &r, 32);
        assert_eq!(
            request[..5],
            message(b'R', round as u32, 32)[..5],
            "request {round}"
        );
        let remote = u64::from_le_bytes(request[8..16].try_into().unwrap());
        let token = u32::from_le_bytes(request[16..20].try_into().unwrap());
        let length = u64::from_le_bytes(request[20..28].try_into().unwrap()) as usize;
        assert_eq!(length, size, "round {round}'s size");
        assert_eq!(
            remote % PAGE as u64,
            first_byte_offset(round) as u64,
            "the client's buffer starts at its offset into a page"
        );

        // The data moves in two halves (two SGEs).
        let half = length / 2;
        let sges = [
            data.sge(0, half as u32, mr.local_token()),
            data.sge(half, (length - half) as u32, mr.local_token()),
        ];
        if server_reads {
            data.bytes_mut()[..length].fill(0xEE);
            assert_success!(qp.read(30, &sges, remote, token, 0));
            q.expect(NdkOperationType::READ);
            // A Read completes once its data is placed here.
            assert!(
                data.bytes()[..length] == client_payload(round, length)[..],
                "RDMA Read of round {round}"
            );
        } else {
            data.bytes_mut()[..length].copy_from_slice(&server_payload(round, length));
            assert_success!(qp.write(31, &sges, remote, token, 0));
            // Sent, not yet known to be placed: the client checks the data
            // once the reply below has reached it.
            q.expect(NdkOperationType::WRITE);
        }

        let sge = sender.stage(&message(b'r', round as u32, 40));
        assert_success!(qp.send_and_invalidate(32, &[sge], 0, token));
        let sent = q.expect(NdkOperationType::SEND);
        assert_eq!(
            sent.request_context as usize, 32,
            "SendAndInvalidate completes as a Send (P22)"
        );
    }
    q.assert_drained();

    // --- The client disconnects; then this side -----------------------------
    assert_success!(disconnects.wait(), "the client's disconnect is seen (X2)");
    let (status, done) = conn.disconnect();
    assert_success!(done.outcome(status), "server Disconnect");
    expect_receives_flushed(&cq);

    assert_close(conn.close());
    assert_close(listener.close());
    assert_close(mr.close());
    assert_close(receives.slots.mr.close());
    assert_close(sender.mr.close());
    close_session((cq, pd, qp), adapter, before, "server");
}

// ---------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------

fn client() {
    let before = softndk::provider::object::live_objects();
    let port: u16 = std::env::var(SERVER_PORT)
        .expect("the server's port")
        .parse()
        .expect("a port number");
    assert_eq!(
        std::env::var("SOFTNDK_TRANSPORT").as_deref(),
        Ok("iwarp"),
        "the client's plain SoftNdkOpenAdapter opens on the wire"
    );
    // Both processes on 127.0.0.1: each fabric picks its ephemeral ports
    // from 49152 on, and over iWARP the ND port is the TCP port (N30), so
    // the client's first pick is the port the server's listener holds; its
    // Connect moves on to the next (it used to fail with
    // STATUS_SHARING_VIOLATION).
    let local = Addr::v4([127, 0, 0, 1], 0);
    let adapter = Adapter::open(local);
    let (cq, pd, qp, mut receives) = open_session(&adapter, CLIENT);

    let conn = adapter.connector();
    let (status, connected) = conn.connect(&qp, local, loopback().with_port(port), 16, 16, b"smb2");
    assert_success!(connected.outcome(status), "Connect");
    expect_private_data(&conn, b"ok", "the server's");
    let disconnects = Signal::new();
    assert_success!(conn.complete_connect(&disconnects), "CompleteConnect");

    let mut q = Queue::new(&cq, &qp, CLIENT);
    let mut sender = Sender::new(&pd);

    // --- Negotiate ----------------------------------------------------------
    let sge = sender.stage(&message(b'N', 0, 36));
    q.send(1, sge);
    let r = q.expect(NdkOperationType::RECEIVE);
    assert_eq!(receives.take(&qp, &r, 32), message(b'n', 0, 32));

    // --- The stream under credit flow ---------------------------------------
    let mut credits = CREDITS;
    let mut sent = 0_usize;
    while sent < STREAM || credits < CREDITS {
        while credits > 0 && sent < STREAM {
            let sge = sender.stage(&message(b'D', sent as u32, MESSAGE));
            q.send(10_000 + sent, sge);
            credits -= 1;
            sent += 1;
        }
        // Out of credits, or everything sent: wait for a grant.
        let g = q.expect(NdkOperationType::RECEIVE);
        let grant = receives.take(&qp, &g, 24);
        let granted = u32::from_le_bytes(grant[1..5].try_into().unwrap()) as usize;
        assert_eq!(grant, message(b'G', granted as u32, 24));
        credits += granted;
        assert!(credits <= CREDITS, "no more credits than receives");
    }

    // --- Transfers through a fast-registered buffer -------------------------
    let fast = pd.mr(true);
    assert_success!(fast.init_fast(((8 << 20) / PAGE) as u32 + 1, true));
    let token_local = fast.local_token();
    let token_remote = fast.remote_token();
    for (round, (size, server_reads)) in ROUNDS.into_iter().enumerate() {
        let fbo = first_byte_offset(round);
        let mut buffer = Buffer::new(size, fbo, 0xEE);
        if server_reads {
            buffer
                .bytes_mut()
                .copy_from_slice(&client_payload(round, size));
        }
        let (status, mut lam, lam_fbo) = adapter.build_lam(&mut buffer);
        assert_success!(status);
        assert_eq!(lam_fbo as usize, fbo);
        let region = ClientRegion::new(&fast, &lam, lam_fbo, size, server_reads);
        // FastRegister (deferred) chained with the request Send (D2).
        register_and_request(&qp, &region, round, |request| sender.stage(request));
        let fr = q.expect(NdkOperationType::FAST_REGISTER);
        assert_eq!(fr.request_context as usize, 20);
        let sent = q.expect(NdkOperationType::SEND);
        assert_eq!(sent.request_context as usize, 21);

        // The reply, with the invalidation of the token.
        let r = q.expect(NdkOperationType::RECEIVE_AND_INVALIDATE);
        assert_eq!(
            r.type_specific_completion_output as u32, token_remote,
            "C2: the invalidated token"
        );
        assert_eq!(receives.take(&qp, &r, 40), message(b'r', round as u32, 40));
        // The reply followed the server's Write on the stream, so the Write
        // is placed by now; a Read left the buffer as it was.
        let expected = if server_reads {
            client_payload(round, size)
        } else {
            server_payload(round, size)
        };
        assert!(
            buffer.bytes() == &expected[..],
            "the client's buffer after round {round} (server reads: {server_reads})"
        );
        // The next round's FastRegister reuses the same tokens (M35).
        assert_eq!(fast.local_token(), token_local);
        assert_eq!(fast.remote_token(), token_remote);
        adapter.release_lam(&mut lam);
    }
    q.assert_drained();

    // --- Graceful disconnect and close of everything ------------------------
    let (status, done) = conn.disconnect();
    assert_success!(done.outcome(status), "client Disconnect (X1)");
    expect_receives_flushed(&cq);

    assert_close(conn.close());
    assert_close(fast.close());
    assert_close(receives.slots.mr.close());
    assert_close(sender.mr.close());
    close_session((cq, pd, qp), adapter, before, "client");
}
