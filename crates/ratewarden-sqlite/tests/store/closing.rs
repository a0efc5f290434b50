//! Closing: every operation after it fails with `Closed`, and the file is
//! in use, for other processes too, until the last store on it closes.

use std::path::Path;
use std::time::Duration;

use ratewarden_core::{Acquire, Algorithm, Batch, KeyMatch, Store, StoreError};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};

use crate::common::{acquire, at, int, key, open, policy, sql, temp_db};

#[tokio::test]
async fn operations_after_close_fail_with_closed() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    store.close().await;

    let err = store
        .acquire(&Batch::one(at(0), Acquire::one(&p, &alice)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
    assert!(!err.is_transient());
    let err = store.status(&p, &alice, at(0)).await.unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
    let err = store
        .reset(&p, KeyMatch::Exactly(&alice), at(0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
    let err = store
        .prune(Algorithm::FixedWindow, Duration::from_secs(60), at(0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
}

/// Set in a child process (this test binary run again) to what it should
/// do: `probe:PATH` prints `in_use=true|false`; `read:PATH` opens a plain
/// connection on the file, reads, and closes it.
const CHILD_TASK: &str = "RATEWARDEN_SQLITE_TEST_CHILD";

/// The child's side; without [`CHILD_TASK`] it does nothing.
#[test]
fn child_process_task_runs_only_when_asked() {
    let Ok(task) = std::env::var(CHILD_TASK) else {
        return;
    };
    match task.split_once(':') {
        Some(("probe", path)) => {
            let in_use = SqliteStore::in_use(path).expect("probe the file");
            println!("in_use={in_use}");
        }
        Some(("read", path)) => {
            let conn = sql(Path::new(path));
            let n = int(&conn, "SELECT COUNT(*) FROM sqlite_master", []);
            conn.close().expect("close the connection");
            println!("tables={n}");
        }
        _ => panic!("unknown task {task:?}"),
    }
}

/// Runs `task` on `path` in another process and returns what it printed.
fn in_child(task: &str, path: &Path) -> String {
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "closing::child_process_task_runs_only_when_asked",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_TASK, format!("{task}:{}", path.display()))
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Whether another process finds the file in use.
fn in_use_elsewhere(path: &Path) -> bool {
    let out = in_child("probe", path);
    match (out.contains("in_use=true"), out.contains("in_use=false")) {
        (true, false) => true,
        (false, true) => false,
        _ => panic!("no probe answer in: {out}"),
    }
}

#[tokio::test]
async fn an_open_store_holds_its_file_in_use_until_it_is_closed() {
    let (_dir, path) = temp_db();
    assert!(!SqliteStore::in_use(&path).unwrap(), "a missing file");
    let store = open(&path);
    assert!(SqliteStore::in_use(&path).unwrap(), "in this process");
    assert!(in_use_elsewhere(&path), "in another process");
    // The lock is the file's, whatever path names it.
    let alias = path.parent().unwrap().join(".").join("ratewarden.db");
    assert!(in_use_elsewhere(&alias));
    let p = policy(Algorithm::FixedWindow, 3, 60);
    acquire(&store, &p, &key(["alice"]), at(0)).await;
    store.close().await;
    assert!(!in_use_elsewhere(&path), "released at close");
    assert!(!SqliteStore::in_use(&path).unwrap());
    // Probing changed nothing: the file opens again with its count.
    let store = open(&path);
    let d = acquire(&store, &p, &key(["alice"]), at(1)).await;
    assert_eq!(d.remaining, 1);
    store.close().await;
}

#[tokio::test]
async fn a_second_store_on_the_same_file_opens_and_the_file_stays_in_use_until_the_last_closes() {
    let (_dir, path) = temp_db();
    let first = open(&path);
    let second = SqliteStore::open(&path, SqliteOptions::default())
        .expect("a second store opens while the first holds the file");
    let p = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    acquire(&first, &p, &alice, at(0)).await;
    assert_eq!(acquire(&second, &p, &alice, at(0)).await.remaining, 1);
    first.close().await;
    assert!(in_use_elsewhere(&path), "the second store still holds it");
    assert_eq!(acquire(&second, &p, &alice, at(0)).await.remaining, 0);
    second.close().await;
    assert!(!in_use_elsewhere(&path));
}

/// Closing a descriptor of the file drops every POSIX lock the process
/// holds on it, SQLite's included. Regression guard: were the first
/// store's lock descriptor closed while the second store's connection is
/// open, that connection would lose its shared lock on the database, and
/// the next process to close a connection would think itself the last,
/// checkpoint and delete the WAL under it.
#[tokio::test]
async fn closing_one_store_keeps_the_sqlite_locks_of_another_on_the_same_file() {
    let (_dir, path) = temp_db();
    let wal = path.with_file_name("ratewarden.db-wal");
    let first = open(&path);
    let second = open(&path);
    let p = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    acquire(&second, &p, &alice, at(0)).await;
    first.close().await;
    in_child("read", &path);
    assert!(
        wal.exists(),
        "another process's last-closer checkpoint deleted the WAL of an open store"
    );
    assert_eq!(acquire(&second, &p, &alice, at(0)).await.remaining, 1);
    second.close().await;
    assert!(!wal.exists(), "the last store to close removes the WAL");
}
