//! The command line: one file per subcommand (`serve` lives in
//! [`crate::startup`] and [`crate::reload`]; `replay` in the
//! `ratewarden-replay` crate, given its flags' settings and the store's
//! composition root, [`crate::startup::open_store`]).
//!
//! - [`args`]: clap's flags and subcommands.
//! - [`check_config`]: `ratewarden check-config PATH`.
//!
//! [`parse`] reads the command line; its errors name the environment
//! variable, not the flag, when the offending value came from one.

pub mod args;
pub mod check_config;

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};

pub use args::{CheckConfigArgs, Cli, Command, ReplayArgs, ServeArgs};

/// Parses this process's command line and environment into a [`Cli`];
/// on an error prints it and exits with status 2 (0 for `--help` and
/// `--version`), as clap's `Cli::parse` does, but an invalid value taken
/// from a `RATEWARDEN_*` variable is reported as the variable's
/// ([`name_the_variable`]).
pub fn parse() -> Cli {
    let argv: Vec<OsString> = std::env::args_os().collect();
    match try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    }
}

/// [`parse`] of `argv` (the program name first), returning the error.
///
/// # Errors
/// clap's error, passed through [`name_the_variable`].
pub fn try_parse_from(argv: &[OsString]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(argv).map_err(|e| name_the_variable(e, argv))
}

/// When `error` is an invalid value of an argument declared with
/// `env = …` and the value came from that variable (the flag was not on
/// `argv`), the same error reworded:
///
/// ```text
/// error: invalid value 'bad' in the environment variable RATEWARDEN_LISTEN (for --listen): …
/// ```
///
/// Any other error comes back unchanged. Covers every env-backed argument
/// of every subcommand: the argument is found from the error's context
/// (which clap fills for every invalid value), and where the value came
/// from by parsing `argv` again with that argument's variable ignored —
/// if the same error comes back, the flag gave it.
pub fn name_the_variable(error: clap::Error, argv: &[OsString]) -> clap::Error {
    if !matches!(
        error.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return error;
    }
    let (Some(ContextValue::String(shown_arg)), Some(ContextValue::String(value))) = (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidValue),
    ) else {
        return error;
    };
    let mut cli = Cli::command();
    cli.build();
    // Several subcommands may show an argument alike (`--store …`): the
    // one whose variable gave the value is the one without which the
    // error goes away.
    let Some((arg, variable)) = candidates(&cli, shown_arg)
        .find(|(subcommand, arg, _)| {
            let id = arg.get_id().clone();
            let ignore = |a: clap::Arg| a.env(None::<&'static str>);
            let without_variable = match subcommand {
                Some(name) => Cli::command().mut_subcommand(name, |s| s.mut_arg(&id, ignore)),
                None => Cli::command().mut_arg(&id, ignore),
            };
            match without_variable.try_get_matches_from(argv) {
                Err(again) => {
                    again.kind() != error.kind()
                        || again.get(ContextKind::InvalidArg) != error.get(ContextKind::InvalidArg)
                        || again.get(ContextKind::InvalidValue)
                            != error.get(ContextKind::InvalidValue)
                }
                Ok(_) => true,
            }
        })
        .map(|(_, arg, variable)| (arg, variable))
    else {
        // The flag is on the command line: clap never read a variable.
        return error;
    };
    let flag = arg
        .get_long()
        .map_or_else(|| shown_arg.clone(), |long| format!("--{long}"));
    // A list variable (`a,b,c`) is shown whole besides the bad item; other
    // values are shown as clap's context holds them (a store URL redacted).
    let whole = arg
        .get_value_delimiter()
        .and_then(|_| std::env::var_os(&variable))
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|whole| whole != value)
        .map_or_else(String::new, |whole| format!("='{whole}'"));
    let reason = reason(&error);
    let message = format!(
        "invalid value '{value}' in the environment variable {variable}{whole} (for {flag}){reason}"
    );
    // The same tail as clap's own invalid-value errors.
    clap::Error::raw(
        error.kind(),
        format!("{message}\n\nFor more information, try '--help'.\n"),
    )
    .with_cmd(&cli)
}

/// The arguments that clap shows as `shown` (`--listen <ADDR>`) in its
/// errors and whose variable is set, with their subcommand (`None`: the
/// top level) and variable.
fn candidates<'c>(
    cli: &'c clap::Command,
    shown: &'c str,
) -> impl Iterator<Item = (Option<String>, &'c clap::Arg, String)> + 'c {
    let top = cli.get_arguments().map(|a| (None, a));
    let nested = cli.get_subcommands().flat_map(|sub| {
        sub.get_arguments()
            .map(move |a| (Some(sub.get_name().to_owned()), a))
    });
    top.chain(nested).filter_map(move |(subcommand, arg)| {
        let variable = arg.get_env()?.to_string_lossy().into_owned();
        (arg.to_string() == shown && std::env::var_os(&variable).is_some())
            .then_some((subcommand, arg, variable))
    })
}

/// `: why`, from the error's source or its list of possible values.
fn reason(error: &clap::Error) -> String {
    if let Some(source) = std::error::Error::source(error) {
        return format!(": {source}");
    }
    let Some(ContextValue::Strings(valid)) = error.get(ContextKind::ValidValue) else {
        return String::new();
    };
    let suggestion = match error.get(ContextKind::SuggestedValue) {
        Some(ContextValue::String(s)) => format!(" (did you mean '{s}'?)"),
        _ => String::new(),
    };
    format!(": possible values: {}{suggestion}", valid.join(", "))
}
