//! Resident bytes per idle key in the memory store at one million keys,
//! for each algorithm: the process's resident set (VmRSS) before and after
//! one decision for each of 1,000,000 keys, divided by the number of keys.
//! The keys themselves are built before the first reading, so only the
//! store's own memory is counted.
//!
//! `cargo bench -p ratewarden-bench --bench memory_per_key`

use ratewarden_bench::{keys, open_policy};
use ratewarden_core::{Algorithm, Attempt, MemoryStore, Timestamp};

const KEYS: usize = 1_000_000;

/// VmRSS of this process, in bytes (Linux).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Each algorithm is measured in a fresh process (this program run again
/// with `RW_MEASURE=<algorithm>`): memory freed by one store is not given
/// back to the OS and would hide the next one's.
fn main() {
    if let Ok(name) = std::env::var("RW_MEASURE") {
        match name.parse::<Algorithm>() {
            Ok(algorithm) => measure(algorithm),
            Err(e) => eprintln!("{e}"),
        }
        return;
    }
    println!("resident bytes per idle key, {KEYS} keys of 8-14 bytes, memory store:");
    let Ok(me) = std::env::current_exe() else {
        eprintln!("cannot find this program to run it again");
        return;
    };
    for algorithm in Algorithm::ALL {
        let status = std::process::Command::new(&me)
            .env("RW_MEASURE", algorithm.as_str())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("measuring {algorithm} failed");
        }
    }
}

fn measure(algorithm: Algorithm) {
    let keys = keys(KEYS);
    let now = Timestamp::from_unix_secs(1_767_225_600);
    let Some(before) = resident_bytes() else {
        println!("  (no /proc/self/status: cannot measure)");
        return;
    };
    let store = MemoryStore::new();
    let policy = open_policy(algorithm);
    for key in &keys {
        store
            .acquire_now(&policy, key, Attempt::one(now))
            .expect("room for every key");
    }
    let after = resident_bytes().unwrap_or(before);
    assert_eq!(store.len(), KEYS);
    println!(
        "  {:<15} {:>6.1} bytes/key",
        algorithm.as_str(),
        after.saturating_sub(before) as f64 / KEYS as f64
    );
}
