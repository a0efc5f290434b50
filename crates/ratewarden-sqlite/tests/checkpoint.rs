//! WAL checkpoints run off the writer (`src/checkpoint.rs`): a thread of
//! the store's own copies the WAL back into the database file, and the
//! WAL stays bounded under sustained writes.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{acquire, at, key, open, policy, temp_db};
use ratewarden_core::{Algorithm, Store};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn wal(path: &Path) -> std::path::PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    wal.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_checkpoint_copies_the_wal_before_the_writer_would() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    // In WAL mode commits go to the WAL only, and the writer checkpoints
    // itself only at 50,000 frames by default, far more than the 300
    // commits below write: whenever the database file grows, it is a
    // background checkpoint that copied the WAL into it, however soon or
    // late that thread runs.
    let before = size(&path);
    let p = policy(Algorithm::FixedWindow, 1_000_000, 60);
    for i in 0..300 {
        let k = key([format!("client-{i}")]);
        assert!(acquire(&store, &p, &k, at(1)).await.allowed());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while size(&path) <= before {
        assert!(
            Instant::now() < deadline,
            "the database file did not grow from {before} bytes: no background checkpoint"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    store.close().await;
}

/// How many times the WAL started over since its file was created: the
/// checkpoint sequence number of its header (bytes 12..16, big-endian),
/// which SQLite increments each time a writer restarts the WAL from its
/// beginning and writes into the header it then rewrites.
fn wal_restarts(path: &Path) -> u32 {
    use std::io::Read;
    let mut header = [0u8; 32];
    std::fs::File::open(wal(path))
        .and_then(|mut f| f.read_exact(&mut header))
        .expect("a WAL header");
    u32::from_be_bytes([header[12], header[13], header[14], header[15]])
}

/// The WAL's bytes for `frames` frames of 4 KiB pages: its 32-byte
/// header, then per frame a 24-byte header and the page.
fn wal_bytes_of(frames: u64) -> u64 {
    32 + frames * (24 + 4096)
}

/// Threads that keep every core busy until dropped, so that the store's
/// threads, the background checkpointer among them, get the CPU only now
/// and then, as beside a compiler or a CPU hog.
struct Hog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn start() -> Hog {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..2 * cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Hog { stop, threads }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_never_grows_past_twice_its_limit_even_with_the_checkpointer_starved() {
    let (_dir, path) = temp_db();
    // 2,000 pages (8 MB) instead of the default 50,000 (200 MB), so that
    // the run below passes the limit many times over.
    const LIMIT: u32 = 2_000;
    let options = SqliteOptions {
        wal_autocheckpoint: LIMIT,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).unwrap();
    let p = policy(Algorithm::FixedWindow, 1_000_000, 60);
    let hog = Hog::start();
    // 30,000 commits, each dirtying at least two pages (its counter's and
    // its audit row's): a WAL that never started over would hold 60,000
    // frames of 4 KiB and more (over 240 MB).
    for i in 0..30_000 {
        let k = key([format!("client-{}", i % 10_000)]);
        assert!(acquire(&store, &p, &k, at(1)).await.allowed());
    }
    drop(hog);
    // The bound is the code's, not the machine's: past twice the limit
    // the writer waits for the background pass and checkpoints the WAL
    // itself, so it grows past that by one transaction at most (one
    // decision here: a few pages; 64 frames allow for B-tree splits).
    let restarts = wal_restarts(&path);
    let wal_bytes = size(&wal(&path));
    let bound = wal_bytes_of(2 * u64::from(LIMIT) + 64);
    println!("the WAL started over {restarts} times and grew to {wal_bytes} bytes (bound {bound})");
    assert!(
        restarts > 0,
        "the WAL never started over ({wal_bytes} bytes): it is not bounded"
    );
    assert!(
        wal_bytes <= bound,
        "the WAL grew to {wal_bytes} bytes (started over {restarts} times): \
         past twice its 2,000-page limit ({bound} bytes)"
    );
    store.close().await;
    assert_eq!(size(&wal(&path)), 0, "closing truncates the WAL");
}
