"""Type stub of rocketstore/_native/cq_ext.pyx: ConsumeQueue extension reads for a pull."""

from typing import Final

import numpy as np
import numpy.typing as npt

from rocketstore._native.mapped_file import MappedFile

PLAIN: Final[int]
SKIP: Final[int]
MAYBE: Final[int]
NO_BLOOM: Final[int]
MISSING: Final[int]

def resolve(phys: npt.NDArray[np.int64], tags: npt.NDArray[np.int64], files: list[MappedFile],
            file_size: int, bit_pos: npt.NDArray[np.int32] | None, bit_num: int, born_phy: int,
            out_tags: npt.NDArray[np.int64], out_state: npt.NDArray[np.uint8]) -> int:
    """Resolve units' tags codes through their ext units and give each the group's bloom
    filter verdict (PLAIN, SKIP, MAYBE, NO_BLOOM, MISSING); returns the SKIP count."""
