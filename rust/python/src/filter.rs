//! Binding of `rmq-filter`: SQL92 expressions (`compile_sql92`, `Sql92Filter`), RocketMQ's
//! bloom positions (`bloom_bits`, `bloom_shape`, `bloom_may_match`) and per-topic bitmaps
//! (`FilterSet`). Every call here takes well under a microsecond, so none releases the GIL.
//!
//! A malformed expression raises `FilterSyntaxError` (a `ValueError`) carrying `kind`,
//! `offset`, `line`, `column` and `detail`; bad bloom parameters raise `ValueError`.

use std::borrow::Cow;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use rmq_filter::{
    BloomConfigError, BloomFilter, BloomPositions, FilterSet, SyntaxError, SyntaxErrorKind,
};

create_exception!(
    _store,
    FilterSyntaxError,
    PyValueError,
    "A malformed SQL92 expression; `kind`, `offset`, `line`, `column` and `detail` say where and why."
);

/// The one mapping point from filter errors to Python exceptions.
fn syntax_error(py: Python<'_>, e: SyntaxError) -> PyErr {
    let err = FilterSyntaxError::new_err(e.to_string());
    let value = err.value(py);
    let kind = match e.kind {
        SyntaxErrorKind::Lexical => "lexical",
        SyntaxErrorKind::Grammar => "grammar",
        SyntaxErrorKind::Type => "type",
        SyntaxErrorKind::TooDeep => "too_deep",
    };
    let annotate = || -> PyResult<()> {
        value.setattr("kind", kind)?;
        value.setattr("offset", e.position.offset)?;
        value.setattr("line", e.position.line)?;
        value.setattr("column", e.position.column)?;
        value.setattr("detail", &e.message)
    };
    match annotate() {
        Ok(()) => err,
        Err(other) => other,
    }
}

fn bloom_error(e: BloomConfigError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Message properties as Python passes them: the stored string (`str` or UTF-8 `bytes`,
/// `k\x01v\x02...`) or a mapping of names to values.
enum Properties<'py> {
    Encoded(Cow<'py, str>),
    Map(Bound<'py, PyDict>),
}

impl<'py> Properties<'py> {
    fn extract(obj: &'py Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            Ok(Properties::Encoded(String::from_utf8_lossy(b.as_bytes())))
        } else if let Ok(s) = obj.cast::<PyString>() {
            Ok(Properties::Encoded(s.to_cow()?))
        } else if let Ok(d) = obj.cast::<PyDict>() {
            Ok(Properties::Map(d.clone()))
        } else {
            Err(PyTypeError::new_err(
                "properties must be bytes, str or dict[str, str]",
            ))
        }
    }

    fn matches(&self, filter: &rmq_filter::Sql92Filter) -> PyResult<bool> {
        match self {
            Properties::Encoded(s) => Ok(filter.matches_properties(s)),
            Properties::Map(d) => {
                let mut values = Vec::with_capacity(filter.property_names().len());
                for name in filter.property_names() {
                    let v: Option<String> = d.get_item(name)?.map(|v| v.extract()).transpose()?;
                    values.push((name.as_str(), v));
                }
                let lookup = |k: &str| values.iter().find(|(n, _)| *n == k)?.1.as_deref();
                Ok(filter.matches(lookup))
            }
        }
    }
}

/// A compiled SQL92 expression (`MessageSelector.bySql`). Immutable; share it freely.
#[pyclass(frozen, module = "rmq._store", name = "Sql92Filter")]
pub struct PySql92Filter {
    inner: Arc<rmq_filter::Sql92Filter>,
}

impl PySql92Filter {
    /// The compiled filter, for other bindings (e.g. registering it with the store).
    #[allow(dead_code)]
    pub fn inner(&self) -> &Arc<rmq_filter::Sql92Filter> {
        &self.inner
    }
}

#[pymethods]
impl PySql92Filter {
    /// Compile `expression`; raises `FilterSyntaxError` when it is malformed.
    #[new]
    fn new(py: Python<'_>, expression: &str) -> PyResult<Self> {
        let inner = rmq_filter::compile(expression).map_err(|e| syntax_error(py, e))?;
        Ok(PySql92Filter {
            inner: Arc::new(inner),
        })
    }

    /// The source text.
    #[getter]
    fn expression(&self) -> &str {
        self.inner.expression()
    }

    /// The property names it reads, in order of first use.
    #[getter]
    fn property_names(&self) -> Vec<String> {
        self.inner.property_names().to_vec()
    }

    /// The expression fully parenthesized, as it parsed.
    fn canonical(&self) -> String {
        self.inner.canonical()
    }

    /// Whether a message with these properties matches (`bytes`/`str` in RocketMQ's
    /// `k\x01v\x02` encoding, or a `dict`). A missing property or a value that does not
    /// parse as the number it is compared with makes the message not match.
    fn matches(&self, properties: &Bound<'_, PyAny>) -> PyResult<bool> {
        Properties::extract(properties)?.matches(&self.inner)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let source = PyString::new(py, self.inner.expression()).repr()?;
        Ok(format!("Sql92Filter({source})"))
    }
}

/// Compile a SQL92 expression; raises `FilterSyntaxError` when it is malformed.
#[pyfunction]
fn compile_sql92(py: Python<'_>, expression: &str) -> PyResult<PySql92Filter> {
    PySql92Filter::new(py, expression)
}

/// `(m, k)` of RocketMQ's bloom filter for an error rate in percent and an expected number
/// of groups (the defaults are the broker's, `BloomFilter::DEFAULT_*`: `(112, 3)`).
#[pyfunction]
#[pyo3(signature = (max_error_rate = 20, expected = 32))]
fn bloom_shape(max_error_rate: u32, expected: u32) -> PyResult<(u32, u32)> {
    let b = BloomFilter::new(max_error_rate, expected).map_err(bloom_error)?;
    Ok((b.m(), b.k()))
}

/// The `k` bit positions in an `m`-bit map of `key` (RocketMQ: `group#topic`).
#[pyfunction]
fn bloom_bits(key: &str, m: u32, k: u32) -> Vec<u32> {
    rmq_filter::bit_positions(key, m, k)
}

/// The pull-path test: false only when `bitmap` (of `m` bits) surely lacks a match for the
/// group owning `bits`; a bitmap of another width answers true.
#[pyfunction]
fn bloom_may_match(bits: Vec<u32>, m: u32, bitmap: &[u8]) -> bool {
    BloomPositions::new(bits, m).may_match(bitmap)
}

/// The SQL92 filters registered on one topic: computes a message's bloom bitmap.
#[pyclass(module = "rmq._store", name = "FilterSet")]
pub struct PyFilterSet {
    inner: FilterSet,
}

#[pymethods]
impl PyFilterSet {
    #[new]
    #[pyo3(signature = (max_error_rate = 20, expected = 32))]
    fn new(max_error_rate: u32, expected: u32) -> PyResult<Self> {
        let bloom = BloomFilter::new(max_error_rate, expected).map_err(bloom_error)?;
        Ok(PyFilterSet {
            inner: FilterSet::new(bloom),
        })
    }

    /// Bits in a bitmap.
    #[getter]
    fn m(&self) -> u32 {
        self.inner.bloom().m()
    }

    /// Positions per key.
    #[getter]
    fn k(&self) -> u32 {
        self.inner.bloom().k()
    }

    /// Register (or replace) `filter` under `key`; returns its bit positions.
    fn register(&mut self, key: String, filter: PyRef<'_, PySql92Filter>) -> Vec<u32> {
        let positions = self.inner.insert(key, filter.inner.clone());
        positions.positions().to_vec()
    }

    /// Unregister `key`; whether it was registered.
    fn unregister(&mut self, key: &str) -> bool {
        self.inner.remove(key).is_some()
    }

    /// The registered keys.
    fn keys(&self) -> Vec<String> {
        self.inner.iter().map(|e| e.key.clone()).collect()
    }

    /// The bitmap of a message (`m / 8` bytes; empty when nothing is registered).
    fn bitmap<'py>(
        &self,
        py: Python<'py>,
        properties: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let Properties::Encoded(props) = Properties::extract(properties)? else {
            return Err(PyTypeError::new_err("properties must be bytes or str"));
        };
        Ok(PyBytes::new(py, &self.inner.compute_bitmap(&props)))
    }

    /// The pull-path test of `key` against a stored bitmap (true for an unknown key).
    fn may_match(&self, key: &str, bitmap: &[u8]) -> bool {
        self.inner.may_match(key, bitmap)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __contains__(&self, key: &str) -> bool {
        self.inner.get(key).is_some()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PySql92Filter>()?;
    m.add_class::<PyFilterSet>()?;
    m.add_function(wrap_pyfunction!(compile_sql92, m)?)?;
    m.add_function(wrap_pyfunction!(bloom_shape, m)?)?;
    m.add_function(wrap_pyfunction!(bloom_bits, m)?)?;
    m.add_function(wrap_pyfunction!(bloom_may_match, m)?)?;
    m.add("FilterSyntaxError", py.get_type::<FilterSyntaxError>())?;
    Ok(())
}
