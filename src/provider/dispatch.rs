//! The dispatch tables, said once.
//!
//! Each object type declares its table with [`ndk_table!`]: per slot, the
//! field of the C table (its position and C type come from `abi::ndk`, whose
//! layout assertions fail the build when a slot moves), the slot's name as
//! the NDK headers spell it, and the Rust method it calls with the C
//! parameters after the object pointer. The macro writes the
//! `extern "system"` thunk of every slot — the pointer → object lookup with
//! its type check, the entry guard that carries the slot's name (L17), the
//! refusal of a pointer that is not one of ours — the close slot, and the
//! shared `NdkQueryExtension` slot. Adding a slot is one line.
//!
//! A method is an ordinary `fn` or `unsafe fn` taking `&Object<T>` first;
//! the thunk calls it through an `unsafe fn` pointer of exactly the slot's
//! signature, which also checks that signature at compile time (and the
//! table's field type checks the thunk's).

use crate::abi::{NtStatus, STATUS_INVALID_PARAMETER};

/// A dispatch slot's name, as the NDK headers spell it (`"NdkSend"`): what a
/// call entering an object leaves behind for a breach report (L17). Always a
/// `'static` constant, so the entry stores one thin pointer.
#[derive(Debug)]
pub struct Slot(pub &'static str);

impl Slot {
    /// The slot's name.
    pub const fn name(&self) -> &'static str {
        self.0
    }
}

/// The dispatch table of an object type, written by [`ndk_table!`].
pub trait Table {
    /// The table (a `static`), as the object's `Dispatch` pointer.
    fn dispatch() -> *const core::ffi::c_void;
}

/// What a slot returns for an object pointer that is not one of ours of the
/// table's type: `STATUS_INVALID_PARAMETER` for the slots that return a
/// status, zero for the token and result-count slots, nothing for the rest.
pub trait Refusal {
    /// The refusal.
    fn refused() -> Self;
}

impl Refusal for NtStatus {
    fn refused() -> Self {
        STATUS_INVALID_PARAMETER
    }
}

impl Refusal for u32 {
    fn refused() -> Self {
        0
    }
}

impl Refusal for () {
    fn refused() -> Self {}
}

/// Declares a dispatch table and writes its thunks:
///
/// ```text
/// ndk_table! {
///     static QP_DISPATCH: NdkQpDispatch for Qp at NdkQp, close ndk_close_qp = "NdkCloseQp";
///     ndk_flush = "NdkFlush" => flush();
///     ndk_send = "NdkSend" => send(context: *mut c_void, sgl: *const NdkSge, n: u32, flags: u32) -> NtStatus;
/// }
/// ```
///
/// Every slot `field = "Name" => method(params) -> R` becomes an
/// `unsafe extern "system" fn field(object: *mut NdkX, params) -> R`, an item
/// of the table's initializer (so `QP_DISPATCH::ndk_send` in a profile), that
/// enters the object ([`Object::from_ptr`](super::object::Object::from_ptr),
/// which checks type and tag) and calls `method(&object, params)`, or returns
/// [`Refusal::refused`] for anything else. `close` (absent for the adapter,
/// which closes through NDIS) becomes the table's `NdkCloseObject`.
///
/// Why the SAFETY comments of the pattern hold for every instance: a thunk
/// is reachable only through its table, and the table only through the
/// `Dispatch` pointer of an object of this type (`Table::dispatch`, written
/// by `Object::create`); the NDK contract makes the object the first
/// argument of every slot and keeps it open until its close completes (L19),
/// which is `from_ptr`'s contract; `from_ptr` refuses anything whose header
/// type and tag are not this type's. The other arguments are passed through
/// unchanged, so a method receives exactly what the C slot's contract
/// promises, and an `unsafe fn` method asks no more than that.
macro_rules! ndk_table {
    (
        $(#[$meta:meta])*
        static $table:ident: $Table:ident for $Kind:ident at $Ndk:ident
            $(, close $close:ident = $close_name:literal)?;
        $($field:ident = $name:literal => $method:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;)*
    ) => {
        $(#[$meta])*
        static $table: $Table = {
            $(
            #[doc = concat!("`", $close_name, "`: the generic close (L17–L19).")]
            unsafe extern "system" fn $close(
                object: *mut $crate::abi::NdkObjectHeader,
                callback: Option<$crate::abi::NdkFnCloseCompletion>,
                context: *mut core::ffi::c_void,
            ) -> $crate::abi::NtStatus {
                const SLOT: &$crate::provider::dispatch::Slot =
                    &$crate::provider::dispatch::Slot($close_name);
                // SAFETY: the consumer calls the close slot of this table,
                // so `object` is its object of this type whose close it has
                // not started (L19), or something `close_object` ignores.
                unsafe {
                    $crate::provider::object::close_object::<$Kind>(object, callback, context, SLOT)
                }
            }
        )?

        $(
            #[doc = concat!("`", $name, "`: enters the object, then [`", stringify!($method), "`].")]
            unsafe extern "system" fn $field(object: *mut $Ndk, $($arg: $ty),*) $(-> $ret)? {
                const SLOT: &$crate::provider::dispatch::Slot =
                    &$crate::provider::dispatch::Slot($name);
                let method: unsafe fn(&$crate::provider::object::Object<$Kind>, $($ty),*) $(-> $ret)? =
                    $method;
                // SAFETY: the consumer calls this slot of this table with its
                // object first, an object whose close has not completed (L19)
                // — the contract of `from_ptr`, which refuses null, foreign
                // and other-type pointers.
                let entered = unsafe {
                    $crate::provider::object::Object::<$Kind>::from_ptr(object.cast(), SLOT)
                };
                match entered {
                    // SAFETY: the other arguments are the consumer's, valid as
                    // the slot's C contract says (ndk-abi.md §4); no method
                    // asks more of them than that contract, and the guard
                    // keeps the object alive for the call.
                    Some(entered) => unsafe { method(&entered, $($arg),*) },
                    None => $crate::provider::dispatch::Refusal::refused(),
                }
            }
        )*
            $Table {
                $($close,)?
                ndk_query_extension: $crate::provider::query_extension,
                $($field,)*
            }
        };

        impl $crate::provider::dispatch::Table for $Kind {
            fn dispatch() -> *const core::ffi::c_void {
                let table: *const $Table = &raw const $table;
                table.cast()
            }
        }
    };
}

pub(crate) use ndk_table;
