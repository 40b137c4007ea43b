//! The C program of README.md ("Host mode: a C consumer"), built and run
//! against a freshly built `libsoftndk`: the README's promise, checked.
//!
//! The library is built with `cargo build --release --lib` into its own
//! target directory (`target/c-example`), so that the outer `cargo test`
//! keeps its lock and its build; the program is compiled with `$CC` (default
//! `cc`). Without a C compiler the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

const BEGIN: &str = "<!-- c-example:begin -->";
const END: &str = "<!-- c-example:end -->";

/// The C source between the README's markers, without the code fence.
fn extract(readme: &str) -> Option<String> {
    let start = readme.find(BEGIN)? + BEGIN.len();
    let end = start + readme.get(start..)?.find(END)?;
    let block = readme.get(start..end)?;
    let lines: Vec<&str> = block
        .lines()
        .filter(|line| !line.trim_start().starts_with("```"))
        .collect();
    Some(lines.join("\n") + "\n")
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

#[test]
fn test_readme_c_example_builds_and_runs() {
    if cfg!(target_os = "windows") {
        eprintln!("skipped: host mode (libsoftndk.so) is for non-Windows hosts");
        return;
    }
    let cc = compiler();
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler `{cc}` found (set CC to use another)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let source = extract(&readme).expect("README.md has the C example between its markers");
    assert!(source.contains("SoftNdkOpenAdapter"), "{source}");

    let target = root.join("target").join("c-example");
    let status = Command::new(cargo())
        .current_dir(root)
        .args(["build", "--release", "--lib", "--target-dir"])
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build --release --lib failed");
    let lib_dir = target.join("release");
    let library = lib_dir.join(format!(
        "{}softndk{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(library.exists(), "{} was not built", library.display());

    let c_file = target.join("softndk-example.c");
    std::fs::write(&c_file, source).expect("write the C source");
    let exe: PathBuf = target.join("softndk-example");
    let output = Command::new(&cc)
        .arg("-std=c99")
        .arg("-Wall")
        .arg("-o")
        .arg(&exe)
        .arg(&c_file)
        .arg("-L")
        .arg(&lib_dir)
        .arg("-lsoftndk")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .output()
        .expect("the C compiler runs");
    assert!(
        output.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.stderr.is_empty(),
        "{cc} warned:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // `cargo test` puts its own target directories on the loader's path, where
    // an older `libsoftndk` may lie: the fresh one must win over the rpath.
    let run = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib_dir)
        .env("DYLD_LIBRARY_PATH", &lib_dir)
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        run.status.code(),
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "NDK 1.2, max CQ depth 65536, flags 0x10112",
            "created a CQ and a PD",
            "closed",
        ],
        "the output the README promises"
    );
}

#[test]
fn test_extract_finds_the_marked_block() {
    let text = format!("intro\n{BEGIN}\n```c\nint main(void) {{ return 0; }}\n```\n{END}\nrest");
    assert_eq!(
        extract(&text).as_deref(),
        Some("\nint main(void) { return 0; }\n")
    );
    assert_eq!(extract("no markers"), None);
}
