//! One-line usage errors for the workspace's command-line tools (`spead-send`,
//! `spead-recv`, `spead-capture`, `scenario`, `cargo xtask`): clap's message is several
//! lines (the error, the usage, a hint); a tool prints its first paragraph as one line,
//! `TOOL: error: ...`, and exits with clap's status for a usage error, 2.

use clap::error::ErrorKind;
use clap::Parser;

pub mod refusals;

/// The exit status of a usage error (clap's).
pub const USAGE: i32 = 2;

/// Parses the command line into `T`: `--help` and `--version` print and exit 0; a
/// command with subcommands called without one names them; any other error prints as
/// one line, `TOOL: error: ...`, and exits 2.
pub fn parse<T: Parser>(tool: &str) -> T {
    match T::try_parse() {
        Ok(args) => args,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let command = T::command();
            let names: Vec<&str> = command
                .get_subcommands()
                .map(clap::Command::get_name)
                .filter(|n| *n != "help")
                .collect();
            eprintln!(
                "{tool}: error: no command given; the commands: {} ({} --help)",
                names.join(", "),
                command.get_name()
            );
            std::process::exit(USAGE)
        }
        Err(e) => usage_exit(tool, &e),
    }
}

/// Prints `e` as one line, `TOOL: error: ...`, and exits 2.
pub fn usage_exit(tool: &str, e: &clap::Error) -> ! {
    eprintln!("{tool}: {}", one_line(e));
    std::process::exit(USAGE)
}

/// clap's first paragraph of `e` (the error and, for some, the values it takes) as one
/// line, starting `error: `.
#[must_use]
pub fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    first.join(" ")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Debug, Parser)]
    #[command(name = "tool")]
    struct Args {
        /// A number.
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
        n: u8,
    }

    #[test]
    fn a_usage_error_is_one_line() {
        let e = Args::try_parse_from(["tool", "--n", "0"]).unwrap_err();
        assert_eq!(
            super::one_line(&e),
            "error: invalid value '0' for '--n <N>': 0 is not in 1..=255"
        );
    }
}
