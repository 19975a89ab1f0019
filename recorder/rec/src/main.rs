//! rec: the board-side recorder of crossprof. Launches or attaches to a program, samples it with
//! perf events, and writes raw addresses, memory maps and build-ids into a power-loss-safe
//! file for `hostside` to analyse on another machine. Never symbolizes: boards have no room for
//! debug info.

mod check;
mod cli;
mod clock;
mod data_maps;
mod disk;
mod drain;
mod error;
mod heap;
mod identity;
mod jit;
mod kernel_symbols;
mod launch;
mod perf;
mod procfs;
mod ptrace;
mod segments;
mod session;
mod signals;
mod snapshot;
mod system_wide;

use std::io::Write;
use std::process::ExitCode;

use cli::Parsed;

fn main() -> ExitCode {
    let code = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Print(text)) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            0
        }
        Ok(Parsed::Check(out, config)) => {
            match check::report(&mut std::io::stdout().lock(), &out, config.as_deref()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("rec: --check: {e}");
                    2
                }
            }
        }
        Ok(Parsed::Snapshot(opts)) => match snapshot::run(&opts) {
            Ok(status) => status,
            Err(e) => {
                eprintln!("rec: {e}");
                2
            }
        },
        Ok(Parsed::Run(opts)) => match session::run(&opts) {
            Ok(status) => status,
            Err(e) => {
                eprintln!("rec: {e}");
                2
            }
        },
        Err(msg) => {
            eprintln!("rec: {msg}");
            2
        }
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
