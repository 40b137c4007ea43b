//! Options, the order of the measurements, engine modes, and output.
//!
//! The engine mode of a host-mode device is chosen by the environment
//! variable `SOFTNDK_ENGINE` when the device is created (see
//! `softndk::provider::host`). A process therefore measures the mode its
//! environment selects, and the tool runs each other mode asked for in a
//! child process of itself with `SOFTNDK_ENGINE` set, which reports back in
//! JSON.

use std::io::Write as _;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use crate::bench::{self, Config, Op, Timing};
use crate::ndk::{Link, QpShape, Result};
use crate::options::{self, Engine, Options, Test};
use crate::report::{
    BandwidthRow, LatencyRow, Machine, RateFigure, RateRow, Report, Settings, Timed,
};

/// The tool's entry point.
pub fn main() -> ExitCode {
    let options = options::parse();
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            Progress::clear();
            eprintln!("softndk-perf: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(options: &Options) -> Result<()> {
    if let Some(&smallest) = options.sizes.iter().min()
        && smallest < options.sge as usize
    {
        return Err(format!(
            "--sge {} needs messages of at least {} bytes; the smallest size is {smallest}",
            options.sge, options.sge
        ));
    }
    let mut report = Report {
        tool: "softndk-perf".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        machine: Machine {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
        },
        settings: Settings {
            queue_depth: options.queue_depth as usize,
            sge: options.sge as usize,
            notify: notify_name(options.armed).into(),
            iterations: options.iters,
            duration_s: options.iters.is_none().then_some(options.duration),
        },
        ..Report::default()
    };
    let here = Engine::of_environment();
    for &engine in &options.engines {
        let part = if engine == here {
            measure(options, engine)?
        } else {
            measure_in_child(options, engine)?
        };
        report.bandwidth.extend(part.bandwidth);
        report.latency.extend(part.latency);
        report.rate.extend(part.rate);
    }
    report.compute_goals();
    Progress::clear();
    let mut stdout = std::io::stdout().lock();
    let printed = if options.json {
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        writeln!(stdout, "{json}")
    } else {
        write!(stdout, "{}", report.table())
    };
    printed.map_err(|e| format!("writing the report: {e}"))?;
    if let Some(path) = &options.plot {
        crate::plot::draw(&report, path)?;
        eprintln!("softndk-perf: wrote {}", path.display());
    }
    Ok(())
}

/// Runs the tests of `options` in `engine` mode in a child process of this
/// executable and returns its report.
fn measure_in_child(options: &Options, engine: Engine) -> Result<Report> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let ops: Vec<&str> = options.ops.iter().map(|t| t.name()).collect();
    let sizes: Vec<String> = options.sizes.iter().map(ToString::to_string).collect();
    let mut command = Command::new(exe);
    command
        .env("SOFTNDK_ENGINE", engine.name())
        .arg("--json")
        .args(["--engine", engine.name()])
        .args(["--op", &ops.join(",")])
        .args(["--sizes", &sizes.join(",")])
        .args(["--queue-depth", &options.queue_depth.to_string()])
        .args(["--sge", &options.sge.to_string()])
        .args(["--notify", notify_name(options.armed)]);
    if let Some(n) = options.iters {
        command.args(["--iters", &n.to_string()]);
    } else {
        command.args(["--duration", &options.duration.to_string()]);
    }
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("starting the {} run: {e}", engine.name()))?;
    if !output.status.success() {
        return Err(format!(
            "the {} run failed ({})",
            engine.name(),
            output.status
        ));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("reading the {} run's report: {e}", engine.name()))
}

/// Runs the tests of `options` in this process, whose devices are in
/// `engine` mode.
fn measure(options: &Options, engine: Engine) -> Result<Report> {
    let config = Config {
        queue_depth: options.queue_depth as usize,
        sge: options.sge as usize,
        armed: options.armed,
        timing: options.iters.map_or(
            Timing::Duration(Duration::from_secs_f64(options.duration)),
            Timing::Iterations,
        ),
    };
    let depth = options.queue_depth;
    let shape = QpShape {
        receive_depth: u32::try_from(bench::receive_depth(config.queue_depth)).unwrap_or(depth),
        initiator_depth: depth,
        sge: options.sge,
    };
    let mode = engine.name();
    Progress::show(&format!("[{mode}] connecting 127.0.0.1 -> 127.0.0.2"));
    let link = Link::open([127, 0, 0, 1], [127, 0, 0, 2], shape)?;
    let info = link.a.adapter.info()?;
    if let Some(&largest) = options.sizes.iter().max()
        && largest > info.max_transfer_length as usize
    {
        return Err(format!(
            "size {largest} exceeds the adapter's MaxTransferLength ({})",
            info.max_transfer_length
        ));
    }
    let mut report = Report::default();
    for (test, op) in [
        (Test::Write, Op::Write),
        (Test::Read, Op::Read),
        (Test::Send, Op::Send),
    ] {
        if !options.ops.contains(&test) {
            continue;
        }
        for &size in &options.sizes {
            Progress::show(&format!(
                "[{mode}] {} {}",
                op.name(),
                crate::report::size(size as u64)
            ));
            let figure = bench::bandwidth(&link, op, size, &config)?;
            report
                .bandwidth
                .push(bandwidth_row(op, mode, size, &figure));
        }
    }
    if options.ops.contains(&Test::Latency) {
        Progress::show(&format!(
            "[{mode}] 64 B Send/Receive ping-pong, cache-line hand-off"
        ));
        let figure = bench::latency(&link, &config)?;
        report.latency.push(LatencyRow {
            timed: timed(Op::Send, mode, bench::SMALL, &figure.run),
            median_ns: figure.half.median,
            p99_ns: figure.half.p99,
            p999_ns: figure.half.p999,
            cacheline_iterations: figure.cacheline_run.iterations,
            cacheline_median_ns: figure.cacheline.median,
            cacheline_p99_ns: figure.cacheline.p99,
            cacheline_p999_ns: figure.cacheline.p999,
            vs_cacheline: figure.half.median / figure.cacheline.median.max(f64::MIN_POSITIVE),
        });
    }
    if options.ops.contains(&Test::Rate) {
        Progress::show(&format!(
            "[{mode}] 64 B Send rate, unbatched and DEFER chains"
        ));
        let figure = bench::rate(&link, &config)?;
        let unbatched = rate_figure(&figure.unbatched);
        let defer = rate_figure(&figure.deferred);
        report.rate.push(RateRow {
            engine: mode.into(),
            size: bench::SMALL as u64,
            queue_depth: config.queue_depth,
            defer_vs_unbatched: defer.msg_per_s / unbatched.msg_per_s,
            unbatched,
            defer,
        });
    }
    Progress::show(&format!("[{mode}] closing"));
    link.close()?;
    Ok(report)
}

fn bandwidth_row(op: Op, engine: &str, size: usize, figure: &bench::Bandwidth) -> BandwidthRow {
    let bytes = bench::float(figure.run.iterations) * bench::float(size as u64);
    let gb_per_s = bytes / figure.run.seconds / 1e9;
    let memcpy_bytes = bench::float(figure.memcpy.iterations) * bench::float(size as u64);
    let memcpy_gb_per_s = memcpy_bytes / figure.memcpy.seconds / 1e9;
    BandwidthRow {
        timed: timed(op, engine, size, &figure.run),
        seconds: figure.run.seconds,
        gb_per_s,
        msg_per_s: bench::float(figure.run.iterations) / figure.run.seconds,
        memcpy_gb_per_s,
        vs_memcpy: bench::median(&mut figure.ratios.clone()),
        vs_memcpy_rounds: figure.ratios.clone(),
    }
}

/// What `run` timed: `op` of `size` bytes on the `engine`.
fn timed(op: Op, engine: &str, size: usize, run: &bench::Run) -> Timed {
    Timed {
        op: format!("{op:?}").to_lowercase(),
        engine: engine.into(),
        size: size as u64,
        iterations: run.iterations,
        completions: run.completions,
        receive_completions: run.receive_completions,
    }
}

fn rate_figure(run: &bench::Run) -> RateFigure {
    RateFigure {
        iterations: run.iterations,
        completions: run.completions,
        receive_completions: run.receive_completions,
        seconds: run.seconds,
        msg_per_s: bench::float(run.iterations) / run.seconds,
    }
}

/// The `--notify` value.
fn notify_name(armed: bool) -> &'static str {
    if armed { "armed" } else { "poll" }
}

/// The progress line on stderr.
struct Progress;

impl Progress {
    const WIDTH: usize = 78;

    fn show(what: &str) {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\r{:<width$}",
            format!("softndk-perf: {what} ..."),
            width = Self::WIDTH
        );
        let _ = stderr.flush();
    }

    fn clear() {
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r{:width$}\r", "", width = Self::WIDTH);
        let _ = stderr.flush();
    }
}
