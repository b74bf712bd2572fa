//! The native half of the `tensorfmt` Python package (`tensorfmt._native`).
//!
//! This layer is thin on purpose: it opens files, reads tensors and writes them through
//! the facade, and hands numpy the bytes. Everything Pythonic (the `Mapping` document,
//! keyword defaults, torch and dask adapters) lives in `python/tensorfmt/`.
//!
//! Two rules hold for every function here:
//! - **No panic reaches Python and no decode holds the GIL**: every call goes through
//!   `errors::run`, which releases the GIL, catches panics and maps errors to the
//!   `tensorfmt.TensorfmtError` hierarchy.
//! - **Zero copy**: a tensor becomes an `array::Array` holding its `bytes::Bytes`
//!   (usually a slice of the mapped file) and exposing it through numpy's
//!   `__array_interface__`, so `numpy.asarray` views the mapping and keeps the `Array`
//!   (and with it the mapping) alive as the array's base.

use pyo3::prelude::*;

mod array;
mod caffe_onnx;
mod chunks;
mod document;
mod errors;
mod ops;
mod progress;
mod pvp;
mod pvp_write;
mod som_map;
mod spaces;
mod typed;
mod values;

/// The extension module `tensorfmt._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // A mapped file truncated by another process while numpy or we read it must raise
    // (or read zeros), never kill the interpreter with SIGBUS.
    tensorfmt::io::install_fault_guard();
    // SIGTERM / SIGHUP with their default action: remove the temporary files being
    // written, then terminate as before (Ctrl-C is Python's: see errors::run_interruptible).
    tensorfmt::io::install_termination_cleanup();
    m.add_class::<array::Array>()?;
    m.add_class::<document::File>()?;
    m.add_function(wrap_pyfunction!(document::open_file, m)?)?;
    m.add_class::<pvp::Pvp>()?;
    m.add_function(wrap_pyfunction!(pvp::open_pvp, m)?)?;
    m.add_class::<pvp_write::PvpWriter>()?;
    m.add_function(wrap_pyfunction!(pvp_write::pvp_dense_writer, m)?)?;
    m.add_function(wrap_pyfunction!(pvp_write::pvp_sparse_writer, m)?)?;
    m.add_function(wrap_pyfunction!(pvp_write::pvp_weights_writer, m)?)?;
    m.add_function(wrap_pyfunction!(pvp_write::pvp_append, m)?)?;
    m.add_function(wrap_pyfunction!(typed::caffe_contents, m)?)?;
    m.add_function(wrap_pyfunction!(typed::caffe_message_fields, m)?)?;
    m.add_function(wrap_pyfunction!(typed::primitiv_parameters, m)?)?;
    m.add_class::<typed::Som>()?;
    m.add_function(wrap_pyfunction!(typed::open_som, m)?)?;
    for f in [
        wrap_pyfunction!(som_map::som_map, m)?,
        wrap_pyfunction!(som_map::som_map_files, m)?,
        wrap_pyfunction!(som_map::som_geometry, m)?,
        wrap_pyfunction!(som_map::som_transform, m)?,
        wrap_pyfunction!(som_map::som_align, m)?,
        wrap_pyfunction!(som_map::som_ids, m)?,
        wrap_pyfunction!(som_map::som_write_data, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add_function(wrap_pyfunction!(ops::save, m)?)?;
    m.add_function(wrap_pyfunction!(ops::diff, m)?)?;
    m.add_function(wrap_pyfunction!(ops::formats, m)?)?;
    for f in [
        wrap_pyfunction!(spaces::space_validate, m)?,
        wrap_pyfunction!(spaces::space_format_as, m)?,
        wrap_pyfunction!(spaces::space_total_dimension, m)?,
        wrap_pyfunction!(spaces::space_batch_size, m)?,
        wrap_pyfunction!(spaces::space_origin_batch, m)?,
        wrap_pyfunction!(spaces::space_str, m)?,
        wrap_pyfunction!(spaces::specs_flatten, m)?,
        wrap_pyfunction!(spaces::specs_nest, m)?,
        wrap_pyfunction!(spaces::specs_n_unique, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add_function(wrap_pyfunction!(ops::detect, m)?)?;
    m.add_function(wrap_pyfunction!(chunks::describe_remote, m)?)?;
    m.add_function(wrap_pyfunction!(chunks::detect_content, m)?)?;
    m.add_function(wrap_pyfunction!(chunks::external_data_file, m)?)?;
    m.add_function(wrap_pyfunction!(caffe_onnx::caffe_to_onnx, m)?)?;
    m.add_function(wrap_pyfunction!(caffe_onnx::caffe_state_dict, m)?)?;
    m.add_function(wrap_pyfunction!(caffe_onnx::caffe_random_weights, m)?)?;
    m.add_function(wrap_pyfunction!(caffe_onnx::caffe_supported_layers, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
