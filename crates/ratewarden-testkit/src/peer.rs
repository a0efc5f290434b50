//! A TCP peer that is not a working Redis: one that accepts and never
//! answers, or answers every connection with fixed bytes (another
//! protocol), for the tests of what a client reports about it.

#![allow(clippy::expect_used)] // test harness: a failure is a failed test

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A listener on a free loopback port, served by a thread of its own
/// until the process ends; every connection is held open.
#[derive(Debug, Clone)]
pub struct FakePeer {
    port: u16,
    seen: Arc<(Mutex<usize>, Condvar)>,
}

impl FakePeer {
    /// Accepts connections, reads what they send and never answers.
    pub fn silent() -> FakePeer {
        FakePeer::start(None)
    }

    /// Answers each connection with `reply` once it has sent something
    /// (e.g. an HTTP status line: a peer that speaks another protocol),
    /// then keeps reading.
    pub fn replying(reply: &'static [u8]) -> FakePeer {
        FakePeer::start(Some(reply))
    }

    fn start(reply: Option<&'static [u8]>) -> FakePeer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = listener.local_addr().expect("a local address").port();
        let seen = Arc::new((Mutex::new(0), Condvar::new()));
        let counter = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                {
                    let (count, changed) = &*counter;
                    *count.lock().expect("the count") += 1;
                    changed.notify_all();
                }
                std::thread::spawn(move || hold(stream, reply));
            }
        });
        FakePeer { port, seen }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.seen.0.lock().expect("the count")
    }

    /// Waits up to `limit` for a first connection; whether one came.
    pub fn wait_for_connection(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let (count, changed) = &*self.seen;
        let mut n = count.lock().expect("the count");
        while *n == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            n = changed.wait_timeout(n, left).expect("the count").0;
        }
        true
    }
}

/// Reads what `stream` sends until it closes, answering once with `reply`.
fn hold(mut stream: TcpStream, mut reply: Option<&'static [u8]>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            return;
        }
        if let Some(bytes) = reply.take() {
            let _ = stream.write_all(bytes);
        }
    }
}
