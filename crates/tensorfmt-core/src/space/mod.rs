//! Spaces and data specs (Pylearn2 semantics). PLACEHOLDER: filled in by the spaces work.
