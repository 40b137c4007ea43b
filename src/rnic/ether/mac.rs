//! Ethernet addresses and the two header fields the switch reads.

/// Length of an Ethernet header: destination, source, EtherType.
pub const ETH_HEADER_LEN: usize = 14;

/// Length of one 802.1Q tag, which a frame within the MTU may also carry.
pub const VLAN_TAG_LEN: usize = 4;

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: Self = Self([0xFF; 6]);

    /// Whether the group bit (the least significant bit of the first byte)
    /// is set: multicast, broadcast included.
    pub const fn is_multicast(self) -> bool {
        self.0[0] & 1 != 0
    }

    /// Whether every byte is zero.
    pub const fn is_zero(self) -> bool {
        matches!(self.0, [0, 0, 0, 0, 0, 0])
    }

    /// Whether a station may send from this address: neither a group address
    /// nor all zeroes.
    pub const fn is_valid_source(self) -> bool {
        !self.is_multicast() && !self.is_zero()
    }

    /// The destination address of `frame`, if it holds one.
    pub fn destination(frame: &[u8]) -> Option<Self> {
        frame.first_chunk::<6>().copied().map(Self)
    }

    /// The source address of `frame`, if it holds one.
    pub fn source(frame: &[u8]) -> Option<Self> {
        frame
            .get(6..)
            .and_then(<[u8]>::first_chunk::<6>)
            .copied()
            .map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_group_and_zero_addresses() {
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(MacAddr([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        assert!(MacAddr([0x01, 0, 0x5E, 0, 0, 1]).is_multicast());
        assert!(!MacAddr([0x02, 0, 0, 0, 0, 1]).is_multicast());
        assert!(MacAddr([0; 6]).is_zero());
        assert!(!MacAddr([0; 6]).is_valid_source());
        assert!(!MacAddr::BROADCAST.is_valid_source());
        assert!(MacAddr([0x02, 0, 0, 0, 0, 1]).is_valid_source());
    }

    #[test]
    fn test_header_fields() {
        let frame: Vec<u8> = (1..=14).collect();
        assert_eq!(
            MacAddr::destination(&frame),
            Some(MacAddr([1, 2, 3, 4, 5, 6]))
        );
        assert_eq!(
            MacAddr::source(&frame),
            Some(MacAddr([7, 8, 9, 10, 11, 12]))
        );
        assert_eq!(MacAddr::destination(&frame[..5]), None);
        assert_eq!(MacAddr::source(&frame[..11]), None);
    }
}
