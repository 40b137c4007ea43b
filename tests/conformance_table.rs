//! `docs/conformance.md` is the rule → test table. This test keeps it true:
//! every rule of the specification has at least one test, every test named
//! in the table exists, and every conformance test names a known rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "common/tree.rs"]
mod tree;

/// Every rule id of `shared/spec/rules.md`, in order.
const RULES: &[&str] = &[
    "D1", "D2", "D3", "D4", "D5", "D6", "C1", "C2", "C3", "C4", "C5", "C6", "X1", "X2", "X3", "X4",
    "X5", "X6", "X7", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9", "L10", "L11", "L12",
    "L13", "L14", "L15", "L16", "L17", "L18", "L19", "L20", "L21", "L22", "L23", "L24", "L25",
    "L26", "L27", "L28", "L29", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11",
    "P12", "P13", "P14", "P15", "P16", "P17", "P18", "P19", "P20", "P21", "P22", "P23", "P24",
    "P25", "M1", "M2", "M3", "M4", "M5", "M6", "M7", "M8", "M9", "M10", "M11", "M12", "M13", "M14",
    "M15", "M16", "M17", "M18", "M19", "M20", "M21", "M22", "M23", "M24", "M25", "M26", "M27",
    "M28", "M29", "M30", "M31", "M32", "M33", "M34", "M35", "M36", "N1", "N2", "N3", "N4", "N5",
    "N6", "N7", "N8", "N9", "N10", "N11", "N12", "N13", "N14", "N15", "N16", "N17", "N18", "N19",
    "N20", "N21", "N22", "N23", "N24", "N25", "N26", "N27", "N28", "N29", "N30", "N31", "N32",
    "Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9", "E1", "E2", "E3", "E4", "E5", "E6", "E7",
    "E8", "E9", "E10", "E11", "E12", "E13", "E14", "K1", "K2", "K3", "K4", "K5", "K6", "K7", "K8",
    "K9", "K10", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "A1", "A2", "A3", "A4", "A5", "A6",
    "A7", "A8", "A9", "A10", "A11", "A12", "A13", "A14", "A15", "A16", "A17", "A18", "A19", "A20",
    "A21", "A22", "A23", "A24",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Rule → tests, from the `| rule | tests |` rows of the document.
fn table() -> BTreeMap<String, Vec<String>> {
    let text =
        std::fs::read_to_string(root().join("docs/conformance.md")).expect("docs/conformance.md");
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // "| R | tests |" splits into ["", R, tests, ""].
        if cells.len() < 4 || !cells[0].is_empty() {
            continue;
        }
        let rule = cells[1].trim_matches('*');
        let known_shape = rule.len() >= 2
            && rule.as_bytes()[0].is_ascii_uppercase()
            && rule[1..].bytes().all(|b| b.is_ascii_digit());
        if !known_shape {
            continue;
        }
        let tests = cells[2]
            .split([',', ' '])
            .map(|t| t.trim_matches('`').trim())
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        map.entry(rule.to_owned()).or_default().extend(tests);
    }
    map
}

/// Names of every `fn` (or, with `tests_only`, every `#[test]` fn) in the
/// Rust sources under `dir`.
fn functions(dir: &Path, out: &mut BTreeSet<String>) {
    collect(dir, out, false);
}

fn collect(dir: &Path, out: &mut BTreeSet<String>, tests_only: bool) {
    for path in tree::rust_files_below(dir) {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut after_test_attribute = false;
        for line in text.lines() {
            let mut line = line.trim_start();
            // A table's row may hold its attribute and `fn` on one line.
            if let Some(rest) = line.strip_prefix("#[test]") {
                after_test_attribute = true;
                line = rest.trim_start();
                if line.is_empty() {
                    continue;
                }
            }
            let Some(rest) = line
                .strip_prefix("fn ")
                .or_else(|| line.strip_prefix("pub fn "))
            else {
                continue;
            };
            if (!tests_only || after_test_attribute)
                && let Some(name) = rest.split(['(', '<']).next()
            {
                out.insert(name.trim().to_owned());
            }
            after_test_attribute = false;
        }
    }
}

#[test]
fn rule_list_matches_the_specification() {
    // CI runs with the steering repository's shared/ beside the clone.
    let spec = root().join("../shared/spec/rules.md");
    let Ok(text) = std::fs::read_to_string(&spec) else {
        eprintln!(
            "{} not present: checking against the embedded list only",
            spec.display()
        );
        return;
    };
    let ids: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("- **"))
        .filter_map(|l| l.split("**").next())
        .filter(|id| id.len() >= 2 && id[1..].bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        ids, RULES,
        "rules.md changed: update RULES and docs/conformance.md"
    );
}

#[test]
fn every_rule_has_a_test_and_every_named_test_exists() {
    let table = table();
    let mut fns = BTreeSet::new();
    functions(&root().join("tests"), &mut fns);
    functions(&root().join("src"), &mut fns);
    let mut missing = Vec::new();
    for rule in RULES {
        match table.get(*rule) {
            Some(tests) if !tests.is_empty() => {
                for test in tests {
                    if !fns.contains(test) {
                        missing.push(format!("{rule}: test `{test}` does not exist"));
                    }
                }
            }
            _ => missing.push(format!("{rule}: no test in docs/conformance.md")),
        }
    }
    for rule in table.keys() {
        if !RULES.contains(&rule.as_str()) {
            missing.push(format!("{rule}: not a rule of the specification"));
        }
    }
    assert!(
        missing.is_empty(),
        "conformance table problems:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_conformance_test_names_a_known_rule_and_is_listed() {
    let table = table();
    let listed: BTreeSet<&String> = table.values().flatten().collect();
    let mut fns = BTreeSet::new();
    collect(&root().join("tests/conformance"), &mut fns, true);
    let mut problems = Vec::new();
    for name in &fns {
        // Conformance tests are named `<rule>_<behaviour>`, e.g. `c4_...`.
        let Some(prefix) = name.split('_').next() else {
            continue;
        };
        let is_rule_name = prefix.len() >= 2
            && prefix.as_bytes()[0].is_ascii_lowercase()
            && prefix[1..].bytes().all(|b| b.is_ascii_digit());
        if !is_rule_name {
            continue;
        }
        let rule = prefix.to_ascii_uppercase();
        if !RULES.contains(&rule.as_str()) {
            problems.push(format!("`{name}` names unknown rule {rule}"));
        } else if !listed.contains(name) {
            problems.push(format!("`{name}` is not listed in docs/conformance.md"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether `rule` stands in `text` as a whole id (`L1` is not in `L10`).
fn cites(text: &str, rule: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    text.match_indices(rule).any(|(at, _)| {
        let before = text.as_bytes()[..at].last().copied();
        let after = text.as_bytes().get(at + rule.len()).copied();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// A newcomer who knows a rule id finds the code that keeps it by that id:
/// every rule, the consumer's included (the code that answers a consumer
/// who breaks it, or the reported fact that frees consumers of it), is cited
/// in a comment or name of the product code under `src/`, not only in tests.
#[test]
fn every_rule_is_cited_in_the_code_that_keeps_it() {
    let is_test = |path: &Path| {
        path.components().any(|c| c.as_os_str() == "tests")
            || path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("test"))
    };
    let code: Vec<String> = tree::rust_files_below(&root().join("src"))
        .into_iter()
        .filter(|path| !is_test(path.strip_prefix(root()).unwrap_or(path)))
        .map(|path| std::fs::read_to_string(path).unwrap_or_default())
        .collect();
    assert!(code.len() > 100, "the product sources were not found");
    let uncited = RULES
        .iter()
        .filter(|rule| !code.iter().any(|text| cites(text, rule)));
    let uncited: Vec<_> = uncited.collect();
    assert_eq!(
        uncited,
        Vec::<&&str>::new(),
        "rules no product code under src/ cites"
    );
}

#[test]
fn a_rule_id_is_cited_only_as_a_whole_word() {
    assert!(cites("checked here (L1).", "L1"));
    assert!(cites("L1: first", "L1"));
    assert!(!cites("rules L10 and L11", "L1"));
    assert!(!cites("IRD_P2P", "P2"));
    assert!(!cites("XL1", "L1"));
}
