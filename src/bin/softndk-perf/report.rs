//! The report: what `--json` prints (and what a child process of another
//! engine mode hands back), the table, and the goals as ratios.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Everything one invocation measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// `softndk-perf`.
    pub tool: String,
    /// The package version.
    pub version: String,
    /// Where it ran.
    pub machine: Machine,
    /// How it ran.
    pub settings: Settings,
    /// RDMA Write / Read / Send bandwidth beside memcpy.
    pub bandwidth: Vec<BandwidthRow>,
    /// 64 B Send / Receive ping-pong beside a cache-line hand-off.
    pub latency: Vec<LatencyRow>,
    /// 64 B Send message rate, unbatched and with DEFER chains.
    pub rate: Vec<RateRow>,
    /// The goals, from the rows above.
    pub goals: Vec<Goal>,
}

/// The machine.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Machine {
    /// `std::env::consts::OS`.
    pub os: String,
    /// `std::env::consts::ARCH`.
    pub arch: String,
    /// Available parallelism.
    pub cpus: usize,
}

/// The options that shape the figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Settings {
    /// Initiator requests in flight at most.
    pub queue_depth: usize,
    /// SGEs per initiator request.
    pub sge: usize,
    /// `poll` or `armed`.
    pub notify: String,
    /// Measured iterations per figure, when fixed.
    pub iterations: Option<u64>,
    /// Seconds per figure, when not fixed by `iterations`.
    pub duration_s: Option<f64>,
}

/// What a bandwidth or ping-pong figure timed, and the completions its run
/// counted (the first fields of its JSON row).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Timed {
    /// `write`, `read` or `send`.
    pub op: String,
    /// `inline` or `deferred`.
    pub engine: String,
    /// Bytes per message.
    pub size: u64,
    /// Messages (bandwidth) or round trips (ping-pong) timed.
    pub iterations: u64,
    /// Successful initiator completions counted (on the timing side).
    pub completions: u64,
    /// Successful receive completions counted (on the timing side; 0 for
    /// a Write or Read).
    pub receive_completions: u64,
}

impl Timed {
    /// Its line of the table: `test`, its engine, size and count, then
    /// `figures` (the result, the baseline and their ratio).
    fn line(&self, out: &mut String, test: &str, figures: [&str; 3]) {
        let [result, baseline, ratio] = figures;
        let (bytes, iters) = (size(self.size), count(self.iterations));
        line(
            out,
            [test, &self.engine, &bytes, &iters, result, baseline, ratio],
        );
    }
}

/// One bandwidth figure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BandwidthRow {
    /// What was timed.
    #[serde(flatten)]
    pub timed: Timed,
    /// Seconds (the rounds added up).
    pub seconds: f64,
    /// Bandwidth over the rounds, 10^9 bytes per second.
    pub gb_per_s: f64,
    /// Messages per second.
    pub msg_per_s: f64,
    /// memcpy of the same size over the same buffers, 10^9 bytes per second
    /// (over its rounds, as `gb_per_s`).
    pub memcpy_gb_per_s: f64,
    /// The median of `vs_memcpy_rounds`.
    pub vs_memcpy: f64,
    /// Each round's bandwidth over that of the memcpy round beside it, in
    /// the order measured (one with `--iters`, five with `--duration`).
    pub vs_memcpy_rounds: Vec<f64>,
}

/// One ping-pong figure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LatencyRow {
    /// What was timed (op `send`).
    #[serde(flatten)]
    pub timed: Timed,
    /// Median half round trip.
    pub median_ns: f64,
    /// 99th percentile half round trip.
    pub p99_ns: f64,
    /// 99.9th percentile half round trip.
    pub p999_ns: f64,
    /// Cache-line round trips timed.
    pub cacheline_iterations: u64,
    /// Median one-way cache-line hand-off (half round trip).
    pub cacheline_median_ns: f64,
    /// 99th percentile hand-off.
    pub cacheline_p99_ns: f64,
    /// 99.9th percentile hand-off.
    pub cacheline_p999_ns: f64,
    /// `median_ns / cacheline_median_ns`.
    pub vs_cacheline: f64,
}

/// One message-rate figure pair.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateRow {
    /// `inline` or `deferred`.
    pub engine: String,
    /// Bytes per message.
    pub size: u64,
    /// Requests per chain (and in flight at most).
    pub queue_depth: usize,
    /// One doorbell per request.
    pub unbatched: RateFigure,
    /// Chains of `NDK_OP_FLAG_DEFER` requests.
    pub defer: RateFigure,
    /// `defer.msg_per_s / unbatched.msg_per_s`.
    pub defer_vs_unbatched: f64,
}

/// A message rate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateFigure {
    /// Messages timed.
    pub iterations: u64,
    /// Successful send completions counted.
    pub completions: u64,
    /// Successful receive completions counted.
    pub receive_completions: u64,
    /// Seconds.
    pub seconds: f64,
    /// Messages per second.
    pub msg_per_s: f64,
}

/// One of the goals and today's value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Goal {
    /// What is compared.
    pub name: String,
    /// The target, as text.
    pub target: String,
    /// Today's value.
    pub value: f64,
    /// The unit of `value` (`x` for a ratio).
    pub unit: String,
    /// Whether the value meets the target (never when not `judged`).
    pub met: bool,
    /// False when the run cannot judge the goal: a latency goal whose
    /// cache-line hand-off shows the two threads shared a core.
    pub judged: bool,
}

impl Report {
    /// Computes the goals from the rows (each only when its rows exist).
    pub fn compute_goals(&mut self) {
        let mut goals = Vec::new();
        let big = self
            .bandwidth
            .iter()
            .filter(|r| {
                r.timed.engine == "inline"
                    && (r.timed.op == "write" || r.timed.op == "read")
                    && (1 << 20..=8 << 20).contains(&r.timed.size)
            })
            .map(|r| r.vs_memcpy)
            .reduce(f64::min);
        if let Some(worst) = big {
            goals.push(Goal {
                name: "RDMA Write/Read 1-8 MiB vs memcpy (worst, inline)".into(),
                target: ">= 0.9x".into(),
                value: worst,
                unit: "x".into(),
                met: worst >= 0.9,
                judged: true,
            });
        }
        let busy = |row: &LatencyRow| row.cacheline_median_ns > CONTENDED_HANDOFF_NS;
        let inline_latency = self.latency.iter().find(|r| r.timed.engine == "inline");
        if let Some(row) = inline_latency {
            goals.push(Goal {
                name: "64 B Send/Recv half RTT vs cache-line hand-off (inline)".into(),
                target: "<= 3x".into(),
                value: row.vs_cacheline,
                unit: "x".into(),
                met: !busy(row) && row.vs_cacheline <= 3.0,
                judged: !busy(row),
            });
        }
        if let Some(row) = self.rate.iter().find(|r| r.engine == "inline") {
            goals.push(Goal {
                name: "64 B Send rate, DEFER vs unbatched (inline)".into(),
                target: ">= 2x".into(),
                value: row.defer_vs_unbatched,
                unit: "x".into(),
                met: row.defer_vs_unbatched >= 2.0,
                judged: true,
            });
            goals.push(Goal {
                name: "64 B Send rate with DEFER (inline)".into(),
                target: ">= 10 M/s".into(),
                value: row.defer.msg_per_s / 1e6,
                unit: "M/s".into(),
                met: row.defer.msg_per_s >= 10e6,
                judged: true,
            });
        }
        let deferred_latency = self.latency.iter().find(|r| r.timed.engine == "deferred");
        if let (Some(inline), Some(deferred)) = (inline_latency, deferred_latency) {
            let ratio = deferred.median_ns / inline.median_ns;
            goals.push(Goal {
                name: "64 B half RTT, deferred engine vs inline (median)".into(),
                target: "<= 2x".into(),
                value: ratio,
                unit: "x".into(),
                met: !busy(inline) && !busy(deferred) && ratio <= 2.0,
                judged: !busy(inline) && !busy(deferred),
            });
        }
        self.goals = goals;
    }

    /// The table, perftest-style.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let s = &self.settings;
        let _ = writeln!(
            out,
            "softndk-perf {}: SoftNDK host mode, 127.0.0.1 -> 127.0.0.2, {} {} CPUs, \
             queue depth {}, {} SGE, CQ {}",
            self.version,
            self.machine.arch,
            self.machine.cpus,
            s.queue_depth,
            s.sge,
            if s.notify == "armed" {
                "armed (notification callback)"
            } else {
                "polling"
            },
        );
        let _ = writeln!(
            out,
            "{:<20} {:<8} {:>5} {:>7}  {:<40} {:<42} {:>7}",
            "test", "engine", "bytes", "iters", "result", "baseline (same run)", "ratio"
        );
        for row in &self.bandwidth {
            let test = match row.timed.op.as_str() {
                "write" => "RDMA Write",
                "read" => "RDMA Read",
                _ => "Send",
            };
            row.timed.line(
                &mut out,
                test,
                [
                    &format!(
                        "{:>8.3} GB/s {:>8.3} Mmsg/s",
                        row.gb_per_s,
                        row.msg_per_s / 1e6
                    ),
                    &format!("memcpy {:>8.3} GB/s", row.memcpy_gb_per_s),
                    &format!("{:.3}x", row.vs_memcpy),
                ],
            );
        }
        for row in &self.latency {
            row.timed.line(
                &mut out,
                "Send/Recv half RTT",
                [
                    &format!(
                        "{} p99 {} p99.9 {}",
                        ns(row.median_ns),
                        ns(row.p99_ns),
                        ns(row.p999_ns)
                    ),
                    &format!(
                        "cache line {} p99 {} p99.9 {}",
                        ns(row.cacheline_median_ns),
                        ns(row.cacheline_p99_ns),
                        ns(row.cacheline_p999_ns)
                    ),
                    &format!("{:.1}x", row.vs_cacheline),
                ],
            );
        }
        for row in &self.rate {
            line(
                &mut out,
                [
                    "Send rate, DEFER",
                    &row.engine,
                    &size(row.size),
                    &count(row.defer.iterations),
                    &format!("{:.3} Mmsg/s", row.defer.msg_per_s / 1e6),
                    &format!("unbatched {:.3} Mmsg/s", row.unbatched.msg_per_s / 1e6),
                    &format!("{:.2}x", row.defer_vs_unbatched),
                ],
            );
        }
        self.goal_table(&mut out);
        self.notes(&mut out);
        out
    }

    /// Warnings about figures a busy machine made meaningless.
    fn notes(&self, out: &mut String) {
        for row in &self.latency {
            if row.cacheline_median_ns > CONTENDED_HANDOFF_NS {
                let _ = writeln!(
                    out,
                    "note: the cache-line hand-off took {} ({}): its two threads did not \
                     each have a core (the machine was busy), so the latency goals of this \
                     run are not judged; run again on a quieter machine",
                    ns(row.cacheline_median_ns),
                    row.timed.engine
                );
            }
        }
    }

    /// The goals, under the table.
    fn goal_table(&self, out: &mut String) {
        if self.goals.is_empty() {
            return;
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<58} {:>10} {:>10}  met",
            "goal (issue 10)", "target", "today"
        );
        for goal in &self.goals {
            let today = if goal.unit == "x" {
                format!("{:.2}x", goal.value)
            } else {
                format!("{:.2} {}", goal.value, goal.unit)
            };
            let _ = writeln!(
                out,
                "{:<58} {:>10} {:>10}  {}",
                goal.name,
                goal.target,
                today,
                match (goal.judged, goal.met) {
                    (false, _) => "not judged (machine busy)",
                    (true, true) => "yes",
                    (true, false) => "no",
                }
            );
        }
    }
}

/// One line of the table.
fn line(out: &mut String, cells: [&str; 7]) {
    let [test, engine, bytes, iters, result, baseline, ratio] = cells;
    let _ = writeln!(
        out,
        "{test:<20} {engine:<8} {bytes:>5} {iters:>7}  {result:<40} {baseline:<42} {ratio:>7}"
    );
}

/// A median cache-line hand-off above this means the two threads shared a
/// core; between two cores it takes tens to a few hundred nanoseconds.
const CONTENDED_HANDOFF_NS: f64 = 1000.0;

/// A size in bytes, with a binary suffix when it is a whole number of them.
pub fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}M", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{}K", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

/// An iteration count, short.
fn count(n: u64) -> String {
    let x = crate::bench::float(n);
    if n >= 10_000_000 {
        format!("{:.1}M", x / 1e6)
    } else if n >= 10_000 {
        format!("{:.0}k", x / 1e3)
    } else {
        n.to_string()
    }
}

/// Nanoseconds, in a readable unit.
fn ns(value: f64) -> String {
    if value < 1e3 {
        format!("{value:.0} ns")
    } else if value < 1e6 {
        format!("{:.2} us", value / 1e3)
    } else {
        format!("{:.2} ms", value / 1e6)
    }
}
