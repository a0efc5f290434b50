//! `ratewarden check-config PATH`: validates a configuration file as
//! `serve --config PATH` would load it.

use std::io::Write;
use std::process::ExitCode;

use super::args::CheckConfigArgs;

/// Prints one line per policy and exits 0, or every error (one per line,
/// `FILE:LINE:COLUMN: key: message`) on standard error and exits 2.
pub fn run(args: &CheckConfigArgs) -> ExitCode {
    match ratewarden_config::check_config(&args.path) {
        Ok(lines) => {
            let mut out = std::io::stdout().lock();
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            let mut err = std::io::stderr().lock();
            for e in errors.iter() {
                let _ = writeln!(err, "{e}");
            }
            // A rules directory's files are refused one by one.
            let outcome = if args.path.is_dir() {
                "serve refuses each file with errors and loads the others"
            } else {
                "nothing is loaded from a file with errors"
            };
            let _ = writeln!(
                err,
                "{}: {} error(s); {outcome}",
                args.path.display(),
                errors.iter().count()
            );
            ExitCode::from(2)
        }
    }
}
