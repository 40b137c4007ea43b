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

/// The files that declare imports by hand: the raw kernel backend and the
/// driver's `ndis.sys` block.
const DECLARING_FILES: [&str; 2] = ["src/kernel/raw.rs", "src/driver/ndis_sys.rs"];

/// The routines declared in `DECLARING_FILES`: the only ones the image may
/// import. A declaration is a line `fn Name(` inside an extern block, with or
/// without a `pub(...)` visibility.
fn declared_imports() -> Vec<String> {
    DECLARING_FILES
        .iter()
        .flat_map(|file| {
            let source = std::fs::read_to_string(manifest_dir().join(file))
                .unwrap_or_else(|e| panic!("read {file}: {e}"));
            source
                .lines()
                .map(str::trim)
                .map(|line| {
                    line.strip_prefix("pub(super) ")
                        .or_else(|| line.strip_prefix("pub(crate) "))
                        .or_else(|| line.strip_prefix("pub "))
                        .unwrap_or(line)
                })
                .filter_map(|line| line.strip_prefix("fn "))
                .filter_map(|rest| rest.split('(').next())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn test_image_imports_nothing_undeclared() {
    let declared = declared_imports();
    assert!(
        declared.iter().any(|d| d == "KeAcquireSpinLockRaiseToDpc"),
        "parsed raw.rs: {declared:?}"
    );
    assert!(
        declared.iter().any(|d| d == "NdisMRegisterMiniportDriver"),
        "parsed ndis_sys.rs: {declared:?}"
    );
    for (module, name) in imports() {
        assert!(
            declared.contains(&name),
            "{module}!{name} is imported but declared in none of {DECLARING_FILES:?}"
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

/// What the full driver imports, exactly: the miniport's NDIS routines, and
/// the kernel services it uses (pool — `ExAllocatePool2`, newer than the
/// floor, is looked up at run time with `MmGetSystemRoutineAddress`, with
/// `ExAllocatePoolWithTag` as the fallback — spin lock, the DPCs of the RNIC's
/// deferred work and their flush on unload, the
/// PASSIVE_LEVEL wait of halt, the MDL mapping of `kernel::mdl` in the send
/// path, the debug log, bug check on panic) plus the C runtime routine `core`
/// always needs.
const REQUIRED_IMPORTS: [(&str, &str); 27] = [
    ("ndis.sys", "NdisMRegisterMiniportDriver"),
    ("ndis.sys", "NdisMDeregisterMiniportDriver"),
    ("ndis.sys", "NdisSetOptionalHandlers"),
    ("ndis.sys", "NdisMSetMiniportAttributes"),
    ("ndis.sys", "NdisMNetPnPEvent"),
    ("ndis.sys", "NdisMSendNetBufferListsComplete"),
    ("ndis.sys", "NdisAllocateIoWorkItem"),
    ("ndis.sys", "NdisQueueIoWorkItem"),
    ("ndis.sys", "NdisFreeIoWorkItem"),
    ("ndis.sys", "NdisOpenConfigurationEx"),
    ("ndis.sys", "NdisReadConfiguration"),
    ("ndis.sys", "NdisReadNetworkAddress"),
    ("ndis.sys", "NdisCloseConfiguration"),
    ("ndis.sys", "NdisWriteEventLogEntry"),
    ("ntoskrnl.exe", "ExAllocatePoolWithTag"),
    ("ntoskrnl.exe", "ExFreePoolWithTag"),
    ("ntoskrnl.exe", "MmGetSystemRoutineAddress"),
    ("ntoskrnl.exe", "KeAcquireSpinLockRaiseToDpc"),
    ("ntoskrnl.exe", "KeReleaseSpinLock"),
    ("ntoskrnl.exe", "KeFlushQueuedDpcs"),
    ("ntoskrnl.exe", "KeInitializeDpc"),
    ("ntoskrnl.exe", "KeInsertQueueDpc"),
    ("ntoskrnl.exe", "KeDelayExecutionThread"),
    ("ntoskrnl.exe", "KeBugCheckEx"),
    ("ntoskrnl.exe", "MmMapLockedPagesSpecifyCache"),
    ("ntoskrnl.exe", "vDbgPrintEx"),
    ("ntoskrnl.exe", "memcpy"),
];

/// Imports that may appear but need not: the clock, and the C runtime
/// routines the compiler emits calls to depending on optimisation.
const OPTIONAL_IMPORTS: [(&str, &str); 6] = [
    ("ntoskrnl.exe", "KeQueryInterruptTimePrecise"),
    ("ntoskrnl.exe", "memmove"),
    ("ntoskrnl.exe", "memset"),
    ("ntoskrnl.exe", "memcmp"),
    ("ntoskrnl.exe", "strlen"),
    ("ntoskrnl.exe", "__chkstk"),
];

#[test]
fn test_image_imports_exactly_what_the_driver_needs() {
    let imports = imports();
    for (module, name) in REQUIRED_IMPORTS {
        assert!(
            imports.iter().any(|(m, n)| m == module && n == name),
            "{module}!{name} not imported; have {imports:?}"
        );
    }
    for (module, name) in &imports {
        let known = REQUIRED_IMPORTS
            .iter()
            .chain(OPTIONAL_IMPORTS.iter())
            .any(|(m, n)| m == module && n == name);
        assert!(known, "unexpected import {module}!{name}");
    }
}

#[test]
fn test_image_exports_only_driver_entry() {
    let data = read_image();
    let file = PeFile64::parse(&*data).expect("a PE32+ image");
    let names: Vec<String> = file
        .exports()
        .expect("export table")
        .map(|export| export.expect("export entry"))
        .filter_map(|export| match export.name() {
            NameOrOrdinal::Name(name) => Some(String::from_utf8_lossy(name).into_owned()),
            NameOrOrdinal::Ordinal(_) => None,
        })
        .collect();
    assert!(
        names.iter().any(|n| n == "DriverEntry"),
        "exports {names:?}"
    );
    for name in &names {
        assert!(
            name == "DriverEntry" || name == "_fltused" || name == "__CxxFrameHandler3",
            "unexpected export {name}"
        );
    }
}
