//! Caffe render tests.
