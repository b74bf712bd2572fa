//! tensorfmt support for the caffe format (work in progress).
