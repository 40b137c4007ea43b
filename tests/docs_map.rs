//! `docs/architecture.md` ("Files") names every source file of the package
//! with its job, so that a newcomer finds a file, or the file of a rule, in
//! one step. This test keeps the list true both ways: every source file is
//! named there, and every path named there exists.
//!
//! A file is named by its path in backticks: a file under `src/` without
//! its `src/` (`rnic/qp.rs`) or with it (`src/bin/…`), any other from the
//! package root (`tests/layers.rs`, `scripts/siw/init`).

use std::fs;
use std::path::Path;

#[path = "common/tree.rs"]
mod tree;

/// The folders whose files must be named, from the package root.
const FOLDERS: &[&str] = &["src", "tests", "examples", "scripts"];

/// The source files outside those folders.
const ROOT_FILES: &[&str] = &["build.rs"];

/// The layer folders, which the list names without their `src/`.
const LAYERS: &[&str] = &["abi", "driver", "kernel", "provider", "rnic"];

/// Every file below `dir` that is source: Rust files, and every file of
/// `scripts/` (shell scripts, the guest's `init`), as paths from `root`.
fn source_files(root: &Path, dir: &Path) -> Vec<String> {
    tree::files_below(dir)
        .into_iter()
        .map(|path| {
            path.strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .filter(|rel| {
            Path::new(rel).extension().is_some_and(|e| e == "rs") || rel.starts_with("scripts/")
        })
        .collect()
}

/// The paths the text names in backticks: a token of path characters that
/// names a file (ends in `.rs` or `.sh`, or lies under `scripts/`).
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                && (Path::new(t)
                    .extension()
                    .is_some_and(|e| e == "rs" || e == "sh")
                    || t.starts_with("scripts/"))
                && !t.ends_with('/')
        })
        .collect()
}

/// Whether `named` (a path as the list writes it) is the file `rel`.
fn names(named: &str, rel: &str) -> bool {
    named == rel || rel.strip_prefix("src/") == Some(named)
}

fn architecture() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    fs::read_to_string(root.join("docs/architecture.md")).unwrap()
}

fn package_files() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = ROOT_FILES.iter().map(|f| (*f).to_owned()).collect();
    for folder in FOLDERS {
        files.extend(source_files(root, &root.join(folder)));
    }
    files
}

#[test]
fn test_every_source_file_is_named_in_the_architecture_list() {
    let text = architecture();
    let named = named_paths(&text);
    let files = package_files();
    assert!(
        files.iter().any(|f| f == "src/rnic/qp.rs") && files.len() > 100,
        "the walk found {} files, not the package's sources",
        files.len()
    );
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !named.iter().any(|n| names(n, f)))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md (\"Files\") does not name {} source file(s); add a line \
         with each one's job: {missing:#?}",
        missing.len()
    );
}

#[test]
fn test_every_path_the_architecture_list_names_exists() {
    let text = architecture();
    let files = package_files();
    let roots: Vec<&str> = FOLDERS.iter().chain(LAYERS).copied().collect();
    let stale: Vec<&str> = named_paths(&text)
        .into_iter()
        // A path from a root of the package or a layer; a bare relative
        // path (`fuzz/mod.rs` after its folder was named) is prose.
        .filter(|n| roots.iter().any(|r| n.starts_with(&format!("{r}/"))))
        .filter(|n| !files.iter().any(|f| names(n, f)))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/architecture.md names path(s) that are not source files of the package: {stale:#?}"
    );
}

#[test]
fn test_a_path_is_read_from_backticks_only() {
    let text = "`rnic/qp.rs`: queue pairs; see rnic/cm.rs and `docs/iwarp.md`, `c.rs` … \
                `scripts/siw/init`, `x/`";
    assert_eq!(
        named_paths(text),
        ["rnic/qp.rs", "c.rs", "scripts/siw/init"]
    );
    assert!(names("rnic/qp.rs", "src/rnic/qp.rs"));
    assert!(names("src/bin/a.rs", "src/bin/a.rs"));
    assert!(names("lib.rs", "src/lib.rs"));
    assert!(!names("qp.rs", "src/rnic/qp.rs"));
    assert!(!names("qp/tests.rs", "src/rnic/qp/tests.rs"));
}
