//! `strata-server [config-file] [--directive value ...]`: the same as `strata serve`.
//!
//! Layer: connection and server (the top).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match strata_server::serve_main(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata-server: {e}");
            ExitCode::from(1)
        }
    }
}
