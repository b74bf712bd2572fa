//! From Rust errors and panics to the Python exception hierarchy defined in
//! `python/tensorfmt/_errors.py`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tensorfmt::{Error, ErrorKind};

/// Runs `work` without the GIL, turning a panic into an error instead of unwinding into
/// Python, and a [`tensorfmt::Error`] into the matching `TensorfmtError` subclass.
pub fn run<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T, Error> + Send,
{
    let faults = tensorfmt::io::guarded_faults();
    let outcome = py.detach(|| catch_unwind(AssertUnwindSafe(work)));
    // A mapped input shrank while this call read it: what was read has zeros where the
    // file vanished, so the result must not be trusted (the guard kept the process alive).
    if tensorfmt::io::guarded_faults() != faults {
        if let Ok(Ok(_)) = outcome {
            let path = tensorfmt::io::last_faulted_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "an input file".into());
            return Err(to_py(py, &Error::InputChanged { path }));
        }
    }
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(to_py(py, &e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(raise(
                py,
                "TensorfmtError",
                &format!("internal error (please report it): {what}"),
                None,
                None,
            ))
        }
    }
}

/// Like [`run`], for long calls (save, convert, diff, stats, validate): on the main
/// thread the work runs on a helper thread while this one checks Python's signals every
/// 50 ms. When a handler raises (Ctrl-C's `KeyboardInterrupt`, or what a SIGTERM handler
/// raises), every [`AtomicFile`](tensorfmt::io::AtomicFile) write and every streamed read
/// is stopped (`tensorfmt::io::stop_writes`, checked between pieces), so the work fails at
/// its next piece, its temporary file is removed and nothing is published; then that
/// exception is raised. Off the main thread (where Python runs no signal handlers)
/// this is [`run`].
pub fn run_interruptible<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T, Error> + Send,
{
    // SAFETY: plain system calls without arguments.
    let main_thread = unsafe { libc::gettid() == libc::getpid() };
    if !main_thread {
        return run(py, work);
    }
    let faults = tensorfmt::io::guarded_faults();
    let mut interrupted: Option<PyErr> = None;
    let outcome = py.detach(|| {
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            s.spawn(move || {
                let _ = tx.send(catch_unwind(AssertUnwindSafe(work)));
            });
            loop {
                match rx.recv_timeout(std::time::Duration::from_millis(50)) {
                    Ok(r) => return r,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if interrupted.is_none() {
                            if let Err(e) = Python::attach(|py| py.check_signals()) {
                                tensorfmt::io::stop_writes(true);
                                interrupted = Some(e);
                            }
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        return Ok(Err(Error::Invalid("the worker thread vanished".into())))
                    }
                }
            }
        })
    });
    if let Some(e) = interrupted {
        tensorfmt::io::stop_writes(false);
        return Err(e);
    }
    if tensorfmt::io::guarded_faults() != faults {
        if let Ok(Ok(_)) = outcome {
            let path = tensorfmt::io::last_faulted_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "an input file".into());
            return Err(to_py(py, &Error::InputChanged { path }));
        }
    }
    run(py, move || match outcome {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// A `TensorfmtError` subclass named `class` from `tensorfmt._errors`, with `.offset`
/// and `.field` set when known, its message naming the CLI's flags as the Python
/// keywords (`_errors.python_words`).
pub fn raise(
    py: Python<'_>,
    class: &str,
    message: &str,
    offset: Option<u64>,
    field: Option<String>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = py.import("tensorfmt._errors")?;
        let cls = module.getattr(class)?;
        // Messages of the shared Rust code name the CLI's flags: as Python keywords.
        let message: String = module
            .getattr("python_words")?
            .call1((message,))?
            .extract()?;
        let instance = cls.call1(PyTuple::new(py, [message])?)?;
        instance.setattr("offset", offset)?;
        instance.setattr("field", field)?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|e| e)
}

/// Maps an error to the exception class a Python user expects.
pub fn to_py(py: Python<'_>, e: &Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::Io { source, .. } => io_error(py, &message, source),
        Error::LimitExceeded { .. } | Error::Overflow { .. } => {
            raise(py, "LimitError", &message, None, None)
        }
        Error::UnsupportedDType { .. } => raise(py, "UnsupportedError", &message, None, None),
        Error::NoSuchTensor(name) => {
            let err = raise(py, "TensorNotFoundError", &message, None, None);
            let _ = err.value(py).setattr("name", name);
            err
        }
        Error::Format {
            kind,
            offset,
            field,
            source,
            ..
        } => {
            // A failed system call wrapped by a format crate or the lowering (creating
            // the output in a missing folder): the class `save` raises for it.
            if let Some(io) = os_error(source.as_ref()) {
                return io_error(py, &message, io);
            }
            // Every format crate's error says what kind of problem it is, and which
            // offset and field it names (`tensorfmt::Classify`).
            let class = match kind {
                ErrorKind::Limit => "LimitError",
                ErrorKind::Io => "TensorfmtIOError",
                ErrorKind::Unsupported => "UnsupportedError",
                ErrorKind::Format => "FormatError",
            };
            raise(py, class, &message, *offset, field.clone())
        }
        Error::Invalid(_) => raise(py, "InvalidArgumentError", &message, None, None),
        Error::InputChanged { .. } => raise(py, "InputChangedError", &message, None, None),
        _ => raise(py, "FormatError", &message, None, None),
    }
}

/// The I/O exception class for `source`'s kind (`FileNotFoundError`, `FileExistsError`,
/// else `OSError`), with `errno` set.
fn io_error(py: Python<'_>, message: &str, source: &std::io::Error) -> PyErr {
    let class = match source.kind() {
        std::io::ErrorKind::NotFound => "TensorfmtFileNotFoundError",
        std::io::ErrorKind::AlreadyExists => "TensorfmtFileExistsError",
        _ => "TensorfmtIOError",
    };
    let err = raise(py, class, message, None, None);
    if let Some(code) = source.raw_os_error() {
        let _ = err.value(py).setattr("errno", code);
    }
    err
}

/// The failed system call (an [`std::io::Error`] with an OS error number) in `e`'s
/// source chain, if any: a wrapped I/O failure, not a decoding problem that happens to
/// be carried as an `io::Error` (those have no OS error number).
fn os_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut current = Some(e);
    while let Some(c) = current {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if io.raw_os_error().is_some() {
                return Some(io);
            }
        }
        if let Some(Error::Io { source, .. }) = c.downcast_ref::<Error>() {
            if source.raw_os_error().is_some() {
                return Some(source);
            }
        }
        current = c.source();
    }
    None
}
