//! Layers call down only (docs/architecture.md): driver → provider → rnic →
//! kernel, with abi shared by the layers that speak C. A path such as
//! `crate::driver::…` written in `src/provider/` is a call going up, and a
//! circle between folders; this test reads every source file and refuses one.

use std::fs;
use std::path::Path;

#[path = "common/tree.rs"]
mod tree;

/// The layers each folder of `src/` may name, itself included.
const ALLOWED: &[(&str, &[&str])] = &[
    ("driver", &["driver", "provider", "rnic", "kernel", "abi"]),
    ("provider", &["provider", "rnic", "kernel", "abi"]),
    // rnic knows nothing of NDK, NDIS or NTSTATUS: no abi.
    ("rnic", &["rnic", "kernel"]),
    ("kernel", &["kernel", "abi"]),
    ("abi", &["abi"]),
];

const LAYERS: &[&str] = &["driver", "provider", "rnic", "kernel", "abi"];

/// Every `crate::<layer>` a file names, with its line number.
fn named_layers(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            // `softndk_crate::x` or `some_crate::x` are not this crate.
            let before = rest[..at].chars().next_back();
            let own = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
            let layer = LAYERS.iter().find(|l| {
                after.starts_with(**l)
                    && !after[l.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if let (true, Some(layer)) = (own, layer) {
                found.push((n + 1, *layer));
            }
            rest = after;
        }
    }
    found
}

#[test]
fn test_layers_call_down_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut breaches = Vec::new();
    let mut checked = 0;
    for (layer, allowed) in ALLOWED {
        let files = tree::rust_files_below(&src.join(layer));
        assert!(!files.is_empty(), "src/{layer} has no Rust files");
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            for (line, named) in named_layers(&text) {
                checked += 1;
                if !allowed.contains(&named) {
                    breaches.push(format!(
                        "{}:{line}: {layer} names crate::{named}",
                        file.strip_prefix(&src).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        breaches.is_empty(),
        "calls going up a layer:\n{}",
        breaches.join("\n")
    );
}

#[test]
fn test_layer_scan_sees_paths_and_ignores_other_crates() {
    let text = "use crate::driver::ndk;\nlet x = crate::rnic::Qp; // and crate::abi\nuse other_crate::driver;\nuse crate::drivers;\n";
    assert_eq!(
        named_layers(text),
        vec![(1, "driver"), (2, "rnic"), (2, "abi")]
    );
}
