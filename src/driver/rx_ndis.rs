//! Windows only: the NDIS side of the frame path ([`super::frames`]) — the
//! receive NBLs over the VXLAN port's buffers, their indication, the link
//! indication and the completion of a pending pause — and the reading of
//! `SoftNdkPeers` / `SoftNdkVni`.
//!
//! * [`NdisNbls::new`] (initialise, PASSIVE_LEVEL) makes one NBL pool
//!   (`NdisAllocateNetBufferListPool`, one `NET_BUFFER` per NBL), and per
//!   receive buffer of the port one MDL (`NdisAllocateMdl`: the buffers are
//!   non-paged pool and never move while the port lives) and one NBL over
//!   it (`NdisAllocateNetBufferAndNetBufferList`), its buffer index kept in
//!   `MiniportReserved[0]`. Dropped (everything freed) with the adapter's
//!   context at halt, once the port's sockets are closed.
//! * [`NblOps::indicate`] (≤ DISPATCH_LEVEL, from the socket's receive
//!   event): points the NBL's `NET_BUFFER` at the frame (`CurrentMdlOffset`
//!   = `DataOffset` = the frame's offset in the buffer, `DataLength` its
//!   length) and calls `NdisMIndicateReceiveNetBufferLists` with
//!   `NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL` when the IRQL is DISPATCH_LEVEL
//!   (`kernel::irql`) and `NDIS_RECEIVE_FLAGS_RESOURCES` when the receiver
//!   says the pool is low.
//! * [`NblOps::link`] calls `NdisMIndicateStatusEx` with
//!   `NDIS_STATUS_LINK_STATE` and an `NDIS_LINK_STATE`.
//! * [`NblOps::pause_complete`] calls `NdisMPauseComplete`.
//! * [`NdisNbls::index_of`] is the return handler's way back from an NBL to
//!   its buffer (checked against the table: an NBL not ours is ignored).

use core::ffi::c_void;
use core::ptr::null_mut;

use crate::abi::{
    Guid, Mdl, NDIS_DEFAULT_PORT_NUMBER, NDIS_LINK_STATE_REVISION_1, NDIS_OBJECT_TYPE_DEFAULT,
    NDIS_OBJECT_TYPE_STATUS_INDICATION, NDIS_PROTOCOL_ID_DEFAULT,
    NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL, NDIS_RECEIVE_FLAGS_RESOURCES,
    NDIS_SIZEOF_LINK_STATE_REVISION_1, NDIS_SIZEOF_NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1,
    NDIS_SIZEOF_STATUS_INDICATION_REVISION_1, NDIS_STATUS_INDICATION_REVISION_1,
    NDIS_STATUS_LINK_STATE, NDIS_STATUS_SUCCESS, NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1,
    NdisHandle, NdisLinkState, NdisMediaConnectState, NdisMediaDuplexState, NdisObjectHeader,
    NdisStatusIndication, NdisSupportedPauseFunctions, NetBufferList, NetBufferListPoolParameters,
};

use super::ether::{EtherPort, RX_BUFFERS};
use super::frames::NblOps;
use super::ndis_sys as ndis;

/// The pool tag of the NBL pool (`SNdk`, as every allocation of the driver).
const POOL_TAG: u32 = u32::from_le_bytes(*b"SNdk");

/// The receive NBLs of one adapter (see the module documentation).
pub struct NdisNbls {
    miniport_handle: NdisHandle,
    pool: NdisHandle,
    nbls: [*mut NetBufferList; RX_BUFFERS],
    mdls: [*mut Mdl; RX_BUFFERS],
}

// SAFETY: the handles are NDIS's, usable from any thread at ≤ DISPATCH_LEVEL;
// each NBL is touched only by whoever owns its receive buffer at the time
// (`driver::frames::Receiver` hands every buffer to one indication at a
// time), and the table itself is read-only after `new`.
unsafe impl Send for NdisNbls {}
// SAFETY: as above.
unsafe impl Sync for NdisNbls {}

impl NdisNbls {
    /// The pool, one MDL and one NBL per receive buffer of `port`
    /// (initialise, PASSIVE_LEVEL), or `None` when NDIS has no memory
    /// (whatever was made is freed).
    pub fn new(miniport_handle: NdisHandle, port: &EtherPort) -> Option<Self> {
        let parameters = NetBufferListPoolParameters {
            header: NdisObjectHeader {
                type_: NDIS_OBJECT_TYPE_DEFAULT,
                revision: NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1,
                size: NDIS_SIZEOF_NET_BUFFER_LIST_POOL_PARAMETERS_REVISION_1,
            },
            protocol_id: NDIS_PROTOCOL_ID_DEFAULT,
            allocate_net_buffer: 1,
            padding_06: 0,
            context_size: 0,
            padding_0a: 0,
            pool_tag: POOL_TAG,
            data_size: 0,
        };
        // SAFETY: PASSIVE_LEVEL in initialise (≤ DISPATCH allowed); the
        // parameters are complete and read during the call.
        let pool =
            unsafe { ndis::NdisAllocateNetBufferListPool(miniport_handle, &raw const parameters) };
        if pool.is_null() {
            return None;
        }
        let mut made = Self {
            miniport_handle,
            pool,
            nbls: [null_mut(); RX_BUFFERS],
            mdls: [null_mut(); RX_BUFFERS],
        };
        for index in 0..RX_BUFFERS {
            let (buffer, len) = port.rx_buffer_ptr(index)?;
            let len = u32::try_from(len).ok()?;
            // SAFETY: `len` bytes of non-paged pool at `buffer`, the port's
            // receive buffer, which lives (and does not move) as long as the
            // port, which outlives these NBLs (both go with the context).
            let mdl = unsafe { ndis::NdisAllocateMdl(miniport_handle, buffer.cast(), len) };
            if mdl.is_null() {
                return None;
            }
            let slot = made.mdls.get_mut(index)?;
            *slot = mdl;
            // SAFETY: a pool made with `fAllocateNetBuffer`; the MDL above.
            let nbl = unsafe {
                ndis::NdisAllocateNetBufferAndNetBufferList(pool, 0, 0, mdl, 0, len as usize)
            };
            if nbl.is_null() {
                return None;
            }
            // SAFETY: the NBL just allocated, ours; `MiniportReserved` is the
            // miniport's while it owns the NBL.
            unsafe {
                (*nbl).miniport_reserved[0] = core::ptr::without_provenance_mut::<c_void>(index);
            };
            let slot = made.nbls.get_mut(index)?;
            *slot = nbl;
        }
        Some(made)
    }

    /// The receive buffer of an NBL NDIS returned, or `None` when it is not
    /// one of these.
    ///
    /// # Safety
    /// `nbl` is an NBL NDIS passed to `MiniportReturnNetBufferLists`.
    pub unsafe fn index_of(&self, nbl: *mut NetBufferList) -> Option<usize> {
        if nbl.is_null() {
            return None;
        }
        // SAFETY: caller contract: a valid NBL, returned to us.
        let index = unsafe { (*nbl).miniport_reserved[0] }.addr();
        (self.nbls.get(index).copied() == Some(nbl)).then_some(index)
    }
}

impl NblOps for NdisNbls {
    fn indicate(&self, index: usize, offset: usize, len: usize, resources: bool) {
        let (Some(&nbl), Some(&mdl)) = (self.nbls.get(index), self.mdls.get(index)) else {
            return;
        };
        let (Ok(offset), Ok(len)) = (u32::try_from(offset), u32::try_from(len)) else {
            return;
        };
        if nbl.is_null() || mdl.is_null() {
            return;
        }
        // SAFETY: the NBL is ours (the receiver gives each buffer to one
        // indication at a time, and NDIS has returned it since the last),
        // allocated with one NET_BUFFER over `mdl`; nobody else touches it
        // until it is indicated below.
        let Some(list) = (unsafe { nbl.as_mut() }) else {
            return;
        };
        // SAFETY: its NET_BUFFER, ours with it.
        let Some(nb) = (unsafe { list.first_net_buffer.as_mut() }) else {
            return;
        };
        nb.next = null_mut();
        nb.mdl_chain = mdl;
        nb.current_mdl = mdl;
        nb.current_mdl_offset = offset;
        nb.data_offset = offset;
        nb.data_length = u64::from(len);
        list.next = null_mut();
        list.status = NDIS_STATUS_SUCCESS;
        list.source_handle = self.miniport_handle;
        let mut flags = 0;
        if crate::kernel::irql::at_dispatch() {
            flags |= NDIS_RECEIVE_FLAGS_DISPATCH_LEVEL;
        }
        if resources {
            flags |= NDIS_RECEIVE_FLAGS_RESOURCES;
        }
        // SAFETY: ≤ DISPATCH_LEVEL (the flag says which); the adapter runs
        // (the receiver indicates only then); one NBL, complete.
        unsafe {
            ndis::NdisMIndicateReceiveNetBufferLists(
                self.miniport_handle,
                nbl,
                NDIS_DEFAULT_PORT_NUMBER,
                1,
                flags,
            );
        }
    }

    fn link(&self, up: bool) {
        let mut state = NdisLinkState {
            header: NdisObjectHeader {
                type_: NDIS_OBJECT_TYPE_DEFAULT,
                revision: NDIS_LINK_STATE_REVISION_1,
                size: NDIS_SIZEOF_LINK_STATE_REVISION_1,
            },
            media_connect_state: if up {
                NdisMediaConnectState::CONNECTED
            } else {
                NdisMediaConnectState::DISCONNECTED
            },
            media_duplex_state: NdisMediaDuplexState::FULL,
            padding_0c: 0,
            xmit_link_speed: super::oid::LINK_SPEED_BPS,
            rcv_link_speed: super::oid::LINK_SPEED_BPS,
            pause_functions: NdisSupportedPauseFunctions::UNSUPPORTED,
            auto_negotiation_flags: 0,
        };
        let indication = NdisStatusIndication {
            header: NdisObjectHeader {
                type_: NDIS_OBJECT_TYPE_STATUS_INDICATION,
                revision: NDIS_STATUS_INDICATION_REVISION_1,
                size: NDIS_SIZEOF_STATUS_INDICATION_REVISION_1,
            },
            padding_04: 0,
            source_handle: self.miniport_handle,
            port_number: NDIS_DEFAULT_PORT_NUMBER,
            status_code: NDIS_STATUS_LINK_STATE,
            flags: 0,
            padding_1c: 0,
            destination_handle: null_mut(),
            request_id: null_mut(),
            status_buffer: (&raw mut state).cast(),
            status_buffer_size: u32::from(NDIS_SIZEOF_LINK_STATE_REVISION_1),
            guid: Guid::default(),
            padding_4c: 0,
            ndis_reserved: [null_mut(); 4],
        };
        crate::klog!(
            crate::kernel::log::Level::Info,
            "link {}",
            if up { "up" } else { "down" }
        );
        // SAFETY: ≤ DISPATCH_LEVEL; the indication and its buffer live for
        // the call (NDIS copies what it keeps).
        unsafe { ndis::NdisMIndicateStatusEx(self.miniport_handle, &raw const indication) };
    }

    fn pause_complete(&self) {
        // SAFETY: ≤ DISPATCH_LEVEL; a pause of this adapter returned
        // NDIS_STATUS_PENDING and this is its only completion
        // (`Receiver::returned` reports it once).
        unsafe { ndis::NdisMPauseComplete(self.miniport_handle) };
    }
}

impl Drop for NdisNbls {
    fn drop(&mut self) {
        for nbl in self.nbls {
            if !nbl.is_null() {
                // SAFETY: ours (halt: NDIS returned every NBL before it
                // halted the paused adapter, and the receiver indicates
                // nothing after halt).
                unsafe { ndis::NdisFreeNetBufferList(nbl) };
            }
        }
        for mdl in self.mdls {
            if !mdl.is_null() {
                // SAFETY: from NdisAllocateMdl, no NBL describes it any more.
                unsafe { ndis::NdisFreeMdl(mdl) };
            }
        }
        // SAFETY: every NBL of the pool was freed above.
        unsafe { ndis::NdisFreeNetBufferListPool(self.pool) };
    }
}
