//! Thin pyo3 binding of `rmq-store`, built by maturin as `rmq._store`.
use pyo3::prelude::*;

#[pymodule]
fn _store(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
