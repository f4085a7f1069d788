//! Binding of [`rmq_store::batch_rows`]: Arrow columns (their buffers, through the buffer
//! protocol) to SEND_BATCH_MESSAGE bodies, with the GIL released while encoding.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use rmq_store::batch_rows::{self, BinaryColumn, Limits, UniqIds};

/// A column as `(offsets, data, validity or None, offset, length)`: pyarrow's `buffers()` of a
/// binary or string array (32-bit offsets) with the array's `offset` and `len`.
type ColumnArgs = (
    PyBuffer<u8>,
    PyBuffer<u8>,
    Option<PyBuffer<u8>>,
    usize,
    usize,
);

/// One encoded batch: `(body, first_row, rows, uniq_ids)`.
type Encoded<'py> = (Bound<'py, PyBytes>, usize, usize, String);

fn bytes_of(buf: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err("column buffer is not contiguous"));
    }
    // SAFETY: a C-contiguous buffer of `len_bytes()` bytes at `buf_ptr()`, kept alive (and its
    // exporter pinned) by `buf` for the borrow's lifetime.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) })
}

fn column<'a>(name: &str, c: &'a ColumnArgs) -> PyResult<BinaryColumn<'a>> {
    let validity = c.2.as_ref().map(bytes_of).transpose()?;
    BinaryColumn::new(bytes_of(&c.0)?, bytes_of(&c.1)?, validity, c.3, c.4)
        .map_err(|e| PyValueError::new_err(format!("column '{name}': {e}")))
}

/// The rows of `body` (with `tags` and `keys`, each optional) as batch bodies:
/// `[(body, first_row, rows, uniq_ids)]`. A row that cannot be a message raises
/// `ValueError(row, what)`; buffers that do not hold the rows raise `ValueError(text)`.
#[pyfunction]
#[pyo3(signature = (body, tags, keys, uniq_base, counter, max_rows, max_bytes, max_body))]
#[allow(clippy::too_many_arguments)]
fn encode_row_batches<'py>(
    py: Python<'py>,
    body: ColumnArgs,
    tags: Option<ColumnArgs>,
    keys: Option<ColumnArgs>,
    uniq_base: &str,
    counter: u16,
    max_rows: usize,
    max_bytes: usize,
    max_body: usize,
) -> PyResult<Vec<Encoded<'py>>> {
    let body_col = column("body", &body)?;
    let tags_col = tags.as_ref().map(|c| column("tags", c)).transpose()?;
    let keys_col = keys.as_ref().map(|c| column("keys", c)).transpose()?;
    let uniq = UniqIds {
        base: uniq_base,
        counter,
    };
    let limits = Limits {
        max_rows,
        max_bytes,
        max_body,
    };
    let out = py
        .detach(|| {
            batch_rows::encode_row_batches(
                &body_col,
                tags_col.as_ref(),
                keys_col.as_ref(),
                uniq,
                limits,
            )
        })
        .map_err(|e| PyValueError::new_err((e.row, e.what)))?;
    Ok(out
        .into_iter()
        .map(|b| (PyBytes::new(py, &b.body), b.first, b.count, b.uniq_ids))
        .collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_row_batches, m)?)
}
