//! Python values to JSON and back: `dict` (string keys), `list`/`tuple`, `str`,
//! `int` (64-bit), `float` (finite), `bool` and `None`, the types `json.dumps`
//! takes by default. Anything else is a `TypeError` that names its path.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// How deep a payload may nest (a cycle would otherwise recurse forever).
const MAX_DEPTH: usize = 128;

/// `value` as JSON.
pub(crate) fn to_json(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    convert(value, "$", 0)
}

fn convert(value: &Bound<'_, PyAny>, path: &str, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{path}: nested deeper than {MAX_DEPTH} levels (a cycle?)"
        )));
    }
    if value.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: Python's bool is an int.
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.cast::<PyInt>().is_ok() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = value.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyValueError::new_err(format!(
            "{path}: the integer does not fit in 64 bits; send it as a string"
        )));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| {
                PyValueError::new_err(format!("{path}: NaN and infinities are not JSON"))
            });
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut map = Map::with_capacity(dict.len());
        for (key, item) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "{path}: object keys must be str, found {}",
                    key.get_type().name()?
                )));
            };
            let key = key.to_str()?.to_owned();
            let item = convert(&item, &format!("{path}.{key}"), depth + 1)?;
            map.insert(key, item);
        }
        return Ok(Value::Object(map));
    }
    if value.cast::<PyList>().is_ok() || value.cast::<PyTuple>().is_ok() {
        let mut items = Vec::new();
        for (i, item) in value.try_iter()?.enumerate() {
            items.push(convert(&item?, &format!("{path}[{i}]"), depth + 1)?);
        }
        return Ok(Value::Array(items));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: {} is not JSON (use dict, list, str, int, float, bool or None)",
        value.get_type().name()?
    )))
}

/// `value` as a Python object (`dict`, `list`, `str`, `int`, `float`, `bool`,
/// `None`).
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
