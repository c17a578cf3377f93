"""The project's one error type: every refusal a user can cause is one of these."""


class CoppeliusError(Exception):
    """A refusal for the user: one line naming the file or key, the value, and what to do.

    The command line prints `str(error)` alone, never a traceback.
    """

    def __init__(self, message: str):
        if "\n" in message:
            message = " ".join(message.split())
        super().__init__(message)


def refuse(where: str, what: str, value, todo: str) -> CoppeliusError:
    """Build the standard one-line refusal: `where: what is VALUE; what to do`."""
    return CoppeliusError(f"{where}: {what} is {value!r}; {todo}")
