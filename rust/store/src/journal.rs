//! The repair journal: every recovery step, repair and refusal the store makes, with the byte
//! ranges and counts it concerned, for operators.
//!
//! The store never logs by itself (it has no logger and never calls into Python); it writes
//! each event here. The broker drains new events into its log ([`Journal::take_new`]) and
//! lists all of them in its runtime info ([`Journal::all`]).
//!
//! File: `<storePathRootDir>/repairs`, one event a line, fields separated by tabs:
//! `<epoch ms>\t<INFO|WARN>\t<kind>\t<message>` (tabs and newlines in the message become
//! spaces). Events survive crashes: a start after an unclean shutdown keeps the previous
//! runs' events, a start after a clean shutdown begins an empty journal.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// How serious an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
        }
    }
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEvent {
    /// Wall-clock time, ms since the epoch.
    pub time_ms: i64,
    pub level: Level,
    /// A short machine-readable tag: `recovery`, `commitlog-damage`, `torn-tail`,
    /// `short-file`, `consumequeue-rebuild`, `index-rebuild`, `disk-full`, `disk-ok`, …
    pub kind: String,
    /// What happened, with offsets, byte ranges and counts.
    pub message: String,
}

impl StoreEvent {
    fn to_line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        format!(
            "{}\t{}\t{}\t{}\n",
            self.time_ms,
            self.level.as_str(),
            clean(&self.kind),
            clean(&self.message)
        )
    }

    fn from_line(line: &str) -> Option<StoreEvent> {
        let mut parts = line.splitn(4, '\t');
        let time_ms = parts.next()?.parse().ok()?;
        let level = match parts.next()? {
            "WARN" => Level::Warn,
            "INFO" => Level::Info,
            _ => return None,
        };
        Some(StoreEvent {
            time_ms,
            level,
            kind: parts.next()?.to_string(),
            message: parts.next()?.to_string(),
        })
    }
}

struct State {
    events: Vec<StoreEvent>,
    /// Events before this index were handed out by `take_new` (or came from earlier runs).
    taken: usize,
}

/// The journal of one open store.
pub struct Journal {
    path: Option<PathBuf>,
    state: Mutex<State>,
}

/// Longest journal kept in memory and on disk; older events are dropped first.
const MAX_EVENTS: usize = 1000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Journal {
    /// A journal that is not written anywhere (tests, tools).
    pub fn in_memory() -> Journal {
        Journal {
            path: None,
            state: Mutex::new(State {
                events: Vec::new(),
                taken: 0,
            }),
        }
    }

    /// Open the journal at `path`: after a clean shutdown it starts empty, after a crash it
    /// keeps what earlier runs recorded (already logged by them, so not handed out again).
    pub fn open(path: &Path, keep_previous: bool) -> Journal {
        let mut events = Vec::new();
        if keep_previous {
            if let Ok(text) = std::fs::read_to_string(path) {
                events.extend(text.lines().filter_map(StoreEvent::from_line));
            }
        } else {
            let _ = std::fs::remove_file(path);
        }
        if events.len() > MAX_EVENTS {
            events.drain(..events.len() - MAX_EVENTS);
        }
        let taken = events.len();
        Journal {
            path: Some(path.to_path_buf()),
            state: Mutex::new(State { events, taken }),
        }
    }

    fn record(&self, level: Level, kind: &str, message: String) {
        let ev = StoreEvent {
            time_ms: now_ms(),
            level,
            kind: kind.to_string(),
            message,
        };
        let mut st = self.state.lock();
        if let Some(path) = &self.path {
            // Best effort: a journal that cannot be written (full disk) keeps the event in
            // memory, where the broker still logs and lists it.
            if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
                let _ = f.write_all(ev.to_line().as_bytes());
            }
        }
        st.events.push(ev);
        if st.events.len() > MAX_EVENTS {
            st.events.remove(0);
            st.taken = st.taken.saturating_sub(1);
        }
    }

    pub fn warn(&self, kind: &str, message: impl Into<String>) {
        self.record(Level::Warn, kind, message.into());
    }

    pub fn info(&self, kind: &str, message: impl Into<String>) {
        self.record(Level::Info, kind, message.into());
    }

    /// Every event of this run and, after a crash, of the runs since the last clean start.
    pub fn all(&self) -> Vec<StoreEvent> {
        self.state.lock().events.clone()
    }

    /// Events recorded since the last call (for the broker's log).
    pub fn take_new(&self) -> Vec<StoreEvent> {
        let mut st = self.state.lock();
        let from = st.taken.min(st.events.len());
        st.taken = st.events.len();
        st.events[from..].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_a_crash_and_clears_on_clean_start() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("repairs");
        let j = Journal::open(&p, false);
        j.warn("commitlog-damage", "skipped [10, 20)\twith a tab");
        j.info("recovery", "clean");
        let new = j.take_new();
        assert_eq!(new.len(), 2);
        assert_eq!(new[0].message, "skipped [10, 20)\twith a tab");
        assert!(j.take_new().is_empty());
        assert_eq!(j.all().iter().filter(|e| e.level == Level::Warn).count(), 1);
        drop(j);

        // After a crash the earlier events are listed but not handed out for logging again.
        let j = Journal::open(&p, true);
        assert_eq!(j.all().len(), 2);
        assert_eq!(j.all()[0].message, "skipped [10, 20) with a tab");
        assert!(j.take_new().is_empty());
        j.warn("torn-tail", "truncated 5 bytes");
        assert_eq!(j.take_new().len(), 1);
        assert_eq!(j.all().len(), 3);
        drop(j);

        // A clean start begins anew.
        let j = Journal::open(&p, false);
        assert!(j.all().is_empty());
        assert!(!p.exists());
    }

    #[test]
    fn bounded() {
        let j = Journal::in_memory();
        for i in 0..(MAX_EVENTS + 10) {
            j.info("x", format!("{i}"));
        }
        let all = j.all();
        assert_eq!(all.len(), MAX_EVENTS);
        assert_eq!(all[0].message, "10");
        assert_eq!(j.take_new().len(), MAX_EVENTS);
    }
}
