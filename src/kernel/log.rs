//! The debug log.
//!
//! [`klog!`](crate::klog) formats a message into a fixed buffer on the stack (no
//! allocation, safe at DISPATCH_LEVEL) and hands it to the platform: `DbgPrintEx`
//! with the IHV-network component id in the kernel (visible in WinDbg or
//! DebugView with the component's filter enabled), standard error on the host
//! when the `SOFTNDK_LOG` environment variable is set. Messages longer than the
//! buffer are cut.

use core::fmt::{self, Write};

/// Bytes of one formatted message, including the line end and terminating NUL.
pub const MESSAGE_CAPACITY: usize = 256;

/// Severity of a message, as the kernel's debug filter levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// `DPFLTR_ERROR_LEVEL`: always shown.
    Error = 0,
    /// `DPFLTR_WARNING_LEVEL`.
    Warning = 1,
    /// `DPFLTR_TRACE_LEVEL`.
    Trace = 2,
    /// `DPFLTR_INFO_LEVEL`.
    Info = 3,
}

/// A NUL-terminated message built on the stack.
pub struct Message {
    bytes: [u8; MESSAGE_CAPACITY],
    len: usize,
}

impl Message {
    /// An empty message.
    pub const fn new() -> Self {
        Self {
            bytes: [0; MESSAGE_CAPACITY],
            len: 0,
        }
    }

    /// The text so far (always valid UTF-8: only whole characters are kept).
    pub fn as_str(&self) -> &str {
        let bytes = self.bytes.get(..self.len).unwrap_or_default();
        core::str::from_utf8(bytes).unwrap_or_default()
    }

    /// The text with its terminating NUL, for C consumers of the message.
    pub fn as_c_bytes(&self) -> &[u8] {
        self.bytes.get(..=self.len).unwrap_or_default()
    }
}

impl Default for Message {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for Message {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Keep one byte for the NUL; cut at a character boundary when full.
        let room = MESSAGE_CAPACITY - 1 - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        let (src, dst) = (
            s.as_bytes().get(..take),
            self.bytes.get_mut(self.len..self.len + take),
        );
        if let (Some(src), Some(dst)) = (src, dst) {
            dst.copy_from_slice(src);
            self.len += take;
        }
        if take < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// Formats and emits one line. Use [`klog!`](crate::klog) rather than this.
pub fn emit(level: Level, args: fmt::Arguments<'_>) {
    let mut message = Message::new();
    // A message cut at the capacity is still worth emitting.
    let _ = message.write_fmt(format_args!("softndk: {args}\n"));
    super::backend::debug_print(level, &message);
}

/// Writes one line to the debug log: `klog!(Level::Info, "qp {} flushed", id)`.
#[macro_export]
macro_rules! klog {
    ($level:expr, $($arg:tt)*) => {
        $crate::kernel::log::emit($level, ::core::format_args!($($arg)*))
    };
}

/// Implements `Debug` for a struct by showing only the named fields and
/// marking the rest as left out (`finish_non_exhaustive`): for objects whose
/// other fields are locks, counters or references that say nothing useful.
/// `debug_fields!(Adapter { config, ndk })`.
macro_rules! debug_fields {
    ($type:ident { $($field:ident),+ $(,)? }) => {
        impl ::core::fmt::Debug for $type {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(::core::stringify!($type))
                    $(.field(::core::stringify!($field), &self.$field))+
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use debug_fields;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_message_is_nul_terminated_and_cut_at_capacity() {
        let mut message = Message::new();
        write!(message, "{}", "é".repeat(400)).unwrap_err();
        assert!(message.as_str().len() < MESSAGE_CAPACITY);
        assert!(message.as_str().chars().all(|c| c == 'é'));
        assert_eq!(message.as_c_bytes().last(), Some(&0));
        assert_eq!(message.as_c_bytes().len(), message.as_str().len() + 1);
    }

    #[test]
    fn test_klog_formats_arguments() {
        let mut message = Message::new();
        let state = "error";
        write!(message, "qp {} state {state}", 7).unwrap();
        assert_eq!(message.as_str(), "qp 7 state error");
        klog!(Level::Trace, "qp {} state {state}", 7);
    }
}
