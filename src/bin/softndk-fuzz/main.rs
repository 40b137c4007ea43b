//! `softndk-fuzz`: the call-sequence fuzzer's soak run (module `fuzz`,
//! `docs/debugging.md`, "Fuzzer"). Runs the fuzzer over the host-mode C ABI
//! for `--calls` calls from `--seed`, prints calls per second and the
//! counts, and exits non-zero with the findings if the oracle objected.
//!
//! ```sh
//! cargo run --release --bin softndk-fuzz -- --seed 7 --calls 1000000 --threads 4
//! cargo run --release --bin softndk-fuzz -- --seed 7 --calls 5000 --threads 1 --trace  # replay
//! ```

#![cfg_attr(
    not(target_os = "windows"),
    allow(
        clippy::cast_precision_loss,
        clippy::too_many_lines,
        reason = "calls per second, printed; one argument loop"
    )
)]

#[cfg(not(target_os = "windows"))]
mod fuzz;

#[cfg(not(target_os = "windows"))]
const USAGE: &str = "usage: softndk-fuzz [--seed S] [--calls N] [--threads T] [--adapters A]
                    [--links L] [--iwarp] [--deferred] [--seeds K] [--faults PLAN] [--trace]

  --seed S       first seed (default 1); --seeds K runs seeds S..S+K-1 (default 1)
  --calls N      provider calls per seed, over all threads (default 1000000)
  --threads T    threads, each with its own links (default 4; 1 replays a seed exactly)
  --adapters A   adapters on 127.0.40.1.. (default 3)
  --links L      links each thread keeps open (default 2)
  --iwarp        connections over iWARP on TCP (127.0.41.x) instead of the fabric
  --deferred     the deferred engine (SOFTNDK_ENGINE=deferred) instead of inline
  --faults PLAN  fault injection plan (SOFTNDK_FAULTS' text form), installed for each seed
  --trace        print every call and its answer on standard error";

#[cfg(not(target_os = "windows"))]
fn main() -> std::process::ExitCode {
    use std::process::ExitCode;
    let mut config = fuzz::Config {
        calls: 1_000_000,
        threads: 4,
        adapters: 3,
        ..fuzz::Config::default()
    };
    let mut seeds = 1_u64;
    let mut deferred = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let parsed: Result<(), String> = (|| {
            let number = |text: String| {
                text.replace('_', "")
                    .parse::<u64>()
                    .map_err(|e| format!("{arg}: {e}"))
            };
            match arg.as_str() {
                "--seed" => config.seed = number(value("--seed")?)?,
                "--seeds" => seeds = number(value("--seeds")?)?.max(1),
                "--calls" => config.calls = number(value("--calls")?)?,
                "--threads" => {
                    config.threads = usize::try_from(number(value("--threads")?)?).unwrap_or(1);
                }
                "--adapters" => {
                    config.adapters = usize::try_from(number(value("--adapters")?)?).unwrap_or(1);
                }
                "--links" => {
                    config.links = usize::try_from(number(value("--links")?)?).unwrap_or(1);
                }
                "--iwarp" => config.iwarp = true,
                "--deferred" => deferred = true,
                "--faults" => config.faults = Some(value("--faults")?),
                "--trace" => config.trace = true,
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other}")),
            }
            Ok(())
        })();
        if let Err(message) = parsed {
            if !message.is_empty() {
                eprintln!("softndk-fuzz: {message}");
            }
            eprintln!("{USAGE}");
            return if message.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    }
    if config.iwarp {
        config.net = 41;
    }
    if deferred {
        // SAFETY: no other thread runs yet.
        unsafe { std::env::set_var("SOFTNDK_ENGINE", "deferred") };
    }
    println!(
        "softndk-fuzz: seeds {}..{}, {} calls each, {} thread(s), {} adapter(s), {} link(s) per thread, {}, {} engine{}",
        config.seed,
        config.seed + seeds - 1,
        config.calls,
        config.threads,
        config.adapters,
        config.links,
        if config.iwarp {
            "iWARP on TCP"
        } else {
            "fabric"
        },
        if deferred { "deferred" } else { "inline" },
        config
            .faults
            .as_ref()
            .map_or(String::new(), |p| format!(", faults {p:?}")),
    );
    let start = std::time::Instant::now();
    let mut total = fuzz::Outcome::default();
    let first = config.seed;
    for seed in first..first + seeds {
        config.seed = seed;
        let seed_start = std::time::Instant::now();
        let outcome = fuzz::run(&config);
        let seconds = seed_start.elapsed().as_secs_f64();
        println!(
            "seed {seed}: {} calls in {seconds:.1} s ({:.0} calls/s); posts {} accepted, {} refused; entries {} ok, {} flushed, {} failed, {} judged strictly, {} requests' bytes checked; links {} ({} sides on an SRQ, {} SRQ notifications, {} shared SRQs, {} receives taken across one; {} pools, {} sides on one, {} receives taken by another link's QP; {} pool CQs, {} sides on one, {} entries there polled outside their QP's link); races {}; sides with a receive CQ {}; links sharing their CQs {} ({} entries polled through the other side); fast registrations {} ok, {} requests through them or the privileged token, {} checked SGEs or RDMA targets of strict links through them, {} rule-breaking requests failed; shared endpoints {} ({} links connected from one, {} closes pended until their last connector closed, {} second connections to one destination refused); closes {}; notifications {}; CQ errors excusing missing entries {}; findings {}",
            outcome.calls,
            outcome.calls as f64 / seconds.max(1e-9),
            outcome.posted,
            outcome.refused,
            outcome.succeeded,
            outcome.flushed,
            outcome.failed,
            outcome.judged,
            outcome.data_checked,
            outcome.links,
            outcome.srq_sides,
            outcome.srq_notifications,
            outcome.shared_srqs,
            outcome.srq_crossed,
            outcome.pools,
            outcome.pooled_sides,
            outcome.pool_crossed,
            outcome.pool_cqs,
            outcome.pool_cq_sides,
            outcome.pool_cq_crossed,
            outcome.races,
            outcome.receive_cqs,
            outcome.shared_cqs,
            outcome.shared_cq_entries,
            outcome.fast_registered,
            outcome.fast_named,
            outcome.sources_remapped,
            outcome.doomed_failed,
            outcome.endpoints,
            outcome.endpoint_links,
            outcome.endpoint_closes_pended,
            outcome.endpoint_tuples_refused,
            outcome.closed,
            outcome.notifications,
            outcome.cq_errors,
            outcome.findings.len()
        );
        for finding in &outcome.findings {
            println!("  FINDING {finding}");
        }
        total.calls += outcome.calls;
        total.findings.extend(outcome.findings);
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "total: {} calls in {seconds:.1} s ({:.0} calls/s), {} finding(s)",
        total.calls,
        total.calls as f64 / seconds.max(1e-9),
        total.findings.len()
    );
    if total.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Host mode, which the fuzzer drives, exists only on non-Windows hosts.
#[cfg(target_os = "windows")]
fn main() {
    eprintln!("softndk-fuzz runs SoftNDK in host mode, which is built for non-Windows hosts only");
    std::process::exit(1);
}
