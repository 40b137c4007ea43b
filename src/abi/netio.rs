//! The IP Helper structures of `netio.sys` the driver uses to learn its
//! interface's unicast addresses (WDK 10.0.16299 `shared/netioapi.h`,
//! `shared/nldef.h`, `shared/ws2ipdef.h`; every offset below was read from
//! those headers and is asserted).
//!
//! The C enums (`NL_PREFIX_ORIGIN`, `NL_SUFFIX_ORIGIN`, `NL_DAD_STATE`,
//! `MIB_NOTIFICATION_TYPE`) are 4-byte `int`s, kept as `u32` so that any
//! value the stack writes is representable.

use core::ffi::c_void;

use super::{AddressFamily, Boolean, NetLuid, NtStatus, SockAddrInet};

/// `AF_UNSPEC`: both IPv4 and IPv6, for the table and the notification.
pub const AF_UNSPEC: AddressFamily = 0;

/// `NL_DAD_STATE`: where duplicate address detection stands for an address.
pub type NlDadState = u32;
/// `IpDadStateInvalid`.
pub const IP_DAD_STATE_INVALID: NlDadState = 0;
/// `IpDadStateTentative`: still being checked; not usable yet.
pub const IP_DAD_STATE_TENTATIVE: NlDadState = 1;
/// `IpDadStateDuplicate`: another host has it; never usable.
pub const IP_DAD_STATE_DUPLICATE: NlDadState = 2;
/// `IpDadStateDeprecated`: valid, no longer preferred as a source.
pub const IP_DAD_STATE_DEPRECATED: NlDadState = 3;
/// `IpDadStatePreferred`: valid and preferred.
pub const IP_DAD_STATE_PREFERRED: NlDadState = 4;

/// `MIB_NOTIFICATION_TYPE`.
pub type MibNotificationType = u32;
/// `MibParameterNotification`: a parameter of the row changed.
pub const MIB_PARAMETER_NOTIFICATION: MibNotificationType = 0;
/// `MibAddInstance`.
pub const MIB_ADD_INSTANCE: MibNotificationType = 1;
/// `MibDeleteInstance`.
pub const MIB_DELETE_INSTANCE: MibNotificationType = 2;
/// `MibInitialNotification`: the registration is in place (no row).
pub const MIB_INITIAL_NOTIFICATION: MibNotificationType = 3;

/// `MIB_UNICASTIPADDRESS_ROW`: one unicast address of one interface, 0x50
/// bytes, align 8. The key is `Address` with `InterfaceLuid` (or
/// `InterfaceIndex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MibUnicastIpAddressRow {
    /// `Address`: the address (port and flow fields unused).
    pub address: SockAddrInet,
    /// `InterfaceLuid`.
    pub interface_luid: NetLuid,
    /// `InterfaceIndex`.
    pub interface_index: u32,
    /// `PrefixOrigin` (`NL_PREFIX_ORIGIN`).
    pub prefix_origin: u32,
    /// `SuffixOrigin` (`NL_SUFFIX_ORIGIN`).
    pub suffix_origin: u32,
    /// `ValidLifetime`, seconds.
    pub valid_lifetime: u32,
    /// `PreferredLifetime`, seconds.
    pub preferred_lifetime: u32,
    /// `OnLinkPrefixLength`.
    pub on_link_prefix_length: u8,
    /// `SkipAsSource`.
    pub skip_as_source: Boolean,
    /// Alignment padding before `DadState`.
    pub padding_3e: [u8; 2],
    /// `DadState`.
    pub dad_state: NlDadState,
    /// `ScopeId` (`SCOPE_ID`, a `ULONG` of bit fields).
    pub scope_id: u32,
    /// `CreationTimeStamp` (`LARGE_INTEGER`).
    pub creation_time_stamp: i64,
}

/// All zeros (family `AF_UNSPEC`).
impl Default for MibUnicastIpAddressRow {
    fn default() -> Self {
        Self {
            address: SockAddrInet::default(),
            interface_luid: NetLuid { value: 0 },
            interface_index: 0,
            prefix_origin: 0,
            suffix_origin: 0,
            valid_lifetime: 0,
            preferred_lifetime: 0,
            on_link_prefix_length: 0,
            skip_as_source: 0,
            padding_3e: [0; 2],
            dad_state: 0,
            scope_id: 0,
            creation_time_stamp: 0,
        }
    }
}

/// `MIB_UNICASTIPADDRESS_TABLE`: `NumEntries`, then that many rows from
/// offset 8 (declared `Table[ANY_SIZE]`). Allocated by
/// `GetUnicastIpAddressTable`, freed with `FreeMibTable`.
#[repr(C)]
pub struct MibUnicastIpAddressTable {
    /// `NumEntries`.
    pub num_entries: u32,
    /// Alignment padding before the rows.
    pub padding_04: u32,
    /// `Table`: the first row of `num_entries`.
    pub table: [MibUnicastIpAddressRow; 1],
}

c_fn! {
    /// `PUNICAST_IPADDRESS_CHANGE_CALLBACK` (PASSIVE_LEVEL): the row is only
    /// relied on for its key fields (the other fields need not be filled in),
    /// and is null for `MibInitialNotification`.
    UnicastIpAddressChangeCallback(caller_context: *mut c_void, row: *mut MibUnicastIpAddressRow,
        notification_type: MibNotificationType);
}

/// The status type of the `netio.sys` routines (`NETIOAPI_API` in kernel
/// mode).
pub type NetioStatus = NtStatus;

assert_layouts! {
    layout_mib_unicast_ip_address_row: MibUnicastIpAddressRow, size 0x50, align 8 {
        address: 0x00, interface_luid: 0x20, interface_index: 0x28, prefix_origin: 0x2C,
        suffix_origin: 0x30, valid_lifetime: 0x34, preferred_lifetime: 0x38,
        on_link_prefix_length: 0x3C, skip_as_source: 0x3D, dad_state: 0x40, scope_id: 0x44,
        creation_time_stamp: 0x48,
    }
    layout_mib_unicast_ip_address_table: MibUnicastIpAddressTable, size 0x58, align 8 {
        num_entries: 0x00, table: 0x08,
    }
}
