//! Command-line handling the tools share: one-line errors with clap's exit statuses,
//! and value parsers that refuse impossible values while the arguments are parsed.
//!
//! Exit statuses: 0 success; 1 a failure at run time (a file that cannot be read or is
//! malformed, a socket or device that cannot be opened), after writing out what was
//! received before it; 2 a usage error (clap's status: a bad option, number, endpoint
//! or interface).

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

use clap::builder::{RangedU64ValueParser, TypedValueParser};
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use spead::transport::Endpoint;

/// The exit status of a usage error (clap's).
pub const USAGE: i32 = cli_oneline::USAGE;
/// The exit status of a failure at run time.
pub const FAILURE: i32 = 1;

/// Parses the command line into `T` ([`cli_oneline::parse`]): `--help` and `--version`
/// print and exit 0; any other clap error prints as one line, `TOOL: error: ...`, and
/// exits 2.
pub fn parse<T: Parser>(tool: &str) -> T {
    cli_oneline::parse(tool)
}

/// A usage error found after parsing, as clap would report it (`kind` decides nothing
/// but the wording clap would use; the status is 2).
pub fn usage<T: CommandFactory>(tool: &str, kind: ErrorKind, message: &str) -> ! {
    cli_oneline::usage_exit(tool, &T::command().error(kind, message))
}

/// A run-time failure: `TOOL: message`, status 1.
pub fn fail(tool: &str, message: &str) -> ! {
    eprintln!("{tool}: {message}");
    std::process::exit(FAILURE)
}

/// An integer option limited to `range` (clap names the option and the range when a
/// value falls outside it).
pub fn ranged(range: RangeInclusive<u64>) -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::<usize>::new().range(range)
}

/// As [`ranged`], for `u64` options.
pub fn ranged_u64(range: RangeInclusive<u64>) -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::<u64>::new().range(range)
}

/// A probability: a number from 0 to 1.
///
/// # Errors
/// A message naming the value.
pub fn probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        Ok(_) => Err(format!("{s} is not a probability (0 to 1)")),
        Err(_) => Err(format!("{s} is not a number")),
    }
}

/// A finite number that is at least 0.
///
/// # Errors
/// A message naming the value.
pub fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(_) => Err(format!("{s} must be a finite number >= 0")),
        Err(_) => Err(format!("{s} is not a number")),
    }
}

/// A finite number above 0.
///
/// # Errors
/// A message naming the value.
pub fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(format!("{s} must be a finite number > 0")),
        Err(_) => Err(format!("{s} is not a number")),
    }
}

/// An interface given by its IPv4 address.
///
/// # Errors
/// A message naming the text.
pub fn interface(s: &str) -> Result<Ipv4Addr, String> {
    spead::verbs::parse_interface(s).map_err(|e| e.to_string())
}

/// `udp:HOST:PORT`, `tcp:HOST:PORT` or `file:PATH` (with a path).
///
/// # Errors
/// A message naming the text.
pub fn endpoint(s: &str) -> Result<Endpoint, String> {
    match s.parse::<Endpoint>().map_err(|e| e.to_string())? {
        Endpoint::File(p) if p.as_os_str().is_empty() => Err(format!("{s}: no path after file:")),
        e => Ok(e),
    }
}

/// Heap address bits: 40 or 48.
pub fn addr_bits() -> impl TypedValueParser<Value = u8> {
    clap::builder::PossibleValuesParser::new(["40", "48"]).map(|s| if s == "40" { 40 } else { 48 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_are_refused_with_the_reason() {
        assert_eq!(probability("0.25"), Ok(0.25));
        assert_eq!(
            probability("1.5").unwrap_err(),
            "1.5 is not a probability (0 to 1)"
        );
        assert_eq!(probability("x").unwrap_err(), "x is not a number");
        assert_eq!(non_negative("0"), Ok(0.0));
        assert_eq!(
            non_negative("-1").unwrap_err(),
            "-1 must be a finite number >= 0"
        );
        assert_eq!(
            non_negative("inf").unwrap_err(),
            "inf must be a finite number >= 0"
        );
        assert_eq!(positive("0").unwrap_err(), "0 must be a finite number > 0");
        assert_eq!(
            positive("NaN").unwrap_err(),
            "NaN must be a finite number > 0"
        );
        assert_eq!(interface("10.0.0.1"), Ok(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(endpoint("file:").unwrap_err(), "file:: no path after file:");
        assert_eq!(
            endpoint("udp:127.0.0.1:9").unwrap(),
            Endpoint::Udp("127.0.0.1:9".parse().unwrap())
        );
    }
}
