"""Type stubs of the native module `tensorfmt._native` (use the `tensorfmt` API instead)."""

from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Tuple, Union, final

_Path = Union[str, PathLike[str]]

__version__: str

# What the extension exports (pyo3 writes `__all__`; stubtest checks it against this).
__all__ = [
    "Array",
    "File",
    "open_file",
    "Pvp",
    "open_pvp",
    "PvpWriter",
    "pvp_dense_writer",
    "pvp_sparse_writer",
    "pvp_weights_writer",
    "pvp_append",
    "caffe_contents",
    "caffe_message_fields",
    "caffe_random_weights",
    "caffe_state_dict",
    "caffe_supported_layers",
    "caffe_to_onnx",
    "primitiv_parameters",
    "Som",
    "open_som",
    "som_map",
    "som_map_files",
    "som_geometry",
    "som_transform",
    "som_align",
    "som_ids",
    "som_write_data",
    "save",
    "diff",
    "formats",
    "space_validate",
    "space_format_as",
    "space_total_dimension",
    "space_batch_size",
    "space_origin_batch",
    "space_str",
    "specs_flatten",
    "specs_nest",
    "specs_n_unique",
    "detect",
    "describe_remote",
    "detect_content",
    "external_data_file",
    "__version__",
]

@final
class Array:
    """A read-only tensor buffer that numpy views without copying (`numpy.asarray(a)`)."""

    @property
    def __array_interface__(self) -> Dict[str, Any]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def nbytes(self) -> int: ...

@final
class File:
    @property
    def format(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def header(self) -> Dict[str, Any]: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def closed(self) -> bool: ...
    def tensors(self) -> List[Tuple[str, str, Tuple[int, ...]]]: ...
    def read(self, name: str) -> Array: ...
    def stats(self, name: str) -> Dict[str, Any]: ...
    def validate(self) -> None: ...
    def convert(
        self,
        path: _Path,
        names: Optional[List[str]] = None,
        to: Optional[str] = None,
        dtype: Optional[str] = None,
        hex: bool = False,
        settings: Optional[Dict[str, str]] = None,
        fsync: bool = True,
        progress: Optional[Callable[[int, int], Any]] = None,
        like: Optional[_Path] = None,
        dense: bool = False,
    ) -> Tuple[int, List[str], List[str]]: ...
    def close(self) -> None: ...

@final
class Pvp:
    @property
    def kind(self) -> str: ...
    @property
    def geometry(self) -> Tuple[int, int, int]: ...
    @property
    def warnings(self) -> List[str]: ...
    def frame_count(self) -> int: ...
    def dense_frames(self, start: int, stop: int) -> Array: ...
    def frame(self, k: int) -> Dict[str, Any]: ...
    def times(self) -> List[float]: ...
    def csr(self, start: int, stop: int) -> Tuple[Array, Array, Array, int]: ...
    def weight_geometry(self) -> Tuple[bool, int, int, int, int, int, int]: ...

def open_file(
    path: _Path,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    frames: Optional[Tuple[int, Optional[int]]] = None,
    sparse: bool = False,
    max_alloc: Optional[int] = None,
) -> File: ...
def open_pvp(path: _Path, strict: bool = False) -> Pvp: ...

@final
class PvpWriter:
    @property
    def kind(self) -> Optional[str]: ...
    @property
    def frames(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def geometry(self) -> Dict[str, Any]: ...
    def write_values(self, time: float, _owner: Any, address: int, count: int) -> None: ...
    def write_sparse(
        self, time: float, _owners: Any, indices: int, count: int, values: int, values_count: int
    ) -> None: ...
    def close(self) -> None: ...

def pvp_dense_writer(path: _Path, nx: int, ny: int, nf: int, overwrite: bool = True) -> PvpWriter: ...
def pvp_sparse_writer(
    path: _Path, nx: int, ny: int, nf: int, values: bool, datatype4: bool = False, overwrite: bool = True
) -> PvpWriter: ...
def pvp_weights_writer(
    path: _Path,
    shared: bool,
    nx: int,
    ny: int,
    nf: int,
    margin_x: int,
    margin_y: int,
    nxp: int,
    nyp: int,
    nfp: int,
    arbors: int,
    compress: bool,
    overwrite: bool = True,
) -> PvpWriter: ...
def pvp_append(path: _Path, kind: str) -> PvpWriter: ...
def caffe_contents(path: _Path, kind: Optional[str] = None, strict: bool = False) -> Dict[str, Any]: ...
def caffe_message_fields(type_name: str) -> List[Tuple[str, bool, Any, Optional[str]]]: ...
def caffe_supported_layers() -> List[str]: ...
def caffe_to_onnx(
    caffemodel: _Path,
    prototxt: _Path,
    out: _Path,
    proto: Optional[_Path] = None,
    input_shape: Optional[List[Tuple[str, List[int]]]] = None,
    outputs: Optional[List[str]] = None,
    dynamic_batch: bool = False,
    strict: bool = False,
    stop_before: Optional[List[str]] = None,
    rpn: Optional[List[Tuple[str, str]]] = None,
    external_data: bool = False,
) -> Dict[str, Any]: ...
def caffe_state_dict(
    caffemodel: _Path, prototxt: Optional[_Path] = None, proto: Optional[_Path] = None, naming: str = "torch"
) -> List[Tuple[str, Array]]: ...
def caffe_random_weights(
    prototxt: _Path,
    out: _Path,
    seed: int = 0,
    proto: Optional[_Path] = None,
    input_shape: Optional[List[Tuple[str, List[int]]]] = None,
) -> List[str]: ...

@final
class Som:
    @property
    def kind(self) -> str: ...
    @property
    def version(self) -> int: ...
    def layout(self) -> Optional[Tuple[str, List[int], bool]]: ...
    def item_dims(self) -> Optional[List[int]]: ...
    def n_entries(self) -> Optional[int]: ...
    def neuron_count(self) -> Optional[int]: ...
    def comments(self) -> List[str]: ...
    def hex_axial(self) -> Array: ...
    def neuron(self, i: int) -> Array: ...
    def best_matches(self) -> Array: ...
    def bmu_counts(self) -> Array: ...
    def rotflip(self, e: int, n: int, numrot: int) -> Tuple[bool, float, int]: ...

def open_som(path: _Path, kind: Optional[str] = None, strict: bool = False) -> Som: ...
def som_map(
    data_path: Optional[_Path],
    data_array: Optional[Dict[str, Any]],
    som_path: Optional[_Path],
    som_array: Optional[Dict[str, Any]],
    options: Dict[str, Any],
    progress: Optional[Callable[[int, int], Any]] = None,
) -> Tuple[Array, Array, Array, Optional[Tuple[str, List[int]]]]: ...
def som_map_files(
    data: _Path,
    som: _Path,
    map_out: _Path,
    rotflip_out: Optional[_Path],
    ids: Optional[List[str]],
    options: Dict[str, Any],
    progress: Optional[Callable[[int, int], Any]] = None,
    data_ids: bool = True,
) -> Tuple[int, int, int]: ...
def som_geometry(
    image_dims: List[int],
    neuron_dims: List[int],
    options: Dict[str, Any],
) -> Tuple[int, int, int, int, int]: ...
def som_transform(
    image: bytes, channels: int, image_dim: int, neuron_dim: int, num_rot: int, flip: bool, t: int, interpolation: str
) -> bytes: ...
def som_align(
    neuron: bytes, channels: int, neuron_dim: int, image_dim: int, num_rot: int, flip: bool, t: int
) -> bytes: ...
def som_ids(path: _Path) -> Optional[List[str]]: ...
def som_write_data(
    path: _Path, data: Dict[str, Any], ids: Optional[List[str]] = None, comments: Optional[List[str]] = None
) -> int: ...
def primitiv_parameters(
    path: _Path, strict: bool = False
) -> Optional[List[Tuple[str, str, str, List[Tuple[str, str, str]]]]]: ...
def save(
    path: _Path,
    items: List[Dict[str, Any]],
    to: Optional[str] = None,
    dtype: Optional[str] = None,
    hex: bool = False,
    settings: Optional[Dict[str, str]] = None,
    fsync: bool = True,
    progress: Optional[Callable[[int, int], Any]] = None,
    like: Optional[_Path] = None,
) -> Tuple[int, List[str], List[str]]: ...
def diff(
    a: File,
    b: File,
    rtol: float = 0.0,
    atol: float = 0.0,
    max_diffs: int = 10,
    allow_dtype: bool = False,
    tensors_only: bool = False,
) -> Dict[str, Any]: ...
def formats() -> List[Tuple[str, List[str], List[str], bool, List[Tuple[str, List[str]]]]]: ...
def detect(path: _Path) -> str: ...
def detect_content(head: bytes, size: int) -> Optional[str]: ...
def external_data_file(model_dir: str, location: str) -> str: ...
def describe_remote(
    read_range: Callable[[int, int], bytes],
    size: int,
    name: Optional[str] = None,
    format: Optional[str] = None,
    kind: Optional[str] = None,
    strict: bool = False,
    read_ranges: Optional[Callable[[List[int], List[int]], List[bytes]]] = None,
    block: Optional[int] = None,
    max_fetch: Optional[int] = None,
    chunk_bytes: int = ...,
    fortran_columns: bool = False,
) -> Dict[str, Any]: ...

# tensorfmt_core::space (tensorfmt.spaces cross-checks its numpy implementation with
# these): a space is a nested tuple ("vector", dim, dtype) / ("conv2d", rows, cols,
# channels, axes, dtype) / ("index", max_labels, dim, dtype) / ("composite", specs) /
# ("null",); a batch is None, a list of batches or {"data": bytes, "dtype": descr, "shape": list}.
def space_validate(spec: Tuple[Any, ...], batch: Any) -> None: ...
def space_format_as(spec: Tuple[Any, ...], batch: Any, target: Tuple[Any, ...]) -> Any: ...
def space_total_dimension(spec: Tuple[Any, ...]) -> int: ...
def space_batch_size(spec: Tuple[Any, ...], batch: Any) -> int: ...
def space_origin_batch(spec: Tuple[Any, ...], n: int) -> Any: ...
def space_str(spec: Tuple[Any, ...]) -> str: ...
def specs_flatten(space: Tuple[Any, ...], source: Any, nested: Any) -> List[Any]: ...
def specs_nest(space: Tuple[Any, ...], source: Any, flat: List[Any]) -> Any: ...
def specs_n_unique(space: Tuple[Any, ...], source: Any) -> int: ...
