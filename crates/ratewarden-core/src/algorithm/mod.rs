//! The algorithms as pure functions of (state, quota, attempt) to
//! (decision, next state), exactly as docs/semantics.md §2 defines them: integer
//! nanoseconds, no floating point, saturating arithmetic. No IO; stores
//! call these inside their atomic step.

pub mod fixed_window;
pub mod gcra;
pub mod sliding_log;
pub mod sliding_window;
