//! The emulated RDMA NIC.
//!
//! Plain, safe Rust that knows nothing of NDK types or NTSTATUS: its own ids,
//! keys, work requests, completions and error enums. It is where the rules of
//! `../shared/spec/rules.md` live (families D and C entirely, and the memory,
//! posting, SRQ and error rules), each cited by id where it is implemented.
//! The only `unsafe` code is in [`memory`], the one place that copies bytes.
//!
//! See `docs/rnic.md` for the design and the choices made where the
//! specification leaves room.

/// Declares field-less enums whose variants carry fixed numbers (a wire
/// code, a table index), each variant said once: the enum, `#[repr(u8)]`
/// with `Clone, Copy, Debug, PartialEq, Eq, Hash`; `ALL`, every variant in
/// declaration order; and `from_u8`, the variant of a number (`None` for
/// any other, which a parser turns into its own error). Further methods go
/// in a separate `impl`.
macro_rules! numbered {
    ($(
        $(#[$meta:meta])*
        pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:literal,)* }
    )*) => {
        $(
            $(#[$meta])*
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
            #[repr(u8)]
            pub enum $name {
                $($(#[$vmeta])* $variant = $value,)*
            }

            impl $name {
                /// Every variant, in declaration order.
                pub const ALL: [Self; [$(Self::$variant),*].len()] = [$(Self::$variant),*];

                /// The variant numbered `value`.
                #[must_use]
                pub const fn from_u8(value: u8) -> Option<Self> {
                    match value {
                        $($value => Some(Self::$variant),)*
                        _ => None,
                    }
                }
            }
        )*
    };
}

pub mod cm;
pub mod cq;
pub mod device;
pub mod engine;
pub mod ether;
pub mod fault;
pub mod iwarp;
pub mod keys;
pub mod memory;
pub mod mr;
pub mod qp;
pub mod ring;
pub mod srq;
pub mod types;

#[cfg(test)]
#[cfg(not(loom))]
pub mod testing;

pub use types::*;

#[cfg(test)]
#[cfg(not(loom))]
mod model_tests;

#[cfg(all(test, loom))]
mod loom_model;
