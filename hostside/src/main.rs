//! The `hostside` binary: parse arguments, run one command, print errors in one place.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = hostside::cli::Cli::parse();
    match hostside::commands::run(cli) {
        Ok(hostside::commands::Outcome::Success) => ExitCode::SUCCESS,
        Ok(hostside::commands::Outcome::LeakLimitExceeded) => ExitCode::from(1),
        Err(e) => {
            // A closed pipe (`hostside report | head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("hostside: {e:#}");
            ExitCode::from(2)
        }
    }
}
