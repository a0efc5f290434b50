//! The command line: one file per subcommand (`serve` lives in
//! [`crate::startup`] and [`crate::reload`]).
//!
//! - [`args`]: clap's flags and subcommands.
//! - [`replay`]: `ratewarden replay`, a trace of requests through a store.
//! - [`check_config`]: `ratewarden check-config PATH`.

pub mod args;
pub mod check_config;
pub mod replay;

pub use args::{CheckConfigArgs, Cli, Command, ReplayArgs, ReplaySettings, ServeArgs};
