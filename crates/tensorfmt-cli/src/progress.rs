//! Progress bars on a terminal, silence elsewhere, and a [`TensorFile`] adapter that
//! advances a bar by the bytes each decoded piece holds.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tensorfmt::{Chunks, FieldValue, Result, SparseRows, Stats, Tensor, TensorFile, TensorInfo};

/// Work below this many bytes gets no bar (it is over before one would help).
const MIN_BYTES: u64 = 16 << 20;

/// A bar counting bytes, drawn only when stderr is a terminal, the work is large and
/// the command is not `quiet` (`--quiet` or `--json`).
pub fn bytes_bar(total: u64, message: &str, quiet: bool) -> ProgressBar {
    if quiet || total < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message.to_string());
    bar
}

/// A bar over files of `total` bytes, advanced by each file's size when it is done;
/// it ticks on its own (elapsed time) so that one large file does not look stuck.
/// Drawn only when stderr is a terminal, the work is large and not `quiet`.
pub fn files_bar(total: u64, files: usize, message: &str, quiet: bool) -> ProgressBar {
    if quiet || total < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(&format!(
        "{{spinner}} {{msg}} [{{bar:40}}] {{bytes}}/{{total_bytes}} of {files} file(s) ({{elapsed}})"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Forwards to a file, advancing `bar` by the bytes of every tensor or piece read.
pub struct Tracked<'a> {
    /// The file read.
    pub inner: &'a dyn TensorFile,
    /// The bar advanced.
    pub bar: ProgressBar,
    /// The listing by name, built on first use, so that the per-tensor calls
    /// (`stats`, `sparse_rows`) do not each list the file (quadratic in the number of
    /// tensors).
    index: OnceLock<HashMap<String, TensorInfo>>,
}

impl<'a> Tracked<'a> {
    /// Wraps `inner`, advancing `bar`.
    pub fn new(inner: &'a dyn TensorFile, bar: ProgressBar) -> Tracked<'a> {
        Tracked {
            inner,
            bar,
            index: OnceLock::new(),
        }
    }

    /// The listed entry of `name`.
    fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.index
            .get_or_init(|| {
                let mut index = HashMap::new();
                for info in self.inner.tensors() {
                    if !index.contains_key(&info.name) {
                        index.insert(info.name.clone(), info);
                    }
                }
                index
            })
            .get(name)
    }
}

impl TensorFile for Tracked<'_> {
    fn format(&self) -> &'static str {
        self.inner.format()
    }
    fn kind(&self) -> String {
        self.inner.kind()
    }
    fn header(&self) -> Vec<(String, FieldValue)> {
        self.inner.header()
    }
    fn tensors(&self) -> Vec<TensorInfo> {
        self.inner.tensors()
    }
    fn read_tensor(&self, name: &str) -> Result<Tensor> {
        let t = self.inner.read_tensor(name)?;
        self.bar.inc(t.bytes().len() as u64);
        Ok(t)
    }
    fn read_chunks<'b>(&'b self, name: &str) -> Result<Chunks<'b>> {
        let bar = self.bar.clone();
        Ok(Box::new(self.inner.read_chunks(name)?.inspect(move |c| {
            if let Ok(t) = c {
                bar.inc(t.bytes().len() as u64);
            }
        })))
    }
    fn stats(&self, name: &str) -> Result<Stats> {
        // The inner file's own statistics (from the entries for sparse tensors, which a
        // tracked chunk stream would densify); the bar advances per tensor.
        let s = self.inner.stats(name)?;
        if let Some(info) = self.info(name) {
            let bytes = info.shape.byte_len(info.dtype.size()).unwrap_or(0);
            self.bar.inc(bytes as u64);
        }
        Ok(s)
    }
    fn sparse_rows<'b>(&'b self, name: &str) -> Option<Result<SparseRows<'b>>> {
        // Rows hold entries, not the dense bytes the bar counts: it advances by each
        // row's dense size, so a sparse diff ends with a full bar.
        let rows = self.inner.sparse_rows(name)?;
        let info = self.info(name)?;
        let dims = info.shape.dims();
        let rows_n = dims.first().copied().unwrap_or(1).max(1);
        let row_bytes = info.shape.byte_len(info.dtype.size()).unwrap_or(0) / rows_n;
        let bar = self.bar.clone();
        Some(rows.map(|rows| -> SparseRows<'b> {
            Box::new(rows.inspect(move |r| {
                if r.is_ok() {
                    bar.inc(row_bytes as u64);
                }
            }))
        }))
    }
    fn source_layout(&self, name: &str) -> Option<tensorfmt::SourceLayout> {
        self.inner.source_layout(name)
    }
    fn source_layouts(&self) -> Vec<Option<tensorfmt::SourceLayout>> {
        self.inner.source_layouts()
    }
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }
    fn validate(&self) -> Result<()> {
        self.inner.validate()
    }
}
