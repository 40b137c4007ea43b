//! The driver's INF (`inf/softndk.inx`): well-formed, complete, consistent
//! with the driver, and stamped for the portable package.
//!
//! A small INF reader (sections, `key = value` directives, comma-separated
//! `AddReg` lines, `;` comments outside quotes) is enough for what is checked:
//! every referenced section and string exists, the install section declares a
//! root-enumerated virtual Ethernet adapter, and the NDK keywords follow rules
//! A22–A24 with the values the driver reads (`softndk::driver::config`).
//!
//! [`test_inf_stamped_copy_in_target_driver`] is also the portable stamping
//! step: it writes `target/driver/softndk.inf` (what stampinf would make of
//! the `.inx`, with `DriverVer` from Cargo.toml's version) next to the
//! `softndk.sys` that `tests/driver_image.rs` builds.

use std::collections::BTreeMap;
use std::path::PathBuf;

use softndk::abi::NdkRdmaTechnology;
use softndk::abi::{IF_TYPE_ETHERNET_CSMACD, NCF_VIRTUAL, NdisMedium, NdisPhysicalMedium};
use softndk::driver::config::{
    self, DEFAULT_JUMBO_PACKET, JUMBO_PACKET_SIZES, RDMA_TECHNOLOGY, keyword,
};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn inx_text() -> String {
    std::fs::read_to_string(manifest_dir().join("inf").join("softndk.inx"))
        .expect("read inf/softndk.inx")
}

/// An INF as sections of logical lines (comments and blank lines removed).
struct Inf {
    sections: Vec<(String, Vec<String>)>,
}

/// Removes a `;` comment, unless the `;` is inside double quotes.
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Splits on commas outside double quotes, trims, and unquotes each field.
fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    out.push(current);
    out.into_iter().map(|f| f.trim().to_owned()).collect()
}

impl Inf {
    fn parse(text: &str) -> Self {
        let mut sections: Vec<(String, Vec<String>)> = Vec::new();
        for raw in text.lines() {
            let line = strip_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let name = name.trim().to_owned();
                assert!(
                    !sections.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)),
                    "section [{name}] appears twice"
                );
                sections.push((name, Vec::new()));
            } else {
                let (_, lines) = sections
                    .last_mut()
                    .unwrap_or_else(|| panic!("line outside any section: {line}"));
                lines.push(line.to_owned());
            }
        }
        Self { sections }
    }

    fn has(&self, name: &str) -> bool {
        self.sections
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    fn lines(&self, name: &str) -> &[String] {
        self.sections
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or_else(
                || panic!("section [{name}] missing"),
                |(_, lines)| lines.as_slice(),
            )
    }

    /// The `key = value` directives of a section, in order.
    fn directives(&self, name: &str) -> Vec<(String, String)> {
        self.lines(name)
            .iter()
            .filter_map(|line| {
                let (key, value) = line.split_once('=')?;
                Some((key.trim().to_owned(), value.trim().to_owned()))
            })
            .collect()
    }

    /// The value of `key` in a section (first occurrence).
    fn value(&self, section: &str, key: &str) -> Option<String> {
        self.directives(section)
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }

    /// Comma-separated section names a directive lists (AddReg, CopyFiles).
    fn listed(&self, section: &str, key: &str) -> Vec<String> {
        self.directives(section)
            .into_iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(key))
            .flat_map(|(_, v)| fields(&v))
            .filter(|f| !f.is_empty())
            .collect()
    }

    /// Every registry value the install section's `AddReg` sections write, by
    /// (subkey, value name), lower-cased.
    fn registry(&self, install: &str) -> BTreeMap<(String, String), String> {
        let mut values = BTreeMap::new();
        for section in self.listed(install, "AddReg") {
            for line in self.lines(&section) {
                let f = fields(line);
                assert!(f.len() >= 4, "AddReg line too short in [{section}]: {line}");
                assert!(
                    f[0].eq_ignore_ascii_case("HKR"),
                    "AddReg root in [{section}]: {line}"
                );
                let value = f.get(4).cloned().unwrap_or_default();
                let previous = values.insert((f[1].to_lowercase(), f[2].to_lowercase()), value);
                assert!(previous.is_none(), "registry value written twice: {line}");
            }
        }
        values
    }
}

fn inx() -> Inf {
    Inf::parse(&inx_text())
}

/// The model section and the install section of the one device.
fn device(inf: &Inf) -> (String, String, String) {
    let manufacturer = inf.directives("Manufacturer");
    assert_eq!(manufacturer.len(), 1, "one manufacturer");
    let f = fields(&manufacturer[0].1);
    let models = format!("{}.{}", f[0], f[1]);
    let model = inf.directives(&models);
    assert_eq!(model.len(), 1, "one device in [{models}]");
    let g = fields(&model[0].1);
    (models, g[0].clone(), g[1].clone())
}

fn install_section(inf: &Inf) -> String {
    let (_, install, _) = device(inf);
    let decorated = format!("{install}.NT");
    assert!(inf.has(&decorated), "install section [{decorated}]");
    decorated
}

#[test]
fn test_inf_version_section_is_net_class() {
    let inf = inx();
    assert_eq!(
        inf.value("Version", "Signature").as_deref(),
        Some("\"$WINDOWS NT$\"")
    );
    assert_eq!(inf.value("Version", "Class").as_deref(), Some("Net"));
    assert_eq!(
        inf.value("Version", "ClassGuid")
            .map(|g| g.to_lowercase())
            .as_deref(),
        Some("{4d36e972-e325-11ce-bfc1-08002be10318}"),
        "the Net setup class"
    );
    assert_eq!(
        inf.value("Version", "CatalogFile").as_deref(),
        Some("softndk.cat")
    );
    assert_eq!(inf.value("Version", "PnpLockdown").as_deref(), Some("1"));
    assert!(inf.value("Version", "Provider").is_some());
    assert!(
        inf.value("Version", "DriverVer").is_some(),
        "stamped by stampinf"
    );
}

#[test]
fn test_inf_referenced_sections_and_strings_exist() {
    let text = inx_text();
    let inf = Inf::parse(&text);
    let install = install_section(&inf);
    assert!(
        inf.has(&format!("{install}.Services")),
        "[{install}.Services]"
    );
    for key in ["AddReg", "CopyFiles"] {
        for section in inf.listed(&install, key) {
            assert!(inf.has(&section), "{key} section [{section}]");
        }
    }
    let services = inf.directives(&format!("{install}.Services"));
    for (key, value) in &services {
        assert!(key.eq_ignore_ascii_case("AddService"));
        let f = fields(value);
        assert_eq!(f[0], "softndk", "the service is named after the image");
        assert_eq!(f[1], "2", "SPSVCINST_ASSOCSERVICE");
        assert!(inf.has(&f[2]), "service section [{}]", f[2]);
        assert!(inf.has(&f[3]), "event log section [{}]", f[3]);
        assert_eq!(
            inf.value(&f[2], "ServiceBinary").as_deref(),
            Some("%13%\\softndk.sys")
        );
        assert_eq!(inf.value(&f[2], "ServiceType").as_deref(), Some("1"));
        for section in inf.listed(&f[3], "AddReg") {
            assert!(inf.has(&section), "event log AddReg [{section}]");
        }
    }
    // Every CopyFiles section has a destination, and every file a source disk.
    let destinations = inf.directives("DestinationDirs");
    let sources = inf.directives("SourceDisksFiles");
    for section in inf.listed(&install, "CopyFiles") {
        assert!(
            destinations
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(&section)),
            "[DestinationDirs] names {section}"
        );
        for file in inf.lines(&section) {
            let name = fields(file)[0].clone();
            assert!(
                sources.iter().any(|(k, _)| k.eq_ignore_ascii_case(&name)),
                "[SourceDisksFiles] names {name}"
            );
        }
    }
    for (_, value) in &sources {
        let disk = fields(value)[0].clone();
        assert!(
            inf.directives("SourceDisksNames")
                .iter()
                .any(|(k, _)| *k == disk),
            "disk {disk} in [SourceDisksNames]"
        );
    }
    // Every %token% is a [Strings] key (DIRIDs and %% escapes aside).
    let strings = inf.directives("Strings");
    let text = text.replace("%%", "");
    let mut rest = text.as_str();
    while let Some(start) = rest.find('%') {
        let after = &rest[start + 1..];
        let end = after.find('%').expect("unbalanced %");
        let token = &after[..end];
        if !token.chars().all(|c| c.is_ascii_digit()) {
            assert!(
                strings.iter().any(|(k, _)| k.eq_ignore_ascii_case(token)),
                "%{token}% is not in [Strings]"
            );
        }
        rest = &after[end + 1..];
    }
}

#[test]
fn test_inf_root_enumerated_virtual_ethernet() {
    let inf = inx();
    let (_, _, hardware_id) = device(&inf);
    assert!(
        hardware_id.to_lowercase().starts_with("root\\"),
        "root-enumerated: {hardware_id}"
    );
    let install = install_section(&inf);
    let characteristics = inf
        .value(&install, "Characteristics")
        .expect("Characteristics");
    let characteristics =
        u32::from_str_radix(characteristics.trim_start_matches("0x"), 16).expect("hex");
    assert_eq!(characteristics & NCF_VIRTUAL, NCF_VIRTUAL, "NCF_VIRTUAL");
    let number = |key: &str| -> u32 {
        inf.value(&install, key)
            .unwrap_or_else(|| panic!("{key} missing"))
            .parse()
            .unwrap()
    };
    assert_eq!(number("*IfType"), u32::from(IF_TYPE_ETHERNET_CSMACD));
    assert_eq!(number("*IfType"), 6);
    assert_eq!(number("*MediaType"), NdisMedium::MEDIUM_802_3.0);
    assert_eq!(
        number("*PhysicalMediaType"),
        NdisPhysicalMedium::MEDIUM_802_3.0
    );
}

/// The registry values the install section writes.
fn install_registry() -> BTreeMap<(String, String), String> {
    let inf = inx();
    inf.registry(&install_section(&inf))
}

/// `field` of `keyword`'s UI entry (`HKR, Ndi\params\<keyword>, <field>`).
fn keyword_value(
    registry: &BTreeMap<(String, String), String>,
    keyword: &str,
    field: &str,
) -> String {
    let key = format!("ndi\\params\\{}", keyword.to_lowercase());
    registry
        .get(&(key, field.to_owned()))
        .cloned()
        .unwrap_or_else(|| panic!("{keyword}: {field} missing"))
}

/// The keyword's UI entry: its type, default and enum values.
fn keyword_ui(
    registry: &BTreeMap<(String, String), String>,
    keyword: &str,
) -> (String, String, Vec<String>) {
    let get = |field: &str| keyword_value(registry, keyword, field);
    assert!(!get("paramdesc").is_empty(), "{keyword} has a UI entry");
    let enum_key = format!("ndi\\params\\{}\\enum", keyword.to_lowercase());
    let values = registry
        .keys()
        .filter(|(k, _)| *k == enum_key)
        .map(|(_, v)| v.clone())
        .collect();
    (get("type"), get("default"), values)
}

/// Asserts a keyword's UI type and default (`keyword_ui`'s first two),
/// `why` saying what the default means.
fn assert_kind_and_default(
    (kind, default, _): &(String, String, Vec<String>),
    expected: (&str, &str),
    why: &str,
) {
    assert_eq!(kind, expected.0, "{why}");
    assert_eq!(default, expected.1, "{why}");
}

#[test]
fn test_inf_upper_range_ndis5_and_network_direct_enum_rule_a22() {
    let registry = install_registry();
    assert_eq!(
        registry
            .get(&("ndi\\interfaces".to_owned(), "upperrange".to_owned()))
            .map(String::as_str),
        Some("ndis5")
    );
    let (kind, default, values) = keyword_ui(&registry, keyword::NETWORK_DIRECT);
    assert_eq!(kind, "enum");
    assert_eq!(default, "1", "enabled by default");
    assert_eq!(values, ["0", "1"], "0 Disabled, 1 Enabled");
    let enum_key = "ndi\\params\\*networkdirect\\enum".to_owned();
    assert_eq!(registry[&(enum_key.clone(), "0".to_owned())], "%Disabled%");
    assert_eq!(registry[&(enum_key, "1".to_owned())], "%Enabled%");
    assert_eq!(
        registry
            .get(&(String::new(), keyword::NETWORK_DIRECT.to_lowercase()))
            .map(String::as_str),
        Some("1"),
        "initial value enabled"
    );
}

#[test]
fn test_inf_network_direct_technology_only_iwarp_rule_a23() {
    let inf = inx();
    let registry = inf.registry(&install_section(&inf));
    let (kind, default, values) = keyword_ui(&registry, keyword::NETWORK_DIRECT_TECHNOLOGY);
    assert_eq!(kind, "enum");
    assert_eq!(RDMA_TECHNOLOGY, NdkRdmaTechnology::IWARP, "iWARP over WSK");
    let technology = RDMA_TECHNOLOGY.0.to_string();
    assert_eq!(technology, "1");
    assert_eq!(
        values,
        std::slice::from_ref(&technology),
        "exactly the one transport the device runs"
    );
    assert_eq!(default, technology);
    let enum_key = "ndi\\params\\*networkdirecttechnology\\enum".to_owned();
    assert_eq!(registry[&(enum_key, technology.clone())], "%iWARP%");
    assert!(inf.value("Strings", "iWARP").is_some(), "the enum's label");
    assert_eq!(
        registry
            .get(&(
                String::new(),
                keyword::NETWORK_DIRECT_TECHNOLOGY.to_lowercase()
            ))
            .map(String::as_str),
        Some(technology.as_str()),
        "initial value"
    );
    for value in &values {
        let v: u32 = value.parse().unwrap();
        assert!(
            (1..=4).contains(&v),
            "NDK_RDMA_TECHNOLOGY values 1-4 unchanged"
        );
    }
}

/// A24 binds RoCE and RoCE v2 adapters only: the iWARP adapter offers no
/// `*NetworkDirectRoCEFrameSize` (and ignores one set by hand,
/// `config::roce_frame_size_applies`).
#[test]
fn test_inf_no_roce_frame_size_keyword_on_iwarp_rule_a24() {
    let inf = inx();
    let registry = inf.registry(&install_section(&inf));
    assert!(!config::roce_frame_size_applies(RDMA_TECHNOLOGY));
    let roce = keyword::ROCE_FRAME_SIZE.to_lowercase();
    assert!(
        registry
            .keys()
            .all(|(key, name)| !key.contains(&roce) && *name != roce),
        "no RoCE frame size on an iWARP adapter"
    );
    // *JumboPacket offers what the driver accepts.
    let (_, default, values) = keyword_ui(&registry, keyword::JUMBO_PACKET);
    assert_eq!(default, DEFAULT_JUMBO_PACKET.to_string());
    let mut sizes: Vec<u32> = values.iter().map(|v| v.parse().unwrap()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, JUMBO_PACKET_SIZES);
    // The service's event log source stays registered (netevent.dll
    // messages).
    let log = inf.lines("SoftNdk.EventLog.Reg").join("\n").to_lowercase();
    assert!(log.contains("netevent.dll"));
}

#[test]
fn test_inf_network_address_keyword() {
    let registry = install_registry();
    let ui = keyword_ui(&registry, keyword::NETWORK_ADDRESS);
    assert_kind_and_default(&ui, ("edit", ""), "empty: the generated address");
}

/// The virtual Ethernet's keywords (docs/ether.md): `SoftNdkPeers` a free
/// text list, empty by default; `SoftNdkVni` a dword in 1..=16777215 whose
/// default is `config::DEFAULT_VNI`, as `config::vni` reads it.
#[test]
fn test_inf_vxlan_peers_and_vni_keywords() {
    let registry = install_registry();
    let ui = keyword_ui(&registry, keyword::PEERS);
    assert_kind_and_default(&ui, ("edit", ""), "no peer by default");
    assert!(config::parse_peers(&[]).addrs().is_empty());
    let ui = keyword_ui(&registry, keyword::VNI);
    let default = config::DEFAULT_VNI.to_string();
    assert_kind_and_default(&ui, ("dword", &default), "the driver's default");
    let get = |field: &str| keyword_value(&registry, keyword::VNI, field);
    let (min, max): (u32, u32) = (get("min").parse().unwrap(), get("max").parse().unwrap());
    assert_eq!((min, max), (1, config::MAX_VNI));
    assert_eq!(config::vni(Some(min)), min);
    assert_eq!(config::vni(Some(max)), max);
    assert_eq!(config::vni(Some(max + 1)), config::DEFAULT_VNI);
    assert_eq!(
        registry.get(&(String::new(), keyword::VNI.to_lowercase())),
        Some(&config::DEFAULT_VNI.to_string()),
        "the installed value is the default"
    );
}

/// Checked mode's keywords (docs/debugging.md): 0/1 enums, default 0, as
/// `config::checked_mode` reads them.
#[test]
fn test_inf_checked_mode_keywords_off_by_default() {
    let registry = install_registry();
    for name in [keyword::CHECKED, keyword::CHECKED_STOP] {
        let (kind, default, values) = keyword_ui(&registry, name);
        assert_eq!(kind, "enum", "{name}");
        assert_eq!(default, "0", "{name}: off by default");
        assert_eq!(values, ["0", "1"], "{name}");
    }
    assert_eq!(
        config::checked_mode(Some(0), Some(0)),
        config::CheckedMode::Off,
        "the INF default is off"
    );
}

/// I3's bound (docs/debugging.md): a DWORD of microseconds, default 1000
/// (1 ms), 1 to 10 000 000, as `config::checked_callback_bound` reads it.
#[test]
fn test_inf_checked_callback_bound_keyword() {
    let registry = install_registry();
    let name = keyword::CHECKED_CALLBACK_US;
    let get = |field: &str| keyword_value(&registry, name, field);
    let (kind, default, _) = keyword_ui(&registry, name);
    assert_eq!((kind.as_str(), default.as_str()), ("dword", "1000"));
    assert_eq!(get("min"), "1");
    assert_eq!(get("max"), config::MAX_CALLBACK_BOUND_US.to_string());
    assert_eq!(
        config::checked_callback_bound(default.parse().ok()),
        config::DEFAULT_CALLBACK_BOUND_US,
        "the INF default is the driver's"
    );
}

/// Fault injection's keywords (docs/debugging.md): seed and rate DWORDs
/// defaulting to 0 (the rate bounded by a million, as
/// `config::fault_plan` validates), the schedule an optional edit field;
/// the defaults mean off.
#[test]
fn test_inf_fault_keywords_off_by_default() {
    let registry = install_registry();
    let get = |keyword: &str, field: &str| keyword_value(&registry, keyword, field);
    for (name, max) in [
        (keyword::FAULT_SEED, "4294967295"),
        (keyword::FAULT_RATE, "1000000"),
    ] {
        let (kind, default, _) = keyword_ui(&registry, name);
        assert_eq!((kind.as_str(), default.as_str()), ("dword", "0"), "{name}");
        assert_eq!(get(name, "max"), max, "{name}");
    }
    let (kind, default, _) = keyword_ui(&registry, keyword::FAULT_SCHEDULE);
    assert_eq!((kind.as_str(), default.as_str()), ("edit", ""));
    assert_eq!(get(keyword::FAULT_SCHEDULE, "optional"), "1");
    assert_eq!(
        config::fault_plan(Some(0), Some(0), Some("")),
        config::Faults::Off,
        "the INF defaults are off"
    );
    assert_eq!(
        config::fault_plan(None, Some(1_000_000), None),
        config::fault_plan(Some(0), Some(1_000_000), Some("")),
    );
}

/// `driver-type` of Cargo.toml's `[package.metadata.wdk.driver-model]`, and
/// the other keys of that table (KMDF or UMDF versions).
fn driver_model() -> (String, Vec<String>) {
    let manifest = std::fs::read_to_string(manifest_dir().join("Cargo.toml")).expect("Cargo.toml");
    let mut in_table = false;
    let mut driver_type = None;
    let mut others = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_table = line == "[package.metadata.wdk.driver-model]";
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_table {
            if key.trim() == "driver-type" {
                driver_type = Some(value.trim().trim_matches('"').to_owned());
            } else {
                others.push(key.trim().to_owned());
            }
        }
    }
    (
        driver_type.expect("driver-type in [package.metadata.wdk.driver-model]"),
        others,
    )
}

/// The INF's framework directives: the install section's `.Wdf` section and
/// every `KmdfService` / `KmdfLibraryVersion` / `UmdfService` line.
fn framework_directives(inf: &Inf) -> Vec<String> {
    inf.sections
        .iter()
        .flat_map(|(name, lines)| {
            let wdf_section = name.to_ascii_lowercase().ends_with(".wdf");
            lines
                .iter()
                .filter(move |line| {
                    let key = line.split('=').next().unwrap_or_default().trim();
                    wdf_section
                        || ["KmdfService", "KmdfLibraryVersion", "UmdfService"]
                            .iter()
                            .any(|k| key.eq_ignore_ascii_case(k))
                })
                .map(move |line| format!("[{name}] {line}"))
        })
        .collect()
}

#[test]
fn test_inf_framework_directives_match_cargo_driver_model() {
    let (driver_type, others) = driver_model();
    let text = inx_text();
    let inf = Inf::parse(&text);
    let directives = framework_directives(&inf);
    // The image binds to no framework (tests/driver_image.rs checks it
    // imports nothing from a WDF module), so it is a WDM driver: Cargo.toml
    // says so, and the INF asks for no framework library.
    assert_eq!(driver_type, "WDM", "the image binds to no framework");
    assert!(
        others.is_empty(),
        "a WDM driver has no framework versions in Cargo.toml: {others:?}"
    );
    assert!(
        directives.is_empty(),
        "a WDM driver's INF has no KMDF/UMDF directives: {directives:?}"
    );
    assert!(
        !text.contains("$KMDFVERSION$") && !text.contains("$UMDFVERSION$"),
        "nothing for stampinf -k / -u to stamp"
    );
}
/// `MM/DD/YYYY` of a Unix time (UTC), by the civil-from-days algorithm.
fn date(unix_seconds: u64) -> String {
    let days = i64::try_from(unix_seconds / 86_400).unwrap();
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{month:02}/{day:02}/{year:04}")
}

/// What stampinf does, for the portable package: `DriverVer` (date from
/// `SOURCE_DATE_EPOCH` when set, else today; version from Cargo.toml) and
/// `$ARCH$` (a WDM driver has no `$KMDFVERSION$`).
fn stamp(inx: &str) -> String {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
        });
    let driver_ver = format!(
        "DriverVer   = {},{}.0",
        date(seconds),
        env!("CARGO_PKG_VERSION")
    );
    inx.lines()
        .map(|line| {
            if strip_comment(line).trim().replace(' ', "") == "DriverVer=" {
                driver_ver.clone()
            } else {
                line.replace("$ARCH$", "amd64")
            }
        })
        .collect::<Vec<_>>()
        .join("\r\n")
        + "\r\n"
}

#[test]
fn test_stamp_date_is_civil() {
    assert_eq!(date(0), "01/01/1970");
    assert_eq!(date(951_782_400), "02/29/2000");
    assert_eq!(date(1_735_689_599), "12/31/2024");
}

#[test]
fn test_inf_stamped_copy_in_target_driver() {
    let stamped = stamp(&inx_text());
    let inf = Inf::parse(&stamped);
    let driver_ver = inf.value("Version", "DriverVer").expect("DriverVer");
    let f = fields(&driver_ver);
    assert_eq!(f.len(), 2, "date,version: {driver_ver}");
    assert_eq!(f[0].len(), 10, "MM/DD/YYYY");
    assert_eq!(f[1], format!("{}.0", env!("CARGO_PKG_VERSION")));
    assert_eq!(f[1].split('.').count(), 4, "four-part version");
    assert!(
        !stamped.replace("$WINDOWS NT$", "").contains('$'),
        "every $TOKEN$ stamped"
    );
    let (models, _, _) = device(&inf);
    assert!(models.ends_with(".NTamd64.10.0...17763"), "{models}");
    let out = manifest_dir().join("target").join("driver");
    std::fs::create_dir_all(&out).expect("create target/driver");
    std::fs::write(out.join("softndk.inf"), &stamped).expect("write target/driver/softndk.inf");
}
