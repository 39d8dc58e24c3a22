import numpy as np
import numpy.typing as npt

from rocketstore._native.mapped_file import MappedFile

def write_units(
    mf: MappedFile,
    phys: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int32],
    tags: npt.NDArray[np.int64],
    queue_offsets: npt.NDArray[np.int64],
    start: int,
    max_physic_offset: int,
) -> tuple[int, int, int, int]: ...
