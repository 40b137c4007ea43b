//! The NDK conformance suite: a consumer that knows only the NDK C ABI —
//! every call goes through a function pointer read from a dispatch table —
//! checking the provider against every rule of the rules catalogue
//! (`shared/spec/rules.md`). Tests are named `<rule>_<behaviour>`; the rule →
//! test table is `docs/conformance.md`, kept honest by
//! `tests/conformance_table.rs`.

mod harness;

mod c;
mod d;
mod e;
mod i;
mod k;
mod l;
mod m;
mod n;
mod p;
mod q;
mod x;
