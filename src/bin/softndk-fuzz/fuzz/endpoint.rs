//! Shared endpoints (N9–N11): a thread's local address and port on an
//! adapter that the active connectors of several of its links connect
//! from, closed now and then while connections still go out from it.

use std::ptr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use softndk::abi::{
    NdkConnector, NdkQp, NdkSharedEndpoint, NtStatus, STATUS_ADDRESS_ALREADY_EXISTS,
    STATUS_PENDING, STATUS_SUCCESS, SockAddr, SockAddrIn,
};

use super::fuzzer::{Fuzzer, SetupFailed};
use super::objects::{Link, SOCKADDR_IN_LEN, sockaddr, table};
use super::signal::{Signal, keep, on_create, on_event, on_status};

/// A thread's shared endpoint on one adapter.
pub(super) struct Endpoint {
    pub(super) id: u64,
    pub(super) adapter: usize,
    /// Null once its close was issued.
    pub(super) ptr: *mut NdkSharedEndpoint,
    /// The address and port it claimed (N9).
    pub(super) address: SockAddrIn,
    /// Connectors whose connect through it succeeded and whose close has
    /// not completed: each holds a reference (N10).
    pub(super) users: usize,
    /// Connectors that connected through it whose connect's outcome the
    /// fuzzer does not know (the link's set-up failed): a failed connect
    /// gives its reference back early (N28), so while one remains the
    /// close's timing is not judged.
    pub(super) unsure: usize,
    /// The close's completion, once the close pended (N10: it must, while
    /// a connector connected through it remains).
    pub(super) closing: Option<Arc<Signal>>,
}

impl Fuzzer<'_> {
    /// The thread's open shared endpoint on `adapter`, created if there is
    /// none (N9: on the adapter's address with port 0; the provider picks a
    /// port, which GetSharedEndpointLocalAddress reports): its id, the
    /// object and its address.
    pub(super) fn endpoint_on(
        &mut self,
        adapter: usize,
    ) -> Result<(u64, *mut NdkSharedEndpoint, SockAddrIn), SetupFailed> {
        if let Some(open) = self
            .endpoints
            .iter()
            .find(|e| e.adapter == adapter && !e.ptr.is_null())
        {
            return Ok((open.id, open.ptr, open.address));
        }
        let a = self.adapters[adapter];
        let wanted = sockaddr(a.ip, 0);
        // SAFETY: a live adapter; the address is valid for the call;
        // `create` keeps the completion's context until it came.
        let endpoint: *mut NdkSharedEndpoint =
            self.create("NdkCreateSharedEndpoint", |done, out| unsafe {
                (table(a.ptr()).ndk_create_shared_endpoint)(
                    a.ptr(),
                    (&raw const wanted).cast::<SockAddr>(),
                    SOCKADDR_IN_LEN,
                    Some(on_create),
                    done,
                    out,
                )
            })?;
        let id = self.out.endpoints;
        self.out.endpoints += 1;
        self.endpoints.push(Endpoint {
            id,
            adapter,
            ptr: endpoint,
            address: SockAddrIn::default(),
            users: 0,
            unsure: 0,
            closing: None,
        });
        // SAFETY: a live shared endpoint; `address` gives a SOCKADDR_IN-sized
        // buffer and its length.
        let (address, len) = self
            .address("NdkGetSharedEndpointLocalAddress", |at, len| unsafe {
                (table(endpoint).ndk_get_local_address)(endpoint, at, len)
            })?;
        if let Some(e) = self.endpoints.last_mut() {
            e.address = address;
        }
        if address.sin_addr.bytes != a.ip || address.sin_port == 0 || len != SOCKADDR_IN_LEN {
            return Err(SetupFailed(format!(
                "NdkGetSharedEndpointLocalAddress of an endpoint created on {:?} port 0 answered {:?} port {} ({len} bytes): not that address with the port the provider picked (N9)",
                a.ip,
                address.sin_addr.bytes,
                u16::from_be(address.sin_port)
            )));
        }
        Ok((id, endpoint, address))
    }

    /// `NdkConnectWithSharedEndpoint` of `connector` with `qp` from the
    /// shared `endpoint` to `dst` (N10, N11); what it returned (a failure
    /// other than pending already judged), its completion coming on
    /// `connected`.
    pub(super) fn start_connect_from(
        &mut self,
        objects: (*mut NdkConnector, *mut NdkQp),
        endpoint: *mut NdkSharedEndpoint,
        dst: SockAddrIn,
        read_limit: u32,
        connected: &Arc<Signal>,
    ) -> Result<NtStatus, SetupFailed> {
        let status = connect_from(objects, endpoint, dst, read_limit, connected);
        self.started("NdkConnectWithSharedEndpoint", status)
    }

    /// N11: the passive side of `link`, whose active side connected from
    /// endpoint `id`, sees the connection come from the endpoint's address
    /// and port.
    pub(super) fn check_peer_address(&mut self, link: &Link, id: u64) -> Result<(), SetupFailed> {
        let Some(expected) = self
            .endpoints
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.address)
        else {
            return Ok(());
        };
        let connector = link.sides[1].connector;
        // SAFETY: a live connector; `address` gives a SOCKADDR_IN-sized
        // buffer and its length.
        let (peer, _) = self.address("NdkGetPeerAddress", |at, len| unsafe {
            (table(connector).ndk_get_peer_address)(connector, at, len)
        })?;
        if (peer.sin_addr.bytes, peer.sin_port) == (expected.sin_addr.bytes, expected.sin_port) {
            Ok(())
        } else {
            Err(SetupFailed(format!(
                "the passive connector's NdkGetPeerAddress answered {:?} port {}, not the shared endpoint the active side connected from, {:?} port {} (N11)",
                peer.sin_addr.bytes,
                u16::from_be(peer.sin_port),
                expected.sin_addr.bytes,
                u16::from_be(expected.sin_port)
            )))
        }
    }

    /// N11: a second connection from side 0's shared endpoint to where its
    /// connection goes fails with `STATUS_ADDRESS_ALREADY_EXISTS`, inline
    /// or through its completion, while the first connector is open (its
    /// four-tuple stays until it closes). From a connector and a QP made
    /// for it on side 0's PD and CQ, closed at once after.
    pub(super) fn connect_again(&mut self, link: &Link) {
        let a = &link.sides[0];
        let Some((id, true)) = a.endpoint else {
            return;
        };
        let Some(endpoint) = self
            .endpoints
            .iter()
            .find(|e| e.id == id && !e.ptr.is_null())
            .map(|e| e.ptr)
        else {
            return;
        };
        if a.connector.is_null() {
            return;
        }
        let mut objects = (ptr::null_mut(), ptr::null_mut());
        let result = self.connect_twice(link, endpoint, &mut objects);
        let (mut connector, mut qp) = objects;
        let mut pending = Vec::new();
        self.close(&mut connector, &mut pending);
        self.close(&mut qp, &mut pending);
        self.wait_closes(pending);
        match result {
            Ok(()) => self.out.endpoint_tuples_refused += 1,
            Err(SetupFailed(text)) if self.config.faults.is_none() => self.finding(&text),
            Err(_) => {}
        }
    }

    /// [`Fuzzer::connect_again`] up to the closes: each object it makes
    /// goes into `objects` (connector, QP) at once.
    fn connect_twice(
        &mut self,
        link: &Link,
        endpoint: *mut NdkSharedEndpoint,
        objects: &mut (*mut NdkConnector, *mut NdkQp),
    ) -> Result<(), SetupFailed> {
        let a = &link.sides[0];
        let adapter = self.adapters[a.adapter].ptr();
        self.spare_connector(adapter, a, (&mut objects.0, &mut objects.1))?;
        let connected = Signal::new();
        let status = connect_from(*objects, endpoint, a.dst, 0, &connected);
        self.call("NdkConnectWithSharedEndpoint", status);
        let status = if status == STATUS_PENDING {
            let Some((status, _)) = connected.wait() else {
                return Err(SetupFailed(
                    "NdkConnectWithSharedEndpoint pended and never completed".into(),
                ));
            };
            status
        } else {
            status
        };
        if status == STATUS_ADDRESS_ALREADY_EXISTS {
            Ok(())
        } else {
            Err(SetupFailed(format!(
                "a second NdkConnectWithSharedEndpoint from one shared endpoint to the destination of a connection from it that is still open answered {:#010x}, not STATUS_ADDRESS_ALREADY_EXISTS (N11)",
                status.cast_unsigned()
            )))
        }
    }

    /// A connector connected through endpoint `id`; `sure`: its connect
    /// succeeded (else its outcome is unknown).
    pub(super) fn endpoint_tied(&mut self, id: u64, sure: bool) {
        if let Some(e) = self.endpoints.iter_mut().find(|e| e.id == id) {
            if sure {
                e.users += 1;
            } else {
                e.unsure += 1;
            }
        }
    }

    /// A connector's reference on endpoint `id` is about to go: its close
    /// is issued next. A closing endpoint must not have completed its
    /// close while that connector is still there (N10).
    pub(super) fn endpoint_check(&mut self, id: u64) {
        let early = self.endpoints.iter().find(|e| e.id == id).is_some_and(|e| {
            e.unsure == 0
                && e.users > 0
                && e.closing
                    .as_ref()
                    .is_some_and(|c| c.count.load(Ordering::SeqCst) > 0)
        });
        if early {
            self.finding(
                "NdkCloseSharedEndpoint completed while a connector connected through the endpoint was still open (N10)",
            );
        }
    }

    /// The close of a connector that connected through endpoint `id`
    /// completed (`sure` as for [`endpoint_tied`](Self::endpoint_tied)):
    /// one reference fewer; a closing endpoint with none left must now
    /// complete its close.
    pub(super) fn endpoint_released(&mut self, id: u64, sure: bool) {
        let Some(at) = self.endpoints.iter().position(|e| e.id == id) else {
            return;
        };
        let e = &mut self.endpoints[at];
        if sure {
            e.users = e.users.saturating_sub(1);
        } else {
            e.unsure = e.unsure.saturating_sub(1);
        }
        if e.closing.is_some() && e.users + e.unsure == 0 {
            let e = self.endpoints.swap_remove(at);
            self.endpoint_closed(&e);
        }
    }

    /// Closes the thread's shared endpoint at `at` (its connections keep
    /// going: its close pends until their connectors are closed, N10).
    pub(super) fn close_endpoint(&mut self, at: usize) {
        let e = &mut self.endpoints[at];
        let endpoint = std::mem::replace(&mut e.ptr, ptr::null_mut());
        if endpoint.is_null() {
            return;
        }
        let (users, unsure) = (e.users, e.unsure);
        let closed = Signal::new();
        // SAFETY: a live shared endpoint (taken out of its slot, so closed
        // once) and its own close slot.
        let status = unsafe {
            (table(endpoint).ndk_close_shared_endpoint)(
                endpoint.cast(),
                Some(on_event),
                closed.ctx(),
            )
        };
        self.call("NdkCloseSharedEndpoint", status);
        match status {
            STATUS_SUCCESS if users > 0 => {
                self.finding(&format!(
                    "NdkCloseSharedEndpoint completed at once though {users} connector(s) connected through the endpoint are open (N10)"
                ));
                self.endpoints.swap_remove(at);
            }
            STATUS_SUCCESS => {
                self.out.closed += 1;
                self.endpoints.swap_remove(at);
            }
            STATUS_PENDING => {
                self.endpoints[at].closing = Some(closed);
                if users + unsure == 0 {
                    let e = self.endpoints.swap_remove(at);
                    self.endpoint_closed(&e);
                }
            }
            other => {
                self.finding(&format!(
                    "NdkCloseSharedEndpoint returned {:#010x} (L18: a close never fails)",
                    other.cast_unsigned()
                ));
                self.endpoints.swap_remove(at);
            }
        }
    }

    /// Waits for the pending close of `e`, which has no connector left.
    fn endpoint_closed(&mut self, e: &Endpoint) {
        let Some(closed) = &e.closing else {
            return;
        };
        if closed.wait().is_some() {
            self.out.closed += 1;
            self.out.endpoint_closes_pended += 1;
            self.bury(Arc::clone(closed));
        } else {
            self.finding(
                "NdkCloseSharedEndpoint pended and never completed once its last connector was closed (N10, L18)",
            );
        }
    }

    /// The thread's end, after every link closed: its endpoints closed, and
    /// the pending closes waited for (but for an endpoint a connector whose
    /// close never completed still holds: that was a finding already).
    pub(super) fn close_endpoints(&mut self) {
        for at in (0..self.endpoints.len()).rev() {
            self.close_endpoint(at);
        }
        for e in std::mem::take(&mut self.endpoints) {
            if let Some(closed) = &e.closing {
                keep(closed);
            }
        }
    }
}

/// The `NdkConnectWithSharedEndpoint` call itself (not counted): from the
/// shared `endpoint` to `dst`, no private data, its completion on
/// `connected`.
fn connect_from(
    (connector, qp): (*mut NdkConnector, *mut NdkQp),
    endpoint: *mut NdkSharedEndpoint,
    dst: SockAddrIn,
    read_limit: u32,
    connected: &Arc<Signal>,
) -> NtStatus {
    // SAFETY: live objects the caller passes; the address is valid for the
    // call; the caller keeps `connected` until the completion.
    unsafe {
        (table(connector).ndk_connect_with_shared_endpoint)(
            connector,
            qp,
            endpoint,
            (&raw const dst).cast::<SockAddr>(),
            SOCKADDR_IN_LEN,
            read_limit,
            read_limit,
            ptr::null(),
            0,
            Some(on_status),
            connected.ctx(),
        )
    }
}
