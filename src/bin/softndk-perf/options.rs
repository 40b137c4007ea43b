//! The command line, with clap's builder API.
//!
//! Not clap's derive: the code `#[derive(Parser)]` and `#[derive(ValueEnum)]`
//! generate carries `#[allow(clippy::restriction)]`, which the compiler
//! refuses (E0453) under this package's `forbid` of the restriction lints
//! `undocumented_unsafe_blocks` and `multiple_unsafe_ops_per_block`, so
//! `cargo clippy` could not build the tool (see `docs/performance.md`).

use std::path::PathBuf;

use clap::builder::RangedU64ValueParser;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// The tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// RDMA Write bandwidth at each size.
    Write,
    /// RDMA Read bandwidth at each size.
    Read,
    /// Send bandwidth at each size.
    Send,
    /// 64 B Send/Receive ping-pong.
    Latency,
    /// 64 B Send message rate, unbatched and with DEFER chains.
    Rate,
}

impl Test {
    const ALL: [(&'static str, Self); 5] = [
        ("write", Self::Write),
        ("read", Self::Read),
        ("send", Self::Send),
        ("latency", Self::Latency),
        ("rate", Self::Rate),
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, test)| *test == self)
            .map_or("?", |(name, _)| name)
    }
}

/// An engine mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Requests run in the posting thread.
    Inline,
    /// Requests run on a worker thread.
    Deferred,
}

impl Engine {
    /// The name on the command line, in the report and in `SOFTNDK_ENGINE`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Deferred => "deferred",
        }
    }

    /// The mode this process's devices get: what `SoftNdkOpenAdapter`
    /// reads from `SOFTNDK_ENGINE`.
    pub fn of_environment() -> Self {
        match std::env::var_os("SOFTNDK_ENGINE") {
            Some(value) if value == "deferred" => Self::Deferred,
            _ => Self::Inline,
        }
    }
}

/// The parsed command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// Tests to run.
    pub ops: Vec<Test>,
    /// Message sizes of the bandwidth tests.
    pub sizes: Vec<usize>,
    /// Initiator requests in flight at most (and the DEFER chain length).
    pub queue_depth: u32,
    /// Measured iterations per figure, if fixed.
    pub iters: Option<u64>,
    /// Seconds per figure otherwise.
    pub duration: f64,
    /// SGEs per initiator request.
    pub sge: u32,
    /// Engine modes to measure, in order.
    pub engines: Vec<Engine>,
    /// Sleep on an armed CQ rather than spin.
    pub armed: bool,
    /// JSON on stdout instead of the table.
    pub json: bool,
    /// The SVG file to draw, if any.
    pub plot: Option<PathBuf>,
}

/// The largest message (the adapter's MaxTransferLength).
pub const MAX_SIZE: usize = 64 << 20;

/// Parses `64`, `4K`, `64KiB`, `1M`, `8MiB`.
fn parse_size(text: &str) -> Result<usize, String> {
    let upper = text.trim().to_ascii_uppercase();
    let digits = upper.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = match &upper[digits.len()..] {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        other => return Err(format!("unknown size unit {other:?} (use K or M)")),
    };
    let number: usize = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size"))?;
    number
        .checked_mul(unit)
        .filter(|&b| (1..=MAX_SIZE).contains(&b))
        .ok_or_else(|| format!("sizes go from 1 byte to {} MiB", MAX_SIZE >> 20))
}

/// Parses a positive number of seconds.
fn parse_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0 {
        Ok(seconds)
    } else {
        Err("the duration is a number of seconds above 0 and at most 3600".to_owned())
    }
}

fn command() -> Command {
    Command::new("softndk-perf")
        .version(env!("CARGO_PKG_VERSION"))
        .about(
            "SoftNDK loopback performance suite, through the NDK C ABI between two host-mode \
             adapters (127.0.0.1 and 127.0.0.2): RDMA Write / Read / Send bandwidth beside \
             memcpy, the 64 B Send/Receive ping-pong beside a cache-line hand-off, and the \
             64 B Send rate with and without DEFER chains.",
        )
        .arg(
            Arg::new("op")
                .long("op")
                .value_name("TEST")
                .value_delimiter(',')
                .value_parser(Test::ALL.map(|(name, _)| name))
                .default_values(Test::ALL.map(|(name, _)| name))
                .help("Tests to run, comma-separated"),
        )
        .arg(
            Arg::new("sizes")
                .long("sizes")
                .value_name("SIZES")
                .value_delimiter(',')
                .value_parser(parse_size)
                .default_values(["64", "4K", "64K", "1M", "8M"])
                .help("Message sizes of the bandwidth tests; K and M are binary (4K = 4096)"),
        )
        .arg(
            Arg::new("queue-depth")
                .short('q')
                .long("queue-depth")
                .value_name("N")
                .value_parser(RangedU64ValueParser::<u32>::new().range(1..=4096))
                .default_value("64")
                .help("Initiator requests in flight at most (and the DEFER chain length)"),
        )
        .arg(
            Arg::new("iters")
                .short('n')
                .long("iters")
                .value_name("N")
                .value_parser(RangedU64ValueParser::<u64>::new().range(1..=20_000_000))
                .conflicts_with("duration")
                .help("Measured iterations per figure, after a warm-up of a tenth of them"),
        )
        .arg(
            Arg::new("duration")
                .short('d')
                .long("duration")
                .value_name("SECONDS")
                .value_parser(parse_seconds)
                .default_value("0.2")
                .help("Seconds per figure; warm-up runs size each run to about this long"),
        )
        .arg(
            Arg::new("sge")
                .long("sge")
                .value_name("N")
                .value_parser(RangedU64ValueParser::<u32>::new().range(1..=16))
                .default_value("1")
                .help("SGEs per initiator request (each message is split evenly)"),
        )
        .arg(
            Arg::new("engine")
                .long("engine")
                .value_name("MODE")
                .value_parser(["inline", "deferred", "both"])
                .default_value("both")
                .help(
                    "Engine mode(s) to measure; each runs in its own process, \
                     with SOFTNDK_ENGINE set",
                ),
        )
        .arg(
            Arg::new("notify")
                .long("notify")
                .value_name("HOW")
                .value_parser(["poll", "armed"])
                .default_value("poll")
                .help(
                    "Completions by spinning on GetCqResults (poll), or by sleeping until \
                     the CQ notification callback after ArmCq (armed)",
                ),
        )
        .arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::SetTrue)
                .help("Print the report as JSON on stdout instead of the table"),
        )
        .arg(
            Arg::new("plot")
                .long("plot")
                .value_name("FILE.svg")
                .value_parser(clap::value_parser!(PathBuf))
                .help("Also draw bandwidth against size, beside memcpy, into this SVG file"),
        )
}

/// A value clap has checked and defaulted.
fn one<T: Clone + Send + Sync + 'static>(matches: &ArgMatches, id: &str) -> T {
    matches
        .get_one::<T>(id)
        .cloned()
        .unwrap_or_else(|| unreachable!("--{id} has a default"))
}

/// Parses the command line; a bad one exits with the error and the usage
/// (status 2), `--help` and `--version` print and exit 0.
pub fn parse() -> Options {
    let mut command = command();
    let matches = match command.try_get_matches_from_mut(std::env::args_os()) {
        Ok(matches) => matches,
        Err(error) if !error.use_stderr() => error.exit(),
        Err(error) => {
            let usage = command.render_usage();
            let _ = error.print();
            if !error.to_string().contains("Usage:") {
                eprintln!("\n{usage}");
            }
            std::process::exit(2);
        }
    };
    let mut ops: Vec<Test> = matches
        .get_many::<String>("op")
        .into_iter()
        .flatten()
        .filter_map(|name| Test::ALL.iter().find(|(n, _)| n == name).map(|&(_, t)| t))
        .collect();
    ops.dedup();
    let mut sizes: Vec<usize> = matches
        .get_many::<usize>("sizes")
        .into_iter()
        .flatten()
        .copied()
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let engines = match one::<String>(&matches, "engine").as_str() {
        "inline" => vec![Engine::Inline],
        "deferred" => vec![Engine::Deferred],
        _ => vec![Engine::Inline, Engine::Deferred],
    };
    Options {
        ops,
        sizes,
        queue_depth: one(&matches, "queue-depth"),
        iters: matches.get_one::<u64>("iters").copied(),
        duration: one(&matches, "duration"),
        sge: one(&matches, "sge"),
        engines,
        armed: one::<String>(&matches, "notify") == "armed",
        json: matches.get_flag("json"),
        plot: matches.get_one::<PathBuf>("plot").cloned(),
    }
}
