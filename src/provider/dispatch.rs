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
    /// `NDK_OBJECT_TYPE` of the objects the table serves.
    const TYPE: crate::abi::NdkObjectType;
    /// The close slot's name (`"NdkCloseQp"`); `None` for the adapter,
    /// which closes through NDIS (or `SoftNdkCloseAdapter` in host mode).
    const CLOSE: Option<Slot>;
    /// Every slot that enters the object, in table order: all but the close
    /// and the shared `NdkQueryExtension`, which never reads its object. A
    /// generated list, so a slot added to a table is in it (the close-race
    /// stress, `tests/close_race.rs`, loops over it).
    const SLOTS: &'static [Slot];
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
///     static QP_DISPATCH: NdkQpDispatch for Qp (QP) at NdkQp, close ndk_close_qp = "NdkCloseQp";
///     ndk_flush = "NdkFlush" => flush();
///     ndk_send = "NdkSend" => send(context: *mut c_void, sgl: *const NdkSge, n: u32, flags: u32) -> NtStatus;
///     ndk_accept = "NdkAccept" => accept(Accept { qp: *mut NdkQp, … }) -> NtStatus;
///     ndk_create_mr = "NdkCreateMr" => create_mr(fast_register: Boolean), creates NdkMr;
/// }
/// ```
///
/// The header names the table's C type, the provider state of its objects
/// and their `NDK_OBJECT_TYPE` (`Table::TYPE`), and the C object type.
/// Every slot `field = "Name" => method(params) -> R` becomes an
/// `unsafe extern "system" fn field(object: *mut NdkX, params) -> R`, an item
/// of the table's initializer (so `QP_DISPATCH::ndk_send` in a profile), that
/// enters the object ([`Object::from_ptr`](super::object::Object::from_ptr),
/// which checks type and tag) and calls `method(&object, params)`, or returns
/// [`Refusal::refused`] for anything else. The slot's C parameters are
/// written once, here: with `method(Args { params })` the macro also
/// declares `struct Args` with one field per parameter and calls
/// `method(&object, Args { params })` (for slots of many parameters, whose
/// method then reads `args.field`).
///
/// A slot ending `, creates NdkX` is a create (L5–L7): its C slot also takes
/// the create completion, its context and the out-pointer (`NdkX**`), and
/// returns a status; the thunk refuses a null out-pointer, calls
/// `method(&object, params) -> Result<*mut NdkX, NtStatus>` and hands what it
/// made to the consumer ([`created`](super::created)). `close` (absent for
/// the adapter, which closes through NDIS) becomes the table's
/// `NdkCloseObject`. A slot ending `, then after(extra…)` passes what the
/// method returned through `after(&object, SLOT, extra…, result)` before the
/// call leaves the object (the QP's checked-mode watch of its posts, D5, X5).
///
/// Why the SAFETY comments of the pattern hold for every instance: a thunk
/// is reachable only through its table, and the table only through the
/// `Dispatch` pointer of an object of this type (`Table::dispatch`, written
/// by `Object::create`); the NDK contract makes the object the first
/// argument of every slot and keeps it open until its close completes (L19),
/// which is `from_ptr`'s contract; `from_ptr` refuses anything whose header
/// type and tag are not this type's. The other arguments are passed through
/// unchanged (or gathered unchanged in the slot's `Args`), so a method
/// receives exactly what the C slot's contract promises, and an `unsafe fn`
/// method asks no more than that. A create's out-pointer, completion and
/// context are the consumer's for this create by the same contract.
macro_rules! ndk_table {
    (
        $(#[$meta:meta])*
        static $table:ident: $Table:ident for $Kind:ident ($Type:ident) at $Ndk:ident
            $(, close $close:ident = $close_name:literal)?;
        $($field:ident = $name:literal => $method:ident $params:tt $(-> $ret:ty)?
            $(, creates $out:ty)? $(, then $after:ident($($extra:expr),*))?;)*
    ) => {
        $($crate::provider::dispatch::ndk_table!(@args $name $params);)*

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
            $crate::provider::dispatch::ndk_table!(@slot $Kind, $Ndk, $field, $name, $method $params
                [$($ret)?] [$($out)?] [$($after($($extra),*))?]);
        )*
            $Table {
                $($close,)?
                ndk_query_extension: $crate::provider::query_extension,
                $($field,)*
            }
        };

        impl $crate::provider::dispatch::Table for $Kind {
            const TYPE: $crate::abi::NdkObjectType = $crate::abi::NdkObjectType::$Type;
            const CLOSE: Option<$crate::provider::dispatch::Slot> =
                $crate::provider::dispatch::ndk_table!(@close $($close_name)?);
            const SLOTS: &'static [$crate::provider::dispatch::Slot] =
                &[$($crate::provider::dispatch::Slot($name)),*];
            fn dispatch() -> *const core::ffi::c_void {
                let table: *const $Table = &raw const $table;
                table.cast()
            }
        }
    };
    (@close $name:literal) => { Some($crate::provider::dispatch::Slot($name)) };
    (@close) => { None };

    // A slot's `Args`, when its parameters are gathered in one.
    (@args $name:literal ($Args:ident { $($arg:ident: $ty:ty),* $(,)? })) => {
        #[doc = concat!("The parameters of `", $name, "` after the object, as the C slot passes them.")]
        #[derive(Clone, Copy)]
        struct $Args { $($arg: $ty),* }
    };
    (@args $name:literal $params:tt) => {};

    // The parameters: gathered in `Args`, or passed one by one.
    (@slot $Kind:ident, $Ndk:ident, $field:ident, $name:literal,
        $method:ident ($Args:ident { $($arg:ident: $ty:ty),* $(,)? }) $($rest:tt)*) => {
        $crate::provider::dispatch::ndk_table!(@form $Kind, $Ndk, $field, $name, $method
            [$($arg: $ty),*] [$Args] [$Args { $($arg),* }] $($rest)*);
    };
    (@slot $Kind:ident, $Ndk:ident, $field:ident, $name:literal,
        $method:ident ($($arg:ident: $ty:ty),* $(,)?) $($rest:tt)*) => {
        $crate::provider::dispatch::ndk_table!(@form $Kind, $Ndk, $field, $name, $method
            [$($arg: $ty),*] [$($ty),*] [$($arg),*] $($rest)*);
    };

    // A slot that calls its method, or a create.
    (@form $Kind:ident, $Ndk:ident, $field:ident, $name:literal, $method:ident
        [$($params:tt)*] $types:tt $call:tt [$($ret:ty)?] [] $then:tt) => {
        $crate::provider::dispatch::ndk_table!(@thunk $Kind, $Ndk, $field, $name,
            [$($params)*] [$($ret)?] [call $method $types $call [$($ret)?] $then]);
    };
    (@form $Kind:ident, $Ndk:ident, $field:ident, $name:literal, $method:ident
        [$($arg:ident: $ty:ty),*] $types:tt $call:tt [] [$out:ty] []) => {
        $crate::provider::dispatch::ndk_table!(@thunk $Kind, $Ndk, $field, $name,
            [$($arg: $ty,)* completion: Option<$crate::abi::NdkFnCreateCompletion>,
                context: *mut core::ffi::c_void, out: *mut *mut $out]
            [$crate::abi::NtStatus] [create $method $types $call $out, completion context out]);
    };

    // The thunk: enters the object, runs the body inside, or refuses.
    (@thunk $Kind:ident, $Ndk:ident, $field:ident, $name:literal,
        [$($arg:ident: $ty:ty),*] [$($ret:ty)?] [$($body:tt)*]) => {
        #[doc = concat!("`", $name, "`: enters the object, then its method.")]
        unsafe extern "system" fn $field(object: *mut $Ndk, $($arg: $ty),*) $(-> $ret)? {
            const SLOT: &$crate::provider::dispatch::Slot =
                &$crate::provider::dispatch::Slot($name);
            // SAFETY: the consumer calls this slot of this table with its
            // object first, an object whose close has not completed (L19)
            // — the contract of `from_ptr`, which refuses null, foreign
            // and other-type pointers.
            let entered = unsafe {
                $crate::provider::object::Object::<$Kind>::from_ptr(object.cast(), SLOT)
            };
            match entered {
                Some(entered) => {
                    // Host mode only: a test's hook may hold the call
                    // here, inside the object (and again after the
                    // method, before it leaves); one relaxed load when
                    // no hook is installed. Not in the driver build.
                    #[cfg(not(target_os = "windows"))]
                    let _hook = $crate::provider::dispatch::hook::Inside::enter(SLOT, object.cast());
                    $crate::provider::dispatch::ndk_table!(@$($body)* $Kind, entered, SLOT)
                }
                None => $crate::provider::dispatch::Refusal::refused(),
            }
        }
    };

    // The body of a slot that calls its method.
    (@call $method:ident [$($types:tt)*] [$($call:tt)*] [$($ret:ty)?]
        [$($after:ident($($extra:expr),*))?] $Kind:ident, $entered:ident, $slot:ident) => {{
        let method: unsafe fn(&$crate::provider::object::Object<$Kind>, $($types)*) $(-> $ret)? =
            $method;
        // SAFETY: the other arguments are the consumer's, valid as the
        // slot's C contract says (ndk-abi.md §4); no method asks more of
        // them than that contract, and the guard keeps the object alive
        // for the call.
        let result = unsafe { method(&$entered, $($call)*) };
        $(let result = $after(&$entered, $slot, $($extra,)* result);)?
        result
    }};

    // The body of a create (L5–L7).
    (@create $method:ident [$($types:tt)*] [$($call:tt)*] $out:ty,
        $completion:ident $context:ident $out_ptr:ident $Kind:ident, $entered:ident, $slot:ident) => {{
        if $out_ptr.is_null() {
            return $crate::abi::STATUS_INVALID_PARAMETER;
        }
        let create: unsafe fn(
            &$crate::provider::object::Object<$Kind>, $($types)*
        ) -> Result<*mut $out, $crate::abi::NtStatus> = $method;
        // SAFETY: as a method's call: the consumer's arguments, valid as
        // the slot's C contract says.
        let made = unsafe { create(&$entered, $($call)*) };
        // SAFETY: `out` (checked non-null) is the consumer's out-pointer,
        // and the completion and its context are its own, for this create.
        unsafe { $crate::provider::created($out_ptr, ($completion, $context), made) }
    }};
}

pub(crate) use ndk_table;

/// Host mode only: a hook into every generated thunk, for tests that must
/// hold a call *inside* its object at a known point — after the call entered
/// the object, before its method runs ([`Point::Entered`](hook::Point::Entered)), and after the
/// method returned, before the call leaves ([`Point::Leaving`](hook::Point::Leaving)) — while
/// another thread closes the object (the close-race stress of issue 15,
/// `tests/close_race.rs`).
///
/// Not in the driver build (`cfg(not(target_os = "windows"))`). In host mode
/// a call with no hook installed pays one relaxed load of `ARMED` and a
/// branch; what an installed hook costs (a lock, a copy of the hook list)
/// only calls made while a test has one installed pay.
#[cfg(not(target_os = "windows"))]
pub mod hook {
    use core::ffi::c_void;
    use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::{Arc, Mutex, PoisonError};

    use super::Slot;
    use crate::abi::NdkObjectType;

    /// Where in a call a hook runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Point {
        /// The call has entered its object; its method has not run yet.
        Entered,
        /// The method has returned; the call has not left the object yet.
        Leaving,
    }

    /// A hook: called on the calling thread with the slot, the object's
    /// address (the consumer's pointer) and the point, for every call of
    /// every object while installed. It filters what it wants itself.
    pub type Hook = dyn Fn(&'static Slot, usize, Point) + Send + Sync;

    /// How many hooks are installed: the one word a thunk reads.
    static ARMED: AtomicUsize = AtomicUsize::new(0);
    /// The installed hooks, by id.
    static HOOKS: Mutex<Vec<(usize, Arc<Hook>)>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

    /// An installed hook; dropping it removes the hook.
    #[must_use = "the hook is removed when this is dropped"]
    pub struct Installed {
        id: usize,
    }

    /// Installs `hook` for every call of every object until the returned
    /// value is dropped.
    pub fn install(
        hook: impl Fn(&'static Slot, usize, Point) + Send + Sync + 'static,
    ) -> Installed {
        let id = NEXT_ID.fetch_add(1, Relaxed);
        HOOKS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, Arc::new(hook)));
        ARMED.fetch_add(1, Relaxed);
        Installed { id }
    }

    impl Drop for Installed {
        fn drop(&mut self) {
            let mut hooks = HOOKS.lock().unwrap_or_else(PoisonError::into_inner);
            hooks.retain(|(id, _)| *id != self.id);
            ARMED.fetch_sub(1, Relaxed);
        }
    }

    /// Runs the installed hooks (without holding the list's lock: a hook
    /// may block, and other calls run hooks meanwhile).
    #[cold]
    #[inline(never)]
    fn run(slot: &'static Slot, object: usize, point: Point) {
        let hooks: Vec<Arc<Hook>> = HOOKS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, hook)| Arc::clone(hook))
            .collect();
        for hook in hooks {
            hook(slot, object, point);
        }
    }

    /// A call inside its object, as the thunk sees it: runs the hooks at
    /// [`Point::Entered`] when made and at [`Point::Leaving`] when dropped
    /// (before the entry guard, declared earlier, lets the object go).
    pub struct Inside(Option<(&'static Slot, usize)>);

    impl Inside {
        /// The call of `slot` on `object` has entered it.
        #[inline]
        pub fn enter(slot: &'static Slot, object: *const c_void) -> Self {
            if ARMED.load(Relaxed) == 0 {
                return Self(None);
            }
            let object = object as usize;
            run(slot, object, Point::Entered);
            Self(Some((slot, object)))
        }
    }

    impl Drop for Inside {
        #[inline]
        fn drop(&mut self) {
            if let Some((slot, object)) = self.0 {
                run(slot, object, Point::Leaving);
            }
        }
    }

    /// One dispatch table's slots, as `Table` lists them.
    #[derive(Clone, Copy, Debug)]
    pub struct TableSlots {
        /// The object type.
        pub object_type: NdkObjectType,
        /// The close slot's name (`None`: the adapter).
        pub close: Option<&'static str>,
        /// Every slot that enters the object, in table order.
        pub slots: &'static [Slot],
    }

    fn of<T: crate::provider::object::Kind>() -> TableSlots {
        TableSlots {
            object_type: T::TYPE,
            close: T::CLOSE.map(|close| close.0),
            slots: T::SLOTS,
        }
    }

    /// Every object type's table.
    pub fn tables() -> [TableSlots; 10] {
        use crate::provider::{adapter, cm, cq, mr, pd, qp};
        [
            of::<adapter::Adapter>(),
            of::<pd::Pd>(),
            of::<cq::Cq>(),
            of::<qp::Qp>(),
            of::<qp::Srq>(),
            of::<mr::Mr>(),
            of::<mr::Mw>(),
            of::<cm::Connector>(),
            of::<cm::Listener>(),
            of::<cm::SharedEndpoint>(),
        ]
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn every_table_lists_its_entering_slots_in_order() {
            let tables = tables();
            let qp = tables
                .iter()
                .find(|t| t.object_type == NdkObjectType::QP)
                .map(|t| (t.close, t.slots.first().map(Slot::name)));
            assert_eq!(qp, Some((Some("NdkCloseQp"), Some("NdkFlush"))));
            assert!(tables.iter().all(|t| !t.slots.is_empty()));
            let closeless: Vec<_> = tables.iter().filter(|t| t.close.is_none()).collect();
            assert_eq!(closeless.len(), 1);
            assert_eq!(closeless[0].object_type, NdkObjectType::ADAPTER);
        }
    }
}
