//! The NDKPI 1.2 ABI and the NDIS NDK structures as `#[repr(C)]` Rust.
//!
//! Everything here is written from the fact tables of
//! `shared/spec/ndk-abi.md` (cited below as "§n"), not from a C header, and every
//! struct and dispatch table has its size, alignment and field offsets asserted
//! at compile time for x86-64 (a wrong field order fails `cargo build`), with the
//! same numbers re-checked by one named unit test per type (`layout_*`).
//!
//! There is no logic in this module: types, constants and layout assertions
//! only (`Guid::from_u128` aside, the const constructor that writes a GUID
//! constant in its registry form).
//!
//! # Conventions
//!
//! * Names are the C names in Rust casing, keeping the `Ndk` / `Ndis` prefix so
//!   that they do not collide with the provider's own types (`NDK_QP` →
//!   [`NdkQp`], `NDK_FN_SEND` → [`NdkFnSend`], `NDIS_NDK_CAPABILITIES` →
//!   [`NdisNdkCapabilities`]). Fields are the C member names in snake case;
//!   function-type parameters drop the Hungarian `p`/`pNdk` prefix.
//! * Rust types follow the C types: a C enum (`NDK_OBJECT_TYPE`,
//!   `NDK_OPERATION_TYPE`, `NDK_RDMA_TECHNOLOGY`; 4-byte MSVC `int`s) is a
//!   `#[repr(transparent)]` newtype over `u32` with associated constants,
//!   declared with `c_enum!`, so any value a consumer writes is representable
//!   (a Rust `enum` would make an unknown value undefined behaviour). A `ULONG` flags word stays `u32` in
//!   structs and signatures; the [`OpFlags`], [`MrFlags`], [`AdapterFlags`] and
//!   [`CounterMask`] bitflags build and inspect those words (`.bits()`,
//!   `from_bits_retain`). `BOOLEAN` is [`Boolean`] (`u8`), for the same reason
//!   as the newtypes.
//! * A consumer callback passed as a *parameter* is `Option<NdkFn…>`, even where
//!   the documentation calls it mandatory: a consumer may pass NULL and the
//!   provider must be able to see that and reject it. Dispatch-table slots are
//!   plain `NdkFn…` values because a provider always fills every slot.
//! * The NDKPI 2.1 additions are declared as function types only and marked
//!   UNVERIFIED; the dispatch tables are exactly the NDKPI 1.2 ones.
//! * Padding that the ndk-abi.md tables list inside a struct is declared as a
//!   `padding_<offset>` field (and the NDKPI 1.2 padding of `NDK_RESULT_EX` as
//!   its 2.1 name), so that a zeroed value has no uninitialised bytes: these
//!   structures are copied into consumer buffers and, through the NDK OIDs, up
//!   to user mode, where stale kernel bytes would leak.
//! * Variable-size structures (trailing `[T; 1]` array) and the MDL header are
//!   not `Clone`/`Copy`: a copy would silently keep only the declared entry.
//! * Pointer-carrying structs are neither `Send` nor `Sync`; whoever shares them
//!   across threads decides that.

/// Asserts the x86-64 layout of a `#[repr(C)]` type against ndk-abi.md.
///
/// `assert_layout!(test_name: Type, size = S, align = A, { field: offset, ... })`
/// expands to a `const` block that fails compilation when the size, the
/// alignment or any listed field offset differs, and to a `#[test]` function
/// `test_name` that re-checks the same numbers at run time so that `cargo test`
/// lists every checked type by name. The test name is given by the caller
/// because `macro_rules!` cannot build identifiers.
macro_rules! assert_layout {
    (
        $test:ident : $ty:ty, size = $size:expr, align = $align:expr,
        { $($field:ident : $offset:expr),* $(,)? }
    ) => {
        #[cfg(target_arch = "x86_64")]
        const _: () = {
            assert!(
                ::core::mem::size_of::<$ty>() == $size,
                concat!("ndk-abi.md: wrong size of ", stringify!($ty)),
            );
            assert!(
                ::core::mem::align_of::<$ty>() == $align,
                concat!("ndk-abi.md: wrong alignment of ", stringify!($ty)),
            );
            $(
                assert!(
                    ::core::mem::offset_of!($ty, $field) == $offset,
                    concat!(
                        "ndk-abi.md: wrong offset of ",
                        stringify!($ty),
                        "::",
                        stringify!($field),
                    ),
                );
            )*
        };

        #[cfg(all(test, target_arch = "x86_64"))]
        #[test]
        fn $test() {
            // `black_box` keeps these runtime checks (the `const` block above has
            // already done them at compile time) from being constant-folded away.
            let size: usize = ::core::hint::black_box($size);
            let align: usize = ::core::hint::black_box($align);
            assert_eq!(::core::mem::size_of::<$ty>(), size, "size of {}", stringify!($ty));
            assert_eq!(::core::mem::align_of::<$ty>(), align, "align of {}", stringify!($ty));
            $(
                let offset: usize = ::core::hint::black_box($offset);
                assert_eq!(
                    ::core::mem::offset_of!($ty, $field),
                    offset,
                    "offset of {}::{}",
                    stringify!($ty),
                    stringify!($field),
                );
            )*
        }
    };
}

/// A file's table of layouts: one [`assert_layout!`] per row.
///
/// Each row reads `test_name: Type, size S, align A { field: offset, ... }`,
/// the numbers of one ndk-abi.md (or header) table, and expands to the same
/// `const` block and named `#[test]` as `assert_layout!` does for it, so every
/// row still fails the build when a field or slot moves.
macro_rules! assert_layouts {
    ($(
        $test:ident : $ty:ty, size $size:literal, align $align:literal
        { $($field:ident : $offset:literal),* $(,)? }
    )*) => {
        $(
            assert_layout!($test: $ty, size = $size, align = $align, { $($field: $offset),* });
        )*
    };
}

/// Ties each `NDIS_SIZEOF_*` constant to its declaration.
///
/// An `NDIS_SIZEOF_*` (a `USHORT`) is "the size through the last member" of
/// its structure. Each row asserts at compile time (x86-64) one reading of it,
/// so that neither the constant nor the layout can drift from the other:
/// `NDIS_SIZEOF_X => Type { last_member: MemberType }` that it equals the
/// offset of that member plus its size; `NDIS_SIZEOF_X => Type` that it
/// equals the whole `size_of::<Type>()` (no tail padding).
macro_rules! assert_ndis_sizeof {
    ($($size:expr => $ty:ty $({ $field:ident : $field_ty:ty })?),* $(,)?) => {
        #[cfg(target_arch = "x86_64")]
        const _: () = {
            const fn widen(size: u16) -> usize {
                size as usize
            }
            $(
                assert!(
                    widen($size) == assert_ndis_sizeof!(@end $ty $(, $field, $field_ty)?),
                    concat!(
                        "wrong ",
                        stringify!($size),
                        ": not the size of ",
                        stringify!($ty),
                        $(" through ", stringify!($field),)?
                    ),
                );
            )*
        };
    };
    (@end $ty:ty) => {
        ::core::mem::size_of::<$ty>()
    };
    (@end $ty:ty, $field:ident, $field_ty:ty) => {
        ::core::mem::offset_of!($ty, $field) + ::core::mem::size_of::<$field_ty>()
    };
}

/// Declares C function types, the one way this module writes them.
///
/// Each entry `Name(params) -> Ret;` becomes `pub type Name = unsafe extern
/// "system" fn(params) -> Ret` (no `-> Ret`: returns nothing), with its doc
/// comments kept and the parameters in the header's order. `extern
/// "system"` is the x64 Windows convention that `NTAPI`, `WSKAPI` and the
/// NDIS and NDKPI function classes all name (§1), and every one is `unsafe`
/// to call because each takes raw pointers only the caller can vouch for:
/// both said here once. A family whose parameters end alike has its own
/// front (`ndk_fn!`, `wsk_fn!`) that adds the shared tail and hands the
/// plain entry here. The result is a plain type alias, which the dispatch
/// tables' and characteristics' layout assertions check.
macro_rules! c_fn {
    ($(
        $(#[$doc:meta])*
        $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;
    )*) => {
        $(
            $(#[$doc])*
            pub type $name = unsafe extern "system" fn($($arg: $ty),*) $(-> $ret)?;
        )*
    };
}

/// Declares C enums the way the conventions above keep them.
///
/// Each `pub struct Name(pub u32) { const MEMBER = value; ... }` becomes a
/// `#[repr(transparent)]` newtype over `u32` (any value a consumer writes stays
/// representable) with `Clone, Copy, Debug, Default, PartialEq, Eq, Hash` and
/// one associated constant per member; doc comments and attributes are kept on
/// the type and on each member. Further methods go in a separate `impl`.
macro_rules! c_enum {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident(pub u32) {
            $( $(#[$member_meta:meta])* const $member:ident = $value:expr; )*
        }
    )*) => {
        $(
            $(#[$meta])*
            #[repr(transparent)]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
            pub struct $name(pub u32);

            impl $name {
                $( $(#[$member_meta])* pub const $member: Self = Self($value); )*
            }
        )*
    };
}

mod consts;
mod fault;
mod ndis;
mod ndis_miniport;
mod ndk;
mod ndk_fn;
mod netio;
mod status;
mod types;
mod wsk;

pub use consts::*;
pub use fault::*;
pub use ndis::*;
pub use ndis_miniport::*;
pub use ndk::*;
pub use ndk_fn::*;
pub use netio::*;
pub use status::*;
pub use types::*;
pub use wsk::*;
