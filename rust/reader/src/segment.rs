//! One store file mapped read-only, and listings of segment directories.
//!
//! Segment files (CommitLog and ConsumeQueue alike) are named by the 20-digit, zero-padded
//! decimal byte offset of their first byte (`00000000001073741824`); other names (such as a
//! broker's `*.creating` leftovers) are ignored. Files keep their size for life: brokers
//! preallocate them and never shrink them (recovery zeroes a torn tail in place), so a
//! read-only mapping never loses pages under a reader. A deleted file (retention) stays
//! readable through a mapping made before the deletion.
//!
//! Mapping cost: the kernel maps cached pages into a reader's mapping a folio at a time. A
//! 2 MiB folio (what readahead caches on a read from disk) takes one page-table entry; 4 KiB
//! folios (what a broker's writes through its own mapping leave) take one entry each and a
//! page fault per 16, undone again at unmap: most of a scan's kernel time. Populating the
//! range ahead (`MADV_POPULATE_READ`, `MAP_POPULATE`) walks the same pages and measured no
//! cheaper, and `pread` into a reused buffer costs more (a copy of every byte).

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::{Advice, Mmap};

use crate::{io_err, Result};

/// A segment file found in a directory listing (not yet mapped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Offset of the file's first byte in its queue (the file name).
    pub base: i64,
    /// File length in bytes.
    pub len: u64,
    pub path: PathBuf,
}

impl SegmentInfo {
    /// Offset one past the file's last byte.
    pub fn end(&self) -> i64 {
        self.base + self.len as i64
    }
}

/// Parse a segment file name: ASCII digits only, fitting an `i64`.
pub fn parse_segment_name(name: &str) -> Option<i64> {
    if name.is_empty() || name.len() > 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// The segment files of `dir`, sorted by base offset. A missing directory lists as empty.
pub fn list_segments(dir: &Path) -> Result<Vec<SegmentInfo>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let Some(base) = entry.file_name().to_str().and_then(parse_segment_name) else {
            continue;
        };
        // A file removed between the listing and the stat is simply not there.
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() {
            out.push(SegmentInfo {
                base,
                len: meta.len(),
                path: entry.path(),
            });
        }
    }
    out.sort_by_key(|s| s.base);
    Ok(out)
}

/// A segment file mapped read-only.
pub struct Segment {
    info: SegmentInfo,
    map: Option<Mmap>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").field("info", &self.info).finish()
    }
}

impl Segment {
    /// Map `info.path` read-only. `Ok(None)` if the file has vanished since the listing.
    pub fn open(info: &SegmentInfo) -> Result<Option<Segment>> {
        let file = match File::open(&info.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&info.path, e)),
        };
        let len = file.metadata().map_err(|e| io_err(&info.path, e))?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: a read-only shared mapping. The broker appends to the file concurrently,
            // but bytes below the committed position never change again and files are never
            // shrunk (see the module doc); bytes above it are only inspected to find the end.
            Some(unsafe { Mmap::map(&file) }.map_err(|e| io_err(&info.path, e))?)
        };
        Ok(Some(Segment {
            info: SegmentInfo {
                len,
                ..info.clone()
            },
            map,
        }))
    }

    pub fn info(&self) -> &SegmentInfo {
        &self.info
    }
    pub fn base(&self) -> i64 {
        self.info.base
    }
    /// Offset one past the last byte.
    pub fn end(&self) -> i64 {
        self.info.end()
    }
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
    /// Hint the kernel that the mapping will be read front to back (larger readahead).
    pub fn advise_sequential(&self) {
        if let Some(m) = &self.map {
            let _ = m.advise(Advice::Sequential);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_listing() {
        assert_eq!(parse_segment_name("00000000001073741824"), Some(1 << 30));
        assert_eq!(parse_segment_name("00000000000000000000.creating"), None);
        assert_eq!(parse_segment_name(""), None);
        assert_eq!(parse_segment_name("abc"), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("00000000000000001024"), [1u8; 16]).unwrap();
        std::fs::write(dir.path().join("00000000000000000000"), [2u8; 1024]).unwrap();
        std::fs::write(dir.path().join("00000000000000002048.creating"), [0u8; 4]).unwrap();
        let l = list_segments(dir.path()).unwrap();
        assert_eq!(l.iter().map(|s| s.base).collect::<Vec<_>>(), [0, 1024]);
        assert_eq!(l[0].end(), 1024);
        let seg = Segment::open(&l[1]).unwrap().unwrap();
        assert_eq!(seg.bytes(), &[1u8; 16]);
        assert!(list_segments(&dir.path().join("missing"))
            .unwrap()
            .is_empty());
        std::fs::remove_file(&l[0].path).unwrap();
        assert!(Segment::open(&l[0]).unwrap().is_none());
    }
}
