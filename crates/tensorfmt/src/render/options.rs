//! [`RenderOptions`]: what to render from a file (the CLI's `render` flags).

/// What to render from a file.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// For mapping files: a heat map of best-match counts per neuron.
    pub counts: bool,
    /// For frame files: which frame.
    pub frame: Option<usize>,
    /// For models: which layer.
    pub layer: Option<String>,
}
