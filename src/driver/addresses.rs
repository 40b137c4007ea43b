//! The interface's unicast IP addresses, learnt from the TCP/IP stack and
//! kept current on the adapter's device (platform-neutral; the Windows glue
//! in `miniport.rs` feeds it from `netio.sys`).
//!
//! # What the glue does
//!
//! At initialisation, once the adapter context is in place: register
//! `NotifyUnicastIpAddressChange(AF_UNSPEC)` with this tracker as context
//! (no initial notification), then take a [`Ticket`], read
//! `GetUnicastIpAddressTable(AF_UNSPEC)` and hand its rows to
//! [`AddressTracker::load`]. Each notification goes to
//! [`AddressTracker::notify`], whose `query` is `GetUnicastIpAddressEntry`:
//! only a notification's key (address and interface) is relied on — its
//! other fields, `DadState` among them, need not be filled in — so the
//! tracker reads the current row again before it decides. At halt:
//! `CancelMibChangeNotify2` (which returns once no callback runs), then
//! [`AddressTracker::close`].
//!
//! # Which rows count
//!
//! A row counts when its `InterfaceLuid` is the miniport's, its family is
//! IPv4 or IPv6, and duplicate address detection has passed: `DadState`
//! `Preferred` or `Deprecated` (a deprecated address is still valid; it is
//! only no longer preferred as a source for new traffic). `Tentative`,
//! `Duplicate` and `Invalid` addresses are not the interface's yet (or at
//! all), so they are not the device's.
//!
//! # Ordering
//!
//! Queries and notifications race: the table may be read before a change
//! that is applied first, and two callbacks may overlap. Every observation
//! therefore takes a [`Ticket`] — a generation number — *before* it queries,
//! and for each address only an observation at least as recent as the last
//! one applied is applied. Every change the stack makes is followed by a
//! notification whose query starts after the change, so the last applied
//! observation of every address is the current state.
//!
//! Open and close of NDK adapters need no coordination: the addresses are
//! registered on the fabric for the device, and every opening of the device
//! sees them as they are at each call (`provider::ndis::InterfaceAddresses`).

use alloc::vec::Vec;

use crate::abi::{
    AF_INET, AF_INET6, IP_DAD_STATE_DEPRECATED, IP_DAD_STATE_PREFERRED, MIB_DELETE_INSTANCE,
    MibNotificationType, MibUnicastIpAddressRow, NetLuid, NtStatus,
};
use crate::kernel::sync::{Arc, SpinLock};
use crate::provider::ndis::InterfaceAddresses;
use crate::rnic::cm::IpAddr;
use crate::rnic::device::Device;

/// The address of a row, if its family is IPv4 or IPv6.
#[must_use]
pub fn row_ip(row: &MibUnicastIpAddressRow) -> Option<IpAddr> {
    // SAFETY: `si_family` is the first two bytes of both members; the row is
    // a plain-data structure whose every byte is initialised (filled by the
    // stack or built from `Default`).
    let family = unsafe { row.address.si_family };
    if family == AF_INET {
        // SAFETY: the family says the IPv4 member is the valid one.
        Some(IpAddr::V4(unsafe { row.address.ipv4 }.sin_addr.bytes))
    } else if family == AF_INET6 {
        // SAFETY: the family says the IPv6 member is the valid one.
        Some(IpAddr::V6(unsafe { row.address.ipv6 }.sin6_addr.bytes))
    } else {
        None
    }
}

/// Whether duplicate address detection lets the address be used.
#[must_use]
pub const fn dad_state_counts(state: u32) -> bool {
    state == IP_DAD_STATE_PREFERRED || state == IP_DAD_STATE_DEPRECATED
}

/// The right to apply an observation, taken before the query it reports.
#[derive(Debug)]
#[must_use = "a ticket is handed back to `load` or `notify`"]
pub struct Ticket {
    generation: u64,
}

struct Seen {
    ip: IpAddr,
    generation: u64,
    present: bool,
}

struct Track {
    next: u64,
    in_flight: usize,
    seen: Vec<Seen>,
    closed: bool,
}

/// The interface addresses of one miniport adapter (see the module
/// documentation).
pub struct AddressTracker {
    luid: NetLuid,
    addresses: InterfaceAddresses,
    track: SpinLock<Track>,
}

impl AddressTracker {
    /// A tracker for the interface `luid`, over `device`, with no address.
    ///
    /// # Errors
    /// `STATUS_INSUFFICIENT_RESOURCES`.
    pub fn new(luid: NetLuid, device: &Arc<Device>) -> Result<Self, NtStatus> {
        Ok(Self {
            luid,
            addresses: InterfaceAddresses::new(device)?,
            track: SpinLock::new(Track {
                next: 0,
                in_flight: 0,
                seen: Vec::new(),
                closed: false,
            }),
        })
    }

    /// The interface's addresses, as the device owns them.
    #[must_use]
    pub const fn addresses(&self) -> &InterfaceAddresses {
        &self.addresses
    }

    /// What `row` says about an address of this interface: the address and
    /// whether it counts; `None` for another interface or family.
    #[must_use]
    pub fn judge(&self, row: &MibUnicastIpAddressRow) -> Option<(IpAddr, bool)> {
        if row.interface_luid != self.luid {
            return None;
        }
        row_ip(row).map(|ip| (ip, dad_state_counts(row.dad_state)))
    }

    /// A ticket for an observation about to be made; `None` once closed.
    pub fn begin(&self) -> Option<Ticket> {
        let mut track = self.track.lock();
        if track.closed {
            return None;
        }
        track.next += 1;
        track.in_flight += 1;
        Some(Ticket {
            generation: track.next,
        })
    }

    /// Applies the rows of `GetUnicastIpAddressTable`, read after `ticket`
    /// was taken. Rows of other interfaces are ignored.
    pub fn load(&self, ticket: Ticket, rows: &[MibUnicastIpAddressRow]) {
        for row in rows {
            if let Some((ip, present)) = self.judge(row) {
                self.apply(&ticket, ip, present);
            }
        }
        self.finish(ticket);
    }

    /// One `NotifyUnicastIpAddressChange` callback: `row` is its (key-only)
    /// row, null for the initial notification. `query` reads the current
    /// row into the key-filled row it is given (`GetUnicastIpAddressEntry`);
    /// any failure (`STATUS_NOT_FOUND` when the address has gone) means the
    /// address is not the interface's.
    pub fn notify(
        &self,
        kind: MibNotificationType,
        row: Option<&MibUnicastIpAddressRow>,
        query: &mut dyn FnMut(&mut MibUnicastIpAddressRow) -> NtStatus,
    ) {
        let Some(row) = row else { return };
        // A key may name the interface by index only (LUID zero): the
        // re-read row says whose it is.
        if row.interface_luid != self.luid && row.interface_luid != NetLuid::default() {
            return;
        }
        let Some(ip) = row_ip(row) else { return };
        let Some(ticket) = self.begin() else { return };
        let present = if kind == MIB_DELETE_INSTANCE {
            false
        } else {
            let mut current = MibUnicastIpAddressRow {
                address: row.address,
                interface_luid: row.interface_luid,
                interface_index: row.interface_index,
                ..MibUnicastIpAddressRow::default()
            };
            let status = query(&mut current);
            if status >= 0 && current.interface_luid != self.luid {
                // Another interface's address (named by index only).
                self.finish(ticket);
                return;
            }
            status >= 0 && self.judge(&current) == Some((ip, true))
        };
        self.apply(&ticket, ip, present);
        self.finish(ticket);
    }

    fn apply(&self, ticket: &Ticket, ip: IpAddr, present: bool) {
        let mut track = self.track.lock();
        if track.closed {
            return;
        }
        let at = track.seen.iter().position(|s| s.ip == ip);
        if let Some(seen) = at.and_then(|n| track.seen.get(n))
            && seen.generation > ticket.generation
        {
            // A more recent observation of this address was applied.
            return;
        }
        let present = if present {
            // An address another adapter's interface owns (or no memory)
            // stays unowned; the failure is the stack's to resolve.
            self.addresses.add(ip).is_ok()
        } else {
            self.addresses.remove(ip);
            false
        };
        let record = Seen {
            ip,
            generation: ticket.generation,
            present,
        };
        match at.and_then(|n| track.seen.get_mut(n)) {
            Some(seen) => *seen = record,
            None => {
                if track.seen.try_reserve(1).is_ok() {
                    track.seen.push(record);
                }
            }
        }
    }

    #[expect(
        clippy::needless_pass_by_value,
        reason = "the ticket is used up: one finish per begin"
    )]
    fn finish(&self, ticket: Ticket) {
        let Ticket { generation: _ } = ticket;
        let mut track = self.track.lock();
        track.in_flight = track.in_flight.saturating_sub(1);
        if track.in_flight == 0 {
            // Nothing older can arrive: forget the addresses that left.
            track.seen.retain(|s| s.present);
        }
    }

    /// Halt, after the notification is cancelled: every address leaves the
    /// device and nothing is applied any more (a callback still in flight
    /// is ignored).
    pub fn close(&self) {
        let mut track = self.track.lock();
        track.closed = true;
        track.seen.clear();
        drop(track);
        self.addresses.clear();
    }
}

#[cfg(test)]
#[path = "addresses_tests.rs"]
pub(crate) mod tests;
