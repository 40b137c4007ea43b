//! `softndk-perf`: the shape of its `--json` report, its plot, and its
//! refusal of a bad command line. Small runs; the figures' values are not
//! judged (benchmarks measure, tests assert behaviour).

use std::process::{Command, Output};

use serde_json::Value;

fn perf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_softndk-perf"))
        .args(args)
        .output()
        .expect("run softndk-perf")
}

/// Runs the tool with `args` and `--json`, expecting success, and returns
/// the parsed report.
fn report(args: &[&str]) -> Value {
    let output = perf(&[args, &["--json"]].concat());
    assert!(
        output.status.success(),
        "softndk-perf {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the report is JSON")
}

fn uint(row: &Value, field: &str) -> u64 {
    row[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is a count in {row}"))
}

/// Checks that each of `fields` is a finite number above 0.
fn positive(row: &Value, fields: &[&str]) {
    for field in fields {
        let value = row[*field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} is a number in {row}"));
        assert!(
            value.is_finite() && value > 0.0,
            "{field} = {value} in {row}"
        );
    }
}

fn rows<'a>(report: &'a Value, section: &str) -> &'a Vec<Value> {
    report[section]
        .as_array()
        .unwrap_or_else(|| panic!("{section} is an array"))
}

const ITERS: u64 = 20;

/// A bandwidth row's per-round ratios to memcpy.
fn round_ratios(row: &Value) -> Vec<f64> {
    row["vs_memcpy_rounds"]
        .as_array()
        .unwrap_or_else(|| panic!("vs_memcpy_rounds is an array in {row}"))
        .iter()
        .map(|ratio| ratio.as_f64().expect("a ratio is a number"))
        .collect()
}

#[test]
fn json_report_has_every_figure_in_both_engine_modes() {
    let report = report(&[
        "--iters",
        "20",
        "--sizes",
        "64,4K",
        "--queue-depth",
        "8",
        "--engine",
        "both",
    ]);
    assert_eq!(report["tool"], "softndk-perf");
    assert_eq!(report["settings"]["queue_depth"], 8);
    assert_eq!(report["settings"]["iterations"], ITERS);
    assert!(uint(&report["machine"], "cpus") >= 1);

    let bandwidth = rows(&report, "bandwidth");
    assert_eq!(bandwidth.len(), 3 * 2 * 2, "3 operations, 2 sizes, 2 modes");
    for engine in ["inline", "deferred"] {
        for op in ["write", "read", "send"] {
            for size in [64, 4096] {
                let row = bandwidth
                    .iter()
                    .find(|r| r["engine"] == engine && r["op"] == op && r["size"] == size)
                    .unwrap_or_else(|| panic!("no {engine} {op} row of {size} B"));
                assert_eq!(uint(row, "iterations"), ITERS, "{row}");
                assert_eq!(uint(row, "completions"), ITERS, "{row}");
                let receives = if op == "send" { ITERS } else { 0 };
                assert_eq!(uint(row, "receive_completions"), receives, "{row}");
                positive(
                    row,
                    &[
                        "seconds",
                        "gb_per_s",
                        "msg_per_s",
                        "memcpy_gb_per_s",
                        "vs_memcpy",
                    ],
                );
                // With --iters, one round: its ratio is the figure's, and
                // that of the two bandwidths.
                let ratio = row["vs_memcpy"].as_f64().unwrap();
                assert_eq!(round_ratios(row), [ratio], "{row}");
                let bandwidths =
                    row["gb_per_s"].as_f64().unwrap() / row["memcpy_gb_per_s"].as_f64().unwrap();
                assert!((bandwidths / ratio - 1.0).abs() < 1e-9, "{row}");
            }
        }
    }

    let latency = rows(&report, "latency");
    assert_eq!(latency.len(), 2);
    for (row, engine) in latency.iter().zip(["inline", "deferred"]) {
        assert_eq!(row["engine"], engine);
        assert_eq!(row["op"], "send");
        assert_eq!(row["size"], 64);
        assert_eq!(uint(row, "iterations"), ITERS, "{row}");
        assert_eq!(uint(row, "completions"), ITERS, "{row}");
        assert_eq!(uint(row, "receive_completions"), ITERS, "{row}");
        assert_eq!(uint(row, "cacheline_iterations"), ITERS, "{row}");
        positive(
            row,
            &[
                "median_ns",
                "p99_ns",
                "p999_ns",
                "cacheline_median_ns",
                "cacheline_p99_ns",
                "cacheline_p999_ns",
                "vs_cacheline",
            ],
        );
        let ordered = |a: &str, b: &str| row[a].as_f64() <= row[b].as_f64();
        assert!(ordered("median_ns", "p99_ns") && ordered("p99_ns", "p999_ns"));
    }

    let rate = rows(&report, "rate");
    assert_eq!(rate.len(), 2);
    for (row, engine) in rate.iter().zip(["inline", "deferred"]) {
        assert_eq!(row["engine"], engine);
        assert_eq!(row["queue_depth"], 8);
        for figure in [&row["unbatched"], &row["defer"]] {
            assert_eq!(uint(figure, "iterations"), ITERS, "{row}");
            assert_eq!(uint(figure, "completions"), ITERS, "{row}");
            assert_eq!(uint(figure, "receive_completions"), ITERS, "{row}");
            positive(figure, &["seconds", "msg_per_s"]);
        }
        positive(row, &["defer_vs_unbatched"]);
    }

    // Without 1-8 MiB sizes there is no memcpy goal; the other four are
    // there, each with a finite value and a verdict.
    let goals = rows(&report, "goals");
    assert_eq!(goals.len(), 4, "{goals:?}");
    for goal in goals {
        assert!(goal["name"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(goal["target"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(goal["value"].as_f64().is_some_and(f64::is_finite), "{goal}");
        assert!(goal["met"].is_boolean() && goal["judged"].is_boolean());
        if goal["judged"] == false {
            assert_eq!(goal["met"], false, "{goal}");
        }
    }
}

#[test]
fn bandwidth_with_a_duration_alternates_five_rounds_beside_memcpy() {
    // 1 ms per figure: 0.2 ms per round, far below one 1 MiB message's time
    // times the rounds' floor of 64 messages, so each round holds exactly 64.
    let report = report(&[
        "--duration",
        "0.001",
        "--sizes",
        "64,1M",
        "--op",
        "write,send",
        "--engine",
        "inline",
    ]);
    let bandwidth = rows(&report, "bandwidth");
    assert_eq!(bandwidth.len(), 2 * 2, "2 operations, 2 sizes");
    for row in bandwidth {
        let iterations = uint(row, "iterations");
        assert_eq!(iterations % 5, 0, "5 rounds of one count: {row}");
        assert!(iterations >= 5 * 64, "at least 64 messages a round: {row}");
        if row["size"] == 1 << 20 {
            assert_eq!(iterations, 5 * 64, "{row}");
        }
        assert_eq!(uint(row, "completions"), iterations, "{row}");
        let receives = if row["op"] == "send" { iterations } else { 0 };
        assert_eq!(uint(row, "receive_completions"), receives, "{row}");
        // The figure is the median of the five rounds' ratios.
        let mut ratios = round_ratios(row);
        assert_eq!(ratios.len(), 5, "{row}");
        assert!(ratios.iter().all(|r| r.is_finite() && *r > 0.0), "{row}");
        ratios.sort_by(f64::total_cmp);
        assert_eq!(row["vs_memcpy"].as_f64(), Some(ratios[2]), "{row}");
    }
}

#[test]
fn armed_notification_and_sges_complete_every_request() {
    let report = report(&[
        "--iters",
        "20",
        "--sizes",
        "1M",
        "--op",
        "write,read,send,latency",
        "--sge",
        "4",
        "--notify",
        "armed",
        "--engine",
        "deferred",
    ]);
    assert_eq!(report["settings"]["notify"], "armed");
    assert_eq!(report["settings"]["sge"], 4);
    let bandwidth = rows(&report, "bandwidth");
    assert_eq!(bandwidth.len(), 3);
    for row in bandwidth {
        assert_eq!(row["engine"], "deferred");
        assert_eq!(uint(row, "completions"), ITERS, "{row}");
        positive(row, &["gb_per_s", "vs_memcpy"]);
    }
    assert_eq!(rows(&report, "latency").len(), 1);
    assert!(rows(&report, "rate").is_empty());
    // Every goal is judged on inline rows, and this run has none.
    let goals = rows(&report, "goals");
    assert!(
        goals.is_empty(),
        "the goals are judged on inline rows: {goals:?}"
    );
}

#[test]
fn plot_writes_an_svg() {
    let dir = std::env::temp_dir().join(format!("softndk-perf-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("perf.svg");
    let output = perf(&[
        "--iters",
        "10",
        "--sizes",
        "64,4K",
        "--op",
        "write,send",
        "--engine",
        "inline",
        "--plot",
        path.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert!(svg.contains("RDMA Write (inline)") && svg.contains("memcpy"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_options_exit_non_zero_with_usage() {
    for args in [
        &["--bogus"][..],
        &["--sizes", "0"],
        &["--sizes", "65M"],
        &["--engine", "warp"],
        &["--queue-depth", "0"],
        &["--iters", "10", "--duration", "1"],
    ] {
        let output = perf(args);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("Usage: softndk-perf"), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn sge_count_larger_than_a_message_is_refused() {
    let output = perf(&["--sizes", "2", "--sge", "4", "--iters", "1"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--sge 4"), "{stderr}");
}
