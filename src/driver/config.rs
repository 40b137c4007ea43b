//! The adapter's configuration: what the INF's keywords (read from the
//! registry with `NdisReadConfiguration` / `NdisReadNetworkAddress` at
//! initialisation) mean, with every value validated and a documented default
//! for anything missing or out of range.
//!
//! Platform-neutral: the Windows glue only fetches the raw values; the
//! decisions are here and unit-tested on the host. The keywords are those of
//! `inf/softndk.inx` (checked against this file by `tests/inf.rs`).

pub use crate::provider::iface::RDMA_TECHNOLOGY;

/// Bytes of an Ethernet header (destination, source, EtherType).
pub const ETHERNET_HEADER: u32 = 14;

/// `*JumboPacket` values the INF offers: the whole frame including the
/// 14-byte header (1514 = standard Ethernet).
pub const JUMBO_PACKET_SIZES: [u32; 3] = [1514, 4088, 9014];

/// `*JumboPacket` when the value is missing or not one of
/// [`JUMBO_PACKET_SIZES`].
pub const DEFAULT_JUMBO_PACKET: u32 = 1514;

/// Whether `*NetworkDirectRoCEFrameSize` applies to an adapter of
/// `technology`: RoCE and RoCE v2 only (rule A24). SoftNDK's NIC runs iWARP
/// ([`RDMA_TECHNOLOGY`]), so the INF does not offer the keyword and a value
/// set by hand is ignored (no frame-size event is ever logged).
#[must_use]
pub fn roce_frame_size_applies(technology: crate::abi::NdkRdmaTechnology) -> bool {
    use crate::abi::NdkRdmaTechnology as T;
    technology == T::ROCE || technology == T::ROCE_V2
}

/// `*NetworkDirectRoCEFrameSize` values (rule A24), smallest first.
pub const ROCE_FRAME_SIZES: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// `*NetworkDirectRoCEFrameSize` default (rule A24: 1024 is the default and
/// mandatory).
pub const DEFAULT_ROCE_FRAME_SIZE: u32 = 1024;

/// Registry keyword names, as the INF spells them.
pub mod keyword {
    /// `*NetworkDirect`: 0 disabled, 1 enabled (default).
    pub const NETWORK_DIRECT: &str = crate::abi::NETWORK_DIRECT_KEYWORD;
    /// `*NetworkDirectTechnology`.
    pub const NETWORK_DIRECT_TECHNOLOGY: &str = crate::abi::NETWORK_DIRECT_TECHNOLOGY_KEYWORD;
    /// `*NetworkDirectRoCEFrameSize`.
    pub const ROCE_FRAME_SIZE: &str = crate::abi::NETWORK_DIRECT_ROCE_FRAME_SIZE_KEYWORD;
    /// `*JumboPacket`.
    pub const JUMBO_PACKET: &str = "*JumboPacket";
    /// `NetworkAddress`: the administrator's MAC address (read by
    /// `NdisReadNetworkAddress`).
    pub const NETWORK_ADDRESS: &str = "NetworkAddress";
    /// `SoftNdkChecked`: checked mode, 0 off (default), 1 on
    /// (`docs/debugging.md`).
    pub const CHECKED: &str = "SoftNdkChecked";
    /// `SoftNdkCheckedStop`: with checked mode on, 1 stops the machine at the
    /// first breach (not implemented in the kernel yet: reported only);
    /// 0 (default) reports and goes on.
    pub const CHECKED_STOP: &str = "SoftNdkCheckedStop";
    /// `SoftNdkCheckedCallbackUs`: with checked mode on, I3's bound on a
    /// consumer callback's run, in microseconds (DWORD, default
    /// [`DEFAULT_CALLBACK_BOUND_US`](super::DEFAULT_CALLBACK_BOUND_US)).
    pub const CHECKED_CALLBACK_US: &str = "SoftNdkCheckedCallbackUs";
    /// `SoftNdkFaultSeed`: the seed of fault injection (DWORD, default 0;
    /// `docs/debugging.md`, "Fault injection").
    pub const FAULT_SEED: &str = "SoftNdkFaultSeed";
    /// `SoftNdkFaultRate`: the share of calls of every fault kind that fail,
    /// parts per million (0 default: off, at most 1 000 000).
    pub const FAULT_RATE: &str = "SoftNdkFaultRate";
    /// `SoftNdkFaultSchedule`: a plan in its text form (`post@3,abort@10`),
    /// applied over the seed and rate (empty default).
    pub const FAULT_SCHEDULE: &str = "SoftNdkFaultSchedule";
    /// `SoftNdkPeers`: the underlay IPv4 / IPv6 addresses of the other
    /// machines of the virtual Ethernet (VXLAN), a `REG_SZ` list separated
    /// by commas, semicolons or spaces (default: empty, no peer).
    pub const PEERS: &str = "SoftNdkPeers";
    /// `SoftNdkVni`: the VXLAN Network Identifier, 1..=16777215 (default
    /// [`DEFAULT_VNI`](super::DEFAULT_VNI)).
    pub const VNI: &str = "SoftNdkVni";
}

pub use crate::rnic::fault::Plan as FaultPlan;

/// What the fault keywords ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "decided once at initialisation, on the stack"
)]
pub enum Faults {
    /// No fault injection (the default: no rate and no schedule).
    Off,
    /// This plan.
    On(FaultPlan),
    /// A value out of range (a rate above a million) or a schedule that is
    /// not a plan: fault injection stays off, and the driver says so.
    Invalid,
}

/// The plan `SoftNdkFaultSeed`, `SoftNdkFaultRate` and
/// `SoftNdkFaultSchedule` ask for: off unless the rate is above 0 or the
/// schedule names something; the schedule's items (the text form of
/// `rnic::fault::Plan::parse`) apply over the seed and rate; `off` in the
/// schedule turns injection off whatever the rate.
#[must_use]
pub fn fault_plan(seed: Option<u32>, rate: Option<u32>, schedule: Option<&str>) -> Faults {
    let rate = rate.unwrap_or(0);
    if rate > crate::rnic::fault::MILLION {
        return Faults::Invalid;
    }
    let schedule = schedule.map_or("", str::trim);
    if schedule == "off" || (rate == 0 && schedule.is_empty()) {
        return Faults::Off;
    }
    let mut plan = FaultPlan {
        seed: u64::from(seed.unwrap_or(0)),
        rates: [rate; crate::rnic::fault::KINDS],
        ..FaultPlan::NEVER
    };
    match plan.apply(schedule) {
        Ok(()) => Faults::On(plan),
        Err(_) => Faults::Invalid,
    }
}

/// The longest `SoftNdkFaultSchedule` text the driver takes, in characters
/// (room for every one of the plan's scheduled items with large indices and
/// a rate per kind); a longer one is refused.
pub const MAX_FAULT_SCHEDULE_TEXT: usize = 512;

/// [`fault_plan`] with the schedule as the registry gives it (the UTF-16 of
/// an `NDIS_STRING`, `None` when the keyword is missing). A schedule that is
/// not ASCII or is longer than [`MAX_FAULT_SCHEDULE_TEXT`] is
/// [`Faults::Invalid`]; a terminating NUL ends it.
#[must_use]
pub fn fault_plan_utf16(seed: Option<u32>, rate: Option<u32>, schedule: Option<&[u16]>) -> Faults {
    let Some(units) = schedule else {
        return fault_plan(seed, rate, None);
    };
    let units = units.split(|&unit| unit == 0).next().unwrap_or_default();
    let mut text = [0_u8; MAX_FAULT_SCHEDULE_TEXT];
    if units.len() > text.len() {
        return Faults::Invalid;
    }
    for (slot, &unit) in text.iter_mut().zip(units) {
        match u8::try_from(unit) {
            Ok(byte) if byte.is_ascii() => *slot = byte,
            _ => return Faults::Invalid,
        }
    }
    match core::str::from_utf8(text.get(..units.len()).unwrap_or_default()) {
        Ok(schedule) => fault_plan(seed, rate, Some(schedule)),
        Err(_) => Faults::Invalid,
    }
}

/// The checked mode `SoftNdkChecked` and `SoftNdkCheckedStop` ask for: on
/// only for `SoftNdkChecked` = 1, stopping only when `SoftNdkCheckedStop` is
/// also 1; anything missing or out of range is 0 (off, go on).
#[must_use]
pub const fn checked_mode(checked: Option<u32>, stop: Option<u32>) -> CheckedMode {
    match (checked, stop) {
        (Some(1), Some(1)) => CheckedMode::Stop,
        (Some(1), _) => CheckedMode::Report,
        _ => CheckedMode::Off,
    }
}

pub use crate::provider::checked::Mode as CheckedMode;

/// I3's bound in the kernel when `SoftNdkCheckedCallbackUs` is missing or
/// out of range: 1 ms (callbacks run at up to DISPATCH_LEVEL, I3).
pub const DEFAULT_CALLBACK_BOUND_US: u32 = 1_000;

/// The largest bound `SoftNdkCheckedCallbackUs` takes: 10 s.
pub const MAX_CALLBACK_BOUND_US: u32 = 10_000_000;

/// I3's bound, in microseconds, that `SoftNdkCheckedCallbackUs` asks for:
/// 1 to [`MAX_CALLBACK_BOUND_US`]; missing, 0 or above the maximum:
/// [`DEFAULT_CALLBACK_BOUND_US`].
#[must_use]
pub const fn checked_callback_bound(value: Option<u32>) -> u32 {
    match value {
        Some(us @ 1..=MAX_CALLBACK_BOUND_US) => us,
        _ => DEFAULT_CALLBACK_BOUND_US,
    }
}

/// `*NetworkDirect`: NDK may be enabled unless the value is present and 0
/// (a missing value means the INF default, 1: rule A22).
#[must_use]
pub const fn network_direct_permitted(value: Option<u32>) -> bool {
    !matches!(value, Some(0))
}

/// `*JumboPacket`, validated: one of [`JUMBO_PACKET_SIZES`], else the default.
#[must_use]
pub fn jumbo_packet(value: Option<u32>) -> u32 {
    value
        .filter(|v| JUMBO_PACKET_SIZES.contains(v))
        .unwrap_or(DEFAULT_JUMBO_PACKET)
}

/// The RoCE frame size: what is configured and what is used (rule A24).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceFrameSize {
    /// `*NetworkDirectRoCEFrameSize` as configured (the default when missing
    /// or not one of [`ROCE_FRAME_SIZES`]).
    pub configured: u32,
    /// The operational size: the configured one, lowered to the largest
    /// supported size not above `*JumboPacket`.
    pub operational: u32,
}

impl RoceFrameSize {
    /// Whether a system event must say that the operational RoCE MTU differs
    /// from the configured one (rule A24).
    #[must_use]
    pub const fn must_log(self) -> bool {
        self.configured != self.operational
    }
}

/// Rule A24: the configured `*NetworkDirectRoCEFrameSize` (or 1024), capped at
/// the largest supported size not above `jumbo_packet`.
#[must_use]
pub fn roce_frame_size(configured: Option<u32>, jumbo_packet: u32) -> RoceFrameSize {
    let configured = configured
        .filter(|v| ROCE_FRAME_SIZES.contains(v))
        .unwrap_or(DEFAULT_ROCE_FRAME_SIZE);
    let cap = ROCE_FRAME_SIZES
        .iter()
        .copied()
        .filter(|&size| size <= jumbo_packet)
        .max()
        .unwrap_or(DEFAULT_ROCE_FRAME_SIZE);
    RoceFrameSize {
        configured,
        operational: configured.min(cap),
    }
}

/// Bytes of an Ethernet MAC address.
pub const MAC_LEN: usize = 6;

/// A MAC address from `NetworkAddress`, if it is usable: exactly six bytes,
/// unicast (group bit clear) and not all zeros.
#[must_use]
pub fn mac_from_registry(bytes: Option<&[u8]>) -> Option<[u8; MAC_LEN]> {
    let mac: [u8; MAC_LEN] = bytes?.try_into().ok()?;
    let unicast = mac[0] & 0x01 == 0;
    let nonzero = mac.iter().any(|&b| b != 0);
    (unicast && nonzero).then_some(mac)
}

/// The MAC address SoftNDK generates when none is configured: locally
/// administered and unicast (`02`), then `'S' 'N'`, then the 24-bit
/// `NetLuidIndex` of the interface, so it is stable for the interface's life
/// and distinct between SoftNDK adapters of one machine.
#[must_use]
pub const fn generated_mac(net_luid_index: u32) -> [u8; MAC_LEN] {
    let [_, hi, mid, lo] = net_luid_index.to_be_bytes();
    [0x02, b'S', b'N', hi, mid, lo]
}

/// Everything the adapter takes from the registry, decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdapterConfig {
    /// `*NetworkDirect` permits NDK.
    pub network_direct: bool,
    /// `*JumboPacket`: the largest frame, header included.
    pub jumbo_packet: u32,
    /// `*NetworkDirectRoCEFrameSize`, configured and operational.
    pub roce_frame_size: RoceFrameSize,
    /// The current MAC address.
    pub mac: [u8; MAC_LEN],
    /// Whether `mac` came from `NetworkAddress` (else it was generated).
    pub mac_from_registry: bool,
    /// `SoftNdkChecked` and `SoftNdkCheckedStop`: checked mode.
    pub checked: CheckedMode,
}

/// The raw registry values the Windows glue read (`None`: missing or not an
/// integer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawConfig<'a> {
    /// `*NetworkDirect`.
    pub network_direct: Option<u32>,
    /// `*JumboPacket`.
    pub jumbo_packet: Option<u32>,
    /// `*NetworkDirectRoCEFrameSize`.
    pub roce_frame_size: Option<u32>,
    /// `NetworkAddress`, as `NdisReadNetworkAddress` returned it.
    pub network_address: Option<&'a [u8]>,
    /// `SoftNdkChecked`.
    pub checked: Option<u32>,
    /// `SoftNdkCheckedStop`.
    pub checked_stop: Option<u32>,
}

impl AdapterConfig {
    /// Decides the configuration from the raw values and the interface's
    /// `NetLuidIndex` (for the generated MAC address).
    #[must_use]
    pub fn from_raw(raw: &RawConfig<'_>, net_luid_index: u32) -> Self {
        let jumbo_packet = jumbo_packet(raw.jumbo_packet);
        let registry_mac = mac_from_registry(raw.network_address);
        Self {
            network_direct: network_direct_permitted(raw.network_direct),
            jumbo_packet,
            roce_frame_size: roce_frame_size(
                raw.roce_frame_size
                    .filter(|_| roce_frame_size_applies(RDMA_TECHNOLOGY)),
                jumbo_packet,
            ),
            mac: registry_mac.unwrap_or(generated_mac(net_luid_index)),
            mac_from_registry: registry_mac.is_some(),
            checked: checked_mode(raw.checked, raw.checked_stop),
        }
    }

    /// The MTU reported to NDIS: the frame without its Ethernet header.
    #[must_use]
    pub const fn mtu(&self) -> u32 {
        self.jumbo_packet - ETHERNET_HEADER
    }
}

// --- The virtual Ethernet's underlay (VXLAN): SoftNdkPeers, SoftNdkVni ---------

/// `SoftNdkVni` when missing or out of range: 1, the first VNI (a Linux
/// peer: `ip link add … type vxlan id 1 …`).
pub const DEFAULT_VNI: u32 = 1;

/// The largest VNI (24 bits).
pub const MAX_VNI: u32 = crate::rnic::ether::vxlan::VNI_MAX;

/// The most peers `SoftNdkPeers` may name (more are refused, counted).
pub const MAX_PEERS: usize = 32;

/// The longest peer address text accepted (a full IPv6 address with an
/// embedded IPv4 one is 45 characters).
const MAX_ADDRESS_TEXT: usize = 45;

/// `SoftNdkVni`, validated: 1..=16777215, else [`DEFAULT_VNI`] (0 is
/// refused: RFC 7348 reserves no VNI, but Linux refuses `id 0` on no
/// kernel and many tools take 0 as "unset").
#[must_use]
pub fn vni(value: Option<u32>) -> u32 {
    value
        .filter(|v| (1..=MAX_VNI).contains(v))
        .unwrap_or(DEFAULT_VNI)
}

/// `SoftNdkPeers`, parsed: the valid, distinct peer addresses in order,
/// and how many entries were refused (unparsable, unspecified, multicast,
/// broadcast, a repeat, or beyond [`MAX_PEERS`]). A refused entry does not
/// spoil the others: the adapter logs the count and uses what is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peers {
    addrs: [core::net::IpAddr; MAX_PEERS],
    len: usize,
    /// Entries refused.
    pub refused: usize,
}

impl Peers {
    /// No peer.
    pub const EMPTY: Self = Self {
        addrs: [core::net::IpAddr::V4(core::net::Ipv4Addr::UNSPECIFIED); MAX_PEERS],
        len: 0,
        refused: 0,
    };

    /// The peers.
    #[must_use]
    pub fn addrs(&self) -> &[core::net::IpAddr] {
        self.addrs.get(..self.len).unwrap_or_default()
    }

    /// One token ended: refused when it was too long or not ASCII, else
    /// parsed (an empty token, two separators in a row, is nothing).
    fn finish_token(&mut self, text: &[u8], bad: bool) {
        if bad {
            self.refused += 1;
        } else if !text.is_empty() {
            self.push_text(text);
        }
    }

    fn push_text(&mut self, text: &[u8]) {
        let parsed = core::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse::<core::net::IpAddr>().ok())
            .map(|ip| ip.to_canonical());
        let usable = parsed.filter(|ip| {
            !ip.is_unspecified()
                && !ip.is_multicast()
                && !matches!(ip, core::net::IpAddr::V4(v4) if v4.is_broadcast())
                && !self.addrs().contains(ip)
        });
        match (usable, self.addrs.get_mut(self.len)) {
            (Some(ip), Some(slot)) => {
                *slot = ip;
                self.len += 1;
            }
            _ => self.refused += 1,
        }
    }
}

/// Parses `SoftNdkPeers` from the registry's UTF-16 (an `NDIS_STRING`):
/// addresses separated by commas, semicolons or white space; IPv4 dotted
/// quads or IPv6 text (no zone, no brackets, no port: the port is VXLAN's,
/// 4789). IPv4-mapped IPv6 addresses count as IPv4.
#[must_use]
pub fn parse_peers(units: &[u16]) -> Peers {
    let mut peers = Peers::EMPTY;
    let mut token = [0_u8; MAX_ADDRESS_TEXT];
    let mut len = 0_usize;
    let mut too_long = false;
    for &unit in units {
        let separator = matches!(unit, 0 | 0x09 | 0x0A | 0x0D | 0x20 | 0x2C | 0x3B);
        if separator {
            peers.finish_token(token.get(..len).unwrap_or_default(), too_long);
            len = 0;
            too_long = false;
            continue;
        }
        match (u8::try_from(unit), token.get_mut(len)) {
            (Ok(byte), Some(slot)) if byte.is_ascii() => {
                *slot = byte;
                len += 1;
            }
            _ => too_long = true,
        }
    }
    peers.finish_token(token.get(..len).unwrap_or_default(), too_long);
    peers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_fault_keywords_are_off_by_default_and_validated() {
        use crate::rnic::fault::{KINDS, Kind};
        assert_eq!(fault_plan(None, None, None), Faults::Off);
        assert_eq!(fault_plan(Some(7), Some(0), Some("")), Faults::Off);
        assert_eq!(fault_plan(Some(7), Some(1_000_001), None), Faults::Invalid);
        assert_eq!(fault_plan(None, None, Some("post@0")), Faults::Invalid);
        assert_eq!(fault_plan(None, None, Some("nothing@1")), Faults::Invalid);
        assert_eq!(fault_plan(Some(1), Some(5), Some("off")), Faults::Off);
        let Faults::On(plan) = fault_plan(Some(7), Some(500), None) else {
            panic!("a plan");
        };
        assert_eq!((plan.seed, plan.rates), (7, [500; KINDS]));
        let Faults::On(plan) = fault_plan(Some(7), None, Some("abort@3, post=0.5")) else {
            panic!("a plan");
        };
        assert_eq!(plan.seed, 7);
        assert_eq!(plan.schedule[0], Some((Kind::Abort, 3)));
        assert_eq!(plan.rates[Kind::Post as usize], 500_000);
        assert_eq!(plan.rates[Kind::Create as usize], 0);
    }

    #[test]
    fn test_fault_schedule_keyword_read_as_the_registry_gives_it() {
        use crate::rnic::fault::Kind;
        let wide = |text: &str| text.encode_utf16().collect::<alloc::vec::Vec<u16>>();
        assert_eq!(fault_plan_utf16(Some(7), None, None), Faults::Off);
        assert_eq!(
            fault_plan_utf16(Some(7), Some(500), None),
            fault_plan(Some(7), Some(500), None)
        );
        let Faults::On(plan) =
            fault_plan_utf16(Some(9), None, Some(&wide("post@3,abort@10\0junk")))
        else {
            panic!("a plan");
        };
        assert_eq!(plan.seed, 9);
        assert_eq!(plan.schedule[0], Some((Kind::Post, 3)));
        assert_eq!(plan.schedule[1], Some((Kind::Abort, 10)));
        assert_eq!(
            fault_plan_utf16(None, Some(5), Some(&wide("off"))),
            Faults::Off
        );
        assert_eq!(
            fault_plan_utf16(None, None, Some(&wide("post@é3"))),
            Faults::Invalid
        );
        assert_eq!(
            fault_plan_utf16(None, None, Some(&wide("nothing@1"))),
            Faults::Invalid
        );
        let long = wide(&"post@1,".repeat(MAX_FAULT_SCHEDULE_TEXT));
        assert_eq!(fault_plan_utf16(None, None, Some(&long)), Faults::Invalid);
    }

    #[test]
    fn test_network_direct_defaults_to_enabled_rule_a22() {
        assert!(network_direct_permitted(None), "INF default is 1");
        assert!(network_direct_permitted(Some(1)));
        assert!(!network_direct_permitted(Some(0)));
    }

    #[test]
    fn test_roce_frame_size_default_is_1024_rule_a24() {
        let size = roce_frame_size(None, DEFAULT_JUMBO_PACKET);
        assert_eq!(size.configured, 1024);
        assert_eq!(size.operational, 1024);
        assert!(!size.must_log());
        // An unsupported value is the default too.
        assert_eq!(roce_frame_size(Some(1500), 9014).configured, 1024);
    }

    #[test]
    fn test_roce_frame_size_capped_by_jumbo_packet_and_logged_rule_a24() {
        // Standard frames: the largest RoCE size not above 1514 is 1024.
        let size = roce_frame_size(Some(4096), 1514);
        assert_eq!(size.operational, 1024);
        assert!(size.must_log(), "operational differs from configured");
        // 4088-byte jumbo frames allow 2048; 9014 allow 4096.
        assert_eq!(roce_frame_size(Some(4096), 4088).operational, 2048);
        let full = roce_frame_size(Some(4096), 9014);
        assert_eq!(full.operational, 4096);
        assert!(!full.must_log());
        // A smaller configured size is kept as it is.
        assert_eq!(roce_frame_size(Some(512), 9014).operational, 512);
    }

    #[test]
    fn test_roce_frame_size_ignored_by_the_iwarp_adapter_rule_a24() {
        use crate::abi::NdkRdmaTechnology as T;
        assert!(roce_frame_size_applies(T::ROCE_V2));
        assert!(roce_frame_size_applies(T::ROCE));
        assert!(!roce_frame_size_applies(T::IWARP));
        assert_eq!(RDMA_TECHNOLOGY, T::IWARP);
        // A value set by hand on the iWARP adapter changes nothing and is
        // never reported as a RoCE MTU mismatch.
        let raw = RawConfig {
            roce_frame_size: Some(4096),
            ..RawConfig::default()
        };
        let config = AdapterConfig::from_raw(&raw, 1);
        assert_eq!(config.roce_frame_size.configured, DEFAULT_ROCE_FRAME_SIZE);
        assert!(!config.roce_frame_size.must_log());
    }

    #[test]
    fn test_jumbo_packet_validated() {
        assert_eq!(jumbo_packet(None), 1514);
        assert_eq!(jumbo_packet(Some(9014)), 9014);
        assert_eq!(jumbo_packet(Some(9000)), 1514);
    }

    #[test]
    fn test_mac_from_registry_must_be_six_byte_unicast() {
        let good = [0x02, 0, 0, 0, 0, 1];
        assert_eq!(mac_from_registry(Some(&good)), Some(good));
        assert_eq!(mac_from_registry(Some(&good[..5])), None);
        assert_eq!(mac_from_registry(Some(&[0x01, 0, 0, 0, 0, 1])), None);
        assert_eq!(mac_from_registry(Some(&[0; 6])), None);
        assert_eq!(mac_from_registry(None), None);
    }

    #[test]
    fn test_generated_mac_is_local_unicast_and_per_interface() {
        let a = generated_mac(0x12_3456);
        assert_eq!(a, [0x02, b'S', b'N', 0x12, 0x34, 0x56]);
        assert_eq!(a[0] & 0x01, 0, "unicast");
        assert_eq!(a[0] & 0x02, 0x02, "locally administered");
        assert_ne!(generated_mac(1), generated_mac(2));
    }

    #[test]
    fn test_config_from_raw_prefers_registry_mac() {
        let mac = [0x02, 1, 2, 3, 4, 5];
        let raw = RawConfig {
            network_direct: Some(0),
            jumbo_packet: Some(9014),
            roce_frame_size: Some(4096),
            network_address: Some(&mac),
            ..RawConfig::default()
        };
        let config = AdapterConfig::from_raw(&raw, 7);
        assert!(!config.network_direct);
        assert_eq!(config.mac, mac);
        assert!(config.mac_from_registry);
        assert_eq!(config.mtu(), 9000);
        let generated = AdapterConfig::from_raw(&RawConfig::default(), 7);
        assert_eq!(generated.mac, generated_mac(7));
        assert!(!generated.mac_from_registry);
        assert!(generated.network_direct);
    }

    #[test]
    fn test_checked_mode_defaults_to_off_and_stops_only_when_both_are_one() {
        assert_eq!(checked_mode(None, None), CheckedMode::Off);
        assert_eq!(checked_mode(Some(0), Some(1)), CheckedMode::Off);
        assert_eq!(checked_mode(Some(2), None), CheckedMode::Off);
        assert_eq!(checked_mode(Some(1), None), CheckedMode::Report);
        assert_eq!(checked_mode(Some(1), Some(7)), CheckedMode::Report);
        assert_eq!(checked_mode(Some(1), Some(1)), CheckedMode::Stop);
        let config = AdapterConfig::from_raw(&RawConfig::default(), 1);
        assert_eq!(config.checked, CheckedMode::Off);
    }

    #[test]
    fn test_checked_callback_bound_defaults_to_one_millisecond() {
        assert_eq!(checked_callback_bound(None), 1_000);
        assert_eq!(checked_callback_bound(Some(0)), 1_000);
        assert_eq!(checked_callback_bound(Some(1)), 1);
        assert_eq!(checked_callback_bound(Some(250)), 250);
        assert_eq!(
            checked_callback_bound(Some(MAX_CALLBACK_BOUND_US)),
            MAX_CALLBACK_BOUND_US
        );
        assert_eq!(
            checked_callback_bound(Some(MAX_CALLBACK_BOUND_US + 1)),
            1_000
        );
        // The provider's own kernel default is the same.
        assert_eq!(u64::from(DEFAULT_CALLBACK_BOUND_US), 1_000);
    }

    #[test]
    fn test_ascii_utf16_keyword() {
        const W: [u16; 14] = crate::kernel::ascii_utf16("*NetworkDirect");
        assert_eq!(W[0], u16::from(b'*'));
        assert_eq!(String::from_utf16(&W).unwrap(), keyword::NETWORK_DIRECT);
    }
}
