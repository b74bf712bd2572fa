//! `progress=`: a Python callable as the facade's progress hook
//! (`tensorfmt::progress`). The hook runs on whichever thread reads the pieces, which
//! holds no GIL while decoding; it takes the GIL only for the call. An exception the
//! callable raises stops the conversion at that piece (the writer's temporary file
//! is removed) and is kept, so the caller raises that exception, not a translation.

use std::sync::Mutex;

use pyo3::prelude::*;
use tensorfmt::Error;

/// A Python `progress(done, total)` callable and the first exception it raised.
pub struct PyProgress {
    callback: Py<PyAny>,
    raised: Mutex<Option<PyErr>>,
}

impl PyProgress {
    /// Wraps `callback` (None: no progress).
    pub fn new(callback: Option<Py<PyAny>>) -> Option<PyProgress> {
        callback.map(|callback| PyProgress {
            callback,
            raised: Mutex::new(None),
        })
    }

    /// Calls the callable with the GIL; an exception is kept and becomes an error.
    pub fn call(&self, done: u64, total: u64) -> Result<(), Error> {
        Python::attach(|py| match self.callback.call1(py, (done, total)) {
            Ok(_) => Ok(()),
            Err(e) => {
                let message = format!("the progress callback raised {e}");
                *self.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Err(Error::Invalid(message))
            }
        })
    }

    /// The exception the callable raised, if it did.
    pub fn raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// `result`, with an error caused by the callable replaced by its own exception.
pub fn outcome<T>(result: PyResult<T>, progress: Option<&PyProgress>) -> PyResult<T> {
    match (result, progress.and_then(PyProgress::raised)) {
        (Err(_), Some(e)) => Err(e),
        (result, _) => result,
    }
}
