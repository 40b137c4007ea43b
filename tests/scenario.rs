//! An SMB-Direct-like session between two adapters, through the C ABI only.
//!
//! * receive credits: each side posts 255 receives of 1364 bytes;
//! * a negotiate exchange;
//! * a stream of 1364-byte sends under credit flow (the receiver grants
//!   credits back as it reposts its receives);
//! * transfers of 64 KiB, 1 MiB and 8 MiB: the client fast-registers its
//!   buffer (deferred, chained with the request Send), the server RDMA-writes
//!   into it (a "read" request) or RDMA-reads from it (a "write" request) and
//!   replies with SendAndInvalidate; the client sees the invalidated token;
//! * graceful disconnect and the close of every object, after which no
//!   provider object is left allocated.
//!
//! Every byte and every completion is checked. This file is its own test
//! binary so that the leak count sees only its objects.

#![allow(
    clippy::cast_possible_truncation,
    clippy::too_many_lines,
    reason = "a test of bounded sizes, written as one session from start to end"
)]

#[path = "conformance/harness/mod.rs"]
mod harness;
#[path = "common/scenario.rs"]
mod scenario_common;

/// The transport the scenario's fixture uses (`harness::Transport`).
const TRANSPORT: harness::Transport = harness::Transport::Local;

use harness::*;
use scenario_common::*;
use softndk::abi::*;

/// One side's receive buffers.
type Receives = Slots;

const CLIENT: usize = 0xC11E;
const SERVER: usize = 0x5E7E;

#[test]
fn smb_direct_like_session_moves_every_byte_and_leaks_nothing() {
    let before = softndk::provider::object::live_objects();
    let (
        End {
            addr: client_addr,
            adapter: client,
            cq: client_cq,
            pd: client_pd,
        },
        End {
            addr: server_addr,
            adapter: server,
            cq: server_cq,
            pd: server_pd,
        },
    ) = Fixture::new()
        .a_cq(|client| client.cq(4096))
        .b_cq(|server| server.cq(4096))
        .ends();
    let info = client.info();
    assert!(
        info.max_transfer_length as usize >= 8 << 20,
        "8 MiB transfers fit"
    );
    let own = RecvQueue::Own { depth: 256, sge: 1 };
    let client_qp = client_pd
        .try_qp(&client_cq, &client_cq, own, CLIENT, 512, 2, 0)
        .expect("client QP");
    let server_qp = server_pd
        .try_qp(&server_cq, &server_cq, own, SERVER, 512, 2, 0)
        .expect("server QP");

    // Receive credits on both sides before connecting (P8).
    let client_recv = Receives::new(&client_pd);
    let server_recv = Receives::new(&server_pd);
    client_recv.post_all(&client_qp);
    server_recv.post_all(&server_qp);

    // Connect.
    let incoming = Incoming::new();
    let listener = server.listener(&incoming);
    assert_success!(listener.listen(server_addr.with_port(445)));
    let client_conn = client.connector();
    let connecting = client_conn.connect(
        &client_qp,
        client_addr,
        server_addr.with_port(445),
        16,
        16,
        b"smb2",
    );
    let server_conn = incoming.wait_nth(1);
    let (_, _, _, data, len) = server_conn.connection_data(64);
    assert_eq!(&data[..len as usize], b"smb2");
    let conn = Conn::expect_accepted(client_conn, connecting, server_conn, &server_qp, b"ok");

    let mut cb = Vec::new(); // client completion backlog
    let mut sb = Vec::new(); // server completion backlog
    let mut client_send = Sender::new(&client_pd);
    let mut server_send = Sender::new(&server_pd);
    // Next receive slot each side consumes (receives complete in order).
    let mut client_slot = 0_usize;
    let mut server_slot = 0_usize;

    // --- Negotiate ----------------------------------------------------------
    let request = message(b'N', 0, 36);
    let sge = client_send.stage(&request);
    assert_success!(client_qp.send(1, &[sge], 0));
    expect_completion(&client_cq, &mut cb, CLIENT, NdkOperationType::SEND);
    let r = expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::RECEIVE);
    assert_eq!(r.request_context as usize, server_slot);
    assert_eq!(r.bytes_transferred as usize, request.len());
    assert_eq!(
        server_recv.slot_bytes(server_slot, request.len()),
        &request[..]
    );
    assert_success!(server_qp.receive(server_slot, &[server_recv.sge(server_slot)]));
    server_slot = (server_slot + 1) % CREDITS;

    let response = message(b'n', 0, 32);
    let sge = server_send.stage(&response);
    assert_success!(server_qp.send(2, &[sge], 0));
    expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::SEND);
    let r = expect_completion(&client_cq, &mut cb, CLIENT, NdkOperationType::RECEIVE);
    assert_eq!(
        client_recv.slot_bytes(client_slot, response.len()),
        &response[..]
    );
    assert_eq!(r.request_context as usize, client_slot);
    assert_success!(client_qp.receive(client_slot, &[client_recv.sge(client_slot)]));
    client_slot = (client_slot + 1) % CREDITS;

    // --- A stream of full-size messages under credit flow --------------------
    let mut credits = CREDITS;
    let mut sent = 0_usize;
    let mut received = 0_usize;
    let mut ungranted = 0_usize;
    while received < STREAM {
        // The client sends while it has credits.
        while credits > 0 && sent < STREAM {
            let m = message(b'D', sent as u32, MESSAGE);
            let sge = client_send.stage(&m);
            // The staging buffer is reused: wait for each send to complete.
            assert_success!(client_qp.send(10_000 + sent, &[sge], 0));
            let done = expect_completion(&client_cq, &mut cb, CLIENT, NdkOperationType::SEND);
            assert_eq!(done.request_context as usize, 10_000 + sent);
            credits -= 1;
            sent += 1;
        }
        // The server consumes, checks and reposts; grants credits back.
        let r = expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::RECEIVE);
        assert_eq!(
            r.request_context as usize, server_slot,
            "receives complete in order (P23)"
        );
        assert_eq!(r.bytes_transferred as usize, MESSAGE);
        let m = message(b'D', received as u32, MESSAGE);
        assert_eq!(
            server_recv.slot_bytes(server_slot, MESSAGE),
            &m[..],
            "message {received}"
        );
        assert_success!(server_qp.receive(server_slot, &[server_recv.sge(server_slot)]));
        server_slot = (server_slot + 1) % CREDITS;
        received += 1;
        ungranted += 1;
        if ungranted == GRANT_EVERY || received == STREAM {
            let grant = message(b'G', ungranted as u32, 24);
            let sge = server_send.stage(&grant);
            assert_success!(server_qp.send(3, &[sge], 0));
            expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::SEND);
            let g = expect_completion(&client_cq, &mut cb, CLIENT, NdkOperationType::RECEIVE);
            assert_eq!(g.bytes_transferred, 24);
            assert_eq!(client_recv.slot_bytes(client_slot, 24), &grant[..]);
            assert_success!(client_qp.receive(client_slot, &[client_recv.sge(client_slot)]));
            client_slot = (client_slot + 1) % CREDITS;
            credits += ungranted;
            ungranted = 0;
        }
    }
    assert_eq!(sent, STREAM);

    // --- Large transfers through a fast-registered client buffer -------------
    let mut server_data = Buffer::pattern(8 << 20, 0, 0x5A);
    let server_mr = server_pd.mr(false);
    assert_success!(
        server_mr.register(&mut server_data, MR_FLAG_LOCAL_WRITE | MR_FLAG_REMOTE_READ)
    );
    let fast = client_pd.mr(true);
    assert_success!(fast.init_fast(((8 << 20) / PAGE) as u32 + 1, true));
    let token_local = fast.local_token();
    let token_remote = fast.remote_token();

    for (round, size) in [64 << 10, 1 << 20, 8 << 20, 64 << 10, 1 << 20, 8 << 20]
        .into_iter()
        .enumerate()
    {
        let server_reads = round % 2 == 1; // "write" request: server RDMA-reads
        let fbo = if round < 3 { 0 } else { 0x234 };
        let mut client_data = if server_reads {
            Buffer::pattern(size, fbo, round as u8)
        } else {
            Buffer::new(size, fbo, 0)
        };
        let (status, mut lam, lam_fbo) = client.build_lam(&mut client_data);
        assert_success!(status);
        assert_eq!(lam_fbo as usize, fbo);
        let region = ClientRegion::new(&fast, &lam, lam_fbo, size, server_reads);
        // FastRegister (deferred) chained with the request Send (D2).
        let base = register_and_request(&client_qp, &region, round, |request| {
            client_send.stage(request)
        });
        let fr = expect_completion(&client_cq, &mut cb, CLIENT, NdkOperationType::FAST_REGISTER);
        assert_eq!(fr.request_context as usize, 20);
        expect_completion(&client_cq, &mut cb, CLIENT, NdkOperationType::SEND);

        // The server parses the request.
        let r = expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::RECEIVE);
        let got = server_recv.slot_bytes(server_slot, 32).to_vec();
        assert_eq!(r.bytes_transferred, 32);
        assert_success!(server_qp.receive(server_slot, &[server_recv.sge(server_slot)]));
        server_slot = (server_slot + 1) % CREDITS;
        let remote = u64::from_le_bytes(got[8..16].try_into().unwrap());
        let token = u32::from_le_bytes(got[16..20].try_into().unwrap());
        let length = u64::from_le_bytes(got[20..28].try_into().unwrap()) as usize;
        assert_eq!((remote, token, length), (base, token_remote, size));

        // The server moves the data in two halves (two SGEs each side).
        let half = length / 2;
        let sges = [
            server_data.sge(0, half as u32, server_mr.local_token()),
            server_data.sge(half, (length - half) as u32, server_mr.local_token()),
        ];
        if server_reads {
            assert_success!(server_qp.read(30, &sges, remote, token, 0));
            expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::READ);
            assert_eq!(
                &server_data.bytes()[..length],
                client_data.bytes(),
                "RDMA Read of round {round}"
            );
        } else {
            assert_success!(server_qp.write(31, &sges, remote, token, 0));
            expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::WRITE);
            assert_eq!(
                client_data.bytes(),
                &server_data.bytes()[..length],
                "RDMA Write of round {round}"
            );
        }

        // Reply with SendAndInvalidate of the client's token.
        let reply = message(b'r', round as u32, 40);
        let sge = server_send.stage(&reply);
        assert_success!(server_qp.send_and_invalidate(32, &[sge], 0, token));
        let sent = expect_completion(&server_cq, &mut sb, SERVER, NdkOperationType::SEND);
        assert_eq!(
            sent.request_context as usize, 32,
            "SendAndInvalidate completes as a Send (P22)"
        );
        let r = expect_completion(
            &client_cq,
            &mut cb,
            CLIENT,
            NdkOperationType::RECEIVE_AND_INVALIDATE,
        );
        assert_eq!(
            r.type_specific_completion_output as u32, token_remote,
            "C2: the invalidated token"
        );
        assert_eq!(r.bytes_transferred, 40);
        assert_eq!(client_recv.slot_bytes(client_slot, 40), &reply[..]);
        assert_success!(client_qp.receive(client_slot, &[client_recv.sge(client_slot)]));
        client_slot = (client_slot + 1) % CREDITS;

        // The token is invalid now: a further server Write through it fails
        // and would end the connection, so probe nothing; instead the next
        // round's FastRegister reuses the same tokens (M35).
        assert_eq!(fast.local_token(), token_local);
        assert_eq!(fast.remote_token(), token_remote);
        client.release_lam(&mut lam);
    }

    // Everything was reaped.
    assert!(client_cq.poll(16).is_empty() && cb.is_empty());
    assert!(server_cq.poll(16).is_empty() && sb.is_empty());

    // --- Graceful disconnect and close of everything ------------------------
    let (a, a_done) = conn.active.disconnect();
    assert!(
        conn.b_disconnects.wait() == STATUS_SUCCESS,
        "the server learns of the client's disconnect (X2)"
    );
    let (b, b_done) = conn.passive.disconnect();
    assert_success!(a_done.outcome(a), "client Disconnect (X1)");
    assert_success!(b_done.outcome(b), "server Disconnect");
    // The outstanding receives are flushed with the disconnect (E3).
    let flushed = client_cq.wait_results(CREDITS);
    assert!(flushed.iter().all(|r| r.status == STATUS_CANCELLED));
    let flushed = server_cq.wait_results(CREDITS);
    assert!(flushed.iter().all(|r| r.status == STATUS_CANCELLED));

    assert_success!(conn.active.close());
    assert_success!(conn.passive.close());
    listener.close();
    fast.close();
    server_mr.close();
    client_recv.mr.close();
    server_recv.mr.close();
    client_send.mr.close();
    server_send.mr.close();
    client_qp.close();
    server_qp.close();
    client_cq.close();
    server_cq.close();
    client_pd.close();
    server_pd.close();
    client.close();
    server.close();
    assert_eq!(
        softndk::provider::object::live_objects(),
        before,
        "every provider object was freed"
    );
}
