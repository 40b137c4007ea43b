//! Linux host backend of the virtual Ethernet's test harness: a TAP device
//! and a way into a network namespace. Host only (`target_os = "linux"`);
//! never built into the driver, where the miniport and a WSK socket take
//! these roles.
//!
//! * [`Tap`] — `/dev/net/tun` opened as a TAP device (`IFF_TAP | IFF_NO_PI`):
//!   each `read` is one Ethernet frame the kernel sends out of the interface,
//!   each `write` one frame it receives.
//! * [`enter_netns`] — moves the calling thread into a named network
//!   namespace (`setns`), so that the TAP device and sockets it then creates
//!   live there.
//!
//! The two `ioctl`/`poll`/`setns` calls are the only `unsafe` code; they use
//! the `libc` crate's declarations (see `docs/ether.md` for why `libc`
//! rather than a TAP crate).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// A TAP device: Ethernet frames in and out of a kernel interface.
#[derive(Debug)]
pub struct Tap {
    file: File,
    name: String,
}

impl Tap {
    /// Creates (or attaches to) the TAP interface `name` in the calling
    /// thread's network namespace. The interface exists while the returned
    /// value lives.
    ///
    /// # Errors
    ///
    /// `name` is empty or too long for an interface name, `/dev/net/tun`
    /// cannot be opened, or the kernel refuses `TUNSETIFF` (not root, say).
    pub fn open(name: &str) -> io::Result<Self> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {name:?}"),
            ));
        }
        let file = File::options()
            .read(true)
            .write(true)
            .open("/dev/net/tun")?;
        // SAFETY: `ifreq` holds only integers, arrays of them and a raw
        // pointer, for all of which all-zero bytes are a valid value.
        let mut request: libc::ifreq = unsafe { core::mem::zeroed() };
        for (slot, byte) in request.ifr_name.iter_mut().zip(bytes) {
            *slot = libc::c_char::from_ne_bytes([*byte]);
        }
        let flags = libc::IFF_TAP | libc::IFF_NO_PI;
        request.ifr_ifru.ifru_flags = libc::c_short::try_from(flags)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the descriptor is open (`file` owns it); TUNSETIFF reads and
        // writes one `ifreq`, and `request` is one, alive and exclusively
        // borrowed for the call.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &raw mut request) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            file,
            name: name.to_owned(),
        })
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits up to `timeout` for a frame the kernel sends out of the
    /// interface and reads it into `buf`; `Ok(None)` when none came. A frame
    /// longer than `buf` is truncated (by the kernel).
    ///
    /// # Errors
    ///
    /// `poll` or `read` failed.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let mut pollfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pollfd` is one valid, exclusively borrowed `pollfd`, and
        // the count passed is 1.
        let rc = unsafe { libc::poll(&raw mut pollfd, 1, millis) };
        if rc < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(error)
            };
        }
        if rc == 0 || pollfd.revents & libc::POLLIN == 0 {
            return Ok(None);
        }
        (&self.file).read(buf).map(Some)
    }

    /// Hands `frame` to the kernel as received on the interface.
    ///
    /// # Errors
    ///
    /// The kernel refused the write (a frame too long for the MTU, say).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let written = (&self.file).write(frame)?;
        if written == frame.len() {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::WriteZero))
        }
    }
}

/// Moves the calling thread into the network namespace bound at `path`
/// (`/var/run/netns/NAME` for one made by `ip netns add NAME`). Only this
/// thread moves; sockets and TAP devices it creates afterwards belong to the
/// namespace and stay there whichever thread later uses them.
///
/// # Errors
///
/// `path` cannot be opened or `setns` fails (not root, say).
pub fn enter_netns(path: &Path) -> io::Result<()> {
    let file = File::open(path)?;
    // SAFETY: the descriptor is open for the call (`file` owns it);
    // `setns` only reads it and changes the calling thread's namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
