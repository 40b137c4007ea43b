//! The package's files, for the tests that read the source tree
//! (`layers.rs`, `docs_map.rs`, `conformance_table.rs`): one recursive walk,
//! included by each with `#[path]`.

use std::path::{Path, PathBuf};

/// Every file below `dir`, recursively, in path order; none when `dir`
/// does not exist.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// The Rust files of [`files_below`].
#[allow(dead_code, reason = "docs_map.rs names every kind of source file")]
pub fn rust_files_below(dir: &Path) -> Vec<PathBuf> {
    files_below(dir)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}
