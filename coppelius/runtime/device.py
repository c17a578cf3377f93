"""The device interface every target implements (tinygrad-style: one small class a device).

The interpreter owns the schedule; a device only holds the arena and the host buffer block,
loads the program (image + launch table with relocations applied), issues ring entries,
patches the AdamW step-size word, and synchronizes.
"""
import numpy as np


class Device:
    name: str = ""

    def describe(self) -> dict:
        """What this device is, for the card check: name, arch, memory bytes."""
        raise NotImplementedError

    def allocate(self, arena_bytes: int, host_bytes: int) -> None:
        raise NotImplementedError

    host: np.ndarray  # the host buffer block (uint8), pinned where the device can pin

    def load_program(self, image: bytes, launches: bytes, relocations: bytes, commands: bytes, ring: bytes,
                     step_words: bytes, plane_offsets: list[int], buffer_offsets: list[int]) -> None:
        raise NotImplementedError

    def issue(self, ring_index: int) -> None:
        raise NotImplementedError

    def patch_step_size(self, word: np.float32) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        """Wait until every issued submission has finished (host buffers are then safe to touch)."""

    def close(self) -> None:
        """Free what the device holds; never raises (it runs after failures too)."""
