//! When a changed file is finished, so that a reload never reads a file
//! in the middle of being written.
//!
//! A writer that truncates and then writes (`cat >`, `>` in a shell,
//! editors that save in place, config tools) shows readers every state in
//! between, and some of them parse: the first policies of a file, or none
//! at all. Three rules keep them out:
//!
//! - **closed**: on Linux the watcher reports both a write to a file and
//!   its writer's `close`; a file written to and not closed since is not
//!   read, however long the writer pauses (one silent for
//!   [`WRITER_PATIENCE`] is taken as done, with a warning, so that a
//!   writer that never closes cannot stop reloads for good);
//! - **quiet**: nothing changed for [`SETTLE`] (the writers that report no
//!   close, and the platforms that do not report it);
//! - **the same twice**: the files are read, then read again [`SETTLE`]
//!   later, the configuration parsed in between; it is applied only if
//!   both reads match and nothing changed meanwhile.
//!
//! And a file emptied (zero bytes where it held something) is a
//! truncation whose contents are still to come: that reload is refused
//! (see `source::emptied`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::EventKind;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::{Hangups, next_hangup};

/// How long the files must stay unchanged before they are read, and
/// between the two reads that must match.
pub const SETTLE: Duration = Duration::from_millis(200);

/// How long a file written to and not closed may stay silent before it
/// is read all the same.
pub const WRITER_PATIENCE: Duration = Duration::from_secs(5);

/// Whether the watcher reports a writer's `close` (inotify does; kqueue
/// and the others do not, and rely on [`SETTLE`] alone).
const REPORTS_CLOSE: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// What a watcher event says about one file of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// Data written to it (a truncation included): a writer has it open
    /// until [`Change::Closed`].
    Written(PathBuf),
    /// A writer closed it.
    Closed(PathBuf),
    /// It left its name (removed, renamed away): no writer of it counts.
    Gone(PathBuf),
    /// Anything else that may change what is read: a file renamed into
    /// place or created, its metadata, a rescan.
    Other,
}

/// The changes `event` makes to the files `concerns` accepts; none for
/// opening and reading (the reloader's own reads among them).
pub(super) fn classify(event: &notify::Event, concerns: impl Fn(&Path) -> bool) -> Vec<Change> {
    let ours = || event.paths.iter().filter(|p| concerns(p)).cloned();
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
            ours().map(Change::Closed).collect()
        }
        EventKind::Access(_) => Vec::new(),
        EventKind::Modify(ModifyKind::Data(_)) if REPORTS_CLOSE => {
            ours().map(Change::Written).collect()
        }
        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
            ours().map(Change::Gone).collect()
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
            // paths: [from, to]; the file renamed away is gone, the one
            // renamed into place is whole.
            let mut changes: Vec<Change> = event
                .paths
                .first()
                .filter(|p| concerns(p))
                .cloned()
                .map(Change::Gone)
                .into_iter()
                .collect();
            if event.paths.iter().skip(1).any(|p| concerns(p)) {
                changes.push(Change::Other);
            }
            changes
        }
        // A rescan (the kernel's queue overflowed) names no path.
        _ if event.paths.is_empty() => vec![Change::Other],
        _ => ours().map(|_| Change::Other).take(1).collect(),
    }
}

/// The watcher's changes as the reloader waits on them, and the files a
/// writer still has open.
#[derive(Debug)]
pub(super) struct Watch {
    changes: UnboundedReceiver<Change>,
    writing: HashSet<PathBuf>,
    /// A SIGHUP came while waiting: reload even if nothing changed.
    pub(super) signalled: bool,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wait {
    /// As asked: a change (or SIGHUP) came, or the quiet held.
    Done,
    /// Something changed during a wait for quiet.
    Changed,
    /// The service stops.
    Stop,
}

impl Watch {
    pub(super) fn new(changes: UnboundedReceiver<Change>) -> Watch {
        Watch {
            changes,
            writing: HashSet::new(),
            signalled: false,
        }
    }

    fn note(&mut self, change: Change) {
        match change {
            Change::Written(path) => {
                self.writing.insert(path);
            }
            Change::Closed(path) | Change::Gone(path) => {
                self.writing.remove(&path);
            }
            Change::Other => {}
        }
    }

    /// Waits for a change or a SIGHUP.
    pub(super) async fn next(&mut self, hangups: &mut Hangups, stop: &CancellationToken) -> Wait {
        tokio::select! {
            () = stop.cancelled() => Wait::Stop,
            change = self.changes.recv() => match change {
                Some(change) => {
                    self.note(change);
                    Wait::Done
                }
                // The watcher is gone (it could not start): SIGHUP only.
                None => self.signal_only(hangups, stop).await,
            },
            () = next_hangup(hangups) => {
                self.signalled = true;
                Wait::Done
            }
        }
    }

    async fn signal_only(&mut self, hangups: &mut Hangups, stop: &CancellationToken) -> Wait {
        tokio::select! {
            () = stop.cancelled() => Wait::Stop,
            () = next_hangup(hangups) => {
                self.signalled = true;
                Wait::Done
            }
        }
    }

    /// Waits until nothing has changed for [`SETTLE`] and no file is open
    /// for writing (one silent for [`WRITER_PATIENCE`] is taken as done).
    pub(super) async fn settle(&mut self, hangups: &mut Hangups, stop: &CancellationToken) -> Wait {
        loop {
            let quiet = if self.writing.is_empty() {
                SETTLE
            } else {
                WRITER_PATIENCE
            };
            match self.quiet_for(quiet, hangups, stop).await {
                Wait::Stop => return Wait::Stop,
                Wait::Changed => continue,
                Wait::Done => {}
            }
            if !self.writing.is_empty() {
                let files: Vec<String> = self
                    .writing
                    .drain()
                    .map(|p| p.display().to_string())
                    .collect();
                tracing::warn!(
                    files = %files.join(", "),
                    patience_secs = WRITER_PATIENCE.as_secs(),
                    "configuration reload: a file is still open for writing but unchanged for a while; reading it"
                );
                continue;
            }
            return Wait::Done;
        }
    }

    /// Waits `quiet`; [`Wait::Changed`] when a change comes first (a
    /// SIGHUP is noted and does not count as one).
    pub(super) async fn quiet_for(
        &mut self,
        quiet: Duration,
        hangups: &mut Hangups,
        stop: &CancellationToken,
    ) -> Wait {
        let deadline = tokio::time::sleep(quiet);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = stop.cancelled() => return Wait::Stop,
                () = &mut deadline => return Wait::Done,
                Some(change) = self.changes.recv() => {
                    self.note(change);
                    return Wait::Changed;
                }
                () = next_hangup(hangups) => self.signalled = true,
            }
        }
    }

    /// Takes the changes already queued; whether there were any.
    pub(super) fn changed_meanwhile(&mut self) -> bool {
        let mut any = false;
        while let Ok(change) = self.changes.try_recv() {
            self.note(change);
            any = true;
        }
        any
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

    use super::*;
    use notify::Event;
    use notify::event::{CreateKind, DataChange};

    fn event(kind: EventKind, paths: &[&str]) -> Event {
        paths
            .iter()
            .fold(Event::new(kind), |e, p| e.add_path(PathBuf::from(p)))
    }

    fn ours(p: &Path) -> bool {
        p.file_name().is_some_and(|n| n == "rw.toml")
    }

    #[test]
    fn reading_a_file_is_no_change_and_other_files_are_ignored() {
        for kind in [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
        ] {
            assert!(classify(&event(kind, &["/d/rw.toml"]), ours).is_empty());
        }
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        assert!(classify(&event(write, &["/d/rw.toml.tmp"]), ours).is_empty());
    }

    #[cfg(target_os = "linux")]
    #[tokio::test(start_paused = true)]
    async fn a_file_open_for_writing_is_waited_for_until_closed() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watch = Watch::new(rx);
        let stop = CancellationToken::new();
        let path = PathBuf::from("/d/rw.toml");
        let write = event(
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            &["/d/rw.toml"],
        );
        for change in classify(&write, ours) {
            tx.send(change).unwrap();
        }
        let mut hangups = Hangups::default();
        assert_eq!(watch.next(&mut hangups, &stop).await, Wait::Done);
        assert!(watch.writing.contains(&path));
        // The writer pauses far longer than SETTLE: still not settled.
        let settled = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let wait = watch.settle(&mut hangups, &stop).await;
            (wait, started.elapsed())
        });
        tokio::time::sleep(SETTLE * 10).await;
        assert!(!settled.is_finished());
        let close = event(
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            &["/d/rw.toml"],
        );
        for change in classify(&close, ours) {
            tx.send(change).unwrap();
        }
        let (wait, took) = settled.await.unwrap();
        assert_eq!(wait, Wait::Done);
        assert!(
            took >= SETTLE * 11,
            "settled {took:?} after the first write"
        );
        assert!(
            took < WRITER_PATIENCE,
            "the close ended the wait, not the patience"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_writer_that_never_closes_is_read_after_the_patience() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let mut watch = Watch::new(rx);
        watch.note(Change::Written(PathBuf::from("/d/rw.toml")));
        let stop = CancellationToken::new();
        let started = tokio::time::Instant::now();
        assert_eq!(
            watch.settle(&mut Hangups::default(), &stop).await,
            Wait::Done
        );
        assert!(started.elapsed() >= WRITER_PATIENCE);
        drop(tx);
    }

    #[test]
    fn a_rename_into_place_is_a_whole_file() {
        let both = event(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &["/d/rw.toml.tmp", "/d/rw.toml"],
        );
        assert_eq!(classify(&both, ours), vec![Change::Other]);
        let create = event(EventKind::Create(CreateKind::File), &["/d/rw.toml"]);
        assert_eq!(classify(&create, ours), vec![Change::Other]);
        let rescan = event(EventKind::Other, &[]);
        assert_eq!(classify(&rescan, ours), vec![Change::Other]);
    }
}
