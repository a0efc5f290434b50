//! One client connection's transport: a [`TcpStream`] that enforces the
//! header read and idle timeouts, closes itself when evicted, answers a
//! header timeout with 408, and closes with a lingering drain.
//!
//! It sees what hyper does with the socket: hyper reads whenever it waits
//! for a request, so the timeouts live in [`GuardedIo::poll_read`]; the
//! request in progress is the [`Slot`]'s busy count, which the service
//! sets. The timeline of one connection:
//!
//! - *fresh*, from the accept: the header read timeout runs;
//! - *headers*, from the first byte of a request: the header read timeout
//!   runs (from the accept for the first request, from that byte for a
//!   later one);
//! - *busy*, while the service handles a request: no timeout here (the
//!   router's request timeout bounds the handler and the body);
//! - *idle*, after an answer on a kept-alive connection: the idle timeout
//!   runs.
//!
//! A timeout or an eviction ends the connection at the next read: at
//! once when it is waiting for a request, after the answer when one is in
//! progress (a counted request always gets its answer).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::{Closed, Slot};

/// The timeouts and bounds of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// How long a request's headers may take (seconds in the settings).
    pub(crate) header_read: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub(crate) idle: Duration,
    /// How long a closing connection drains unread input at most.
    pub(crate) linger: Duration,
    /// How many unread bytes a closing connection drains at most.
    pub(crate) linger_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Fresh { since: Instant },
    Headers { since: Instant },
    Busy,
    Idle { since: Instant },
}

#[derive(Debug, Clone, Copy)]
enum Closing {
    Open,
    Lingering { drained: u64 },
    Done,
}

/// The answer to a request whose headers did not arrive in time, written
/// straight to the socket (hyper has no request to answer).
const REQUEST_TIMEOUT_408: &[u8] = b"HTTP/1.1 408 Request Timeout\r\n\
content-type: application/problem+json\r\n\
content-length: 135\r\n\
connection: close\r\n\
\r\n\
{\"type\":\"urn:ratewarden:problem:request-timeout\",\"title\":\"Request Timeout\",\"status\":408,\"detail\":\"the request headers came too slowly\"}";

/// A client connection's socket with the connection rules of
/// docs/operations.md#hardening (see the module docs).
#[derive(Debug)]
pub(crate) struct GuardedIo {
    stream: TcpStream,
    slot: Arc<Slot>,
    bounds: Bounds,
    phase: Phase,
    /// The slot's count of requests when this last looked: a change means
    /// a request came and went since.
    seen_served: u64,
    timer: Pin<Box<Sleep>>,
    timer_at: Instant,
    /// The last write could not complete: the socket's send buffer is
    /// full, so a 408 must not be written in between.
    write_blocked: bool,
    /// The connection ends because of a timeout or an eviction: no
    /// lingering.
    ended_by_us: bool,
    closing: Closing,
}

impl GuardedIo {
    pub(crate) fn new(stream: TcpStream, slot: Arc<Slot>, bounds: Bounds) -> GuardedIo {
        let now = Instant::now();
        let timer_at = now + bounds.header_read;
        GuardedIo {
            stream,
            slot,
            bounds,
            phase: Phase::Fresh { since: now },
            seen_served: 0,
            timer: Box::pin(tokio::time::sleep_until(timer_at)),
            timer_at,
            write_blocked: false,
            ended_by_us: false,
            closing: Closing::Open,
        }
    }

    fn set_timer(&mut self, at: Instant) {
        if self.timer_at != at {
            self.timer.as_mut().reset(at);
            self.timer_at = at;
        }
    }

    /// Ends the connection from this side: end of input while it waits
    /// for a request (hyper closes quietly), an error when a request was
    /// half read.
    fn end(&mut self, why: Closed) -> Poll<io::Result<()>> {
        self.ended_by_us = true;
        why.count();
        match self.phase {
            Phase::Headers { .. } => {
                if why == Closed::HeaderTimeout && !self.write_blocked {
                    // Best effort: the send buffer is empty, 200 bytes fit.
                    let _ = self.stream.try_write(REQUEST_TIMEOUT_408);
                }
                // What the client sent is read, so closing sends FIN
                // rather than a reset that could destroy the 408.
                self.discard_readable();
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why.as_str())))
            }
            _ => Poll::Ready(Ok(())),
        }
    }

    fn discard_readable(&mut self) {
        let mut scratch = [0u8; 4096];
        for _ in 0..16 {
            match self.stream.try_read(&mut scratch) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }

    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Closing::Lingering { mut drained } = self.closing else {
            return Poll::Ready(Ok(()));
        };
        self.slot.waker.register(cx.waker());
        let mut scratch = [0u8; 8192];
        let done = loop {
            if self.slot.evicted() {
                break true;
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => break true,
                Poll::Ready(Ok(())) => {
                    drained += buf.filled().len() as u64;
                    if drained >= self.bounds.linger_bytes {
                        break true;
                    }
                }
                Poll::Ready(Err(_)) => break true,
                Poll::Pending => break self.timer.as_mut().poll(cx).is_ready(),
            }
        };
        if done {
            if drained > 0 {
                Closed::Lingered.count();
            }
            self.closing = Closing::Done;
            Poll::Ready(Ok(()))
        } else {
            self.closing = Closing::Lingering { drained };
            Poll::Pending
        }
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ended_by_us {
            return Poll::Ready(Ok(()));
        }
        this.slot.waker.register(cx.waker());
        let busy = this.slot.busy();
        let served = this.slot.served();
        this.phase = match this.phase {
            _ if busy => Phase::Busy,
            // The request was answered (perhaps between two reads).
            _ if served != this.seen_served => Phase::Idle {
                since: Instant::now(),
            },
            Phase::Busy => Phase::Idle {
                since: Instant::now(),
            },
            phase => phase,
        };
        this.seen_served = served;
        if !busy && this.slot.evicted() {
            return this.end(Closed::Evicted);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.phase = match this.phase {
                        Phase::Fresh { since } => Phase::Headers { since },
                        Phase::Idle { .. } => Phase::Headers {
                            since: Instant::now(),
                        },
                        phase => phase,
                    };
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        let (deadline, why) = match this.phase {
            Phase::Fresh { since } | Phase::Headers { since } => {
                (since + this.bounds.header_read, Closed::HeaderTimeout)
            }
            Phase::Idle { since } => (since + this.bounds.idle, Closed::IdleTimeout),
            Phase::Busy => return Poll::Pending,
        };
        this.set_timer(deadline);
        if this.timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        this.end(why)
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.write_blocked = written.is_pending();
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.write_blocked = written.is_pending();
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    /// Sends FIN, then (unless the connection ends by a timeout or an
    /// eviction) drains what the client still sends for at most
    /// [`Bounds::linger`] and [`Bounds::linger_bytes`]: closing a socket
    /// with unread input makes the kernel send a reset, which can destroy
    /// an answer the client has not read yet (an early 413, say).
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.closing {
                Closing::Open => {
                    ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
                    if this.ended_by_us {
                        this.closing = Closing::Done;
                    } else {
                        this.closing = Closing::Lingering { drained: 0 };
                        this.set_timer(Instant::now() + this.bounds.linger);
                    }
                }
                Closing::Lingering { .. } => return this.poll_linger(cx),
                Closing::Done => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::REQUEST_TIMEOUT_408;

    #[test]
    fn the_408_declares_its_body_length() {
        let text = std::str::from_utf8(REQUEST_TIMEOUT_408).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(json["status"], 408);
    }
}
