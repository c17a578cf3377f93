"""The device interface every target implements (tinygrad-style: one small class a device).

The interpreter owns the schedule; a device only holds the arena and the host buffer block,
loads the program (image + launch table with relocations applied), issues ring entries,
patches the AdamW step-size word of a step slot, and synchronizes.
"""
from typing import Protocol

import numpy as np


class Device(Protocol):
    name: str
    host: np.ndarray  # the host buffer block (uint8), pinned where the device can pin

    def describe(self) -> dict:
        """What this device is, for the card check: name, arch, memory bytes."""

    def allocate(self, arena_bytes: int, host_bytes: int) -> None:
        """The arena and the host block, before the program is loaded."""

    def load_program(self, image: bytes, launches: bytes, relocations: bytes, commands: bytes, ring: bytes,
                     step_words: bytes, plane_offsets: list[int], buffer_offsets: list[int]) -> None:
        """The image and the tables (docs/formats.md), the arena base added at every relocation."""

    def issue(self, ring_index: int) -> None:
        """Issue ring entry `ring_index`'s commands, in order."""

    def patch_step_size(self, word: np.float32, slot: int) -> None:
        """Write the step-size word at every place the step-word table names for step slot `slot`."""

    def synchronize(self) -> None:
        """Wait until every issued submission has finished (host buffers are then safe to touch)."""

    def close(self) -> None:
        """Free what the device holds; never raises (it runs after failures too)."""
