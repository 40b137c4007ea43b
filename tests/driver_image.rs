//! The portable driver image: builds `softndk.sys` for `x86_64-pc-windows-msvc`
//! with rust-lld (no WDK) and checks the PE it produced.
//!
//! This test is also the documented way to build the image on a host without
//! cargo-make: `cargo test --test driver_image` leaves it at
//! `target/driver/softndk.sys`.
//!
//! Beyond the PE headers it checks that the image loads where the INF says
//! it does: every import is checked against an independent list of the
//! kernel modules' exports (the import libraries of Debian's
//! `mingw-w64-x86-64-dev`), and against a table of the Windows build each
//! import first appeared in (the `NTDDI_VERSION` guard of its declaration in
//! the WDK headers), which must not be newer than the build in the INF's
//! `NTamd64.10.0...<build>` decoration.

use object::pe;
use object::read::archive::ArchiveFile;
use object::read::coff::{CoffFile, ImportFile, ImportName};
use object::read::pe::{ImageNtHeaders, PeFile64};
use object::{ExportTarget, LittleEndian as LE, NameOrOrdinal, Object, ObjectSection};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "x86_64-pc-windows-msvc";
/// The only modules a kernel driver may import from.
const KERNEL_MODULES: [&str; 4] = ["ntoskrnl.exe", "ndis.sys", "hal.dll", "netio.sys"];

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

/// The driver image, parsed (read once: every test reads the same file).
fn image() -> PeFile64<'static> {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let data = DATA.get_or_init(|| std::fs::read(driver_image()).expect("read softndk.sys"));
    PeFile64::parse(data.as_slice()).expect("a PE32+ image")
}

#[test]
fn test_image_is_amd64_native_subsystem() {
    let file = image();
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
    let file = image();
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
    let file = image();
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

#[test]
fn test_image_binds_to_no_framework() {
    for (module, name) in imports() {
        assert!(
            !module.starts_with("wdf"),
            "{module}!{name}: the image binds to a driver framework"
        );
    }
    // So Cargo.toml's driver model is WDM (tests/inf.rs ties the INF to it).
    let manifest = std::fs::read_to_string(manifest_dir().join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest
            .lines()
            .any(|line| line.replace(' ', "") == "driver-type=\"WDM\""),
        "Cargo.toml: [package.metadata.wdk.driver-model] driver-type = \"WDM\""
    );
}

/// The files that declare imports by hand: the raw kernel backend, the
/// driver's `ndis.sys` and `netio.sys` blocks, the WSK glue's block, the
/// kernel DPC's and the kernel timer's.
const DECLARING_FILES: [&str; 6] = [
    "src/kernel/raw.rs",
    "src/kernel/kdpc.rs",
    "src/driver/ndis_sys.rs",
    "src/driver/netio_sys.rs",
    "src/kernel/wsk/sys.rs",
    "src/kernel/ktimer.rs",
];

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
    let file = image();
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
/// path, the debug log, bug check on panic), the receive path's NBL pool,
/// MDLs, indications, link status and pause completion (`driver::rx_ndis`),
/// the `netio.sys` routines that
/// learn the interface's IP addresses (`driver::addresses`), the WSK
/// client's registration, IRPs and send-ring MDLs (`kernel::wsk`, the
/// adapter's iWARP transport, `driver::transport`) with its kernel timer
/// and clock (`kernel::ktimer`), plus the C runtime routine `core` always
/// needs.
const REQUIRED_IMPORTS: [(&str, &str); 55] = [
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
    ("ndis.sys", "NdisAllocateNetBufferListPool"),
    ("ndis.sys", "NdisFreeNetBufferListPool"),
    ("ndis.sys", "NdisAllocateMdl"),
    ("ndis.sys", "NdisFreeMdl"),
    ("ndis.sys", "NdisAllocateNetBufferAndNetBufferList"),
    ("ndis.sys", "NdisFreeNetBufferList"),
    ("ndis.sys", "NdisMIndicateReceiveNetBufferLists"),
    ("ndis.sys", "NdisMIndicateStatusEx"),
    ("ndis.sys", "NdisMPauseComplete"),
    ("netio.sys", "GetUnicastIpAddressTable"),
    ("netio.sys", "FreeMibTable"),
    ("netio.sys", "GetUnicastIpAddressEntry"),
    ("netio.sys", "NotifyUnicastIpAddressChange"),
    ("netio.sys", "CancelMibChangeNotify2"),
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
    ("netio.sys", "WskRegister"),
    ("netio.sys", "WskCaptureProviderNPI"),
    ("netio.sys", "WskReleaseProviderNPI"),
    ("netio.sys", "WskDeregister"),
    ("ntoskrnl.exe", "IoAllocateIrp"),
    ("ntoskrnl.exe", "IoFreeIrp"),
    ("ntoskrnl.exe", "IoReuseIrp"),
    ("ntoskrnl.exe", "IoAllocateMdl"),
    ("ntoskrnl.exe", "MmBuildMdlForNonPagedPool"),
    ("ntoskrnl.exe", "IoFreeMdl"),
    ("ntoskrnl.exe", "KeInitializeTimer"),
    ("ntoskrnl.exe", "KeSetTimer"),
    ("ntoskrnl.exe", "KeCancelTimer"),
    ("ntoskrnl.exe", "KeQueryInterruptTimePrecise"),
];

/// Imports that may appear but need not: the C runtime routines the
/// compiler emits calls to depending on optimisation.
const OPTIONAL_IMPORTS: [(&str, &str); 5] = [
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
    let file = image();
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

// --- Every import checked against the kernel's real exports -----------------

/// Where Debian's `mingw-w64-x86-64-dev` installs its import libraries
/// (override with `SOFTNDK_MINGW_LIB`).
const MINGW_LIB_DIR: &str = "/usr/x86_64-w64-mingw32/lib";

/// The import libraries that list the exports of the modules a driver may
/// import from (`KERNEL_MODULES`).
const EXPORT_LISTS: [&str; 4] = ["libntoskrnl.a", "libndis.a", "libnetio.a", "libhal.a"];

/// Real exports that mingw-w64's import libraries leave out, each with why it
/// is nonetheless exported by the module named.
const EXPORT_ALLOWANCES: [(&str, &str, &str); 2] = [
    (
        "ntoskrnl.exe",
        "__chkstk",
        "the x64 kernel exports the stack probe drivers call (WDK-built drivers \
         import it from ntoskrnl.exe); libntoskrnl.a omits it because MinGW \
         links its own ___chkstk_ms",
    ),
    (
        "ntoskrnl.exe",
        "KeQueryInterruptTimePrecise",
        "exported since Windows 8.1 (wdm.h: NTDDI_VERSION >= NTDDI_WINBLUE); \
         the libntoskrnl.a of mingw-w64 10 predates it",
    ),
];

/// The exports of one import library: the DLL it names and the routines.
fn archive_exports(data: &[u8], lib: &str) -> (String, BTreeSet<String>) {
    let archive = ArchiveFile::parse(data).unwrap_or_else(|e| panic!("{lib}: not an archive: {e}"));
    let text = |bytes: &[u8]| {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    };
    let mut dll = BTreeSet::new();
    let mut names = BTreeSet::new();
    for member in archive.members() {
        let member = member.unwrap_or_else(|e| panic!("{lib}: member: {e}"));
        let bytes = member
            .data(data)
            .unwrap_or_else(|e| panic!("{lib}: member data: {e}"));
        // Short import objects (llvm-dlltool, MSVC lib.exe).
        if let Ok(import) = ImportFile::parse(bytes) {
            dll.insert(text(import.dll()));
            if let ImportName::Name(name) = import.import() {
                names.insert(text(name));
            }
            continue;
        }
        // Long-format objects (binutils dlltool, what Debian ships): the
        // routine's name is `.idata$6` (a two-byte hint, then the name), and
        // one member holds the DLL name in a `.idata$7` longer than the
        // four-byte reference the others carry there.
        let Ok(coff) = CoffFile::<&[u8]>::parse(bytes) else {
            continue;
        };
        for section in coff.sections() {
            let contents = section.data().unwrap_or_default();
            match section.name() {
                Ok(".idata$6") if contents.len() > 2 => {
                    names.insert(text(&contents[2..]));
                }
                Ok(".idata$7") if contents.len() > 4 => {
                    dll.insert(text(contents));
                }
                _ => {}
            }
        }
    }
    assert_eq!(dll.len(), 1, "{lib} names one DLL: {dll:?}");
    assert!(names.len() > 10, "{lib} lists exports: {names:?}");
    let dll = dll.pop_first().unwrap_or_default().to_ascii_lowercase();
    (dll, names)
}

/// Export lists by module (lower-case), read once.
fn kernel_exports() -> &'static BTreeMap<String, BTreeSet<String>> {
    static EXPORTS: std::sync::OnceLock<BTreeMap<String, BTreeSet<String>>> =
        std::sync::OnceLock::new();
    EXPORTS.get_or_init(|| {
        let dir = std::env::var_os("SOFTNDK_MINGW_LIB")
            .map_or_else(|| PathBuf::from(MINGW_LIB_DIR), PathBuf::from);
        EXPORT_LISTS
            .iter()
            .map(|lib| {
                let path = dir.join(lib);
                let data = std::fs::read(&path).unwrap_or_else(|e| {
                    panic!(
                        "cannot read {} ({e}): the kernel export lists come from the \
                         import libraries of Debian's mingw-w64-x86-64-dev; install it \
                         with `apt-get install -y mingw-w64-x86-64-dev` (.ci/run does)",
                        path.display()
                    )
                });
                archive_exports(&data, lib)
            })
            .collect()
    })
}

#[test]
fn test_export_lists_cover_every_kernel_module() {
    let exports = kernel_exports();
    for module in KERNEL_MODULES {
        assert!(
            exports.contains_key(module),
            "an export list for {module}; have {:?}",
            exports.keys().collect::<Vec<_>>()
        );
    }
    // The lists are real: routines every kernel has, under the right module.
    assert!(exports["ntoskrnl.exe"].contains("ExAllocatePoolWithTag"));
    assert!(exports["ndis.sys"].contains("NdisMRegisterMiniportDriver"));
    assert!(!exports["ntoskrnl.exe"].contains("NdisMRegisterMiniportDriver"));
}

/// The imports that are not in the export list of the module they name (and
/// have no allowance).
fn unexported(imports: &[(String, String)]) -> Vec<String> {
    let exports = kernel_exports();
    imports
        .iter()
        .filter(|(module, name)| {
            let exported = exports
                .get(module.as_str())
                .is_some_and(|names| names.contains(name.as_str()));
            let allowed = EXPORT_ALLOWANCES
                .iter()
                .any(|(m, n, _)| m == module && n == name);
            !exported && !allowed
        })
        .map(|(module, name)| format!("{module}!{name}"))
        .collect()
}

/// The WSK glue's declarations (not imported until the driver uses the
/// glue) are each known to `OPTIONAL_IMPORTS` with their module, which
/// exports them, and have a minimum build: so wiring the glue in cannot add
/// a misspelt or misplaced import.
#[test]
fn test_wsk_declarations_are_exported_and_have_a_floor() {
    let source = std::fs::read_to_string(manifest_dir().join("src/kernel/wsk/sys.rs"))
        .expect("read src/kernel/wsk/sys.rs");
    let declared: Vec<&str> = source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub(super) fn "))
        .filter_map(|rest| rest.split('(').next())
        .collect();
    assert_eq!(declared.len(), 10, "{declared:?}");
    let exports = kernel_exports();
    for name in declared {
        let (module, _) = REQUIRED_IMPORTS
            .iter()
            .find(|(_, n)| *n == name)
            .unwrap_or_else(|| panic!("{name} is in REQUIRED_IMPORTS"));
        assert!(
            exports[*module].contains(name),
            "{module} exports {name} (mingw import library)"
        );
        let floor = minimum_build(module, name).map(|(build, _)| build);
        assert!(
            floor.is_some_and(|build| build <= FLOOR_BUILD),
            "{module}!{name} loads on build {FLOOR_BUILD}"
        );
    }
}

#[test]
fn test_image_imports_only_what_each_module_exports() {
    let missing = unexported(&imports());
    assert!(
        missing.is_empty(),
        "imported but not exported by the module named (misspelt, from the wrong \
         module, or newer than the export list): {missing:?}"
    );
}

#[test]
fn test_export_check_rejects_misspelt_and_misplaced_imports() {
    let import = |module: &str, name: &str| (module.to_owned(), name.to_owned());
    assert!(unexported(&[import("ntoskrnl.exe", "KeInitializeDpc")]).is_empty());
    assert_eq!(
        unexported(&[
            import("ntoskrnl.exe", "KeInitialiseDpc"),
            import("ntoskrnl.exe", "NdisMNetPnPEvent"),
            import("ndis.sys", "KeInitializeDpc"),
        ]),
        [
            "ntoskrnl.exe!KeInitialiseDpc",
            "ntoskrnl.exe!NdisMNetPnPEvent",
            "ndis.sys!KeInitializeDpc"
        ]
    );
    for (module, name, reason) in EXPORT_ALLOWANCES {
        assert!(!reason.is_empty());
        assert!(
            !kernel_exports()[module].contains(name),
            "{module}!{name} is in the export list now: drop its allowance"
        );
    }
}

// --- Every import's minimum Windows build -----------------------------------

/// The floor: Windows 10 1809 and Windows Server 2019.
const FLOOR_BUILD: u32 = 17763;

/// Builds of the `NTDDI_*` versions the table cites.
const WIN2K: u32 = 2195;
const WINXP: u32 = 2600;
/// The first x64 kernel (Windows Server 2003 SP1 / XP x64): the floor of
/// anything declared without a version guard.
const FIRST_X64: u32 = 3790;
const VISTA: u32 = 6000;
const WINBLUE: u32 = 9600;
const WIN10_VB: u32 = 19041;

const NT: &str = "ntoskrnl.exe";
const NDIS: &str = "ndis.sys";
const NETIO: &str = "netio.sys";

/// The Windows build each routine the image may import first appeared in
/// (routines grouped by module, build and the guard they share),
/// from the `NTDDI_VERSION` guard around its declaration (WDK 10.0.16299
/// `km/wdm.h` and `km/ndis.h`; `ExAllocatePool2` from WDK 10.0.19041
/// `wdm.h`). ndis.h guards the NDIS 6 routines with `NDIS_SUPPORT_NDIS6`
/// (NDIS 6.0, Windows Vista). `shared/netioapi.h` declares the IP Helper
/// routines without a version guard; they are the kernel-mode IP Helper API
/// of `netio.sys`, which first shipped with Windows Vista; `km/wsk.h`
/// declares the WSK registration routines without a guard as well (WSK,
/// in `netio.sys`, also first shipped with Vista). `IoReuseIrp` is
/// `NTDDI_WINXP`; the other IRP and MDL routines `NTDDI_WIN2K`.
const MINIMUM_BUILDS: &[(&str, u32, &str, &[&str])] = &[
    (
        NT,
        WIN2K,
        "NTDDI_WIN2K",
        &[
            "IoAllocateIrp",
            "IoFreeIrp",
            "IoAllocateMdl",
            "MmBuildMdlForNonPagedPool",
            "IoFreeMdl",
            "ExAllocatePoolWithTag",
            "ExFreePoolWithTag",
            "MmGetSystemRoutineAddress",
            "KeAcquireSpinLockRaiseToDpc",
            "KeReleaseSpinLock",
            "KeInitializeDpc",
            "KeInsertQueueDpc",
            "KeInitializeTimer",
            "KeSetTimer",
            "KeCancelTimer",
            "KeDelayExecutionThread",
            "KeBugCheckEx",
            "MmMapLockedPagesSpecifyCache",
        ],
    ),
    (NT, WINXP, "NTDDI_WINXP", &["IoReuseIrp", "vDbgPrintEx"]),
    (
        NETIO,
        VISTA,
        "no guard (wsk.h, netio.sys)",
        &[
            "WskRegister",
            "WskCaptureProviderNPI",
            "WskReleaseProviderNPI",
            "WskDeregister",
        ],
    ),
    (NT, WINXP, "NTDDI_WINXPSP2", &["KeFlushQueuedDpcs"]),
    (
        NT,
        WINBLUE,
        "NTDDI_WINBLUE",
        &["KeQueryInterruptTimePrecise"],
    ),
    // Newer than the floor: must never be imported statically.
    (NT, WIN10_VB, "NTDDI_WIN10_VB", &["ExAllocatePool2"]),
    (
        NT,
        FIRST_X64,
        "no guard (C runtime)",
        &["memcpy", "memmove", "memset", "memcmp", "strlen"],
    ),
    (NT, FIRST_X64, "x64 stack probe", &["__chkstk"]),
    (
        NDIS,
        VISTA,
        "NDIS_SUPPORT_NDIS6",
        &[
            "NdisMRegisterMiniportDriver",
            "NdisMDeregisterMiniportDriver",
            "NdisSetOptionalHandlers",
            "NdisMSetMiniportAttributes",
            "NdisMNetPnPEvent",
            "NdisMSendNetBufferListsComplete",
            "NdisAllocateIoWorkItem",
            "NdisQueueIoWorkItem",
            "NdisFreeIoWorkItem",
            "NdisOpenConfigurationEx",
            "NdisAllocateNetBufferListPool",
            "NdisFreeNetBufferListPool",
            "NdisAllocateMdl",
            "NdisFreeMdl",
            "NdisAllocateNetBufferAndNetBufferList",
            "NdisFreeNetBufferList",
            "NdisMIndicateReceiveNetBufferLists",
            "NdisMIndicateStatusEx",
            "NdisMPauseComplete",
        ],
    ),
    (
        NDIS,
        FIRST_X64,
        "no guard",
        &[
            "NdisReadConfiguration",
            "NdisReadNetworkAddress",
            "NdisCloseConfiguration",
            "NdisWriteEventLogEntry",
        ],
    ),
    (
        NETIO,
        VISTA,
        "no guard (netio.sys)",
        &[
            "GetUnicastIpAddressTable",
            "FreeMibTable",
            "GetUnicastIpAddressEntry",
            "NotifyUnicastIpAddressChange",
            "CancelMibChangeNotify2",
        ],
    ),
];

/// The minimum build of `module!name` and the guard it comes from, when
/// `MINIMUM_BUILDS` lists it.
fn minimum_build(module: &str, name: &str) -> Option<(u32, &'static str)> {
    MINIMUM_BUILDS
        .iter()
        .find(|(m, _, _, names)| *m == module && names.contains(&name))
        .map(|&(_, build, guard, _)| (build, guard))
}

/// The NDIS miniport version the driver registers, and the first build whose
/// ndis.sys accepts it (NDIS 6.50: Windows 10 1507, ndis.h's "Threshold and
/// up" `NDIS_SUPPORT_NDIS650`).
const NDIS_VERSION_BUILDS: [((u8, u8), u32); 1] = [((6, 50), 10240)];

/// Why the image needs more than `promised`: each import newer than it (or
/// missing from `MINIMUM_BUILDS`) and the registered NDIS version if newer.
fn floor_violations(imports: &[(String, String)], ndis: (u8, u8), promised: u32) -> Vec<String> {
    let mut violations: Vec<String> = imports
        .iter()
        .filter_map(|(module, name)| match minimum_build(module, name) {
            None => Some(format!(
                "{module}!{name} has no minimum build in MINIMUM_BUILDS: add it \
                     from the NTDDI_VERSION guard of its declaration"
            )),
            Some((build, guard)) if build > promised => Some(format!(
                "{module}!{name} needs build {build} ({guard}), the INF promises \
                     {promised}: resolve it at run time with MmGetSystemRoutineAddress"
            )),
            Some(_) => None,
        })
        .collect();
    match NDIS_VERSION_BUILDS.iter().find(|(v, _)| *v == ndis) {
        None => violations.push(format!("NDIS {}.{} has no minimum build", ndis.0, ndis.1)),
        Some((_, build)) if *build > promised => violations.push(format!(
            "NDIS {}.{} needs build {build}, the INF promises {promised}",
            ndis.0, ndis.1
        )),
        Some(_) => {}
    }
    violations
}

/// The build of every `NT$ARCH$.10.0...<build>` decoration of the INF; they
/// must agree.
fn inf_minimum_build() -> u32 {
    let inx = std::fs::read_to_string(manifest_dir().join("inf").join("softndk.inx"))
        .expect("read inf/softndk.inx");
    let builds: BTreeSet<u32> = inx
        .lines()
        .filter(|line| !line.trim_start().starts_with(';'))
        .flat_map(|line| {
            line.match_indices("NT$ARCH$.")
                .map(move |(i, _)| &line[i..])
        })
        .map(|decoration| {
            let decoration = decoration
                .split(|c: char| c == ']' || c == ',' || c.is_whitespace())
                .next()
                .unwrap_or_default();
            let fields: Vec<&str> = decoration.split('.').collect();
            assert_eq!(
                fields.len(),
                6,
                "NT$ARCH$.major.minor.product.suite.build: {decoration}"
            );
            assert_eq!(fields[1..3], ["10", "0"], "Windows 10: {decoration}");
            fields[5]
                .parse()
                .unwrap_or_else(|e| panic!("build number of {decoration}: {e}"))
        })
        .collect();
    assert_eq!(builds.len(), 1, "one target build in the INF: {builds:?}");
    builds.first().copied().unwrap_or_default()
}

fn registered_ndis_version() -> (u8, u8) {
    (
        softndk::abi::NDIS_MINIPORT_MAJOR_VERSION,
        softndk::abi::NDIS_MINIPORT_MINOR_VERSION,
    )
}

#[test]
fn test_image_needs_no_newer_build_than_the_inf_promises() {
    let promised = inf_minimum_build();
    let violations = floor_violations(&imports(), registered_ndis_version(), promised);
    assert!(
        violations.is_empty(),
        "the image does not load on build {promised}: {violations:#?}"
    );
}

#[test]
fn test_inf_promises_the_documented_floor() {
    assert_eq!(
        inf_minimum_build(),
        FLOOR_BUILD,
        "inf/softndk.inx targets Windows 10 1809 / Server 2019 (NTamd64.10.0...17763)"
    );
}

#[test]
fn test_floor_check_rejects_newer_routines_and_unknown_ones() {
    let import = |name: &str| ("ntoskrnl.exe".to_owned(), name.to_owned());
    let ndis = registered_ndis_version();
    assert!(floor_violations(&[import("KeInitializeDpc")], ndis, FLOOR_BUILD).is_empty());
    let static_pool2 = floor_violations(&[import("ExAllocatePool2")], ndis, FLOOR_BUILD);
    assert_eq!(static_pool2.len(), 1, "{static_pool2:?}");
    assert!(static_pool2[0].contains("needs build 19041"));
    assert_eq!(
        floor_violations(&[import("KeQueryInterruptTimePrecise")], ndis, 9200).len(),
        2,
        "8.1's routine and NDIS 6.50 are both too new for Windows 8"
    );
    assert_eq!(
        floor_violations(&[import("SomethingUnlisted")], ndis, FLOOR_BUILD).len(),
        1
    );
    // Every routine the image may import has a minimum build.
    for (module, name) in REQUIRED_IMPORTS.iter().chain(OPTIONAL_IMPORTS.iter()) {
        assert!(
            minimum_build(module, name).is_some(),
            "{module}!{name} in MINIMUM_BUILDS"
        );
    }
}
