//! A `redis-server` of the tests' own on a free port, killed on drop:
//! tests never touch a Redis the machine runs (the one on 6379).

#![allow(clippy::expect_used)] // test harness: a failure is a failed test

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to run when `redis-server` is missing.
pub const INSTALL: &str = "apt-get install -y redis-server";

/// `--store-timeout-ms` for a ratewarden that tests run on such a server,
/// in milliseconds: 10 s instead of the default 100 ms. Tests assert exact
/// answers, and with 100 ms a call slowed by a busy machine fails open (an
/// uncounted 200, one more request through than the limit) and fails the
/// test at random.
pub const TEST_STORE_TIMEOUT_MS: &str = "10000";

/// [`TEST_STORE_TIMEOUT_MS`] as a `Duration`, for tests that configure a
/// Redis store themselves (`RedisConfig::with_timeout`).
///
/// # Panics
/// Never: the constant is a whole number of milliseconds.
pub fn test_store_timeout() -> Duration {
    Duration::from_millis(
        TEST_STORE_TIMEOUT_MS
            .parse()
            .expect("TEST_STORE_TIMEOUT_MS is a whole number of milliseconds"),
    )
}

/// A running `redis-server` without persistence, on 127.0.0.1.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// More `redis-server` arguments, e.g. `--rename-command FCALL ""`.
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    ///
    /// # Panics
    /// When `redis-server` is not installed (the message names the install
    /// command) or does not come up within 10 seconds.
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port())
    }

    /// Starts a server on `port` (free, or one a test reserved).
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub fn start_on(port: u16) -> RedisServer {
        RedisServer::start_with(port, &[])
    }

    /// Starts a server on `port` with more `redis-server` arguments, e.g.
    /// `["--rename-command", "FUNCTION", ""]` for a server without Redis 7's
    /// functions.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub fn start_with(port: u16, extra: &[&str]) -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port,
            extra: extra.iter().map(|a| (*a).to_owned()).collect(),
        };
        server.restart();
        server
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port (after [`RedisServer::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run redis-server ({e}): the Redis store's tests need it on PATH; \
                     install it with `{INSTALL}`"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if ping(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    /// Runs one command given as words over a raw connection and returns
    /// the raw RESP reply (for checks that must not go through the store).
    pub fn command(&self, words: &[&str]) -> String {
        raw_command(self.port, words).expect("a reply from redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on now.
///
/// # Panics
/// When the loopback interface has no free port.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a local address").port()
}

/// Whether the server is up: `PONG`, or `NOAUTH` from one started with
/// `--requirepass`.
fn ping(port: u16) -> bool {
    raw_command(port, &["PING"]).is_some_and(|r| r.starts_with("+PONG") || r.starts_with("-NOAUTH"))
}

fn raw_command(port: u16, words: &[&str]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut request = format!("*{}\r\n", words.len());
    for w in words {
        request.push_str(&format!("${}\r\n{w}\r\n", w.len()));
    }
    stream.write_all(request.as_bytes()).ok()?;
    let mut buf = vec![0u8; 1 << 16];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}
