//! Command-line helpers of the host-mode examples (`rping`, `perftest`),
//! which include this file with `#[path]`.

/// The value after `flag`, parsed as a number.
pub fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Result<T, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a value"))?;
    value
        .parse()
        .map_err(|_| format!("{flag}: bad number {value:?}"))
}

/// An IPv4 address in dotted form.
pub fn ipv4(text: &str) -> Result<[u8; 4], String> {
    text.parse::<std::net::Ipv4Addr>()
        .map(|ip| ip.octets())
        .map_err(|e| format!("bad IPv4 address {text:?}: {e}"))
}

/// A program's `main`: its arguments by `parse` (a failure is printed on
/// stderr, exit status 2), then `body`, whose outcome is printed as the last
/// line, `<tag>-RESULT <name> PASS|FAIL <detail>` (exit status 0 only on
/// PASS).
pub fn main_with<A>(
    tag: &str,
    parse: fn() -> Result<A, String>,
    body: fn(&A) -> (&'static str, Result<String, String>),
) -> std::process::ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(why) => {
            eprintln!("{why}");
            return std::process::ExitCode::from(2);
        }
    };
    let (name, outcome) = body(&args);
    match outcome {
        Ok(detail) => {
            println!("{tag}-RESULT {name} PASS {detail}");
            std::process::ExitCode::SUCCESS
        }
        Err(why) => {
            println!("{tag}-RESULT {name} FAIL {why}");
            std::process::ExitCode::FAILURE
        }
    }
}
