//! Addresses and endpoints: the address family, the IPv4 / IPv6 address
//! (N1) with its wildcard (N31), and the endpoint (address and port).

use core::fmt;

/// An address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// An IP address, bytes in network order (N1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpAddr {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddr {
    /// The wildcard address of `family` (0.0.0.0 or ::).
    pub const fn unspecified(family: Family) -> Self {
        match family {
            Family::V4 => Self::V4([0; 4]),
            Family::V6 => Self::V6([0; 16]),
        }
    }

    /// The family.
    pub const fn family(&self) -> Family {
        match self {
            Self::V4(_) => Family::V4,
            Self::V6(_) => Family::V6,
        }
    }

    /// Whether this is the wildcard address of its family.
    pub fn is_unspecified(&self) -> bool {
        match self {
            Self::V4(b) => b.iter().all(|&x| x == 0),
            Self::V6(b) => b.iter().all(|&x| x == 0),
        }
    }
}

impl fmt::Display for IpAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::V4([b0, b1, b2, b3]) => write!(f, "{b0}.{b1}.{b2}.{b3}"),
            Self::V6(bytes) => {
                for (n, pair) in bytes.chunks_exact(2).enumerate() {
                    if n > 0 {
                        f.write_str(":")?;
                    }
                    if let [hi, lo] = pair {
                        write!(f, "{:x}", u16::from_be_bytes([*hi, *lo]))?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// An address and an ND port (host byte order; the provider converts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The address.
    pub ip: IpAddr,
    /// The port; 0 asks for an ephemeral one where a local endpoint is bound.
    pub port: u16,
}

impl Endpoint {
    /// `ip`:`port`.
    pub const fn new(ip: IpAddr, port: u16) -> Self {
        Self { ip, port }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip {
            IpAddr::V4(_) => write!(f, "{}:{}", self.ip, self.port),
            IpAddr::V6(_) => write!(f, "[{}]:{}", self.ip, self.port),
        }
    }
}
