//! Build script.
//!
//! With the `wdk` feature (Windows host with the WDK or eWDK only) it hands the
//! build to windows-drivers-rs, which sets up the link of a WDM driver (the
//! driver model Cargo.toml declares: entry `DriverEntry`, no framework). Without it
//! there is nothing to do: the portable driver image gets its link flags from
//! `.cargo/portable-driver.toml`, and host builds need none.

#[cfg(feature = "wdk")]
fn main() -> Result<(), wdk_build::ConfigError> {
    println!("cargo::rerun-if-changed=build.rs");
    wdk_build::configure_wdk_binary_build()
}

#[cfg(not(feature = "wdk"))]
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
}
