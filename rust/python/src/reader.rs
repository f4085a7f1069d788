//! Binding of `rmq-reader`: read-only, columnar reads of a store directory for analytics
//! (`rmq.spark`). `StoreReader` plans and decodes with the GIL released; batches come back as
//! Arrow buffers that `rmq.spark.arrow` wraps with `pyarrow.Array.from_buffers`. A buffer is a
//! `ColumnBuffer` owning the Rust vector it was built in and lending it through the buffer
//! protocol: no copy (measured: copying into `bytes` and the fresh pages it needs cost as much as
//! decoding the bodies). It owns its memory, so no view ever outlives a file mapping, and returns it
//! to the reader's pool when dropped. Errors map through `to_py_err` like the store's.

use std::ffi::{c_int, c_void};
use std::path::Path;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use rmq_reader::columns::{properties_column, ColumnBuffers, Kind};
use rmq_reader::decode::{advance, decode_buffers, decode_queue, decode_scan};
use rmq_reader::filter::Range;
use rmq_reader::plan::prefer_queues;
use rmq_reader::queue::{list_queues, QueueView};
use rmq_reader::{Batch, ColumnSet, DecodeOptions, QueueSplit, RecordFilter, ScanSplit, COLUMNS};

use crate::to_py_err;

/// One Arrow buffer built by the reader, lent to Python read-only through the buffer protocol
/// (`pyarrow.py_buffer(b)` wraps it without a copy). When Python drops it (no view is left: each
/// view holds a reference), its vector goes back to the reader's buffer pool for a later batch.
#[pyclass(frozen, module = "rmq._store")]
struct ColumnBuffer {
    data: Vec<u8>,
}

impl Drop for ColumnBuffer {
    fn drop(&mut self) {
        rmq_reader::buffers::recycle(std::mem::take(&mut self.data));
    }
}

#[pymethods]
impl ColumnBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let data = &slf.get().data;
        // SAFETY: `view` is the Py_buffer the caller passed in. The view keeps a reference to
        // `slf` (PyBuffer_FillInfo increments it) and a frozen class never changes its vector,
        // so the pointer stays valid and the bytes unchanged while the view exists. readonly=1:
        // a writable request fails with BufferError.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr() as *mut c_void,
                data.len() as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }
}

type Buffers<'py> = Bound<'py, PyList>;

fn buffers(py: Python<'_>, cols: Vec<ColumnBuffers>) -> PyResult<Buffers<'_>> {
    let out = PyList::empty(py);
    for c in cols {
        let bufs = c
            .buffers
            .into_iter()
            .map(|b| b.map(|data| ColumnBuffer { data }).into_pyobject(py))
            .collect::<PyResult<Vec<_>>>()?;
        out.append(PyList::new(py, bufs)?)?;
    }
    Ok(out)
}

/// `(rows, buffers per column, compressed (row, sysflag, offset), next, done, records_seen,
/// bytes_seen, damage)`; damage as `(file, offset, bytes skipped, description)`.
fn batch<'py>(py: Python<'py>, b: Batch) -> PyResult<Bound<'py, PyTuple>> {
    let f = b.columns.finish();
    let damage: Vec<(String, i64, u64, String)> = b
        .damage
        .iter()
        .map(|d| {
            (
                d.file.display().to_string(),
                d.offset,
                d.skipped,
                d.to_string(),
            )
        })
        .collect();
    (
        f.rows,
        buffers(py, f.columns)?,
        f.compressed,
        b.next,
        b.done,
        b.records_seen,
        b.bytes_seen,
        damage,
    )
        .into_pyobject(py)
}

fn column_set(names: &[String]) -> PyResult<ColumnSet> {
    ColumnSet::from_names(names.iter().map(String::as_str))
        .map_err(|n| PyValueError::new_err(format!("unknown column {n:?}")))
}

fn range(r: Option<(i64, i64)>) -> Range {
    r.map_or(Range::ALL, |(lo, hi)| Range::new(lo, hi))
}

/// Conditions a stored record must meet to become a row (all ANDed); ranges are `(lo, hi)`
/// half-open, times in ms.
#[pyclass(frozen, module = "rmq._store")]
struct ReadFilter {
    inner: RecordFilter,
}

#[pymethods]
impl ReadFilter {
    #[new]
    #[pyo3(signature = (*, topics = None, queue_ids = None, queue_offset = None,
        commitlog_offset = None, store_time = None, born_time = None, tags = None,
        system_topic = None, prepared = None, visible = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        topics: Option<Vec<String>>,
        queue_ids: Option<Vec<i32>>,
        queue_offset: Option<(i64, i64)>,
        commitlog_offset: Option<(i64, i64)>,
        store_time: Option<(i64, i64)>,
        born_time: Option<(i64, i64)>,
        tags: Option<Vec<String>>,
        system_topic: Option<bool>,
        prepared: Option<bool>,
        visible: Option<bool>,
    ) -> Self {
        ReadFilter {
            inner: RecordFilter {
                topics,
                queue_ids,
                queue_offset: range(queue_offset),
                commitlog_offset: range(commitlog_offset),
                store_time: range(store_time),
                born_time: range(born_time),
                tags,
                system_topic,
                prepared,
                visible,
            }
            .normalized(),
        }
    }

    /// True when no record can match.
    fn is_unsatisfiable(&self) -> bool {
        self.inner.is_unsatisfiable()
    }

    fn __repr__(&self) -> String {
        format!("ReadFilter({:?})", self.inner)
    }
}

/// A store directory opened read-only: no lock taken, nothing written.
#[pyclass(frozen, module = "rmq._store")]
struct StoreReader {
    inner: rmq_reader::StoreView,
}

#[pymethods]
impl StoreReader {
    #[new]
    #[pyo3(signature = (root, commitlog_dir = None, check_crc = true))]
    fn new(
        py: Python<'_>,
        root: &str,
        commitlog_dir: Option<&str>,
        check_crc: bool,
    ) -> PyResult<Self> {
        let inner = py
            .detach(|| {
                rmq_reader::StoreView::open(
                    Path::new(root),
                    commitlog_dir.map(Path::new),
                    check_crc,
                )
            })
            .map_err(to_py_err)?;
        Ok(StoreReader { inner })
    }

    /// The offset below which every record is complete (see `rmq_reader`'s docs); `hint` is a
    /// record boundary from an earlier call.
    #[pyo3(signature = (hint = None))]
    fn committed_end(&self, py: Python<'_>, hint: Option<i64>) -> PyResult<i64> {
        let v = &self.inner;
        py.detach(|| v.committed_end(hint)).map_err(to_py_err)
    }

    /// The first CommitLog offset on disk.
    fn min_offset(&self, py: Python<'_>) -> PyResult<i64> {
        let v = &self.inner;
        py.detach(|| v.log().refresh().map(|_| v.log().min_offset()))
            .map_err(to_py_err)
    }

    /// A broker has the store open (or crashed): the `abort` marker exists.
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }

    /// `(topic, queue_id)` of every ConsumeQueue directory.
    fn queues(&self, py: Python<'_>) -> PyResult<Vec<(String, i32)>> {
        let root = self.inner.cq_root();
        py.detach(|| list_queues(root)).map_err(to_py_err)
    }

    /// Plan a read. `mode` is `"auto"` (ConsumeQueues when the filter names topics and that
    /// touches under half the pages of a scan), `"scan"` or `"consumequeue"`. Returns `(kind,
    /// splits, scan_bytes, queue_rows, queue_bytes)`: kind `"scan"` with `(start, end,
    /// end_is_boundary)` splits or `"queue"` with `(topic, queue_id, start, end)` splits.
    #[allow(clippy::type_complexity)]
    fn plan<'py>(
        &self,
        py: Python<'py>,
        filter: &ReadFilter,
        committed_end: i64,
        slice_size: u64,
        mode: &str,
    ) -> PyResult<(&'static str, Bound<'py, PyList>, u64, u64, u64)> {
        if !matches!(mode, "auto" | "scan" | "consumequeue") {
            return Err(PyValueError::new_err(format!(
                "pushdown mode must be auto, scan or consumequeue, not {mode:?}"
            )));
        }
        let (v, f) = (&self.inner, &filter.inner);
        let (scan, queues) = py
            .detach(|| {
                let scan = v.plan_scan(f, committed_end, slice_size)?;
                let queues = match mode {
                    "scan" => None,
                    _ => v.plan_queues(f, committed_end, slice_size)?,
                };
                Ok((scan, queues))
            })
            .map_err(to_py_err)?;
        let scan_bytes: u64 = scan.iter().map(ScanSplit::len).sum();
        let (rows, bytes) = queues.as_ref().map_or((0, 0), |q| (q.rows, q.bytes));
        let use_queues = match (&queues, mode) {
            (Some(_), "consumequeue") => true,
            (Some(q), "auto") => prefer_queues(q, &scan),
            _ => false,
        };
        if use_queues {
            let q = queues.unwrap();
            let splits = PyList::new(
                py,
                q.splits
                    .into_iter()
                    .map(|s| (s.topic, s.queue_id, s.start, s.end)),
            )?;
            Ok(("queue", splits, scan_bytes, rows, bytes))
        } else {
            let splits = PyList::new(
                py,
                scan.into_iter()
                    .map(|s| (s.start, s.end, s.end_is_boundary)),
            )?;
            Ok(("scan", splits, scan_bytes, rows, bytes))
        }
    }

    /// Decode a scan split from `start` (its start or a batch's `next`). Returns `(rows,
    /// buffers, compressed, next, done, records_seen, bytes_seen, damage)`. Damage raises
    /// `CorruptStoreError` unless `skip_damage`.
    #[pyo3(signature = (split, start, filter, columns, max_rows = 8192, max_bytes = 67108864,
        skip_damage = false))]
    #[allow(clippy::too_many_arguments)]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        split: (i64, i64, bool),
        start: i64,
        filter: &ReadFilter,
        columns: Vec<String>,
        max_rows: usize,
        max_bytes: usize,
        skip_damage: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let opts = DecodeOptions {
            columns: column_set(&columns)?,
            max_rows,
            max_bytes,
            skip_damage,
        };
        let split = ScanSplit {
            start: split.0,
            end: split.1,
            end_is_boundary: split.2,
        };
        let (v, f) = (&self.inner, &filter.inner);
        let b = py
            .detach(|| decode_scan(v.log(), &split, start, f, &opts))
            .map_err(to_py_err)?;
        batch(py, b)
    }

    /// Decode a queue split `(topic, queue_id, start, end)` from logical offset `start`, keeping
    /// records below `committed_end`. Returns what `scan` returns (`next` is a queue offset).
    #[pyo3(signature = (split, start, committed_end, filter, columns, max_rows = 8192,
        max_bytes = 67108864, skip_damage = false))]
    #[allow(clippy::too_many_arguments)]
    fn read_queue<'py>(
        &self,
        py: Python<'py>,
        split: (String, i32, i64, i64),
        start: i64,
        committed_end: i64,
        filter: &ReadFilter,
        columns: Vec<String>,
        max_rows: usize,
        max_bytes: usize,
        skip_damage: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let opts = DecodeOptions {
            columns: column_set(&columns)?,
            max_rows,
            max_bytes,
            skip_damage,
        };
        let split = QueueSplit {
            topic: split.0,
            queue_id: split.1,
            start: split.2,
            end: split.3,
        };
        let (v, f) = (&self.inner, &filter.inner);
        let b = py
            .detach(|| {
                let Some(q) = QueueView::open(v.cq_root(), &split.topic, split.queue_id)? else {
                    return Ok(None);
                };
                decode_queue(v.log(), &q, &split, start, committed_end, f, &opts).map(Some)
            })
            .map_err(to_py_err)?;
        match b {
            Some(b) => batch(py, b),
            None => (
                0usize,
                PyList::empty(py),
                None::<Vec<u8>>,
                split.end,
                true,
                0u64,
                0u64,
                PyList::empty(py),
            )
                .into_pyobject(py),
        }
    }

    /// `(position, count)`: the offset after the `n`-th record `filter` accepts from `start`
    /// (a record boundary), or `end` when fewer are there.
    fn advance(
        &self,
        py: Python<'_>,
        start: i64,
        end: i64,
        n: u64,
        filter: &ReadFilter,
    ) -> PyResult<(i64, u64)> {
        let (v, f) = (&self.inner, &filter.inner);
        py.detach(|| advance(v.log(), start, end, n, f))
            .map_err(to_py_err)
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Utf8 => "string",
        Kind::Binary => "binary",
        Kind::Int32 => "int",
        Kind::Int64 => "bigint",
        Kind::Timestamp => "timestamp",
        Kind::Bool => "boolean",
        Kind::Utf8Map => "map<string,string>",
    }
}

/// The row schema: `(name, type, nullable)` per column, types as Spark SQL names.
#[pyfunction]
fn reader_columns() -> Vec<(&'static str, &'static str, bool)> {
    COLUMNS
        .iter()
        .map(|d| (d.name, kind_name(d.kind), d.nullable))
        .collect()
}

/// Values of an Arrow binary/string array given as its buffers: `(validity, offsets, data)`,
/// array `offset` and `length`.
fn values<'a>(
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    data: &'a [u8],
    offset: usize,
    length: usize,
) -> PyResult<Vec<Option<&'a [u8]>>> {
    let off = |i: usize| -> PyResult<usize> {
        offsets
            .get(i * 4..i * 4 + 4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as usize)
            .ok_or_else(|| PyValueError::new_err("offsets buffer too short"))
    };
    (offset..offset + length)
        .map(|i| {
            if validity.is_some_and(|v| v.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) == 0)) {
                return Ok(None);
            }
            let (a, z) = (off(i)?, off(i + 1)?);
            data.get(a..z)
                .map(Some)
                .ok_or_else(|| PyValueError::new_err("data buffer too short"))
        })
        .collect()
}

/// Decode one stored record per value of an Arrow binary array (given as buffers); a null or
/// undecodable value gives a null row. Returns `(rows, buffers, row_validity, compressed)`,
/// compressed as `(row, sysflag, PHYSICALOFFSET)`.
#[pyfunction]
#[pyo3(signature = (validity, offsets, data, offset, length, columns, check_crc = false))]
#[allow(clippy::too_many_arguments)]
fn decode_record_buffers<'py>(
    py: Python<'py>,
    validity: Option<&[u8]>,
    offsets: &[u8],
    data: &[u8],
    offset: usize,
    length: usize,
    columns: Vec<String>,
    check_crc: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let set = column_set(&columns)?;
    let vals = values(validity, offsets, data, offset, length)?;
    let cols = py.detach(|| decode_buffers(vals.into_iter(), set, check_crc));
    let f = cols.finish();
    (
        f.rows,
        buffers(py, f.columns)?,
        f.row_validity.map(|v| PyBytes::new(py, &v)),
        f.compressed,
    )
        .into_pyobject(py)
}

/// Parse property strings (an Arrow string array given as buffers) into the buffers of a
/// `map<string, string>` array, by RocketMQ's rules.
#[pyfunction]
fn properties_map_buffers<'py>(
    py: Python<'py>,
    validity: Option<&[u8]>,
    offsets: &[u8],
    data: &[u8],
    offset: usize,
    length: usize,
) -> PyResult<Bound<'py, PyList>> {
    let vals = values(validity, offsets, data, offset, length)?;
    let strs: Vec<Option<&str>> = vals
        .into_iter()
        .map(|v| v.map(|b| std::str::from_utf8(b).unwrap_or("")))
        .collect();
    let bufs = py.detach(|| properties_column(strs.into_iter()));
    PyList::new(
        py,
        bufs.iter().map(|b| b.as_ref().map(|v| PyBytes::new(py, v))),
    )
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StoreReader>()?;
    m.add_class::<ReadFilter>()?;
    m.add_class::<ColumnBuffer>()?;
    m.add_function(wrap_pyfunction!(reader_columns, m)?)?;
    m.add_function(wrap_pyfunction!(decode_record_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(properties_map_buffers, m)?)?;
    Ok(())
}
