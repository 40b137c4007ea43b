//! The portable driver image: builds `softndk.sys` for `x86_64-pc-windows-msvc`
//! with rust-lld (no WDK) and checks the PE it produced.
//!
//! This test is also the documented way to build the image on a host without
//! cargo-make: `cargo test --test driver_image` leaves it at
//! `target/driver/softndk.sys`.

use object::pe;
use object::read::pe::{ImageNtHeaders, PeFile64};
use object::{ExportTarget, LittleEndian as LE, NameOrOrdinal, Object};
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "x86_64-pc-windows-msvc";
/// The only modules a kernel driver may import from.
const KERNEL_MODULES: [&str; 3] = ["ntoskrnl.exe", "ndis.sys", "hal.dll"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds the image once per test process and returns the `.sys` path.
fn driver_image() -> &'static Path {
    static IMAGE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    IMAGE.get_or_init(|| {
        let root = manifest_dir();
        let target_dir = root.join("target").join("portable");
        let status = Command::new(env!("CARGO"))
            .current_dir(&root)
            .args([
                "build",
                "--release",
                "--lib",
                "--target",
                TARGET,
                "--config",
            ])
            .arg(root.join(".cargo").join("portable-driver.toml"))
            .arg("--target-dir")
            .arg(&target_dir)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "portable driver build failed");
        let dll = target_dir.join(TARGET).join("release").join("softndk.dll");
        let out_dir = root.join("target").join("driver");
        std::fs::create_dir_all(&out_dir).expect("create target/driver");
        let sys = out_dir.join("softndk.sys");
        std::fs::copy(&dll, &sys).expect("copy softndk.dll to softndk.sys");
        sys
    })
}

fn read_image() -> Vec<u8> {
    std::fs::read(driver_image()).expect("read softndk.sys")
}

#[test]
fn test_image_is_amd64_native_subsystem() {
    let data = read_image();
    let file = PeFile64::parse(&*data).expect("a PE32+ image");
    let nt = file.nt_headers();
    assert_eq!(
        nt.file_header().machine.get(LE),
        pe::IMAGE_FILE_MACHINE_AMD64
    );
    assert_eq!(
        nt.optional_header().subsystem.get(LE),
        pe::IMAGE_SUBSYSTEM_NATIVE
    );
    let characteristics = nt.file_header().characteristics.get(LE);
    assert!(
        characteristics & pe::IMAGE_FILE_EXECUTABLE_IMAGE == pe::IMAGE_FILE_EXECUTABLE_IMAGE,
        "linked as an executable image"
    );
}

#[test]
fn test_image_entry_point_is_driver_entry() {
    let data = read_image();
    let file = PeFile64::parse(&*data).expect("a PE32+ image");
    let entry = file.entry();
    assert_ne!(
        entry,
        file.relative_address_base(),
        "the image has an entry point"
    );
    let exports = file.exports().expect("export table");
    let driver_entry = exports
        .map(|export| export.expect("export entry"))
        .find_map(|export| match (export.name(), export.target()) {
            (NameOrOrdinal::Name(b"DriverEntry"), ExportTarget::Address { address }) => {
                Some(address)
            }
            _ => None,
        });
    assert_eq!(
        driver_entry,
        Some(entry),
        "AddressOfEntryPoint is DriverEntry"
    );
}

/// Every import of the image as (module, function).
fn imports() -> Vec<(String, String)> {
    let data = read_image();
    let file = PeFile64::parse(&*data).expect("a PE32+ image");
    file.imports()
        .expect("import table")
        .map(|import| {
            let import = import.expect("import entry");
            let module = String::from_utf8_lossy(import.library()).to_ascii_lowercase();
            let name = match import.name() {
                NameOrOrdinal::Name(name) => String::from_utf8_lossy(name).into_owned(),
                NameOrOrdinal::Ordinal(ordinal) => format!("#{ordinal}"),
            };
            (module, name)
        })
        .collect()
}

#[test]
fn test_image_imports_only_kernel_modules() {
    let imports = imports();
    assert!(!imports.is_empty(), "a driver imports from the kernel");
    for (module, name) in &imports {
        assert!(
            KERNEL_MODULES.contains(&module.as_str()),
            "import {name} from user-mode module {module}"
        );
    }
    // What DriverEntry and the unload routine call, and the C runtime
    // routine `core` itself needs.
    for needed in ["vDbgPrintEx", "KeFlushQueuedDpcs", "memcpy"] {
        assert!(
            imports.iter().any(|(_, n)| n == needed),
            "{needed} imported; have {imports:?}"
        );
    }
}

/// The routines the raw backend declares: the only ones the image may import.
fn declared_imports() -> Vec<String> {
    let source =
        std::fs::read_to_string(manifest_dir().join("src/kernel/raw.rs")).expect("read raw.rs");
    source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("fn "))
        .filter_map(|rest| rest.split('(').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn test_image_imports_nothing_undeclared() {
    let declared = declared_imports();
    assert!(
        declared.iter().any(|d| d == "KeAcquireSpinLockRaiseToDpc"),
        "parsed raw.rs: {declared:?}"
    );
    for (module, name) in imports() {
        assert!(
            declared.contains(&name),
            "{module}!{name} is imported but not declared in src/kernel/raw.rs"
        );
    }
}

#[test]
fn test_image_has_no_tls_or_crt_initialisers() {
    let data = read_image();
    let file = PeFile64::parse(&*data).expect("a PE32+ image");
    let tls = file.data_directory(pe::IMAGE_DIRECTORY_ENTRY_TLS);
    assert!(
        tls.is_none_or(|dir| dir.virtual_address.get(LE) == 0 && dir.size.get(LE) == 0),
        "no TLS directory"
    );
    for section in file.section_table().iter() {
        let name = String::from_utf8_lossy(section.raw_name());
        assert!(
            !name.starts_with(".CRT"),
            "no C runtime initialiser section, found {name}"
        );
        assert!(!name.starts_with(".tls"), "no TLS section, found {name}");
    }
}
