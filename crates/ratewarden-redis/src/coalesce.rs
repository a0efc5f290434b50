//! Several requests' batches in one script call.
//!
//! Under load many requests wait on Redis at once. Sent one by one, each
//! batch costs a whole command on both sides: redis-rs encodes it, hands
//! it to its connection task and parses its reply; Redis reads, looks up
//! and calls the function and writes an answer. Instead a request's batch
//! joins a queue, and while fewer than [`IN_FLIGHT`] calls are under way
//! the request starts a driver task, which sends everything queued (up to
//! [`MAX_ITEMS`] items) as one call of `batches` (`lua/batch.lua`), gives
//! every batch its own values or its own error, and goes on with what
//! queued meanwhile until the queue is empty. Without load a batch goes
//! out at once, alone: nothing waits for company.
//!
//! Exactness is unchanged: Redis runs the whole call atomically and its
//! batches one after the other, each all or nothing and each seeing the
//! writes of those before it, as if they had come as separate calls in
//! that order. A batch that raises an error (a key of another type:
//! `WRONGTYPE`) has written nothing, since its reads come before its
//! writes; the error goes to its own request, and the other batches of
//! the call are decided as usual. A failed call (timeout, lost
//! connection) fails every batch it carried, as separate calls would.
//!
//! The driver is a task of its own so that a request that gives up (its
//! timeout, a client gone) never cancels the call carrying the others'
//! batches: as before, a batch that was sent is decided whether or not its
//! caller still waits for the answer. One still queued when its caller
//! gives up is dropped unsent, so it is never charged.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::link::Conn;
use ratewarden_core::StoreError;
use tokio::sync::oneshot;

use crate::numbers::decimal;
use crate::redis_error;
use crate::scripts::Scripts;

/// Calls under way at once on the store's one connection: one being
/// answered while the next is built and sent.
pub(crate) const IN_FLIGHT: usize = 2;

/// Items per call at most (a batch is never split, so one larger batch
/// goes alone): bounds how long Redis runs one call while others wait.
pub(crate) const MAX_ITEMS: usize = 256;

/// A batch's values (as `batch.lua` returns them after `'ok'`), or why not.
pub(crate) type Reply = Result<Vec<Option<String>>, StoreError>;

/// One request's batch as `batches` takes it.
pub(crate) struct Group {
    /// Its items' keys.
    pub(crate) keys: Vec<String>,
    /// The number of items, then each item's code, flags and arguments.
    pub(crate) args: Vec<Cow<'static, str>>,
    /// How many values its answer has.
    pub(crate) values: usize,
}

struct Waiting {
    group: Group,
    reply: oneshot::Sender<Reply>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    drivers: usize,
}

/// The queue of batches and the drivers that send them.
pub(crate) struct Coalescer {
    scripts: Arc<Scripts>,
    /// Bound on one call, so a driver never hangs (the callers have the
    /// same bound on their wait).
    timeout: Duration,
    queue: Mutex<Queue>,
}

impl Coalescer {
    pub(crate) fn new(scripts: Arc<Scripts>, timeout: Duration) -> Coalescer {
        Coalescer {
            scripts,
            timeout,
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Decides `group` in some call, with `con` if this starts a driver.
    ///
    /// # Errors
    /// The call's error ([`StoreError::Unavailable`] when transient), or
    /// [`StoreError::Failed`] with Redis's error when this batch raised one.
    pub(crate) async fn submit(self: &Arc<Self>, con: Conn, group: Group) -> Reply {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.waiting.push_back(Waiting { group, reply });
            let start = queue.drivers < IN_FLIGHT;
            if start {
                queue.drivers += 1;
            }
            start
        };
        if start {
            tokio::spawn(Arc::clone(self).drive(con));
        }
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Unavailable(
                "the Redis call carrying this batch ended without an answer".into(),
            ))
        })
    }

    /// Sends what is queued, call after call, until the queue is empty.
    async fn drive(self: Arc<Self>, mut con: Conn) {
        loop {
            let taken = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                let taken = take(&mut queue.waiting);
                if taken.is_empty() {
                    queue.drivers -= 1;
                    return;
                }
                taken
            };
            self.send(&mut con, taken).await;
        }
    }

    /// One call for `taken`; every batch gets its answer.
    async fn send(&self, con: &mut Conn, taken: Vec<Waiting>) {
        let count = decimal(taken.len());
        let mut keys = Vec::new();
        let mut args = vec![count.as_str()];
        for w in &taken {
            keys.extend(w.group.keys.iter().map(String::as_str));
            args.extend(w.group.args.iter().map(|a| a.as_ref()));
        }
        let call = self.scripts.run_batch(con, &keys, &args);
        let values: Vec<Option<String>> = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(values)) => values,
            // A call of one batch answers that batch's error (a key of
            // another type) as the call's error.
            Ok(Err(e)) => return fail(taken, &redis_error(e)),
            Err(_) => {
                let e = StoreError::Unavailable(format!(
                    "Redis: no answer within the timeout ({:?})",
                    self.timeout
                ));
                return fail(taken, &e);
            }
        };
        let mut values = values.into_iter();
        for w in taken {
            let _ = w.reply.send(answer(&mut values, w.group.values));
        }
    }
}

/// The oldest waiting batches, up to [`MAX_ITEMS`] items (at least one
/// when any is left). A batch whose caller has given up meanwhile (its
/// timeout, a client gone) is dropped unsent: nobody would hear its
/// answer, and it is never charged.
fn take(waiting: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let mut taken = Vec::new();
    let mut items = 0;
    while let Some(next) = waiting.front() {
        if next.reply.is_closed() {
            waiting.pop_front();
            continue;
        }
        let size = next.group.keys.len();
        if !taken.is_empty() && items + size > MAX_ITEMS {
            break;
        }
        items += size;
        taken.extend(waiting.pop_front());
    }
    taken
}

/// One batch's part of the call's answer: `'ok'` and `len` values, or
/// `'error: …'`.
fn answer(values: &mut impl Iterator<Item = Option<String>>, len: usize) -> Reply {
    match values.next().flatten() {
        Some(status) if status == "ok" => {
            let own: Vec<Option<String>> = values.take(len).collect();
            if own.len() == len {
                Ok(own)
            } else {
                Err(StoreError::Failed(format!(
                    "the batch script answered {} values where {len} were due",
                    own.len()
                )))
            }
        }
        Some(status) => match status.strip_prefix("error: ") {
            Some(error) => Err(StoreError::Failed(format!("Redis: {error}"))),
            None => Err(StoreError::Failed(format!(
                "the batch script answered {status:?} where a batch's status was due"
            ))),
        },
        None => Err(StoreError::Failed(
            "the batch script answered fewer batches than it was sent".into(),
        )),
    }
}

/// Every batch of a failed call gets the call's error.
fn fail(taken: Vec<Waiting>, e: &StoreError) {
    for w in taken {
        let _ = w.reply.send(Err(e.clone()));
    }
}
